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
// `spread` asks whether the new pool allocation of every window (the scorer's) makes the
// kernel's event time move from window to window. Per set size (4 and 64 MiB; two sets per call
// in the pool, the one used and a decoy, one output per call) windows of 20 queued scale calls
// alternate: fresh (a new pool lent at T0, released after) and reuse (one pool lent once, refilled
// before every window). Untimed: the pool filled on the GPU from a new seed, outputs poisoned,
// 256 MiB written (L2), the worker primed with 100 us of GPU work. It prints median, min, max, CV
// and IQR/median of the driver's and the events' time per call, and the CV of the medians of
// groups of 20 windows (a scorer's figure).
//
// `spread-procs` asks whether the worker process itself moves that figure. Per set size, 1 + G
// groups of 20 fresh windows (as in spread) in two arrangements, interleaved group by group:
// same (every group in one worker process) and new (every group in a new worker process with its
// own CUDA context and its own shared allocation, the one before told to quit and reaped). The
// workers are all forked at the start, before the driver touches CUDA, and sleep until woken
// one at a time. Per arrangement it prints the median, min, max and CV over the groups (the
// first discarded) of each group's median driver and event time per call.
//
// With EXCHANGE_PIN=D,W the driver runs on CPU D and every worker on CPU W (spread-procs only):
// whether the two processes' placement (two spinners on one core) moves the figure.
//
// `gate` asks whether a window queued on the GPU behind a gate hides a slow host launch (a
// Python or Triton launch of 20-45 us, which a queued window of short kernels times today). Per
// set size (4, 16 and 64 MiB) and host launch cost L (0, 25 and 50 us of busy waiting before each
// launch), windows of 20 calls in these modes, interleaved window by window:
//   queued      today's: the pool lent at T0, the worker launches the calls (L before each), then
//               synchronises and says done
//   gated       untimed, the worker maps the pool and queues a gate kernel (it spins on a word of
//               the shared page, host memory mapped for the GPU) and then the calls (L before
//               each); timed, T0, the driver's own CPU store opens the gate, the worker
//               synchronises and says done, T1
//   gated-fill  as gated, but the driver fills the pool, poisons the outputs and writes the L2
//               flush only after the calls are queued (while the gate spins in the worker's
//               context), then waits for the gate's heartbeat to move (the GPU is back in the
//               worker's context) before T0: what the candidate could see before T0 is not yet
//               its inputs
//   gated-copy  as gated, but the window's inputs reach the pool only inside the clock: T0, the
//               driver copies the 20 sets the calls use from its own memory into the pool (copy
//               engine), waits for the copy, opens the gate; so nothing input-dependent can be done
//               untimed, and the copy, in every window, was to be calibrated away with the rest
//               (on an H100 it was not: docs/scoring.md, "Hiding the host's launch behind a gate")
//   gated-map   the pool's bytes stay out of the worker until T0, as in queued, but its addresses
//               do not: untimed, the worker reserves the pool's address range (nothing mapped
//               there) and queues the gate and the calls with pointers into it; timed, T0, the
//               driver sends the pool's descriptor, the worker maps it into the reserved range,
//               opens the gate itself (a kernel that ran before the mapping would fault, so an
//               early opening gains nothing), synchronises, done
//   and each mode's empty window (no calls), the calibration. It prints per mode the driver's
//   time per call (median, CV), the worker's events per call (from the gate's end), the net time
//   (less the empty window's median) and, for gated-fill, how long the untimed fill took.
//
//   exchange_bench [ITERS] [full|pool|tlb|spread|spread-procs|gate]
//   (nvcc -O2 -o exchange_bench exchange_bench.cu -lcuda; spread: ITERS windows per mode, 60 if
//   ITERS is not above 0; spread-procs: ITERS groups per arrangement, 8 if not above 0; gate:
//   ITERS windows per mode, 30 if not above 0)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sched.h>
#include <string>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <tuple>
#include <vector>

#include "../../common/quantile.h"  // header-only; this file is built by hand with nvcc

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

constexpr int kSpreadCalls = 20;   // calls of a spread window
constexpr int kGroupWindows = 20;  // windows of a spread group (a scorer's figure)

struct Page {
  std::atomic<uint32_t> go{0}, done{0};
  uint32_t kernel = 0;  // 0 empty, 1 scale, 2 quit, 3 prime (an empty kernel, untimed),
                        // 4 spread window, 5 spread prime (100 us of GPU work, untimed),
                        // 6 gate: queue a gated window, 7 gate: synchronise it,
                        // 8 gated-map: reserve and queue, 9 gated-map: map, open, synchronise
  uint32_t lend = 0;    // 1: this call's input comes as a new allocation's descriptor after go
  uint64_t elems = 0;
  uint64_t lendBytes = 0;
  float eventUs = 0;
  float mapUs = 0;      // the worker's import and mapping of a lent input
  // pool strategy: this call's input is slot `slot` of the window's pool (`slotBytes` apart),
  // its output buffer `outIdx`; poolStart: receive and map the pool first; poolEnd: unmap after.
  uint32_t poolStart = 0, poolEnd = 0, slot = 0, outIdx = 0;
  uint32_t twice = 0;   // pool: run the kernel a second time on the same set, untimed by the driver
  float event2Us = 0;   // ...and its event time (the same pages, now in the GPU's TLBs)
  uint64_t slotBytes = 0, poolBytes = 0;
  // spread: the worker's pool `which` (0 fresh, 1 reuse), `calls` calls, call j on slot slots[j]
  uint32_t which = 0, calls = 0;
  uint32_t slots[kSpreadCalls] = {};
  // gate: the host launch cost before each call, the gate word the gate kernel waits for (the
  // driver opens it with a CPU store), the gate kernel's heartbeat and whether it timed out.
  uint32_t launchNs = 0;
  std::atomic<uint32_t> gate{0};
  uint32_t gateTimedOut = 0;
  uint64_t beat = 0;
};
static_assert(sizeof(Page) <= 4096, "the page is one shared page");

