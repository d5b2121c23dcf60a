#include "daemon/pipeline/workspace_fs.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/log.h"

namespace fs = std::filesystem;

namespace akad {

Result<Workspace> Workspace::create(const fs::path& dir, const WorkspaceLimits& limits, uid_t uid, gid_t gid) {
  if (::mkdir(dir.c_str(), 0700) != 0) return errnoError("cannot create the workspace " + dir.string());
  Workspace ws(dir, false);
  if (limits.bytes > 0) {
    const std::string options = "size=" + std::to_string(limits.bytes) +
                                (limits.inodes > 0 ? ",nr_inodes=" + std::to_string(limits.inodes) : "") +
                                ",mode=0700,uid=" + std::to_string(uid) + ",gid=" + std::to_string(gid);
    if (::mount("akad-workspace", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0)
      return errnoError("cannot mount the workspace's file system on " + dir.string() + " (" + options + ")");
    ws.mounted_ = true;
  } else if (uid != 0 && ::chown(dir.c_str(), uid, gid) != 0) {
    return errnoError("cannot give the workspace " + dir.string() + " to uid " + std::to_string(uid));
  }
  return ws;
}

void Workspace::remove() {
  if (!dir_) return;
  if (mounted_ && ::umount2(dir_->c_str(), MNT_DETACH) != 0)
    log::warn("cannot unmount the workspace ", dir_->string(), ": ", std::strerror(errno));
  mounted_ = false;
  std::error_code ec;
  fs::remove_all(*dir_, ec);
  if (ec) log::warn("cannot remove the workspace ", dir_->string(), ": ", ec.message());
  dir_.reset();
}

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescapeMountPath(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

int unmountEverythingUnder(const fs::path& root) {
  const std::string prefix = root.lexically_normal().string();
  std::vector<std::string> points;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, mroot, point;
    fields >> id >> parent >> dev >> mroot >> point;
    point = unescapeMountPath(point);
    if (point == prefix || point.rfind(prefix + "/", 0) == 0) points.push_back(point);
  }
  // Deepest first: a mount on top of another goes before the one below it.
  std::sort(points.begin(), points.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  int n = 0;
  for (const std::string& p : points)
    if (::umount2(p.c_str(), MNT_DETACH) == 0) ++n;
    else log::warn("cannot unmount ", p, ": ", std::strerror(errno));
  return n;
}

}  // namespace akad
