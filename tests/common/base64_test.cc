#include "common/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace akad {
namespace {

// RFC 4648, section 10: every length modulo 3, so every padding case.
TEST(Base64, EncodesTheRfcVectors) {
  EXPECT_EQ(base64Encode(""), "");
  EXPECT_EQ(base64Encode("f"), "Zg==");
  EXPECT_EQ(base64Encode("fo"), "Zm8=");
  EXPECT_EQ(base64Encode("foo"), "Zm9v");
  EXPECT_EQ(base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64, DecodesTheRfcVectorsWithTheirTrailingGroup) {
  // The last group of a length that is not a multiple of 3 carries one or two bytes; a codec
  // that drops it loses the end of every such chunk.
  for (const char* plain : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    auto d = base64Decode(base64Encode(plain));
    ASSERT_TRUE(d) << plain << ": " << d.error().message;
    EXPECT_EQ(*d, plain);
  }
  auto d = base64Decode("Zm9vYg==");
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, "foob");
}

TEST(Base64, RoundTripsEveryByteValueAtEveryLengthModulo3) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t len : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{254}, size_t{255}, size_t{256}}) {
    const std::string plain = all.substr(0, len);
    const std::string enc = base64Encode(plain);
    EXPECT_EQ(enc.size(), (len + 2) / 3 * 4);
    auto d = base64Decode(enc);
    ASSERT_TRUE(d) << len;
    EXPECT_EQ(*d, plain) << len;
  }
}

TEST(Base64, RoundTripsAChunkLargerThanOneEncodingPiece) {
  // More than the 3 MiB the encoder hands OpenSSL at a time, and not a multiple of 3.
  std::string big((3u << 20) + 1000 + 2, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) ^ (i >> 7));
  auto d = base64Decode(base64Encode(big));
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, big);
}

TEST(Base64, RefusesDamagedText) {
  EXPECT_FALSE(base64Decode("Zm9"));        // a truncated group
  EXPECT_FALSE(base64Decode("Zm9vY"));      // a group of one character
  EXPECT_FALSE(base64Decode("Zm9v Zg=="));  // whitespace
  EXPECT_FALSE(base64Decode("Zm9-"));       // the URL-safe alphabet is not this one
  EXPECT_FALSE(base64Decode("Z=9v"));       // padding inside a group
  EXPECT_FALSE(base64Decode("Zg==Zm9v"));   // padding before the end
  EXPECT_FALSE(base64Decode("Z==="));       // three padding characters
}

}  // namespace
}  // namespace akad
