// Attacks on the GPU scorer, end to end (issue 23; docs/scoring.md "GPU harnesses"): each test
// has an agent turn the task's own baseline kernel (hip2hip/softmax, triton2triton/softmax) into
// one that cheats in one way, and submits it through the real akad, akabox and the trusted GPU
// driver. The cheats compute with the baseline's own kernel, so whatever speed they gain comes
// from the cheat alone: none may earn credit (correct with a speedup over kCreditSpeedup).
// They need an NVIDIA GPU and skip, saying so, on a host without one; scripts/device-check runs
// them on the GPU machine (phase "attacks"). Every test checks that nothing of its daemon's
// sandboxes is left behind.
#include <gtest/gtest.h>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "daemon/pipeline/task.h"
#include "tests/pipeline/pipeline_daemon.h"

namespace akad::test {
namespace {

using nlohmann::json;

// Honest code of the baseline's speed measures about 1; more than this is credit.
constexpr double kCreditSpeedup = 1.3;

bool hostHasNvidiaGpu() { return ::access("/dev/nvidiactl", F_OK) == 0 && ::access("/dev/nvidia0", F_OK) == 0; }

class GpuAttackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!hostHasNvidiaGpu()) return;
    daemon_ = new PipelineDaemon("gpuattack", PipelineDaemon::Timing::Quick);
    daemon_->start({"--gpus", "all"});
  }
  static void TearDownTestSuite() {
    if (daemon_ == nullptr) return;
    daemon_->stop();
    daemon_->expectNothingLeft();
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    if (daemon_ == nullptr) GTEST_SKIP() << "no NVIDIA GPU on this host; these tests run on the GPU machine";
  }
  void TearDown() override {
    if (daemon_ != nullptr) daemon_->expectNothingLeft();
  }

  // The agent wraps the workspace's baseline `file` between `before` and `after`.
  static json submitWrapped(const std::string& task, const std::string& file, const std::string& before,
                            const std::string& after) {
    const std::string cmd = "cat > /tmp/before <<'AKA_BEFORE'\n" + before + "AKA_BEFORE\n" +
                            "cat > /tmp/after <<'AKA_AFTER'\n" + after + "AKA_AFTER\n" +
                            "cat /tmp/before " + file + " /tmp/after > /tmp/k && cp /tmp/k " + file + "\n";
    return daemon_->runOne({task, "--agent-command", cmd}, 900s);
  }
  static PipelineDaemon* daemon_;
  friend struct GpuAttackTestAccess;
};
PipelineDaemon* GpuAttackTest::daemon_ = nullptr;

struct GpuAttackTestAccess {
  static json submit(const std::string& task, const std::string& file, const std::string& before,
                     const std::string& after) {
    return GpuAttackTest::submitWrapped(task, file, before, after);
  }
};

// What a reader needs to judge an attack's result.
json verdictOf(const json& r) {
  json v;
  for (const char* k : {"compiled", "correct", "speedup", "failure"})
    if (r.contains(k)) v[k] = r.at(k);
  for (const auto& [name, g] : r.at("gates").items()) {
    v["gates"][name]["pass"] = g.value("pass", false);
    if (g.contains("reason")) v["gates"][name]["reason"] = g.at("reason").get<std::string>().substr(0, 600);
    for (const json& c : g.value("configs", json::array())) {
      json row = {{"name", c.value("name", "")}, {"speedup", c.value("speedup", 0.0)}};
      for (const char* k : {"verified_calls", "clock_disagreement", "candidate_inproc_median_ns"})
        if (c.contains(k)) row[k] = c.at(k);
      v["gates"][name]["configs"].push_back(row);
    }
  }
  return v;
}

void expectNoCredit(const json& attempt) {
  ASSERT_EQ(attempt.at("state"), "scored") << attempt.dump();
  const json& r = attempt.at("result");
  std::cout << "[ verdict  ] " << verdictOf(r).dump() << "\n";
  const bool credit = r.value("correct", false) && r.contains("speedup") && r.at("speedup").is_number() &&
                      r.at("speedup").get<double>() > kCreditSpeedup;
  EXPECT_FALSE(credit) << "the attack earned credit: " << verdictOf(r).dump(2);
}

