// akad-node - runs one attempt on a Slurm node for akad's Slurm executor (slurm_executor.h):
//
//   akad-node run --job DIR [--work DIR]
//
// DIR is the attempt's folder in the shared area (shared_area.h). The program rebuilds the
// attempt from spec.json, runs its stages through the same pipeline as the daemon's own
// executor (daemon/pipeline/attempt.cc: akabox sandboxes, snapshot, isolated scoring) in a
// node-local work folder, and leaves its stage, snapshot and result in DIR/out-<job>-<restart>/
// for the front end, each written durably. The work folder and this job's sandbox cgroups are
// removed before it exits. Exit status: 0 when result.json was written (whatever the attempt's
// outcome), 1 when not even that was possible or the job folder is not one to trust (another user
// could write to it or swap it), 2 on usage.
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/durable_file.h"
#include "common/log.h"
#include "common/time_text.h"
#include "common/trusted_dir.h"
#include "daemon/pipeline/agent.h"
#include "daemon/pipeline/attempt.h"
#include "daemon/pipeline/attempt_setup.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/sandbox_run.h"
#include "daemon/pipeline/task.h"
#include "daemon/pipeline/task_scan.h"
#include "daemon/slurm/job_cgroup.h"
#include "daemon/slurm/shared_area.h"
#include "daemon/snapshot/store.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace akad;

namespace {

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::atomic<SandboxCanceller*> g_canceller{nullptr};
std::atomic<bool> g_terminated{false};

// The GPU Slurm gave the job, as akabox names it: AKAD_NODE_GPU when the site sets it (a task
// prolog; AMD GPUs), else the first of SLURM_JOB_GPUS (global indices) as nvidia<N> when that
// device node exists. Empty: none.
std::string allocatedGpu() {
  if (const std::string g = envOr("AKAD_NODE_GPU", ""); !g.empty()) return g;
  const std::string ids = envOr("SLURM_JOB_GPUS", "");
  const std::string first = ids.substr(0, ids.find(','));
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) return "";
  std::error_code ec;
  return fs::exists("/dev/nvidia" + first, ec) ? "nvidia" + first : "";
}

// Slurm ends a job (scancel, time limit, requeue) with SIGTERM, then SIGKILL after KillWait:
// the sandboxes are cancelled so the attempt's folders and cgroups can still be removed.
// A SIGTERM that comes before the attempt's canceller exists is kept, and cancels it as soon
// as it does (else the job would wait for the SIGKILL and leave its folders and cgroups).
void onTerm(int) {
  g_terminated = true;
  if (SandboxCanceller* c = g_canceller.load()) c->cancel();
}

Result<slurm::AttemptJobSpec> readJobSpec(const fs::path& jobDir) {
  auto specText = readFileLimited(jobDir / "spec.json", 1 << 20);
  if (!specText) return specText.error();
  json specJson = json::parse(*specText, nullptr, false);
  if (specJson.is_discarded()) return Error{"spec.json is not JSON"};
  return slurm::specFromJson(specJson);
}

// The run's credentials, if the front end left them: read once and removed, so a requeued job
// runs without them.
Result<std::map<std::string, std::string>> takeCredentials(const fs::path& jobDir) {
  std::map<std::string, std::string> credentials;
  const fs::path credFile = jobDir / "credentials.json";
  if (!fs::exists(credFile)) return credentials;
  auto text = readFileLimited(credFile, 1 << 20);
  std::error_code ec;
  fs::remove(credFile, ec);
  if (!text) return text.error();
  json c = json::parse(*text, nullptr, false);
  if (!c.is_object()) return Error{"credentials.json is malformed"};
  for (const auto& [k, v] : c.items())
    if (v.is_string()) credentials[k] = v.get<std::string>();
  return credentials;
}

// The task version the front end put in the shared area (<shared>/tasks/<hash>/def), checked
// against its hash.
Result<Task> loadSharedTask(const fs::path& defRoot, const slurm::AttemptJobSpec& spec) {
  auto task = loadTask(defRoot / fs::path(spec.task_id));
  if (!task) return Error{"the task " + spec.task_id + " cannot be loaded on this node: " + task.error().message};
  if (task->content_hash != spec.task_hash)
    return Error{"the task " + spec.task_id + " in the shared area does not hash to " + spec.task_hash};
  return task;
}

