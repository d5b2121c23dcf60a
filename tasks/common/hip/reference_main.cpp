// reference - trusted: generates every case's inputs from its seed and the reference outputs.
// It never loads candidate code (linked from reference_main.cpp + the task's reference.cpp).
//
//   reference generate --plan P --data D   writes D/<case>.in.akt and D/<case>.ref.akt
//   reference plan --configs C --out P [--seed S] [--warmup N] [--samples N] [--input_sets N]
//                                          writes a plan for the configurations in C (a
//                                          configs.json: see docs/tasks.md) with seeds derived
//                                          from S (random when absent); for `make test` and
//                                          validate-local, never used by the scorer
#include "akaharness.h"
#include "akaplan.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sys/stat.h>

namespace {

std::map<std::string, std::string> parseOptions(int argc, char** argv, int first) {
  std::map<std::string, std::string> opts;
  for (int i = first; i < argc; ++i) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || i + 1 >= argc) throw std::runtime_error("bad argument '" + key + "'");
    opts[key.substr(2)] = argv[++i];
  }
  return opts;
}

std::string need(const std::map<std::string, std::string>& opts, const std::string& key) {
  auto it = opts.find(key);
  if (it == opts.end()) throw std::runtime_error("missing --" + key);
  return it->second;
}

void makeDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create " + dir + ": " + std::strerror(errno));
}

int generate(const std::string& planPath, const std::string& dataDir) {
  akaplan::Plan plan = akaplan::readPlan(planPath);
  makeDir(dataDir);
  for (const akaplan::Case& c : plan.cases) {
    if (!c.hasSeed) throw std::runtime_error(planPath + ": case '" + c.name + "' has no seed");
    Config config(c.config);
    TensorSet in = akaGenerate(config, c.seed);
    TensorSet ref = akaReference(config, in);
    akt::writeAkt(dataDir + "/" + c.name + ".in.akt", in);
    akt::writeAkt(dataDir + "/" + c.name + ".ref.akt", ref);
  }
  std::cerr << "reference: generated " << plan.cases.size() << " cases in " << dataDir << "\n";
  return 0;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int writePlan(const std::string& configsPath, const std::string& outPath, uint64_t seed,
              const std::map<std::string, std::string>& overrides) {
  nlohmann::json cfg = akaplan::readJsonFile(configsPath);
  if (!cfg.contains("configs") || !cfg["configs"].is_array())
    throw std::runtime_error(configsPath + ": no 'configs' array");
  nlohmann::json timing = cfg.value("timing", nlohmann::json::object());
  for (const char* key : {"warmup", "samples", "input_sets"})
    if (overrides.count(key)) timing[key] = std::stoi(overrides.at(key));
  int inputSets = timing.value("input_sets", 3);
  nlohmann::json cases = nlohmann::json::array(), groups = nlohmann::json::array();
  uint64_t n = 0;
  for (const nlohmann::json& c : cfg["configs"]) {
    std::string name = Config(c).name();
    cases.push_back({{"name", name + ".s0"}, {"config", c}, {"seed", mix(seed + ++n)}});
    nlohmann::json group = {{"name", name}, {"cases", nlohmann::json::array()}};
    for (int i = 0; i < inputSets; ++i) {
      std::string caseName = name + ".p" + std::to_string(i);
      cases.push_back({{"name", caseName}, {"config", c}, {"seed", mix(seed + ++n)}});
      group["cases"].push_back(caseName);
    }
    groups.push_back(group);
  }
  nlohmann::json plan = {{"cases", cases},
                         {"perf", {{"warmup", timing.value("warmup", 3)},
                                   {"samples", timing.value("samples", 30)},
                                   {"flush_bytes", timing.value("flush_bytes", uint64_t{64} << 20)},
                                   {"groups", groups}}}};
  std::ofstream out(outPath);
  out << plan.dump(1) << "\n";
  if (!out.flush()) throw std::runtime_error("cannot write " + outPath);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "usage: reference generate --plan P --data D\n"
      "       reference plan --configs C --out P [--seed S] [--warmup N] [--samples N] [--input_sets N]\n";
  if (argc < 2) {
    std::cerr << usage;
    return 2;
  }
  try {
    std::string cmd = argv[1];
    auto opts = parseOptions(argc, argv, 2);
    if (cmd == "generate") return generate(need(opts, "plan"), need(opts, "data"));
    if (cmd == "plan") {
      uint64_t seed = opts.count("seed") ? std::stoull(opts["seed"])
                                         : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
      return writePlan(need(opts, "configs"), need(opts, "out"), seed, opts);
    }
    std::cerr << usage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "reference: " << e.what() << "\n";
    return 1;
  }
}
