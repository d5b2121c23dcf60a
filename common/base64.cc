#include "common/base64.h"

#include <openssl/evp.h>

#include <algorithm>
#include <climits>

namespace akad {
namespace {

bool inAlphabet(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

}  // namespace

std::string base64Encode(std::string_view bytes) {
  std::string out;
  // EVP_EncodeBlock takes an int length: encode in pieces of a multiple of 3 bytes, so that
  // only the last piece is padded.
  constexpr size_t kPiece = size_t{3} << 20;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t at = 0; at < bytes.size(); at += kPiece) {
    const size_t n = std::min(kPiece, bytes.size() - at);
    const size_t was = out.size();
    out.resize(was + (n + 2) / 3 * 4 + 1);  // EVP_EncodeBlock writes a NUL after the text
    const int wrote = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + was),
                                      reinterpret_cast<const unsigned char*>(bytes.data() + at), static_cast<int>(n));
    out.resize(was + static_cast<size_t>(wrote));
  }
  return out;
}

Result<std::string> base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return Error{"base64: length " + std::to_string(text.size()) + " is not a multiple of 4"};
  if (text.size() > static_cast<size_t>(INT_MAX)) return Error{"base64: text too long"};
  size_t padding = 0;
  if (!text.empty() && text.back() == '=') padding = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  for (size_t i = 0; i < text.size() - padding; ++i)
    if (!inAlphabet(text[i])) return Error{"base64: invalid character at offset " + std::to_string(i)};
  std::string out(text.size() / 4 * 3, '\0');
  if (text.empty()) return out;
  // EVP_DecodeBlock decodes whole groups and counts the padding's zero bytes too.
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0 || static_cast<size_t>(n) != out.size()) return Error{"base64: cannot decode"};
  out.resize(out.size() - padding);
  return out;
}

}  // namespace akad