// The daemon's settings as the spec carries them, with node-local folders under `work`.
Result<AttemptSetup> nodeSetup(const slurm::AttemptJobSpec& spec, const fs::path& work, const fs::path& defRoot) {
  AttemptSetup setup;
  setup.attempts_dir = work / "attempts";
  setup.tasks_def_root = defRoot;
  setup.trusted_cache = work / "tasks";
  if (!spec.node_cache.empty()) {
    // Kept across jobs, so checked like akad's own --trusted-cache: it holds the binaries that
    // time and check candidates (builds in it are locked across the node's jobs).
    setup.trusted_cache = spec.node_cache;
    if (auto s = makeTrustedDirectory(spec.node_cache); !s)
      return Error{"refusing the node cache " + spec.node_cache + ": " + s.error().message};
  }
  setup.images_dir = spec.images_dir;
  setup.akacheck = spec.akacheck;
  setup.allow_agent_network = spec.allow_agent_network;
  setup.workspace_limits.bytes = spec.workspace_bytes;
  setup.workspace_limits.inodes = spec.workspace_inodes;
  setup.sandbox_uid = spec.sandbox_uid;
  setup.sandbox_gid = spec.sandbox_gid;
  std::error_code ec;
  for (const fs::path& d : {setup.attempts_dir, setup.trusted_cache}) {
    fs::create_directories(d, ec);
    if (ec) return Error{"cannot create " + d.string() + ": " + ec.message()};
  }
  return setup;
}

// The attempt's services on this node: stages recorded durably in `outDir`, the snapshot's hash
// kept for the front end, the job's own GPU for GPU tasks.
AttemptServices nodeServices(const AttemptSetup& setup, const AttemptImages& images, snapshot::SnapshotStore& store,
                             const slurm::AttemptJobSpec& spec, const Task& task, const fs::path& outDir,
                             SandboxCanceller& canceller, std::optional<std::string>& snapshotSha) {
  AttemptServices s = baseServices(setup, images, &store);
  if (spec.candidate_uid != 0) {
    s.scoring.candidate_uid = spec.candidate_uid;
    s.scoring.candidate_gid = spec.candidate_uid;
  }
  s.scoring.canceller = &canceller;
  s.on_stage = [outDir](const std::string& stage) {
    if (auto st = writeFileDurably(outDir / "stage", stage + "\n"); !st)
      log::warn("cannot record the stage: ", st.error().message);
  };
  s.on_snapshot = [&snapshotSha](const std::string& sha) -> Status {
    snapshotSha = sha;
    return {};
  };
  // GPU tasks: Slurm allocated this job's GPU through gres; the sandboxes get that one (the
  // job's alone, so a stage that asks to be alone on it already is).
  if (task.gpu)
    s.lease_gpu = [gpu = allocatedGpu()](const std::string&, bool) -> Result<AttemptServices::StageGpu> {
      if (gpu.empty()) return Error{"this node gave the job no GPU (AKAD_NODE_GPU is not set)"};
      return AttemptServices::StageGpu{nullptr, {gpu}, envOr("AKAD_NODE_GPU_MODEL", "")};
    };
  return s;
}

