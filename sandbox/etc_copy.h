#pragma once
// The sandbox root's /etc: the small files programs need to run, resolve names and find
// libraries, copied from the host's /etc (a mount costs at set-up and again at tear-down, these
// few KiB do not), and passwd and group for the sandbox's user. mnt.cc binds the rest.

#include <atomic>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/spec.h"

namespace akad::box {

// /etc's files, from the host's /etc (`src`) into the root's (`dst`): the small ones copied
// (ld.so.conf.d's too; a large one's path goes to `toBind`), and passwd and group for the
// sandbox's user.
// Copies that run side by side share `next`: each takes the next entry in turn (passwd and
// group are the last two), so they end about together whatever the host's /etc holds.
Status copyEtc(const SandboxSpec& spec, int src, int dst, std::vector<std::string>& toBind, std::atomic<size_t>& next);
// The host paths copyEtc copies (/etc/hosts, ...).
std::vector<std::string> etcCopiedPaths();

// copyEtc on two threads of their own, which take entries in turn, beside the rest of the
// build on akabox's mount thread (mnt_thread.h). Started before the pivot, they copy from the
// host's /etc into the new root's through descriptors of both, so the pivot does not move
// their paths; they share the mount thread's descriptor table (pthread_create's CLONE_FILES).
// finish() waits for them; so does the destructor, so that they never outlive what they read.
class EtcCopy {
 public:
  explicit EtcCopy(const SandboxSpec& spec) : spec_(spec) {}
  ~EtcCopy() { (void)finish(); }
  EtcCopy(const EtcCopy&) = delete;
  EtcCopy& operator=(const EtcCopy&) = delete;

  // From `src` (the host's /etc) into `dst` (the root's); a part whose thread does not start
  // is copied here.
  Status start(UniqueFd src, UniqueFd dst);
  // The copy's outcome (the first part's failure, if any); the paths left to bind are in
  // toBind().
  Status finish();
  std::vector<std::string> toBind() const;

 private:
  static constexpr int kParts = 2;
  struct Part {
    EtcCopy* self = nullptr;
    bool started = false;
    Status result;
    std::vector<std::string> toBind;
    alignas(4) int done = 0;
  };
  static void* run(void* arg);
  const SandboxSpec& spec_;
  UniqueFd src_, dst_;
  std::atomic<size_t> next_{0};  // copyEtc's next entry, shared by the parts
  Part parts_[kParts];
};

}  // namespace akad::box
