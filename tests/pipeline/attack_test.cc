// Attacks on the scorer, end to end: each test has an agent write a kernel.cpp for cpu/reduction
// that cheats in one way (skipped, cached, replayed, precomputed, deferred or overlapped work,
// lying clocks, a kernel that goes for the scorer's processes) and submits it through the real
// akad, akabox and the trusted driver. None may earn credit: a result that is correct with a
// speedup over kCreditSpeedup. The cheating kernels compute with the baseline's own loop, so
// whatever speed they gain comes from the cheat alone. Every test checks that no sandbox process
// or cgroup of its daemon is left behind.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/pipeline/pipeline_daemon.h"

namespace akad::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Honest code of the baseline's speed measures about 1 (NoopAgentScoresAboutOne allows 0.25 of
// noise); more than this is credit.
constexpr double kCreditSpeedup = 1.3;


// One daemon for the suite: the task's trusted build is made once. Its tasks time 10 x 2 calls
// per configuration (shortTimedTasks): the verified sample is then a larger share of them.
class AttackTest : public SuiteDaemon<AttackTest> {
 public:
  static constexpr const char* kTag = "attack";
  static constexpr PipelineDaemon::Timing kTiming = PipelineDaemon::Timing::Quick;

 protected:
  // The agent only writes `kernel` over kernel.cpp; the attempt is scored as usual.
  static json submitKernel(const std::string& kernel) {
    return daemon_->runOne({"cpu/reduction", "--agent-command", "cat > kernel.cpp <<'EOF'\n" + kernel + "EOF\n"});
  }
};

const json& result(const json& attempt) { return attempt.at("result"); }

bool earnsCredit(const json& r) {
  return r.value("correct", false) && r.contains("speedup") && r.at("speedup").is_number() &&
         r.at("speedup").get<double>() > kCreditSpeedup;
}

std::string gateReason(const json& r, const std::string& gate) {
  const json& gates = r.at("gates");
  return gates.contains(gate) ? gates.at(gate).value("reason", std::string()) : std::string();
}

// What a reader needs to judge an attack's result, without the seeds, cases and logs.
json verdictOf(const json& r) {
  json v;
  for (const char* k : {"compiled", "correct", "speedup", "score", "held_out_correct", "held_out_speedup", "failure"})
    if (r.contains(k)) v[k] = r.at(k);
  for (const auto& [name, g] : r.at("gates").items()) {
    json& out = v["gates"][name];
    out["pass"] = g.value("pass", false);
    if (g.contains("reason")) out["reason"] = g.at("reason").get<std::string>().substr(0, 600);
    if (g.contains("speedup")) out["speedup"] = g.at("speedup");
    if (g.contains("extra_rounds")) out["extra_rounds"] = g.at("extra_rounds");
    for (const json& c : g.value("configs", json::array())) {
      json row = {{"name", c.value("name", "")}, {"speedup", c.value("speedup", 0.0)}};
      for (const char* k : {"verified_calls", "clock_disagreement", "below_resolution", "candidate_inproc_median_ns", "round_medians_ns"})
        if (c.contains(k)) row[k] = c.at(k);
      if (c.contains("candidate")) row["candidate_median_ns"] = c.at("candidate").value("median_ns", 0.0);
      if (c.contains("baseline")) row["baseline_median_ns"] = c.at("baseline").value("median_ns", 0.0);
      out["configs"].push_back(row);
    }
  }
  return v;
}

// The attempt was scored without credit; its verdict goes to the test's output either way, so a
// passing run still shows how close each attack came.
void expectNoCredit(const json& attempt) {
  ASSERT_EQ(attempt.at("state"), "scored") << attempt.dump();
  const json v = verdictOf(result(attempt));
  std::cout << "[ verdict  ] " << v.dump() << "\n";
  EXPECT_FALSE(earnsCredit(result(attempt))) << "the attack earned credit: " << v.dump(2);
}

