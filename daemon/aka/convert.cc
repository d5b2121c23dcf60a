#include "daemon/aka/convert.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "daemon/aka/task_definition.h"
#include "daemon/aka/trust.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/gate_runner.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

constexpr std::size_t kMaxCases = 32;

std::string trimElement(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n\f\\");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n\f\\") - b + 1);
}

// The elements of the bracketed literal opening at s[open], comments left out; an Error when
// it does not close.
Result<std::vector<std::string>> elementsOf(const std::string& s, std::size_t open) {
  std::vector<std::string> out;
  std::string element, quote;
  int depth = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    const char c = s[i];
    if (!quote.empty()) {
      if (s.compare(i, quote.size(), quote) == 0) {
        element += quote;
        i += quote.size() - 1;
        quote.clear();
      } else {
        element += c;
        if (c == '\\' && i + 1 < s.size()) element += s[++i];
      }
      continue;
    }
    if (c == '#') {
      while (i + 1 < s.size() && s[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = s.compare(i, 3, std::string(3, c)) == 0 ? std::string(3, c) : std::string(1, c);
      element += quote;
      i += quote.size() - 1;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') {
      if (depth++ == 0) continue;
    } else if (c == ')' || c == ']' || c == '}') {
      if (--depth == 0) {
        if (!trimElement(element).empty()) out.push_back(trimElement(element));
        return out;
      }
    } else if (c == ',' && depth == 1) {
      out.push_back(trimElement(element));
      element.clear();
      continue;
    }
    element += c;
  }
  return Error{"a bracket opened in get_inputs is not closed"};
}

// get_inputs's body with its indentation taken off, so its statements are top-level ones.
Result<std::string> getInputsBody(const std::string& source) {
  auto span = findTopLevelDef(source, "get_inputs");
  if (!span) return span.error();
  if (!*span) return Error{"the module defines no get_inputs() at top level"};
  const std::string def = source.substr((*span)->begin, (*span)->end - (*span)->begin);
  static const std::regex header(R"(def[ \t]+get_inputs[ \t]*\([ \t]*\)[ \t]*(->[^:\n]*)?:[ \t]*(#[^\n]*)?\n)");
  std::smatch m;
  if (!std::regex_search(def, m, header)) return Error{"get_inputs() takes arguments or its header spans lines"};
  const std::string body = def.substr(m.position(0) + m.length(0));
  std::string indent;
  std::size_t at = 0;
  while (at < body.size()) {
    const std::size_t eol = std::min(body.find('\n', at), body.size());
    const std::string line = body.substr(at, eol - at);
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] != '#') {
      indent = line.substr(0, first);
      break;
    }
    at = eol + 1;
  }
  if (indent.empty()) return Error{"get_inputs() has an empty or one-line body"};
  std::string out;
  for (std::size_t i = 0; i < body.size();) {
    const std::size_t eol = std::min(body.find('\n', i), body.size());
    std::string line = body.substr(i, eol - i);
    if (line.rfind(indent, 0) == 0) line.erase(0, indent.size());
    out += line + "\n";
    i = eol + 1;
  }
  return out;
}

bool hasLoopInside(const std::string& block) {
  static const std::regex loop(R"(\n[ \t]+(for|while)[ \t(])");
  return std::regex_search(block, loop);
}

std::size_t yieldsIn(const std::string& block) {
  static const std::regex yieldRe(R"((^|\n)[ \t]*yield\b)");
  return std::distance(std::sregex_iterator(block.begin(), block.end(), yieldRe), std::sregex_iterator());
}

// The path after `flag` in AKA's correctness command ("--hip_file hip/x.hip").
std::string argumentOf(const std::vector<std::string>& commands, const std::string& flag) {
  for (const auto& line : commands) {
    std::istringstream words(line);
    std::string w;
    while (words >> w)
      if (w == flag && (words >> w)) return w;
  }
  return "";
}

const ReadFile* fileOf(const TaskFolder& folder, const std::string& rel) {
  for (const auto& c : folder.contents)
    if (c.rel == rel) return &c;
  return nullptr;
}

