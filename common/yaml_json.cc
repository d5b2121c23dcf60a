#include "common/yaml_json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <string_view>

#include "common/yaml_file.h"

namespace akad {

nlohmann::json plainScalarToJson(const std::string& text) {
  if (text == "true") return true;
  if (text == "false") return false;
  // Both number grammars below start with a sign, a digit or a point: anything else is text
  // without the regexes' cost (a file of a million aliased words took seconds in them).
  if (text.empty() || std::string_view("+-.0123456789").find(text[0]) == std::string_view::npos) return text;
  static const std::regex integer("[-+]?[0-9]+");
  static const std::regex decimal("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (std::regex_match(text, integer)) {
    errno = 0;
    const long long i = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == 0) return i;
  }
  if (std::regex_match(text, decimal)) {
    errno = 0;
    const double d = std::strtod(text.c_str(), nullptr);
    if (errno == 0 && std::isfinite(d)) return d;
  }
  return text;
}

namespace {

constexpr std::size_t kMaxValues = 1 << 20;

struct Converter {
  PlainTexts* texts;
  std::size_t values = 0;

  // false once the tree has more than kMaxValues values
  bool convert(const YAML::Node& n, const std::string& path, nlohmann::json& out) {
    if (++values > kMaxValues) return false;
    if (n.IsMap()) {
      out = nlohmann::json::object();
      for (const auto& kv : n) {
        // A key that is not a scalar (YAML allows maps as keys) keeps its YAML text, so that
        // a checker can name it as an unknown key.
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : YAML::Dump(kv.first);
        if (!convert(kv.second, keyPath(path, key), out[key])) return false;
      }
    } else if (n.IsSequence()) {
      out = nlohmann::json::array();
      std::size_t i = 0;
      for (const auto& e : n) {
        nlohmann::json item;
        if (!convert(e, indexPath(path, i++), item)) return false;
        out.push_back(std::move(item));
      }
    } else if (n.IsScalar()) {
      // yaml-cpp tags a quoted scalar "!": it is a string whatever it reads as.
      out = n.Tag() == "!" ? nlohmann::json(n.Scalar()) : plainScalarToJson(n.Scalar());
      if (texts && !out.is_string()) (*texts)[path] = n.Scalar();
    } else {
      out = nullptr;
    }
    return true;
  }
};

}  // namespace

Result<nlohmann::json> yamlToJson(const YAML::Node& node, PlainTexts* texts) {
  Converter c{texts};
  nlohmann::json out;
  if (!c.convert(node, "", out)) return Error{"more than " + std::to_string(kMaxValues) + " values (aliases expanded)"};
  return out;
}

Result<YamlDocument> loadYamlDocument(const std::filesystem::path& file) {
  auto loaded = loadYamlFile(file);
  if (!loaded) return loaded.error();
  YamlDocument doc;
  auto root = yamlToJson(*loaded, &doc.texts);
  if (!root) return Error{file.string() + ": " + root.error().message};
  doc.root = std::move(*root);
  return doc;
}

}  // namespace akad
