#include "daemon/held_out_view.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <mutex>

#include "daemon/pipeline/task.h"
#include "daemon/pipeline/task_scan.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {

namespace {

// The held-out names of one stored task version, in the task's order. Task versions never
// change, so each is read once.
std::vector<std::string> heldOutNamesOf(const fs::path& stateDir, const std::string& taskId, const std::string& hash) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<std::string>> cache;
  {
    std::lock_guard lock(mutex);
    if (auto it = cache.find(hash); it != cache.end()) return it->second;
  }
  const auto slash = taskId.find('/');
  if (slash == std::string::npos) return {};
  auto task = loadTask(taskVersionDir(stateDir / "tasks", hash, taskId));
  if (!task) return {};
  std::vector<std::string> names;
  for (const json& c : task->held_out) names.push_back(c.value("name", std::string()));
  std::lock_guard lock(mutex);
  cache[hash] = names;
  return names;
}

bool wordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Replaces whole-word occurrences of each name (longest first: a name inside a longer one is
// not a whole word there anyway, but an id must never be split).
std::string replaceNames(std::string s, const std::vector<std::pair<std::string, std::string>>& names) {
  for (const auto& [name, id] : names) {
    if (name.empty()) continue;
    for (size_t at = s.find(name); at != std::string::npos; at = s.find(name, at)) {
      const bool before = at == 0 || !wordChar(s[at - 1]);
      const bool after = at + name.size() == s.size() || !wordChar(s[at + name.size()]);
      if (before && after) {
        s.replace(at, name.size(), id);
        at += id.size();
      } else {
        at += name.size();
      }
    }
  }
  return s;
}

bool mentionsAny(const std::string& s, const std::vector<std::pair<std::string, std::string>>& names) {
  return replaceNames(s, names) != s;
}

// A held-out case's or configuration's name as its id; one the view cannot map (its task
// version is gone) shows as no name at all.
std::string idOf(const std::string& name, const std::vector<std::pair<std::string, std::string>>& names) {
  const std::string id = replaceNames(name, names);
  return id == name ? "held_out#?" : id;
}

json replaceAll(const json& j, const std::vector<std::pair<std::string, std::string>>& names) {
  if (j.is_string()) return replaceNames(j.get<std::string>(), names);
  if (j.is_array()) {
    json out = json::array();
    for (const json& e : j) out.push_back(replaceAll(e, names));
    return out;
  }
  if (j.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : j.items()) out[replaceNames(k, names)] = replaceAll(v, names);
    return out;
  }
  return j;
}

}  // namespace

