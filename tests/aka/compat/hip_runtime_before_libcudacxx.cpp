// The hip_runtime.h fix (images/cuda-hip/include/hip/hip_runtime.h): a HIP source that includes
// hip/hip_runtime.h before torch's headers reaches libcu++ (thrust/complex.h, <cuda/std/...>)
// and CUB afterwards. The maskless shuffles are functions, the votes macros that libcu++'s own
// entity of that name no longer meets. Compiling this file is the test; on a GPU the kernel's
// results are checked too.

#include <hip/hip_runtime.h>

#include <cub/block/block_reduce.cuh>
#include <cuda/std/functional>
#include <thrust/complex.h>

#include "hip_check.h"

__global__ void warpFacts(float* out, unsigned long long* votes, int* flags) {
  const int lane = threadIdx.x;
  float v = float(lane);
  for (int d = warpSize / 2; d > 0; d /= 2) v += __shfl_down(v, d);
  out[0] = __shfl(v, 0);                              // 0 + 1 + ... + 31
  const double up = __shfl_up(double(lane), 1);
  const int across = __shfl_xor(lane, 1);
  if (lane == 31) {
    out[1] = float(up);      // lane 30's
    out[2] = float(across);  // lane 30's
  }
  votes[0] = __ballot(lane % 2 == 1);
  flags[0] = __any(lane == 7);
  flags[1] = __all(lane < 31);
  thrust::complex<float> c(float(lane), 1.0f);
  out[3] = (c * thrust::complex<float>(0.0f, 1.0f)).real();  // -1 on every lane
  using Reduce = cub::BlockReduce<int, 32>;
  __shared__ typename Reduce::TempStorage storage;
  const int total = Reduce(storage).Sum(cuda::std::plus<int>{}(lane, 1));
  if (lane == 0) flags[2] = total;                    // 1 + 2 + ... + 32
}

int main() {
  if (int skip = hipcheck::gpuOrSkip("hip_runtime_before_libcudacxx")) return skip;
  float* out = nullptr;
  unsigned long long* votes = nullptr;
  int* flags = nullptr;
  CHECK(hipMalloc(&out, 4 * sizeof(float)) == hipSuccess);
  CHECK(hipMalloc(&votes, sizeof(unsigned long long)) == hipSuccess);
  CHECK(hipMalloc(&flags, 3 * sizeof(int)) == hipSuccess);
  hipLaunchKernelGGL(warpFacts, dim3(1), dim3(32), 0, 0, out, votes, flags);
  CHECK(hipDeviceSynchronize() == hipSuccess);
  float o[4];
  unsigned long long v = 0;
  int f[3];
  CHECK(hipMemcpy(o, out, sizeof(o), hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(hipMemcpy(&v, votes, sizeof(v), hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(hipMemcpy(f, flags, sizeof(f), hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(o[0] == 496.0f);
  CHECK(o[1] == 30.0f);
  CHECK(o[2] == 30.0f);
  CHECK(o[3] == -1.0f);
  CHECK(v == 0xaaaaaaaaull);
  CHECK(f[0] == 1);
  CHECK(f[1] == 0);
  CHECK(f[2] == 528);
  return hipcheck::finish("hip_runtime_before_libcudacxx");
}