__global__ void emptyKernel() {}
__global__ void scaleKernel(const float4* in, float4* out, uint64_t n4) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n4; i += uint64_t(gridDim.x) * blockDim.x) {
    float4 v = in[i];
    out[i] = make_float4(v.x * 2.f, v.y * 2.f, v.z * 2.f, v.w * 2.f);
  }
}

// Fills n4 float4s with values in [0, 4) drawn from `seed` and the index.
__global__ void fillKernel(float4* p, uint64_t n4, uint32_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n4; i += uint64_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ uint32_t(i >> 32) ^ seed;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    const float f = float(x >> 8) * (1.f / 16777216.f);
    p[i] = make_float4(f, f + 1.f, f + 2.f, f + 3.f);
  }
}

// Spins one thread for `ns` nanoseconds of the GPU's global timer.
__global__ void spinKernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// The gate: one thread spins until the host word `gate` reads `want` (or 5 s pass), writing a
// heartbeat to host memory as it goes, so the driver can see the GPU running this context.
__global__ void gateKernel(const volatile uint32_t* gate, uint32_t want, volatile uint64_t* beat,
                           volatile uint32_t* timedOut) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (uint64_t i = 1;; ++i) {
    if (*gate == want) return;
    *beat = i;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > 5000000000ull) {
      *timedOut = 1;
      return;
    }
  }
}

// Busy-waits `ns` of host time: a launch that costs that much on the host (Python, Triton).
void hostCost(uint32_t ns) {
  if (ns == 0) return;
  const auto until = Clock::now() + std::chrono::nanoseconds(ns);
  while (Clock::now() < until) __builtin_ia32_pause();
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

// The allocation a descriptor names (another process's export); closes the descriptor.
CUmemGenericAllocationHandle importFd(int fd) {
  CUmemGenericAllocationHandle h{};
  CU(cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(fd);
  return h;
}

// Maps h at `base` (an address range reserved for it) read-write for device 0.
void mapAt(CUdeviceptr base, CUmemGenericAllocationHandle h, size_t size) {
  CU(cuMemMap(base, size, 0, h, 0));
  CUmemAccessDesc a{};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = 0;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(base, size, &a, 1));
}

void* mapHandle(CUmemGenericAllocationHandle h, size_t size) {
  CUdeviceptr base;
  CU(cuMemAddressReserve(&base, size, 0, 0, 0));
  mapAt(base, h, size);
  return reinterpret_cast<void*>(base);
}

constexpr uint64_t kMaxBytes = uint64_t(64) << 20;
constexpr int kMaxCalls = 20;  // output buffers after the in/out pair: one per call of a pool or spread window
static_assert(kSpreadCalls <= kMaxCalls, "a spread window's outputs live in the shared allocation");

// The worker's part of the spread mode. 5: the prime, 100 us of GPU work, synchronised. 4: a
// window: pool `which` received and mapped first if it comes now (poolStart), then `calls` scale
// calls back to back on the stream, events around them all, synchronise, done; the pool unmapped
// after if poolEnd. Call j reads slot slots[j] of the pool and writes output j of `outs`.
void spreadStep(Page* page, int sock, unsigned char* outs, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, uint32_t n) {
  static CUmemGenericAllocationHandle pools[2] = {};
  static CUdeviceptr bases[2] = {0, 0};
  if (page->kernel == 5) {
    spinKernel<<<1, 1, 0, s>>>(100000);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s));
    page->done.store(n, std::memory_order_release);
    return;
  }
  // Read before done: the driver may write the page for the next window once it sees done.
  const uint32_t w = page->which, calls = page->calls;
  const uint64_t size = page->poolBytes;
  const bool end = page->poolEnd;
  page->mapUs = 0;
  if (page->poolStart) {
    const auto m0 = Clock::now();
    const int pfd = receiveFd(sock);
    pools[w] = importFd(pfd);
    bases[w] = reinterpret_cast<CUdeviceptr>(mapHandle(pools[w], size));
    page->mapUs = std::chrono::duration<float, std::micro>(Clock::now() - m0).count();
  }
  if (w > 1 || !bases[w] || calls > uint32_t(kSpreadCalls)) {
    std::fprintf(stderr, "spread: pool %u not mapped or %u calls\n", w, calls);
    std::exit(1);
  }
  const unsigned char* pool = reinterpret_cast<const unsigned char*>(bases[w]);
  CK(cudaEventRecord(e0, s));
  for (uint32_t j = 0; j < calls; ++j) {
    hostCost(page->launchNs);
    launch(page->elems ? 1 : 0, pool + uint64_t(page->slots[j]) * page->slotBytes, outs + uint64_t(j) * kMaxBytes,
           page->elems, s);
  }
  CK(cudaGetLastError());
  CK(cudaEventRecord(e1, s));
  CK(cudaStreamSynchronize(s));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  page->eventUs = calls ? ms * 1000.f / float(calls) : 0.f;
  page->done.store(n, std::memory_order_release);
  if (end) {
    CU(cuMemUnmap(bases[w], size));
    CU(cuMemAddressFree(bases[w], size));
    CU(cuMemRelease(pools[w]));
    bases[w] = 0;
  }
}

