// The baseline is bound by the latency of one add chain. Scanning four rows side by side gives
// four independent chains per loop iteration; a long row is cut into four segments scanned the
// same way, then each segment is shifted by the total of the segments before it.
#include <cstddef>

namespace {

// Scans four independent sequences of length n (starting at p[k], written to q[k]).
inline void scan4(const float* const p[4], float* const q[4], size_t n, double base[4]) {
  double a0 = base[0], a1 = base[1], a2 = base[2], a3 = base[3];
  for (size_t c = 0; c < n; ++c) {
    a0 += p[0][c]; q[0][c] = static_cast<float>(a0);
    a1 += p[1][c]; q[1][c] = static_cast<float>(a1);
    a2 += p[2][c]; q[2][c] = static_cast<float>(a2);
    a3 += p[3][c]; q[3][c] = static_cast<float>(a3);
  }
  base[0] = a0; base[1] = a1; base[2] = a2; base[3] = a3;
}

}  // namespace

extern "C" void row_scan(const float* x, float* out, size_t rows, size_t cols) {
  size_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* p[4] = {x + r * cols, x + (r + 1) * cols, x + (r + 2) * cols, x + (r + 3) * cols};
    float* q[4] = {out + r * cols, out + (r + 1) * cols, out + (r + 2) * cols, out + (r + 3) * cols};
    double base[4] = {0, 0, 0, 0};
    scan4(p, q, cols, base);
  }
  for (; r < rows; ++r) {
    const float* row = x + r * cols;
    float* o = out + r * cols;
    const size_t seg = cols / 4;
    double sum = 0;
    if (seg > 0) {
      double total[4] = {0, 0, 0, 0};  // pass 1: segment totals, four independent chains
      for (size_t c = 0; c < seg; ++c) {
        total[0] += row[c];
        total[1] += row[seg + c];
        total[2] += row[2 * seg + c];
        total[3] += row[3 * seg + c];
      }
      double base[4] = {0, total[0], total[0] + total[1], total[0] + total[1] + total[2]};
      const float* p[4] = {row, row + seg, row + 2 * seg, row + 3 * seg};
      float* q[4] = {o, o + seg, o + 2 * seg, o + 3 * seg};
      scan4(p, q, seg, base);
      sum = base[3];
    }
    for (size_t c = 4 * seg; c < cols; ++c) o[c] = static_cast<float>(sum += row[c]);
  }
}
