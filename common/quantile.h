#pragma once
// Quantiles of timing samples: the one rule behind every median and percentile that akad's
// scorer, akactl and the benchmarks print. Linear interpolation between order statistics
// (Hyndman and Fan's type 7, numpy's default): the median of an even count is the mean of the
// middle two, and p99 of 100 samples lies between the 99th and the 100th. Header-only, so the
// static benchmarks can use it without linking akacommon.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace akad {

// `sorted` in ascending order; q is clamped to [0, 1]. 0 for no samples.
inline double quantileOfSorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

inline double quantile(std::vector<double> samples, double q) {
  std::sort(samples.begin(), samples.end());
  return quantileOfSorted(samples, q);
}

inline double median(std::vector<double> samples) { return quantile(std::move(samples), 0.5); }

}  // namespace akad