Result<json> runJob(const fs::path& jobDir, const fs::path& work, const fs::path& outDir) {
  auto spec = readJobSpec(jobDir);
  if (!spec) return spec.error();
  auto credentials = takeCredentials(jobDir);
  if (!credentials) return credentials.error();
  const fs::path defRoot = taskVersionRoot(jobDir.parent_path().parent_path() / "tasks", spec->task_hash);
  auto task = loadSharedTask(defRoot, *spec);
  if (!task) return task.error();
  auto agent = agentFromJson(spec->agent);
  if (!agent) return agent.error();
  auto images = attemptImages(spec->images_dir, *task, *agent);
  if (!images) return images.error();
  auto setup = nodeSetup(*spec, work, defRoot);
  if (!setup) return setup.error();
  snapshot::SnapshotStore store(work / "snapshots");

  AttemptPlan plan;
  plan.attempt_id = spec->attempt_id;
  plan.run_id = spec->run_id;
  plan.task = &*task;
  plan.agent = *agent;
  plan.credentials = *credentials;
  plan.agent_time_limit_s = spec->agent_time_limit_s;
  if (spec->snapshot) {
    auto m = store.importVerified(jobDir / "snapshot.tar.zst", *spec->snapshot);
    if (!m) return Error{"the snapshot to score: " + m.error().message};
    plan.snapshot = *spec->snapshot;
  }

  SandboxCanceller canceller;
  g_canceller = &canceller;
  if (g_terminated) canceller.cancel();
  std::optional<std::string> snapshotSha;
  const AttemptServices s = nodeServices(*setup, *images, store, *spec, *task, outDir, canceller, snapshotSha);
  auto result = runAttempt(plan, s);
  g_canceller = nullptr;
  if (!result) return result.error();
  json out = {{"ok", true}, {"result", *result}, {"snapshot", nullptr}};
  if (snapshotSha) {
    if (auto st = store.exportTo(*snapshotSha, outDir / "snapshot.tar.zst"); !st) return st.error();
    out["snapshot"] = *snapshotSha;
  }
  return out;
}

// A cgroup and the cgroups under it, deepest first; rmdir removes only a cgroup that has no
// processes and no children, so whatever still runs keeps its cgroup (and so its parents).
void removeEmptyCgroupTree(const fs::path& dir) {
  std::error_code ec;
  for (const auto& c : fs::directory_iterator(dir, ec))
    if (c.is_directory(ec) && !c.is_symlink(ec)) removeEmptyCgroupTree(c.path());
  ::rmdir(dir.c_str());
}

// Where cgroup parents live: the cgroup root (a v2 host) and every hierarchy under it (the v1
// controllers and the v2 tree of a hybrid host).
std::vector<fs::path> cgroupHierarchies() {
  std::vector<fs::path> out = {"/sys/fs/cgroup"};
  std::error_code ec;
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec))
    if (h.is_directory(ec) && !h.is_symlink(ec)) out.push_back(h.path());
  return out;
}

// The job's cgroup parent, in every hierarchy, once akabox's clean-up has emptied it: with any
// empty cgroups left under it (akabox's clean-up removes those of the hierarchies it uses; a
// killed node program's can be in the others).
void removeCgroupParent(const std::string& parent) {
  if (parent.empty() || parent.find('/') != std::string::npos || parent[0] == '.') return;  // a name of ours only
  for (const fs::path& h : cgroupHierarchies()) removeEmptyCgroupTree(h / parent);
}

// A dead node program's sandbox cgroups under `parent`: what still runs in them killed, then
// the cgroups and the parent removed.
void removeDeadCgroupParent(const std::string& parent) {
  setDefaultCgroupParent(parent);
  cleanupSandboxLeftovers();
  removeCgroupParent(parent);
}

// A node program's work folder: the attempt's mounts first, then the files. Only one this
// program could have made (checkTrustedDirectory): the names are predictable, so in a shared
// TMPDIR a local user may have put a folder of theirs, or a link, there.
void removeWorkFolder(const fs::path& work) {
  if (!checkTrustedDirectory(work)) return;
  unmountEverythingUnder(work / "attempts");
  std::error_code ec;
  fs::remove_all(work, ec);
}

// AKAD_NODE_CGROUPS: "job" nests the sandboxes under the job's cgroup or fails, "separate"
// never does, "auto" (default) nests on a cgroup v2 host inside a Slurm job.
bool wantsNestedCgroups() {
  const std::string mode = envOr("AKAD_NODE_CGROUPS", "auto");
  if (mode == "separate") return false;
  if (mode == "job") return true;
  struct statfs f {};
  return std::getenv("SLURM_JOB_ID") && ::statfs("/sys/fs/cgroup", &f) == 0 && f.f_type == CGROUP2_SUPER_MAGIC;
}

