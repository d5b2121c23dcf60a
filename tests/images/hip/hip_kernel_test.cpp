// HIP kernel language on the cuda-hip image: warp shuffles with and without masks, votes,
// atomics, __half, bfloat16 (both HIP types), math functions and cooperative groups. Each kernel
// computes something the host recomputes independently. Built by the image's hipcc.

#include "hip_check.h"

#include <hip/hip_bf16.h>
#include <hip/hip_bfloat16.h>
#include <hip/hip_cooperative_groups.h>
#include <hip/hip_fp16.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace cg = cooperative_groups;

// Per lane: [0] maskless warp sum (shfl_down), [1] masked warp sum (shfl_down_sync),
// [2] butterfly sum (shfl_xor), [3] masked butterfly, [4] inclusive scan (shfl_up),
// [5] broadcast of lane 5 within 16-wide groups (shfl), [6] same with _sync, [7] double sum.
__global__ void shuffles(const int* in, int* out, double* dout) {
  int lane = threadIdx.x % warpSize;
  int v = in[blockIdx.x * blockDim.x + threadIdx.x];
  int* o = out + (blockIdx.x * blockDim.x + threadIdx.x) * 7;

  int s = v;
  for (int d = warpSize / 2; d > 0; d /= 2) s += __shfl_down(s, d);
  o[0] = __shfl(s, 0);
  int m = v;
  for (int d = warpSize / 2; d > 0; d /= 2) m += __shfl_down_sync(0xffffffffu, m, d);
  o[1] = __shfl_sync(0xffffffffu, m, 0);
  int x = v;
  for (int d = 1; d < warpSize; d *= 2) x += __shfl_xor(x, d);
  o[2] = x;
  int xm = v;
  for (int d = 1; d < warpSize; d *= 2) xm += __shfl_xor_sync(0xffffffffu, xm, d, warpSize);
  o[3] = xm;
  int scan = v;
  for (int d = 1; d < warpSize; d *= 2) {
    int up = __shfl_up(scan, d);
    if (lane >= d) scan += up;
  }
  o[4] = scan;
  o[5] = __shfl(v, 5, 16);
  o[6] = __shfl_sync(0xffffffffu, v, 5, 16);
  double dv = v * 0.5;
  for (int d = warpSize / 2; d > 0; d /= 2) dv += __shfl_down(dv, d);
  if (lane == 0) dout[(blockIdx.x * blockDim.x + threadIdx.x) / warpSize] = dv;
}

// Per lane: ballot of (in % 3 == 0) low/high words, any(in > threshold), all(in >= 0), lane id.
__global__ void votes(const int* in, unsigned long long* ballots, int* anyAll, unsigned* laneIds) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  unsigned long long b = __ballot(v % 3 == 0);
  unsigned bs = __ballot_sync(0xffffffffu, v % 3 == 0);
  if (threadIdx.x % warpSize == 0) ballots[i / warpSize] = b;
  anyAll[i * 4 + 0] = __any(v > 1000) ? 1 : 0;
  anyAll[i * 4 + 1] = __all(v >= 0) ? 1 : 0;
  anyAll[i * 4 + 2] = __all(v % 2 == 0) ? 1 : 0;
  anyAll[i * 4 + 3] = (unsigned long long)bs == b ? 1 : 0;
  laneIds[i] = __lane_id();
}

struct AtomicTargets {
  int counter;
  unsigned int bits;
  int maxValue;
  int minValue;
  float floatSum;
  float floatMax;
  float floatMin;
  double doubleSum;
  unsigned long long ullSum;
  int casWinners;
  int exchanged;
  unsigned int wrapped;
};

__global__ void atomics(AtomicTargets* t, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicAdd(&t->counter, 1);
  atomicOr(&t->bits, 1u << (i % 32));
  atomicMax(&t->maxValue, ((i % 100003) * 7919) % 100003);
  atomicMin(&t->minValue, 50000 - ((i % 100003) * 7919) % 100003);
  atomicAdd(&t->floatSum, 1.0f);
  atomicMax(&t->floatMax, 0.25f * float(i % 4001) - 300.f);
  atomicMin(&t->floatMin, 0.25f * float(i % 4001) - 300.f);
  unsafeAtomicAdd(&t->doubleSum, 0.5);
  atomicAdd(&t->ullSum, static_cast<unsigned long long>(i));
  if (atomicCAS(&t->casWinners, 0, i + 1) == 0) atomicExch(&t->exchanged, i + 1);
  atomicInc(&t->wrapped, 99u);
}

