// The scoring's result: which failures say a GPU ran out of memory (a sharing run scores such
// an attempt again alone), and which driven runs failed by the driver's own doing. The failure
// texts are those of real scorings on an H100 shared by eight attempts of one run. And the
// files the scorer reads from what a sandbox wrote.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <future>

#include "daemon/pipeline/files.h"
#include "daemon/pipeline/gate_runner.h"
#include "daemon/pipeline/score_result.h"

namespace akad {
namespace {

using nlohmann::json;

json failedGate(const std::string& reason) { return {{"pass", false}, {"reason", reason}}; }

TEST(GpuOutOfMemory, TheLineOfAFailedGateThatSaysSoIsFound) {
  json result = {{"gates",
                  {{"compile", {{"pass", true}}},
                   {"correctness", {{"pass", true}}},
                   {"performance",
                    failedGate("the candidate exited with 1: runner: case-4: call: OutOfMemoryError: CUDA out of memory. "
                               "Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 79.18 GiB of which 366.75 "
                               "MiB is free.\nrunner:   at runner_main.py:244")}}}};
  const std::string line = gpuOutOfMemoryLine(result);
  EXPECT_EQ(line.rfind("performance: the candidate exited with 1: runner: case-4: call: OutOfMemoryError", 0), 0u) << line;
  EXPECT_EQ(line.find("runner_main.py"), std::string::npos) << "only the line that says so";

  // The driver's own failure on a later line of a held-out gate's reason.
  json heldOut = {{"gates",
                   {{"held_out_performance",
                     failedGate("the driver exited with 1: driver: held-out-0-prime: 5 windows of 20 calls\n"
                                "driver: OutOfMemoryError: CUDA out of memory. Tried to allocate 5.03 GiB.")}}}};
  EXPECT_EQ(gpuOutOfMemoryLine(heldOut), "held_out_performance: driver: OutOfMemoryError: CUDA out of memory. Tried to allocate 5.03 GiB.");
  EXPECT_NE(gpuOutOfMemoryLine({{"gates", {{"correctness", failedGate("hipErrorOutOfMemory at kernel.hip:12")}}}}), "");
  EXPECT_NE(gpuOutOfMemoryLine({{"gates", {{"correctness", failedGate("CUDA_ERROR_OUT_OF_MEMORY")}}}}), "");
}

TEST(GpuOutOfMemory, OtherFailuresAndPassedGatesAreNot) {
  // The host's memory (the sandbox's cgroup) is not the GPU's: scoring alone would not help.
  EXPECT_EQ(gpuOutOfMemoryLine({{"gates", {{"correctness", failedGate("the candidate was killed: out of memory (limit 8 GiB)")}}}}), "");
  EXPECT_EQ(gpuOutOfMemoryLine({{"gates", {{"correctness", failedGate("outputs of timed calls are wrong")}}}}), "");
  // A passed gate's text is not read, whatever it holds.
  EXPECT_EQ(gpuOutOfMemoryLine({{"gates", {{"correctness", {{"pass", true}, {"reason", "CUDA out of memory"}}}}}}), "");
  EXPECT_EQ(gpuOutOfMemoryLine(json::object()), "");
  EXPECT_EQ(gpuOutOfMemoryLine({{"gates", "not an object"}}), "");
  EXPECT_EQ(gpuOutOfMemoryLine({{"gates", {{"correctness", {{"pass", false}, {"reason", 42}}}}}}), "");
}

// A trusted driver that crashed on a shared GPU is scored again alone, like a GPU out of
// memory; a driver's exit with an error (a task problem) or a candidate's crash is not.
TEST(SharedGpuRetry, ADriverCrashOrAnOutOfMemoryIsScoredAgainAlone) {
  json crashed = {{"gates",
                   {{"correctness", {{"pass", true}}},
                    {"performance", failedGate("the driver killed by signal 11: driver: case-0: 5 windows of 20 calls\n"
                                               "Fatal Python error: Segmentation fault")}}}};
  EXPECT_EQ(sharedGpuRetryReason(crashed), "performance: the driver killed by signal 11: driver: case-0: 5 windows of 20 calls");
  json baselineCrash = {{"gates", {{"performance", failedGate("baseline failed (task problem): the driver killed by signal 6: abort")}}}};
  EXPECT_EQ(sharedGpuRetryReason(baselineCrash), "performance: the driver killed by signal 6: abort");
  EXPECT_NE(sharedGpuRetryReason({{"gates", {{"correctness", failedGate("CUDA_ERROR_OUT_OF_MEMORY")}}}}), "");

  EXPECT_EQ(sharedGpuRetryReason({{"gates", {{"performance", failedGate("the driver exited with 1: driver: KeyError: 'x'")}}}}), "");
  EXPECT_EQ(sharedGpuRetryReason({{"gates", {{"performance", failedGate("the candidate killed by signal 11: runner: ...")}}}}), "");
  // The words inside a candidate's own output are not the scorer's verdict.
  EXPECT_EQ(sharedGpuRetryReason({{"gates", {{"performance", failedGate("the candidate exited with 1: print('the driver killed by signal 9')")}}}}), "");
  EXPECT_EQ(sharedGpuRetryReason({{"gates", {{"performance", failedGate("the candidate exited with 1: runner: the driver killed by signal 9")}}}}), "");
  EXPECT_EQ(sharedGpuRetryReason({{"gates", {{"performance", {{"pass", true}, {"reason", "the driver killed by signal 11"}}}}}}), "");
}

SandboxOutcome outcome(const std::string& status, int exitCode) {
  SandboxOutcome o;
  o.status = status;
  o.exit_code = exitCode;
  return o;
}

SandboxOutcome signaled(int sig) {
  SandboxOutcome o = outcome("signaled", -1);
  o.result = {{"status", "signaled"}, {"signal", sig}};
  return o;
}

// A driver that exited with an error of its own failed by itself, however soon its worker
// exited after it (it sees its channel hang up); one that reports its worker's fault, or that
// the scorer stopped (SIGKILL), did not.
TEST(DrivenRunFailure, OnlyTheDriversOwnErrorIsTheDriversFailure) {
  const SandboxOutcome ok = outcome("exited", 0), hungUp = outcome("exited", 1);
  EXPECT_TRUE((DrivenRun{outcome("exited", 1), hungUp, false}.driverFailedByItself()));
  EXPECT_TRUE((DrivenRun{outcome("exited", 1), ok, true}.driverFailedByItself()));
  EXPECT_TRUE((DrivenRun{outcome("oom", -1), hungUp, false}.driverFailedByItself()));
  EXPECT_FALSE((DrivenRun{outcome("exited", kDriverWorkerFault), hungUp, false}.driverFailedByItself()));
  EXPECT_FALSE((DrivenRun{signaled(SIGKILL), signaled(SIGKILL), false, true}.driverFailedByItself()));
  EXPECT_FALSE((DrivenRun{outcome("wall-timeout", -1), outcome("wall-timeout", -1), false}.driverFailedByItself()));
  EXPECT_FALSE((DrivenRun{ok, hungUp, false}.driverFailedByItself()));
}

// A driver that died of a signal nobody sent it crashed by itself: its worker's "peer hung up"
// is the consequence, not the cause (an attempt on an H100 shared eight ways read as the
// candidate's failure so). A crash that came just before the scorer's stop is still a crash.
TEST(DrivenRunFailure, ADriverThatCrashedFailedByItselfEvenIfAStopFollowed) {
  const SandboxOutcome hungUp = outcome("exited", 1);
  EXPECT_TRUE((DrivenRun{signaled(SIGKILL), hungUp, false, false}.driverFailedByItself()));
  EXPECT_TRUE((DrivenRun{signaled(SIGABRT), hungUp, false, false}.driverFailedByItself()));
  EXPECT_TRUE((DrivenRun{signaled(SIGSEGV), hungUp, false, true}.driverFailedByItself()));
  EXPECT_FALSE((DrivenRun{signaled(SIGTERM), hungUp, false, true}.driverFailedByItself()));
  EXPECT_TRUE((DrivenRun{outcome("cpu-timeout", -1), hungUp, false, false}.driverFailedByItself()));
}

// A driver at its wall-time limit waited on its worker: that is the worker's failure, and it is
// said so rather than as the worker's hang-up; unless the scorer had already stopped the driver.
TEST(DrivenRunFailure, ADriverAtItsWallLimitWasOutwaitedByItsWorker) {
  const SandboxOutcome hungUp = outcome("exited", 1), timedOut = outcome("wall-timeout", -1);
  EXPECT_TRUE((DrivenRun{timedOut, hungUp, false, false}.driverOutwaited()));
  EXPECT_FALSE((DrivenRun{timedOut, hungUp, false, false}.driverFailedByItself()));
  EXPECT_FALSE((DrivenRun{timedOut, hungUp, false, true}.driverOutwaited()));
  EXPECT_FALSE((DrivenRun{outcome("exited", 0), hungUp, false, false}.driverOutwaited()));
}

}  // namespace
}  // namespace akad