// Whether Slurm may still run `job` anywhere: listed in a state that is not final. Unknown to
// Slurm ("Invalid job id": long finished) is not; an squeue that cannot answer counts as active,
// so that nothing of a live job is ever removed on a guess.
bool jobMayStillRun(const std::string& job) {
  auto r = slurm::runCommand({"squeue", "--noheader", "--states=all", "--jobs=" + job, "--format=%T"});
  if (!r) return true;
  if (r->exit_code != 0) return r->err.find("Invalid job id") == std::string::npos;
  static const std::set<std::string> kFinal = {"BOOT_FAIL", "CANCELLED",     "COMPLETED", "DEADLINE", "FAILED",
                                               "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"};
  std::istringstream lines(r->out);
  for (std::string state; std::getline(lines, state);) {
    state.erase(state.find_last_not_of(" \t\r") + 1);
    if (!state.empty() && !kFinal.count(state)) return true;
  }
  return false;
}

// What another job of this cluster left on this node when Slurm killed its node program before
// that had removed it (a KillWait shorter than its cancel took; slurmd gone): its cgroup parent,
// with whatever sandboxes are still in it, and its work folder. Removed once Slurm no longer
// lists that job as able to run; this job's own and those of live jobs are left alone. Names are
// akad-node-<cluster>-<job>-<restart>, as main() makes them.
void sweepDeadJobsLeftovers(const std::string& cluster, const std::string& ownJob, const fs::path& tmp) {
  const std::string prefix = "akad-node-" + cluster + "-";
  // job -> its leftover names: cgroup parents (made only by root) and work folders.
  std::map<std::string, std::set<std::string>> cgroups, folders;
  std::error_code ec;
  // In a shared TMPDIR anyone may create such a name: only folders this program could have made
  // count (checkTrustedDirectory: no link or folder another user owns or can write).
  auto scan = [&](const fs::path& dir, std::map<std::string, std::set<std::string>>& into, bool mine) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string rest = name.substr(prefix.size());
      const size_t dash = rest.find('-');
      const std::string job = rest.substr(0, dash);
      const bool digits = !job.empty() && job.find_first_not_of("0123456789") == std::string::npos && dash != std::string::npos &&
                          dash + 1 < rest.size() && rest.find_first_not_of("0123456789", dash + 1) == std::string::npos;
      if (digits && job != ownJob && (!mine || checkTrustedDirectory(e.path()))) into[job].insert(name);
    }
  };
  for (const fs::path& h : cgroupHierarchies()) scan(h, cgroups, false);
  scan(tmp, folders, true);
  std::set<std::string> jobs;
  for (const auto& m : {&cgroups, &folders})
    for (const auto& entry : *m) jobs.insert(entry.first);
  for (const std::string& job : jobs) {
    if (jobMayStillRun(job)) continue;
    std::cerr << "akad-node: removing what Slurm job " << job << ", which has ended, left on this node\n";
    for (const std::string& name : cgroups[job]) removeDeadCgroupParent(name);
    for (const std::string& name : folders[job]) removeWorkFolder(tmp / name);
  }
}

// This job's work folder, new and root's own (0700). Its name is predictable, so a local user
// can create it first in a shared TMPDIR and have root unpack, build and mount inside a folder
// they control: a folder already there is taken only if this program could have made it (an
// earlier start of this same job on this node left it; it is emptied first), else refused and
// left as it is. A folder given with --work is the caller's: created if missing, not emptied first.
Status makeWorkFolder(const fs::path& work, bool given) {
  std::error_code ec;
  fs::create_directories(work.parent_path(), ec);
  const bool existed = fs::exists(fs::symlink_status(work, ec));
  Status made = makeTrustedDirectory(work);
  if (made && existed && !given) {
    removeWorkFolder(work);
    made = makeTrustedDirectory(work);
  }
  if (!made) return Error{"refusing the work folder " + work.string() + ": " + made.error().message};
  return {};
}

