#include "daemon/aka/import.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "common/sha256.h"
#include "daemon/aka/measured.h"
#include "daemon/aka/convert.h"
#include "daemon/aka/held_out_rules.h"
#include "daemon/aka/helpers.h"
#include "daemon/aka/task_definition.h"
#include "daemon/aka/task_folder.h"
#include "daemon/aka/trust.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/task.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

constexpr std::size_t kMaxConfigBytes = 1 << 20;

std::string sanitize(const std::string& in) {
  std::string out;
  for (char c : in) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += ((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '_' || l == '-') ? l : '_';
  }
  while (!out.empty() && (out.front() == '_' || out.front() == '-')) out.erase(out.begin());
  return out.empty() ? "task" : out;
}

std::vector<std::string> splitPath(const std::string& name) {
  std::vector<std::string> parts;
  for (const auto& p : fs::path(name)) parts.push_back(p.string());
  return parts;
}

// The task's held-out shapes, if the user has them: read, validated and tried on the pristine
// files (after helper materialisation), so a set that does not apply is refused at import, not
// found out when scoring. A bad set leaves the task imported without held-out shapes.
std::vector<Injection> importHeldOut(const ImportOptions& o, const std::string& name, const TaskFolder& folder,
                                     ImportedTask& t) {
  if (o.heldOutDir.empty()) return {};
  const std::string rel = name + "/held_out_shapes.yaml";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(o.heldOutDir / rel, ec))) return {};
  FileLedger ledger(o.heldOutDir);
  auto text = ledger.read(rel, kMaxConfigBytes);
  if (!text) {
    t.reasons.push_back("held-out shapes not used: " + text.error().message);
    return {};
  }
  t.files["held-out:" + rel] = ledger.hashes().at(rel);
  auto injections = parseHeldOutShapes(*text, rel);
  if (!injections) {
    t.reasons.push_back("held-out shapes not used: " + injections.error().message);
    return {};
  }
  std::map<std::string, std::string> files;
  for (const auto& c : folder.contents) files[c.rel] = c.bytes;
  for (const auto& inj : *injections) {
    auto it = files.find(inj.file);
    if (it == files.end()) {
      t.reasons.push_back("held-out shapes not used: " + inj.file + " is not a file of the task");
      return {};
    }
    auto changed = applyInjection(it->second, inj);
    if (!changed) {
      t.reasons.push_back("held-out shapes not used: " + changed.error().message);
      return {};
    }
    it->second = *changed;
  }
  t.held_out_injections = injections->size();
  return *injections;
}

// aka.json's held_out_generated for shapes made from `visible` in `file` (nothing when the rules
// make none), with the import's reason.
json generatedShapes(const std::string& file, const ShapeList& visible, const std::string& where, ImportedTask& t) {
  const auto generated = generateShapes(visible);
  if (generated.empty()) return nullptr;
  json shapes = json::array();
  std::string rules;
  for (const auto& g : generated) {
    shapes.push_back({{"shape", g.shape}, {"rule", g.rule}});
    if (rules.find(g.rule) == std::string::npos) rules += (rules.empty() ? "" : ", ") + g.rule;
  }
  t.held_out_generated = generated.size();
  t.reasons.push_back("held-out: " + std::to_string(generated.size()) + " shapes from akad's rules (" + rules + ") for " +
                      where + ", kept where the pristine baseline passes them");
  return {{"file", file}, {"scalars", visible.scalars}, {"shapes", shapes}};
}

// Without AKA's held-out files, akad's rules make candidate shapes where the visible shapes are
// a plain list: the runner's TEST_SHAPES (vLLM), else a pytest parametrize list of sizes in an
// editable Python file (rocmbench); the scorer keeps those the pristine baseline passes.
json generateHeldOut(const TaskFolder& folder, ImportedTask& t) {
  auto contents = [&](const std::string& rel) -> const ReadFile* {
    for (const auto& c : folder.contents)
      if (c.rel == rel) return &c;
    return nullptr;
  };
  if (const ReadFile* runner = contents(kRunnerWithHelpers)) {
    auto visible = parseTestShapes(runner->bytes);
    if (visible) return generatedShapes(kRunnerWithHelpers, *visible, "TEST_SHAPES", t);
    if (runner->bytes.find("TEST_SHAPES") != std::string::npos)
      t.reasons.push_back("no held-out shapes generated: " + visible.error().message);
    return nullptr;
  }
  for (const auto& rel : t.editable) {
    const ReadFile* file = contents(rel);
    if (file == nullptr || !rel.ends_with(".py")) continue;
    auto sizes = parseParametrizedSizes(file->bytes);
    if (!sizes) continue;
    json out = generatedShapes(rel, sizes->list, "a pytest parametrize list", t);
    if (out.is_null()) continue;
    out["old_code"] = sizes->decorator;
    out["prefix"] = sizes->prefix;
    return out;
  }
  return nullptr;
}

