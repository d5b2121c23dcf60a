// driver - trusted, the hip harness's: owns the GPU buffers, the clock, the inputs and the choice
// of which outputs to verify, and lends the worker (runner serve, the candidate's kernel) only
// the device memory a call needs (docs/scoring.md, "Driver and worker"). Linked from this file
// + the task's reference.cpp, never with kernel.hip; it runs in a sandbox of its own, outside
// the worker's pid namespace.
//
//   driver check --plan P --channel SOCK --out O [--worker CMD...]
//   driver perf  --plan P --channel SOCK --out O [--worker CMD...]
//
// The command lines, the channel's messages up to the region, the output files (O/<case>.out.akt
// and O/<case>.ref.akt per kept call, O/verify.json, O/report.json) and the exit status are the
// cpp driver's (driver_main.cpp, which this file includes for those parts). What differs:
//
// Memory. Per configuration the driver makes one device allocation holding one output set per
// call of a window and passes it to the worker as a file descriptor (akavmm.h): after the header
// page's memfd ({"type": "region"}, tensors none) comes {"type": "device", "size", "inputs": [],
// "outputs": [offsets], "output_sets", "output_stride"} with the allocation's descriptor. Each
// window's inputs come in a new allocation of their own, its pool, sent as {"type": "pool",
// "size", "sets", "stride", "offsets"} with its descriptor only after the clock has started.
// Everything else the driver keeps in allocations of its own process, which the worker cannot
// address: the host copies of the outputs and the pieces it reads.
//
// A window of calls, on the driver's steady_clock (docs/scoring.md, "GPU harnesses"):
//   untimed: make the pool's input sets, each from a fresh getrandom seed, straight into the
//     new allocation (per timed call two sets: the one it uses and a decoy): on the GPU when
//     the task's akaGenerate is made of fillUniform fills (DeviceFills), else with akaGenerate
//     on several host threads; fill the output sets with 0xff bytes, write flush_bytes of
//     device memory (L2), synchronise; the worker primes (kPrime: 100 us of its own GPU work, so the GPU runs its
//     context when the clock starts);
//   T0; send the pool's descriptor; per call: name its set and output set in the header, go;
//     the worker (mapping the pool at the first) launches the kernel and says done; at the
//     window's last call it synchronises its whole device before done (queued windows; in
//     synced ones, the task's timing.window or AKA_WINDOW, at every call); the driver then
//     queues a read of random pieces of every call's output on a copy engine (Sample); when
//     they are in: T1. The sample is (T1 - T0) / calls.
// Then per call a coin from getrandom decides whether the output is kept: it is downloaded,
// held against the pieces (an output that changed after done is the worker's fault) and written
// (untimed), and after the worker has gone the reference's answer for its seed is written
// beside it; the pieces of the others are read again and compared. Empty windows (the trusted
// baseline's calibration) make the same hand-over and exchanges, and the worker launches an
// empty kernel and synchronises: their median is the fixed overhead per call.
//
// Exit status: 0 done; 1 the driver itself failed (a task problem); 2 usage; 3 the worker failed
// or broke the protocol (the candidate's failure).
#include "akachannel.h"
#include "akadevice.h"
#include "akaplan.h"
#include "akavmm.h"
#include "akawait.h"

// What driver_main.cpp includes, first, so that the rename of its main below touches only its
// own text.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

// The cpp harness's driver, copied into every hip workspace (tasks/common/hip/BASE): its plan
// groups, the worker's output table, the header page (Region with no tensors), the listener, the
// local worker, getrandom and the keep coin serve this driver unchanged. Its CPU call loop
// (Driver, drive) and its main are not used.
#define main akaCpuDriverMain
#include "driver_main.cpp"
#undef main

namespace {

// Input sets are generated on at most this many threads at once.
constexpr unsigned kMaxThreads = 8;
constexpr int kDevice = 0;  // the sandbox's one GPU

unsigned threadCount(size_t jobs) {
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>({std::thread::hardware_concurrency(), kMaxThreads, jobs})));
}

