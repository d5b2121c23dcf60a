#pragma once
// Where akabox keeps what no sandbox may touch (its compiled filters, mount templates) must be
// a directory that root owns and only root can write; akad checks the template directory it
// hands akabox the same way. Header-only: akabox links nothing else of akacommon.

#include <sys/stat.h>

#include <string>

namespace akad {

// A directory (not a link to one) that root owns and that neither group nor others can write.
inline bool rootOnlyDirectory(const std::string& dir) {
  struct stat st {};
  return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 && (st.st_mode & 022) == 0;
}

}  // namespace akad
