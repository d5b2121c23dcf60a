#include "daemon/aka/checkout.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/sha256.h"

namespace fs = std::filesystem;

namespace akad::aka {
namespace {

// Small files of .git (HEAD, refs, packed-refs): a checkout is a user's tree, so even these are
// read with a limit.
std::string readSmall(const fs::path& file, std::size_t limit = 1 << 20) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(file, ec))) return {};  // a linked HEAD could name any file
  if (fs::file_size(file, ec) > limit || ec) return {};
  std::ifstream in(file, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

bool isHexId(const std::string& s) {
  if (s.size() != 40 && s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A ref name from HEAD is used as a path under .git: it must not climb out of it.
bool safeRefName(const std::string& ref) {
  if (ref.rfind("refs/", 0) != 0) return false;
  for (const auto& part : fs::path(ref))
    if (part == ".." || part == "." || part.empty()) return false;
  return ref.find('\0') == std::string::npos;
}

}  // namespace

bool isInsideRelativePath(const std::string& path) {
  if (path.empty() || path.front() == '/' || path.find('\0') != std::string::npos) return false;
  for (const auto& part : fs::path(path))
    if (part == ".." || part == ".") return false;
  return true;
}

CheckoutCommit readCheckoutCommit(const fs::path& checkout) {
  CheckoutCommit c;
  std::error_code ec;
  const fs::path dotGit = checkout / ".git";
  fs::path gitDir;
  const auto st = fs::symlink_status(dotGit, ec);
  if (fs::is_directory(st)) {
    gitDir = dotGit;
  } else if (fs::is_regular_file(st)) {
    // A worktree or submodule: ".git" is a file "gitdir: <path>".
    const std::string text = trim(readSmall(dotGit, 4096));
    if (text.rfind("gitdir:", 0) != 0) {
      c.note = "not a git checkout (.git is a file without a gitdir: line)";
      return c;
    }
    gitDir = trim(text.substr(7));
    if (gitDir.is_relative()) gitDir = checkout / gitDir;
  } else {
    c.note = "not a git checkout (no .git in " + checkout.string() + ")";
    return c;
  }
  const std::string head = trim(readSmall(gitDir / "HEAD", 4096));
  if (head.empty()) {
    c.note = "not a git checkout (" + (gitDir / "HEAD").string() + " is missing or empty)";
    return c;
  }
  if (isHexId(head)) {
    c.commit = head;  // detached HEAD
    return c;
  }
  if (head.rfind("ref:", 0) != 0) {
    c.note = "git checkout with an unreadable HEAD";
    return c;
  }
  c.ref = trim(head.substr(4));
  if (!safeRefName(c.ref)) {
    c.note = "git checkout whose HEAD names an unusable ref '" + c.ref + "'";
    c.ref.clear();
    return c;
  }
  // Refs of a linked worktree live in the main repository, which "commondir" names.
  std::vector<fs::path> dirs = {gitDir};
  if (std::string common = trim(readSmall(gitDir / "commondir", 4096)); !common.empty()) {
    fs::path p = common;
    dirs.push_back(p.is_relative() ? gitDir / p : p);
  }
  for (const fs::path& d : dirs) {
    const std::string loose = trim(readSmall(d / c.ref, 4096));
    if (isHexId(loose)) {
      c.commit = loose;
      return c;
    }
  }
  for (const fs::path& d : dirs) {
    std::istringstream packed(readSmall(d / "packed-refs", 64 << 20));
    for (std::string line; std::getline(packed, line);) {
      if (line.empty() || line[0] == '#' || line[0] == '^') continue;
      const auto space = line.find(' ');
      if (space == std::string::npos) continue;
      if (trim(line.substr(space + 1)) == c.ref && isHexId(line.substr(0, space))) {
        c.commit = line.substr(0, space);
        return c;
      }
    }
  }
  c.note = "git checkout whose HEAD names " + c.ref + ", which has no commit yet";
  return c;
}

Result<std::vector<std::string>> discoverTasks(const fs::path& checkout, const std::vector<std::string>& selectors) {
  const fs::path root = checkout / "tasks";
  std::error_code ec;
  if (!fs::is_directory(checkout, ec)) return Error{checkout.string() + " is not a directory"};
  if (!fs::is_directory(root, ec))
    return Error{checkout.string() + " has no tasks/ folder: is it an AgentKernelArena checkout?"};
  std::set<std::string> names;
  for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename() == "config.yaml" && it->is_regular_file(ec) && !it->is_symlink(ec)) {
      const std::string name = it->path().parent_path().lexically_relative(root).generic_string();
      if (name != "." && !name.empty()) names.insert(name);
    }
  }
  if (ec) return Error{"cannot walk " + root.string() + ": " + ec.message()};
  std::vector<std::string> chosen;
  std::vector<bool> used(selectors.size(), false);
  for (const std::string& name : names) {
    bool take = selectors.empty();
    for (std::size_t i = 0; i < selectors.size(); ++i) {
      std::string s = selectors[i];
      while (!s.empty() && s.back() == '/') s.pop_back();
      if (name == s || name.rfind(s + "/", 0) == 0) {
        take = true;
        used[i] = true;
      }
    }
    if (take) chosen.push_back(name);
  }
  for (std::size_t i = 0; i < selectors.size(); ++i)
    if (!used[i]) return Error{"the selector '" + selectors[i] + "' matches no task under " + root.string()};
  if (chosen.empty()) return Error{"no config.yaml under " + root.string()};
  return chosen;
}

