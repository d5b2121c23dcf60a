// Baseline: one counter array; consecutive keys hitting the same hot bin serialise on it.
#include <cstddef>
#include <cstdint>

extern "C" void histogram(const int32_t* keys, size_t n, int32_t* counts, size_t bins) {
  for (size_t b = 0; b < bins; ++b) counts[b] = 0;
  for (size_t i = 0; i < n; ++i) counts[keys[i]]++;
}
