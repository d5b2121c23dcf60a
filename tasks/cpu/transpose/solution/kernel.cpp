// Tiles of 32 x 32: one tile of x and one of out (4 KiB each) stay in L1 while it is moved, so
// every cache line fetched or written is used completely.
#include <cstddef>

extern "C" void transpose(const float* x, float* out, size_t rows, size_t cols) {
  constexpr size_t kTile = 32;
  for (size_t r0 = 0; r0 < rows; r0 += kTile) {
    const size_t r1 = r0 + kTile < rows ? r0 + kTile : rows;
    for (size_t c0 = 0; c0 < cols; c0 += kTile) {
      const size_t c1 = c0 + kTile < cols ? c0 + kTile : cols;
      for (size_t c = c0; c < c1; ++c)
        for (size_t r = r0; r < r1; ++r) out[c * rows + r] = x[r * cols + c];
    }
  }
}
