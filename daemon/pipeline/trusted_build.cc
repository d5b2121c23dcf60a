#include "daemon/pipeline/score.h"

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "common/file_lock.h"
#include "common/sha256.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/gate_runner.h"
#include "daemon/pipeline/prepare.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace {

// One lock per build (task version or harness version): a build is made once even when several
// attempts of the task start together, and builds of different tasks run at the same time (a
// dozen GPU tasks submitted together waited 40 s each, one after the other, on the H200 when one
// lock served them all). Held in this process by a mutex, and across the daemons that share the
// cache (akad --trusted-cache) by an flock on <root>/.lock.
class BuildLock {
 public:
  BuildLock(const std::string& key, const fs::path& root) : mutex_(mutexFor(key)), guard_(*mutex_) {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) status_ = Error{"cannot create " + root.string() + ": " + ec.message()};
    else status_ = file_.acquire(root / ".lock", LOCK_EX);
  }
  const Status& status() const { return status_; }

 private:
  static std::shared_ptr<std::mutex> mutexFor(const std::string& key) {
    static std::mutex mapMutex;
    static std::map<std::string, std::shared_ptr<std::mutex>> locks;
    std::lock_guard lock(mapMutex);
    auto& m = locks[key];
    if (!m) m = std::make_shared<std::mutex>();
    return m;
  }
  std::shared_ptr<std::mutex> mutex_;
  std::lock_guard<std::mutex> guard_;
  FileLock file_;
  Status status_;
};

// The harness's task-independent objects (its `common` target, docs/tasks.md), built once per
// harness version and image and shared by every task of that harness: on 2 CPUs they are 27 of
// the 31 CPU-seconds of a cpp task's trusted build.
constexpr const char* kCommonTarget = "common";
constexpr const char* kCommonMount = "/common";

// Whether the harness the layers assemble offers the `common` target, and the task changes none
// of the layers' files (a task's own harness/ file of the same name would make the shared
// objects wrong for it).
bool sharesCommonObjects(const Task& task, const fs::path& tasksRoot) {
  fs::path makefile;
  std::set<std::string> layerFiles;
  for (const std::string& layer : harnessLayers(tasksRoot, task.harness)) {
    const fs::path dir = tasksRoot / "common" / layer;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      layerFiles.insert(it->path().filename().string());
    if (fs::is_regular_file(dir / "Makefile")) makefile = dir / "Makefile";
  }
  std::error_code ec;
  for (fs::directory_iterator it(task.harnessDir(), ec), end; !ec && it != end; it.increment(ec))
    if (layerFiles.count(it->path().filename().string())) return false;
  std::ifstream in(makefile);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(std::string(kCommonTarget) + ":", 0) == 0) return true;
  return false;
}

// The harness version's identity: its name, the image it builds in and every layer's files.
Result<std::string> commonHarnessKey(const Task& task, const fs::path& tasksRoot) {
  Sha256 h;
  h.update("harness:" + task.harness + "\nimage:" + task.image + "\n");
  for (const std::string& layer : harnessLayers(tasksRoot, task.harness)) {
    const fs::path dir = tasksRoot / "common" / layer;
    if (!fs::is_directory(dir)) continue;
    auto layerHash = taskContentHash(dir);
    if (!layerHash) return layerHash.error();
    h.update(layer + ":" + *layerHash + "\n");
  }
  return h.hexDigest();
}

// Runs `commands` in `workspace` in a trusted build's sandbox (the task's image and limits, as
// the sandbox uid), logging to `log`; `common` is bound read-only when not empty.
Result<SandboxOutcome> runBuildSandbox(const Task& task, const ScoringEnvironment& env, const fs::path& workspace,
                                       const std::vector<std::string>& commands, const fs::path& log,
                                       const fs::path& common) {
  if (env.sandbox_uid != 0)
    if (auto s = chownTree(workspace, env.sandbox_uid, env.sandbox_gid); !s) return s.error();
  SandboxRequest r;
  r.workspace = workspace;
  r.memory_bytes = task.limits.memory_bytes;
  r.pids = task.limits.pids;
  r.wall_s = 2 * task.limits.compile_s;
  r.binds = env.image.binds;
  r.env = env.image.env;
  bindCommonHarness(r, common);
  r.command = {"/bin/sh", "-c", shellJoin(commands)};
  r.stdout_file = log;
  r.stderr_file = log;
  return runSandbox(r, env.canceller);
}

