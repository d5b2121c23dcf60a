// Task selector resolution over a real directory tree (daemon/task_catalog.h).
#include <gtest/gtest.h>

#include "common/protocol.h"
#include "daemon/task_catalog.h"
#include "tests/daemon/harness.h"

namespace akad {
namespace {

using Ids = std::vector<std::string>;

TEST(TaskCatalog, ListsEveryFolderWithATaskYaml) {
  test::TempDir dir;
  TaskCatalog catalog(test::writeFakeTasks(dir.path()));
  auto all = catalog.list();
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(*all, (Ids{"cpu/softmax", "cpu/vecadd", "hip2hip/gemm"}));
}

TEST(TaskCatalog, ResolvesSuitesTasksAndGlobsWithoutDuplicates) {
  test::TempDir dir;
  TaskCatalog catalog(test::writeFakeTasks(dir.path()));
  EXPECT_EQ(*catalog.resolve({"cpu"}), (Ids{"cpu/softmax", "cpu/vecadd"}));
  EXPECT_EQ(*catalog.resolve({"cpu/softmax"}), (Ids{"cpu/softmax"}));
  EXPECT_EQ(*catalog.resolve({"cpu/*"}), (Ids{"cpu/softmax", "cpu/vecadd"}));
  EXPECT_EQ(*catalog.resolve({"*/gemm", "cpu/soft*", "cpu"}), (Ids{"cpu/softmax", "cpu/vecadd", "hip2hip/gemm"}));
  // "*" with FNM_PATHNAME stays within one path component: suites only, which are not tasks.
  EXPECT_FALSE(catalog.resolve({"*"}));
  EXPECT_EQ(catalog.resolve({"*/*"})->size(), 3u);
}

TEST(TaskCatalog, AnUnmatchedSelectorIsNamedInTheError) {
  test::TempDir dir;
  TaskCatalog catalog(test::writeFakeTasks(dir.path()));
  for (const char* sel : {"gpu", "cpu/nosuch", "triton*/*", "cpu/soft", "common"}) {
    auto r = catalog.resolve({"cpu", sel});
    ASSERT_FALSE(r) << sel;
    EXPECT_EQ(r.error().code, protocol::kNoTasksMatch) << sel;
    EXPECT_NE(r.error().message.find(sel), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(catalog.resolve({}).error().code, protocol::kInvalidParams);
  EXPECT_EQ(catalog.resolve({""}).error().code, protocol::kInvalidParams);
}

TEST(TaskCatalog, AMissingRootIsAClearError) {
  TaskCatalog catalog("/nonexistent/akad/tasks");
  auto r = catalog.resolve({"cpu"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/nonexistent/akad/tasks"), std::string::npos);
}

}  // namespace
}  // namespace akad