// The window mode a task's timing asks for (timing.window in its task.yaml), as akad reads it.
std::string taskWindow(const std::string& task) {
  auto t = readTaskFile(fs::path(AKAD_TEST_TASKS_DIR) / task);
  EXPECT_TRUE(t) << t.error().message;
  return t ? t->timing.window : "";
}

// The controls: the reference agent's honest solutions must be scored correct with credit, so
// the suite can tell credit from none on this GPU.
TEST_F(GpuAttackTest, TheHonestHipSolutionEarnsCredit) {
  const json a = daemon_->runOne({"hip2hip/softmax", "--agent", "reference"}, 900s);
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  std::cout << "[ verdict  ] " << verdictOf(a.at("result")).dump() << "\n";
  EXPECT_TRUE(a.at("result").value("correct", false));
  EXPECT_GT(a.at("result").value("speedup", 0.0), kCreditSpeedup);
  // The result says how the driver ran its windows: the task's timing.window.
  EXPECT_EQ(a.at("result").at("gates").at("performance").value("window", ""), "queued");
}

TEST_F(GpuAttackTest, TheHonestTritonSolutionEarnsCredit) {
  const json a = daemon_->runOne({"triton2triton/softmax", "--agent", "reference"}, 900s);
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  std::cout << "[ verdict  ] " << verdictOf(a.at("result")).dump() << "\n";
  EXPECT_TRUE(a.at("result").value("correct", false));
  EXPECT_GT(a.at("result").value("speedup", 0.0), kCreditSpeedup);
  // The result says how the driver ran its windows: the task's timing.window (queued or graph).
  EXPECT_EQ(a.at("result").at("gates").at("performance").value("window", ""), taskWindow("triton2triton/softmax"));
}

// --- hip2hip/softmax: the baseline's softmax_rows renamed, a cheating one in its place --------

json submitHip(const std::string& cheat) {
  return GpuAttackTestAccess::submit("hip2hip/softmax", "kernel.hip", "#define softmax_rows baseline_softmax_rows\n",
                                     "#undef softmax_rows\n" + cheat);
}

// Launches the baseline's kernel on a non-blocking stream of its own and returns without
// waiting: events on the default stream would time nothing of it.
TEST_F(GpuAttackTest, HipWorkOnASideStreamEarnsNothing) {
  expectNoCredit(submitHip(R"(namespace {
hipStream_t sideStream() {
  static hipStream_t s = [] { hipStream_t t; (void)hipStreamCreateWithFlags(&t, hipStreamNonBlocking); return t; }();
  return s;
}
}  // namespace
extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  const int block = 128;
  hipLaunchKernelGGL(softmaxRowPerThread, dim3((rows + block - 1) / block), dim3(block), 0, sideStream(), x, y, rows, cols);
}
)"));
}

// Puts each call on the next of four non-blocking streams and returns without waiting, so that
// a queued window's calls could run side by side and be timed as less than their sum; the
// worker's context has one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1) and the window's time
// is the driver's.
TEST_F(GpuAttackTest, HipCallsSpreadOverStreamsOfTheirOwnEarnNothing) {
  expectNoCredit(submitHip(R"(namespace {
hipStream_t nextStream() {
  static hipStream_t s[4] = {};
  static unsigned i = 0;
  if (!s[0])
    for (hipStream_t& t : s) (void)hipStreamCreateWithFlags(&t, hipStreamNonBlocking);
  return s[i++ % 4];
}
}  // namespace
extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  const int block = 128;
  hipLaunchKernelGGL(softmaxRowPerThread, dim3((rows + block - 1) / block), dim3(block), 0, nextStream(), x, y, rows, cols);
}
)"));
}

// Memoises outputs by 64 sampled input values and the shape, and answers a repeated input with a
// device-to-device copy: fresh inputs for every call leave it nothing to hit.
TEST_F(GpuAttackTest, HipCachingOutputsByInputContentEarnsNothing) {
  expectNoCredit(submitHip(R"(#include <map>
#include <string>
extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  static std::map<std::string, float*> cache;
  const size_t n = size_t(rows) * cols, bytes = n * sizeof(float);
  float probe[64];
  for (int i = 0; i < 64; ++i) (void)hipMemcpy(&probe[i], x + (size_t(i) * 7919) % n, sizeof(float), hipMemcpyDeviceToHost);
  std::string key(reinterpret_cast<const char*>(probe), sizeof probe);
  key += std::to_string(rows) + "x" + std::to_string(cols);
  if (auto it = cache.find(key); it != cache.end()) {
    (void)hipMemcpy(y, it->second, bytes, hipMemcpyDeviceToDevice);
    return;
  }
  baseline_softmax_rows(x, y, rows, cols);
  if (cache.size() < 48) {
    float* keep = nullptr;
    if (hipMalloc(reinterpret_cast<void**>(&keep), bytes) == hipSuccess) {
      (void)hipMemcpy(keep, y, bytes, hipMemcpyDeviceToDevice);
      cache[key] = keep;
    }
  }
}
)"));
}

