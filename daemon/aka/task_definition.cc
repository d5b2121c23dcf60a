#include "daemon/aka/task_definition.h"

#include <sys/stat.h>

#include <algorithm>

#include <yaml-cpp/yaml.h>

#include "daemon/pipeline/files.h"
#include "daemon/pipeline/task.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {

void emitLimits(YAML::Emitter& y, const AkaTaskConfig& c, double maxS) {
  y << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "agent_s" << YAML::Value << 3600;
  y << YAML::Key << "compile_s" << YAML::Value << std::min(c.compile_timeout_s, maxS);
  y << YAML::Key << "correctness_s" << YAML::Value << std::min(c.correctness_timeout_s, maxS);
  y << YAML::Key << "performance_s" << YAML::Value << std::min(c.performance_timeout_s, maxS);
  y << YAML::Key << "memory" << YAML::Value << "16G";
  y << YAML::Key << "pids" << YAML::Value << 1024;
  y << YAML::EndMap;
}

std::string taskYaml(const ImportedTask& t, const AkaTaskConfig& c, Platform platform) {
  const std::string suite = t.id.substr(0, t.id.find('/'));
  const std::string id = t.id.substr(t.id.find('/') + 1);
  std::string prompt = c.instructions.empty() ? "Optimise the kernel of AgentKernelArena task " + t.name + "." : c.instructions;
  while (!prompt.empty() && prompt.back() == '\n') prompt.pop_back();
  prompt += "\n\nThis is AgentKernelArena task " + t.name + ", imported by akad. Its own compile, correctness and "
            "performance commands (config.yaml) score it, in akad's sandboxes, on a pristine copy of this folder "
            "with only your versions of the files you may edit.";
  if (!t.splice_functions.empty()) {
    prompt += " From ";
    for (std::size_t i = 0; i < t.editable.size(); ++i) prompt += (i ? ", " : "") + t.editable[i];
    prompt += " only the top-level definitions of ";
    for (std::size_t i = 0; i < t.splice_functions.size(); ++i) prompt += (i ? ", " : "") + t.splice_functions[i];
    prompt += " are taken; changes elsewhere in it (its tests) are ignored.";
  }
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "schema" << YAML::Value << 1;
  y << YAML::Key << "id" << YAML::Value << id;
  y << YAML::Key << "suite" << YAML::Value << suite;
  y << YAML::Key << "title" << YAML::Value << ("AKA " + t.name);
  y << YAML::Key << "prompt" << YAML::Value << YAML::Literal << prompt;
  y << YAML::Key << "harness" << YAML::Value << kWrapHarness;
  // The toolchain images: the host's PyTorch/Triton with akad's HIP-on-CUDA, or ROCm's.
  y << YAML::Key << "image" << YAML::Value << (platform == Platform::Amd ? "rocm" : "torch");
  y << YAML::Key << "gpu" << YAML::Value << true;
  y << YAML::Key << "editable" << YAML::Value << YAML::Flow << t.editable;
  y << YAML::Key << "exclude" << YAML::Value << YAML::Flow
    << std::vector<std::string>{"build/", "__pycache__/", ".pytest_cache/", "temp/", "*.so", "*.o"};
  y << YAML::Key << "build" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "reference" << YAML::Value << YAML::Flow << std::vector<std::string>{};
  y << YAML::Key << "candidate" << YAML::Value << c.compile;
  y << YAML::EndMap;
  // AKA's harness holds its shapes itself: one visible "configuration" stands for all of them.
  // Held-out shapes are not imported yet (docs/aka.md, "Not built yet").
  y << YAML::Key << "configs" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "visible" << YAML::Value << YAML::BeginSeq << YAML::Flow << YAML::BeginMap << YAML::Key << "name"
    << YAML::Value << "aka-visible" << YAML::EndMap << YAML::EndSeq;
  y << YAML::Key << "held_out" << YAML::Value << YAML::Flow << std::vector<std::string>{};
  y << YAML::EndMap;
  y << YAML::Key << "tolerances" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::EndMap;
  y << YAML::Key << "timing" << YAML::Value << YAML::BeginMap << YAML::Key << "rounds" << YAML::Value << 2 << YAML::EndMap;
  emitLimits(y, c, 86400.0);
  y << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

json wrapSpec(const ImportedTask& t, const AkaTaskConfig& c, const TrustMapping& m, const ImportReport& r,
              const std::vector<Injection>& heldOut, const json& generated) {
  json files = json::object();
  for (const auto& [path, sha] : t.files) files[path] = sha;
  return {{"schema", 1},
          {"mode", "wrap"},
          {"name", t.name},
          {"family", t.family},
          {"task_type", c.task_type},
          {"checkout", r.checkout.string()},
          {"commit", r.commit.commit},
          {"commit_note", r.commit.note},
          {"platform", platformName(r.platform)},
          {"class", className(t.cls)},
          {"reasons", t.reasons},
          {"compat", t.compat},
          {"editable", m.editable},
          {"splice_functions", m.splice_functions},
          {"commands", {{"compile", c.compile}, {"correctness", c.correctness}, {"performance", c.performance}}},
          {"timeouts_s", {{"compile", c.compile_timeout_s}, {"correctness", c.correctness_timeout_s},
                          {"performance", c.performance_timeout_s}}},
          {"materialised", t.materialised},
          {"held_out_injections", injectionsToJson(heldOut)},
          {"held_out_generated", generated},
          {"files", files}};
}

// Writes the task into <root>/<suite>/<task>/ through a staging tree laid out like a tasks root,
// so akad's own loader checks it before it replaces an earlier import.
Status writeTaskDefinition(const fs::path& root, const ImportedTask& t, const TaskFolder& folder,
                           const std::string& yaml, const json& spec, const std::map<std::string, std::string>& extra) {
  const std::string suite = t.id.substr(0, t.id.find('/'));
  const std::string id = t.id.substr(t.id.find('/') + 1);
  const fs::path staging = root / (".staging-" + randomHex(6));
  const fs::path dir = staging / suite / id;
  std::error_code ec;
  auto fail = [&](const std::string& what) {
    fs::remove_all(staging, ec);
    return Status(Error{what});
  };
  for (const char* sub : {"workspace", "harness", "solution"}) {
    fs::create_directories(dir / sub, ec);
    if (ec) return fail("cannot create " + (dir / sub).string() + ": " + ec.message());
  }
  for (const auto& f : folder.contents) {
    const fs::path to = dir / "workspace" / f.rel;
    fs::create_directories(to.parent_path(), ec);
    if (auto s = writeFile(to, f.bytes); !s) return fail(s.error().message);
    ::chmod(to.c_str(), f.executable ? 0755 : 0644);
  }
  // Files of akad's own beside the AKA folder's (convert mode's harness data and loader).
  for (const auto& [rel, bytes] : extra) {
    fs::create_directories((dir / rel).parent_path(), ec);
    if (auto s = writeFile(dir / rel, bytes); !s) return fail(s.error().message);
  }
  if (auto s = writeFile(dir / "task.yaml", yaml); !s) return fail(s.error().message);
  if (auto s = writeFile(dir / "aka.json", spec.dump(2) + "\n"); !s) return fail(s.error().message);
  if (auto loaded = loadTask(dir); !loaded)
    return fail("akad's task loader refused the definition made for it: " + loaded.error().message);
  const fs::path final = root / suite / id;
  const fs::path old = root / (".old-" + randomHex(6));
  fs::create_directories(root / suite, ec);
  if (fs::exists(final)) fs::rename(final, old, ec);
  if (ec) return fail("cannot move the earlier import of " + t.id + " aside: " + ec.message());
  fs::rename(dir, final, ec);
  if (ec) return fail("cannot move " + t.id + " into " + final.string() + ": " + ec.message());
  fs::remove_all(old, ec);
  fs::remove_all(staging, ec);
  return {};
}

}  // namespace akad::aka
