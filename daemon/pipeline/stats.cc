#include "daemon/pipeline/stats.h"

#include <algorithm>
#include <cmath>

#include "common/quantile.h"

namespace akad {

SampleStats describeSamples(std::vector<double> samples) {
  SampleStats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.n = samples.size();
  s.min = samples.front();
  s.median = quantileOfSorted(samples, 0.5);
  s.q1 = quantileOfSorted(samples, 0.25);
  s.q3 = quantileOfSorted(samples, 0.75);
  return s;
}

nlohmann::json SampleStats::toJson() const {
  return {{"median_ns", median}, {"min_ns", min}, {"iqr_ns", iqr()}, {"n", n}};
}

double geometricMean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double logSum = 0;
  for (double v : values) logSum += std::log(v);
  return std::exp(logSum / static_cast<double>(values.size()));
}

bool quietRoundsHoldTheMedian(const std::vector<double>& roundMedians, double limit) {
  if (roundMedians.empty()) return true;
  const double fastest = *std::min_element(roundMedians.begin(), roundMedians.end());
  if (fastest <= 0) return false;
  const auto disturbed = std::count_if(roundMedians.begin(), roundMedians.end(), [&](double m) { return m > limit * fastest; });
  return 2 * static_cast<std::size_t>(disturbed) < roundMedians.size();
}

}  // namespace akad