// Honest for the first four calls of every shape (all that a correctness run makes), then runs
// the kernel only on every eighth call and returns at once from the others: their outputs stay
// the driver's poison, and any call may be the one kept and verified.
TEST_F(GpuAttackTest, HipSkippingMostCallsEarnsNothing) {
  expectNoCredit(submitHip(R"(#include <map>
#include <utility>
extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  static std::map<std::pair<int, int>, int> calls;
  const int n = ++calls[{rows, cols}];
  if (n <= 4 || n % 8 == 0) baseline_softmax_rows(x, y, rows, cols);
}
)"));
}

// Honest for the first four calls of every shape, then returns at once and has a thread of its
// own launch the kernel a millisecond later: the pieces read at done are the poison, and a
// launch after the window finds its input pool unmapped.
TEST_F(GpuAttackTest, HipDeferredWritesEarnNothing) {
  expectNoCredit(submitHip(R"(#include <chrono>
#include <map>
#include <thread>
#include <utility>
extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  static std::map<std::pair<int, int>, int> calls;
  if (++calls[{rows, cols}] <= 4) {
    baseline_softmax_rows(x, y, rows, cols);
    return;
  }
  std::thread([=] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    baseline_softmax_rows(x, y, rows, cols);
    (void)hipStreamSynchronize(0);
  }).detach();
}
)"));
}

// Honest for the first eight calls of every shape, keeping each output, then answers call n with
// a device-to-device copy of the output of call n mod 8, as if input sets came round in a fixed
// order: every timed call has inputs of its own, so the kept calls' outputs are wrong.
TEST_F(GpuAttackTest, HipReplayingOutputsByCallIndexEarnsNothing) {
  expectNoCredit(submitHip(R"(#include <map>
#include <utility>
#include <vector>
extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  static std::map<std::pair<int, int>, std::vector<float*>> kept;
  static std::map<std::pair<int, int>, int> calls;
  const std::pair<int, int> shape{rows, cols};
  const int n = calls[shape]++;
  const size_t bytes = size_t(rows) * cols * sizeof(float);
  std::vector<float*>& outputs = kept[shape];
  if (n < 8) {
    baseline_softmax_rows(x, y, rows, cols);
    float* copy = nullptr;
    if (hipMalloc(reinterpret_cast<void**>(&copy), bytes) == hipSuccess) {
      (void)hipMemcpyAsync(copy, y, bytes, hipMemcpyDeviceToDevice, 0);
      outputs.push_back(copy);
    }
    return;
  }
  if (outputs.empty()) {
    baseline_softmax_rows(x, y, rows, cols);
    return;
  }
  (void)hipMemcpyAsync(y, outputs[size_t(n) % outputs.size()], bytes, hipMemcpyDeviceToDevice, 0);
}
)"));
}

// Finds the channel's header page among its own mappings and, from a thread, answers every go
// with done at once (and a worker's time of 1 ns), so the driver's clock would stop before the
// kernel has run; the kernel itself is the baseline's.
TEST_F(GpuAttackTest, HipClaimingDoneBeforeTheWorkIsFinishedEarnsNothing) {
  expectNoCredit(submitHip(R"(#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
namespace {
unsigned char* headerPage() {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return nullptr;
  char line[512];
  unsigned char* found = nullptr;
  while (std::fgets(line, sizeof line, f))
    if (std::strstr(line, "akachan")) {
      unsigned long lo = 0;
      std::sscanf(line, "%lx-", &lo);
      found = reinterpret_cast<unsigned char*>(lo);
    }
  std::fclose(f);
  return found;
}
void forgeDone() {
  static bool started = false;
  if (started) return;
  unsigned char* h = headerPage();
  if (!h) return;
  started = true;
  std::thread([h] {
    auto* go = reinterpret_cast<std::atomic<uint32_t>*>(h + 64);
    auto* done = reinterpret_cast<std::atomic<uint32_t>*>(h + 128);
    for (uint32_t last = go->load();;) {
      const uint32_t now = go->load();
      if (now != last) {
        last = now;
        *reinterpret_cast<uint64_t*>(h + 136) = 1;
        done->store(now);
      }
    }
  }).detach();
}
}  // namespace
extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  forgeDone();
  baseline_softmax_rows(x, y, rows, cols);
}
)"));
}

