// akaplan.h - the plan file the scorer writes (docs/tasks.md, "The harness contract").
// Shared by reference, runner and akacheck; header-only so it builds from a workspace copy.
#pragma once

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace akaplan {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Case {
  std::string name;
  nlohmann::json config;
  bool hasSeed = false;
  uint64_t seed = 0;
};

struct PerfGroup {
  std::string name;
  std::vector<std::string> cases;
  int empty = 0;      // the driver's calibration calls (only the trusted baseline's are used)
  double keep = 0;    // probability that a timed call's output is kept
  bool verify = true; // false: kept outputs are copied like the candidate's, then dropped
};

struct Perf {
  int warmup = 0;
  int samples = 0;
  uint64_t flushBytes = 0;
  std::string window = "queued";  // a GPU driver's window mode: queued, synced or graph (python only)
  std::vector<PerfGroup> groups;
};

struct Plan {
  std::vector<Case> cases;
  bool hasPerf = false;
  Perf perf;

  const Case* findCase(const std::string& name) const {
    for (const Case& c : cases) if (c.name == name) return &c;
    return nullptr;
  }
};

// Case and group names become file names, so only a safe alphabet is accepted.
inline bool safeName(const std::string& s) {
  if (s.empty() || s.size() > 200 || s[0] == '.') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

inline nlohmann::json readJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": invalid JSON: " + e.what());
  }
}

inline uint64_t parseSeed(const nlohmann::json& v, const std::string& where) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos) {
      errno = 0;
      unsigned long long x = std::strtoull(s.c_str(), nullptr, 10);
      if (errno == 0) return x;
    }
  }
  throw Error(where + ": seed must be an integer in [0, 2^64) or a decimal string");
}

inline Plan readPlan(const std::string& path) {
  nlohmann::json j = readJsonFile(path);
  Plan plan;
  try {
    if (!j.is_object() || !j.contains("cases") || !j["cases"].is_array())
      throw Error(path + ": plan has no 'cases' array");
    for (const nlohmann::json& c : j["cases"]) {
      Case pc;
      if (!c.is_object() || !c.contains("name") || !c["name"].is_string())
        throw Error(path + ": a case has no string 'name'");
      pc.name = c["name"].get<std::string>();
      if (!safeName(pc.name)) throw Error(path + ": case name '" + pc.name + "' is not [A-Za-z0-9._-]+");
      if (plan.findCase(pc.name)) throw Error(path + ": duplicate case '" + pc.name + "'");
      if (!c.contains("config") || !c["config"].is_object())
        throw Error(path + ": case '" + pc.name + "' has no 'config' object");
      pc.config = c["config"];
      if (c.contains("seed")) {
        pc.hasSeed = true;
        pc.seed = parseSeed(c["seed"], path + ": case '" + pc.name + "'");
      }
      plan.cases.push_back(std::move(pc));
    }
    if (j.contains("perf")) {
      const nlohmann::json& p = j["perf"];
      plan.hasPerf = true;
      plan.perf.warmup = p.value("warmup", 0);
      plan.perf.samples = p.value("samples", 0);
      plan.perf.flushBytes = p.value("flush_bytes", uint64_t{0});
      plan.perf.window = p.value("window", std::string("queued"));
      if (plan.perf.warmup < 0 || plan.perf.samples < 1)
        throw Error(path + ": perf needs warmup >= 0 and samples >= 1");
      if (plan.perf.window != "queued" && plan.perf.window != "synced" && plan.perf.window != "graph")
        throw Error(path + ": perf window '" + plan.perf.window + "' is not queued, synced or graph");
      for (const nlohmann::json& g : p.at("groups")) {
        PerfGroup pg;
        pg.name = g.at("name").get<std::string>();
        if (!safeName(pg.name)) throw Error(path + ": perf group name '" + pg.name + "' is not [A-Za-z0-9._-]+");
        for (const nlohmann::json& c : g.at("cases")) {
          std::string name = c.get<std::string>();
          if (!plan.findCase(name)) throw Error(path + ": perf group '" + pg.name + "' names unknown case '" + name + "'");
          pg.cases.push_back(name);
        }
        if (pg.cases.empty()) throw Error(path + ": perf group '" + pg.name + "' has no cases");
        pg.empty = g.value("empty", 0);
        pg.keep = g.value("keep", 0.0);
        if (g.contains("verify")) {
          if (!g["verify"].is_boolean()) throw Error(path + ": perf group '" + pg.name + "': verify must be true or false");
          pg.verify = g["verify"].get<bool>();
        }
        if (pg.empty < 0 || !(pg.keep >= 0 && pg.keep <= 1))
          throw Error(path + ": perf group '" + pg.name + "' needs empty >= 0 and keep in [0, 1]");
        plan.perf.groups.push_back(std::move(pg));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": malformed plan: " + e.what());
  }
  return plan;
}

}  // namespace akaplan