// A result that says why the attempt did not run, written as the real one would be.
void writeFailure(const fs::path& outDir, const std::string& why) {
  json out = {{"ok", false}, {"error", why}, {"finished_at", isoTimeUtc()}};
  if (auto st = writeFileDurably(outDir / "result.json", out.dump() + "\n"); !st)
    std::cerr << "akad-node: " << st.error().message << "\n";
  std::cerr << "akad-node: " << why << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[1]) != "run" || std::string(argv[2]) != "--job") {
    std::cerr << "usage: akad-node run --job DIR [--work DIR]\n";
    return 2;
  }
  const fs::path jobDir = argv[3];
  const std::string job = envOr("SLURM_JOB_ID", "local");
  const int restart = std::atoi(envOr("SLURM_RESTART_COUNT", "0").c_str());
  fs::path work = fs::path(envOr("TMPDIR", "/tmp")) /
                 ("akad-node-" + envOr("SLURM_CLUSTER_NAME", "local") + "-" + job + "-" + std::to_string(restart));
  const bool workGiven = argc >= 6 && std::string(argv[4]) == "--work";
  if (workGiven) work = argv[5];
  // The job folder is the front end's, in a shared area only root can write. One that another
  // user could write to or swap is trusted with nothing, not even a failure's result: a link
  // planted where the result goes would have root write wherever it points.
  if (auto s = checkTrustedDirectory(jobDir); !s) {
    std::cerr << "akad-node: refusing the job folder " << jobDir.string() << ": " << s.error().message << "\n";
    return 1;
  }
  const fs::path outDir = jobDir / slurm::incarnationName(job, restart);
  std::error_code ec;
  fs::create_directories(outDir, ec);
  if (ec) {
    std::cerr << "akad-node: cannot create " << outDir << ": " << ec.message() << "\n";
    return 1;
  }
  std::signal(SIGTERM, onTerm);
  std::signal(SIGPIPE, SIG_IGN);
  // This job's sandboxes: under the job's own cgroup where Slurm gives it one on cgroup v2
  // (job_cgroup.h), else in a cgroup parent of their own; either way the clean-up below touches
  // nothing of another job's on the same node.
  std::optional<slurm::JobCgroup> nested;
  if (wantsNestedCgroups()) {
    auto own = slurm::ownCgroupV2();
    auto n = own ? slurm::nestUnderJobCgroup("/sys/fs/cgroup", *own) : Result<slurm::JobCgroup>(own.error());
    if (n) nested = *n;
    else if (envOr("AKAD_NODE_CGROUPS", "auto") == "job") {
      writeFailure(outDir, "cannot nest the sandboxes under the job's cgroup: " + n.error().message);
      return 0;
    } else {
      std::cerr << "akad-node: sandboxes get a cgroup parent of their own: " << n.error().message << "\n";
    }
  }
  const std::string cgroupPrefix = "akad-node-" + envOr("SLURM_CLUSTER_NAME", "local") + "-" + job + "-";
  if (!nested) {
    // Earlier incarnations of this job are dead (Slurm requeued it): whatever of theirs is
    // left on this node (a step killed with its slurmd) goes first.
    for (int r = 0; r < restart; ++r) removeDeadCgroupParent(cgroupPrefix + std::to_string(r));
  }
  for (int r = 0; r < restart; ++r) removeWorkFolder(work.parent_path() / (cgroupPrefix + std::to_string(r)));
  sweepDeadJobsLeftovers(envOr("SLURM_CLUSTER_NAME", "local"), job, work.parent_path());
  const std::string cgroupParent = nested ? nested->sandbox_parent : cgroupPrefix + std::to_string(restart);
  if (auto st = makeWorkFolder(work, workGiven); !st) {
    writeFailure(outDir, st.error().message);
    if (nested) (void)slurm::leaveJobCgroup(*nested);
    return 0;
  }
  setDefaultCgroupParent(cgroupParent);
  Result<json> r = runJob(jobDir, work, outDir);
  json out = r ? *r : json{{"ok", false}, {"error", r.error().message}};
  out["finished_at"] = isoTimeUtc();  // for the front end's pick-up latency
  removeWorkFolder(work);
  cleanupSandboxLeftovers();
  if (nested) {
    if (auto st = slurm::leaveJobCgroup(*nested); !st) std::cerr << "akad-node: " << st.error().message << "\n";
  } else {
    removeCgroupParent(cgroupParent);
  }
  if (auto st = writeFileDurably(outDir / "result.json", out.dump() + "\n"); !st) {
    std::cerr << "akad-node: " << st.error().message << "\n";
    return 1;
  }
  std::cerr << "akad-node: attempt " << (r ? "finished" : "failed: " + r.error().message) << "\n";
  return 0;
}
