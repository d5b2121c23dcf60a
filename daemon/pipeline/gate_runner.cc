#include "daemon/pipeline/gate_runner.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <tuple>

#include "daemon/pipeline/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {

std::string shellJoin(const std::vector<std::string>& cmds) {
  std::string s = "set -e\n";
  for (const auto& c : cmds) s += c + "\n";
  return s;
}

json caseJson(const Case& c, bool withSeed) {
  return {{"name", c.name}, {"config", c.config}, {"seed", withSeed ? c.seed : 0}};
}

json checkPlan(const Phase& p, bool withSeed) {
  json cases = json::array();
  for (const auto& c : p.check) cases.push_back(caseJson(c, withSeed));
  return {{"cases", cases}};
}

json perfPlan(const Phase& p, const TaskTiming& t, bool withSeed) {
  json cases = json::array();
  json groups = json::array();
  for (const auto& cfg : p.configs) {
    json names = json::array();
    for (const auto& c : p.perf)
      if (c.config["name"] == cfg["name"]) {
        cases.push_back(caseJson(c, withSeed));
        names.push_back(c.name);
      }
    groups.push_back({{"name", cfg["name"]}, {"cases", names}});
  }
  return {{"cases", cases},
          {"perf", {{"warmup", t.warmup}, {"samples", t.samples}, {"flush_bytes", t.flush_bytes},
                    {"groups", groups}}}};
}

std::pair<uid_t, gid_t> GateRunner::identity(const std::string& who) const {
  if (who == "candidate" && env_.candidate_uid != 0) return {env_.candidate_uid, env_.candidate_gid};
  return {env_.sandbox_uid, env_.sandbox_gid};
}

SandboxRequest GateRunner::request(double wallS, const std::string& logName, bool gpu, const std::string& who) const {
  SandboxRequest r;
  std::tie(r.outside_uid, r.outside_gid) = identity(who);
  r.memory_bytes = task_.limits.memory_bytes;
  r.pids = task_.limits.pids;
  r.wall_s = wallS;
  r.binds = env_.image.binds;
  r.env = env_.image.env;
  if (gpu) r.gpus = env_.gpus;
  r.stdout_file = l_.logs / (logName + ".out");
  r.stderr_file = l_.logs / (logName + ".err");
  // The output limit is also RLIMIT_FSIZE: input and output tensors of GPU configurations
  // reach hundreds of MiB per file.
  r.output_limit = kMaxDataFileBytes;
  return r;
}

Result<SandboxOutcome> GateRunner::run(SandboxRequest r) const {
  if (env_.canceller && env_.canceller->cancelled()) return Error{"cancelled"};
  return runSandbox(r, env_.canceller);
}

std::string GateRunner::logTail(const std::string& logName) const {
  std::string out = tailOfFile(l_.logs / (logName + ".err"), kLogTailBytes);
  std::string so = tailOfFile(l_.logs / (logName + ".out"), kLogTailBytes);
  if (!so.empty()) out += (out.empty() ? "" : "\n") + so;
  return out;
}

Status GateRunner::ownForSandbox(const fs::path& dir, const std::string& who) const {
  const auto [uid, gid] = identity(who);
  if (uid == 0) return {};
  return chownTree(dir, uid, gid);
}

Status GateRunner::useJitCache(SandboxRequest& r, const std::string& who) const {
  const fs::path dir = l_.jitCache(who);
  std::error_code ec;
  struct stat st {};
  if (!fs::exists(dir)) {
    fs::create_directories(dir, ec);
    if (ec) return Error{"cannot create the JIT cache " + dir.string() + ": " + ec.message()};
    if (auto s = ownForSandbox(dir, who); !s) return s;
  } else if (::lstat(dir.c_str(), &st) == 0 && identity(who).first != 0 && st.st_uid != identity(who).first) {
    // Made by a daemon that ran its sandboxes as another uid.
    if (auto s = ownForSandbox(dir, who); !s) return s;
  }
  r.binds.push_back({dir, kJitMount, true});
  r.env["TRITON_CACHE_DIR"] = std::string(kJitMount) + "/triton";
  r.env["CUDA_CACHE_PATH"] = std::string(kJitMount) + "/cuda";
  // Python's compiled modules too: the GPU machines' torch ships without them, and compiling
  // its modules again cost every runner process seconds of its untimed start-up.
  r.env["PYTHONPYCACHEPREFIX"] = std::string(kJitMount) + "/pycache";
  r.env["PYTHONDONTWRITEBYTECODE"] = "";  // empty is unset for Python; the image sets it
  return {};
}