// Half and bfloat16 arithmetic on the device; the host checks against float math.
__global__ void lowPrecision(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half ha = __float2half(a[i]), hb = __float2half(b[i]);
  float* o = out + i * 10;
  o[0] = __half2float(__hadd(ha, hb));
  o[1] = __half2float(__hmul(ha, hb));
  o[2] = __half2float(__hfma(ha, hb, __float2half(1.0f)));
  __half2 h2 = __halves2half2(ha, hb);
  __half2 sq = __hmul2(h2, h2);
  o[3] = __low2float(sq) + __high2float(sq);
  o[4] = __half2float(hsqrt(__habs(ha)));

  __hip_bfloat16 ba = __float2bfloat16(a[i]), bb = __float2bfloat16(b[i]);
  o[5] = __bfloat162float(__hadd(ba, bb));
  o[6] = __bfloat162float(__hmul(ba, bb));
  o[7] = __bfloat162float(__hfma(ba, bb, __float2bfloat16(1.0f)));
  hip_bfloat16 ca(a[i]), cb(b[i]);
  o[8] = float(ca * cb + ca);
  o[9] = float(-(ca - cb));
}

// Math library, float and double.
__global__ void mathFunctions(const float* x, float* out, double* dout, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float* o = out + i * 10;
  o[0] = sinf(v);
  o[1] = cosf(v);
  o[2] = expf(v);
  o[3] = logf(v);
  o[4] = sqrtf(v);
  o[5] = rsqrtf(v);
  o[6] = powf(v, 1.5f);
  o[7] = fmaf(v, v, 1.0f);
  o[8] = tanhf(v);
  o[9] = __expf(v);
  double dv = v;
  dout[i * 3 + 0] = sin(dv);
  dout[i * 3 + 1] = exp(dv);
  dout[i * 3 + 2] = erf(dv);
}

// Cooperative groups: tile sums with tiled_partition and the tile's own shuffle.
__global__ void tileSums(const int* in, int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
  int v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int d = tile.size() / 2; d > 0; d /= 2) v += tile.shfl_down(v, d);
  block.sync();
  if (tile.thread_rank() == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 16] = v;
}

static void testShuffles() {
  const int blocks = 4, threads = 128, n = blocks * threads, warps = n / 32;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 37) % 101;
  int* dIn;
  int* dOut;
  double* dD;
  CHECK_HIP(hipMalloc(&dIn, n * sizeof(int)));
  CHECK_HIP(hipMalloc(&dOut, n * 7 * sizeof(int)));
  CHECK_HIP(hipMalloc(&dD, warps * sizeof(double)));
  CHECK_HIP(hipMemcpy(dIn, in.data(), n * sizeof(int), hipMemcpyHostToDevice));
  hipLaunchKernelGGL(shuffles, dim3(blocks), dim3(threads), 0, 0, dIn, dOut, dD);
  CHECK_HIP(hipGetLastError());
  std::vector<int> out(n * 7);
  std::vector<double> d(warps);
  CHECK_HIP(hipMemcpy(out.data(), dOut, out.size() * sizeof(int), hipMemcpyDeviceToHost));
  CHECK_HIP(hipMemcpy(d.data(), dD, d.size() * sizeof(double), hipMemcpyDeviceToHost));
  int bad[8] = {};
  for (int w = 0; w < warps; ++w) {
    int sum = 0;
    for (int l = 0; l < 32; ++l) sum += in[w * 32 + l];
    if (d[w] != sum * 0.5) ++bad[7];
    int prefix = 0;
    for (int l = 0; l < 32; ++l) {
      int i = w * 32 + l;
      prefix += in[i];
      const int* o = &out[i * 7];
      if (o[0] != sum) ++bad[0];
      if (o[1] != sum) ++bad[1];
      if (o[2] != sum) ++bad[2];
      if (o[3] != sum) ++bad[3];
      if (o[4] != prefix) ++bad[4];
      int src = w * 32 + (l / 16) * 16 + 5;
      if (o[5] != in[src]) ++bad[5];
      if (o[6] != in[src]) ++bad[6];
    }
  }
  CHECK(bad[0] == 0);  // __shfl_down (maskless)
  CHECK(bad[1] == 0);  // __shfl_down_sync
  CHECK(bad[2] == 0);  // __shfl_xor (maskless)
  CHECK(bad[3] == 0);  // __shfl_xor_sync
  CHECK(bad[4] == 0);  // __shfl_up scan
  CHECK(bad[5] == 0);  // __shfl with width 16
  CHECK(bad[6] == 0);  // __shfl_sync with width 16
  CHECK(bad[7] == 0);  // double __shfl_down
  CHECK_HIP(hipFree(dIn));
  CHECK_HIP(hipFree(dOut));
  CHECK_HIP(hipFree(dD));
}

