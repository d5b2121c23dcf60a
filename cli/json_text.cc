#include "cli/json_text.h"

#include <cstdio>

using nlohmann::json;

namespace akad::cli {

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string fmt(const json& v, const char* format) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v.get<double>());
  return buf;
}

std::string percent(const json& v) {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v.get<double>());
  return buf;
}

}  // namespace akad::cli