// The page's gate words as the GPU sees them (the page registered as mapped host memory).
struct GateWords {
  const volatile uint32_t* gate = nullptr;
  volatile uint64_t* beat = nullptr;
  volatile uint32_t* timedOut = nullptr;
};

GateWords mapGateWords(Page* page) {
  CK(cudaHostRegister(page, 4096, cudaHostRegisterMapped));
  unsigned char* dev = nullptr;
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), page, 0));
  auto at = [&](const void* field) { return dev + (static_cast<const unsigned char*>(field) - reinterpret_cast<unsigned char*>(page)); };
  return {reinterpret_cast<const volatile uint32_t*>(at(&page->gate)), reinterpret_cast<volatile uint64_t*>(at(&page->beat)),
          reinterpret_cast<volatile uint32_t*>(at(&page->gateTimedOut))};
}

// The worker's part of the gate mode. 6 (untimed): receive and map the window's pool, queue the
// gate kernel (it opens when the page's gate word reads n) and after it `calls` calls, each after
// the host launch cost, with events around the calls; done. 7 (timed): synchronise, the events'
// time per call into the page, done; then unmap the pool.
// 8 and 9 are gated-map's: 8 (untimed) reserves the pool's address range and queues the gate and
// the calls into it, 9 (timed) receives the pool, maps it there, opens the gate, synchronises.
void gateStep(Page* page, int sock, unsigned char* outs, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, uint32_t n) {
  static const GateWords words = mapGateWords(page);  // on the first gate window only
  static CUmemGenericAllocationHandle pool{};
  static CUdeviceptr base = 0;
  static uint64_t size = 0;
  static uint32_t calls = 0, queuedAt = 0;
  if (page->kernel == 9) {
    pool = importFd(receiveFd(sock));
    mapAt(base, pool, size);
    page->gate.store(queuedAt, std::memory_order_release);  // the worker's own store: see the top
  }
  if (page->kernel == 6 || page->kernel == 8) {
    size = page->poolBytes;
    calls = page->calls;
    queuedAt = n;
    if (page->kernel == 6) {
      pool = importFd(receiveFd(sock));
      base = reinterpret_cast<CUdeviceptr>(mapHandle(pool, size));
    } else {
      CU(cuMemAddressReserve(&base, size, 0, 0, 0));
    }
    if (calls > uint32_t(kSpreadCalls)) std::fprintf(stderr, "gate: %u calls\n", calls), std::exit(1);
    page->gateTimedOut = 0;
    gateKernel<<<1, 1, 0, s>>>(words.gate, n, words.beat, words.timedOut);
    CK(cudaEventRecord(e0, s));
    const unsigned char* in = reinterpret_cast<const unsigned char*>(base);
    for (uint32_t j = 0; j < calls; ++j) {
      hostCost(page->launchNs);
      launch(page->elems ? 1 : 0, in + uint64_t(page->slots[j]) * page->slotBytes, outs + uint64_t(j) * kMaxBytes,
             page->elems, s);
    }
    CK(cudaEventRecord(e1, s));
    CK(cudaGetLastError());
    page->done.store(n, std::memory_order_release);
    return;
  }
  CK(cudaStreamSynchronize(s));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  page->eventUs = calls ? ms * 1000.f / float(calls) : 0.f;
  page->done.store(n, std::memory_order_release);
  CU(cuMemUnmap(base, size));
  CU(cuMemAddressFree(base, size));
  CU(cuMemRelease(pool));
  base = 0;
}

