#include "daemon/pipeline/score.h"

#include <map>
#include <memory>
#include <mutex>

#include "daemon/pipeline/files.h"
#include "daemon/pipeline/gate_runner.h"
#include "daemon/pipeline/prepare.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace {

// One lock per task version: a build is made once even when several attempts of the task start
// together, and builds of different tasks run at the same time (a dozen GPU tasks submitted
// together waited 40 s each, one after the other, on the H200 when one lock served them all).
std::shared_ptr<std::mutex> trustedBuildLock(const std::string& contentHash) {
  static std::mutex mapMutex;
  static std::map<std::string, std::shared_ptr<std::mutex>> locks;
  std::lock_guard lock(mapMutex);
  auto& m = locks[contentHash];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

}  // namespace

Result<fs::path> ensureTrustedBuild(const Task& task, const ScoringEnvironment& env) {
  const fs::path root = env.trusted_cache / task.content_hash;
  const fs::path done = root / "trusted";
  const std::shared_ptr<std::mutex> buildLock = trustedBuildLock(task.content_hash);
  std::lock_guard lock(*buildLock);
  if (fs::exists(done / ".built")) return done;
  std::error_code ec;
  const fs::path tmp = root / ("trusted.tmp-" + randomHex(6));
  fs::create_directories(root, ec);
  if (auto s = assemblePristineWorkspace(task, env.tasks_root, tmp); !s) return s.error();
  if (env.sandbox_uid != 0)
    if (auto s = chownTree(tmp, env.sandbox_uid, env.sandbox_gid); !s) return s.error();
  SandboxRequest r;
  r.workspace = tmp;
  r.memory_bytes = task.limits.memory_bytes;
  r.pids = task.limits.pids;
  r.wall_s = 2 * task.limits.compile_s;
  r.binds = env.image.binds;
  r.env = env.image.env;
  std::vector<std::string> cmds = task.build_reference;
  cmds.insert(cmds.end(), task.build_candidate.begin(), task.build_candidate.end());
  r.command = {"/bin/sh", "-c", shellJoin(cmds)};
  r.stdout_file = root / "trusted-build.log";
  r.stderr_file = root / "trusted-build.log";
  auto outcome = runSandbox(r, env.canceller);
  if (!outcome) {
    fs::remove_all(tmp, ec);  // a cancelled or failed start leaves no half-built tree
    return outcome.error();
  }
  if (!outcome->succeeded()) {
    fs::remove_all(tmp, ec);
    return Error{"the trusted build of task " + task.id + " failed (" + outcome->describe() +
                 "): " + tailOfFile(root / "trusted-build.log", kLogTailBytes)};
  }
  std::vector<std::string> programs = {"reference", "runner"};
  if (usesDriver(task)) programs.push_back("driver");
  for (const std::string& program : programs)
    if (!fs::exists(tmp / program)) {
      fs::remove_all(tmp, ec);
      return Error{"the trusted build of task " + task.id + " made no ./" + program};
    }
  if (auto s = writeFile(tmp / ".built", task.content_hash + "\n"); !s) return s.error();
  fs::remove_all(done, ec);
  fs::rename(tmp, done, ec);
  if (ec) return Error{"cannot move the trusted build into place at " + done.string() + ": " + ec.message()};
  return done;
}

}  // namespace akad
