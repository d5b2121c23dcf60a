#include "daemon/aka/convert_held_out.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

#include "daemon/aka/held_out.h"
#include "daemon/aka/held_out_rules.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/gates.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

// A generated case has at most twice the elements of the group's largest: the driver keeps
// whole outputs of each correctness call for the checker, and gpumode's largest cases are
// already 0.5 GiB a tensor.
constexpr std::int64_t kGrowth = 2;

// A case's text split at its integer literals: text[0] n[0] text[1] ... n[k-1] text[k].
struct CaseForm {
  std::vector<std::string> text;
  std::vector<std::int64_t> n;
  std::string key() const {
    std::string k = text[0];
    for (std::size_t i = 1; i < text.size(); ++i) k += "#" + text[i];
    return k;
  }
};

bool wordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

// Integer literals only: not inside a string, not part of a name (float32), a float (1.5, 1e3)
// or another base (0x10).
CaseForm formOf(const std::string& s) {
  CaseForm f{{""}, {}};
  char quote = 0;
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (quote) {
      f.text.back() += c;
      if (c == '\\' && i + 1 < s.size()) f.text.back() += s[++i];
      else if (c == quote) quote = 0;
      ++i;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    if (std::isdigit(static_cast<unsigned char>(c)) && (i == 0 || !wordChar(s[i - 1]))) {
      std::size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      std::int64_t v = 0;
      const bool whole = j == s.size() || !(wordChar(s[j]) || s[j] == 'e' || s[j] == 'E');
      if (whole && std::from_chars(s.data() + i, s.data() + j, v).ec == std::errc()) {
        f.n.push_back(v);
        f.text.emplace_back();
        i = j;
        continue;
      }
      f.text.back() += s.substr(i, j - i);
      i = j;
      continue;
    }
    f.text.back() += c;
    ++i;
  }
  return f;
}

// One group's generated cases: its varying numbers as a shape (one size per set of numbers
// equal in every case), the rules applied, written back into the first case's text.
std::vector<HeldOutCase> groupCases(const std::vector<CaseForm>& group, std::size_t max) {
  const std::size_t k = group[0].n.size();
  std::vector<int> classOf(k, -1);  // -1: the same in every case, kept
  std::vector<std::size_t> firstOf;  // a class's first position
  for (std::size_t p = 0; p < k; ++p) {
    const bool varies = std::any_of(group.begin(), group.end(), [&](const CaseForm& c) { return c.n[p] != group[0].n[p]; });
    if (!varies) continue;
    for (std::size_t cls = 0; cls < firstOf.size() && classOf[p] < 0; ++cls)
      if (std::all_of(group.begin(), group.end(), [&](const CaseForm& c) { return c.n[p] == c.n[firstOf[cls]]; }))
        classOf[p] = static_cast<int>(cls);
    if (classOf[p] < 0) {
      classOf[p] = static_cast<int>(firstOf.size());
      firstOf.push_back(p);
    }
  }
  std::vector<HeldOutCase> out;
  if (firstOf.empty()) return out;
  ShapeList sizes;
  sizes.scalars = firstOf.size() == 1;
  for (const auto& c : group) {
    Shape s;
    for (std::size_t p : firstOf) s.push_back(c.n[p]);
    sizes.shapes.push_back(s);
  }
  for (const auto& g : generateShapes(sizes, max, kGrowth)) {
    std::string text = group[0].text[0];
    for (std::size_t p = 0; p < k; ++p)
      text += std::to_string(classOf[p] < 0 ? group[0].n[p] : g.shape[classOf[p]]) + group[0].text[p + 1];
    out.push_back({text, g.rule});
  }
  return out;
}