// Hot-patches the statically linked cudaEventElapsedTime (hipEventElapsedTime's) at start-up so
// that every event time the worker reads is 1 us, and does the honest work three times over:
// only the driver's clock counts, so it must measure about a third of the baseline's speed.
TEST_F(GpuAttackTest, HipLyingClocksEarnNothing) {
  expectNoCredit(submitHip(R"(#include <sys/mman.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
namespace {
// Every event time this process reads is a thousandth of a millisecond.
cudaError_t fastElapsed(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0.001f;
  return cudaSuccess;
}
// Overwrites the start of the statically linked cudaEventElapsedTime with a jump to fastElapsed.
bool patchElapsed() {
  auto* target = reinterpret_cast<unsigned char*>(&cudaEventElapsedTime);
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* base = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(target) & ~(page - 1));
  if (mprotect(base, 2 * page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return false;
  unsigned char jump[12] = {0x48, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xE0};  // movabs rax, imm; jmp rax
  const auto to = reinterpret_cast<uintptr_t>(&fastElapsed);
  std::memcpy(jump + 2, &to, sizeof to);
  std::memcpy(target, jump, sizeof jump);
  return true;
}
const bool patched = [] {
  const bool ok = patchElapsed();
  std::fprintf(stderr, "cheat: cudaEventElapsedTime %s\n", ok ? "patched" : "not patched");
  return ok;
}();
}  // namespace
extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  for (int i = 0; i < 3; ++i) baseline_softmax_rows(x, y, rows, cols);
}
)"));
}

// --- triton2triton/softmax: the baseline's softmax wrapped -----------------------------------

json submitPython(const std::string& cheat) {
  return GpuAttackTestAccess::submit("triton2triton/softmax", "kernel.py", "", "\n_baseline = softmax\n" + cheat);
}

// The baseline on a stream of its own, the loader's device synchronisation and its event timer
// patched away: the call returns (and done is posted) while the work still runs.
TEST_F(GpuAttackTest, PythonWorkOnASideStreamWithTheLoadersWaitPatchedAwayEarnsNothing) {
  expectNoCredit(submitPython(R"(import torch as _torch
_side = _torch.cuda.Stream()
_torch.cuda.synchronize = lambda device=None: None
_torch.cuda.Event.synchronize = lambda self: None
_torch.cuda.Event.elapsed_time = lambda self, end: 0.001


def softmax(x, y):
    with _torch.cuda.stream(_side):
        _baseline(x, y)
)"));
}

// Honest for the first four calls of every shape (all that a correctness run makes), then it
// returns at once and a thread does the work a millisecond later.
TEST_F(GpuAttackTest, PythonDeferredWritesEarnNothing) {
  expectNoCredit(submitPython(R"(import threading as _threading
import time as _time
_calls = {}


def softmax(x, y):
    n = _calls[tuple(x.shape)] = _calls.get(tuple(x.shape), 0) + 1
    if n <= 4:
        return _baseline(x, y)

    def later():
        _time.sleep(0.001)
        _baseline(x, y)
    _threading.Thread(target=later, daemon=True).start()
)"));
}

// Honest for the first four calls of every shape, then computes only every eighth call and
// returns at once from the others.
TEST_F(GpuAttackTest, PythonSkippingMostCallsEarnsNothing) {
  expectNoCredit(submitPython(R"(_calls = {}


def softmax(x, y):
    n = _calls[tuple(x.shape)] = _calls.get(tuple(x.shape), 0) + 1
    if n <= 4 or n % 8 == 0:
        _baseline(x, y)
)"));
}

// Honest for the first eight calls of every shape, keeping each output, then answers call n with
// a copy of the output of call n mod 8, as if input sets came round in a fixed order.
TEST_F(GpuAttackTest, PythonReplayingOutputsByCallIndexEarnsNothing) {
  expectNoCredit(submitPython(R"(_kept = {}
_calls = {}


def softmax(x, y):
    shape = tuple(x.shape)
    n = _calls[shape] = _calls.get(shape, 0) + 1
    outputs = _kept.setdefault(shape, [])
    if n <= 8:
        _baseline(x, y)
        outputs.append(y.clone())
        return
    y.copy_(outputs[n % 8])
)"));
}

// Memoises outputs by 64 sampled input values and the shape; a hit is a copy.
TEST_F(GpuAttackTest, PythonCachingOutputsByInputContentEarnsNothing) {
  expectNoCredit(submitPython(R"(_cache = {}


def softmax(x, y):
    flat = x.reshape(-1)
    key = (tuple(x.shape), flat[:: max(1, flat.numel() // 64)][:64].cpu().numpy().tobytes())
    hit = _cache.get(key)
    if hit is not None:
        y.copy_(hit)
        return
    _baseline(x, y)
    if len(_cache) < 48:
        _cache[key] = y.clone()
)"));
}

// Every clock the worker process can reach runs at a tenth of its speed (torch's events,
// time.perf_counter, time.monotonic), and the honest work is done three times over: only the
// driver's clock counts, so it must measure about a third of the baseline's speed.
TEST_F(GpuAttackTest, PythonLyingClocksEarnNothing) {
  expectNoCredit(submitPython(R"(import time as _time
import torch as _torch
_elapsed = _torch.cuda.Event.elapsed_time
_torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 10
for _name in ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns"):
    _real = getattr(_time, _name)
    _start = _real()
    setattr(_time, _name, (lambda r, s: (lambda: s + (r() - s) / 10))(_real, _start))


def softmax(x, y):
    for _ in range(3):
        _baseline(x, y)
)"));
}

// Finds the channel's header among the loader's objects and posts done itself as soon as the
// kernel is queued, with a worker's time of 1 ns: the driver's clock would stop before the
// kernel has run.
TEST_F(GpuAttackTest, PythonClaimingDoneBeforeTheWorkIsFinishedEarnsNothing) {
  expectNoCredit(submitPython(R"(import gc as _gc


def _header():
    for o in _gc.get_objects():
        if type(o).__name__ == "Header" and hasattr(o, "finish") and hasattr(o, "go"):
            return o
    return None


def softmax(x, y):
    _baseline(x, y)
    h = _header()
    if h is not None:
        h.finish(h.go(), 0, 1)
)"));
}

// Hooks the loader's InputPool class (found once among the loaded modules) so that it learns of
// every window's pool as it arrives, and at the first call of a window computes the answer for
// every input set of the pool, so that the window's later calls are a copy: the decoy sets make
// that cost more than the calls it saves.
TEST_F(GpuAttackTest, PythonAnsweringTheWholeInputPoolAtOnceEarnsNothing) {
  expectNoCredit(submitPython(R"(import gc as _gc
import sys as _sys
import torch as _torch
_seen = {"hooked": False, "pool": None, "answers": None}


def _hook():
    _seen["hooked"] = True
    cls = next((c for m in list(_sys.modules.values()) for c in [getattr(m, "InputPool", None)]
                if isinstance(c, type) and hasattr(c, "inputs")), None)
    if cls is None:
        return
    init = cls.__init__

    def hooked(self, *a, **k):
        init(self, *a, **k)
        _seen["pool"], _seen["answers"] = self, None
    cls.__init__ = hooked
    live = [o for o in _gc.get_objects() if type(o) is cls]
    if live:
        _seen["pool"] = live[-1]


def softmax(x, y):
    if not _seen["hooked"]:
        _hook()
    pool = _seen["pool"]
    if pool is not None and _seen["answers"] is None:
        _seen["answers"] = {}
        for i in range(pool.sets):
            xi = pool.inputs(i)["x"]
            if xi.shape == x.shape:
                yi = _torch.empty_like(xi)
                _baseline(xi, yi)
                _seen["answers"][xi.data_ptr()] = yi
    hit = (_seen["answers"] or {}).get(x.data_ptr())
    if hit is not None and hit.shape == y.shape:
        y.copy_(hit)
        return
    _baseline(x, y)
)"));
}

}  // namespace
}  // namespace akad::test
