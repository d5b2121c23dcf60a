#include "daemon/aka/config.h"

#include <yaml-cpp/yaml.h>

#include "daemon/aka/checkout.h"

namespace akad::aka {
namespace {

class ConfigChecker {
 public:
  explicit ConfigChecker(std::string task) : task_(std::move(task)) {}
  void fail(const std::string& field, const std::string& what) { problems_.push_back(field + ": " + what); }
  bool ok() const { return problems_.empty(); }
  Error error() const {
    std::string msg = task_ + "/config.yaml:";
    for (const auto& p : problems_) msg += (problems_.size() > 1 ? "\n  " : " ") + p;
    return Error{msg};
  }

  // A list of non-empty strings; AKA's own configs always write lists, a lone string is taken
  // as a list of one (AKA iterates it as a list and would run it character by character, so a
  // user who wrote one meant one).
  std::vector<std::string> strings(const YAML::Node& root, const std::string& key, bool required) {
    std::vector<std::string> out;
    const YAML::Node n = root[key];
    if (!n || n.IsNull()) {
      if (required) fail(key, "missing (a list of strings is required)");
      return out;
    }
    if (n.IsScalar()) {
      if (n.Scalar().empty()) fail(key, "is an empty string");
      else out.push_back(n.Scalar());
      return out;
    }
    if (!n.IsSequence()) {
      fail(key, "must be a list of strings");
      return out;
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar() || n[i].Scalar().empty()) {
        fail(key + "[" + std::to_string(i) + "]", "must be a non-empty string");
        continue;
      }
      out.push_back(n[i].Scalar());
    }
    if (required && out.empty() && n.size() == 0) fail(key, "is an empty list");
    return out;
  }

  std::string string(const YAML::Node& root, const std::string& key, bool required) {
    const YAML::Node n = root[key];
    if (!n || n.IsNull()) {
      if (required) fail(key, "missing (a string is required)");
      return {};
    }
    if (!n.IsScalar()) {
      fail(key, "must be a string");
      return {};
    }
    return n.Scalar();
  }

  void seconds(const YAML::Node& root, const std::string& key, double& out) {
    const YAML::Node n = root[key];
    if (!n || n.IsNull()) return;
    try {
      const double v = n.as<double>();
      if (!(v >= 1 && v <= 7 * 86400)) {
        fail(key, "must be between 1 and 604800 seconds");
        return;
      }
      out = v;
    } catch (const YAML::Exception&) {
      fail(key, "must be a number of seconds");
    }
  }

 private:
  std::string task_;
  std::vector<std::string> problems_;
};

}  // namespace

Result<AkaTaskConfig> parseTaskConfig(const std::string& text, const std::string& task) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error{task + "/config.yaml: not valid YAML: " + e.what()};
  }
  if (!root.IsMap()) return Error{task + "/config.yaml: the top level must be a map of fields"};

  ConfigChecker check(task);
  AkaTaskConfig c;
  try {
    c.task_type = check.string(root, "task_type", true);
    c.source_files = check.strings(root, "source_file_path", true);
    for (const auto& f : c.source_files)
      if (!isInsideRelativePath(f)) check.fail("source_file_path", "'" + f + "' must be a relative path inside the task folder");
    c.target_file = check.string(root, "target_file_path", false);
    if (!c.target_file.empty() && !isInsideRelativePath(c.target_file))
      check.fail("target_file_path", "'" + c.target_file + "' must be a relative path inside the task folder");
    // AKA's rocmbench configs also write several names in one entry: "k_runtime_seed,k_const_seed".
    for (const std::string& entry : check.strings(root, "target_kernel_functions", false)) {
      std::size_t from = 0;
      while (from <= entry.size()) {
        std::size_t comma = entry.find(',', from);
        if (comma == std::string::npos) comma = entry.size();
        std::string name = entry.substr(from, comma - from);
        name.erase(0, name.find_first_not_of(" \t"));
        name.erase(name.find_last_not_of(" \t") + 1);
        if (!name.empty()) c.target_kernel_functions.push_back(name);
        from = comma + 1;
      }
    }
    c.compile = check.strings(root, "compile_command", true);
    c.correctness = check.strings(root, "correctness_command", true);
    c.performance = check.strings(root, "performance_command", true);
    check.seconds(root, "compile_timeout", c.compile_timeout_s);
    check.seconds(root, "correctness_timeout", c.correctness_timeout_s);
    check.seconds(root, "performance_timeout", c.performance_timeout_s);
    c.harness_path = check.string(root, "harness_path", false);
    if (!c.harness_path.empty() && !isInsideRelativePath(c.harness_path))
      check.fail("harness_path", "'" + c.harness_path + "' must be a relative path inside the task folder");

    if (const YAML::Node prompt = root["prompt"]; prompt && !prompt.IsNull()) {
      if (prompt.IsMap()) {
        c.instructions = check.string(prompt, "instructions", false);
      } else if (prompt.IsScalar()) {
        c.instructions = prompt.Scalar();
      } else {
        check.fail("prompt", "must be a map (instructions, ...) or a string");
      }
    }

    // AKA treats a malformed platform_support as "runnable" with a warning; so does akad, and
    // says so in the task's notes.
    if (const YAML::Node ps = root["platform_support"]; ps && !ps.IsNull()) {
      if (!ps.IsMap()) {
        c.notes.push_back("platform_support is not a map; ignored, as AKA does");
      } else {
        c.platform_support.present = true;
        if (ps["status"] && ps["status"].IsScalar()) {
          std::string s = ps["status"].Scalar();
          for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          c.platform_support.status = s.empty() ? "active" : s;
        }
        if (ps["skip_reason"] && ps["skip_reason"].IsScalar()) c.platform_support.skip_reason = ps["skip_reason"].Scalar();
        if (ps["required_arch"] && ps["required_arch"].IsScalar()) c.platform_support.required_arch = ps["required_arch"].Scalar();
        else if (ps["required_arch"] && !ps["required_arch"].IsNull())
          c.notes.push_back("platform_support.required_arch is not a string; ignored, as AKA does");
      }
    }
  } catch (const YAML::Exception& e) {
    check.fail("(document)", std::string("cannot be read: ") + e.what());
  }
  if (!check.ok()) return check.error();
  return c;
}

}  // namespace akad::aka
