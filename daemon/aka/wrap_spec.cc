// What wrap mode reads (wrap_score.h): an imported task's aka.json, and AKA's own output: its
// correctness commands' words and its performance reports.
#include "daemon/aka/wrap_score.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <regex>

#include "daemon/aka/checkout.h"
#include "daemon/aka/held_out_rules.h"
#include "daemon/pipeline/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

constexpr std::size_t kMaxSpecBytes = 16 << 20;

Result<std::vector<std::string>> stringList(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return Error{std::string("aka.json: '") + key + "' must be a list of strings"};
  std::vector<std::string> out;
  for (const json& s : *it) {
    if (!s.is_string()) return Error{std::string("aka.json: '") + key + "' must be a list of strings"};
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<double> number(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    try {
      std::size_t used = 0;
      const double v = std::stod(j.get<std::string>(), &used);
      if (used == j.get<std::string>().size()) return v;
    } catch (...) {
    }
  }
  return std::nullopt;
}

// One case of a report, by AKA's key order (src/testcases.py _extract_time_from_dict).
std::optional<double> caseTime(const json& c, const std::string& taskType, bool torchOriginal) {
  if (taskType == "torch2hip") {
    const char* key = torchOriginal ? "ori_time" : "opt_time";
    if (c.contains(key))
      if (auto v = number(c[key])) return v;
  }
  for (const char* key : {"device_time_ms", "gpu_time_ms", "kernel_time_ms", "cuda_event_time_ms",
                          "cuda_graph_time_ms", "execution_time_ms"})
    if (c.contains(key))
      if (auto v = number(c[key])) return v;
  for (const char* key : {"execution_time", "time_ms", "time"})
    if (c.contains(key))
      if (auto v = number(c[key])) return std::string(key) == "time_ms" || *v < 1000.0 ? *v : *v * 1000.0;
  for (const char* key : {"host_time_ms", "wall_time_ms", "elapsed_time_ms", "total_time_ms", "end_to_end_time_ms"})
    if (c.contains(key)) return std::nullopt;
  if (auto t = c.find("timing_ms"); t != c.end() && t->is_object()) {
    for (const char* key : {"mean", "median", "min"})
      if (t->contains(key)) return number((*t)[key]);
  }
  return std::nullopt;
}

}  // namespace

Result<WrapSpec> loadWrapSpec(const Task& task) {
  auto text = readFileLimited(task.dir / "aka.json", kMaxSpecBytes);
  if (!text) return Error{"task " + task.id + " has no readable aka.json: " + text.error().message};
  json j;
  try {
    j = json::parse(*text);
  } catch (const json::exception& e) {
    return Error{"task " + task.id + ": aka.json is not JSON: " + e.what()};
  }
  if (!j.is_object() || j.value("mode", "") != "wrap") return Error{"task " + task.id + ": aka.json is not a wrap-mode spec"};
  WrapSpec s;
  s.name = j.value("name", "");
  s.family = j.value("family", "");
  s.task_type = j.value("task_type", "");
  s.platform = j.value("platform", "");
  s.cls = j.value("class", "");
  for (auto [key, into] : std::initializer_list<std::pair<const char*, std::vector<std::string>*>>{
           {"editable", &s.mapping.editable}, {"splice_functions", &s.mapping.splice_functions},
           {"compat", &s.compat}, {"materialised", &s.materialised}}) {
    auto list = stringList(j, key);
    if (!list) return Error{"task " + task.id + ": " + list.error().message};
    *into = *list;
  }
  const json& cmds = j.value("commands", json::object());
  for (auto [key, into] : std::initializer_list<std::pair<const char*, std::vector<std::string>*>>{
           {"compile", &s.compile}, {"correctness", &s.correctness}, {"performance", &s.performance}}) {
    auto list = stringList(cmds, key);
    if (!list || list->empty()) return Error{"task " + task.id + ": aka.json: commands." + key + " must be a non-empty list"};
    *into = *list;
  }
  if (auto g = j.find("held_out_generated"); g != j.end() && g->is_object()) {
    s.generated.file = g->value("file", "");
    s.generated.scalars = g->value("scalars", false);
    s.generated.old_code = g->value("old_code", "");
    s.generated.prefix = g->value("prefix", "");
    if (!isInsideRelativePath(s.generated.file) || !g->contains("shapes") || !(*g)["shapes"].is_array() ||
        s.generated.old_code.rfind(s.generated.prefix, 0) != 0 || s.generated.old_code.empty() != s.generated.prefix.empty())
      return Error{"task " + task.id + ": aka.json: held_out_generated is malformed"};
    for (const json& e : (*g)["shapes"]) {
      if (!e.is_object() || !e.contains("shape") || !e["shape"].is_array())
        return Error{"task " + task.id + ": aka.json: held_out_generated is malformed"};
      std::vector<std::int64_t> shape;
      for (const json& d : e["shape"]) {
        if (!d.is_number_integer()) return Error{"task " + task.id + ": aka.json: a generated shape is not integers"};
        shape.push_back(d.get<std::int64_t>());
      }
      s.generated.shapes.push_back(shape);
      s.generated.rules.push_back(e.value("rule", ""));
    }
  }
  if (auto h = j.find("held_out_injections"); h != j.end()) {
    auto injections = injectionsFromJson(*h);
    if (!injections) return Error{"task " + task.id + ": aka.json: " + injections.error().message};
    s.held_out = *injections;
  }
  for (const auto& e : s.mapping.editable)
    if (!isInsideRelativePath(e)) return Error{"task " + task.id + ": aka.json: editable '" + e + "' is not a relative path"};
  return s;
}