namespace {

// Opens `rel` below `root` without following any symlink on the way: the daemon reads a user's
// tree as root, and a folder swapped for a link after the walk saw it could lead anywhere.
int openBeneath(const fs::path& root, const std::string& rel) {
  const int dir = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -1;
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, dir, rel.c_str(), &how, sizeof how));
  if (fd < 0 && errno == ENOSYS)  // kernels before 5.6: the last component at least
    fd = ::openat(dir, rel.c_str(), static_cast<int>(how.flags));
  const int saved = errno;
  ::close(dir);
  errno = saved;
  return fd;
}

}  // namespace

Result<std::string> FileLedger::read(const std::string& rel, std::size_t maxBytes) {
  if (!isInsideRelativePath(rel)) return Error{"'" + rel + "' is not a path inside the checkout"};
  const fs::path file = root_ / rel;
  const int fd = openBeneath(root_, rel);
  if (fd < 0) return errnoError("cannot read " + file.string() + " (symlinks are not followed)");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{file.string() + " is not a regular file"};
  }
  if (static_cast<std::size_t>(st.st_size) > maxBytes) {
    ::close(fd);
    return Error{file.string() + " is larger than " + std::to_string(maxBytes) + " bytes"};
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  for (ssize_t n; got < text.size() && (n = ::read(fd, text.data() + got, text.size() - got)) > 0;)
    got += static_cast<std::size_t>(n);
  ::close(fd);
  text.resize(got);
  hashes_[rel] = sha256Hex(text);
  return text;
}

Result<std::string> FileLedger::hash(const std::string& rel) {
  if (!isInsideRelativePath(rel)) return Error{"'" + rel + "' is not a path inside the checkout"};
  const fs::path file = root_ / rel;
  const int fd = openBeneath(root_, rel);
  if (fd < 0) return errnoError("cannot read " + file.string() + " (symlinks are not followed)");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{file.string() + " is not a regular file"};
  }
  Sha256 h;
  std::string buf(1 << 20, '\0');
  ssize_t n;
  while ((n = ::read(fd, buf.data(), buf.size())) > 0) h.update(buf.data(), static_cast<std::size_t>(n));
  const int readErr = errno;
  ::close(fd);
  if (n < 0) return errnoError("cannot read " + file.string(), readErr);
  return hashes_[rel] = h.hexDigest();
}

}  // namespace akad::aka