std::string convertTaskYaml(const ImportedTask& t, const AkaTaskConfig& c, const ConvertPlan& p, Platform platform) {
  const std::string suite = t.id.substr(0, t.id.find('/'));
  const std::string id = t.id.substr(t.id.find('/') + 1);
  std::string prompt = c.instructions.empty() ? "Write a fast HIP kernel for AgentKernelArena task " + t.name + "." : c.instructions;
  while (!prompt.empty() && prompt.back() == '\n') prompt.pop_back();
  prompt += "\n\nThis is AgentKernelArena task " + t.name + ", converted by akad. Edit " + p.hip +
            " only: it is built as a PyTorch extension (python3 harness/aka_convert_build.py) and its `forward` is "
            "called through the task's functional model (" + p.functional + ", fn=forward) on AKA's input cases, "
            "drawn from fresh seeds, and checked against the PyTorch module (" + p.module +
            ") with AKA's tolerances (rtol 1e-4, atol 1e-5). `python3 harness/aka_convert_build.py && make -f "
            "harness/Makefile test` checks it as the scorer does; `bench` instead of `test` times it. An empty " +
            p.hip + " runs the PyTorch model.";
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "schema" << YAML::Value << 1;
  y << YAML::Key << "id" << YAML::Value << id;
  y << YAML::Key << "suite" << YAML::Value << suite;
  y << YAML::Key << "title" << YAML::Value << ("AKA " + t.name + " (convert)");
  y << YAML::Key << "prompt" << YAML::Value << YAML::Literal << prompt;
  y << YAML::Key << "harness" << YAML::Value << kConvertHarness;
  y << YAML::Key << "image" << YAML::Value << (platform == Platform::Amd ? "rocm" : "torch");
  y << YAML::Key << "gpu" << YAML::Value << true;
  y << YAML::Key << "editable" << YAML::Value << YAML::Flow << std::vector<std::string>{p.hip};
  y << YAML::Key << "exclude" << YAML::Value << YAML::Flow
    << std::vector<std::string>{"build/", "__pycache__/", "temp/", "runner", "reference", "driver", "*.so", "*.o"};
  y << YAML::Key << "build" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "reference" << YAML::Value << YAML::Flow << std::vector<std::string>{"make -f harness/Makefile reference"};
  y << YAML::Key << "candidate" << YAML::Value << YAML::Flow
    << std::vector<std::string>{"\"${AKA_PYTHON:-python3}\" harness/aka_convert_build.py", "make -f harness/Makefile runner"};
  y << YAML::EndMap;
  y << YAML::Key << "configs" << YAML::Value << YAML::BeginMap << YAML::Key << "visible" << YAML::Value << YAML::BeginSeq;
  for (std::size_t i = 0; i < p.cases.size(); ++i)
    y << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << ("case-" + std::to_string(i)) << YAML::Key
      << "case" << YAML::Value << i << YAML::EndMap;
  y << YAML::EndSeq;
  // Held-out cases: the element's text replaces get_inputs()'s list in the trusted reference
  // only (aka_convert.py); the agent's configs.json never has them.
  y << YAML::Key << "held_out" << YAML::Value << YAML::BeginSeq;
  for (std::size_t i = 0; i < p.heldOut.size(); ++i)
    y << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value
      << ("held-out-" + std::to_string(i) + "-" + p.heldOut[i].rule) << YAML::Key << "case_text" << YAML::Value
      << YAML::DoubleQuoted << p.heldOut[i].text << YAML::Key << "rule" << YAML::Value << p.heldOut[i].rule << YAML::EndMap;
  y << YAML::EndSeq;
  y << YAML::EndMap;
  y << YAML::Key << "tolerances" << YAML::Value << YAML::BeginMap;
  for (const char* f : {"f32", "f64", "f16", "bf16"})
    y << YAML::Key << f << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "atol" << YAML::Value << 1e-5
      << YAML::Key << "rtol" << YAML::Value << 1e-4 << YAML::EndMap;
  for (const char* i : {"i32", "i64", "u8", "i8"})
    y << YAML::Key << i << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "atol" << YAML::Value << 0
      << YAML::Key << "rtol" << YAML::Value << 0 << YAML::EndMap;
  y << YAML::EndMap;
  // The shipped python GPU tasks' timing (docs/scoring.md, "And for the python tasks"): a side's
  // figure varies by process more than by call, so more processes of fewer calls each.
  y << YAML::Key << "timing" << YAML::Value << YAML::BeginMap << YAML::Key << "warmup" << YAML::Value << 5 << YAML::Key
    << "samples" << YAML::Value << 60 << YAML::Key << "rounds" << YAML::Value << 6 << YAML::EndMap;
  emitLimits(y, c, 1800.0);
  y << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

}  // namespace

