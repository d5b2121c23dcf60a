// HIP runtime API on the cuda-hip image: devices and properties, errors, memory, streams,
// events and the launch forms. Built by the image's hipcc; needs a GPU to run.

#include "hip_check.h"

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

__constant__ float kCoefficients[4];
__device__ int gDeviceCounter;

__global__ void scale(const float* in, float* out, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
}

template <class T, int Add>
__global__ void fillIndexPlus(T* out, int n) {
  int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
  if (i < n) out[i] = static_cast<T>(i + Add);
}

__global__ void polynomial(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = kCoefficients[0] + v * (kCoefficients[1] + v * (kCoefficients[2] + v * kCoefficients[3]));
  }
}

__global__ void countThreads() { atomicAdd(&gDeviceCounter, 1); }

// Reverses each block's slice through dynamic shared memory.
__global__ void reverseInBlock(const int* in, int* out) {
  HIP_DYNAMIC_SHARED(int, tile);
  int base = blockIdx.x * blockDim.x;
  tile[threadIdx.x] = in[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

// Touches every byte of a large dynamic shared allocation (needs the opt-in attribute).
__global__ void bigShared(int* out, int bytes) {
  extern __shared__ unsigned char buffer[];
  for (int i = threadIdx.x; i < bytes; i += blockDim.x) buffer[i] = static_cast<unsigned char>(i & 0xff);
  __syncthreads();
  int sum = 0;
  for (int i = threadIdx.x; i < bytes; i += blockDim.x) sum += buffer[i] == static_cast<unsigned char>(i & 0xff);
  atomicAdd(out, sum);
}

// Busy-waits so that events have something to time.
__global__ void spin(long long nanoseconds, long long* elapsedOut) {
  long long start = wall_clock64();
  while (wall_clock64() - start < nanoseconds) {
  }
  if (threadIdx.x == 0) *elapsedOut = wall_clock64() - start;
}

__global__ void writeHost(int* hostVisible, int value) { hostVisible[threadIdx.x] = value + threadIdx.x; }

static void hostCallback(void* flag) { static_cast<std::atomic<int>*>(flag)->store(1); }

static void deviceAndProperties() {
  int count = 0;
  CHECK_HIP(hipGetDeviceCount(&count));
  CHECK(count >= 1);
  CHECK_HIP(hipSetDevice(0));
  int current = -1;
  CHECK_HIP(hipGetDevice(&current));
  CHECK(current == 0);
  CHECK(hipSetDevice(count + 7) == hipErrorInvalidDevice);
  hipGetLastError();

  hipDeviceProp_t p;
  CHECK_HIP(hipGetDeviceProperties(&p, 0));
  std::printf("device 0: %s, %s, %d SMs, %.1f GiB, clock %d kHz, memory clock %d kHz, L2 %d bytes\n",
              p.name, p.gcnArchName, p.multiProcessorCount, p.totalGlobalMem / double(1 << 30),
              p.clockRate, p.memoryClockRate, p.l2CacheSize);
  CHECK(std::strlen(p.name) > 0);
  CHECK(p.warpSize == 32);
  CHECK(p.major >= 7);
  CHECK(std::string(p.gcnArchName) == "sm_" + std::to_string(p.major) + std::to_string(p.minor));
  CHECK(p.totalGlobalMem > (size_t(1) << 30));
  CHECK(p.sharedMemPerBlock >= 48 * 1024);
  CHECK(p.sharedMemPerBlockOptin >= p.sharedMemPerBlock);
  CHECK(p.maxThreadsPerBlock == 1024);
  CHECK(p.maxThreadsDim[0] == 1024);
  CHECK(p.maxGridSize[0] >= 65535);
  CHECK(p.multiProcessorCount > 0);
  CHECK(p.clockRate > 0);
  CHECK(p.memoryClockRate > 0);
  CHECK(p.memoryBusWidth > 0);
  CHECK(p.l2CacheSize > 0);
  CHECK(p.maxSharedMemoryPerMultiProcessor == p.sharedMemPerMultiprocessor);
  CHECK(p.regsPerBlock > 0);

  int v = 0;
  CHECK_HIP(hipDeviceGetAttribute(&v, hipDeviceAttributeMultiprocessorCount, 0));
  CHECK(v == p.multiProcessorCount);
  CHECK_HIP(hipDeviceGetAttribute(&v, hipDeviceAttributeClockRate, 0));
  CHECK(v == p.clockRate);
  CHECK_HIP(hipDeviceGetAttribute(&v, hipDeviceAttributeWarpSize, 0));
  CHECK(v == 32);
  CHECK_HIP(hipDeviceGetAttribute(&v, hipDeviceAttributeComputeCapabilityMajor, 0));
  CHECK(v == p.major);
  CHECK_HIP(hipDeviceGetAttribute(&v, hipDeviceAttributeMaxSharedMemoryPerBlock, 0));
  CHECK(size_t(v) == p.sharedMemPerBlock);
  CHECK_HIP(hipDeviceGetAttribute(&v, hipDeviceAttributeL2CacheSize, 0));
  CHECK(v == p.l2CacheSize);
  CHECK_HIP(hipDeviceGetAttribute(&v, hipDeviceAttributeWallClockRate, 0));
  CHECK(v == 1000000);
  CHECK(hipDeviceGetAttribute(&v, static_cast<hipDeviceAttribute_t>(9999), 0) == hipErrorInvalidValue);
  int major = 0, minor = -1;
  CHECK_HIP(hipDeviceComputeCapability(&major, &minor, 0));
  CHECK(major == p.major && minor == p.minor);
  size_t total = 0, freeBytes = 0, totalInfo = 0;
  CHECK_HIP(hipDeviceTotalMem(&total, 0));
  CHECK(total == p.totalGlobalMem);
  CHECK_HIP(hipMemGetInfo(&freeBytes, &totalInfo));
  CHECK(freeBytes > 0 && freeBytes <= totalInfo);
  int driver = 0, runtime = 0;
  CHECK_HIP(hipDriverGetVersion(&driver));
  CHECK_HIP(hipRuntimeGetVersion(&runtime));
  CHECK(driver >= 13000 && runtime >= 13000);
  char bus[32] = {};
  CHECK_HIP(hipDeviceGetPCIBusId(bus, sizeof bus, 0));
  CHECK(std::strlen(bus) >= 7);
}

static void errors() {
  CHECK(hipGetLastError() == hipSuccess);
  void* huge = nullptr;
  CHECK(hipMalloc(&huge, size_t(1) << 62) == hipErrorOutOfMemory);
  // Peek leaves the error in place; Get returns it once and clears it.
  CHECK(hipPeekAtLastError() == hipErrorOutOfMemory);
  CHECK(hipPeekAtLastError() == hipErrorOutOfMemory);
  CHECK(hipGetLastError() == hipErrorOutOfMemory);
  CHECK(hipGetLastError() == hipSuccess);

  // 2048 threads per block is over every NVIDIA limit: the launch itself fails. ROCm and older
  // CUDA call it an invalid configuration; CUDA 13 on the H200 answered otherwise, so the
  // error's name is printed and either launch error is accepted.
  hipLaunchKernelGGL(countThreads, dim3(1), dim3(2048), 0, 0);
  const hipError_t launch = hipGetLastError();
  std::printf("oversized launch: %s\n", hipGetErrorName(launch));
  CHECK(launch == hipErrorInvalidConfiguration || launch == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipSuccess);

  CHECK(std::string(hipGetErrorString(hipSuccess)) != hipGetErrorString(hipErrorInvalidValue));
  CHECK(std::strlen(hipGetErrorString(hipErrorOutOfMemory)) > 0);
  CHECK(std::strlen(hipGetErrorName(hipErrorInvalidDevice)) > 0);
  CHECK(hipFree(nullptr) == hipSuccess);
}

static void memory() {
  const int n = 1 << 20;
  std::vector<float> host(n), back(n, -1.f);
  for (int i = 0; i < n; ++i) host[i] = 0.5f * i;
  float* a = nullptr;
  float* b = nullptr;
  CHECK_HIP(hipMalloc(&a, n * sizeof(float)));
  CHECK_HIP(hipMalloc(reinterpret_cast<void**>(&b), n * sizeof(float)));

  CHECK_HIP(hipMemset(a, 0, n * sizeof(float)));
  CHECK_HIP(hipMemcpy(back.data(), a, n * sizeof(float), hipMemcpyDeviceToHost));
  bool zero = true;
  for (float x : back) zero = zero && x == 0.f;
  CHECK(zero);

  CHECK_HIP(hipMemcpy(a, host.data(), n * sizeof(float), hipMemcpyHostToDevice));
  hipLaunchKernelGGL(scale, dim3((n + 255) / 256), dim3(256), 0, 0, a, b, 3.f, n);
  CHECK_HIP(hipGetLastError());
  CHECK_HIP(hipDeviceSynchronize());
  CHECK_HIP(hipMemcpyDtoD(a, b, n * sizeof(float)));
  CHECK_HIP(hipMemcpyDtoH(back.data(), a, n * sizeof(float)));
  bool scaled = true;
  for (int i = 0; i < n; ++i) scaled = scaled && back[i] == 1.5f * i;
  CHECK(scaled);

  // Pinned host memory with async copies on a stream.
  float* pinned = nullptr;
  CHECK_HIP(hipHostMalloc(&pinned, n * sizeof(float), hipHostMallocDefault));
  for (int i = 0; i < n; ++i) pinned[i] = float(i % 1000);
  hipStream_t s;
  CHECK_HIP(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  CHECK_HIP(hipMemcpyAsync(a, pinned, n * sizeof(float), hipMemcpyHostToDevice, s));
  scale<<<(n + 255) / 256, 256, 0, s>>>(a, b, -2.f, n);
  CHECK_HIP(hipMemsetAsync(a, 0, n * sizeof(float), s));
  CHECK_HIP(hipMemcpyAsync(pinned, b, n * sizeof(float), hipMemcpyDeviceToHost, s));
  CHECK_HIP(hipStreamSynchronize(s));
  bool async = true;
  for (int i = 0; i < n; ++i) async = async && pinned[i] == -2.f * float(i % 1000);
  CHECK(async);
  CHECK_HIP(hipStreamDestroy(s));
  CHECK_HIP(hipHostFree(pinned));

  // Mapped host memory written by a kernel.
  int* mapped = nullptr;
  int* mappedDev = nullptr;
  CHECK_HIP(hipHostMalloc(&mapped, 64 * sizeof(int), hipHostMallocMapped));
  CHECK_HIP(hipHostGetDevicePointer(reinterpret_cast<void**>(&mappedDev), mapped, 0));
  writeHost<<<1, 64>>>(mappedDev, 1000);
  CHECK_HIP(hipDeviceSynchronize());
  CHECK(mapped[0] == 1000 && mapped[63] == 1063);
  CHECK_HIP(hipHostFree(mapped));

  // Managed memory.
  int* managed = nullptr;
  CHECK_HIP(hipMallocManaged(&managed, 1000 * sizeof(int)));
  hipLaunchKernelGGL(HIP_KERNEL_NAME(fillIndexPlus<int, 5>), dim3(4), dim3(256), 0, 0, managed, 1000);
  CHECK_HIP(hipDeviceSynchronize());
  CHECK(managed[0] == 5 && managed[999] == 1004);
  CHECK_HIP(hipFree(managed));

  // Symbols: __constant__ in, __device__ out.
  const float coeff[4] = {1.f, 2.f, 3.f, 4.f};
  CHECK_HIP(hipMemcpyToSymbol(HIP_SYMBOL(kCoefficients), coeff, sizeof coeff));
  float xs[3] = {0.f, 1.f, 2.f}, ys[3] = {};
  CHECK_HIP(hipMemcpy(a, xs, sizeof xs, hipMemcpyHostToDevice));
  polynomial<<<1, 3>>>(a, b, 3);
  CHECK_HIP(hipMemcpy(ys, b, sizeof ys, hipMemcpyDeviceToHost));
  CHECK(ys[0] == 1.f && ys[1] == 10.f && ys[2] == 49.f);
  int zeroCount = 0, counted = -1;
  CHECK_HIP(hipMemcpyToSymbol(HIP_SYMBOL(gDeviceCounter), &zeroCount, sizeof zeroCount));
  countThreads<<<10, 128>>>();
  CHECK_HIP(hipMemcpyFromSymbol(&counted, HIP_SYMBOL(gDeviceCounter), sizeof counted));
  CHECK(counted == 1280);
  void* symbolAddress = nullptr;
  CHECK_HIP(hipGetSymbolAddress(&symbolAddress, HIP_SYMBOL(gDeviceCounter)));
  CHECK(symbolAddress != nullptr);

  // 2-D copy of a 3x5 sub-rectangle into pitched memory and back.
  float* pitched = nullptr;
  size_t pitch = 0;
  CHECK_HIP(hipMallocPitch(reinterpret_cast<void**>(&pitched), &pitch, 5 * sizeof(float), 3));
  CHECK(pitch >= 5 * sizeof(float));
  float rect[15], rectBack[15] = {};
  for (int i = 0; i < 15; ++i) rect[i] = float(i * i);
  CHECK_HIP(hipMemcpy2D(pitched, pitch, rect, 5 * sizeof(float), 5 * sizeof(float), 3, hipMemcpyHostToDevice));
  CHECK_HIP(hipMemcpy2D(rectBack, 5 * sizeof(float), pitched, pitch, 5 * sizeof(float), 3, hipMemcpyDeviceToHost));
  CHECK(std::memcmp(rect, rectBack, sizeof rect) == 0);
  CHECK_HIP(hipFree(pitched));

  CHECK_HIP(hipFree(a));
  CHECK_HIP(hipFree(b));
}

static void streamsAndEvents() {
  hipStream_t s1, s2;
  CHECK_HIP(hipStreamCreate(&s1));
  CHECK_HIP(hipStreamCreateWithFlags(&s2, hipStreamNonBlocking));
  hipEvent_t start, stop, done;
  CHECK_HIP(hipEventCreate(&start));
  CHECK_HIP(hipEventCreateWithFlags(&stop, hipEventDefault));
  CHECK_HIP(hipEventCreateWithFlags(&done, hipEventDisableTiming));
  long long* elapsed = nullptr;
  CHECK_HIP(hipMalloc(&elapsed, sizeof(long long)));

  // 20 ms of device time between the two events.
  CHECK_HIP(hipEventRecord(start, s1));
  hipLaunchKernelGGL(spin, dim3(1), dim3(32), 0, s1, 20000000LL, elapsed);
  CHECK_HIP(hipEventRecord(stop, s1));
  CHECK_HIP(hipEventSynchronize(stop));
  CHECK(hipEventQuery(stop) == hipSuccess);
  float ms = 0;
  CHECK_HIP(hipEventElapsedTime(&ms, start, stop));
  std::printf("spin of 20 ms measured %.3f ms by events\n", ms);
  CHECK(ms >= 19.f && ms < 2000.f);
  long long spun = 0;
  CHECK_HIP(hipMemcpy(&spun, elapsed, sizeof spun, hipMemcpyDeviceToHost));
  CHECK(spun >= 20000000LL);

  // s2 waits on s1's event: the copy must see s1's kernel's result.
  int* buf = nullptr;
  CHECK_HIP(hipMalloc(&buf, 1024 * sizeof(int)));
  hipLaunchKernelGGL(spin, dim3(1), dim3(32), 0, s1, 5000000LL, elapsed);
  hipLaunchKernelGGL(HIP_KERNEL_NAME(fillIndexPlus<int, 7>), dim3(4), dim3(256), 0, s1, buf, 1024);
  CHECK_HIP(hipEventRecord(done, s1));
  CHECK_HIP(hipStreamWaitEvent(s2, done, 0));
  std::vector<int> out(1024, 0);
  CHECK_HIP(hipMemcpyAsync(out.data(), buf, 1024 * sizeof(int), hipMemcpyDeviceToHost, s2));
  std::atomic<int> called{0};
  CHECK_HIP(hipLaunchHostFunc(s2, hostCallback, &called));
  CHECK_HIP(hipStreamSynchronize(s2));
  CHECK(hipStreamQuery(s2) == hipSuccess);
  CHECK(out[0] == 7 && out[1023] == 1030);
  CHECK(called.load() == 1);
  unsigned int flags = 0;
  CHECK_HIP(hipStreamGetFlags(s2, &flags));
  CHECK(flags == hipStreamNonBlocking);

  CHECK_HIP(hipFree(buf));
  CHECK_HIP(hipFree(elapsed));
  CHECK_HIP(hipEventDestroy(start));
  CHECK_HIP(hipEventDestroy(stop));
  CHECK_HIP(hipEventDestroy(done));
  CHECK_HIP(hipStreamDestroy(s1));
  CHECK_HIP(hipStreamDestroy(s2));
}

static void launches() {
  const int blocks = 8, threads = 128, n = blocks * threads;
  std::vector<int> in(n), out(n, 0);
  for (int i = 0; i < n; ++i) in[i] = i * 3;
  int* dIn = nullptr;
  int* dOut = nullptr;
  CHECK_HIP(hipMalloc(&dIn, n * sizeof(int)));
  CHECK_HIP(hipMalloc(&dOut, n * sizeof(int)));
  CHECK_HIP(hipMemcpy(dIn, in.data(), n * sizeof(int), hipMemcpyHostToDevice));

  // hipLaunchKernel with an argument array, dynamic shared memory.
  void* args[] = {&dIn, &dOut};
  CHECK_HIP(hipLaunchKernel(reverseInBlock, dim3(blocks), dim3(threads), args, threads * sizeof(int), nullptr));
  CHECK_HIP(hipMemcpy(out.data(), dOut, n * sizeof(int), hipMemcpyDeviceToHost));
  bool reversed = true;
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t) reversed = reversed && out[b * threads + t] == in[b * threads + threads - 1 - t];
  CHECK(reversed);

  hipFuncAttributes attr;
  CHECK_HIP(hipFuncGetAttributes(&attr, reverseInBlock));
  CHECK(attr.maxThreadsPerBlock > 0 && attr.numRegs > 0);

  // Opt in to 100 KiB of dynamic shared memory (over the 48 KiB default).
  const int big = 100 * 1024;
  int* hits = nullptr;
  CHECK_HIP(hipMalloc(&hits, sizeof(int)));
  CHECK_HIP(hipMemset(hits, 0, sizeof(int)));
  CHECK_HIP(hipFuncSetAttribute(bigShared, hipFuncAttributeMaxDynamicSharedMemorySize, big));
  hipLaunchKernelGGL(bigShared, dim3(1), dim3(256), big, 0, hits, big);
  CHECK_HIP(hipGetLastError());
  int hitCount = 0;
  CHECK_HIP(hipMemcpy(&hitCount, hits, sizeof hitCount, hipMemcpyDeviceToHost));
  CHECK(hitCount == big);

  int perSm = 0, gridSize = 0, blockSize = 0;
  CHECK_HIP(hipOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, scale, 256, 0));
  CHECK(perSm >= 1);
  CHECK_HIP(hipOccupancyMaxPotentialBlockSize(&gridSize, &blockSize, scale, 0, 0));
  CHECK(gridSize >= 1 && blockSize >= 32 && blockSize <= 1024);

  CHECK_HIP(hipFree(hits));
  CHECK_HIP(hipFree(dIn));
  CHECK_HIP(hipFree(dOut));
}

int main() {
  if (int skip = hipcheck::gpuOrSkip("hip_api_test")) return skip;
  deviceAndProperties();
  errors();
  memory();
  streamsAndEvents();
  launches();
  CHECK_HIP(hipDeviceSynchronize());
  return hipcheck::finish("hip_api_test");
}
