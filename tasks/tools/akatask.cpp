// akatask - reads a task folder's task.yaml for shell scripts (validate-local) that cannot
// parse YAML themselves.
//
//   akatask configs TASK_DIR [--visible]   prints the configs.json of the task (all configurations,
//                                          or only the visible ones, as an agent gets it)
//   akatask get TASK_DIR KEY               prints a scalar (timing.rounds) or a list's items one
//                                          per line (build.reference, editable)
//   akatask speedup BASE_DIR CAND_DIR      pools the driver's samples (report.json) of every round
//                                          folder under each dir and prints median times,
//                                          per-group speedup and their geometric mean
// Exit status: 0 ok, 1 invalid task or missing data, 2 usage.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/yaml_json.h"
#include "daemon/pipeline/task.h"

namespace fs = std::filesystem;

namespace {

struct TaskError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The task as the daemon reads it: the same checks (daemon/pipeline/task_file.cc), every
// problem reported.
akad::Task readTask(const fs::path& dir) {
  auto task = akad::readTaskFile(dir);
  if (!task) throw TaskError(task.error().message);
  return std::move(*task);
}

int printConfigs(const fs::path& dir, bool visibleOnly) {
  std::cout << readTask(dir).configsJson(/*withHeldOut=*/!visibleOnly).dump(2) << "\n";
  return 0;
}

int printKey(const fs::path& dir, const std::string& key) {
  readTask(dir);
  auto doc = akad::loadYamlDocument(dir / "task.yaml");
  if (!doc) throw TaskError(doc.error().message);
  nlohmann::json v = std::move(doc->root);
  std::stringstream parts(key);
  for (std::string part; std::getline(parts, part, '.');) {
    if (!v.is_object() || !v.contains(part)) throw TaskError((dir / "task.yaml").string() + ": no key '" + key + "'");
    v = v[part];
  }
  auto print = [](const nlohmann::json& x) { std::cout << (x.is_string() ? x.get<std::string>() : x.dump()) << "\n"; };
  if (v.is_array()) for (const nlohmann::json& x : v) print(x);
  else print(v);
  return 0;
}

std::map<std::string, std::vector<double>> pooledSamples(const fs::path& root) {
  std::map<std::string, std::vector<double>> samples;
  for (const fs::directory_entry& round : fs::directory_iterator(root)) {
    const fs::path report = round.path() / "report.json";
    if (!round.is_directory() || !fs::exists(report)) continue;
    std::ifstream in(report);
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const nlohmann::json& g : j.at("groups")) {
      auto& v = samples[g.at("name").get<std::string>()];
      for (const nlohmann::json& s : g.at("samples_ns")) v.push_back(s.get<double>());
    }
  }
  return samples;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int printSpeedup(const fs::path& baseRoot, const fs::path& candRoot) {
  auto base = pooledSamples(baseRoot), cand = pooledSamples(candRoot);
  double logSum = 0;
  int n = 0;
  std::printf("%-24s %12s %12s %9s\n", "config", "baseline ms", "candidate ms", "speedup");
  for (const auto& [group, b] : base) {
    auto it = cand.find(group);
    if (it == cand.end() || b.empty() || it->second.empty()) throw TaskError("no candidate times for '" + group + "'");
    double mb = median(b), mc = median(it->second);
    std::printf("%-24s %12.3f %12.3f %8.2fx\n", group.c_str(), mb / 1e6, mc / 1e6, mb / mc);
    logSum += std::log(mb / mc);
    ++n;
  }
  if (n == 0) throw TaskError("no report.json under " + baseRoot.string());
  std::printf("%-24s %12s %12s %8.2fx\n", "geomean", "", "", std::exp(logSum / n));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() >= 2 && args[0] == "configs" && (args.size() == 2 || (args.size() == 3 && args[2] == "--visible")))
      return printConfigs(args[1], args.size() == 3);
    if (args.size() == 3 && args[0] == "get") return printKey(args[1], args[2]);
    if (args.size() == 3 && args[0] == "speedup") return printSpeedup(args[1], args[2]);
  } catch (const std::exception& e) {
    std::cerr << "akatask: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: akatask configs TASK_DIR [--visible]\n"
               "       akatask get TASK_DIR KEY\n"
               "       akatask speedup BASE_DIR CAND_DIR\n";
  return 2;
}