// For attacks that are honest on the first calls of every shape (all that a correctness run
// makes) and cheat afterwards: the verified sample of timed calls must catch them.
void expectCaughtByTheTimedCallCheck(const json& attempt) {
  ASSERT_NO_FATAL_FAILURE(expectNoCredit(attempt));
  const json& r = result(attempt);
  EXPECT_TRUE(r.at("compiled").get<bool>()) << r.value("failure", "");
  EXPECT_TRUE(r.at("gates").at("correctness").value("pass", false))
      << "the attack should pass the correctness run and be caught in the timed calls: " << gateReason(r, "correctness");
  EXPECT_FALSE(r.at("correct").get<bool>());
  EXPECT_NE(gateReason(r, "performance").find("outputs of timed calls are wrong"), std::string::npos)
      << verdictOf(r).dump(2);
  EXPECT_NE(r.value("failure", "").find("outputs of timed calls are wrong"), std::string::npos) << r.value("failure", "");
}

// Skips calls: honest for the first four calls of every shape, then computes only every eighth
// call and returns at once from the others.
TEST_F(AttackTest, SkippingMostCallsFailsTheTimedCallCheck) {
  const std::string kernel = R"CPP(
#include <cstddef>
static size_t lastRows = 0, lastCols = 0, calls = 0;
extern "C" void row_sum(const float* x, float* out, size_t rows, size_t cols) {
  if (rows != lastRows || cols != lastCols) {
    lastRows = rows;
    lastCols = cols;
    calls = 0;
  }
  const size_t n = calls++;
  if (n >= 4 && n % 8 != 0) return;
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += x[r * cols + c];
    out[r] = static_cast<float>(s);
  }
}
)CPP";
  expectCaughtByTheTimedCallCheck(submitKernel(kernel));
}

// Memoises outputs by a fingerprint of 64 sampled input elements and the shape: the driver's
// fresh inputs for every call must leave it nothing to hit, or a hit must be a wrong answer.
TEST_F(AttackTest, CachingByInputContentEarnsNothing) {
  const std::string kernel = R"CPP(
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>
static uint64_t fingerprint(const float* x, size_t rows, size_t cols) {
  const size_t n = rows * cols;
  uint64_t h = 1469598103934665603ull ^ (rows * 1000003u + cols);
  for (size_t k = 0; k < 64; ++k) {
    uint32_t v;
    std::memcpy(&v, x + (k * 2654435761u) % n, sizeof v);
    h = (h ^ v) * 1099511628211ull;
  }
  return h;
}
static std::unordered_map<uint64_t, std::vector<float>> memo;
extern "C" void row_sum(const float* x, float* out, size_t rows, size_t cols) {
  const uint64_t key = fingerprint(x, rows, cols);
  auto hit = memo.find(key);
  if (hit != memo.end() && hit->second.size() == rows) {
    std::memcpy(out, hit->second.data(), rows * sizeof(float));
    return;
  }
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += x[r * cols + c];
    out[r] = static_cast<float>(s);
  }
  if (memo.size() < 512) memo[key].assign(out, out + rows);
}
)CPP";
  expectNoCredit(submitKernel(kernel));
}

