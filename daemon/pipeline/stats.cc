#include "daemon/pipeline/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

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

namespace {

// Student's t, two-sided 95%, by degrees of freedom (1-30; the normal's beyond).
double studentT975(std::size_t df) {
  static constexpr double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                  2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                  2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  return df >= 1 && df <= 30 ? kT[df - 1] : 1.960;
}

}  // namespace

std::optional<SpeedupInterval> speedupInterval(double speedup, const std::vector<std::vector<double>>& base,
                                               const std::vector<std::vector<double>>& cand) {
  if (base.empty() || base.size() != cand.size() || !(speedup > 0)) return std::nullopt;
  std::size_t n = SIZE_MAX;
  for (std::size_t c = 0; c < base.size(); ++c) n = std::min({n, base[c].size(), cand[c].size()});
  if (n < 2) return std::nullopt;
  SpeedupInterval out;
  std::vector<double> logs;
  for (std::size_t r = 0; r < n; ++r) {
    double sum = 0;
    for (std::size_t c = 0; c < base.size(); ++c) {
      if (!(base[c][r] > 0) || !(cand[c][r] > 0)) return std::nullopt;
      sum += std::log(base[c][r] / cand[c][r]);
    }
    logs.push_back(sum / static_cast<double>(base.size()));
    out.rounds.push_back(std::exp(logs.back()));
  }
  double mean = 0, var = 0;
  for (double l : logs) mean += l / static_cast<double>(n);
  for (double l : logs) var += (l - mean) * (l - mean) / static_cast<double>(n - 1);
  const double half = std::max(studentT975(n - 1) * std::sqrt(var / static_cast<double>(n)), std::log(kSpeedupNoiseFloor));
  out.low = speedup * std::exp(-half);
  out.high = speedup * std::exp(half);
  return out;
}

nlohmann::json SpeedupInterval::toJson() const {
  return {{"low", low}, {"high", high}, {"rounds", rounds}, {"within_noise", !excludesOne()}};
}

}  // namespace akad
