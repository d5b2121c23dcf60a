#pragma once
// YAML as JSON: the one conversion of YAML files (task.yaml, image profiles, agent
// definitions) for the daemon and for the akatask tool, so both read every scalar alike.
//
// A quoted scalar is a string. A plain (unquoted) scalar is, by YAML 1.2's JSON schema:
// true or false -> a boolean; an integer ([-+]?[0-9]+) -> an integer (a number too large for
// 64 bits -> a floating-point number); a decimal number (1.5, .5, 5., 1e-5) -> a floating-point
// number; anything else (0x10, .inf, yes, True) -> a string. null, ~ and an empty value are
// null (yaml-cpp's reading).

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "common/config_check.h"
#include "common/result.h"

namespace akad {

// What one plain scalar reads as (see above).
nlohmann::json plainScalarToJson(const std::string& text);

// The node as JSON. With `texts`, the written text of each plain scalar that became a number
// or a boolean is kept there by its key path (for ConfigCheck). Anchors and aliases could
// blow a small file up into an enormous tree, so more than a million values is an error.
Result<nlohmann::json> yamlToJson(const YAML::Node& node, PlainTexts* texts = nullptr);

// A YAML configuration file (loadYamlFile's limits), as JSON with its plain scalars' texts.
struct YamlDocument {
  nlohmann::json root;
  PlainTexts texts;
};
Result<YamlDocument> loadYamlDocument(const std::filesystem::path& file);

}  // namespace akad
