#pragma once
// The one validator for the files that configure a run: task.yaml, image profiles, agent
// definitions, the akabox spec, seccomp policies, the tenant policy and AKA's config.yaml.
// Each file is first read into JSON (YAML through yamlToJson, common/yaml_json.h), then
// checked field by field with a ConfigCheck. A ConfigCheck collects every problem instead of
// stopping at the first, so an author sees them all at once, one per line: "FILE: 'KEY.PATH'
// what is wrong" (two files name the key their own way: Naming).
//
// The rules are the same in every file (docs/config-files.md):
// - an unknown key is a problem (onlyKeys), named with the keys that are known (AKA's
//   config.yaml, a foreign format, does not call it: its reader ignores keys it does not use);
// - a boolean is true or false: JSON's literals, or the YAML plain scalars true and false.
//   Nothing else is a boolean: not yes/no/on/off/True/1, not the quoted string "true";
// - a string field takes a string. In a YAML file it also takes a plain scalar that reads as a
//   number or a boolean (title: 2024), as it was written (version: 1.10 stays "1.10");
// - a number field takes a number, in range; an integer field takes a whole number.
//
// Header-only: the static akabox links no library of common/.

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace akad {

// The written text of the YAML plain scalars that yamlToJson read as numbers or booleans, by
// key path ("binds[0].src"), so that a string field can take them as written.
using PlainTexts = std::map<std::string, std::string>;

// Key paths as problems name them: "build.reference", "configs.visible[2].name".
inline std::string keyPath(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
inline std::string indexPath(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

class ConfigCheck {
 public:
  enum Need { Optional, Required };
  // How a problem names the key it is about. The files akad defines quote it ("task.yaml:
  // 'timing.samples' must be ..."). Two files keep the wording their users (and the import
  // reports and tests) already know: AKA's config.yaml labels it ("x/config.yaml:
  // compile_timeout: must be ..."), the tenant policy writes it bare ("tenant policy F:
  // limits.max_connections must be ..."). With Label and Bare, a missing or unknown key is
  // named by its whole path too.
  enum class Naming { Quoted, Label, Bare };

  // `file` names the file in every problem; `texts` (from yamlToJson) lets string fields take
  // plain YAML scalars as written.
  explicit ConfigCheck(std::string file, const PlainTexts* texts = nullptr, Naming naming = Naming::Quoted)
      : file_(std::move(file)), texts_(texts), naming_(naming) {}

  // A problem with the value at `path` ("" for the file as a whole).
  void fail(const std::string& path, const std::string& what) {
    std::string key;
    if (!path.empty()) key = naming_ == Naming::Quoted ? "'" + path + "' " : naming_ == Naming::Label ? path + ": " : path + " ";
    problems_.push_back(file_ + ": " + key + what);
  }
  bool ok() const { return problems_.empty(); }
  const std::vector<std::string>& problems() const { return problems_; }
  // Every problem, one per line.
  Error error() const {
    std::string message;
    for (const std::string& p : problems_) message += (message.empty() ? "" : "\n") + p;
    return Error{message};
  }
  Status status() const { return ok() ? Status{} : Status{error()}; }

  // Whether `v` is a map; if not, a problem ("must be a mapping" and what it should hold).
  bool map(const nlohmann::json& v, const std::string& path, const std::string& holding = "") {
    if (v.is_object()) return true;
    fail(path, "must be a mapping" + (holding.empty() ? "" : " of " + holding));
    return false;
  }

  // Every key of `map` that is not in `known` is a problem; `noun` says what the keys are
  // ("unknown field 'x'", "unknown limit 'x'").
  void onlyKeys(const nlohmann::json& map, const std::string& path, std::initializer_list<std::string_view> known,
                std::string_view noun = "field") {
    onlyKeys<std::initializer_list<std::string_view>>(map, path, known, noun);
  }
  template <class Keys>
  void onlyKeys(const nlohmann::json& map, const std::string& path, const Keys& known, std::string_view noun = "field") {
    if (!map.is_object()) return;
    for (auto it = map.begin(); it != map.end(); ++it) {
      bool isKnown = false;
      for (std::string_view k : known) isKnown = isKnown || k == it.key();
      if (isKnown) continue;
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      const std::string unknown = "unknown " + std::string(noun) + " '";
      const std::string knownText = "' (known: " + list + ")";
      if (naming_ != Naming::Quoted) fail("", unknown + keyPath(path, it.key()) + knownText);
      else if (path.empty()) fail("", unknown + it.key() + knownText);
      else fail(path, "has an " + unknown + it.key() + knownText);
    }
  }

  // The member `key` of `map`, or nullptr when it is absent (a problem when it is required;
  // `expected` says what it should be).
  const nlohmann::json* member(const nlohmann::json& map, const std::string& path, const std::string& key,
                               Need need = Optional, const std::string& expected = "") {
    if (map.is_object())
      if (auto it = map.find(key); it != map.end()) return &*it;
    if (need == Required) {
      const std::string detail = expected.empty() ? "" : " (" + expected + ")";
      if (naming_ == Naming::Label) fail(keyPath(path, key), "missing" + detail);
      else if (naming_ == Naming::Bare) fail(keyPath(path, key), "is missing" + detail);
      else if (path.empty()) fail("", "missing field '" + key + "'" + detail);
      else fail(path, "is missing field '" + key + "'" + detail);
    }
    return nullptr;
  }

  // A scalar's text as a string field reads it (see string), or false, recording nothing: for
  // a field that a file's own rules let be anything.
  bool text(const nlohmann::json& v, const std::string& path, std::string& out) const {
    if (v.is_string()) {
      out = v.get<std::string>();
      return true;
    }
    if (texts_)
      if (auto it = texts_->find(path); it != texts_->end()) {
        out = it->second;
        return true;
      }
    return false;
  }

  // Readers of one value: on success they set `out` and return true; otherwise they record the
  // problem, leave `out` as it was and return false.
  bool string(const nlohmann::json& v, const std::string& path, std::string& out) {
    if (text(v, path, out)) return true;
    fail(path, "must be a string");
    return false;
  }

  bool boolean(const nlohmann::json& v, const std::string& path, bool& out) {
    if (v.is_boolean()) {
      out = v.get<bool>();
      return true;
    }
    fail(path, "must be true or false, not " + shown(v, path));
    return false;
  }

  // `unit` ("seconds") is named in the problem: "must be a number of seconds".
  template <class T>
  bool number(const nlohmann::json& v, const std::string& path, T& out, T min, T max, std::string_view unit = {}) {
    static_assert(std::is_arithmetic_v<T>);
    const std::string unitName(unit);
    const std::string of = unit.empty() ? "" : " of " + unitName;
    long double got = 0;
    if constexpr (std::is_integral_v<T>) {
      if (v.is_number_unsigned()) got = static_cast<long double>(v.get<uint64_t>());
      else if (v.is_number_integer()) got = static_cast<long double>(v.get<int64_t>());
      else {
        fail(path, std::string(v.is_number() ? "must be a whole number" : "must be a number") + of + ", not " + shown(v, path));
        return false;
      }
    } else {
      if (!v.is_number()) {
        fail(path, "must be a number" + of + ", not " + shown(v, path));
        return false;
      }
      got = v.get<long double>();
    }
    if (got < static_cast<long double>(min) || got > static_cast<long double>(max)) {
      fail(path, "must be between " + numberText(min) + " and " + numberText(max) + (unit.empty() ? "" : " ") + unitName +
                     ", not " + shown(v, path));
      return false;
    }
    out = static_cast<T>(got);
    return true;
  }

  // A list of strings; with `loneString`, a single string stands for a list of one.
  bool strings(const nlohmann::json& v, const std::string& path, std::vector<std::string>& out, bool loneString = false) {
    if (loneString && !v.is_array() && !v.is_object() && !v.is_null()) {
      std::string one;
      if (!string(v, path, one)) return false;
      out = {one};
      return true;
    }
    if (!v.is_array()) {
      fail(path, "must be a list of strings");
      return false;
    }
    std::vector<std::string> list;
    bool good = true;
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::string s;
      if (string(v[i], indexPath(path, i), s)) list.push_back(std::move(s));
      else good = false;
    }
    if (good) out = std::move(list);
    return good;
  }

  // A map from names to strings (an environment).
  bool stringMap(const nlohmann::json& v, const std::string& path, std::map<std::string, std::string>& out) {
    if (!map(v, path, "NAME: value strings")) return false;
    bool good = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string s;
      if (string(*it, keyPath(path, it.key()), s)) out[it.key()] = std::move(s);
      else good = false;
    }
    return good;
  }

  // Member and reader in one: an absent optional member is fine and leaves `out` as it was.
  bool readString(const nlohmann::json& map, const std::string& path, const std::string& key, std::string& out,
                  Need need = Optional) {
    const nlohmann::json* v = member(map, path, key, need, "a string");
    return v ? string(*v, keyPath(path, key), out) : need == Optional;
  }
  bool readBool(const nlohmann::json& map, const std::string& path, const std::string& key, bool& out) {
    const nlohmann::json* v = member(map, path, key);
    return v ? boolean(*v, keyPath(path, key), out) : true;
  }
  template <class T>
  bool readNumber(const nlohmann::json& map, const std::string& path, const std::string& key, T& out, T min, T max,
                  std::string_view unit = {}) {
    const nlohmann::json* v = member(map, path, key);
    return v ? number(*v, keyPath(path, key), out, min, max, unit) : true;
  }
  bool readStrings(const nlohmann::json& map, const std::string& path, const std::string& key, std::vector<std::string>& out,
                   Need need = Optional, bool loneString = false) {
    const nlohmann::json* v = member(map, path, key, need, "a list of strings");
    return v ? strings(*v, keyPath(path, key), out, loneString) : need == Optional;
  }

 private:
  // A value as the author wrote it, for a problem's text.
  std::string shown(const nlohmann::json& v, const std::string& path) const {
    if (texts_)
      if (auto it = texts_->find(path); it != texts_->end()) return it->second;
    if (v.is_string()) return "'" + v.get_ref<const std::string&>() + "'";
    if (v.is_null()) return "empty";
    if (v.is_object()) return "a map";
    if (v.is_array()) return "a list";
    return v.dump();
  }
  template <class T>
  static std::string numberText(T x) {
    if constexpr (std::is_integral_v<T>) {
      return std::to_string(x);
    } else {
      // All the digits a bound has: a ceiling of 1e6 reads "1000000", not "1e+06".
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.15g", static_cast<double>(x));
      return buf;
    }
  }

  std::string file_;
  const PlainTexts* texts_;
  Naming naming_;
  std::vector<std::string> problems_;
};

}  // namespace akad
