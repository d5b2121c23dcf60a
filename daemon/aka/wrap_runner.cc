#include "daemon/aka/wrap_runner.h"

#include <sys/stat.h>

#include <algorithm>

#include "common/sha256.h"
#include "daemon/aka/build_cache.h"
#include "daemon/aka/wrap_score.h"
#include "daemon/pipeline/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

constexpr std::size_t kMaxOutputRead = 8 << 20;
constexpr std::size_t kLogTailBytes = 4000;
constexpr uint64_t kMaxDataFileBytes = 4ull << 30;
constexpr std::size_t kMaxRecordLines = 100;

// Python's sitecustomize, imported by every interpreter the harness starts: once torch is
// loaded, torch.manual_seed(s) seeds with a number made from s and this scoring's salt. The
// harness still calls it with its literal seeds; the inputs it makes from them are new per
// scoring, the same for baseline and candidate of one scoring.
constexpr const char* kSiteCustomize = R"PY(# Written by akad for a wrapped AgentKernelArena task (docs/aka.md, "Fresh seeds").
import os
import sys

# akad's compat layer (AKA tasks classified compat on NVIDIA): its module is on PYTHONPATH.
_compat = os.environ.get("AKAD_AKA_COMPAT")
if _compat:
    try:
        import akad_aka_compat

        akad_aka_compat.install(_compat.split(","))
    except Exception as e:
        print("akad compat layer not installed: %r" % (e,), file=sys.stderr)

_salt = os.environ.pop("AKAD_SEED_SALT", None)
if _salt is not None:
    import importlib.abc
    import importlib.util

    def _remap(torch):
        original = torch.manual_seed

        def manual_seed(seed):
            return original((int(seed) * 6364136223846793005 + int(_salt)) % (1 << 63))

        torch.manual_seed = manual_seed
        torch.random.manual_seed = manual_seed

    class _AfterTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec("torch")
            if spec is None or spec.loader is None:
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                _remap(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _AfterTorch())
)PY";

}  // namespace

const char* seedRemapSiteCustomize() { return kSiteCustomize; }

Status WrapRunner::prepareSite() {
  const fs::path site = work_ / "site";
  std::error_code ec;
  fs::create_directories(site, ec);
  if (ec) return Error{"cannot create " + site.string() + ": " + ec.message()};
  return writeFile(site / "sitecustomize.py", kSiteCustomize);
}

Result<CommandRun> WrapRunner::run(const Side& side, const std::string& command, double wallS, const std::string& logName) const {
  if (env_.canceller && env_.canceller->cancelled()) return Error{"cancelled"};
  SandboxRequest r;
  r.outside_uid = side.uid;
  r.outside_gid = side.gid;
  r.workspace = side.dir;
  r.memory_bytes = task_.limits.memory_bytes;
  r.pids = task_.limits.pids;
  r.wall_s = wallS;
  r.binds = env_.image.binds;
  r.env = env_.image.env;
  r.gpus = gpus_;
  r.output_limit = kMaxDataFileBytes;
  r.binds.push_back({work_ / "site", "/akad/aka-site", false});
  r.binds.push_back({side.jit, "/jit", true});
  r.env["PYTHONPATH"] = "/akad/aka-site";
  r.env["AKAD_SEED_SALT"] = std::to_string(salt_ % (1ull << 62));
  r.env["HOME"] = "/jit/home";
  r.env["TRITON_CACHE_DIR"] = "/jit/triton";
  r.env["TORCH_EXTENSIONS_DIR"] = "/jit/torch_extensions";
  r.env["CUDA_CACHE_PATH"] = "/jit/cuda";
  r.env["PYTHONPYCACHEPREFIX"] = "/jit/" + side.pycache;
  r.env["PYTHONDONTWRITEBYTECODE"] = "";  // empty is unset for Python; the torch image sets it
  // AKA's commands name python3 and pytest: the image's Python environment comes first.
  std::string path = r.env.count("PATH") ? r.env["PATH"] : "/usr/local/bin:/usr/bin:/bin";
  if (auto py = r.env.find("AKA_PYTHON"); py != r.env.end())
    path = fs::path(py->second).parent_path().string() + ":" + path;
  r.env["PATH"] = path;
  const fs::path recordDir = work_ / "compat" / logName;
  if (auto st = addCompatLayer(r, compat_, recordDir, side.uid, side.gid); !st) return st.error();
  if (!side.seed_from.empty()) {
    // A module that cannot be copied is built again by the command: a note, not a failure.
    auto seeded = seedBuiltExtensions(side.seed_from, side.jit, side.uid, side.gid);
    if (!seeded)
      noteCompatRecord({{{"feature", "build-cache"}, {"action", "not seeded: " + seeded.error().message}}});
    else if (*seeded > 0)
      noteCompatRecord({{{"feature", "build-cache"}, {"action", "seeded from the trusted baseline"}, {"modules", *seeded}}});
  }
  r.stdout_file = work_ / "logs" / (logName + ".out");
  r.stderr_file = work_ / "logs" / (logName + ".err");
  r.command = {"/bin/sh", "-c", command};
  auto outcome = runSandbox(r, env_.canceller);
  if (!outcome) return outcome.error();
  if (compat_.active()) noteCompatRecord(readCompatRecord(recordDir, kMaxRecordLines));
  CommandRun c{*outcome, "", logName};
  for (const char* ext : {".out", ".err"}) {
    auto text = readFileLimited(work_ / "logs" / (logName + ext), kMaxOutputRead);
    c.output += text ? *text : tailOfFile(work_ / "logs" / (logName + ext), kMaxOutputRead);
  }
  return c;
}

