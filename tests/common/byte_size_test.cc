// The one size parser (common/byte_size.h), used by akad's flags, task.yaml and akabox specs.
#include <gtest/gtest.h>

#include "common/byte_size.h"

namespace akad {
namespace {

TEST(ParseSize, ReadsBytesAndBinaryUnits) {
  EXPECT_EQ(*parseSize("0"), 0u);
  EXPECT_EQ(*parseSize("123"), 123u);
  EXPECT_EQ(*parseSize("123B"), 123u);
  EXPECT_EQ(*parseSize("4K"), 4096u);
  EXPECT_EQ(*parseSize("4k"), 4096u);
  EXPECT_EQ(*parseSize("4KiB"), 4096u);
  EXPECT_EQ(*parseSize("512M"), 512ull << 20);
  EXPECT_EQ(*parseSize("512MiB"), 512ull << 20);
  EXPECT_EQ(*parseSize("4G"), 4ull << 30);
  EXPECT_EQ(*parseSize("2T"), 2ull << 40);
  EXPECT_EQ(*parseSize("9999999999999999999"), 9999999999999999999ull);  // 19 digits, the most it reads
}

TEST(ParseSize, RefusesJunk) {
  for (const char* junk : {"", "M", "-1", "+5", " 5", "5 M", "4X", "4MM", "1.5G", "0x10", "5e3", "12Q", "4G "})
    EXPECT_FALSE(parseSize(junk).ok()) << "'" << junk << "' was accepted";
}

TEST(ParseSize, RefusesWhatDoesNotFitIn64Bits) {
  EXPECT_EQ(*parseSize("16777215T"), 16777215ull << 40);  // 2^24 - 1 TiB: the largest whole TiB
  EXPECT_FALSE(parseSize("16777216T").ok());              // 2^64 bytes
  EXPECT_EQ(*parseSize("17179869183G"), 17179869183ull << 30);
  EXPECT_FALSE(parseSize("17179869184G").ok());
  EXPECT_FALSE(parseSize("99999999999999999999").ok());   // 20 digits
  EXPECT_FALSE(parseSize("99999999999999999999T").ok());
  EXPECT_FALSE(parseSize("9999999999999999999K").ok());
  auto e = parseSize("16777216T");
  EXPECT_NE(e.error().message.find("too large"), std::string::npos) << e.error().message;
}

}  // namespace
}  // namespace akad