bool convertible(const std::string& name) {
  for (const char* prefix : {"hip2hip/gpumode/", "torch2hip/gpumode/", "torch2hip/kernelbench/"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

Result<std::vector<std::string>> caseListElements(const std::string& source) {
  auto body = getInputsBody(source);
  if (!body) return body.error();
  const std::string& b = *body;
  static const std::regex assign(R"(^([A-Za-z_][A-Za-z_0-9]*)[ \t]*=[ \t]*([\[(]))");
  static const std::regex loop(R"(^(for|while)\b[^\n]*?)");
  static const std::regex forIn(R"(^for[ \t]+[^\n]+?[ \t]+in[ \t]+)");
  static const std::regex name(R"(^([A-Za-z_][A-Za-z_0-9]*)[ \t]*:)");
  std::map<std::string, std::vector<std::string>> lists;
  std::optional<std::vector<std::string>> cases;
  int loops = 0;
  const std::vector<std::size_t> stmts = topLevelStatements(b);
  for (std::size_t k = 0; k < stmts.size(); ++k) {
    const std::size_t end = k + 1 < stmts.size() ? stmts[k + 1] : b.size();
    const std::string stmt = b.substr(stmts[k], end - stmts[k]);
    std::smatch m;
    if (std::regex_search(stmt, m, assign)) {
      auto elements = elementsOf(b, stmts[k] + m.position(2));
      if (!elements) return elements.error();
      lists[m[1]] = *elements;
      continue;
    }
    if (!std::regex_search(stmt, m, loop)) continue;
    ++loops;
    if (!std::regex_search(stmt, m, forIn)) return Error{"get_inputs loops with `while`"};
    const std::size_t iter = stmts[k] + m.length(0);
    if (b[iter] == '[' || b[iter] == '(') {
      auto elements = elementsOf(b, iter);
      if (!elements) return elements.error();
      cases = *elements;
    } else {
      const std::string rest = b.substr(iter, end - iter);
      std::smatch n;
      if (!std::regex_search(rest, n, name) || !lists.count(n[1]))
        return Error{"get_inputs loops over something other than a list literal"};
      cases = lists[n[1]];
    }
    if (hasLoopInside(stmt)) return Error{"get_inputs has a loop inside its loop"};
    if (yieldsIn(stmt) != 1) return Error{"get_inputs's loop does not yield exactly once"};
  }
  if (loops != 1 || !cases) return Error{"get_inputs has not exactly one loop at its top level"};
  if (cases->empty()) return Error{"get_inputs loops over an empty list"};
  if (cases->size() > kMaxCases) return Error{"get_inputs has more than " + std::to_string(kMaxCases) + " cases"};
  return *cases;
}

namespace {

// Hundreds of digits are read as huge, not given to stod.
double wholeNumber(const std::string& digits) { return digits.size() > 15 ? 1e18 : std::stod(digits); }

}  // namespace

double largestShapeBytes(const std::string& caseText) {
  static const std::regex group(R"(\[([ \t]*[0-9]+[ \t]*(,[ \t]*[0-9]+[ \t]*)*,?[ \t]*)\])");
  static const std::regex number("[0-9]+");
  double largest = 0;
  for (auto g = std::sregex_iterator(caseText.begin(), caseText.end(), group); g != std::sregex_iterator(); ++g) {
    const std::string inside = (*g)[1];
    double elements = 1;
    for (auto n = std::sregex_iterator(inside.begin(), inside.end(), number); n != std::sregex_iterator(); ++n)
      elements *= wholeNumber(n->str());
    largest = std::max(largest, elements * 4);
  }
  return largest;
}

namespace {

// The names `for A, B in ...:` unpacks at get_inputs's top level, and the text of its loop.
struct UnpackingLoop {
  std::vector<std::string> names;
  std::string text;
};

UnpackingLoop unpackingLoop(const std::string& moduleSource) {
  auto body = getInputsBody(moduleSource);
  static const std::regex header(
      R"((^|\n)for[ \t]+([A-Za-z_][A-Za-z_0-9]*([ \t]*,[ \t]*[A-Za-z_][A-Za-z_0-9]*)+)[ \t]*,?[ \t]+in[ \t])");
  std::smatch m;
  if (!body || !std::regex_search(*body, m, header)) return {};
  static const std::regex identifier("[A-Za-z_][A-Za-z_0-9]*");
  const std::string targets = m[2];
  UnpackingLoop loop{{}, body->substr(m.position(0))};
  for (auto n = std::sregex_iterator(targets.begin(), targets.end(), identifier); n != std::sregex_iterator(); ++n)
    loop.names.push_back(n->str());
  return loop;
}

// The elements of a constructor call's sizes (the arguments before its keywords), each an
// unpacked name or a whole number; nothing when one is anything else.
std::optional<double> sizeElements(const std::string& args, const std::map<std::string, double>& value) {
  static const std::regex argument(R"([ \t]*([A-Za-z_][A-Za-z_0-9]*|[0-9]+)[ \t]*)");
  double elements = 1;
  bool any = false;
  for (std::size_t from = 0; from <= args.size();) {
    const std::size_t comma = std::min(args.find(',', from), args.size());
    const std::string arg = args.substr(from, comma - from);
    from = comma + 1;
    // Keywords follow the sizes; an empty one is a trailing comma.
    if (arg.find('=') != std::string::npos || arg.find_first_not_of(" \t") == std::string::npos) break;
    std::smatch a;
    if (!std::regex_match(arg, a, argument)) return std::nullopt;
    const std::string token = a[1];
    const auto named = value.find(token);
    if (!std::isdigit(static_cast<unsigned char>(token[0])) && named == value.end()) return std::nullopt;
    elements *= named != value.end() ? named->second : wholeNumber(token);
    any = true;
  }
  if (!any) return std::nullopt;
  return elements;
}

double loopTensorBytes(const UnpackingLoop& loop, const std::string& caseText) {
  static const std::regex tuple(R"(^[ \t]*\(([ \t]*[0-9]+[ \t]*(,[ \t]*[0-9]+[ \t]*)+),?[ \t]*\)[ \t]*$)");
  static const std::regex number("[0-9]+");
  std::smatch m;
  if (loop.names.empty() || !std::regex_match(caseText, m, tuple)) return 0;
  const std::string inside = m[1];
  std::map<std::string, double> value;
  std::size_t i = 0;
  for (auto n = std::sregex_iterator(inside.begin(), inside.end(), number); n != std::sregex_iterator(); ++n, ++i)
    if (i < loop.names.size()) value[loop.names[i]] = wholeNumber(n->str());
  if (i != loop.names.size()) return 0;
  static const std::regex call(R"(torch\.(rand|randn|zeros|ones|empty)\(([^()]*)\))");
  static const std::regex narrow(R"(dtype[ \t]*=[ \t]*torch\.(float16|half|bfloat16))"),
      wide(R"(dtype[ \t]*=[ \t]*torch\.(float64|double))");
  double largest = 0;
  for (auto c = std::sregex_iterator(loop.text.begin(), loop.text.end(), call); c != std::sregex_iterator(); ++c) {
    const std::string args = (*c)[2];
    const auto elements = sizeElements(args, value);
    if (!elements) continue;  // sizes this rule cannot read: the call is not counted
    const double width = std::regex_search(args, narrow) ? 2 : std::regex_search(args, wide) ? 8 : 4;
    largest = std::max(largest, *elements * width);
  }
  return largest;
}

}  // namespace

double largestLoopTensorBytes(const std::string& moduleSource, const std::string& caseText) {
  return loopTensorBytes(unpackingLoop(moduleSource), caseText);
}

Result<ConvertPlan> planConversion(const AkaTaskConfig& c, const TaskFolder& folder) {
  ConvertPlan p;
  p.module = argumentOf(c.correctness, "--py_modu_file");
  p.functional = argumentOf(c.correctness, "--py_func_file");
  p.hip = argumentOf(c.correctness, "--hip_file");
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"--py_modu_file", &p.module},
                                    {"--py_func_file", &p.functional},
                                    {"--hip_file", &p.hip}})
    if (value->empty() || fileOf(folder, *value) == nullptr)
      return Error{std::string("correctness_command names no file of the task after ") + flag};
  const std::string editable = c.task_type == "torch2hip" ? c.target_file : (c.source_files.empty() ? "" : c.source_files[0]);
  if (p.hip != editable) return Error{"the HIP file the correctness command checks (" + p.hip + ") is not the one the agent edits"};
  // AKA's harness: the class is the HIP file's name after "hip_<id>_", without ".hip".
  std::string stem = fs::path(p.hip).filename().string();
  stem = stem.substr(0, stem.find(".hip"));
  const auto first = stem.find('_');
  const auto second = first == std::string::npos ? first : stem.find('_', first + 1);
  p.className = second == std::string::npos ? stem : stem.substr(second + 1);
  static const std::regex identifier("[A-Za-z_][A-Za-z_0-9]*");
  if (!std::regex_match(p.className, identifier)) return Error{"the class named by " + p.hip + " is not an identifier"};
  const std::regex classRe("(^|\n)class[ \t]+" + p.className + "[ \t]*[(:]");
  for (const std::string* f : {&p.module, &p.functional})
    if (!std::regex_search(fileOf(folder, *f)->bytes, classRe)) return Error{*f + " defines no class " + p.className};
  auto cases = caseListElements(fileOf(folder, p.module)->bytes);
  if (!cases) return Error{p.module + ": " + cases.error().message};
  p.cases = *cases;
  // A kept call's outputs are one data file of the trusted driver, at most kMaxDataFileBytes;
  // the output is taken to be as large as the largest input (1067_Transpose's last case, 4
  // GiB, failed so on the H100).
  const UnpackingLoop loop = unpackingLoop(fileOf(folder, p.module)->bytes);  // read once for every case
  auto caseBytes = [&](const std::string& text) { return std::max(largestShapeBytes(text), loopTensorBytes(loop, text)); };
  for (std::size_t i = 0; i < p.cases.size(); ++i)
    if (const double bytes = caseBytes(p.cases[i]); bytes >= static_cast<double>(kMaxDataFileBytes)) {
      std::ostringstream gib;
      gib.precision(3);
      gib << bytes / (1ull << 30);
      return Error{p.module + ": case " + std::to_string(i) + " " + p.cases[i] + " makes a tensor of " + gib.str() +
                   " GiB as float32, and a kept call's outputs must fit one data file of " +
                   std::to_string(kMaxDataFileBytes >> 30) + " GiB"};
    }
  p.heldOut = heldOutCases(p.cases);
  std::erase_if(p.heldOut, [&](const HeldOutCase& h) { return caseBytes(h.text) >= static_cast<double>(kMaxDataFileBytes); });
  return p;
}