// Records the outputs of the first eight calls of every shape by call number, in memory and in
// files wherever it can write (for a later process to find), and replays them for every later
// call with the same number modulo eight.
TEST_F(AttackTest, ReplayingOutputsByCallIndexFailsTheTimedCallCheck) {
  const std::string kernel = R"CPP(
#include <cstddef>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>
static const char* const kDirs[] = {"/tmp", "/var/tmp", "/dev/shm", "/workspace", "/candidate", "/out", "/channel", "."};
static std::map<std::tuple<size_t, size_t, size_t>, std::vector<float>> recorded;
static size_t lastRows = 0, lastCols = 0, calls = 0;
static std::string fileFor(const char* dir, size_t rows, size_t cols, size_t slot) {
  return std::string(dir) + "/.replay-" + std::to_string(rows) + "x" + std::to_string(cols) + "-" + std::to_string(slot);
}
static bool replayFromFile(size_t rows, size_t cols, size_t slot, std::vector<float>& v) {
  for (const char* dir : kDirs) {
    FILE* f = std::fopen(fileFor(dir, rows, cols, slot).c_str(), "rb");
    if (!f) continue;
    v.resize(rows);
    const bool ok = std::fread(v.data(), sizeof(float), rows, f) == rows;
    std::fclose(f);
    if (ok) return true;
  }
  return false;
}
extern "C" void row_sum(const float* x, float* out, size_t rows, size_t cols) {
  if (rows != lastRows || cols != lastCols) {
    lastRows = rows;
    lastCols = cols;
    calls = 0;
  }
  const size_t slot = calls++ % 8;
  const auto key = std::make_tuple(rows, cols, slot);
  auto it = recorded.find(key);
  std::vector<float> v;
  if (it == recorded.end() && replayFromFile(rows, cols, slot, v)) it = recorded.emplace(key, v).first;
  if (it != recorded.end()) {
    for (size_t r = 0; r < rows; ++r) out[r] = it->second[r];
    return;
  }
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += x[r * cols + c];
    out[r] = static_cast<float>(s);
  }
  recorded[key].assign(out, out + rows);
  for (const char* dir : kDirs)
    if (FILE* f = std::fopen(fileFor(dir, rows, cols, slot).c_str(), "wb")) {
      std::fwrite(out, sizeof(float), rows, f);
      std::fclose(f);
    }
}
)CPP";
  expectCaughtByTheTimedCallCheck(submitKernel(kernel));
}

// Scans the file system at start-up for .akt tensor files (inputs and expected outputs), and
// answers any call whose input matches one of them from memory. The worker is handed no input
// file and sees none of the reference's, so it must find nothing that helps.
TEST_F(AttackTest, AnsweringFromDataFilesFoundOnDiskEarnsNothing) {
  const std::string kernel = R"CPP(
#include <dirent.h>
#include <sys/stat.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

// Before the first call: every .akt file it can find, inputs keyed by shape and first elements,
// answers by the same file stem.
namespace {
using Key = std::tuple<uint64_t, uint64_t, std::string>;  // rows, cols, first 16 elements
std::map<Key, std::string> inputStems;                    // -> path stem of an *.in.akt
std::map<std::string, std::vector<float>> answers;        // stem -> first tensor of its *.ref.akt
size_t filesSeen = 0;

struct AktTensor {
  std::vector<uint64_t> dims;
  long offset = 0;  // of the data
};
bool readFirstTensor(FILE* f, AktTensor& t) {
  char magic[4];
  uint32_t count;
  uint16_t nameLen;
  uint8_t dtype, rank;
  if (std::fread(magic, 1, 4, f) != 4 || std::memcmp(magic, "AKT1", 4) != 0) return false;
  if (std::fread(&count, 4, 1, f) != 1 || count == 0 || std::fread(&nameLen, 2, 1, f) != 1) return false;
  if (std::fseek(f, nameLen, SEEK_CUR) != 0 || std::fread(&dtype, 1, 1, f) != 1 || std::fread(&rank, 1, 1, f) != 1) return false;
  if (dtype != 0 || rank > 8) return false;
  t.dims.resize(rank);
  if (rank && std::fread(t.dims.data(), 8, rank, f) != rank) return false;
  t.offset = std::ftell(f);
  return true;
}
void load(const std::string& path) {
  ++filesSeen;
  const auto dot = path.rfind(".in.akt");
  const auto refDot = path.rfind(".ref.akt");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return;
  AktTensor t;
  if (readFirstTensor(f, t)) {
    if (dot != std::string::npos && dot + 7 == path.size() && t.dims.size() == 2) {
      std::string first(16 * sizeof(float), '\0');
      if (std::fread(&first[0], 1, first.size(), f) == first.size())
        inputStems[Key(t.dims[0], t.dims[1], first)] = path.substr(0, dot);
    } else if (refDot != std::string::npos && refDot + 8 == path.size() && t.dims.size() == 1 && t.dims[0] < (1u << 24)) {
      std::vector<float> v(t.dims[0]);
      if (std::fread(v.data(), sizeof(float), v.size(), f) == v.size()) answers[path.substr(0, refDot)] = std::move(v);
    }
  }
  std::fclose(f);
}
void scan(const std::string& dir, int depth, std::chrono::steady_clock::time_point deadline) {
  static const char* const kSkip[] = {"/proc", "/sys", "/dev", "/usr", "/lib", "/lib64", "/lib32", "/bin",
                                      "/sbin", "/etc", "/boot", "/snap", "/var/lib", "/var/cache"};
  for (const char* s : kSkip)
    if (dir == s) return;
  if (depth > 10 || std::chrono::steady_clock::now() > deadline) return;
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = (dir == "/" ? "" : dir) + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) scan(path, depth + 1, deadline);
    else if (S_ISREG(st.st_mode) && path.size() > 4 && path.compare(path.size() - 4, 4, ".akt") == 0) load(path);
  }
  closedir(d);
}
const bool scanned = [] {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (const char* d : {"/workspace", "/candidate", "/data", "/expected", "/plans", "/tmp", "/out", "/trusted",
                        "/channel", "/jit", "/dev/shm", "/var/tmp", "/home", "/root", "/mnt", "/srv", "/opt", "/"})
    scan(d, 0, deadline);
  std::fprintf(stderr, "kernel: %zu .akt files, %zu inputs, %zu answers\n", filesSeen, inputStems.size(), answers.size());
  return true;
}();
}  // namespace

