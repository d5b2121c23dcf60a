#include "sandbox/text.h"

#include <charconv>

namespace akad::box::text {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

std::vector<std::string_view> fields(std::string_view s, char sep) {
  std::vector<std::string_view> out = split(s, sep);
  if (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  constexpr std::string_view blanks = " \t\n\r\v\f";
  size_t start = s.find_first_not_of(blanks);
  while (start != std::string_view::npos) {
    size_t end = s.find_first_of(blanks, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    start = end == std::string_view::npos ? end : s.find_first_not_of(blanks, end);
  }
  return out;
}

bool hasWord(std::string_view s, std::string_view word) {
  for (auto w : words(s))
    if (w == word) return true;
  return false;
}

std::optional<uint64_t> number(std::string_view word) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
  if (ec != std::errc() || end != word.data() + word.size() || word.empty()) return std::nullopt;
  return v;
}

std::optional<uint64_t> keyValue(std::string_view s, std::string_view key) {
  auto w = words(s);
  for (size_t i = 0; i + 1 < w.size(); i += 2) {
    auto v = number(w[i + 1]);
    if (!v) return std::nullopt;
    if (w[i] == key) return v;
  }
  return std::nullopt;
}

}  // namespace akad::box::text