static void testVotes() {
  const int n = 256, warps = n / 32;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 13) % 47 + (i == 70 ? 5000 : 0);
  int* dIn;
  unsigned long long* dBallots;
  int* dAnyAll;
  unsigned* dLanes;
  CHECK_HIP(hipMalloc(&dIn, n * sizeof(int)));
  CHECK_HIP(hipMalloc(&dBallots, warps * sizeof(unsigned long long)));
  CHECK_HIP(hipMalloc(&dAnyAll, n * 4 * sizeof(int)));
  CHECK_HIP(hipMalloc(&dLanes, n * sizeof(unsigned)));
  CHECK_HIP(hipMemcpy(dIn, in.data(), n * sizeof(int), hipMemcpyHostToDevice));
  votes<<<2, 128>>>(dIn, dBallots, dAnyAll, dLanes);
  CHECK_HIP(hipGetLastError());
  std::vector<unsigned long long> ballots(warps);
  std::vector<int> anyAll(n * 4);
  std::vector<unsigned> lanes(n);
  CHECK_HIP(hipMemcpy(ballots.data(), dBallots, warps * sizeof(unsigned long long), hipMemcpyDeviceToHost));
  CHECK_HIP(hipMemcpy(anyAll.data(), dAnyAll, n * 4 * sizeof(int), hipMemcpyDeviceToHost));
  CHECK_HIP(hipMemcpy(lanes.data(), dLanes, n * sizeof(unsigned), hipMemcpyDeviceToHost));
  int badBallot = 0, badAny = 0, badAll = 0, badLane = 0;
  for (int w = 0; w < warps; ++w) {
    unsigned long long want = 0;
    bool anyBig = false, allEven = true;
    for (int l = 0; l < 32; ++l) {
      int v = in[w * 32 + l];
      if (v % 3 == 0) want |= 1ull << l;
      anyBig = anyBig || v > 1000;
      allEven = allEven && v % 2 == 0;
    }
    if (ballots[w] != want) ++badBallot;
    for (int l = 0; l < 32; ++l) {
      int i = w * 32 + l;
      if (anyAll[i * 4 + 0] != (anyBig ? 1 : 0)) ++badAny;
      if (anyAll[i * 4 + 1] != 1 || anyAll[i * 4 + 2] != (allEven ? 1 : 0)) ++badAll;
      if (anyAll[i * 4 + 3] != 1) ++badBallot;
      if (lanes[i] != unsigned(l)) ++badLane;
    }
  }
  CHECK(badBallot == 0);
  CHECK(badAny == 0);
  CHECK(badAll == 0);
  CHECK(badLane == 0);
  CHECK(anyAll[70 * 4] == 1 && anyAll[0] == 0);  // only warp 2 holds a value over 1000
  CHECK_HIP(hipFree(dIn));
  CHECK_HIP(hipFree(dBallots));
  CHECK_HIP(hipFree(dAnyAll));
  CHECK_HIP(hipFree(dLanes));
}

