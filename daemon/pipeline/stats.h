#pragma once
// Summary statistics of timing samples, shared by the scorer and the run report.

#include <optional>
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

// The least half-width of a speedup interval, as a factor: the spread between scorings of the
// same code that the rounds of one scoring need not show (two rounds that happen to agree give
// t·s/√n near 0). Separate worker processes timing one kernel spread 1.7% (CV of their
// medians, exchange_bench spread-procs, 64 MiB, H100; docs/scoring.md).
inline constexpr double kSpeedupNoiseFloor = 1.02;

// How far a speedup can be trusted (docs/scoring.md, "Noise"). Each round pairs one baseline
// and one candidate process, side by side in time; a round's speedup is the geometric mean over
// configurations of its baseline median over its candidate median. The interval is the
// reported speedup times exp(±h), h = max(t·s/√n, log kSpeedupNoiseFloor): s the standard
// deviation of the n rounds' log speedups, t Student's 97.5% quantile for n - 1 degrees of
// freedom. Fewer than two rounds, or a median that is not positive: none. `base[c][r]` and
// `cand[c][r]` are configuration c's median in round r.
struct SpeedupInterval {
  double low = 0, high = 0;
  std::vector<double> rounds;  // each round's speedup
  bool excludesOne() const { return low > 1 || high < 1; }
  nlohmann::json toJson() const;  // {"low", "high", "rounds", "within_noise"}
};
std::optional<SpeedupInterval> speedupInterval(double speedup, const std::vector<std::vector<double>>& base,
                                               const std::vector<std::vector<double>>& cand);

}  // namespace akad
