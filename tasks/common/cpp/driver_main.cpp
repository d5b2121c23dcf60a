// driver - trusted: runs a worker's calls and owns everything a candidate would want to touch
// (docs/scoring.md, "Driver and worker"). Linked from driver_main.cpp + the task's reference.cpp,
// never with candidate code; it runs in a sandbox of its own, outside the worker's pid
// namespace, so the worker can neither signal, trace nor write to it.
//
//   driver check --plan P --channel SOCK --out O [--worker CMD...]
//       one call per case of the plan, on inputs generated from the case's seed; every output
//       is kept for the checker
//   driver perf  --plan P --channel SOCK --out O [--inputs-dir D] [--worker CMD...]
//       per perf group: `warmup` untimed calls, then `samples` timed calls (plus the group's
//       `empty` calibration calls, interleaved), each on inputs generated from a fresh seed;
//       after each timed call a coin with the group's `keep` probability decides whether its
//       output is verified
//
// --inputs-dir names a tmpfs mounted with huge pages to make each call's input file in (the
// scorer gives one); without it they are memfds.
// The driver listens on SOCK; with --worker it starts CMD serve --channel SOCK itself (the
// workspace's `make test` and `make bench`), otherwise a worker in another sandbox connects.
// It writes into O: <case>.out.akt and <case>.ref.akt for every kept call, verify.json (the plan
// of those cases, for akacheck) and report.json (the times, see docs/scoring.md).
//
// A timed call, on the driver's clock: (untimed) write the call's inputs into a new sealed memfd
// of their own, fill the outputs with 0xff bytes and write flush_bytes of memory to evict the
// caches; then start the clock, pass the input file to the worker, signal go, wait for done and
// copy the outputs out; stop the clock. The inputs exist nowhere the worker can see before the
// clock starts (it maps the file after go), and the output counts only as it stands when the
// driver has read it, so work done early, late or on the side is either inside the time or
// wrong. The hand-over, the worker's mapping of the file and the output copy are the fixed
// overhead that the empty calls measure; no part of it is a window the worker can work in.
//
// Exit status: 0 done; 1 the driver itself failed (a task problem); 2 usage; 3 the worker failed
// or broke the protocol (the candidate's failure).
#include "akachannel.h"
#include "akaharness.h"
#include "akaplan.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// What the worker did wrong: the candidate's failure, not the task's.
struct WorkerFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr uint64_t kMaxOutputBytes = 8ull << 30;
constexpr size_t kMaxOutputTensors = 64;
constexpr int kAcceptTimeoutMs = 180000;

