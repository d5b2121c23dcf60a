// akaconfig.h - what every C++ harness shares: the configuration of a case (Config, typed
// getters with errors that name the configuration and key) and the seeded generators (Rng:
// xoshiro256** seeded by splitmix64; fillUniform: counter-based, akafill.h), so inputs come out
// byte-identical for a given (configuration, seed) whichever harness generates them.
#pragma once

#include "akafill.h"
#include "akt.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using akt::DType;
using akt::Tensor;
using akt::TensorSet;

// One configuration: the flat JSON object from task.yaml, with typed getters whose errors name
// the configuration and the key.
class Config {
 public:
  struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

  explicit Config(nlohmann::json j) : j_(std::move(j)) {
    if (!j_.is_object()) throw Error("configuration is not a JSON object");
    if (!j_.contains("name") || !j_["name"].is_string()) throw Error("configuration has no string 'name'");
  }

  std::string name() const { return j_["name"].get<std::string>(); }
  bool has(const std::string& key) const { return j_.contains(key); }
  const nlohmann::json& json() const { return j_; }

  int64_t getInt(const std::string& key) const {
    const nlohmann::json& v = need(key);
    if (!v.is_number_integer()) fail(key, "is not an integer");
    return v.get<int64_t>();
  }
  int64_t getInt(const std::string& key, int64_t min, int64_t max) const {
    int64_t v = getInt(key);
    if (v < min || v > max)
      fail(key, "= " + std::to_string(v) + " is outside [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return v;
  }
  // A dimension: an integer >= 1.
  size_t getSize(const std::string& key) const {
    return static_cast<size_t>(getInt(key, 1, std::numeric_limits<int32_t>::max()));
  }
  double getDouble(const std::string& key) const {
    const nlohmann::json& v = need(key);
    if (!v.is_number()) fail(key, "is not a number");
    return v.get<double>();
  }
  std::string getString(const std::string& key) const {
    const nlohmann::json& v = need(key);
    if (!v.is_string()) fail(key, "is not a string");
    return v.get<std::string>();
  }
  DType getDType(const std::string& key) const {
    try {
      return akt::parseDType(getString(key));
    } catch (const akt::Error& e) {
      fail(key, e.what());
    }
  }

 private:
  const nlohmann::json& need(const std::string& key) const {
    if (!j_.contains(key)) fail(key, "is missing");
    return j_[key];
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw Error("configuration '" + name() + "': key '" + key + "' " + why);
  }
  nlohmann::json j_;
};

// Deterministic input generation: xoshiro256** seeded through splitmix64, so a (config, seed)
// pair always yields the same bytes on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : s_) s = splitmix(seed);
  }
  uint64_t next() {
    uint64_t result = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0]; s_[3] ^= s_[1]; s_[1] ^= s_[2]; s_[0] ^= s_[3];
    s_[2] ^= t; s_[3] = rotl(s_[3], 45);
    return result;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  float uniform(float lo, float hi) { return lo + static_cast<float>(uniform()) * (hi - lo); }
  int64_t range(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  static uint64_t splitmix(uint64_t& x) { return akafill::mix(x += 0x9e3779b97f4a7c15ull); }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// One fill made by fillUniform: what the hip driver needs to make the same bytes on the GPU.
struct FillRecord {
  std::string tensor;
  akafill::Kind kind;
  uint32_t stream;
  float lo, hi;
};

// While set, fillUniform calls on this thread are recorded here (the hip driver's, once per
// configuration: a task whose akaGenerate fills every input tensor with one fillUniform gets its
// timed calls' inputs made on the GPU; any other is generated on the host as before).
inline thread_local std::vector<FillRecord>* fillLog = nullptr;

// Fills every element of `t` (f32, f16 or bf16) with a value uniform in [lo, hi) that depends
// only on (seed, stream, index): use a distinct stream per tensor of one set.
inline void fillUniform(Tensor& t, uint64_t seed, uint32_t stream, float lo, float hi) {
  akafill::Kind kind;
  switch (t.dtype) {
    case DType::F32: kind = akafill::Kind::F32; break;
    case DType::F16: kind = akafill::Kind::F16; break;
    case DType::BF16: kind = akafill::Kind::BF16; break;
    default: throw akt::Error("fillUniform: tensor '" + t.name + "' is " + akt::dtypeName(t.dtype) + ", not f32, f16 or bf16");
  }
  const uint64_t key = akafill::keyOf(seed, stream), n = t.elements();
  void* out = t.bytes.data();
  for (uint64_t i = 0; i < n; ++i) akafill::store(out, kind, i, akafill::uniformAt(key, i, lo, hi));
  if (fillLog) fillLog->push_back({t.name, kind, stream, lo, hi});
}

// The fills that made `set`, one per tensor in the set's order, when `log` holds exactly one fill
// for each of its tensors and nothing else; empty when anything in the set came another way.
inline std::vector<FillRecord> fillsCovering(const TensorSet& set, const std::vector<FillRecord>& log) {
  if (log.size() != set.size() || set.size() == 0) return {};
  std::vector<FillRecord> fills;
  for (const Tensor& t : set.tensors) {
    const FillRecord* found = nullptr;
    for (const FillRecord& r : log) {
      if (r.tensor != t.name) continue;
      if (found) return {};
      found = &r;
    }
    if (!found) return {};
    fills.push_back(*found);
  }
  return fills;
}