// A build's temporary tree (root/<stem>.tmp-<random>), made under the build's lock: it is
// removed when it goes out of scope unless published, whatever step failed, and trees that a
// builder killed midway left under the same stem are removed first (none can still be in use:
// the lock is held).
class BuildTree {
 public:
  BuildTree(const fs::path& root, const std::string& stem) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.path().filename().string().rfind(stem + ".tmp-", 0) == 0) fs::remove_all(e.path(), ec);
    path_ = root / (stem + ".tmp-" + randomHex(6));
  }
  ~BuildTree() {
    std::error_code ec;
    if (!published_) fs::remove_all(path_, ec);
  }
  BuildTree(const BuildTree&) = delete;
  BuildTree& operator=(const BuildTree&) = delete;
  const fs::path& path() const { return path_; }

  // Moves the finished build to `done`, with the marker that says it is whole.
  Status publish(const fs::path& done, const std::string& marker) {
    if (auto s = writeFile(path_ / ".built", marker + "\n"); !s) return s;
    std::error_code ec;
    fs::remove_all(done, ec);
    fs::rename(path_, done, ec);
    if (ec) return Error{"cannot move the trusted build into place at " + done.string() + ": " + ec.message()};
    published_ = true;
    return {};
  }

 private:
  fs::path path_;
  bool published_ = false;
};

}  // namespace

void bindCommonHarness(SandboxRequest& request, const fs::path& common) {
  if (common.empty()) return;
  request.binds.push_back({common, kCommonMount, false});
  request.env["AKA_COMMON"] = kCommonMount;
}

Result<fs::path> ensureCommonHarnessBuild(const Task& task, const ScoringEnvironment& env) {
  if (!sharesCommonObjects(task, env.tasks_root)) return fs::path();
  auto key = commonHarnessKey(task, env.tasks_root);
  if (!key) return key.error();
  const fs::path root = env.trusted_cache / ("harness-" + *key);
  const fs::path done = root / "common";
  const BuildLock lock("harness-" + *key, root);
  if (!lock.status()) return lock.status().error();
  if (fs::exists(done / ".built")) return done;
  BuildTree tmp(root, "common");
  // The layers alone, laid out as in a workspace's harness/: the objects are every task's, and
  // sharesCommonObjects kept out the tasks whose own files would change them.
  if (auto s = assembleHarnessLayers(env.tasks_root, task.harness, /*own=*/{}, tmp.path() / "harness"); !s)
    return s.error();
  auto outcome = runBuildSandbox(task, env, tmp.path(), {"make -f harness/Makefile " + std::string(kCommonTarget)},
                                 root / "common-build.log", {});
  if (!outcome) return outcome.error();
  if (!outcome->succeeded())
    return Error{"the build of the " + task.harness + " harness's common objects failed (" + outcome->describe() +
                 "): " + tailOfFile(root / "common-build.log", kLogTailBytes)};
  if (auto s = tmp.publish(done, *key); !s) return s.error();
  return done;
}

Result<TrustedBuild> ensureTrustedBuild(const Task& task, const ScoringEnvironment& env) {
  const fs::path root = env.trusted_cache / task.content_hash;
  const fs::path done = root / "trusted";
  const BuildLock lock(task.content_hash, root);
  if (!lock.status()) return lock.status().error();
  // Also when this version is built already: the candidate's compile links the shared objects
  // too, so every scoring needs them made (a cache may have lost them) and their path.
  auto common = ensureCommonHarnessBuild(task, env);
  if (!common) return common.error();
  if (fs::exists(done / ".built")) return TrustedBuild{done, *common};
  // Whatever fails below (a cancelled or failed start included) leaves no half-built tree.
  BuildTree tmp(root, "trusted");
  if (auto s = assemblePristineWorkspace(task, env.tasks_root, tmp.path()); !s) return s.error();
  std::vector<std::string> cmds = task.build_reference;
  cmds.insert(cmds.end(), task.build_candidate.begin(), task.build_candidate.end());
  auto outcome = runBuildSandbox(task, env, tmp.path(), cmds, root / "trusted-build.log", *common);
  if (!outcome) return outcome.error();
  if (!outcome->succeeded())
    return Error{"the trusted build of task " + task.id + " failed (" + outcome->describe() +
                 "): " + tailOfFile(root / "trusted-build.log", kLogTailBytes)};
  std::vector<std::string> programs = {"reference", "runner"};
  if (usesDriver(task)) programs.push_back("driver");
  for (const std::string& program : programs)
    if (!fs::exists(tmp.path() / program)) return Error{"the trusted build of task " + task.id + " made no ./" + program};
  if (auto s = tmp.publish(done, task.content_hash); !s) return s.error();
  return TrustedBuild{done, *common};
}

}  // namespace akad
