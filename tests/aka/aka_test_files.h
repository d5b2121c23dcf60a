// What the AKA tests share: the fixture checkout (in AKA's format, written for these tests) and
// whole-file reads and writes.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace akad::akafixture {

inline const std::filesystem::path kFixture = AKA_FIXTURE_CHECKOUT;

inline std::string readText(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `text` to `p`, making its folders first.
inline void writeText(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

}  // namespace akad::akafixture
