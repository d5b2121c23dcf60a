#pragma once
// Entry names are bytes on Linux but UTF-8 in pax headers and JSON manifests. Names that are
// not valid UTF-8 cannot be represented faithfully in either, so they are skipped at creation
// and refused at extraction; messages show them with \xNN escapes.

#include <string>
#include <string_view>

namespace akad::snapshot {

// Strict RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
inline bool isValidUtf8(std::string_view s) {
  size_t i = 0;
  auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    if (i + k >= s.size()) return false;
    auto c = static_cast<unsigned char>(s[i + k]);
    return c >= lo && c <= hi;
  };
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    if (c < 0x80) n = 1;
    else if (c >= 0xC2 && c <= 0xDF) n = cont(1) ? 2 : 0;
    else if (c == 0xE0) n = cont(1, 0xA0) && cont(2) ? 3 : 0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) n = cont(1) && cont(2) ? 3 : 0;
    else if (c == 0xED) n = cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    else if (c == 0xF0) n = cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    else if (c >= 0xF1 && c <= 0xF3) n = cont(1) && cont(2) && cont(3) ? 4 : 0;
    else if (c == 0xF4) n = cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    else n = 0;
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Printable form for messages: invalid UTF-8 and control bytes as \xNN.
inline std::string displayPath(std::string_view s) {
  if (isValidUtf8(s)) {
    bool plain = true;
    for (char c : s)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) plain = false;
    if (plain) return std::string(s);
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  return out;
}

}  // namespace akad::snapshot