uint64_t secureRandom() {
  uint64_t v;
  unsigned char* p = reinterpret_cast<unsigned char*>(&v);
  size_t got = 0;
  while (got < sizeof v) {
    ssize_t r = getrandom(p + got, sizeof v - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(r);
  }
  return v;
}

// True with probability p, from the kernel's random source: nothing in the worker's reach can
// predict it, and it is drawn only after the call has finished.
bool coin(double p) {
  if (p >= 1) return true;
  if (p <= 0) return false;
  return static_cast<double>(secureRandom() >> 11) * 0x1.0p-53 < p;
}

// Copies with non-temporal stores where the hardware has them: the inputs land in memory, as cold
// as after a cache flush, and the copy does not evict what the flush left.
void streamCopy(unsigned char* dst, const unsigned char* src, size_t n) {
#if defined(__x86_64__)
  if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % 16 == 0) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
      const __m128i a = _mm_load_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m128i b = _mm_load_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      const __m128i c = _mm_load_si128(reinterpret_cast<const __m128i*>(src + i + 32));
      const __m128i d = _mm_load_si128(reinterpret_cast<const __m128i*>(src + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
    }
    std::memcpy(dst + i, src + i, n - i);
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

// Evicts the kernel's data from the caches between timed calls.
class CacheFlusher {
 public:
  explicit CacheFlusher(uint64_t bytes) : scratch_(bytes) {}
  uint64_t bytes() const { return scratch_.size(); }
  void flush() {
    if (scratch_.size() == 0) return;
    std::memset(scratch_.data(), ++round_, scratch_.size());
    sink_ = sink_ + scratch_.data()[round_ % scratch_.size()];
  }

 private:
  akt::Buffer scratch_;
  unsigned char round_ = 0;
  volatile unsigned sink_ = 0;
};

json tableOf(const TensorSet& set) {
  json t = json::array();
  for (const Tensor& x : set.tensors) t.push_back({{"name", x.name}, {"dtype", akt::dtypeName(x.dtype)}, {"dims", x.dims}});
  return t;
}

bool sameLayout(const TensorSet& a, const TensorSet& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a.tensors[i].name != b.tensors[i].name || a.tensors[i].dtype != b.tensors[i].dtype ||
        a.tensors[i].dims != b.tensors[i].dims)
      return false;
  return true;
}

// `set`'s names, dtypes and shapes, without its bytes.
TensorSet shapesOf(const TensorSet& set) {
  TensorSet s;
  for (const Tensor& t : set.tensors) {
    Tensor x;
    x.name = t.name;
    x.dtype = t.dtype;
    x.dims = t.dims;
    s.tensors.push_back(std::move(x));
  }
  return s;
}

// The worker's answer to "which outputs do you write": hostile input, checked before any of it
// sizes an allocation.
TensorSet parseOutputTable(const json& msg) {
  if (!msg.is_object() || msg.value("type", "") != "outputs" || !msg.contains("outputs") || !msg["outputs"].is_array())
    throw WorkerFault("the worker did not describe its outputs: " + msg.dump().substr(0, 300));
  const json& table = msg["outputs"];
  if (table.empty() || table.size() > kMaxOutputTensors)
    throw WorkerFault("the worker describes " + std::to_string(table.size()) + " output tensors");
  TensorSet out;
  uint64_t total = 0;
  for (const json& t : table) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("dtype") ||
        !t["dtype"].is_string() || !t.contains("dims") || !t["dims"].is_array() || t["dims"].size() > akt::kMaxRank)
      throw WorkerFault("malformed output tensor description: " + t.dump().substr(0, 200));
    DType dtype;
    try {
      dtype = akt::parseDType(t["dtype"].get<std::string>());
    } catch (const std::exception& e) {
      throw WorkerFault(e.what());
    }
    uint64_t bytes = akt::dtypeSize(dtype);
    std::vector<uint64_t> dims;
    for (const json& d : t["dims"]) {
      if (!d.is_number_unsigned()) throw WorkerFault("an output dimension is not a non-negative integer");
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && bytes > kMaxOutputBytes / v) throw WorkerFault("the outputs are larger than the limit");
      bytes *= v;
      dims.push_back(v);
    }
    total += bytes;
    if (total > kMaxOutputBytes) throw WorkerFault("the outputs are larger than the limit");
    Tensor x;
    x.name = t["name"].get<std::string>();
    x.dtype = dtype;
    x.dims = dims;
    if (out.find(x.name)) throw WorkerFault("duplicate output tensor '" + x.name + "'");
    out.tensors.push_back(std::move(x));
  }
  return out;
}

// A memfd of `size` bytes sealed against shrinking and growing: the worker may read and write it
// but cannot change its size (a shrunk file would fault the driver's next access).
int sealedMemfd(const char* name, size_t size) {
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    throw std::runtime_error(std::string("cannot size and seal ") + name + ": " + why);
  }
  return fd;
}

// An unnamed file of `size` bytes in `dir`. Unlike a memfd it cannot be sealed; it need not be:
// the driver has unmapped it before the worker gets it, so nothing of the driver's can fault on
// a file the worker shrinks.
int sizedTmpfile(const std::string& dir, size_t size) {
  const int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot make an input file in " + dir + ": " + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    throw std::runtime_error("cannot size an input file in " + dir + ": " + why);
  }
  return fd;
}

