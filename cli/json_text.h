#pragma once
// Turning reply fields into text for akactl's tables: missing or mistyped fields print as ""
// or "-" rather than throwing.

#include <string>

#include <nlohmann/json.hpp>

namespace akad::cli {

// j[key] if it is a string, else "".
std::string str(const nlohmann::json& j, const char* key);
// A number with printf's `format`, else "-".
std::string fmt(const nlohmann::json& v, const char* format = "%.3f");
// A fraction as a percentage ("12.5%"), else "-".
std::string percent(const nlohmann::json& v);

}  // namespace akad::cli
