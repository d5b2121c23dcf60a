// exchange_bench - what a GPU call costs when a trusted driver process and a candidate worker
// process take turns on one GPU (issue 23, docs/scoring.md "GPU harnesses").
//
// The driver owns a device allocation shared with the worker by file descriptor (CUDA VMM, as
// tasks/common/hip/akavmm.h does) and times, on its own clock, one call: whatever it does on the
// GPU inside the window (per strategy below), go, the worker runs its kernel and synchronises,
// done, and the driver's read of the output. Per strategy it prints the window's median and
// spread for an empty kernel and for a memory-bound kernel of each size, and the kernel's own
// event time in the worker, so the fixed overhead and how well it subtracts can be read off.
//
// Strategies (driver work inside the window):
//   none   go and done only (the floor of the exchange itself; the output is not read)
//   d2d    cudaMemcpyAsync device-to-device in and out (what the hip driver does today)
//   batch  the same copies through cudaMemcpyBatchAsync with PREFER_OVERLAP_WITH_COMPUTE (a
//          hint to use a copy engine rather than the SMs)
//   pcie   host-to-device in and device-to-host out through pinned host memory (copy engines)
//   out    no copy in; the output read back device-to-host (copy engine)
// and before the window either nothing or the driver's poison memset and L2 flush ("pre").
// `local` runs the d2d strategy and the kernel in the driver's own process: the same work with
// no second process, so the difference is what the process boundary costs.
//
//   exchange_bench [ITERS]        (nvcc -O2 -o exchange_bench exchange_bench.cu -lcuda)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <tuple>
#include <vector>

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)
#define CU(x)                                                            \
  do {                                                                   \
    CUresult r_ = (x);                                                   \
    if (r_ != CUDA_SUCCESS) {                                            \
      const char* s_ = "?";                                              \
      cuGetErrorString(r_, &s_);                                         \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

namespace {

using Clock = std::chrono::steady_clock;

struct Page {
  std::atomic<uint32_t> go{0}, done{0};
  uint32_t kernel = 0;  // 0 empty, 1 scale, 2 quit, 3 prime (an empty kernel, untimed)
  uint32_t lend = 0;    // 1: this call's input comes as a new allocation's descriptor after go
  uint64_t elems = 0;
  uint64_t lendBytes = 0;
  float eventUs = 0;
  float mapUs = 0;      // the worker's import and mapping of a lent input
  // pool strategy: this call's input is slot `slot` of the window's pool (`slotBytes` apart),
  // its output buffer `outIdx`; poolStart: receive and map the pool first; poolEnd: unmap after.
  uint32_t poolStart = 0, poolEnd = 0, slot = 0, outIdx = 0;
  uint64_t slotBytes = 0, poolBytes = 0;
};

__global__ void emptyKernel() {}
__global__ void scaleKernel(const float4* in, float4* out, uint64_t n4) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n4; i += uint64_t(gridDim.x) * blockDim.x) {
    float4 v = in[i];
    out[i] = make_float4(v.x * 2.f, v.y * 2.f, v.z * 2.f, v.w * 2.f);
  }
}

void launch(uint32_t kernel, const void* in, void* out, uint64_t elems, cudaStream_t s) {
  if (kernel == 0) emptyKernel<<<1, 1, 0, s>>>();
  else scaleKernel<<<132 * 8, 256, 0, s>>>(static_cast<const float4*>(in), static_cast<float4*>(out), elems / 4);
}

void spinUntil(std::atomic<uint32_t>& w, uint32_t v) {
  while (w.load(std::memory_order_acquire) != v) __builtin_ia32_pause();
}

// One byte of payload with room for one descriptor, the message header pointing at both.
struct FdMessage {
  char byte = 'x';
  iovec iov{};
  char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  FdMessage() {
    iov = {&byte, 1};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
  }
};

void sendFd(int sock, int fd) {
  FdMessage msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg.m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (sendmsg(sock, &msg.m, 0) != 1) std::perror("sendmsg"), std::exit(1);
}

int receiveFd(int sock) {
  FdMessage msg;
  if (recvmsg(sock, &msg.m, 0) != 1) std::perror("recvmsg"), std::exit(1);
  int fd;
  std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg.m)), sizeof fd);
  return fd;
}