HeldOutView HeldOutView::forAttempts(const fs::path& stateDir, const std::vector<AttemptRecord>& attempts) {
  HeldOutView view;
  std::map<std::string, std::string> seen;
  for (const AttemptRecord& a : attempts) {
    if (!a.taskHash) continue;
    const auto names = heldOutNamesOf(stateDir, a.taskId, *a.taskHash);
    for (size_t i = 0; i < names.size(); ++i) seen.emplace(names[i], "held_out#" + std::to_string(i + 1));
  }
  view.names_.assign(seen.begin(), seen.end());
  std::sort(view.names_.begin(), view.names_.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return view;
}

std::string HeldOutView::failureClass(const std::string& reason) {
  std::string r = reason;
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto has = [&](const char* w) { return r.find(w) != std::string::npos; };
  if (has("timed out") || has("time limit") || has("timeout")) return "timeout";
  if (has("wrong") || has("mismatch") || has("tolerance") || has("nan") || has("differ")) return "wrong output";
  if (has("signal") || has("crash") || has("killed") || has("segmentation") || has("exited") || has("exit status") ||
      has("core dumped") || has("abort"))
    return "crash";
  return "failed";
}

json HeldOutView::result(const json& in) const {
  if (!in.is_object()) return names(in);
  json r = in;
  if (r.contains("seeds") && r["seeds"].is_object()) {
    json kept = json::object();
    for (const auto& [k, v] : r["seeds"].items())
      if (!mentionsAny(k, names_)) kept[k] = v;
    r["seeds"] = kept;
  }
  // How long the held-out gates took says something of their sizes.
  if (r.contains("stage_wall_s") && r["stage_wall_s"].is_object())
    for (auto it = r["stage_wall_s"].begin(); it != r["stage_wall_s"].end();)
      it = it.key().rfind("held_out", 0) == 0 ? r["stage_wall_s"].erase(it) : std::next(it);
  if (r.contains("gates") && r["gates"].is_object()) {
    for (auto& [key, gate] : r["gates"].items()) {
      if (key.rfind("held_out", 0) != 0 || !gate.is_object()) continue;
      json g = {{"pass", gate.value("pass", false)}};
      if (gate.contains("speedup")) g["speedup"] = gate["speedup"];
      if (!g["pass"].get<bool>() && gate.contains("reason") && gate["reason"].is_string())
        g["failure"] = failureClass(gate["reason"].get<std::string>());
      if (gate.contains("cases") && gate["cases"].is_array()) {
        g["cases"] = json::array();
        for (const json& c : gate["cases"]) {
          if (!c.is_object()) continue;
          json row = {{"name", idOf(c.value("name", std::string()), names_)}, {"ok", c.value("ok", false)}};
          if (!row["ok"].get<bool>()) row["failure"] = failureClass(c.value("reason", std::string()));
          g["cases"].push_back(row);
        }
      }
      if (gate.contains("configs") && gate["configs"].is_array()) {
        g["configs"] = json::array();
        for (const json& c : gate["configs"]) {
          if (!c.is_object()) continue;
          json row = {{"name", idOf(c.value("name", std::string()), names_)}};
          if (c.contains("speedup")) row["speedup"] = c["speedup"];
          g["configs"].push_back(row);
        }
      }
      gate = g;
    }
  }
  if (r.contains("failure") && r["failure"].is_string() && mentionsAny(r["failure"].get<std::string>(), names_))
    r["failure"] = "a held-out configuration failed: " + failureClass(r["failure"].get<std::string>());
  return names(r);
}

json HeldOutView::attempt(const json& a) const {
  if (everything_) return a;
  json out = a;
  if (out.contains("result")) out["result"] = result(out["result"]);
  return names(out);
}

json HeldOutView::names(const json& j) const { return everything_ ? j : replaceAll(j, names_); }

std::string HeldOutView::text(std::string s) const { return everything_ ? s : replaceNames(std::move(s), names_); }

std::string HeldOutView::logSummary(const json& r) {
  std::string out;
  if (!r.is_object() || !r.contains("gates") || !r["gates"].is_object()) return "no held-out gate ran\n";
  char buf[64];
  for (const auto& [key, g] : r["gates"].items()) {
    if (key.rfind("held_out", 0) != 0) continue;
    out += key + ": " + (g.value("pass", false) ? "pass" : "FAIL");
    if (g.contains("speedup") && g["speedup"].is_number()) {
      std::snprintf(buf, sizeof buf, ", speedup %.3fx", g["speedup"].get<double>());
      out += buf;
    }
    if (g.contains("failure")) out += " (" + g["failure"].get<std::string>() + ")";
    out += "\n";
    for (const json& c : g.value("cases", json::array()))
      out += "  " + c.value("name", std::string("?")) + ": " + (c.value("ok", false) ? "ok" : c.value("failure", std::string("failed"))) + "\n";
    for (const json& c : g.value("configs", json::array())) {
      out += "  " + c.value("name", std::string("?"));
      if (c.contains("speedup") && c["speedup"].is_number()) {
        std::snprintf(buf, sizeof buf, ": speedup %.3fx", c["speedup"].get<double>());
        out += buf;
      }
      out += "\n";
    }
  }
  return out.empty() ? "no held-out gate ran\n" : out;
}

}  // namespace akad
