#include "common/sha256.h"

#include <fcntl.h>
#include <unistd.h>

#include <stdexcept>

#include "common/unique_fd.h"

namespace akad {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("cannot initialise SHA-256 (OpenSSL)");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(const void* data, std::size_t size) { EVP_DigestUpdate(ctx_, data, size); }

std::string Sha256::hexDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_, md, &len);
  static const char* hex = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 0xf];
  }
  return out;
}

std::string sha256Hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hexDigest();
}

Result<std::string> sha256File(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errnoError("cannot open " + path.string());
  Sha256 h;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errnoError("cannot read " + path.string());
    }
    if (n == 0) break;
    h.update(buf, static_cast<std::size_t>(n));
  }
  return h.hexDigest();
}

}  // namespace akad