static void testAtomics() {
  const int n = 1 << 20;
  AtomicTargets init{};
  init.maxValue = -1;
  init.minValue = 1 << 30;
  init.floatMax = -1e30f;
  init.floatMin = 1e30f;
  AtomicTargets* dT;
  CHECK_HIP(hipMalloc(&dT, sizeof(AtomicTargets)));
  CHECK_HIP(hipMemcpy(dT, &init, sizeof init, hipMemcpyHostToDevice));
  hipLaunchKernelGGL(atomics, dim3(n / 256), dim3(256), 0, 0, dT, n);
  CHECK_HIP(hipGetLastError());
  AtomicTargets t;
  CHECK_HIP(hipMemcpy(&t, dT, sizeof t, hipMemcpyDeviceToHost));
  int wantMax = -1, wantMin = 1 << 30;
  float wantFMax = -1e30f, wantFMin = 1e30f;
  for (int i = 0; i < n; ++i) {
    int m = ((i % 100003) * 7919) % 100003;
    wantMax = std::max(wantMax, m);
    wantMin = std::min(wantMin, 50000 - m);
    float f = 0.25f * float(i % 4001) - 300.f;
    wantFMax = std::max(wantFMax, f);
    wantFMin = std::min(wantFMin, f);
  }
  CHECK(t.counter == n);
  CHECK(t.bits == 0xffffffffu);
  CHECK(t.maxValue == wantMax);
  CHECK(t.minValue == wantMin);
  CHECK(t.floatSum == float(n));  // 2^20 ones: exact in float
  CHECK(t.floatMax == wantFMax);
  CHECK(t.floatMin == wantFMin);
  CHECK(t.doubleSum == 0.5 * n);
  CHECK(t.ullSum == static_cast<unsigned long long>(n) * (n - 1) / 2);
  CHECK(t.casWinners >= 1 && t.casWinners <= n);
  CHECK(t.exchanged == t.casWinners);
  CHECK(t.wrapped == unsigned(n % 100));
  CHECK_HIP(hipFree(dT));
}

static void testLowPrecision() {
  const int n = 512;
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = -4.f + 8.f * i / n;
    b[i] = 0.75f + 0.01f * (i % 37);
  }
  float *dA, *dB, *dOut;
  CHECK_HIP(hipMalloc(&dA, n * sizeof(float)));
  CHECK_HIP(hipMalloc(&dB, n * sizeof(float)));
  CHECK_HIP(hipMalloc(&dOut, n * 10 * sizeof(float)));
  CHECK_HIP(hipMemcpy(dA, a.data(), n * sizeof(float), hipMemcpyHostToDevice));
  CHECK_HIP(hipMemcpy(dB, b.data(), n * sizeof(float), hipMemcpyHostToDevice));
  hipLaunchKernelGGL(lowPrecision, dim3(n / 128), dim3(128), 0, 0, dA, dB, dOut, n);
  CHECK_HIP(hipGetLastError());
  std::vector<float> out(n * 10);
  CHECK_HIP(hipMemcpy(out.data(), dOut, out.size() * sizeof(float), hipMemcpyDeviceToHost));
  int bad[10] = {};
  const double halfTol = 4e-3, bfTol = 2.5e-2;
  for (int i = 0; i < n; ++i) {
    const float* o = &out[i * 10];
    double x = a[i], y = b[i];
    if (!hipcheck::near(o[0], x + y, halfTol, 4e-3)) ++bad[0];
    if (!hipcheck::near(o[1], x * y, halfTol, 4e-3)) ++bad[1];
    if (!hipcheck::near(o[2], x * y + 1, halfTol, 4e-3)) ++bad[2];
    if (!hipcheck::near(o[3], x * x + y * y, halfTol, 4e-3)) ++bad[3];
    if (!hipcheck::near(o[4], std::sqrt(std::fabs(x)), halfTol, 4e-3)) ++bad[4];
    if (!hipcheck::near(o[5], x + y, bfTol, 3e-2)) ++bad[5];
    if (!hipcheck::near(o[6], x * y, bfTol, 3e-2)) ++bad[6];
    if (!hipcheck::near(o[7], x * y + 1, bfTol, 3e-2)) ++bad[7];
    if (!hipcheck::near(o[8], x * y + x, bfTol, 3e-2)) ++bad[8];
    // The class rounds on the host exactly as on the device.
    hip_bfloat16 hx(a[i]), hy(b[i]);
    if (o[9] != float(-(hx - hy))) ++bad[9];
  }
  for (int k = 0; k < 10; ++k) {
    if (bad[k] != 0) std::printf("  low precision result %d: %d mismatches\n", k, bad[k]);
    CHECK(bad[k] == 0);
  }
  CHECK_HIP(hipFree(dA));
  CHECK_HIP(hipFree(dB));
  CHECK_HIP(hipFree(dOut));
}