// Runs job(i) for i in [0, n) on a few threads; the first exception is rethrown.
template <class Job>
void parallelFor(size_t n, Job job) {
  std::atomic<size_t> next{0};
  std::mutex m;
  std::exception_ptr failure;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        job(i);
      } catch (...) {
        std::lock_guard lock(m);
        if (!failure) failure = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threadCount(n); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

void upload(const DeviceSet& dst, const TensorSet& src) {
  for (size_t i = 0; i < src.size(); ++i)
    if (src.tensors[i].bytes.size())
      AKA_HIP_CHECK(hipMemcpy(dst.tensors()[i].ptr, src.tensors[i].bytes.data(), src.tensors[i].bytes.size(),
                              hipMemcpyHostToDevice));
}

void download(TensorSet& dst, const DeviceSet& src) {
  for (size_t i = 0; i < dst.size(); ++i)
    if (dst.tensors[i].bytes.size())
      AKA_HIP_CHECK(hipMemcpy(dst.tensors[i].bytes.data(), src.tensors()[i].ptr, dst.tensors[i].bytes.size(),
                              hipMemcpyDeviceToHost));
}

// Evicts the kernel's data from the GPU's L2 between timed calls by writing a larger buffer.
class DeviceFlusher {
 public:
  explicit DeviceFlusher(uint64_t bytes) : bytes_(bytes) {
    if (bytes_) AKA_HIP_CHECK(hipMalloc(&buf_, bytes_));
  }
  ~DeviceFlusher() {
    if (buf_) (void)hipFree(buf_);
  }
  DeviceFlusher(const DeviceFlusher&) = delete;
  DeviceFlusher& operator=(const DeviceFlusher&) = delete;
  void flush(hipStream_t stream) {
    if (bytes_) AKA_HIP_CHECK(hipMemsetAsync(buf_, ++round_, bytes_, stream));
  }

 private:
  uint64_t bytes_;
  void* buf_ = nullptr;
  unsigned char round_ = 0;
};

class Stream {
 public:
  Stream() { AKA_HIP_CHECK(hipStreamCreateWithFlags(&s_, hipStreamNonBlocking)); }
  ~Stream() { (void)hipStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  hipStream_t get() const { return s_; }

 private:
  hipStream_t s_ = nullptr;
};

// The GPU's side of akafill.h: one recorded fill into one tensor.
__global__ void fillKernel(void* out, uint64_t n, uint64_t key, float lo, float hi, akafill::Kind kind) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    akafill::store(out, kind, i, akafill::uniformAt(key, i, lo, hi));
}

// A configuration's inputs made on the GPU, from the fills (fillUniform) its akaGenerate made
// while recorded: one per input tensor. They are used only when they also reproduce on the GPU,
// byte for byte, the set the host made from the same seed; otherwise (a task that generates some
// other way) every set is generated on the host as before. The reference regenerates a kept
// call's inputs on the host from its seed either way.
class DeviceFills {
 public:
  // akaGenerate(config, seed) on the host, with its fills recorded.
  TensorSet record(const Config& config, uint64_t seed) {
    std::vector<FillRecord> log;
    fillLog = &log;
    TensorSet set;
    try {
      set = akaGenerate(config, seed);
    } catch (...) {
      fillLog = nullptr;
      throw;
    }
    fillLog = nullptr;
    fills_ = fillsCovering(set, log);
    return set;
  }

  // Makes `host`'s seed on the GPU, into memory poisoned first, and compares.
  void confirm(const TensorSet& host, uint64_t seed, hipStream_t stream) {
    if (fills_.empty()) return;
    const DeviceSet scratch(host);
    for (const DeviceTensor& t : scratch.tensors())
      if (t.bytes) AKA_HIP_CHECK(hipMemsetAsync(t.ptr, 0xa5, t.bytes, stream));
    launch(scratch, seed, stream);
    AKA_HIP_CHECK(hipStreamSynchronize(stream));
    TensorSet back = ownedLike(host);
    download(back, scratch);
    for (size_t i = 0; i < host.size(); ++i)
      if (std::memcmp(back.tensors[i].bytes.data(), host.tensors[i].bytes.data(), host.tensors[i].bytes.size()) != 0) {
        fills_.clear();  // the host makes this configuration's inputs
        return;
      }
  }

  // The set for `seed` into `dst` (tensors in the recorded set's order), queued on `stream`.
  void launch(const DeviceSet& dst, uint64_t seed, hipStream_t stream) const {
    for (size_t i = 0; i < fills_.size(); ++i) {
      const FillRecord& f = fills_[i];
      const uint64_t n = dst.tensors()[i].elements();
      if (n == 0) continue;
      const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>((n + 255) / 256, 4096));
      hipLaunchKernelGGL(fillKernel, dim3(blocks), dim3(256), 0, stream, dst.tensors()[i].ptr, n,
                         akafill::keyOf(seed, f.stream), f.lo, f.hi, f.kind);
      AKA_HIP_CHECK(hipGetLastError());
    }
  }

  bool usable() const { return !fills_.empty(); }

 private:
  std::vector<FillRecord> fills_;  // empty: the host makes the inputs
};