bool akaOutputSaysFail(const std::string& output) {
  const std::string l = lower(output);
  return l.find("fail") != std::string::npos && l.find("pass") == std::string::npos;
}

fs::path findPerformanceReport(const fs::path& ws) {
  std::error_code ec;
  for (const char* rel : {"build/performance_report.json", "performance_report.json", "build/perf_report.json",
                          "perf_report.json", "perf/benchmark_results.json"})
    if (fs::is_regular_file(fs::symlink_status(ws / rel, ec))) return ws / rel;
  return {};
}

Result<CaseTimes> parsePerformanceReport(const std::string& text, const std::string& taskType, bool torchOriginal) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Error{std::string("the performance report is not JSON: ") + e.what()};
  }
  json list;
  if (j.is_array()) list = j;
  else if (j.is_object() && j.contains("test_cases") && j["test_cases"].is_array()) list = j["test_cases"];
  else if (j.is_object()) list = json::array({j});
  else return Error{"the performance report is neither a list of cases nor an object"};
  CaseTimes out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& c = list[i];
    if (!c.is_object()) continue;
    auto t = caseTime(c, taskType, torchOriginal);
    if (!t) continue;
    std::string id = "test_case_" + std::to_string(i);
    if (auto it = c.find("test_case_id"); it != c.end()) id = it->is_string() ? it->get<std::string>() : it->dump();
    if (out.count(id)) return Error{"the performance report names test case '" + id + "' twice"};
    out[id] = *t;
  }
  return out;
}

std::optional<double> geakLatencyMs(const std::string& output) {
  static const std::regex geak(R"(GEAK_RESULT_LATENCY_MS=([0-9.]+))");
  std::smatch m;
  if (!std::regex_search(output, m, geak)) return std::nullopt;
  const std::string text = m[1];
  double ms = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(ms) || ms <= 0) return std::nullopt;
  return ms;
}

Injection generatedInjection(const WrapSpec& spec, const std::vector<std::vector<std::int64_t>>& shapes) {
  if (spec.generated.old_code.empty())
    return Injection{spec.generated.file, "TEST_SHAPES", testShapesCode(shapes, spec.generated.scalars), ""};
  return Injection{spec.generated.file, "raw_replace", parametrizeCode(spec.generated.prefix, shapes), spec.generated.old_code};
}

}  // namespace akad::aka