// convert mode: the task again, as akad's own protected harness (convert.h); a task that cannot
// be converted keeps its wrapped import and says why.
void convertOne(const ImportOptions& o, const ImportReport& report, const AkaTaskConfig& config,
                const TaskFolder& folder, ImportedTask& t) {
  ImportedTask c = t;
  c.id = convertedId(t.id);
  t.convert_id = c.id;
  auto plan = planConversion(config, folder);
  if (!plan) {
    t.convert_reasons.push_back("not converted: " + plan.error().message);
    return;
  }
  if (auto s = writeConvertedTask(c, config, folder, *plan, report, o.commonSource); !s) {
    t.convert_reasons.push_back("not converted: " + s.error().message);
    return;
  }
  t.converted = true;
  t.convert_reasons.push_back("converted: " + std::to_string(plan->cases.size()) + " input cases of " + plan->module +
                              ", class " + plan->className + ", the agent's " + plan->hip);
}

ImportedTask importOne(const ImportOptions& o, const ImportReport& report, const std::string& name, const std::string& id) {
  ImportedTask t;
  t.name = name;
  t.id = id;
  FileLedger ledger(report.checkout);
  auto finish = [&](TaskClass cls, const std::string& reason) {
    t.cls = cls;
    if (!reason.empty()) t.reasons.push_back(reason);
    t.files = ledger.hashes();
    return t;
  };
  const std::string base = "tasks/" + name;
  auto text = ledger.read(base + "/config.yaml", kMaxConfigBytes);
  if (!text) return finish(TaskClass::Invalid, text.error().message);
  auto config = parseTaskConfig(*text, name);
  if (!config) return finish(TaskClass::Invalid, config.error().message);
  const Family family = familyOf(name, *config);
  t.family = familyName(family);

  TaskFolder folder = readTaskFolder(ledger, base);
  if (!folder.problem.empty()) return finish(TaskClass::Invalid, folder.problem);
  Classification k = classifyTask(name, *config, folder.files, o.platform);
  t.digest = taskDigest(ledger.hashes());
  applyMeasuredOutcome(name, o.platform, t.digest, k);
  t.cls = k.cls;
  t.reasons = k.reasons;
  t.compat = k.compat;
  auto mapping = trustMappingFor(family, *config);
  if (mapping) {
    t.editable = mapping->editable;
    t.splice_functions = mapping->splice_functions;
  }
  if (!isRunnable(t.cls) || !mapping) return finish(t.cls, "");

  if (std::find(t.compat.begin(), t.compat.end(), compat::kPerfHelpers) != t.compat.end()) {
    auto changed = materialiseHelpers(ledger, folder);
    if (!changed) return finish(TaskClass::NeedsEdit, "AKA's timing helpers cannot be filled in: " + changed.error().message);
    t.materialised = *changed;
  }
  t.files = ledger.hashes();
  const std::vector<Injection> heldOut = importHeldOut(o, name, folder, t);
  const json generated = heldOut.empty() ? generateHeldOut(folder, t) : json(nullptr);
  const std::string yaml = taskYaml(t, *config, o.platform);
  if (auto s = writeTaskDefinition(report.tasksRoot, t, folder, yaml,
                                   wrapSpec(t, *config, *mapping, report, heldOut, generated));
      !s)
    return finish(TaskClass::Invalid, s.error().message);
  t.imported = true;
  if (o.convert && convertible(name)) convertOne(o, report, *config, folder, t);
  return t;
}

std::mutex& importMutex() {
  static std::mutex m;
  return m;
}

fs::path indexFile(const fs::path& stateDir) { return stateDir / "aka" / "index.json"; }

}  // namespace

json ImportedTask::toJson(bool withFiles) const {
  json j = {{"name", name}, {"id", id}, {"family", family}, {"class", className(cls)}, {"imported", imported},
            {"reasons", reasons}, {"compat", compat}, {"editable", editable}, {"splice_functions", splice_functions},
            {"materialised", materialised}, {"held_out_injections", held_out_injections},
            {"held_out_generated", held_out_generated}};
  if (!digest.empty()) j["digest"] = digest;
  if (!convert_id.empty()) j["convert"] = {{"id", convert_id}, {"imported", converted}, {"reasons", convert_reasons}};
  if (withFiles) j["files"] = files;
  else j["files_read"] = files.size();
  return j;
}

