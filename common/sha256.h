#pragma once

#include <openssl/evp.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/result.h"

namespace akad {

// Incremental SHA-256 (OpenSSL EVP); hexDigest() finishes it.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, std::size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hexDigest();

 private:
  EVP_MD_CTX* ctx_;
};

std::string sha256Hex(std::string_view data);
Result<std::string> sha256File(const std::filesystem::path& path);

}  // namespace akad
