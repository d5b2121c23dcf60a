#include "daemon/aka/held_out.h"

#include <regex>

#include <yaml-cpp/yaml.h>

#include "daemon/aka/checkout.h"
#include "daemon/pipeline/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

constexpr std::size_t kMaxInjectedFileBytes = 16 << 20;

// Indents every non-blank line of `code` (trimmed of leading and trailing blank lines) by
// `indent`, ending with a newline: the replacement takes the place of what it replaces.
std::string indented(const std::string& code, const std::string& indent) {
  std::size_t b = code.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "\n";
  b = code.rfind('\n', b);
  b = b == std::string::npos ? 0 : b + 1;
  const std::size_t e = code.find_last_not_of(" \t\r\n");
  std::string out;
  std::size_t i = b;
  while (i <= e) {
    std::size_t nl = code.find('\n', i);
    if (nl == std::string::npos || nl > e) nl = e + 1;
    const std::string line = code.substr(i, nl - i);
    if (line.find_first_not_of(" \t\r") != std::string::npos) out += indent;
    out += line + "\n";
    i = nl + 1;
  }
  return out;
}

Result<std::string> replaceTestShapes(const std::string& src, const std::string& code) {
  static const std::regex assign(R"((^|\n)([ \t]*)TEST_SHAPES[ \t]*=[ \t]*\[)");
  std::smatch m;
  if (!std::regex_search(src, m, assign)) return Error{"no 'TEST_SHAPES = [' to replace"};
  const std::size_t start = static_cast<std::size_t>(m.position(0)) + m[1].length();
  std::size_t i = static_cast<std::size_t>(m.position(0) + m.length(0)) - 1;  // the '['
  int depth = 0;
  for (; i < src.size(); ++i) {
    if (src[i] == '[') ++depth;
    else if (src[i] == ']' && --depth == 0) break;
  }
  if (i >= src.size()) return Error{"the TEST_SHAPES list is not closed"};
  std::size_t end = i + 1;
  if (end < src.size() && src[end] == '\n') ++end;
  return src.substr(0, start) + indented(code, m[2]) + src.substr(end);
}

Result<std::string> replaceGetInputs(const std::string& src, const std::string& code) {
  static const std::regex def(R"((^|\n)([ \t]*)def[ \t]+get_inputs[ \t]*\()");
  std::smatch m;
  if (!std::regex_search(src, m, def)) return Error{"no 'def get_inputs(' to replace"};
  const std::size_t start = static_cast<std::size_t>(m.position(0)) + m[1].length();
  const std::size_t base = m[2].length();
  // The body: every following line that is blank, a comment, or indented deeper than the def.
  std::size_t end = src.find('\n', start);
  end = end == std::string::npos ? src.size() : end + 1;
  while (end < src.size()) {
    std::size_t nl = src.find('\n', end);
    const std::size_t lineEnd = nl == std::string::npos ? src.size() : nl + 1;
    const std::string line = src.substr(end, lineEnd - end);
    const std::size_t first = line.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && line[first] != '#' && first <= base) break;
    end = lineEnd;
  }
  return src.substr(0, start) + indented(code, m[2]) + src.substr(end);
}

}  // namespace

Result<std::vector<Injection>> parseHeldOutShapes(const std::string& text, const std::string& where) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error{where + ": not valid YAML: " + e.what()};
  }
  if (!root.IsMap() || !root["injections"] || !root["injections"].IsSequence() || root["injections"].size() == 0)
    return Error{where + ": needs a non-empty list 'injections'"};
  std::vector<Injection> out;
  const YAML::Node list = root["injections"];
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + ": injections[" + std::to_string(i) + "]";
    const YAML::Node n = list[i];
    if (!n.IsMap()) return Error{at + " must be a map"};
    auto str = [&](const char* key, bool required, std::string& into) -> Status {
      if (!n[key] || n[key].IsNull()) {
        if (required) return Error{at + "." + key + " is missing"};
        return {};
      }
      if (!n[key].IsScalar()) return Error{at + "." + key + " must be a string"};
      into = n[key].Scalar();
      return {};
    };
    Injection inj;
    for (auto [key, required, into] : {std::tuple<const char*, bool, std::string*>{"file", true, &inj.file},
                                       {"find_marker", true, &inj.marker},
                                       {"replacement_code", true, &inj.replacement},
                                       {"old_code", false, &inj.old_code}})
      if (auto s = str(key, required, *into); !s) return s.error();
    if (!isInsideRelativePath(inj.file)) return Error{at + ".file '" + inj.file + "' must be a path inside the task folder"};
    const bool known = inj.marker == "TEST_SHAPES" || inj.marker == "raw_replace" || inj.marker.rfind("def get_inputs", 0) == 0;
    if (!known) return Error{at + ".find_marker '" + inj.marker + "' is not TEST_SHAPES, def get_inputs or raw_replace"};
    if (inj.marker == "raw_replace" && inj.old_code.empty()) return Error{at + ": raw_replace needs old_code"};
    out.push_back(std::move(inj));
  }
  return out;
}