// One configuration's shared region: the header page and the outputs, in a sealed memfd.
class Region {
 public:
  explicit Region(const TensorSet& outLayout) {
    size_t off = akachan::kHeaderBytes;
    for (const Tensor& t : outLayout.tensors) {
      outOffsets_.push_back(off);
      outBytes_.push_back(t.elements() * akt::dtypeSize(t.dtype));
      off = akachan::alignUp(off + outBytes_.back(), akachan::kTensorAlign);
    }
    size_ = std::max(off, akachan::kHeaderBytes);
    fd_ = sealedMemfd("akachan-region", size_);
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("cannot map the region: ") + std::strerror(errno));
    base_ = static_cast<unsigned char*>(p);
    akachan::Header& h = header();
    h.magic = akachan::kMagic;
    h.version = akachan::kVersion;
  }
  ~Region() {
    if (base_) munmap(base_, size_);
    if (fd_ >= 0) close(fd_);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  akachan::Header& header() { return *reinterpret_cast<akachan::Header*>(base_); }
  int fd() const { return fd_; }
  json describe() const {
    return {{"type", "region"}, {"size", size_}, {"inputs", json::array()}, {"outputs", outOffsets_}};
  }
  void poisonOutputs() {
    for (size_t i = 0; i < outOffsets_.size(); ++i) std::memset(base_ + outOffsets_[i], 0xff, outBytes_[i]);
  }
  void readOutputs(TensorSet& out) const {
    for (size_t i = 0; i < out.size(); ++i) std::memcpy(out.tensors[i].bytes.data(), base_ + outOffsets_[i], outBytes_[i]);
  }

 private:
  int fd_ = -1;
  unsigned char* base_ = nullptr;
  size_t size_ = 0;
  std::vector<size_t> outOffsets_;
  std::vector<uint64_t> outBytes_;
};

// One call's inputs: a memfd of their own, written and sealed before the clock starts and handed
// to the worker only after it has started. The worker has no way to see them earlier, so no work
// on them can hide in the hand-over (a thread watching a shared buffer fill could otherwise do
// the call's work under the copy, and have it subtracted as overhead). A new file every call:
// a mapping the worker kept of an earlier one shows only that call's inputs.
class InputFile {
 public:
  // The tensors' offsets in the file, and the file's size: on a huge-page tmpfs a whole number
  // of 2 MiB pages, since only what lies within the file's length gets huge pages and only
  // whole 2 MiB pieces of a mapping are mapped as one (a 4,000,012-byte input otherwise ended
  // in 1.9 MB of 4 KiB pages, and cpu/prefix_sum's call took 4 ms instead of 1).
  static std::vector<size_t> offsetsOf(const TensorSet& in, size_t& size, bool hugePages) {
    std::vector<size_t> offsets;
    size_t off = 0;
    for (const Tensor& t : in.tensors) {
      offsets.push_back(off);
      off = akachan::alignUp(off + t.bytes.size(), akachan::kTensorAlign);
    }
    size = std::max<size_t>(off, akachan::kTensorAlign);
    if (hugePages) size = akachan::alignUp(size, size_t{2} << 20);
    return offsets;
  }
  // `dir`: a tmpfs with huge pages (the scorer's --inputs-dir) to make the file in, unnamed;
  // empty: a memfd. The worker maps each file afresh, and a fresh mapping's first touch costs
  // a page-table entry per page: with 4 KiB pages that is milliseconds per call on a virtual
  // machine that shadows page tables, all of it charged to the kernel. `warm`: written through
  // the caches, as a task without a cache flush (flush_bytes 0) means its inputs to be;
  // otherwise streamed past them, so the flush starts from the same state.
  InputFile(const TensorSet& in, const std::string& dir, bool warm) {
    const std::vector<size_t> offsets = offsetsOf(in, size_, !dir.empty());
    fd_ = dir.empty() ? sealedMemfd("akachan-inputs", size_) : sizedTmpfile(dir, size_);
    // Populated: the file's pages are allocated in one pass instead of one fault per page (4 KiB
    // in a memfd) as the copy reaches them; they hold the same bytes either way.
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("cannot map an input file: ") + std::strerror(errno));
    unsigned char* base = static_cast<unsigned char*>(p);
    for (size_t i = 0; i < in.size(); ++i) {
      if (warm)
        std::memcpy(base + offsets[i], in.tensors[i].bytes.data(), in.tensors[i].bytes.size());
      else
        streamCopy(base + offsets[i], in.tensors[i].bytes.data(), in.tensors[i].bytes.size());
    }
    munmap(p, size_);
  }
  ~InputFile() {
    if (fd_ >= 0) close(fd_);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  size_t size_ = 0;
};