void WrapRunner::noteCompatRecord(const std::vector<json>& lines) const {
  for (const json& line : lines) {
    if (compatRecord_.size() >= kMaxRecordLines) return;
    if (std::find(compatRecord_.begin(), compatRecord_.end(), line) == compatRecord_.end()) compatRecord_.push_back(line);
  }
}

std::string WrapRunner::tail(const std::string& logName) const {
  std::string out = tailOfFile(work_ / "logs" / (logName + ".err"), kLogTailBytes);
  std::string so = tailOfFile(work_ / "logs" / (logName + ".out"), kLogTailBytes);
  if (!so.empty()) out += (out.empty() ? "" : "\n") + so;
  return out;
}

json wrapGate(bool pass, const std::string& reason) { return {{"pass", pass}, {"reason", reason}}; }

Result<Side> makeSide(const std::string& who, bool candidateCode, const fs::path& dir, const fs::path& jit,
                      const ScoringEnvironment& env, const std::vector<Injection>& injections) {
  Side s;
  s.who = who;
  s.dir = dir;
  s.jit = jit;
  if (!injections.empty()) {
    Sha256 h;
    for (const auto& inj : injections)
      for (const std::string* part : {&inj.file, &inj.marker, &inj.replacement, &inj.old_code}) {
        h.update(*part);
        h.update(std::string_view("\0", 1));
      }
    s.pycache = "pycache-" + h.hexDigest().substr(0, 16);
  }
  const bool candidate = candidateCode && env.candidate_uid != 0;
  s.uid = candidate ? env.candidate_uid : env.sandbox_uid;
  s.gid = candidate ? env.candidate_gid : env.sandbox_gid;
  std::error_code ec;
  const bool fresh = !fs::exists(s.jit / "home", ec);
  fs::create_directories(s.jit / "home", ec);
  if (ec) return Error{"cannot create " + s.jit.string() + ": " + ec.message()};
  if (s.uid != 0) {
    if (auto st = chownTree(s.dir, s.uid, s.gid); !st) return st.error();
    struct stat st {};
    // A kept cache is walked again only when another uid made it (a daemon with other ids).
    if (fresh || (::lstat(s.jit.c_str(), &st) == 0 && st.st_uid != s.uid))
      if (auto c = chownTree(s.jit, s.uid, s.gid); !c) return c.error();
  }
  return s;
}

Result<json> commandGate(const WrapRunner& w, const Side& side, const std::vector<std::string>& cmds, double wallS,
                         const std::string& name, bool akaFailRule) {
  json runs = json::array();
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    const std::string logName = name + (cmds.size() > 1 ? "-" + std::to_string(i) : "");
    auto r = w.run(side, cmds[i], wallS, logName);
    if (!r) return r.error();
    runs.push_back(r->outcome.result);
    if (!r->outcome.succeeded()) {
      json g = wrapGate(false, "`" + cmds[i] + "` " + r->outcome.describe() + ": " + w.tail(logName));
      g["runs"] = runs;
      return g;
    }
    if (akaFailRule && akaOutputSaysFail(r->output)) {
      json g = wrapGate(false, "`" + cmds[i] + "` reported a failure: " + w.tail(logName));
      g["runs"] = runs;
      return g;
    }
  }
  json g = wrapGate(true, "");
  g["runs"] = runs;
  return g;
}

}  // namespace akad::aka