extern "C" void row_sum(const float* x, float* out, size_t rows, size_t cols) {
  if (!inputStems.empty() && rows * cols >= 16) {
    auto it = inputStems.find(Key(rows, cols, std::string(reinterpret_cast<const char*>(x), 16 * sizeof(float))));
    if (it != inputStems.end()) {
      auto a = answers.find(it->second);
      if (a != answers.end() && a->second.size() == rows) {
        std::memcpy(out, a->second.data(), rows * sizeof(float));
        return;
      }
    }
  }
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += x[r * cols + c];
    out[r] = static_cast<float>(s);
  }
}
)CPP";
  expectNoCredit(submitKernel(kernel));
}

// Returns at once and leaves the work to a detached thread that writes the outputs a few
// milliseconds later (after the first three calls of every shape, which it computes itself).
TEST_F(AttackTest, DeferredWritesFailTheTimedCallCheck) {
  const std::string kernel = R"CPP(
#include <csetjmp>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

// Honest for the first calls of every shape, then returns at once and leaves the work to a
// detached thread. The thread survives the region it writes to being unmapped at the end of a
// configuration: a fault there jumps back out instead of killing the process.
namespace {
thread_local sigjmp_buf* guard = nullptr;
void onFault(int sig, siginfo_t*, void*) {
  if (guard) siglongjmp(*guard, 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
const bool installed = [] {
  struct sigaction sa {};
  sa.sa_sigaction = onFault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
  return true;
}();
void sumRows(const float* x, float* out, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += x[r * cols + c];
    out[r] = static_cast<float>(s);
  }
}
size_t lastRows = 0, lastCols = 0, calls = 0;
}  // namespace

extern "C" void row_sum(const float* x, float* out, size_t rows, size_t cols) {
  if (rows != lastRows || cols != lastCols) {
    lastRows = rows;
    lastCols = cols;
    calls = 0;
  }
  if (calls++ < 3) return sumRows(x, out, rows, cols);
  std::thread([=] {
    sigjmp_buf here;
    if (sigsetjmp(here, 1) == 0) {
      guard = &here;
      std::vector<float> sums(rows);
      sumRows(x, sums.data(), rows, cols);
      std::memcpy(out, sums.data(), rows * sizeof(float));
    }
    guard = nullptr;
  }).detach();
}
)CPP";
  expectCaughtByTheTimedCallCheck(submitKernel(kernel));
}