static void testMath() {
  const int n = 256;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = 0.05f + 4.f * i / n;
  float *dX, *dOut;
  double* dD;
  CHECK_HIP(hipMalloc(&dX, n * sizeof(float)));
  CHECK_HIP(hipMalloc(&dOut, n * 10 * sizeof(float)));
  CHECK_HIP(hipMalloc(&dD, n * 3 * sizeof(double)));
  CHECK_HIP(hipMemcpy(dX, x.data(), n * sizeof(float), hipMemcpyHostToDevice));
  mathFunctions<<<n / 64, 64>>>(dX, dOut, dD, n);
  CHECK_HIP(hipGetLastError());
  std::vector<float> out(n * 10);
  std::vector<double> d(n * 3);
  CHECK_HIP(hipMemcpy(out.data(), dOut, out.size() * sizeof(float), hipMemcpyDeviceToHost));
  CHECK_HIP(hipMemcpy(d.data(), dD, d.size() * sizeof(double), hipMemcpyDeviceToHost));
  int bad[13] = {};
  for (int i = 0; i < n; ++i) {
    double v = x[i];
    const float* o = &out[i * 10];
    const double want[10] = {std::sin(v), std::cos(v), std::exp(v), std::log(v), std::sqrt(v),
                             1 / std::sqrt(v), std::pow(v, 1.5), v * v + 1, std::tanh(v), std::exp(v)};
    for (int k = 0; k < 9; ++k)
      if (!hipcheck::near(o[k], want[k], 2e-6, 2e-6)) ++bad[k];
    if (!hipcheck::near(o[9], want[9], 1e-4)) ++bad[9];  // __expf: fast, approximate
    if (!hipcheck::near(d[i * 3 + 0], std::sin(v), 1e-14, 1e-15)) ++bad[10];
    if (!hipcheck::near(d[i * 3 + 1], std::exp(v), 1e-14)) ++bad[11];
    if (!hipcheck::near(d[i * 3 + 2], std::erf(v), 1e-14, 1e-15)) ++bad[12];
  }
  for (int k = 0; k < 13; ++k) {
    if (bad[k] != 0) std::printf("  math function %d: %d mismatches\n", k, bad[k]);
    CHECK(bad[k] == 0);
  }
  CHECK_HIP(hipFree(dX));
  CHECK_HIP(hipFree(dOut));
  CHECK_HIP(hipFree(dD));
}

static void testCooperativeGroups() {
  const int n = 256;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = i % 19;
  int *dIn, *dOut;
  CHECK_HIP(hipMalloc(&dIn, n * sizeof(int)));
  CHECK_HIP(hipMalloc(&dOut, n / 16 * sizeof(int)));
  CHECK_HIP(hipMemcpy(dIn, in.data(), n * sizeof(int), hipMemcpyHostToDevice));
  tileSums<<<2, 128>>>(dIn, dOut);
  CHECK_HIP(hipGetLastError());
  std::vector<int> out(n / 16);
  CHECK_HIP(hipMemcpy(out.data(), dOut, out.size() * sizeof(int), hipMemcpyDeviceToHost));
  int bad = 0;
  for (int t = 0; t < n / 16; ++t) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += in[t * 16 + l];
    if (out[t] != sum) ++bad;
  }
  CHECK(bad == 0);
  CHECK_HIP(hipFree(dIn));
  CHECK_HIP(hipFree(dOut));
}

int main() {
  if (int skip = hipcheck::gpuOrSkip("hip_kernel_test")) return skip;
  CHECK_HIP(hipSetDevice(0));
  testShuffles();
  testVotes();
  testAtomics();
  testLowPrecision();
  testMath();
  testCooperativeGroups();
  CHECK_HIP(hipDeviceSynchronize());
  return hipcheck::finish("hip_kernel_test");
}
