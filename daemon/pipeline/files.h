#pragma once
// Small filesystem steps the pipeline repeats: copying trees it owns, reading files an agent
// or a candidate may have written (always with a size limit), fresh secrets.

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/result.h"

namespace akad {

// Whether a copy keeps its source's modification times: build tools (ninja, make, Python's
// bytecode check) decide by them whether what they built is still current.
enum class FileTimes { Fresh, Kept };

// Copies regular files, directories and symlinks (as links) from src into dst, keeping the
// executable bit (and with FileTimes::Kept the regular files' modification times); dst is
// created. Other file types are skipped. No link is followed, src itself included (a link
// there is refused): trees a sandbox wrote are copied with it, and their links may point
// anywhere.
Status copyTree(const std::filesystem::path& src, const std::filesystem::path& dst, FileTimes times = FileTimes::Fresh);
// One regular file, replacing a file at dst; a link at src (its last name) is refused, not
// followed, as in copyTree.
Status copyFile(const std::filesystem::path& src, const std::filesystem::path& dst, FileTimes times = FileTimes::Fresh);
// Gives `path` the modification time of `from` (to the nanosecond).
Status copyModificationTime(const std::filesystem::path& from, const std::filesystem::path& path);
Status writeFile(const std::filesystem::path& path, const std::string& content);
// Refuses files larger than maxBytes, links and anything but a regular file (a FIFO is refused
// without waiting): whatever a sandbox wrote is hostile until checked.
Result<std::string> readFileLimited(const std::filesystem::path& path, std::size_t maxBytes);
// The last maxBytes of a log, for showing a user why a gate failed (nothing for a link or
// anything but a regular file).
std::string tailOfFile(const std::filesystem::path& path, std::size_t maxBytes);
// Changes the owner of every entry under root (lchown), so a sandbox's unprivileged uid can
// write the workspace and the daemon can read it back.
Status chownTree(const std::filesystem::path& root, uid_t uid, gid_t gid);
uint64_t secureRandom64();
std::string randomHex(std::size_t bytes);

}  // namespace akad