// A thread spins on the input buffer between calls and sums every row as soon as the driver's
// copy of the next inputs has passed it: the work overlaps the copy, which the scorer counts as
// the driver's fixed overhead. It must either be wrong (rows read before they landed) or gain
// nothing.
TEST_F(AttackTest, ComputingWhileTheInputsArriveEarnsNothing) {
  const std::string kernel = R"CPP(
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csetjmp>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

// After a call, a watcher thread follows the copy of the next call's inputs into the same buffer
// row by row (a row counts as landed once the row 64 KiB further on has changed; the last rows
// wait for the call) and sums each row as it lands, so part of the work is done under the copy,
// before the call starts. The call waits for the watcher. Reads of a buffer that was unmapped
// at the end of a configuration fault and jump back out instead of killing the process.
namespace {
struct Job {
  const float* x = nullptr;
  size_t rows = 0, cols = 0;
};
// Never destroyed: at exit the watcher still waits on the condition variable, and destroying
// one with a waiter blocks for ever.
struct Watch {
  std::mutex mu;
  std::condition_variable cv;
  Job job;                // guarded by mu
  bool armed = false;     // a job waits for the watcher; guarded by mu
  bool watching = false;  // the watcher is on a job; guarded by mu
  volatile bool callStarted = false, cancelled = false;
  std::vector<float> lastOfRow, sums;  // handed over under mu
};
Watch& w = *new Watch;

thread_local sigjmp_buf* guard = nullptr;
void onFault(int sig, siginfo_t*, void*) {
  if (guard) siglongjmp(*guard, 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

float sumRow(const float* row, size_t cols) {
  double s = 0;
  for (size_t c = 0; c < cols; ++c) s += row[c];
  return static_cast<float>(s);
}

void watchInputs() {
  for (;;) {
    Job j;
    {
      std::unique_lock<std::mutex> l(w.mu);
      w.cv.wait(l, [] { return w.armed; });
      j = w.job;
      w.armed = false;
      w.watching = true;
    }
    sigjmp_buf here;
    if (sigsetjmp(here, 1) == 0) {
      guard = &here;
      const size_t lag = std::max<size_t>(1, (64 << 10) / (j.cols * sizeof(float)));
      for (size_t r = 0; r < j.rows && !w.cancelled; ++r) {
        if (r + lag < j.rows) {
          const volatile float* probe = j.x + (r + lag) * j.cols + j.cols - 1;
          while (!w.callStarted && !w.cancelled && *probe == w.lastOfRow[r + lag]) {
          }
        } else {
          while (!w.callStarted && !w.cancelled) {
          }
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        w.sums[r] = sumRow(j.x + r * j.cols, j.cols);
      }
    }
    guard = nullptr;
    {
      std::lock_guard<std::mutex> l(w.mu);
      w.watching = false;
    }
    w.cv.notify_all();
  }
}

const bool started = [] {
  struct sigaction sa {};
  sa.sa_sigaction = onFault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
  std::thread(watchInputs).detach();
  return true;
}();
}  // namespace

extern "C" void row_sum(const float* x, float* out, size_t rows, size_t cols) {
  std::unique_lock<std::mutex> l(w.mu);
  const bool mine = w.job.x == x && w.job.rows == rows && w.job.cols == cols && (w.armed || w.watching);
  if (mine) {
    std::atomic_thread_fence(std::memory_order_release);
    w.callStarted = true;
    w.cv.wait(l, [] { return !w.armed && !w.watching; });
    std::memcpy(out, w.sums.data(), rows * sizeof(float));
  } else {
    w.cancelled = true;
    w.armed = false;
    w.cv.wait(l, [] { return !w.watching; });
    w.cancelled = false;
    for (size_t r = 0; r < rows; ++r) out[r] = sumRow(x + r * cols, cols);
  }
  // Watch for the next call's inputs.
  w.lastOfRow.resize(rows);
  for (size_t r = 0; r < rows; ++r) w.lastOfRow[r] = x[r * cols + cols - 1];
  w.sums.assign(rows, 0.0f);
  w.job = {x, rows, cols};
  w.callStarted = false;
  w.armed = true;
  l.unlock();
  w.cv.notify_all();
}
)CPP";
  expectNoCredit(submitKernel(kernel));
}

// Every clock in the worker process (clock_gettime, gettimeofday, steady_clock, system_clock)
// runs at a tenth of its speed, forged report.json, times and verdict files go wherever the
// worker can write, and the honest work is done three times over: only the driver's clock
// counts, so it must measure about a third of the baseline's speed.
TEST_F(AttackTest, LyingClocksAndForgedTimesInTheWorkerEarnNothing) {
  const std::string kernel = R"CPP(
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <ctime>
#include <string>

// Every clock this process can reach runs at a tenth of its speed, and fake times and reports
// go wherever the process can write; the work itself is honest but done three times over.
namespace {
long long realNs(clockid_t id) {
  timespec t{};
  syscall(SYS_clock_gettime, id, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}
long long slowed(clockid_t id) {
  static const long long base = realNs(CLOCK_MONOTONIC);
  const long long now = realNs(id);
  return id == CLOCK_REALTIME ? now : base + (now - base) / 10;
}
}  // namespace

extern "C" int clock_gettime(clockid_t id, struct timespec* ts) noexcept {
  const long long ns = slowed(id);
  ts->tv_sec = ns / 1000000000LL;
  ts->tv_nsec = ns % 1000000000LL;
  return 0;
}
extern "C" int gettimeofday(struct timeval* __restrict tv, void* __restrict) noexcept {
  const long long ns = slowed(CLOCK_MONOTONIC);
  tv->tv_sec = ns / 1000000000LL;
  tv->tv_usec = (ns % 1000000000LL) / 1000;
  return 0;
}
std::chrono::steady_clock::time_point std::chrono::steady_clock::now() noexcept {
  return time_point(std::chrono::nanoseconds(slowed(CLOCK_MONOTONIC)));
}
std::chrono::system_clock::time_point std::chrono::system_clock::now() noexcept {
  return time_point(std::chrono::duration_cast<duration>(std::chrono::nanoseconds(slowed(CLOCK_MONOTONIC))));
}

static const bool forged = [] {
  std::string samples = "[1000";
  for (int i = 1; i < 30; ++i) samples += ",1000";
  samples += "]";
  std::string groups;
  for (const char* g : {"v-1024x4096", "v-64x65536", "v-16384x256", "h-1x4000037", "h-3001x1331", "h-65537x31", "h-7x1"})
    groups += std::string(groups.empty() ? "" : ",") + "{\"name\":\"" + g + "\",\"samples_ns\":" + samples +
              ",\"empty_ns\":[],\"inproc_ns\":[],\"kept\":0}";
  for (const char* dir : {"/out", "/channel", "/tmp", "/workspace", "/candidate", "/plans", "/data", "/trusted", ".", "/dev/shm"}) {
    auto put = [&](const std::string& name, const std::string& text) {
      if (FILE* f = std::fopen((std::string(dir) + "/" + name).c_str(), "w")) {
        std::fputs(text.c_str(), f);
        std::fclose(f);
      }
    };
    put("report.json", "{\"mode\":\"perf\",\"groups\":[" + groups + "]}");
    put("verify.json", "{\"cases\":[]}");
    put("verdict.json", "{\"ok\":true,\"cases\":[]}");
    for (const char* g : {"v-1024x4096", "v-64x65536", "v-16384x256"})
      put(std::string(g) + ".times.json", "{\"samples_ns\":" + samples + "}");
  }
  return true;
}();

extern "C" void row_sum(const float* x, float* out, size_t rows, size_t cols) {
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t r = 0; r < rows; ++r) {
      double s = 0;
      for (size_t c = 0; c < cols; ++c) s += x[r * cols + c];
      out[r] = static_cast<float>(s);
    }
    asm volatile("" ::: "memory");
  }
}
)CPP";
  json a = submitKernel(kernel);
  ASSERT_NO_FATAL_FAILURE(expectNoCredit(a));
  const json& r = result(a);
  ASSERT_TRUE(r.at("correct").get<bool>()) << "the work is honest: " << r.value("failure", "");
  EXPECT_LT(r.at("speedup").get<double>(), 1.0) << verdictOf(r).dump(2);
  // The worker's own (slowed) clock disagrees with the driver's, and that is flagged.
  for (const json& c : r.at("gates").at("performance").at("configs"))
    EXPECT_TRUE(c.value("clock_disagreement", false)) << c.dump();
}