// Where the tensors sit in the shared allocation (as in the cpp region: 4096-byte aligned).
struct SharedLayout {
  std::vector<size_t> inputs, outputs;
  size_t bytes = 0;
};

SharedLayout layoutOf(const TensorSet& in, const TensorSet& out) {
  SharedLayout l;
  size_t off = 0;
  for (const Tensor& t : in.tensors) {
    l.inputs.push_back(off);
    off = akachan::alignUp(off + t.bytes.size(), akachan::kTensorAlign);
  }
  for (const Tensor& t : out.tensors) {
    l.outputs.push_back(off);
    off = akachan::alignUp(off + t.bytes.size(), akachan::kTensorAlign);
  }
  l.bytes = off;
  return l;
}

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<void*> pointersAt(unsigned char* base, const std::vector<size_t>& offsets) {
  std::vector<void*> p;
  for (size_t o : offsets) p.push_back(base + o);
  return p;
}

// Page-locked host memory: device-to-host copies into it run on a copy engine, asynchronously.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes) : bytes_(bytes) { AKA_HIP_CHECK(hipHostMalloc(&p_, bytes_)); }
  ~PinnedBuffer() { (void)hipHostFree(p_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  unsigned char* data() const { return static_cast<unsigned char*>(p_); }

 private:
  size_t bytes_;
  void* p_ = nullptr;
};

// What the driver reads of a call's output as soon as the worker says done: up to kPieces
// pieces of kPieceBytes at offsets drawn from getrandom before the window (the whole output when
// it is that small; the draw stays in the driver's memory, which the worker cannot read, so it
// is as secret as a draw after done and costs the window nothing), queued on a copy engine at
// done while the window goes on (no context switch, and the next call does not wait for it).
// compare() holds them against the whole output read after the window, recheck() against the
// same pieces read again: a kernel still writing at done (or one that finishes a call's output
// during a later call) makes them differ.
class Sample {
 public:
  static constexpr size_t kPieces = 8;
  static constexpr size_t kPieceBytes = 4096;
  static constexpr size_t kHostBytes = kPieces * kPieceBytes;

  void draw(const DeviceSet& out, unsigned char* host) {
    pieces_.clear();
    size_t total = 0;
    for (const DeviceTensor& t : out.tensors()) total += t.bytes;
    if (total <= kPieces * kPieceBytes) {
      for (size_t i = 0; i < out.size(); ++i)
        for (size_t off = 0; off < out.tensors()[i].bytes; off += kPieceBytes)
          pieces_.push_back({i, off, std::min(kPieceBytes, out.tensors()[i].bytes - off)});
    } else {
      for (size_t k = 0; k < kPieces; ++k) {
        size_t at = secureRandom() % total, i = 0;
        while (at >= out.tensors()[i].bytes) at -= out.tensors()[i++].bytes;
        const size_t off = at / kPieceBytes * kPieceBytes;
        pieces_.push_back({i, off, std::min(kPieceBytes, out.tensors()[i].bytes - off)});
      }
    }
    host_ = host;
  }

  // A queued window's calls share one draw: the same pieces of each call's output set, so that
  // one strided copy per piece reads them for every call (the copies are queued inside the
  // window's clock; 8 of them cost far less host time than 8 per call). `host` is this call's
  // kHostBytes of one page-locked run, call j at j * kHostBytes.
  void share(const Sample& first, unsigned char* host) {
    pieces_ = first.pieces_;
    host_ = host;
  }

  void readAsync(const DeviceSet& out, hipStream_t stream) const { copyPieces(out, stream, host_); }

  // Reads the pieces of `calls` output sets at once, set j at `stride` bytes after `first` and
  // into this call's host run + j * kHostBytes; the sets' samples must share this one's draw.
  void readWindowAsync(const DeviceSet& first, size_t stride, size_t calls, hipStream_t stream) const {
    for (size_t k = 0; k < pieces_.size(); ++k) {
      const Piece& p = pieces_[k];
      AKA_HIP_CHECK(hipMemcpy2DAsync(host_ + k * kPieceBytes, kHostBytes,
                                     static_cast<unsigned char*>(first.tensors()[p.tensor].ptr) + p.offset, stride,
                                     p.bytes, calls, hipMemcpyDeviceToHost, stream));
    }
  }

  void compare(const TensorSet& whole) const {
    for (size_t k = 0; k < pieces_.size(); ++k) {
      const Piece& p = pieces_[k];
      if (std::memcmp(whole.tensors[p.tensor].bytes.data() + p.offset, host_ + k * kPieceBytes, p.bytes) != 0)
        fail(whole.tensors[p.tensor].name);
    }
  }

  // The same pieces again, into `scratch` (kHostBytes, page-locked), compared with the first read.
  void recheck(const DeviceSet& out, const TensorSet& names, hipStream_t stream, unsigned char* scratch) const {
    copyPieces(out, stream, scratch);
    AKA_HIP_CHECK(hipStreamSynchronize(stream));
    for (size_t k = 0; k < pieces_.size(); ++k)
      if (std::memcmp(scratch + k * kPieceBytes, host_ + k * kPieceBytes, pieces_[k].bytes) != 0)
        fail(names.tensors[pieces_[k].tensor].name);
  }

 private:
  struct Piece {
    size_t tensor, offset, bytes;
  };
  [[noreturn]] static void fail(const std::string& name) {
    throw WorkerFault("output '" + name +
                      "' changed after the worker said the call was done (work left running past its end)");
  }
  void copyPieces(const DeviceSet& out, hipStream_t stream, unsigned char* host) const {
    for (size_t k = 0; k < pieces_.size(); ++k) {
      const Piece& p = pieces_[k];
      AKA_HIP_CHECK(hipMemcpyAsync(host + k * kPieceBytes, static_cast<unsigned char*>(out.tensors()[p.tensor].ptr) + p.offset,
                                   p.bytes, hipMemcpyDeviceToHost, stream));
    }
  }
  std::vector<Piece> pieces_;
  unsigned char* host_ = nullptr;
};

// Where a group's untimed preparation goes, for the driver's log.
struct PrepTimes {
  double generateS = 0, keepS = 0;
};

// Calls per window, and input sets in a window's pool per timed call: one the call uses, the
// others decoys generated the same way (docs/scoring.md "GPU harnesses": the pool is the
// worker's from the window's start, so a worker that wanted a later call's answer early would
// have to compute every set of the pool).
constexpr size_t kWindowCalls = 20;
constexpr size_t kSetsPerTimedCall = 2;
constexpr uint64_t kMaxPoolBytes = 4ull << 30;
// The largest pitch a 2D copy takes (hipDeviceAttributeMaxPitch on current GPUs).
constexpr size_t kMaxPitch = (size_t{1} << 31) - 1;

// One call of a window.
struct Step {
  uint64_t seed = 0;      // check: the plan's; perf: drawn from getrandom when its window is made
  std::string keepAs;     // check: the case's name (every output is kept)
};

// Calls that share one pool and one clock: all kernel calls (timed or warm-up or check) or all
// empty calls (the trusted baseline's calibration).
struct Window {
  uint32_t cmd = akachan::kCall;
  bool timed = false;
  size_t setsPerCall = 1;
  std::vector<Step> calls;
};

// The group's windows, each of `k` calls (check: the cases, `k` to a window). The empty windows
// are spread evenly over the timed ones, so drift reaches both alike.
std::vector<Window> windowsOf(const GroupPlan& g, size_t k) {
  std::vector<Window> ws;
  if (!g.checkCalls.empty()) {
    for (size_t i = 0; i < g.checkCalls.size(); i += k) {
      Window w;
      for (size_t j = i; j < std::min(g.checkCalls.size(), i + k); ++j)
        w.calls.push_back({g.checkCalls[j].second, g.checkCalls[j].first});
      ws.push_back(std::move(w));
    }
    return ws;
  }
  auto windowsFor = [k](int calls) { return calls <= 0 ? 0 : static_cast<int>((static_cast<size_t>(calls) + k - 1) / k); };
  for (int i = 0; i < windowsFor(g.warmup); ++i) ws.push_back({akachan::kCall, false, 1, std::vector<Step>(k)});
  const int samples = windowsFor(g.samples), empty = windowsFor(g.empty), total = samples + empty;
  int emptyDone = 0;
  for (int i = 0; i < total; ++i) {
    const bool isEmpty = emptyDone < empty && (i + 1) * empty / total > emptyDone;
    if (isEmpty) ++emptyDone;
    ws.push_back({isEmpty ? akachan::kEmpty : akachan::kCall, true, isEmpty ? 1 : kSetsPerTimedCall, std::vector<Step>(k)});
  }
  return ws;
}

// Calls to a window for inputs of `inputBytes`: kWindowCalls, fewer when the pool would
// pass kMaxPoolBytes.
size_t windowCallsFor(size_t inputBytes) {
  const uint64_t perCall = std::max<uint64_t>(1, inputBytes) * kSetsPerTimedCall;
  return static_cast<size_t>(std::clamp<uint64_t>(kMaxPoolBytes / perCall, 1, kWindowCalls));
}

class GpuDriver {
 public:
  GpuDriver(int sock, uint64_t flushBytes, std::string outDir, bool queued)
      : sock_(sock), queued_(queued), flusher_(flushBytes), outDir_(std::move(outDir)) {}

  void runGroup(const GroupPlan& g, GroupTimes& times, size_t& windowCalls) {
    const Config config(g.config);
    times.name = g.name;
    prep_ = PrepTimes();
    const bool check = !g.checkCalls.empty();

    // The layout comes from one set generated for it alone; the worker learns the shapes, never
    // the values (timed calls use sets generated later, from seeds of their own).
    const uint64_t firstSeed = check ? g.checkCalls.front().second : secureRandom();
    const TensorSet first = fills_.record(config, firstSeed);
    fills_.confirm(first, firstSeed, stream_.get());
    size_t inputBytes = 0;
    for (const Tensor& t : first.tensors) inputBytes += t.bytes.size();
    const size_t k = windowCallsFor(inputBytes);
    windowCalls = k;
    std::vector<Window> windows = windowsOf(g, k);

    akachan::sendMessage(sock_, json{{"type", "group"}, {"name", g.name}, {"config", g.config}, {"inputs", tableOf(first)}}.dump());
    const TensorSet outLayout = parseOutputTable(receive("its outputs"));
    TensorSet hostOut = ownedLike(outLayout);
    // The outputs: one allocation lent for the whole group, one output set per call of a window.
    const SharedLayout layout = layoutOf(TensorSet(), hostOut);
    const SharedLayout inLayout = layoutOf(first, TensorSet());
    SharedDeviceMemory shared = SharedDeviceMemory::create(kDevice, layout.bytes * k);
    outStride_ = layout.bytes;
    std::vector<DeviceSet> outSets;
    for (size_t j = 0; j < k; ++j)
      outSets.push_back(DeviceSet::views(hostOut, pointersAt(shared.base() + j * layout.bytes, layout.outputs)));

    Region header{TensorSet()};
    akachan::sendMessage(sock_, header.describe().dump(), header.fd());
    const int fd = shared.exportFd();
    try {
      akachan::sendMessage(sock_, json{{"type", "device"}, {"size", shared.size()}, {"inputs", json::array()},
                                       {"outputs", layout.outputs}, {"output_sets", k},
                                       {"output_stride", layout.bytes}}.dump(), fd);
    } catch (...) {
      close(fd);
      throw;
    }
    close(fd);
    if (receive("the device memory's mapping").value("type", "") != "mapped")
      throw WorkerFault("the worker did not map the shared memory");

    for (Window& w : windows) {
      std::vector<Sample> samples(w.calls.size());
      std::vector<uint64_t> inproc;
      const int64_t ns = runWindow(header.header(), w, config, first, inLayout, outSets, samples, inproc, check);
      if (w.cmd == akachan::kEmpty) {
        times.empty.push_back(ns);
        continue;
      }
      if (w.timed) {
        times.samples.push_back(ns);
        uint64_t sum = 0;
        for (uint64_t x : inproc) sum += x;
        times.inproc.push_back(static_cast<int64_t>(sum / std::max<size_t>(1, inproc.size())));
      }
      afterWindow(g, w, outSets, hostOut, samples, times);
    }
    signal(header.header(), akachan::kEndGroup);
  }

  void finish() { akachan::sendMessage(sock_, json{{"type", "bye"}}.dump()); }
  const std::vector<KeptCall>& kept() const { return kept_; }
  const PrepTimes& prep() const { return prep_; }
  bool inputsOnDevice() const { return fills_.usable(); }

 private:
  // A window's input pool: `calls x setsPerCall` sets, each from a fresh seed (check: the plan's
  // seeds, one set per call), made on the GPU (DeviceFills) or generated on a few host threads
  // and uploaded, straight into the new allocation, which the worker has no handle to yet.
  // Empty windows get a pool of the same size with nothing in it: the worker never reads it. Returns, per call, the set it uses.
  std::vector<uint32_t> fillPool(const SharedDeviceMemory& pool, Window& w, const Config& config,
                                 const TensorSet& layoutSet, const SharedLayout& inLayout, bool check) {
    const size_t m = w.setsPerCall;
    std::vector<uint32_t> used(w.calls.size());
    if (w.cmd == akachan::kEmpty) return used;
    std::vector<uint64_t> seeds(w.calls.size() * m);
    for (size_t j = 0; j < w.calls.size(); ++j) {
      used[j] = static_cast<uint32_t>(j * m + (m > 1 ? secureRandom() % m : 0));
      for (size_t s = 0; s < m; ++s) seeds[j * m + s] = secureRandom();
      if (check) seeds[used[j]] = w.calls[j].seed;
      w.calls[j].seed = seeds[used[j]];
    }
    const auto g0 = Clock::now();
    auto setAt = [&](size_t i) {
      return DeviceSet::views(layoutSet, pointersAt(pool.base() + i * inLayout.bytes, inLayout.inputs));
    };
    if (fills_.usable()) {
      for (size_t i = 0; i < seeds.size(); ++i) fills_.launch(setAt(i), seeds[i], stream_.get());
      AKA_HIP_CHECK(hipStreamSynchronize(stream_.get()));
    } else {
      parallelFor(seeds.size(), [&](size_t i) {
        const TensorSet host = akaGenerate(config, seeds[i]);
        if (!sameLayout(host, layoutSet))
          throw std::runtime_error("akaGenerate made inputs of another layout for the same configuration");
        upload(setAt(i), host);
      });
    }
    prep_.generateS += secondsSince(g0);
    return used;
  }

  // One window of calls. Untimed: the pool is filled, every output set is poisoned with 0xff
  // bytes, the L2 is flushed, and the worker runs an empty kernel (kPrime) so that the GPU is
  // back in the worker's context: a switch between the two processes' contexts costs about
  // 140 us on an H200 and would otherwise sit inside the window. Timed, from T0: the pool's
  // descriptor goes to the worker, which maps it with the first call; then per call the driver
  // names the set and the output set in the header and says go; the worker launches the call
  // and says done (queued; the last call's done comes after the worker's device is idle). Then
  // the driver queues the read of random pieces of every output on a copy engine (which needs
  // no context switch); the window ends when they are in host memory: T1. Returns the window's
  // time per call; `inproc` gets the worker's own times.
  int64_t runWindow(akachan::Header& h, Window& w, const Config& config, const TensorSet& layoutSet,
                    const SharedLayout& inLayout, const std::vector<DeviceSet>& outSets, std::vector<Sample>& samples,
                    std::vector<uint64_t>& inproc, bool check) {
    const size_t m = w.setsPerCall;
    SharedDeviceMemory pool = SharedDeviceMemory::create(kDevice, inLayout.bytes * w.calls.size() * m);
    const std::vector<uint32_t> used = fillPool(pool, w, config, layoutSet, inLayout, check);
    for (size_t j = 0; j < w.calls.size(); ++j)
      for (const DeviceTensor& t : outSets[j].tensors())
        if (t.bytes) AKA_HIP_CHECK(hipMemsetAsync(t.ptr, 0xff, t.bytes, stream_.get()));
    flusher_.flush(stream_.get());
    AKA_HIP_CHECK(hipStreamSynchronize(stream_.get()));
    const int fd = pool.exportFd();
    struct Closer {
      int fd;
      ~Closer() { close(fd); }
    } closer{fd};
    const bool oneDraw = queued_ && outStride_ <= kMaxPitch;
    for (size_t j = 0; j < w.calls.size(); ++j) {
      unsigned char* host = pinned_.data() + j * Sample::kHostBytes;
      if (oneDraw && j > 0)
        samples[j].share(samples[0], host);
      else
        samples[j].draw(outSets[j], host);
    }
    h.window = 0;
    signal(h, akachan::kPrime);
    const auto t0 = Clock::now();
    akachan::sendMessage(sock_, json{{"type", "pool"}, {"size", pool.size()}, {"sets", w.calls.size() * m},
                                     {"stride", inLayout.bytes}, {"offsets", inLayout.inputs}}.dump(), fd);
    const size_t n = w.calls.size();
    for (size_t j = 0; j < n; ++j) {
      h.slot = used[j];
      h.outSet = static_cast<uint32_t>(j);
      h.window = (j == 0 ? akachan::kWindowOpen : 0u) | (j + 1 == n ? akachan::kWindowClose : 0u) |
                 (queued_ ? akachan::kWindowQueued : 0u);
      signal(h, w.cmd);
      if (!queued_ || j + 1 == n) inproc.push_back(h.inprocNs);  // queued: one figure, the window's
      if (!queued_) samples[j].readAsync(outSets[j], stream_.get());
    }
    // Queued, the worker's done means launched until the last call, whose done comes after its
    // whole device is idle: only then are the outputs final.
    if (oneDraw)
      samples[0].readWindowAsync(outSets[0], outStride_, n, stream_.get());
    else if (queued_)
      for (size_t j = 0; j < n; ++j) samples[j].readAsync(outSets[j], stream_.get());
    AKA_HIP_CHECK(hipStreamSynchronize(stream_.get()));
    const auto t1 = Clock::now();
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count() / static_cast<int64_t>(w.calls.size());
  }

  // After a window, untimed: every call's pieces are held against its output as it stands now;
  // a coin from getrandom, drawn only now, decides per timed call whether its output is kept
  // for verification (check: every output is).
  void afterWindow(const GroupPlan& g, const Window& w, const std::vector<DeviceSet>& outSets, TensorSet& hostOut,
                   const std::vector<Sample>& samples, GroupTimes& times) {
    for (size_t j = 0; j < w.calls.size(); ++j) {
      std::string keepAs = w.calls[j].keepAs;
      if (w.timed && coin(g.keep)) keepAs = g.name + ".c" + std::to_string(callsTimed_ + j);
      if (keepAs.empty()) {
        samples[j].recheck(outSets[j], hostOut, stream_.get(), scratch_.data());
        continue;
      }
      const auto k0 = Clock::now();
      download(hostOut, outSets[j]);
      samples[j].compare(hostOut);
      const uint64_t pick = w.timed ? drawPick() : 0;  // the correctness run's outputs whole
      // A group that is not verified (the baseline's) downloads and compares like the
      // candidate's, so that both sides do the same work between windows, and keeps nothing.
      if (!g.verify) {
        prep_.keepS += secondsSince(k0);
        continue;
      }
      writeVerified(outDir_ + "/" + keepAs + ".out.akt", hostOut, pick);
      kept_.push_back({keepAs, g.config, w.calls[j].seed, TensorSet(), pick});
      ++times.kept;
      prep_.keepS += secondsSince(k0);
    }
    if (w.timed) callsTimed_ += w.calls.size();
  }

  // One go/done exchange (akawait.h: spins, so a call's time has no wake-up latency in it).
  void signal(akachan::Header& h, uint32_t cmd) {
    const uint32_t n = ++seq_;
    h.cmd = cmd;
    h.go.store(n, std::memory_order_release);
    akachan::futexWake(h.go);
    for (uint32_t seen = h.done.load(std::memory_order_acquire); seen != n;) {
      bool gone = false;
      seen = akawait::awaitChange(h.done, seen, sock_, &gone);
      if (gone) throw WorkerFault("the worker exited in the middle of a call");
    }
    if (h.status != akachan::kOk) throw WorkerFault("the worker reports that the kernel call failed");
  }

  json receive(const char* what) {
    std::string text;
    if (!akachan::receiveMessage(sock_, text)) throw WorkerFault(std::string("the worker hung up instead of sending ") + what);
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) throw WorkerFault(std::string("the worker sent something that is not JSON as ") + what);
    if (j.is_object() && j.value("type", "") == "error")
      throw WorkerFault("the worker failed: " + j.value("message", std::string("?")));
    return j;
  }

  int sock_;
  // Queued windows (kWindowQueued) unless synced ones ask for a device synchronisation after
  // every call (windowMode).
  const bool queued_;
  DeviceFlusher flusher_;
  Stream stream_;
  PinnedBuffer pinned_{kWindowCalls * Sample::kHostBytes};
  PinnedBuffer scratch_{Sample::kHostBytes};
  size_t outStride_ = 0;  // the group's output sets, one after another in one allocation
  std::string outDir_;
  uint32_t seq_ = 0;
  size_t callsTimed_ = 0;
  std::vector<KeptCall> kept_;
  PrepTimes prep_;
  DeviceFills fills_;
};