// The verdict of one run of the pristine baseline on `configs`: why each failed (empty when it
// passed), or an Error when the run failed as a whole (a crash: no verdict per configuration).
Result<std::map<std::string, std::string>> baselineVerdicts(const GateRunner& g, const fs::path& trustedDir,
                                                            const std::vector<json>& configs, const std::string& phaseName,
                                                            const std::function<uint64_t()>& seed) {
  const Phase p = makePhase(phaseName, configs, g.task().timing, seed);
  if (auto s = writeFile(g.layout().plans / (phaseName + "-check.json"), checkPlan(p, true).dump()); !s) return s.error();
  const json gateResult = drivenCorrectnessGate(g, trustedDir, trustedDir, p, "baseline");
  if (!gateResult.contains("cases")) return Error{gateResult.value("reason", std::string("the run failed"))};
  std::map<std::string, std::string> why;
  for (const auto& cfg : configs) why[cfg["name"].get<std::string>()] = "";
  for (const json& c : gateResult["cases"]) {
    const std::string name = c.value("name", std::string());
    const std::string config = name.substr(0, name.rfind(".s"));
    if (why.count(config) && !c.value("ok", false) && why[config].empty()) {
      const std::string reason = c.value("reason", std::string());
      why[config] = reason.empty() ? "wrong output" : reason;
    }
  }
  return why;
}

}  // namespace

std::vector<HeldOutCase> heldOutCases(const std::vector<std::string>& visible, std::size_t max) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<CaseForm>> groups;
  for (const auto& v : visible) {
    CaseForm f = formOf(v);
    const std::string key = f.key();
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(std::move(f));
  }
  std::vector<std::vector<HeldOutCase>> made;
  for (const auto& key : order)
    if (groups[key].size() >= 2) made.push_back(groupCases(groups[key], max));
  // The groups in turn, so that each form gets some.
  std::vector<HeldOutCase> out;
  for (std::size_t rank = 0; out.size() < max; ++rank) {
    bool any = false;
    for (const auto& m : made)
      if (rank < m.size() && out.size() < max) {
        any = true;
        if (std::find(visible.begin(), visible.end(), m[rank].text) == visible.end()) out.push_back(m[rank]);
      }
    if (!any) break;
  }
  return out;
}

Result<std::vector<json>> keptHeldOutConfigs(const GateRunner& g, const fs::path& trustedDir, const fs::path& cacheFile,
                                             const std::function<uint64_t()>& seed, json& choice) {
  const std::vector<json>& all = g.task().held_out;
  auto select = [&](const json& c) {
    std::vector<json> kept;
    for (const auto& cfg : all)
      if (std::find(c["kept"].begin(), c["kept"].end(), cfg["name"]) != c["kept"].end()) kept.push_back(cfg);
    return kept;
  };
  if (auto recorded = readHeldOutChoice(cacheFile)) {
    choice = *recorded;
    return select(choice);
  }
  std::map<std::string, std::string> why;
  if (auto together = baselineVerdicts(g, trustedDir, all, "held_out_choice", seed)) {
    why = *together;
  } else {
    for (std::size_t i = 0; i < all.size(); ++i) {
      auto alone = baselineVerdicts(g, trustedDir, {all[i]}, "held_out_choice_" + std::to_string(i), seed);
      why[all[i]["name"].get<std::string>()] = alone ? alone->begin()->second : alone.error().message;
    }
  }
  // A scoring cancelled meanwhile failed every run for that reason: no choice to keep.
  if (g.environment().canceller && g.environment().canceller->cancelled()) return Error{"cancelled during the held-out choice"};
  json kept = json::array(), dropped = json::array();
  for (const auto& cfg : all) {
    const std::string name = cfg["name"];
    if (why[name].empty()) kept.push_back(name);
    else dropped.push_back({{"name", name}, {"rule", cfg.value("rule", std::string())}, {"reason", why[name].substr(0, 400)}});
  }
  choice = {{"kept", kept}, {"dropped", dropped}};
  if (!g.environment().gpu_shared) recordHeldOutChoice(cacheFile, choice);  // else made beside other scorings
  return select(choice);
}

}  // namespace akad::aka