CUmemAllocationProp props() {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  return p;
}

void* mapHandle(CUmemGenericAllocationHandle h, size_t size) {
  CUdeviceptr base;
  CU(cuMemAddressReserve(&base, size, 0, 0, 0));
  CU(cuMemMap(base, size, 0, h, 0));
  CUmemAccessDesc a{};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = 0;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(base, size, &a, 1));
  return reinterpret_cast<void*>(base);
}

constexpr uint64_t kMaxBytes = uint64_t(64) << 20;
constexpr int kMaxCalls = 16;  // output buffers after the in/out pair: one per call of a pool window

void worker(Page* page, int sock) {
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  const int fd = receiveFd(sock);
  uint64_t size = 0;
  if (read(sock, &size, sizeof size) != sizeof size) std::exit(1);
  CUmemGenericAllocationHandle h;
  CU(cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(fd);
  unsigned char* base = static_cast<unsigned char*>(mapHandle(h, size));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const char ok = 'k';
  if (write(sock, &ok, 1) != 1) std::exit(1);
  for (uint32_t n = 1;; ++n) {
    spinUntil(page->go, n);
    if (page->kernel == 2) break;
    if (page->kernel == 3) {
      launch(0, nullptr, nullptr, 0, s);
      CK(cudaStreamSynchronize(s));
      page->done.store(n, std::memory_order_release);
      continue;
    }
    if (page->poolStart || page->slotBytes) {
      static CUmemGenericAllocationHandle pool{};
      static CUdeviceptr poolBase = 0;
      if (page->poolStart) {
        const auto m0 = Clock::now();
        const int pfd = receiveFd(sock);
        CU(cuMemImportFromShareableHandle(&pool, reinterpret_cast<void*>(static_cast<uintptr_t>(pfd)),
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        close(pfd);
        poolBase = reinterpret_cast<CUdeviceptr>(mapHandle(pool, page->poolBytes));
        page->mapUs = std::chrono::duration<float, std::micro>(Clock::now() - m0).count();
      }
      const unsigned char* pin = reinterpret_cast<const unsigned char*>(poolBase) + page->slot * page->slotBytes;
      unsigned char* pout = base + 2 * kMaxBytes + uint64_t(page->outIdx) * kMaxBytes;
      CK(cudaEventRecord(e0, s));
      launch(page->kernel, pin, pout, page->elems, s);
      CK(cudaEventRecord(e1, s));
      CK(cudaStreamSynchronize(s));
      float pms = 0;
      CK(cudaEventElapsedTime(&pms, e0, e1));
      page->eventUs = pms * 1000.f;
      page->done.store(n, std::memory_order_release);
      if (page->poolEnd) {
        CU(cuMemUnmap(poolBase, page->poolBytes));
        CU(cuMemAddressFree(poolBase, page->poolBytes));
        CU(cuMemRelease(pool));
        poolBase = 0;
      }
      continue;
    }
    const unsigned char* in = base;
    CUmemGenericAllocationHandle lent{};
    CUdeviceptr lentBase = 0;
    if (page->lend) {
      const auto m0 = Clock::now();
      const int lfd = receiveFd(sock);
      CU(cuMemImportFromShareableHandle(&lent, reinterpret_cast<void*>(static_cast<uintptr_t>(lfd)),
                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
      close(lfd);
      lentBase = reinterpret_cast<CUdeviceptr>(mapHandle(lent, page->lendBytes));
      in = reinterpret_cast<const unsigned char*>(lentBase);
      page->mapUs = std::chrono::duration<float, std::micro>(Clock::now() - m0).count();
    }
    CK(cudaEventRecord(e0, s));
    launch(page->kernel, in, base + kMaxBytes, page->elems, s);
    CK(cudaEventRecord(e1, s));
    CK(cudaStreamSynchronize(s));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    page->eventUs = ms * 1000.f;
    page->done.store(n, std::memory_order_release);
    if (lentBase) {
      CU(cuMemUnmap(lentBase, page->lendBytes));
      CU(cuMemAddressFree(lentBase, page->lendBytes));
      CU(cuMemRelease(lent));
    }
  }
  page->done.store(page->go.load(), std::memory_order_release);
}

struct Stats {
  double median, p10, p90, cv;
};

Stats statsOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto q = [&](double f) { return v[static_cast<size_t>(f * (v.size() - 1))]; };
  double mean = 0, var = 0;
  // CV over the middle 80%, so a rare preemption does not dominate.
  const size_t lo = v.size() / 10, hi = v.size() - v.size() / 10;
  for (size_t i = lo; i < hi; ++i) mean += v[i];
  mean /= double(hi - lo);
  for (size_t i = lo; i < hi; ++i) var += (v[i] - mean) * (v[i] - mean);
  return {q(0.5), q(0.1), q(0.9), std::sqrt(var / double(hi - lo)) / mean};
}

struct Driver {
  Page* page;
  uint32_t seq = 0;
  unsigned char* shared;  // in at 0, out at kMaxBytes
  void *staging, *readback, *flushBuf, *poison;
  void *hostIn, *hostOut;
  cudaStream_t s;
  cudaEvent_t e0, e1;

  void copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, bool batch) {
    if (!batch) {
      CK(cudaMemcpyAsync(dst, src, n, kind, s));
      return;
    }
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t idx = 0;
    void* dsts[1] = {dst};
    const void* srcs[1] = {src};
    size_t sizes[1] = {n};
    CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, &idx, 1, s));
  }

  // Before the window: nothing (0), the poison and the L2 flush as memsets (1), or as copies
  // hinted onto a copy engine (2).
  void prepare(int pre, unsigned char* out, uint64_t bytes) {
    if (pre == 1) {
      CK(cudaMemsetAsync(out, 0xff, bytes, s));
      CK(cudaMemsetAsync(flushBuf, int(seq & 0xff), uint64_t(256) << 20, s));
    } else if (pre == 2) {
      copy(out, poison, bytes, cudaMemcpyDeviceToDevice, true);
      copy(flushBuf, static_cast<unsigned char*>(flushBuf) + (uint64_t(128) << 20), uint64_t(128) << 20,
           cudaMemcpyDeviceToDevice, true);
    }
    CK(cudaStreamSynchronize(s));
  }

  int sock = -1;
  uint64_t gran = 0;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  void* sampleHost = nullptr;
  float lastMapUs = 0;

  uint64_t next() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  }

  void exchange(uint32_t kernel) {
    page->kernel = kernel;
    const uint32_t n = ++seq;
    page->go.store(n, std::memory_order_release);
    spinUntil(page->done, n);
  }

  // A call whose input is a new allocation lent to the worker only after the clock starts:
  // filled (and the L2 flushed, the output poisoned) before; the worker, primed with an empty
  // kernel so that the GPU runs its context when the clock starts; the end of the window a
  // read of 16 random 4 KiB pieces of the output through a copy engine.
  double lendCall(bool prime, bool sample, uint32_t kernel, uint64_t bytes, float* eventUs) {
    const uint64_t size = (bytes + gran - 1) / gran * gran;
    const CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, size, &p, 0));
    void* mine = mapHandle(h, size);
    CK(cudaMemcpyAsync(mine, staging, bytes, cudaMemcpyDeviceToDevice, s));
    unsigned char* out = shared + kMaxBytes;
    CK(cudaMemsetAsync(out, 0xff, bytes, s));
    CK(cudaMemsetAsync(flushBuf, int(seq & 0xff), uint64_t(256) << 20, s));
    CK(cudaStreamSynchronize(s));
    int fd = -1;
    CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    page->lend = 1;
    page->lendBytes = size;
    page->elems = bytes / 4;
    if (prime) exchange(3);
    const auto t0 = Clock::now();
    sendFd(sock, fd);
    exchange(kernel);
    if (sample) {
      void* dsts[16];
      const void* srcs[16];
      size_t sizes[16];
      const uint64_t pieces = bytes / 4096;
      for (int i = 0; i < 16; ++i) {
        dsts[i] = static_cast<unsigned char*>(sampleHost) + i * 4096;
        srcs[i] = out + (next() % pieces) * 4096;
        sizes[i] = 4096;
      }
      cudaMemcpyAttributes attr{};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
      size_t idx = 0;
      CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 16, &attr, &idx, 1, s));
      CK(cudaStreamSynchronize(s));
    }
    const auto t1 = Clock::now();
    page->lend = 0;
    close(fd);
    CU(cuMemUnmap(reinterpret_cast<CUdeviceptr>(mine), size));
    CU(cuMemAddressFree(reinterpret_cast<CUdeviceptr>(mine), size));
    CU(cuMemRelease(h));
    *eventUs = page->eventUs;
    lastMapUs = page->mapUs;
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  }

  // K calls in one window on a pool of K*M fresh input sets lent at T0 (one mapping for the
  // window); call j's input is one of its M slots, named only in its own go; after each done the
  // driver reads 16 random 4 KiB pieces of that call's output (copy engine) before the next go.
  // Returns the window per call; *eventUs the worker's event time of the last call.
  double poolWindow(int K, int M, bool read, uint32_t kernel, uint64_t bytes, float* eventUs) {
    const uint64_t slotBytes = (bytes + 4095) / 4096 * 4096;
    const uint64_t size = (slotBytes * K * M + gran - 1) / gran * gran;
    const CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, size, &p, 0));
    void* mine = mapHandle(h, size);
    CK(cudaMemsetAsync(mine, 0x3f, size, s));
    for (int j = 0; j < K; ++j) CK(cudaMemsetAsync(shared + 2 * kMaxBytes + uint64_t(j) * kMaxBytes, 0xff, bytes, s));
    CK(cudaMemsetAsync(flushBuf, int(seq & 0xff), uint64_t(256) << 20, s));
    CK(cudaStreamSynchronize(s));
    int fd = -1;
    CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    page->lend = 0;
    page->elems = bytes / 4;
    exchange(3);
    page->slotBytes = slotBytes;
    page->poolBytes = size;
    const auto t0 = Clock::now();
    sendFd(sock, fd);
    for (int j = 0; j < K; ++j) {
      page->poolStart = j == 0;
      page->poolEnd = j == K - 1;
      page->slot = uint32_t(j * M + next() % M);
      page->outIdx = uint32_t(j);
      exchange(kernel);
      if (!read) continue;
      unsigned char* out = shared + 2 * kMaxBytes + uint64_t(j) * kMaxBytes;
      void* dsts[16];
      const void* srcs[16];
      size_t sizes[16];
      const uint64_t pieces = std::max<uint64_t>(1, bytes / 4096);
      for (int i = 0; i < 16; ++i) {
        dsts[i] = static_cast<unsigned char*>(sampleHost) + i * 4096;
        srcs[i] = out + (next() % pieces) * 4096;
        sizes[i] = 4096;
      }
      cudaMemcpyAttributes attr{};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
      size_t idx = 0;
      CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 16, &attr, &idx, 1, s));
      CK(cudaStreamSynchronize(s));
    }
    const auto t1 = Clock::now();
    page->poolStart = page->poolEnd = 0;
    page->slotBytes = 0;
    close(fd);
    CU(cuMemUnmap(reinterpret_cast<CUdeviceptr>(mine), size));
    CU(cuMemAddressFree(reinterpret_cast<CUdeviceptr>(mine), size));
    CU(cuMemRelease(h));
    *eventUs = page->eventUs;
    lastMapUs = page->mapUs;
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / K;
  }

  // One call; returns the window in microseconds and the worker's event time in *eventUs.
  double call(const std::string& strategy, int pre, uint32_t kernel, uint64_t bytes, float* eventUs) {
    unsigned char* in = shared;
    unsigned char* out = shared + kMaxBytes;
    prepare(pre, out, bytes);
    const auto t0 = Clock::now();
    if (strategy == "d2d" || strategy == "batch") {
      copy(in, staging, bytes, cudaMemcpyDeviceToDevice, strategy == "batch");
      CK(cudaStreamSynchronize(s));
    } else if (strategy == "pcie") {
      CK(cudaMemcpyAsync(in, hostIn, bytes, cudaMemcpyHostToDevice, s));
      CK(cudaStreamSynchronize(s));
    }
    page->kernel = kernel;
    page->elems = bytes / 4;
    const uint32_t n = ++seq;
    page->go.store(n, std::memory_order_release);
    spinUntil(page->done, n);
    if (strategy == "d2d" || strategy == "batch") {
      copy(readback, out, bytes, cudaMemcpyDeviceToDevice, strategy == "batch");
      CK(cudaStreamSynchronize(s));
    } else if (strategy == "pcie" || strategy == "out") {
      CK(cudaMemcpyAsync(hostOut, out, bytes, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
    }
    const auto t1 = Clock::now();
    *eventUs = page->eventUs;
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  }

  // The same work in this process: copy in, kernel, copy out.
  double local(int pre, uint32_t kernel, uint64_t bytes, float* eventUs) {
    unsigned char* in = shared;
    unsigned char* out = shared + kMaxBytes;
    prepare(pre, out, bytes);
    const auto t0 = Clock::now();
    CK(cudaMemcpyAsync(in, staging, bytes, cudaMemcpyDeviceToDevice, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaEventRecord(e0, s));
    launch(kernel, in, out, bytes / 4, s);
    CK(cudaEventRecord(e1, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpyAsync(readback, out, bytes, cudaMemcpyDeviceToDevice, s));
    CK(cudaStreamSynchronize(s));
    const auto t1 = Clock::now();
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    *eventUs = ms * 1000.f;
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 300;
  Page* page = static_cast<Page*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (page) Page();
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    worker(page, sv[1]);
    _exit(0);
  }
  close(sv[1]);
  CK(cudaSetDevice(0));
  CU(cuInit(0));
  const CUmemAllocationProp p = props();
  size_t gran = 0;
  CU(cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  const uint64_t size = ((2 + kMaxCalls) * kMaxBytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CU(cuMemCreate(&h, size, &p, 0));
  int fd = -1;
  CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  Driver d{page};
  d.sock = sv[0];
  d.gran = gran;
  d.shared = static_cast<unsigned char*>(mapHandle(h, size));
  sendFd(sv[0], fd);
  if (write(sv[0], &size, sizeof size) != sizeof size) return 1;
  char ok;
  if (read(sv[0], &ok, 1) != 1) return 1;
  CK(cudaMalloc(&d.staging, kMaxBytes));
  CK(cudaMalloc(&d.readback, kMaxBytes));
  CK(cudaMalloc(&d.flushBuf, uint64_t(256) << 20));
  CK(cudaMalloc(&d.poison, kMaxBytes));
  CK(cudaMemset(d.poison, 0xff, kMaxBytes));
  CK(cudaMemset(d.staging, 0x3f, kMaxBytes));
  CK(cudaMallocHost(&d.hostIn, kMaxBytes));
  CK(cudaMallocHost(&d.hostOut, kMaxBytes));
  CK(cudaMallocHost(&d.sampleHost, 16 * 4096));
  std::memset(d.hostIn, 0x3f, kMaxBytes);
  CK(cudaStreamCreateWithFlags(&d.s, cudaStreamNonBlocking));
  CK(cudaEventCreate(&d.e0));
  CK(cudaEventCreate(&d.e1));

  std::printf("%-7s %-4s %-6s %8s | %9s %9s %9s %6s | %9s %7s\n", "strat", "pre", "kernel", "bytes", "median_us",
              "p10_us", "p90_us", "cv", "event_us", "map_us");
  if (argc > 2 && std::string(argv[2]) == "pool") {
    // exchange_bench ITERS pool: per-call window of the pool strategy against the event time.
    std::printf("%-9s %8s %-6s | %9s %9s %9s %6s | %9s %7s\n", "K x M", "bytes", "kernel", "call_us", "p10_us",
                "p90_us", "cv", "event_us", "map_us");
    for (int round = 0; round < 2; ++round)
      for (uint64_t bytes : {uint64_t(1) << 20, uint64_t(4) << 20, uint64_t(16) << 20, kMaxBytes})
        for (auto [K, M, read] : {std::tuple{1, 1, true}, std::tuple{4, 4, true}, std::tuple{16, 4, true},
                                  std::tuple{16, 4, false}})
          for (uint32_t kernel : {0u, 1u}) {
            if (uint64_t(K) * M * bytes > (uint64_t(4) << 30)) continue;
            std::vector<double> w, ev, mp;
            const int windows = std::max(20, iters / K);
            for (int i = 0; i < windows + 5; ++i) {
              float e = 0;
              const double us = d.poolWindow(K, M, read, kernel, bytes, &e);
              if (i >= 5) w.push_back(us), ev.push_back(e), mp.push_back(d.lastMapUs);
            }
            const Stats a = statsOf(w), b = statsOf(ev), m = statsOf(mp);
            std::printf("%3d x %-2d%s %8llu %-6s | %9.1f %9.1f %9.1f %6.3f | %9.1f %7.1f\n", K, M, read ? " " : "n",
                        static_cast<unsigned long long>(bytes), kernel ? "scale" : "empty", a.median, a.p10, a.p90,
                        a.cv, b.median, m.median);
            std::fflush(stdout);
          }
    page->kernel = 2;
    page->go.store(++d.seq, std::memory_order_release);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  const bool full = argc > 2 && std::string(argv[2]) == "full";
  std::vector<std::string> strategies = {"lend", "lend-np", "lend-ns", "d2d", "none"};
  if (full) strategies.insert(strategies.end(), {"batch", "pcie", "out", "local"});
  for (int round = 0; round < 2; ++round)
    for (uint64_t bytes : {uint64_t(1) << 20, uint64_t(16) << 20, kMaxBytes})
      for (const std::string& st : strategies)
        for (int pre : {0, 1, 2}) {
          const bool lend = st.rfind("lend", 0) == 0;
          if ((lend && pre != 1) || (!full && pre == 2)) continue;
          for (uint32_t kernel : {0u, 1u}) {
            std::vector<double> w, ev, mp;
            for (int i = 0; i < iters + 20; ++i) {
              float e = 0;
              const double us = lend ? d.lendCall(st != "lend-np", st != "lend-ns", kernel, bytes, &e)
                                : st == "local" ? d.local(pre, kernel, bytes, &e)
                                                : d.call(st, pre, kernel, bytes, &e);
              if (i >= 20) w.push_back(us), ev.push_back(e), mp.push_back(lend ? d.lastMapUs : 0);
            }
            const Stats a = statsOf(w), b = statsOf(ev), m = statsOf(mp);
            std::printf("%-7s %-4s %-6s %8llu | %9.1f %9.1f %9.1f %6.3f | %9.1f %7.1f\n", st.c_str(),
                        pre == 0 ? "no" : pre == 1 ? "set" : "ce", kernel ? "scale" : "empty",
                        static_cast<unsigned long long>(bytes), a.median, a.p10, a.p90, a.cv, b.median, m.median);
            std::fflush(stdout);
          }
        }
  page->kernel = 2;
  page->go.store(++d.seq, std::memory_order_release);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