TensorSet ownedLike(const TensorSet& layout) {
  TensorSet s;
  for (const Tensor& t : layout.tensors) s.tensors.emplace_back(t.name, t.dtype, t.dims);
  return s;
}

// A timed call's output tensor of more than kSampleAbove elements is verified on kSampledElements
// of its elements (the candidate's and the reference's at the same positions), drawn from a
// getrandom seed only after the call finished: a call that is skipped, cached or replayed is
// wrong nearly everywhere, and one that fakes even 0.01% of its elements is caught 99.8% of the
// time (1 - 0.9999^65536), for 256 KiB of float32 instead of the whole output (GBs a scoring).
// The correctness run's outputs are kept whole.
constexpr uint64_t kSampleAbove = uint64_t(1) << 20;
constexpr uint64_t kSampledElements = uint64_t(1) << 16;

// `full`'s large tensors at positions drawn from `pick` (the harness's Rng); small ones whole.
TensorSet sampledOutputs(const TensorSet& full, uint64_t pick) {
  TensorSet s;
  for (const Tensor& t : full.tensors) {
    const uint64_t n = t.elements();
    if (n <= kSampleAbove) {
      s.add(t);
      continue;
    }
    const size_t es = akt::dtypeSize(t.dtype);
    Tensor part(t.name, t.dtype, {kSampledElements});
    Rng at(pick);
    for (uint64_t i = 0; i < kSampledElements; ++i)
      std::memcpy(part.bytes.data() + i * es, t.bytes.data() + (at.next() % n) * es, es);
    s.add(std::move(part));
  }
  return s;
}

// Writes `set` as it is verified: whole when `pick` is 0 (the correctness run), else sampled.
void writeVerified(const std::string& path, const TensorSet& set, uint64_t pick) {
  if (pick == 0) akt::writeAkt(path, set);
  else akt::writeAkt(path, sampledOutputs(set, pick));
}

// A seed for sampledOutputs, never 0 (which means whole).
uint64_t drawPick() { return secureRandom() | 1; }

struct KeptCall {
  std::string name;
  json config;
  uint64_t seed;
  TensorSet outputs;  // as verified: sampled when pick is not 0
  uint64_t pick = 0;
  bool verify = true;  // false: a copy made only so that both sides do the same work
};

struct GroupPlan {
  std::string name;
  json config;
  std::vector<std::pair<std::string, uint64_t>> checkCalls;  // check: (case, seed), every output kept
  int warmup = 0, samples = 0, empty = 0;
  double keep = 0;
  bool verify = true;
};

struct GroupTimes {
  std::string name;
  std::vector<int64_t> samples, empty, inproc;
  int kept = 0;
};

class Driver {
 public:
  Driver(int sock, uint64_t flushBytes, std::string inputsDir)
      : sock_(sock), flusher_(flushBytes), inputsDir_(std::move(inputsDir)) {}

