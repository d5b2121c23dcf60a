#pragma once
// Whether a directory akad writes into (its state dir, its socket's directory) is safe from
// local users: nobody but its owner (root, or the user akad runs as) can replace or add entries
// anywhere on the way to it. Otherwise a user could plant a symbolic link where akad creates a
// file, or swap the directory for one of their own, and have root write where they choose.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>

#include "common/result.h"

namespace akad {

// Every component of `dir` must be owned by root or by this process's euid and be writable by
// nobody else; a sticky directory others can write (/tmp) is allowed on the way, not as `dir`
// itself, since no one can rename or remove an entry of it they do not own. `dir` must exist.
namespace detail {

// One component: a directory (or, when `links`, a symbolic link) that root or euid owns and no
// one else can write; a sticky directory that others can write is allowed on the way.
inline Status checkTrustedComponent(const std::filesystem::path& p, bool last, bool links) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return errnoError("cannot stat " + p.string());
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me)
    return Error{p.string() + " belongs to uid " + std::to_string(st.st_uid) + ", not to root" +
                 (me != 0 ? " or uid " + std::to_string(me) : std::string()) +
                 ": another user could put files where akad writes"};
  if (S_ISLNK(st.st_mode)) {
    if (links) return {};
    return Error{p.string() + " is a symbolic link"};
  }
  if (!S_ISDIR(st.st_mode)) return Error{p.string() + " is not a directory"};
  const bool othersWrite = (st.st_mode & 022) != 0;
  if (othersWrite && (last || (st.st_mode & S_ISVTX) == 0)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Error{p.string() + " can be written by users other than its owner (mode " + mode + "): make it 0755 or stricter"};
  }
  return {};
}

inline Status checkTrustedChain(const std::filesystem::path& path, bool links) {
  std::filesystem::path at = "/";
  if (auto s = checkTrustedComponent(at, path == at, links); !s) return s;
  for (const auto& part : path.relative_path()) {
    at /= part;
    if (auto s = checkTrustedComponent(at, at == path, links); !s) return s;
  }
  return {};
}

}  // namespace detail

// The path as given (its links owned by root or euid, so nobody else can re-point them), and
// the real path it leads to.
inline Status checkTrustedDirectory(const std::filesystem::path& dir) {
  const std::filesystem::path given = std::filesystem::absolute(dir).lexically_normal();
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(given, ec);
  if (ec) return Error{"cannot resolve " + dir.string() + ": " + ec.message()};
  if (auto s = detail::checkTrustedChain(given.has_filename() ? given : given.parent_path(), true); !s) return s;
  return detail::checkTrustedChain(real, false);
}

// `dir` made (mode 0700) if it is missing, then checked as above: for a folder of akad's that an
// operator names and akad may have to create (its trusted cache, the Slurm shared area, a node's
// cache or work folder). Its parent must exist.
inline Status makeTrustedDirectory(const std::filesystem::path& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errnoError("cannot create " + dir.string());
  return checkTrustedDirectory(dir);
}

}  // namespace akad
