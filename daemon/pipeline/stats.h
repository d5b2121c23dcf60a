#pragma once
// Summary statistics of timing samples, shared by the scorer and the run report.

#include <vector>

#include <nlohmann/json.hpp>

namespace akad {

struct SampleStats {
  double median = 0;
  double min = 0;
  double q1 = 0;
  double q3 = 0;
  std::size_t n = 0;
  double iqr() const { return q3 - q1; }
  nlohmann::json toJson() const;  // nanoseconds: median_ns, min_ns, iqr_ns, n
};

// Quartiles by common/quantile.h's rule.
SampleStats describeSamples(std::vector<double> samples);
// 0 for an empty list; values must be positive.
double geometricMean(const std::vector<double>& values);
// Whether the quiet rounds of one side hold its pooled median: the rounds whose median is more
// than `limit` times the fastest round's (disturbed: a burst of other work slows a window, it
// never speeds one up) are fewer than half. A median of zero never does.
bool quietRoundsHoldTheMedian(const std::vector<double>& roundMedians, double limit);

}  // namespace akad