Result<SandboxOutcome> GateRunner::runRunner(const std::string& who, const fs::path& programDir, const std::string& mode, const std::string& plan, const std::string& phase, const fs::path& outDir, double wallS, const std::string& logName) const {
  std::error_code ec;
  fs::create_directories(outDir, ec);
  if (auto s = ownForSandbox(outDir, who); !s) return s.error();
  SandboxRequest r = request(wallS, logName, task_.gpu, who);
  if (auto s = useJitCache(r, who); !s) return s.error();
  r.binds.push_back({programDir, "/candidate", false});
  r.binds.push_back({l_.inputs(phase), "/data", false});
  r.binds.push_back({l_.plans / plan, "/plans/" + plan, false});
  r.binds.push_back({outDir, "/out", true});
  r.env["OMP_WAIT_POLICY"] = "PASSIVE";  // spinning idle threads would blur the CPU accounting
  r.command = {"/candidate/runner", mode, "--plan", "/plans/" + plan, "--data", "/data", "--out", "/out"};
  return run(r);
}

Result<json> GateRunner::runChecker(const std::string& plan, const fs::path& outDir, const std::string& logName) const {
  return check(l_.expected, "/plans/" + plan, outDir, logName);
}

Result<json> GateRunner::checkKeptCalls(const fs::path& driverOut, const std::string& logName) const {
  return check(driverOut, "/out/verify.json", driverOut, logName);
}

Result<json> GateRunner::check(const fs::path& expectedDir, const std::string& planInSandbox, const fs::path& outDir, const std::string& logName) const {
  SandboxRequest r = request(task_.limits.correctness_s, logName, false);
  r.binds.push_back({env_.akacheck.parent_path(), "/tools", false});
  r.binds.push_back({expectedDir, "/expected", false});
  r.binds.push_back({l_.plans, "/plans", false});
  r.binds.push_back({outDir, "/out", false});
  r.command = {"/tools/" + env_.akacheck.filename().string(), "--plan", planInSandbox,
               "--data", "/expected", "--out", "/out", "--tolerances", "/plans/tolerances.json"};
  auto outcome = run(r);
  if (!outcome) return outcome.error();
  if (outcome->status != "exited" || (outcome->exit_code != 0 && outcome->exit_code != 1))
    return Error{"the checker did not finish (" + outcome->describe() + "): " + logTail(logName)};
  auto text = readFileLimited(l_.logs / (logName + ".out"), kMaxVerdictBytes);
  if (!text) return text.error();
  try {
    json v = json::parse(*text);
    if (!v.is_object() || !v.contains("ok") || !v["ok"].is_boolean())
      return Error{"the checker's verdict has no boolean 'ok'"};
    return v;
  } catch (const json::exception& e) {
    return Error{std::string("the checker's verdict is not JSON: ") + e.what()};
  }
}

