#include "daemon/aka/config.h"

#include <cctype>

#include <yaml-cpp/yaml.h>

#include "common/config_check.h"
#include "common/yaml_json.h"
#include "daemon/aka/checkout.h"

// AKA's config.yaml is AKA's format, not akad's: its tasks carry keys akad does not read (and
// AKA adds new ones), so unknown keys are ignored here, as they always were, and never refused.
// Every field akad does read is checked by the one config validator (common/config_check.h),
// with the problems named "TASK/config.yaml: KEY: what is wrong", as the import reports
// always named them.

namespace akad::aka {
namespace {

using nlohmann::json;

// AKA's evaluator reads its fields with dict.get, so a key with no value is no key at all.
json withoutNulls(const json& map) {
  json out = json::object();
  for (auto it = map.begin(); it != map.end(); ++it)
    if (!it->is_null()) out[it.key()] = *it;
  return out;
}

// A list of non-empty strings. AKA's own configs always write lists; a lone string is taken as
// a list of one (AKA iterates it as a list and would run it character by character, so a user
// who wrote one meant one).
std::vector<std::string> readNonEmptyStrings(ConfigCheck& check, const json& root, const std::string& key, ConfigCheck::Need need) {
  std::vector<std::string> read;
  const json* v = check.member(root, "", key, need, "a list of strings");
  if (!v || !check.strings(*v, key, read, true)) return {};
  if (!v->is_array() && read.front().empty()) {
    check.fail(key, "is an empty string");
    return {};
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < read.size(); ++i) {
    if (read[i].empty()) check.fail(indexPath(key, i), "must be a non-empty string");
    else out.push_back(read[i]);
  }
  if (need == ConfigCheck::Required && read.empty()) check.fail(key, "is an empty list");
  return out;
}

// A path the config names must stay inside the task folder.
void checkInside(ConfigCheck& check, const std::string& key, const std::string& path) {
  if (!path.empty() && !isInsideRelativePath(path))
    check.fail(key, "'" + path + "' must be a relative path inside the task folder");
}

// AKA's rocmbench configs also write several names in one entry: "k_runtime_seed,k_const_seed".
std::vector<std::string> kernelNames(const std::vector<std::string>& entries) {
  std::vector<std::string> names;
  for (const std::string& entry : entries) {
    std::size_t from = 0;
    while (from <= entry.size()) {
      std::size_t comma = entry.find(',', from);
      if (comma == std::string::npos) comma = entry.size();
      std::string name = entry.substr(from, comma - from);
      name.erase(0, name.find_first_not_of(" \t"));
      name.erase(name.find_last_not_of(" \t") + 1);
      if (!name.empty()) names.push_back(name);
      from = comma + 1;
    }
  }
  return names;
}

// prompt: a map with instructions, or the instructions as a string.
void readPrompt(ConfigCheck& check, const json& root, AkaTaskConfig& c) {
  const json* prompt = check.member(root, "", "prompt");
  if (!prompt) return;
  if (prompt->is_object()) check.readString(withoutNulls(*prompt), "prompt", "instructions", c.instructions);
  else if (!check.text(*prompt, "prompt", c.instructions)) check.fail("prompt", "must be a map (instructions, ...) or a string");
}

// AKA treats a malformed platform_support as "runnable" with a warning; so does akad, and says
// so in the task's notes. Its fields are read when they are scalars and ignored otherwise.
void readPlatformSupport(const ConfigCheck& check, const json& root, AkaTaskConfig& c) {
  auto found = root.find("platform_support");
  if (found == root.end()) return;
  if (!found->is_object()) {
    c.notes.push_back("platform_support is not a map; ignored, as AKA does");
    return;
  }
  const json ps = withoutNulls(*found);
  PlatformSupport& p = c.platform_support;
  p.present = true;
  if (std::string s; ps.contains("status") && check.text(ps.at("status"), "platform_support.status", s)) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    p.status = s.empty() ? "active" : s;
  }
  if (ps.contains("skip_reason")) check.text(ps.at("skip_reason"), "platform_support.skip_reason", p.skip_reason);
  if (ps.contains("required_arch") && !check.text(ps.at("required_arch"), "platform_support.required_arch", p.required_arch))
    c.notes.push_back("platform_support.required_arch is not a string; ignored, as AKA does");
}

void readFields(ConfigCheck& check, const json& root, AkaTaskConfig& c) {
  check.readString(root, "", "task_type", c.task_type, ConfigCheck::Required);
  c.source_files = readNonEmptyStrings(check, root, "source_file_path", ConfigCheck::Required);
  for (const auto& f : c.source_files) checkInside(check, "source_file_path", f);
  check.readString(root, "", "target_file_path", c.target_file);
  checkInside(check, "target_file_path", c.target_file);
  c.target_kernel_functions = kernelNames(readNonEmptyStrings(check, root, "target_kernel_functions", ConfigCheck::Optional));
  c.compile = readNonEmptyStrings(check, root, "compile_command", ConfigCheck::Required);
  c.correctness = readNonEmptyStrings(check, root, "correctness_command", ConfigCheck::Required);
  c.performance = readNonEmptyStrings(check, root, "performance_command", ConfigCheck::Required);
  check.readNumber(root, "", "compile_timeout", c.compile_timeout_s, 1.0, 7 * 86400.0, "seconds");
  check.readNumber(root, "", "correctness_timeout", c.correctness_timeout_s, 1.0, 7 * 86400.0, "seconds");
  check.readNumber(root, "", "performance_timeout", c.performance_timeout_s, 1.0, 7 * 86400.0, "seconds");
  check.readString(root, "", "harness_path", c.harness_path);
  checkInside(check, "harness_path", c.harness_path);
  readPrompt(check, root, c);
  readPlatformSupport(check, root, c);
}

}  // namespace

Result<AkaTaskConfig> parseTaskConfig(const std::string& text, const std::string& task) {
  const std::string file = task + "/config.yaml";
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error{file + ": not valid YAML: " + e.what()};
  }
  PlainTexts texts;
  auto read = yamlToJson(node, &texts);
  if (!read) return Error{file + ": " + read.error().message};
  if (!read->is_object()) return Error{file + ": the top level must be a map of fields"};
  ConfigCheck check(file, &texts, ConfigCheck::Naming::Label);
  AkaTaskConfig c;
  readFields(check, withoutNulls(*read), c);
  if (!check.ok()) return check.error();
  return c;
}

}  // namespace akad::aka