// At start-up and on its first call the kernel sends SIGSTOP and then SIGKILL to every other
// process id up to 4096 and tries to ptrace its parent and its neighbours; on its first call it
// also connects to, writes over and removes whatever lies under /channel. Then it computes
// honestly. The worker's own pid namespace and read-only channel directory leave it nothing to
// hit: the attempt is scored rather than hung, earns nothing, and the daemon carries on.
TEST_F(AttackTest, AKernelThatGoesForTheScorerHarmsNothing) {
  const std::string kernel = R"CPP(
#include <dirent.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

// Goes for everything it can reach before computing honestly: stops and kills every other
// process id and tries to trace its parent and its neighbours (at start-up and on the first
// call), and on the first call, once the runner holds its connection to the driver, writes to
// whatever lies under /channel (connecting to sockets, overwriting and removing files).
namespace {
std::set<long> ownThreads() {
  std::set<long> tids;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) tids.insert(std::strtol(e->d_name, nullptr, 10));
    closedir(d);
  }
  return tids;
}
void attackEverything(bool channel) {
  const std::set<long> mine = ownThreads();
  int stopped = 0, killed = 0, traced = 0, written = 0;
  for (pid_t p = 1; p <= 4096; ++p)
    if (!mine.count(p) && kill(p, SIGSTOP) == 0) ++stopped;
  for (pid_t p : {getppid(), pid_t(1), pid_t(2), pid_t(3), pid_t(getpid() - 1), pid_t(getpid() + 1)}) {
    if (p <= 0 || mine.count(p)) continue;
    if (ptrace(PTRACE_ATTACH, p, nullptr, nullptr) == 0) {
      ++traced;
      ptrace(PTRACE_DETACH, p, nullptr, nullptr);
    }
  }
  if (DIR* d = channel ? opendir("/channel") : nullptr) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string path = std::string("/channel/") + e->d_name;
      const int s = socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
      if (s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        const char junk[] = "{\"type\":\"bye\"}\n\xff\xff\xff\xff garbage";
        if (send(s, junk, sizeof junk, MSG_NOSIGNAL) > 0) ++written;
      }
      if (s >= 0) close(s);
      if (FILE* f = std::fopen(path.c_str(), "w")) {
        std::fputs("tampered", f);
        std::fclose(f);
        ++written;
      }
      if (unlink(path.c_str()) == 0) ++written;
    }
    closedir(d);
  }
  if (FILE* f = channel ? std::fopen("/channel/report.json", "w") : nullptr) {
    std::fputs("{}", f);
    std::fclose(f);
    ++written;
  }
  for (pid_t p = 1; p <= 4096; ++p)
    if (!mine.count(p) && kill(p, SIGKILL) == 0) ++killed;
  std::fprintf(stderr, "kernel: stopped %d, killed %d, traced %d, wrote %d\n", stopped, killed, traced, written);
}
const bool atStart = (attackEverything(false), true);
}  // namespace

extern "C" void row_sum(const float* x, float* out, size_t rows, size_t cols) {
  static const bool once = (attackEverything(true), true);
  (void)once;
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += x[r * cols + c];
    out[r] = static_cast<float>(s);
  }
}
)CPP";
  const auto started = std::chrono::steady_clock::now();
  json a = submitKernel(kernel);
  ASSERT_NO_FATAL_FAILURE(expectNoCredit(a));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 600s);
  EXPECT_TRUE(daemon_->running());
  EXPECT_EQ(daemon_->ctl({"ping"}).exitCode, 0);
  json again = daemon_->ctlJson({"status", a.at("run_id").get<std::string>()}).at("attempts");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again.at(0).at("state"), "scored");
}

}  // namespace
}  // namespace akad::test
