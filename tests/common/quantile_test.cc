// common/quantile.h: the one quantile rule. The cases include those where the copies it
// replaced disagreed: akactl ping's nearest-rank p99 and median (floor(q * n)), and the
// seccomp benchmark's truncated floor(q * (n - 1)) percentile.
#include "common/quantile.h"

#include <gtest/gtest.h>

namespace akad {
namespace {

TEST(Quantile, MedianOfAnOddCountIsTheMiddleSample) { EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3); }

TEST(Quantile, MedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  // Nearest rank (akactl ping's old rule) said 3 here.
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(Quantile, InterpolatesBetweenOrderStatistics) {
  const std::vector<double> sorted{10, 20, 30, 40, 50};
  EXPECT_DOUBLE_EQ(quantileOfSorted(sorted, 0.25), 20);
  EXPECT_DOUBLE_EQ(quantileOfSorted(sorted, 0.1), 14);  // truncation (the benchmark's old rule) said 10
  EXPECT_DOUBLE_EQ(quantileOfSorted(sorted, 0.9), 46);  // truncation said 40
}

TEST(Quantile, P99OfAHundredLiesBetweenTheTopTwo) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  // Nearest rank said 100 (the maximum), whatever the 99th sample was.
  EXPECT_DOUBLE_EQ(quantile(v, 0.99), 99.01);
}

TEST(Quantile, EndsAreTheMinimumAndMaximumAndQIsClamped) {
  const std::vector<double> v{3, 9, 1};
  EXPECT_DOUBLE_EQ(quantile(v, 0), 1);
  EXPECT_DOUBLE_EQ(quantile(v, 1), 9);
  EXPECT_DOUBLE_EQ(quantile(v, -0.5), 1);
  EXPECT_DOUBLE_EQ(quantile(v, 7), 9);
}

TEST(Quantile, NoSamplesGiveZeroAndOneSampleIsEveryQuantile) {
  EXPECT_DOUBLE_EQ(median({}), 0);
  EXPECT_DOUBLE_EQ(quantile({7}, 0.3), 7);
}

}  // namespace
}  // namespace akad