// After the worker is gone: the reference's answers for the kept calls (whose outputs are
// written already), from inputs generated again from their seeds, on a few threads.
void writeReferences(const std::string& outDir, const std::vector<KeptCall>& kept) {
  parallelFor(kept.size(), [&](size_t i) {
    const Config config(kept[i].config);
    const TensorSet in = akaGenerate(config, kept[i].seed);
    writeVerified(outDir + "/" + kept[i].name + ".ref.akt", akaReference(config, in), kept[i].pick);
  });
  json cases = json::array();
  for (const KeptCall& k : kept) cases.push_back({{"name", k.name}, {"config", k.config}});
  writeJson(outDir + "/verify.json", {{"cases", cases}});
}

// The task's timing.window, which the scorer writes into the perf plan; AKA_WINDOW in the
// driver's environment overrides it (scripts/device-hip-driver times a task in both modes).
// Graph windows are the python harness's: this worker captures nothing.
std::string windowMode(const akaplan::Plan& plan) {
  const char* env = std::getenv("AKA_WINDOW");
  const std::string mode = env && *env ? env : plan.perf.window;
  if (mode != "queued" && mode != "synced")
    throw std::runtime_error("window mode '" + mode + "': the hip harness times queued or synced windows");
  return mode;
}

int driveGpu(const std::string& mode, const std::map<std::string, std::string>& opts,
             const std::vector<std::string>& workerCmd) {
  const akaplan::Plan plan = akaplan::readPlan(opts.at("plan"));
  const std::vector<GroupPlan> groups = groupsOf(mode, plan);
  const std::string window = mode == "perf" ? windowMode(plan) : "queued";
  const std::string outDir = opts.at("out");
  if (mkdir(outDir.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create " + outDir + ": " + std::strerror(errno));
  AKA_HIP_CHECK(hipSetDevice(kDevice));
  Listener listener(opts.at("channel"));
  std::unique_ptr<LocalWorker> local;
  if (!workerCmd.empty()) local = std::make_unique<LocalWorker>(workerCmd, opts.at("channel"));
  const int sock = listener.accept(kAcceptTimeoutMs);
  std::string text;
  if (!akachan::receiveMessage(sock, text)) throw WorkerFault("the worker hung up before saying hello");

  json report = {{"mode", mode}, {"groups", json::array()}};
  if (mode == "perf") report["window"] = window;
  std::vector<KeptCall> kept;
  {
    GpuDriver driver(sock, mode == "perf" ? plan.perf.flushBytes : 0, outDir, window != "synced");
    for (const GroupPlan& g : groups) {
      GroupTimes t;
      size_t windowCalls = 1;
      const auto t0 = Clock::now();
      driver.runGroup(g, t, windowCalls);
      const PrepTimes& p = driver.prep();
      report["groups"].push_back({{"name", t.name}, {"samples_ns", t.samples}, {"empty_ns", t.empty},
                                  {"inproc_ns", t.inproc}, {"kept", t.kept}, {"window_calls", windowCalls},
                                  {"inputs_on_device", driver.inputsOnDevice()}});
      std::cerr << "driver: " << g.name << ": " << (mode == "check" ? g.checkCalls.size() : t.samples.size())
                << " calls, " << t.kept << " kept for verification; " << secondsSince(t0) << " s, of which "
                << p.generateS << " s generating inputs (" << (driver.inputsOnDevice() ? "on the GPU" : "on the host")
                << "), " << p.keepS
                << " s writing kept outputs; " << windowCalls << " calls to a window\n";
    }
    driver.finish();
    kept = driver.kept();
  }
  close(sock);
  if (local && local->wait() != 0) throw WorkerFault("the worker exited with an error after the last call");
  const auto r0 = Clock::now();
  writeReferences(outDir, kept);
  std::cerr << "driver: reference outputs of " << kept.size() << " kept calls in " << secondsSince(r0) << " s\n";
  writeJson(outDir + "/report.json", report);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "check") != 0 && std::strcmp(argv[1], "perf") != 0)) {
    std::cerr << "usage: driver check|perf --plan P --channel SOCK --out O [--worker CMD...]\n";
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  std::map<std::string, std::string> opts;
  std::vector<std::string> worker;
  for (int i = 2; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--worker") {
      worker.assign(argv + i + 1, argv + argc);
      break;
    }
    if (key.rfind("--", 0) != 0 || i + 1 >= argc) {
      std::cerr << "driver: bad argument '" << key << "'\n";
      return 2;
    }
    opts[key.substr(2)] = argv[++i];
  }
  for (const char* k : {"plan", "channel", "out"})
    if (!opts.count(k)) {
      std::cerr << "driver: missing --" << k << "\n";
      return 2;
    }
  try {
    return driveGpu(argv[1], opts, worker);
  } catch (const WorkerFault& e) {
    std::cerr << "driver: worker: " << e.what() << "\n";
    return 3;
  } catch (const akachan::Error& e) {
    std::cerr << "driver: worker: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "driver: " << e.what() << "\n";
    return 1;
  }
}