json ImportReport::toJson(bool withFiles) const {
  json tasksJson = json::array();
  std::map<std::string, int> counts;
  for (const auto& t : tasks) {
    tasksJson.push_back(t.toJson(withFiles));
    ++counts[className(t.cls)];
  }
  return {{"checkout", checkout.string()},
          {"commit", commit.known() ? json(commit.commit) : json(nullptr)},
          {"ref", commit.ref},
          {"commit_note", commit.note},
          {"platform", platformName(platform)},
          {"tasks_root", tasksRoot.string()},
          {"counts", counts},
          {"tasks", tasksJson}};
}

fs::path importedTasksRoot(const fs::path& stateDir) { return stateDir / "aka" / "tasks"; }

std::map<std::string, std::string> assignTaskIds(const std::vector<std::string>& all) {
  std::map<std::string, std::string> ids;
  std::map<std::string, int> uses;
  std::map<std::string, std::string> plain;
  for (const auto& name : all) {
    const auto parts = splitPath(name);
    std::string suite = "aka";
    std::size_t rest = 0;
    for (; rest + 1 < parts.size() && rest < 2; ++rest) {
      suite += '-';
      suite += sanitize(parts[rest]);
    }
    std::string id;
    for (std::size_t i = rest; i < parts.size(); ++i) {
      if (!id.empty()) id += '-';
      id += sanitize(parts[i]);
    }
    plain[name] = suite + "/" + id;
    ++uses[plain[name]];
  }
  for (const auto& name : all) {
    std::string full = plain[name];
    std::string suite = full.substr(0, full.find('/'));
    std::string id = full.substr(full.find('/') + 1);
    // Folder names that differ only in case or punctuation would meet in one id; so would names
    // past the loader's 64 characters once cut. A hash of the AKA name tells them apart.
    if (uses[full] > 1 || id.size() > 64) {
      id.resize(std::min<std::size_t>(id.size(), 55));
      id += "-";
      id += sha256Hex(name).substr(0, 8);
    }
    ids[name] = suite + "/" + id;
  }
  return ids;
}

Result<ImportReport> importCheckout(const ImportOptions& o) {
  std::lock_guard lock(importMutex());
  ImportReport report;
  std::error_code ec;
  report.checkout = fs::absolute(o.checkout, ec).lexically_normal();
  report.platform = o.platform;
  report.tasksRoot = importedTasksRoot(o.stateDir);
  auto all = discoverTasks(report.checkout, {});
  if (!all) return all.error();
  auto chosen = discoverTasks(report.checkout, o.selectors);
  if (!chosen) return chosen.error();
  report.commit = readCheckoutCommit(report.checkout);
  fs::create_directories(report.tasksRoot, ec);
  if (ec) return Error{"cannot create " + report.tasksRoot.string() + ": " + ec.message()};
  const auto ids = assignTaskIds(*all);
  if (o.convert)
    if (auto s = installConvertHarness(o.commonSource, report.tasksRoot); !s) return s.error();
  for (const auto& name : *chosen) {
    ImportedTask t = importOne(o, report, name, ids.at(name));
    if (!t.imported) {
      // A task refused now must not stay submittable from an earlier import.
      fs::remove_all(report.tasksRoot / t.id, ec);
    }
    if (o.convert && !t.converted) fs::remove_all(report.tasksRoot / convertedId(t.id), ec);
    report.tasks.push_back(std::move(t));
  }

  auto index = readImportIndex(o.stateDir);
  json updated = index ? *index : json::object();
  for (const auto& t : report.tasks) {
    json entry = t.toJson(false);
    entry["checkout"] = report.checkout.string();
    entry["commit"] = report.commit.known() ? json(report.commit.commit) : json(nullptr);
    entry["commit_note"] = report.commit.note;
    entry["platform"] = platformName(report.platform);
    updated[t.name] = entry;
  }
  const fs::path file = indexFile(o.stateDir);
  const fs::path tmp = file.string() + ".tmp-" + randomHex(4);
  if (auto s = writeFile(tmp, updated.dump(2) + "\n"); !s) return s.error();
  fs::rename(tmp, file, ec);
  if (ec) return Error{"cannot write " + file.string() + ": " + ec.message()};
  return report;
}

Result<json> readImportIndex(const fs::path& stateDir) {
  const fs::path file = indexFile(stateDir);
  std::error_code ec;
  if (!fs::exists(file, ec)) return json::object();
  auto text = readFileLimited(file, 64 << 20);
  if (!text) return text.error();
  try {
    json j = json::parse(*text);
    if (!j.is_object()) return Error{file.string() + " is not a JSON object"};
    return j;
  } catch (const json::exception& e) {
    return Error{file.string() + " is not valid JSON: " + e.what()};
  }
}

}  // namespace akad::aka