std::string convertedId(const std::string& wrapId) {
  return wrapId.rfind("aka-", 0) == 0 ? "aka-convert-" + wrapId.substr(4) : "aka-convert-" + wrapId;
}

Status installConvertHarness(const fs::path& commonSource, const fs::path& tasksRoot) {
  std::error_code ec;
  const fs::path staging = tasksRoot / (".common-" + randomHex(6));
  auto fail = [&](const std::string& what) {
    fs::remove_all(staging, ec);
    return Status(Error{what});
  };
  for (const auto& layer : kConvertLayers) {
    if (!fs::is_directory(commonSource / layer))
      return fail("the daemon's tasks have no common harness layer " + (commonSource / layer).string());
    if (auto s = copyTree(commonSource / layer, staging / layer); !s) return fail(s.error().message);
  }
  const fs::path common = tasksRoot / "common";
  const fs::path old = tasksRoot / (".common-old-" + randomHex(6));
  if (fs::exists(common)) fs::rename(common, old, ec);
  if (ec) return fail("cannot move " + common.string() + " aside: " + ec.message());
  fs::rename(staging, common, ec);
  if (ec) return fail("cannot move the common harness into " + common.string() + ": " + ec.message());
  fs::remove_all(old, ec);
  return {};
}

Status writeConvertedTask(const ImportedTask& t, const AkaTaskConfig& c, const TaskFolder& folder, const ConvertPlan& p,
                          const ImportReport& r, const fs::path& commonSource) {
  auto loader = readFileLimited(commonSource / "aka-convert" / "kernel_loader.py", 1 << 20);
  if (!loader) return loader.error();
  json files = json::object();
  for (const auto& [path, sha] : t.files) files[path] = sha;
  const json harnessSpec = {{"name", t.name},          {"module", "aka_module.py"}, {"functional", "aka_functional.py"},
                            {"class", p.className},    {"hip", p.hip},              {"cases", p.cases.size()},
                            {"compat", t.compat}};
  const json spec = {{"schema", 1},          {"mode", "convert"},     {"name", t.name},
                     {"family", t.family},   {"task_type", c.task_type}, {"checkout", r.checkout.string()},
                     {"commit", r.commit.commit}, {"commit_note", r.commit.note}, {"platform", platformName(r.platform)},
                     {"class", className(t.cls)}, {"reasons", t.reasons}, {"compat", t.compat},
                     {"module", p.module},   {"functional", p.functional}, {"hip", p.hip},
                     {"class_name", p.className}, {"cases", p.cases}, {"files", files}};
  const std::map<std::string, std::string> extra = {
      {"harness/aka_convert.json", harnessSpec.dump(2) + "\n"},
      {"harness/aka_module.py", fileOf(folder, p.module)->bytes},
      {"harness/aka_functional.py", fileOf(folder, p.functional)->bytes},
      {"workspace/kernel.py", *loader}};
  return writeTaskDefinition(r.tasksRoot, t, folder, convertTaskYaml(t, c, p, r.platform), spec, extra);
}

}  // namespace akad::aka
