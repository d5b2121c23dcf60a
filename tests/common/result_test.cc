#include "common/result.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <system_error>

namespace akad {
namespace {

TEST(Error, ErrnoErrorKeepsTheErrnoOfTheFailedCall) {
  ASSERT_LT(::open("/nonexistent-akad-result-test/x", O_RDONLY | O_CLOEXEC), 0);
  const Error e = errnoError("open /nonexistent-akad-result-test/x");
  EXPECT_EQ(e.sysErrno, ENOENT);
  EXPECT_EQ(e.code, 0);
  EXPECT_NE(e.message.find("open /nonexistent-akad-result-test/x: "), std::string::npos) << e.message;
  EXPECT_EQ(errnoError("chmod", EPERM).sysErrno, EPERM);
}

TEST(Error, ErrorCodeErrorKeepsTheErrnoOfAFilesystemFailure) {
  std::error_code ec;
  std::filesystem::create_directories("/proc/akad-result-test/x", ec);
  ASSERT_TRUE(ec);
  const Error e = errorCodeError("create", ec);
  EXPECT_EQ(e.sysErrno, ec.value());
  EXPECT_NE(e.sysErrno, 0);
  EXPECT_EQ(e.message, "create: " + ec.message());
}

TEST(Error, AnErrorThatIsNoSystemCallsHasNoErrno) {
  const Error plain{"a task file names no harness"};
  EXPECT_EQ(plain.sysErrno, 0);
  const Error fromOtherCategory = errorCodeError("x", std::make_error_code(std::future_errc::no_state));
  EXPECT_EQ(fromOtherCategory.sysErrno, 0);
}

}  // namespace
}  // namespace akad