  void runGroup(const GroupPlan& g, GroupTimes& times) {
    Config config(g.config);
    times.name = g.name;
    uint64_t seed = g.checkCalls.empty() ? secureRandom() : g.checkCalls.front().second;
    TensorSet in = akaGenerate(config, seed);
    akachan::sendMessage(sock_, json{{"type", "group"}, {"name", g.name}, {"config", g.config}, {"inputs", tableOf(in)}}.dump());
    const TensorSet outLayout = parseOutputTable(receive("its outputs"));
    Region region(outLayout);  // the header and the outputs; inputs come per call
    size_t inputBytes = 0;
    json regionMsg = region.describe();
    regionMsg["inputs"] = InputFile::offsetsOf(in, inputBytes, !inputsDir_.empty());
    regionMsg["inputs_size"] = inputBytes;
    akachan::sendMessage(sock_, regionMsg.dump(), region.fd());
    if (receive("the region's mapping").value("type", "") != "mapped") throw WorkerFault("the worker did not map the region");

    TensorSet readBack = ownedLike(outLayout);
    const std::string inputsMsg = json{{"type", "inputs"}}.dump();
    auto call = [&](uint32_t cmd, const TensorSet& inputs) {
      InputFile file(inputs, inputsDir_, flusher_.bytes() == 0);
      region.poisonOutputs();
      flusher_.flush();
      const auto t0 = Clock::now();
      akachan::sendMessage(sock_, inputsMsg, file.fd());
      signal(region, cmd);
      region.readOutputs(readBack);
      const auto t1 = Clock::now();
      return std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    };
    // A call's new inputs are generated into the memory of the previous call's, which only the
    // driver ever maps (the worker gets a file made from them, after the previous call is done):
    // fresh memory would be faulted in page by page on every call, and cost more than generating
    // the inputs. The blocks are zeroed as new ones are, so the generator makes the same bytes.
    const TensorSet shapes = shapesOf(in);
    akt::BufferPool previousInputs;
    auto renew = [&](uint64_t s) {
      previousInputs.recycle(std::move(in));
      const akt::BufferPool::Use use(previousInputs);
      in = akaGenerate(config, s);
      if (!sameLayout(in, shapes)) throw std::runtime_error("akaGenerate made inputs of another layout for the same configuration");
    };

    if (!g.checkCalls.empty()) {
      for (size_t i = 0; i < g.checkCalls.size(); ++i) {
        if (i) renew(g.checkCalls[i].second);
        call(akachan::kCall, in);
        kept_.push_back({g.checkCalls[i].first, g.config, g.checkCalls[i].second, readBack});
        ++times.kept;
      }
    } else {
      for (int i = 0; i < g.warmup; ++i) {
        if (i) renew(secureRandom());
        call(akachan::kCall, in);
      }
      const int total = g.samples + g.empty;
      int emptyDone = 0;
      for (int i = 0; i < total; ++i) {
        // The empty calls are spread evenly over the timed ones, so drift reaches both alike.
        const bool empty = emptyDone < g.empty && (i + 1) * g.empty / total > emptyDone;
        if (empty) {
          ++emptyDone;
          times.empty.push_back(call(akachan::kEmpty, in));
          continue;
        }
        seed = secureRandom();
        renew(seed);
        times.samples.push_back(call(akachan::kCall, in));
        times.inproc.push_back(static_cast<int64_t>(region.header().inprocNs));
        if (coin(g.keep)) {
          const uint64_t pick = drawPick();
          kept_.push_back({g.name + ".c" + std::to_string(times.samples.size() - 1), g.config, seed,
                           sampledOutputs(readBack, pick), pick, g.verify});
          if (g.verify) ++times.kept;
        }
      }
    }
    signal(region, akachan::kEndGroup);
  }

  void finish() { akachan::sendMessage(sock_, json{{"type", "bye"}}.dump()); }
  std::vector<KeptCall>& kept() { return kept_; }