namespace akad {
namespace {

// A folder of the test's own under /tmp, removed with everything in it.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const char* prefix) {
    std::string tmpl = std::string("/tmp/") + prefix + ".XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~ScratchDir() {
    if (!path.empty()) std::filesystem::remove_all(path);
  }
};

// A FIFO a candidate's runner left where the scorer reads its report (`gpu_state.json`, a
// group's times) or a log: the read is refused at once, instead of the scoring thread waiting
// in open() for a writer that never comes.
TEST(SandboxWrittenFiles, AFifoAtAReportsNameIsRefusedWithoutWaiting) {
  ScratchDir scratch("akad-fifo-test");
  ASSERT_FALSE(scratch.path.empty());
  const std::filesystem::path fifo = scratch.path / "gpu_state.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  auto read = std::async(std::launch::async, [&] {
    auto r = readFileLimited(fifo, 1 << 20);
    return std::make_pair(r.ok(), tailOfFile(fifo, 4096));
  });
  bool done = read.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  EXPECT_TRUE(done) << "the read waited for a writer of the FIFO";
  // Writers release every open that got stuck, so that the test can end.
  while (!done) {
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (w >= 0) ::close(w);
    done = read.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready;
  }
  const auto [readOk, tail] = read.get();
  EXPECT_FALSE(readOk);
  EXPECT_TRUE(tail.empty());
}

