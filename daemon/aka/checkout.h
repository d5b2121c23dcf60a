#pragma once
// An AgentKernelArena checkout as akad reads it (docs/aka.md): where its tasks are, which
// commit it is at, and the hash of every file akad read from it. Read with plain file reads:
// no git program is needed, and nothing in the checkout is ever written.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace akad::aka {

// The checkout's HEAD, read from .git without git: a commit id, or a note saying why there is
// none ("not a git checkout", "HEAD names refs/heads/x, which is not in the repository").
struct CheckoutCommit {
  std::string commit;  // 40 (or 64) hex digits; empty when unknown
  std::string ref;     // "refs/heads/main", empty when HEAD is detached
  std::string note;    // why `commit` is empty
  bool known() const { return !commit.empty(); }
};
CheckoutCommit readCheckoutCommit(const std::filesystem::path& checkout);

// The tasks of a checkout as AKA's src/tasks.py finds them: every config.yaml anywhere under
// <checkout>/tasks names a task, the folder holding it, by its path relative to tasks/
// ("triton2triton/vllm/triton_rms_norm"). Symlinked folders are not followed. A selector is a
// path prefix by whole components ("triton2triton", "hip2hip/gpumode"), as AKA's category
// filter; every selector must match a task, else the error names it.
Result<std::vector<std::string>> discoverTasks(const std::filesystem::path& checkout,
                                               const std::vector<std::string>& selectors);

// Reads files of the checkout and remembers the SHA-256 of each (relative path -> hex), so an
// import can say exactly which bytes it was made from.
class FileLedger {
 public:
  explicit FileLedger(std::filesystem::path checkout) : root_(std::move(checkout)) {}
  const std::filesystem::path& root() const { return root_; }
  // `rel` is relative to the checkout. Only regular files (a symlink is refused), at most
  // maxBytes; the error names the path.
  Result<std::string> read(const std::string& rel, std::size_t maxBytes);
  // Hashes a file without keeping its bytes (for files copied but not parsed).
  Result<std::string> hash(const std::string& rel);
  const std::map<std::string, std::string>& hashes() const { return hashes_; }

 private:
  std::filesystem::path root_;
  std::map<std::string, std::string> hashes_;
};

// A relative path that stays inside its folder: not empty, not absolute, no "." or "..".
bool isInsideRelativePath(const std::string& path);

}  // namespace akad::aka
