#pragma once
// Sizes as people write them in flags, task files and sandbox specs: "123" (bytes), "64K",
// "512M", "4G", "1T". Units are binary (K = 1024) and may be written K, k, KB or KiB; the
// same for M, G and T, and B or b for bytes. Header-only, so the static akabox can use it.

#include <cstdint>
#include <string>

#include "common/result.h"

namespace akad {

inline Result<uint64_t> parseSize(const std::string& text) {
  if (text.empty()) return Error{"empty size"};
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  // At most 19 digits: any such number fits in 64 bits before the unit is applied.
  if (digits == 0 || digits > 19) return Error{"invalid size '" + text + "' (expected e.g. 512M, 4G or bytes)"};
  uint64_t n = 0;
  for (std::size_t i = 0; i < digits; ++i) n = n * 10 + static_cast<uint64_t>(text[i] - '0');
  const std::string unit = text.substr(digits);
  unsigned shift = 0;
  if (unit.empty() || unit == "B" || unit == "b") shift = 0;
  else if (unit == "K" || unit == "k" || unit == "KB" || unit == "KiB") shift = 10;
  else if (unit == "M" || unit == "m" || unit == "MB" || unit == "MiB") shift = 20;
  else if (unit == "G" || unit == "g" || unit == "GB" || unit == "GiB") shift = 30;
  else if (unit == "T" || unit == "t" || unit == "TB" || unit == "TiB") shift = 40;
  else return Error{"invalid size unit in '" + text + "' (use K, M, G or T)"};
  if (shift && n > (UINT64_MAX >> shift)) return Error{"size '" + text + "' is too large"};
  return n << shift;
}

}  // namespace akad
