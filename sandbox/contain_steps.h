#pragma once
// The steps that contain.cc's runSandboxInit lists, shared by the files that hold them:
// release.cc (taking akabox's release and entering what it brings) and command.cc (the
// command's own set-up up to its exec). Inside the sandbox's processes: plain return codes,
// and a failed step ends the process through must().

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/contain.h"
#include "sandbox/init_messages.h"
#include "sandbox/ns_thread.h"
#include "sandbox/seccomp.h"

namespace akad::box {

// --- reporting (contain.cc) ---

// One ReportMessage to akabox.
void report(int fd, ReportMessage::Kind kind, int value, const std::string& text);
// A failed step ends the sandbox here; akabox reports the message as setup-failed.
void must(const ContainContext& c, const Status& st, const char* step);
inline Status sysOk(int rc, const std::string& what) { return rc == 0 ? Status{} : errnoError(what); }
// Writes `text` into one of the process's own /proc files.
Status writeOwnFile(const char* path, const char* text);

// --- the init's steps used on both paths (contain.cc) ---

// Every signal disposition back to the default (the command inherits them).
void defaultSignalDispositions();
// The mount namespace: built here, or the one akabox hands over (a template's copy, or the
// one its mount thread built).
void setUpMountNamespace(const ContainContext& c);
// Reaps everything until the command exits, reports how it ended, and exits.
[[noreturn]] void reapUntilCommandExits(const ContainContext& c, pid_t cmd);

// --- the release (release.cc) ---

// What akabox prepared while the init started (an EntryMessage's descriptors and filter).
struct Entry {
  UniqueFd mountNs;
  SandboxNamespaces ns;
  bool ipcUts = false;  // ns brings the ipc and uts namespaces too
  std::vector<UniqueFd> cgroupJoin;
  std::unique_ptr<SeccompPolicy> policy;  // null: no filter
};

// Waits for akabox to release the init and takes what it hands over. With `spin`, it polls
// for up to a millisecond first: the message then arrives without waking this CPU.
Result<Entry> receiveEntry(int channelFd, bool spin);
// Writes "0" to each cgroup v1 `tasks` file, which moves the writing thread itself.
Status joinCgroup(std::vector<UniqueFd>& tasksFiles);
// Enters the network namespace, the ipc and uts namespaces (naming the host `hostname`) and,
// with `cgroup`, (v1) the cgroup akabox prepared; without, the `tasks` files stay in `e` for
// the command.
Status enterPrepared(Entry& e, const std::string& hostname, bool cgroup);

// --- the command (command.cc) ---

// The sandboxed command, from real root in the new namespaces to its exec.
[[noreturn]] void runCommand(const ContainContext& c, const SeccompPolicy* policy, bool restoreCpus);
// The command of an init that shares akabox's memory: on the init's stack, below its frames.
pid_t startSharedCommand(const ContainContext& c, Entry& entry, bool pinned);

}  // namespace akad::box