void worker(Page* page, int sock) {
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  const int fd = receiveFd(sock);
  uint64_t size = 0;
  if (read(sock, &size, sizeof size) != sizeof size) std::exit(1);
  const CUmemGenericAllocationHandle h = importFd(fd);
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
    if (page->kernel >= 6 && page->kernel <= 9) {
      gateStep(page, sock, base + 2 * kMaxBytes, s, e0, e1, n);
      continue;
    }
    if (page->kernel == 3) {
      launch(0, nullptr, nullptr, 0, s);
      CK(cudaStreamSynchronize(s));
      page->done.store(n, std::memory_order_release);
      continue;
    }
    if (page->kernel == 4 || page->kernel == 5) {
      spreadStep(page, sock, base + 2 * kMaxBytes, s, e0, e1, n);
      continue;
    }
    if (page->poolStart || page->slotBytes) {
      static CUmemGenericAllocationHandle pool{};
      static CUdeviceptr poolBase = 0;
      if (page->poolStart) {
        const auto m0 = Clock::now();
        const int pfd = receiveFd(sock);
        pool = importFd(pfd);
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
      if (page->twice) {
        CK(cudaEventRecord(e0, s));
        launch(page->kernel, pin, pout, page->elems, s);
        CK(cudaEventRecord(e1, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaEventElapsedTime(&pms, e0, e1));
        page->event2Us = pms * 1000.f;
      }
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
      lent = importFd(lfd);
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
  auto q = [&](double f) { return akad::quantileOfSorted(v, f); };
  double mean = 0, var = 0;
  // CV over the middle 80%, so a rare preemption does not dominate.
  const size_t lo = v.size() / 10, hi = v.size() - v.size() / 10;
  for (size_t i = lo; i < hi; ++i) mean += v[i];
  mean /= double(hi - lo);
  for (size_t i = lo; i < hi; ++i) var += (v[i] - mean) * (v[i] - mean);
  return {q(0.5), q(0.1), q(0.9), std::sqrt(var / double(hi - lo)) / mean};
}

// The spread mode's figures over all windows: cv is stddev / mean (n - 1), iqr is
// (p75 - p25) / median, both as fractions.
struct Spread {
  double median, min, max, cv, iqr;
};

Spread spreadOf(std::vector<double> v) {
  if (v.size() < 2) return {NAN, NAN, NAN, NAN, NAN};
  std::sort(v.begin(), v.end());
  auto q = [&](double f) { return akad::quantileOfSorted(v, f); };
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / double(v.size() - 1));
  return {q(0.5), v.front(), v.back(), sd / mean, (q(0.75) - q(0.25)) / q(0.5)};
}

// The medians of consecutive groups of `group` windows (a last partial group left out); *count
// gets their number.
std::vector<double> groupMedians(const std::vector<double>& v, size_t group, size_t* count) {
  std::vector<double> m;
  for (size_t i = 0; i + group <= v.size(); i += group)
    m.push_back(akad::median(std::vector<double>(v.begin() + long(i), v.begin() + long(i + group))));
  *count = m.size();
  return m;
}

// One allocation of the spread mode, mapped in the driver and exported.
struct SpreadPool {
  CUmemGenericAllocationHandle h{};
  void* mine = nullptr;
  uint64_t size = 0;
  int fd = -1;
};

// A worker process of spread-procs: its pid, the driver's end of its socket, its page and, once
// woken, the allocation shared with it.
struct Worker {
  pid_t pid = -1;
  int sock = -1;
  Page* page = nullptr;
  SpreadPool shared;
};

// EXCHANGE_PIN=D,W (spread-procs): the driver on CPU D, every worker on CPU W; unset, wherever
// the kernel puts them. Both processes spin on the page, so two that share a core slow each
// other: this asks how much of the spread between worker processes is their placement.
struct Pin {
  int driver = -1, worker = -1;
};

Pin pinFromEnv() {
  Pin p;
  const char* v = std::getenv("EXCHANGE_PIN");
  if (v != nullptr && std::sscanf(v, "%d,%d", &p.driver, &p.worker) != 2) {
    std::fprintf(stderr, "EXCHANGE_PIN=%s: want DRIVER_CPU,WORKER_CPU\n", v);
    std::exit(2);
  }
  return p;
}

void pinTo(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("sched_setaffinity"), std::exit(1);
}

std::string siblingsOf(int cpu) {
  std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
  std::string line;
  return std::getline(f, line) ? line : "?";
}

// Forks n workers for spread-procs. Called before this process touches CUDA (a child forked after
// may not use CUDA): each sleeps in a read of its socket, with no CUDA context, until woken by
// one byte, then is the ordinary worker on its own page; the end of the socket (the driver gone)
// ends it unwoken.
std::vector<Worker> forkWorkers(int n, int workerCpu) {
  void* mem = mmap(nullptr, size_t(n) * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) std::perror("mmap"), std::exit(1);
  std::vector<Worker> ws(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Page* page = new (static_cast<unsigned char*>(mem) + size_t(i) * 4096) Page();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) std::perror("socketpair"), std::exit(1);
    const pid_t pid = fork();
    if (pid < 0) std::perror("fork"), std::exit(1);
    if (pid == 0) {
      for (int j = 0; j < i; ++j) close(ws[size_t(j)].sock);  // so each sees the driver go
      close(sv[0]);
      pinTo(workerCpu);
      char wake;
      if (read(sv[1], &wake, 1) == 1) worker(page, sv[1]);
      _exit(0);
    }
    close(sv[1]);
    ws[size_t(i)].pid = pid;
    ws[size_t(i)].sock = sv[0];
    ws[size_t(i)].page = page;
  }
  return ws;
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
    void* dsts[1] = {dst};
    const void* srcs[1] = {src};
    size_t sizes[1] = {n};
    batchCopy(dsts, srcs, sizes, 1);
  }

  // n copies on the stream in one batch, hinted onto a copy engine (PREFER_OVERLAP_WITH_COMPUTE).
  void batchCopy(void** dsts, const void** srcs, size_t* sizes, size_t n) {
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t idx = 0;
    CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, n, &attr, &idx, 1, s));
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

  // Queues a read of 16 random 4 KiB pieces of `out` into sampleHost through a copy engine.
  void queuePieces(const unsigned char* out, uint64_t bytes) {
    void* dsts[16];
    const void* srcs[16];
    size_t sizes[16];
    const uint64_t pieces = std::max<uint64_t>(1, bytes / 4096);
    for (int i = 0; i < 16; ++i) {
      dsts[i] = static_cast<unsigned char*>(sampleHost) + i * 4096;
      srcs[i] = out + (next() % pieces) * 4096;
      sizes[i] = 4096;
    }
    batchCopy(dsts, srcs, sizes, 16);
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
      queuePieces(out, bytes);
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
  // driver queues a read of 16 random 4 KiB pieces of that call's output (copy engine) and goes
  // on; the window ends when the last pieces are in (as tasks/common/hip/driver_main.hip does).
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
      // Queued, not waited for: the drivers wait once, at the window's end.
      queuePieces(shared + 2 * kMaxBytes + uint64_t(j) * kMaxBytes, bytes);
    }
    CK(cudaStreamSynchronize(s));
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

  SpreadPool makePool(uint64_t bytes) {
    SpreadPool pool;
    pool.size = (bytes + gran - 1) / gran * gran;
    const CUmemAllocationProp p = props();
    CU(cuMemCreate(&pool.h, pool.size, &p, 0));
    pool.mine = mapHandle(pool.h, pool.size);
    CU(cuMemExportToShareableHandle(&pool.fd, pool.h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    return pool;
  }

  void freePool(SpreadPool& pool) {
    close(pool.fd);
    CU(cuMemUnmap(reinterpret_cast<CUdeviceptr>(pool.mine), pool.size));
    CU(cuMemAddressFree(reinterpret_cast<CUdeviceptr>(pool.mine), pool.size));
    CU(cuMemRelease(pool.h));
    pool = SpreadPool{};
  }

  // This process's CUDA: device 0, the driver API, the allocation granularity.
  void init() {
    CK(cudaSetDevice(0));
    CU(cuInit(0));
    const CUmemAllocationProp p = props();
    size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    gran = g;
  }

  // A new allocation for the in/out pair and kMaxCalls outputs, lent to the worker at `sock`,
  // which maps it and answers; it becomes `shared`.
  SpreadPool share() {
    SpreadPool sh = makePool((2 + kMaxCalls) * kMaxBytes);
    sendFd(sock, sh.fd);
    if (write(sock, &sh.size, sizeof sh.size) != sizeof sh.size) std::perror("write"), std::exit(1);
    char ok;
    if (read(sock, &ok, 1) != 1) std::perror("read"), std::exit(1);
    shared = static_cast<unsigned char*>(sh.mine);
    return sh;
  }

  // Tells the worker to quit and reaps it; its exit status, 1 if it did not exit.
  int quit(pid_t pid) {
    page->kernel = 2;
    page->go.store(++seq, std::memory_order_release);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return std::perror("waitpid"), 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }

  // spread-procs: exchange with worker w from now on (the driver alone writes go, so go is seq).
  void bind(const Worker& w) {
    page = w.page;
    sock = w.sock;
    shared = static_cast<unsigned char*>(w.shared.mine);
    seq = page->go.load(std::memory_order_acquire);
  }

  // Wakes w (it creates its CUDA context now), lends it a new shared allocation, binds to it.
  void wake(Worker& w) {
    const char b = 'w';
    if (write(w.sock, &b, 1) != 1) std::perror("write"), std::exit(1);
    sock = w.sock;
    w.shared = share();
    bind(w);
  }

  // Tells w to quit, reaps it, then frees its shared allocation and socket; its exit status.
  int retire(Worker& w) {
    bind(w);
    const int rc = quit(w.pid);
    freePool(w.shared);
    close(w.sock);
    w.sock = -1;
    return rc;
  }

  static uint32_t seedOf(uint32_t k, uint64_t bytes) { return (k + 1) * 0x9e3779b9u ^ uint32_t(bytes >> 20); }

  // A fresh window (the scorer's kind): a new pool for K calls, lent at T0, released after.
  double freshWindow(uint64_t bytes, uint32_t seed, float* eventUs) {
    SpreadPool fresh = makePool(2 * kSpreadCalls * bytes);
    const double us = spreadWindow(fresh, 0, true, true, kSpreadCalls, bytes, seed, eventUs);
    freePool(fresh);
    return us;
  }

  // spread-procs: a group of kGroupWindows fresh windows, seeds from `first` on; appends its
  // median driver and event time per call.
  void freshGroup(uint64_t bytes, uint32_t first, std::vector<double>& drv, std::vector<double>& ev) {
    std::vector<double> a, b;
    for (uint32_t i = 0; i < uint32_t(kGroupWindows); ++i) {
      float e = 0;
      a.push_back(freshWindow(bytes, seedOf(first + i, bytes), &e));
      b.push_back(e);
    }
    drv.push_back(akad::median(a));
    ev.push_back(akad::median(b));
  }

  // One window of the spread mode on `pool`, the worker's pool `which`; lend: its descriptor
  // goes to the worker at T0 (mapped there before the first call); end: the worker unmaps it
  // after. Untimed: the pool filled from `seed`, the K outputs poisoned, 256 MiB written (L2),
  // the worker primed. Timed: T0, go, the worker's K calls back to back and its synchronise,
  // done, T1. Returns (T1 - T0) / K; *eventUs the worker's event time per call.
  double spreadWindow(const SpreadPool& pool, uint32_t which, bool lend, bool end, int K, uint64_t bytes,
                      uint32_t seed, float* eventUs) {
    fillKernel<<<132 * 8, 256, 0, s>>>(static_cast<float4*>(pool.mine), pool.size / sizeof(float4), seed);
    CK(cudaGetLastError());
    for (int j = 0; j < K; ++j) CK(cudaMemsetAsync(shared + 2 * kMaxBytes + uint64_t(j) * kMaxBytes, 0xff, bytes, s));
    CK(cudaMemsetAsync(flushBuf, int(seq & 0xff), uint64_t(256) << 20, s));
    CK(cudaStreamSynchronize(s));
    page->which = which;
    page->calls = uint32_t(K);
    page->slotBytes = bytes;
    page->poolBytes = pool.size;
    page->elems = bytes / 4;
    for (int j = 0; j < K; ++j) page->slots[j] = uint32_t(2 * j + next() % 2);  // the used set or the decoy
    page->poolStart = lend;
    page->poolEnd = end;
    exchange(5);
    const auto t0 = Clock::now();
    if (lend) sendFd(sock, pool.fd);
    exchange(4);
    const auto t1 = Clock::now();
    page->poolStart = page->poolEnd = 0;
    page->slotBytes = 0;
    *eventUs = page->eventUs;
    lastMapUs = page->mapUs;
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / K;
  }

  // exchange_bench ITERS spread: per set size, 5 + W windows of each mode, interleaved (fresh,
  // reuse, fresh, ...); the first 5 of each are discarded.
  void spread(int W) {
    constexpr int K = kSpreadCalls;
    for (uint64_t bytes : {uint64_t(4) << 20, kMaxBytes}) {
      SpreadPool reuse = makePool(2 * K * bytes);
      std::vector<double> drv[2], ev[2], mp[2];
      for (int i = 0; i < W + 5; ++i)
        for (int m = 0; m < 2; ++m) {
          const uint32_t seed = seedOf(uint32_t(2 * i + m), bytes);
          float e = 0;
          const double us = m == 0 ? freshWindow(bytes, seed, &e)
                                   : spreadWindow(reuse, 1, i == 0, i == W + 4, K, bytes, seed, &e);
          if (i >= 5) drv[m].push_back(us), ev[m].push_back(e), mp[m].push_back(lastMapUs);
        }
      freePool(reuse);
      for (int m = 0; m < 2; ++m) spreadReport(bytes, m ? "reuse" : "fresh", drv[m], ev[m], mp[m]);
    }
  }

  // Waits (at most 1 s) until the gate kernel's heartbeat moves: the GPU runs the worker's
  // context now. Ends the benchmark if it does not.
  void awaitGate() {
    const volatile uint64_t* beat = &page->beat;
    const uint64_t b0 = *beat;
    const auto until = Clock::now() + std::chrono::seconds(1);
    while (*beat == b0)
      if (Clock::now() > until) std::fprintf(stderr, "gate: the gate kernel's heartbeat did not move\n"), std::exit(1);
  }

  // After a gated window: ends the benchmark if the gate gave up waiting (5 s).
  void checkGateInTime() {
    if (page->gateTimedOut) std::fprintf(stderr, "gate: the gate timed out\n"), std::exit(1);
  }

  void* gateStaging = nullptr;  // gated-copy: the driver's own copy of a window's 20 input sets

  // One window of the gate mode (see the top): mode 0 queued, 1 gated, 2 gated-fill, 3 gated-copy,
  // 4 gated-map; `calls`
  // calls (0: the empty window) of `bytes` each with `launchNs` of host cost before each launch.
  // Returns the driver's time over kSpreadCalls; *eventUs the worker's events per call, *fillUs
  // the untimed fill of gated-fill.
  double gateWindow(int mode, uint32_t calls, uint64_t bytes, uint32_t seed, uint32_t launchNs, float* eventUs,
                    double* fillUs) {
    constexpr int K = kSpreadCalls;
    SpreadPool pool = makePool(2 * K * bytes);
    auto prepare = [&] {
      if (mode == 3)
        fillKernel<<<132 * 8, 256, 0, s>>>(static_cast<float4*>(gateStaging), K * bytes / sizeof(float4), seed);
      else
        fillKernel<<<132 * 8, 256, 0, s>>>(static_cast<float4*>(pool.mine), pool.size / sizeof(float4), seed);
      CK(cudaGetLastError());
      for (int j = 0; j < K; ++j) CK(cudaMemsetAsync(shared + 2 * kMaxBytes + uint64_t(j) * kMaxBytes, 0xff, bytes, s));
      CK(cudaMemsetAsync(flushBuf, int(seed & 0xff), uint64_t(256) << 20, s));
      CK(cudaStreamSynchronize(s));
    };
    page->which = 0;
    page->calls = calls;
    page->slotBytes = bytes;
    page->poolBytes = pool.size;
    page->elems = bytes / 4;
    page->launchNs = launchNs;
    for (int j = 0; j < K; ++j) page->slots[j] = uint32_t(2 * j + next() % 2);
    *fillUs = 0;
    Clock::time_point t0, t1;
    if (mode == 0) {
      prepare();
      page->poolStart = page->poolEnd = 1;
      exchange(5);
      t0 = Clock::now();
      sendFd(sock, pool.fd);
      exchange(4);
      t1 = Clock::now();
      page->poolStart = page->poolEnd = 0;
    } else if (mode == 4) {
      prepare();
      exchange(8);  // untimed: the worker reserves the pool's addresses, queues the gate and the calls
      awaitGate();
      t0 = Clock::now();
      sendFd(sock, pool.fd);
      exchange(9);
      t1 = Clock::now();
      checkGateInTime();
    } else {
      if (mode != 2) prepare();
      sendFd(sock, pool.fd);
      exchange(6);  // untimed: the worker maps the pool and queues the gate and the calls
      const uint32_t want = seq;
      if (mode == 2) {
        const auto f0 = Clock::now();
        prepare();
        *fillUs = std::chrono::duration<double, std::micro>(Clock::now() - f0).count();
      }
      awaitGate();
      t0 = Clock::now();
      if (mode == 3) {
        void* dsts[kSpreadCalls];
        const void* srcs[kSpreadCalls];
        size_t sizes[kSpreadCalls];
        for (int j = 0; j < K; ++j) {
          dsts[j] = static_cast<unsigned char*>(pool.mine) + uint64_t(page->slots[j]) * bytes;
          srcs[j] = static_cast<unsigned char*>(gateStaging) + uint64_t(j) * bytes;
          sizes[j] = bytes;
        }
        batchCopy(dsts, srcs, sizes, K);
        CK(cudaStreamSynchronize(s));
      }
      page->gate.store(want, std::memory_order_release);
      exchange(7);
      t1 = Clock::now();
      checkGateInTime();
    }
    page->launchNs = 0;
    freePool(pool);
    *eventUs = page->eventUs;
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / K;
  }

  // exchange_bench ITERS gate (see the top): per size and host launch cost, 3 + W windows of
  // each mode and its empty window, interleaved; the first 3 of each are discarded.
  void gate(int W) {
    static const char* names[5] = {"queued", "gated", "gated-fill", "gated-copy", "gated-map"};
    for (uint64_t bytes : {uint64_t(4) << 20, uint64_t(16) << 20, kMaxBytes}) {
      CK(cudaMalloc(&gateStaging, kSpreadCalls * bytes));
      for (uint32_t launchNs : {0u, 25000u, 50000u}) {
        std::vector<double> drv[5][2], ev[5][2], fill;
        uint32_t window = 0;
        for (int i = 0; i < W + 3; ++i)
          for (int m = 0; m < 5; ++m)
            for (int e = 0; e < 2; ++e) {
              float evUs = 0;
              double fillUs = 0;
              const double us = gateWindow(m, e ? 0 : kSpreadCalls, bytes, seedOf(window++, bytes), launchNs, &evUs, &fillUs);
              if (i < 3) continue;
              drv[m][e].push_back(us);
              ev[m][e].push_back(evUs);
              if (m == 2 && e == 0) fill.push_back(fillUs);
            }
        for (int m = 0; m < 5; ++m) {
          const Spread a = spreadOf(drv[m][0]), b = spreadOf(ev[m][0]), c = spreadOf(drv[m][1]);
          std::printf("gate size=%lluMiB launch_us=%u mode=%s windows=%zu calls=%d driver_us med=%.2f cv=%.2f%% "
                      "events_us med=%.2f empty_us med=%.2f cv=%.2f%% net_us=%.2f net_minus_events_us=%.2f",
                      static_cast<unsigned long long>(bytes >> 20), launchNs / 1000, names[m], drv[m][0].size(),
                      kSpreadCalls, a.median, 100 * a.cv, b.median, c.median, 100 * c.cv, a.median - c.median,
                      a.median - c.median - b.median);
          if (m == 2) std::printf(" untimed_fill_us med=%.1f max=%.1f", spreadOf(fill).median, spreadOf(fill).max);
          std::printf("\n");
          std::fflush(stdout);
        }
      }
      CK(cudaFree(gateStaging));
      gateStaging = nullptr;
    }
  }

  static void spreadReport(uint64_t bytes, const char* mode, const std::vector<double>& drv,
                           const std::vector<double>& ev, const std::vector<double>& mp) {
    const Spread a = spreadOf(drv), b = spreadOf(ev);
    const unsigned long long mib = bytes >> 20;
    std::printf("spread size=%lluMiB mode=%s windows=%zu calls=%d driver_us med=%.2f min=%.2f max=%.2f cv=%.2f%% "
                "iqr=%.2f%% events_us med=%.2f min=%.2f max=%.2f cv=%.2f%% iqr=%.2f%% map_us med=%.1f\n",
                mib, mode, drv.size(), kSpreadCalls, a.median, a.min, a.max, 100 * a.cv, 100 * a.iqr, b.median, b.min,
                b.max, 100 * b.cv, 100 * b.iqr, akad::median(mp));
    size_t groups = 0;
    const Spread ga = spreadOf(groupMedians(drv, kGroupWindows, &groups)),
                 gb = spreadOf(groupMedians(ev, kGroupWindows, &groups));
    std::printf("spread-groups size=%lluMiB mode=%s groups=%zux%d driver_median_cv=%.2f%% events_median_cv=%.2f%%\n",
                mib, mode, groups, kGroupWindows, 100 * ga.cv, 100 * gb.cv);
    std::fflush(stdout);
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

void procsReport(uint64_t bytes, const char* arrangement, const std::vector<double>& drv,
                 const std::vector<double>& ev) {
  const Spread a = spreadOf(drv), b = spreadOf(ev);
  std::printf("spread-procs size=%lluMiB arrangement=%s groups=%zu driver_group_median_us med=%.2f min=%.2f max=%.2f "
              "cv=%.2f%% events_group_median_us med=%.2f min=%.2f max=%.2f cv=%.2f%%\n",
              static_cast<unsigned long long>(bytes >> 20), arrangement, drv.size(), a.median, a.min, a.max,
              100 * a.cv, b.median, b.min, b.max, 100 * b.cv);
  std::fflush(stdout);
}

// exchange_bench ITERS spread-procs (see the top): per set size, 1 + G groups of each
// arrangement, interleaved (same, new, same, new, ...), the first of each discarded. Every
// worker is forked here, before this process touches CUDA; per size one for same, woken before
// its first group and kept to the last, and one per group of new, woken for that group alone and
// reaped before the next is woken. Returns 0 if every worker exited 0.
int spreadProcs(int G) {
  const uint64_t sizes[2] = {uint64_t(4) << 20, kMaxBytes};
  const int perSize = 1 + (G + 1);
  const Pin pin = pinFromEnv();
  pinTo(pin.driver);  // the workers, forked below, move to their own
  std::vector<Worker> ws = forkWorkers(2 * perSize, pin.worker);
  if (pin.driver >= 0)
    std::printf("# pinned: driver on cpu %d (its core's cpus %s), workers on cpu %d (its core's cpus %s)\n", pin.driver,
                siblingsOf(pin.driver).c_str(), pin.worker, siblingsOf(pin.worker).c_str());
  else
    std::printf("# not pinned (EXCHANGE_PIN=D,W pins them); cpu 0's core: cpus %s\n", siblingsOf(0).c_str());
  Driver d{};
  d.init();
  CK(cudaMalloc(&d.flushBuf, uint64_t(256) << 20));
  CK(cudaStreamCreateWithFlags(&d.s, cudaStreamNonBlocking));
  std::printf("# spread-procs: groups of %d fresh windows of %d calls; same: every group in one worker process, "
              "new: every group in a new worker process (its own CUDA context and shared allocation); a group's "
              "figure is its median window, med/min/max/cv are over %d groups (the first of each discarded)\n",
              kGroupWindows, kSpreadCalls, G);
  std::fflush(stdout);
  int rc = 0;
  uint32_t window = 0;  // the seeds' count, on across groups
  for (int z = 0; z < 2; ++z) {
    const uint64_t bytes = sizes[z];
    Worker* w = &ws[size_t(z * perSize)];  // w[0] same, w[1 + g] new group g
    std::vector<double> drv[2], ev[2];     // [0] same, [1] new
    d.wake(w[0]);
    for (int g = 0; g <= G; ++g) {
      d.bind(w[0]);
      d.freshGroup(bytes, window, drv[0], ev[0]);
      window += kGroupWindows;
      d.wake(w[1 + g]);
      d.freshGroup(bytes, window, drv[1], ev[1]);
      window += kGroupWindows;
      rc |= d.retire(w[1 + g]);
    }
    rc |= d.retire(w[0]);
    for (int a = 0; a < 2; ++a) {
      drv[a].erase(drv[a].begin());
      ev[a].erase(ev[a].begin());
      procsReport(bytes, a ? "new" : "same", drv[a], ev[a]);
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 300;
  // Its workers are forked before this process touches CUDA, as the one below is.
  if (argc > 2 && std::string(argv[2]) == "spread-procs") return spreadProcs(iters > 0 ? iters : 8);
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
  Driver d{};
  d.page = page;
  d.sock = sv[0];
  d.init();
  d.share();
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

  if (argc > 2 && std::string(argv[2]) == "spread") {
    // exchange_bench ITERS spread: fresh against reused pools, window by window (see the top).
    d.spread(iters > 0 ? iters : 60);
    return d.quit(pid);
  }
  if (argc > 2 && std::string(argv[2]) == "gate") {
    d.gate(iters > 0 ? iters : 30);
    return d.quit(pid);
  }
  std::printf("%-7s %-4s %-6s %8s | %9s %9s %9s %6s | %9s %7s\n", "strat", "pre", "kernel", "bytes", "median_us",
              "p10_us", "p90_us", "cv", "event_us", "map_us");
  if (argc > 2 && std::string(argv[2]) == "tlb") {
    // exchange_bench ITERS tlb: a kernel's event time on a freshly lent pool set (first run) and
    // on the same set again (second run: the pages' translations are warm; L2 holds little of
    // 64 MiB, more of smaller sets).
    std::printf("%8s %-6s | %9s %9s\n", "bytes", "kernel", "first_us", "second_us");
    page->twice = 1;
    for (uint64_t bytes : {uint64_t(4) << 20, uint64_t(16) << 20, kMaxBytes}) {
      std::vector<double> a, b;
      for (int i = 0; i < std::max(20, iters / 16) + 5; ++i) {
        float e = 0;
        d.poolWindow(16, 2, false, 1, bytes, &e);
        if (i >= 5) a.push_back(e), b.push_back(page->event2Us);
      }
      std::printf("%8llu %-6s | %9.1f %9.1f\n", static_cast<unsigned long long>(bytes), "scale", statsOf(a).median,
                  statsOf(b).median);
    }
    page->twice = 0;
    return d.quit(pid);
  }
  if (argc > 2 && std::string(argv[2]) == "pool") {
    // exchange_bench ITERS pool: per-call window of the pool strategy against the event time.
    std::printf("%-9s %8s %-6s | %9s %9s %9s %6s | %9s %7s\n", "K x M", "bytes", "kernel", "call_us", "p10_us",
                "p90_us", "cv", "event_us", "map_us");
    for (int round = 0; round < 2; ++round)
      for (uint64_t bytes : {uint64_t(256) << 10, uint64_t(1) << 20, uint64_t(4) << 20, uint64_t(16) << 20, kMaxBytes})
        for (auto [K, M, read] : {std::tuple{1, 1, true}, std::tuple{10, 2, true}, std::tuple{16, 4, true},
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
    return d.quit(pid);
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
  return d.quit(pid);
}
