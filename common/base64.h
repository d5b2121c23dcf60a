#pragma once
// Base64 (RFC 4648, standard alphabet, padded) for binary data carried in JSON: the snapshot
// export's chunks. One implementation for the daemon and the CLI, on OpenSSL's EVP codec.

#include <string>
#include <string_view>

#include "common/result.h"

namespace akad {

std::string base64Encode(std::string_view bytes);

// Strict: the length is a multiple of 4, only the alphabet and up to two '=' at the very end;
// no whitespace. Anything else is an error (a chunk damaged on the way is refused, not
// decoded into other bytes).
Result<std::string> base64Decode(std::string_view text);

}  // namespace akad