Result<DrivenRun> GateRunner::runDriven(const std::string& who, const fs::path& programDir, const fs::path& trustedDir, const std::string& mode, const std::string& plan, const fs::path& outDir, double wallS, const std::string& tag) const {
  std::error_code ec;
  const fs::path channel = l_.root / "channels" / tag;
  for (const fs::path& d : {outDir, channel}) {
    fs::create_directories(d, ec);
    if (ec) return Error{"cannot create " + d.string() + ": " + ec.message()};
    if (auto s = ownForSandbox(d); !s) return s.error();
  }
  SandboxRequest driver = request(wallS, tag + "-driver", task_.gpu);
  if (auto s = useJitCache(driver, "reference"); !s) return s.error();
  driver.binds.push_back({trustedDir, "/trusted", false});
  driver.binds.push_back({l_.plans / plan, "/plans/" + plan, false});
  driver.binds.push_back({outDir, "/out", true});
  driver.binds.push_back({channel, "/channel", true});
  // Each call's input file is made here: huge pages keep the worker's fresh mapping of it to
  // a few page-table entries (docs/scoring.md, "Driver and worker").
  driver.tmpfs.push_back({"/inputs", driver.memory_bytes, true});
  driver.command = {"/trusted/driver", mode, "--plan", "/plans/" + plan, "--channel", "/channel/socket",
                    "--out", "/out", "--inputs-dir", "/inputs"};

  SandboxRequest worker = request(wallS, tag, task_.gpu, who);
  if (auto s = useJitCache(worker, who); !s) return s.error();
  worker.binds.push_back({programDir, "/candidate", false});
  worker.binds.push_back({channel, "/channel", false});
  worker.env["OMP_WAIT_POLICY"] = "PASSIVE";  // spinning idle threads would blur the CPU accounting
  // GPU harnesses queue a window's calls back to back: with one hardware queue, calls that the
  // candidate puts on streams of its own cannot run side by side (docs/scoring.md). Set before
  // the worker starts, so code of the candidate's that runs before the loader's main sees it too.
  worker.env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1";
  worker.command = {"/candidate/runner", "serve", "--channel", "/channel/socket"};

  if (env_.canceller && env_.canceller->cancelled()) return Error{"cancelled"};
  // Each side ends the other: a worker that fails leaves its driver nothing to wait for, and a
  // driver that fails (or finished while its worker lingers) leaves the worker nothing to do.
  SandboxCanceller driverCanceller, workerCanceller;
  auto driverRun = std::async(std::launch::async, [&] { return runSandbox(driver, &driverCanceller); }).share();
  auto workerRun = std::async(std::launch::async, [&] { return runSandbox(worker, &workerCanceller); }).share();
  using namespace std::chrono_literals;
  constexpr auto kLingerAfterDriver = 5s;
  auto failed = [](const auto& outcome) { return !outcome || !outcome->succeeded(); };
  std::optional<std::chrono::steady_clock::time_point> driverEnded;
  bool workerStopped = false, driverStopped = false;
  const auto ready = [](const auto& run) { return run.wait_for(0ms) == std::future_status::ready; };
  for (;;) {
    // Sleeps on whichever of the two is still running (the worker first): a loop that waited
    // only on the worker would spin once it ended, taking a CPU from the driver it waits for.
    if (!ready(workerRun))
      workerRun.wait_for(50ms);
    else
      driverRun.wait_for(50ms);
    const bool workerDone = ready(workerRun), driverDone = ready(driverRun);
    if (workerDone && driverDone) break;
    const bool cancelled = env_.canceller && env_.canceller->cancelled();
    if (cancelled) workerCanceller.cancel();
    if (!driverDone && (cancelled || (workerDone && failed(workerRun.get())))) {
      driverStopped = true;
      driverCanceller.cancel();
    }
    if (driverDone) {
      if (!driverEnded) driverEnded = std::chrono::steady_clock::now();
      if (!workerStopped &&
          (failed(driverRun.get()) || std::chrono::steady_clock::now() - *driverEnded > kLingerAfterDriver)) {
        workerStopped = true;
        workerCanceller.cancel();
      }
    }
  }
  const auto& workerOutcome = workerRun.get();
  const auto& driverOutcome = driverRun.get();
  // The pair ran at once under cancellers of its own: the attempt's time inside programs
  // (result.timing) gains the longer of the two, not nothing.
  if (env_.canceller)
    env_.canceller->addCommandSeconds(std::max(driverCanceller.commandSeconds(), workerCanceller.commandSeconds()));
  fs::remove_all(channel, ec);
  if (!workerOutcome) return workerOutcome.error();
  if (!driverOutcome) return driverOutcome.error();
  return DrivenRun{*driverOutcome, *workerOutcome, workerStopped, driverStopped};
}

}  // namespace akad
