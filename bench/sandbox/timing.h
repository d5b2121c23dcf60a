#pragma once
// Clock and median for the sandbox benchmarks.

#include <time.h>

#include <vector>

#include "common/quantile.h"

namespace bench {

inline double now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

using akad::median;

}  // namespace bench
