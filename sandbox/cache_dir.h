#pragma once
// akabox's caches under /run/akabox (compiled seccomp filters, kept mount templates): where
// they live and how their entries are named.

#include <cstdint>
#include <string>

namespace akad::box {

// A cache directory is trusted only when root owns it and nobody else can write it. With
// `create`, missing components are made first (mode 0700).
bool trustedCacheDir(const std::string& dir, bool create);

// The 64-bit FNV-1a hash of `text`, as 16 hex digits: cache entry names.
std::string fnv1aHex(const std::string& text);

}  // namespace akad::box