Result<std::string> applyInjection(const std::string& source, const Injection& inj) {
  Result<std::string> out = Error{"unknown find_marker"};
  if (inj.marker == "TEST_SHAPES") out = replaceTestShapes(source, inj.replacement);
  else if (inj.marker.rfind("def get_inputs", 0) == 0) out = replaceGetInputs(source, inj.replacement);
  else if (inj.marker == "raw_replace") {
    const std::size_t at = source.find(inj.old_code);
    if (at == std::string::npos) return Error{inj.file + ": raw_replace's old_code is not in the file"};
    std::string s = source;
    s.replace(at, inj.old_code.size(), inj.replacement);
    out = s;
  }
  if (!out) return Error{inj.file + ": " + out.error().message};
  if (*out == source) return Error{inj.file + ": the injection changes nothing"};
  return out;
}

Status applyInjections(const fs::path& workspace, const std::vector<Injection>& injections) {
  for (const auto& inj : injections) {
    auto text = readFileLimited(workspace / inj.file, kMaxInjectedFileBytes);
    if (!text) return Error{"held-out injection into " + inj.file + ": " + text.error().message};
    auto changed = applyInjection(*text, inj);
    if (!changed) return changed.error();
    if (auto s = writeFile(workspace / inj.file, *changed); !s) return s;
  }
  return {};
}

json injectionsToJson(const std::vector<Injection>& injections) {
  json out = json::array();
  for (const auto& i : injections)
    out.push_back({{"file", i.file}, {"find_marker", i.marker}, {"replacement_code", i.replacement}, {"old_code", i.old_code}});
  return out;
}

Result<std::vector<Injection>> injectionsFromJson(const json& j) {
  if (!j.is_array()) return Error{"held-out injections must be a list"};
  std::vector<Injection> out;
  for (const json& e : j) {
    if (!e.is_object()) return Error{"a held-out injection must be an object"};
    Injection i{e.value("file", ""), e.value("find_marker", ""), e.value("replacement_code", ""), e.value("old_code", "")};
    if (!isInsideRelativePath(i.file)) return Error{"a held-out injection names no file inside the task"};
    out.push_back(std::move(i));
  }
  return out;
}

std::filesystem::path heldOutChoiceFile(const std::filesystem::path& trustedCache, const std::string& taskHash,
                                        const std::filesystem::path& workDir) {
  return (trustedCache.empty() ? workDir : trustedCache / taskHash) / "aka-held-out-kept.json";
}

std::optional<nlohmann::json> readHeldOutChoice(const std::filesystem::path& file) {
  auto text = readFileLimited(file, 1 << 20);
  if (!text) return std::nullopt;
  nlohmann::json choice = nlohmann::json::parse(*text, nullptr, false);
  if (!choice.is_object() || !choice.contains("kept") || !choice["kept"].is_array()) return std::nullopt;
  return choice;
}

void recordHeldOutChoice(const std::filesystem::path& file, const nlohmann::json& choice) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  const std::filesystem::path tmp = file.string() + ".tmp-" + randomHex(4);
  if (writeFile(tmp, choice.dump(2) + "\n")) std::filesystem::rename(tmp, file, ec);
}

}  // namespace akad::aka