 private:
  json receive(const char* what) {
    std::string text;
    if (!akachan::receiveMessage(sock_, text)) throw WorkerFault(std::string("the worker hung up instead of sending ") + what);
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) throw WorkerFault(std::string("the worker sent something that is not JSON as ") + what);
    if (j.is_object() && j.value("type", "") == "error")
      throw WorkerFault("the worker failed: " + j.value("message", std::string("?")));
    return j;
  }

  // One go/done exchange. The wait sleeps on the futex and looks at the socket between naps: a
  // worker that dies or hangs up ends the run instead of leaving the driver waiting.
  void signal(Region& region, uint32_t cmd) {
    akachan::Header& h = region.header();
    const uint32_t n = ++seq_;
    h.cmd = cmd;
    h.go.store(n, std::memory_order_release);
    akachan::futexWake(h.go);
    for (;;) {
      const uint32_t d = h.done.load(std::memory_order_acquire);
      if (d == n) break;
      akachan::futexWait(h.done, d, 20000000);
      if (h.done.load(std::memory_order_acquire) != n && akachan::peerGone(sock_))
        throw WorkerFault("the worker exited in the middle of a call");
    }
    if (h.status != akachan::kOk) throw WorkerFault("the worker reports that the kernel call failed");
  }

  int sock_;
  CacheFlusher flusher_;
  std::string inputsDir_;
  uint32_t seq_ = 0;
  std::vector<KeptCall> kept_;
};

std::vector<GroupPlan> groupsOf(const std::string& mode, const akaplan::Plan& plan) {
  std::vector<GroupPlan> groups;
  if (mode == "check") {
    for (const akaplan::Case& c : plan.cases) {
      if (!c.hasSeed) throw std::runtime_error("case '" + c.name + "' has no seed");
      const std::string cfg = c.config.value("name", std::string());
      auto it = std::find_if(groups.begin(), groups.end(), [&](const GroupPlan& g) { return g.config == c.config; });
      if (it == groups.end()) {
        groups.push_back({cfg, c.config, {}, 0, 0, 0, 0});
        it = groups.end() - 1;
      }
      it->checkCalls.emplace_back(c.name, c.seed);
    }
    return groups;
  }
  if (!plan.hasPerf) throw std::runtime_error("the plan has no 'perf' section");
  for (const akaplan::PerfGroup& pg : plan.perf.groups) {
    GroupPlan g;
    g.name = pg.name;
    g.config = plan.findCase(pg.cases.front())->config;
    g.warmup = plan.perf.warmup;
    g.samples = plan.perf.samples;
    g.empty = pg.empty;
    g.keep = pg.keep;
    g.verify = pg.verify;
    groups.push_back(std::move(g));
  }
  return groups;
}

class Listener {
 public:
  explicit Listener(const std::string& path) : path_(path) {
    // The worker runs as another user in another sandbox and must be able to connect, so the
    // socket appears under its name only once it is open to others: bound and made 0666 under a
    // temporary name, then renamed (the worker waits while the name is absent).
    const std::string tmp = path + ".tmp";
    ::unlink(path.c_str());
    ::unlink(tmp.c_str());
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    const sockaddr_un a = akachan::socketAddress(tmp);
    if (bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || listen(fd_, 1) != 0 ||
        ::chmod(tmp.c_str(), 0666) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0)
      throw std::runtime_error("cannot listen on " + path + ": " + std::strerror(errno));
  }
  ~Listener() {
    if (fd_ >= 0) close(fd_);
    ::unlink(path_.c_str());
  }
  int accept(int timeoutMs) {
    struct pollfd p {fd_, POLLIN, 0};
    int r;
    while ((r = poll(&p, 1, timeoutMs)) < 0 && errno == EINTR) {
    }
    if (r == 0) throw WorkerFault("no worker connected within " + std::to_string(timeoutMs / 1000) + " s");
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) throw std::runtime_error(std::string("accept: ") + std::strerror(errno));
    return c;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// A worker the driver starts itself (`make test`): no isolation, the same protocol.
class LocalWorker {
 public:
  LocalWorker(std::vector<std::string> argv, const std::string& channel) {
    argv.insert(argv.end(), {"serve", "--channel", channel});
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid_ == 0) {
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      std::perror(args[0]);
      _exit(127);
    }
  }
  ~LocalWorker() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
};

