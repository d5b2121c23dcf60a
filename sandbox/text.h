#pragma once
// Small text helpers for what akabox parses on every spawn (its command line, cgroup files,
// paths): string views, not iostreams. A program's first stream sets up the C++ locale (tens
// of microseconds), and <iostream> alone sets up the standard streams before main; akabox
// uses neither.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace akad::box::text {

// Splits `s` at `sep`, every field kept ("a::b:" gives a, "", b, "").
std::vector<std::string_view> split(std::string_view s, char sep);
// Splits `s` at `sep` as std::getline does: no field for an empty `s` or after a final `sep`.
std::vector<std::string_view> fields(std::string_view s, char sep);
// The words of `s`, separated by blanks and newlines.
std::vector<std::string_view> words(std::string_view s);
bool hasWord(std::string_view s, std::string_view word);
// An unsigned decimal number that is the whole word.
std::optional<uint64_t> number(std::string_view word);
// The number after `key` in "key number" pairs (cgroup stat files: "oom_kill 0\n..."), read
// pair by pair up to the first that is not one.
std::optional<uint64_t> keyValue(std::string_view s, std::string_view key);

}  // namespace akad::box::text
