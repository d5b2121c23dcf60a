// The counter-based fills (tasks/common/cpp/akafill.h) that the hip driver runs on the GPU and
// tasks run on the host: the integer narrowing must equal the harness's own conversions for
// every value, and a task's recorded fills must describe its inputs completely. The GPU's side
// is checked on the device by the driver itself (DeviceFills::confirm compares its bytes with
// the host's before it is used).
#include "akaharness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace {

float fromBits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

TEST(AkaFill, HalfNarrowingEqualsTheHarnessConversionOverTheFloatRange) {
  // Every 61st bit pattern (70 million values, all exponents, both signs, NaNs and infinities)
  // plus the boundaries where rounding changes exponent or goes subnormal.
  size_t checked = 0;
  for (uint64_t x = 0; x <= 0xffffffffull; x += 61, ++checked) {
    const float f = fromBits(static_cast<uint32_t>(x));
    ASSERT_EQ(akafill::toHalf(f), akt::floatToHalf(f)) << std::hexfloat << f << " (bits " << std::hex << x << ")";
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 0x1.0p-14f, 0x1.ffcp-15f, 0x1.0p-24f, 0x1.0p-25f, 0x1.0001p-25f,
                  0x1.8p-24f, 0x1.ffep-1f, 2047.5f, 2048.5f, -0.0f})
    EXPECT_EQ(akafill::toHalf(f), akt::floatToHalf(f)) << std::hexfloat << f;
  EXPECT_GT(checked, 70000000u);
}

TEST(AkaFill, Bf16NarrowingEqualsTheHarnessConversionOverTheFloatRange) {
  for (uint64_t x = 0; x <= 0xffffffffull; x += 61) {
    const float f = fromBits(static_cast<uint32_t>(x));
    ASSERT_EQ(akafill::toBf16(f), akt::floatToBf16(f)) << std::hexfloat << f;
  }
}

TEST(AkaFill, ValuesStayInTheirRangeAndSpreadOverIt) {
  Tensor t("x", DType::F32, {1u << 20});
  fillUniform(t, 42, 0, -6.0f, 6.0f);
  const float* p = t.data<float>();
  double sum = 0;
  float lo = 1e9f, hi = -1e9f;
  for (uint64_t i = 0; i < t.elements(); ++i) {
    ASSERT_GE(p[i], -6.0f);
    ASSERT_LT(p[i], 6.0f);
    sum += p[i];
    lo = std::min(lo, p[i]);
    hi = std::max(hi, p[i]);
  }
  EXPECT_NEAR(sum / t.elements(), 0.0, 0.02);  // the mean of U(-6, 6): 0, standard error 0.0034
  EXPECT_LT(lo, -5.99f);
  EXPECT_GT(hi, 5.99f);
}

TEST(AkaFill, SameSeedSameBytesAndEachSeedAndStreamItsOwn) {
  auto fill = [](uint64_t seed, uint32_t stream) {
    Tensor t("x", DType::F16, {4096});
    fillUniform(t, seed, stream, -1.0f, 1.0f);
    return std::vector<unsigned char>(t.bytes.data(), t.bytes.data() + t.bytes.size());
  };
  EXPECT_EQ(fill(7, 0), fill(7, 0));
  EXPECT_NE(fill(7, 0), fill(8, 0));
  EXPECT_NE(fill(7, 0), fill(7, 1));
  // Element i is a function of (seed, stream, i) alone: a longer tensor starts with the same values.
  Tensor longer("x", DType::F16, {8192});
  fillUniform(longer, 7, 0, -1.0f, 1.0f);
  const std::vector<unsigned char> head(longer.bytes.data(), longer.bytes.data() + 8192);
  EXPECT_EQ(head, fill(7, 0));
}

TEST(AkaFill, IntegerTensorsAreRefused) {
  Tensor t("i", DType::I32, {4});
  EXPECT_THROW(fillUniform(t, 1, 0, 0.0f, 1.0f), akt::Error);
}

TEST(AkaFill, RecordedFillsDescribeTheSetOnlyWhenTheyCoverEveryTensorOnce) {
  std::vector<FillRecord> log;
  fillLog = &log;
  TensorSet set;
  fillUniform(set.add(Tensor("x", DType::BF16, {64, 32})), 9, 0, -3.0f, 3.0f);
  fillUniform(set.add(Tensor("w", DType::F32, {32})), 9, 1, 0.5f, 1.5f);
  fillLog = nullptr;
  const std::vector<FillRecord> fills = fillsCovering(set, log);
  ASSERT_EQ(fills.size(), 2u);
  EXPECT_EQ(fills[0].tensor, "x");
  EXPECT_EQ(fills[1].stream, 1u);

  // Replaying the recorded fills with the element function the GPU kernel runs gives the set.
  for (size_t k = 0; k < fills.size(); ++k) {
    const Tensor& t = set.tensors[k];
    std::vector<unsigned char> replay(t.bytes.size());
    const uint64_t key = akafill::keyOf(9, fills[k].stream);
    for (uint64_t i = 0; i < t.elements(); ++i)
      akafill::store(replay.data(), fills[k].kind, i, akafill::uniformAt(key, i, fills[k].lo, fills[k].hi));
    EXPECT_EQ(0, std::memcmp(replay.data(), t.bytes.data(), replay.size())) << t.name;
  }

  TensorSet extra;
  extra.add(Tensor("x", DType::BF16, {64, 32}));
  extra.add(Tensor("w", DType::F32, {32}));
  Rng rng(3);
  extra.add(Tensor("z", DType::F32, {4})).data<float>()[0] = rng.uniform(0.0f, 1.0f);
  EXPECT_TRUE(fillsCovering(extra, log).empty()) << "a tensor made without a fill";
  std::vector<FillRecord> twice = log;
  twice.push_back(log[0]);
  EXPECT_TRUE(fillsCovering(set, twice).empty()) << "a tensor filled twice";
  EXPECT_TRUE(fillsCovering(set, {}).empty());
}

}  // namespace