void writeJson(const std::string& path, const json& j) {
  std::ofstream f(path);
  f << j.dump() << "\n";
  if (!f.flush()) throw std::runtime_error("cannot write " + path);
}

// After the worker is gone: the reference's answers for the kept calls, from inputs generated
// again from their seeds, beside the outputs the worker gave. Copies of a group that is not
// verified (the baseline's) are dropped. A kept call's inputs and reference outputs are made in
// the memory of the previous kept call's of the same configuration, as in the timed calls.
void writeVerification(const std::string& outDir, std::vector<KeptCall>& kept) {
  json cases = json::array();
  std::optional<akt::BufferPool> previous;  // one configuration's: its blocks fit no other's
  const json* previousConfig = nullptr;
  TensorSet in, ref;
  for (KeptCall& k : kept) {
    if (!k.verify) continue;
    Config config(k.config);
    if (!previousConfig || *previousConfig != k.config) {
      in = TensorSet();
      ref = TensorSet();
      previous.emplace();
      previousConfig = &k.config;
    }
    previous->recycle(std::move(in));
    previous->recycle(std::move(ref));
    {
      const akt::BufferPool::Use use(*previous);
      in = akaGenerate(config, k.seed);
      ref = akaReference(config, in);
    }
    writeVerified(outDir + "/" + k.name + ".ref.akt", ref, k.pick);
    akt::writeAkt(outDir + "/" + k.name + ".out.akt", k.outputs);
    k.outputs = TensorSet();
    cases.push_back({{"name", k.name}, {"config", k.config}});
  }
  writeJson(outDir + "/verify.json", {{"cases", cases}});
}

int drive(const std::string& mode, const std::map<std::string, std::string>& opts,
          const std::vector<std::string>& workerCmd) {
  const akaplan::Plan plan = akaplan::readPlan(opts.at("plan"));
  const std::vector<GroupPlan> groups = groupsOf(mode, plan);
  const std::string outDir = opts.at("out");
  if (mkdir(outDir.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create " + outDir + ": " + std::strerror(errno));
  Listener listener(opts.at("channel"));
  std::unique_ptr<LocalWorker> local;
  if (!workerCmd.empty()) local = std::make_unique<LocalWorker>(workerCmd, opts.at("channel"));
  const int sock = listener.accept(kAcceptTimeoutMs);
  Driver driver(sock, mode == "perf" ? plan.perf.flushBytes : 0, opts.count("inputs-dir") ? opts.at("inputs-dir") : "");
  std::string text;
  if (!akachan::receiveMessage(sock, text)) throw WorkerFault("the worker hung up before saying hello");

  json report = {{"mode", mode}, {"groups", json::array()}};
  for (const GroupPlan& g : groups) {
    GroupTimes t;
    driver.runGroup(g, t);
    report["groups"].push_back({{"name", t.name}, {"samples_ns", t.samples}, {"empty_ns", t.empty},
                                {"inproc_ns", t.inproc}, {"kept", t.kept}});
    std::cerr << "driver: " << g.name << ": " << (mode == "check" ? g.checkCalls.size() : t.samples.size())
              << " calls, " << t.kept << " kept for verification\n";
  }
  driver.finish();
  close(sock);
  if (local && local->wait() != 0) throw WorkerFault("the worker exited with an error after the last call");
  writeVerification(outDir, driver.kept());
  writeJson(outDir + "/report.json", report);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "check") != 0 && std::strcmp(argv[1], "perf") != 0)) {
    std::cerr << "usage: driver check|perf --plan P --channel SOCK --out O [--inputs-dir D] [--worker CMD...]\n";
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
  for (const auto& [k, v] : opts)
    if (k != "plan" && k != "channel" && k != "out" && k != "inputs-dir") {
      std::cerr << "driver: unknown option --" << k << "\n";
      return 2;
    }
  for (const char* k : {"plan", "channel", "out"})
    if (!opts.count(k)) {
      std::cerr << "driver: missing --" << k << "\n";
      return 2;
    }
  try {
    return drive(argv[1], opts, worker);
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
