#include "sandbox/cache_dir.h"

#include <sys/stat.h>

#include <cstdio>

#include "common/root_only_dir.h"

namespace akad::box {

bool trustedCacheDir(const std::string& dir, bool create) {
  if (rootOnlyDirectory(dir)) return true;  // the usual case, without a mkdir per component
  if (!create) return false;
  for (size_t pos = 1; pos <= dir.size(); ++pos)
    if (pos == dir.size() || dir[pos] == '/') ::mkdir(dir.substr(0, pos).c_str(), 0700);
  return rootOnlyDirectory(dir);
}

std::string fnv1aHex(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

}  // namespace akad::box