// copyFile takes the editable files out of a tree a sandbox wrote: a link at the name is
// refused, never followed to what it names, and a file copies with its executable bit.
TEST(SandboxWrittenFiles, CopyFileRefusesALinkAndCopiesARegularFile) {
  ScratchDir scratch("akad-copyfile-test");
  ASSERT_FALSE(scratch.path.empty());
  const std::filesystem::path& dir = scratch.path;
  ASSERT_TRUE(writeFile(dir / "secret", "held out"));
  ASSERT_TRUE(writeFile(dir / "kernel.cu", "__global__ void k() {}"));
  ::chmod((dir / "kernel.cu").c_str(), 0700);
  std::filesystem::create_symlink(dir / "secret", dir / "linked.cu");
  std::filesystem::create_directory(dir / "out");
  ASSERT_TRUE(writeFile(dir / "out" / "linked.cu", "pristine"));

  EXPECT_FALSE(copyFile(dir / "linked.cu", dir / "out" / "linked.cu"));
  EXPECT_EQ(*readFileLimited(dir / "out" / "linked.cu", 100), "pristine");

  ASSERT_TRUE(copyFile(dir / "kernel.cu", dir / "out" / "kernel.cu"));
  EXPECT_EQ(*readFileLimited(dir / "out" / "kernel.cu", 100), "__global__ void k() {}");
  struct stat st {};
  ASSERT_EQ(::stat((dir / "out" / "kernel.cu").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
}

}  // namespace
}  // namespace akad
