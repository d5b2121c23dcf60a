#pragma once
// The steps that contain.cc's runSandboxInit lists, shared by the files that hold them:
// release.cc (taking akabox's release and entering what it brings), command.cc (the
// command's own set-up up to its exec) and early_command.cc (the default-off path where the
// command starts before the init's mounts are done). Inside the sandbox's processes: plain
// return codes, and a failed step ends the process through must().

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
// one its mount thread built). `rooted` runs once the init's root is the sandbox's new root;
// only the build calls it.
void setUpMountNamespace(const ContainContext& c, const std::function<void()>& rooted);
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

// Waits for akabox to release the init (or, on the early command's link, for the command's
// copy of that release) and takes what it hands over. With `spin`, it polls for up to a
// millisecond first: the message then arrives without waking this CPU. If `closed` is given,
// a sender that closed its end instead is not an error: *closed says so.
Result<Entry> receiveEntry(int channelFd, bool spin, const char* from = "akabox", bool* closed = nullptr);
// Writes "0" to each cgroup v1 `tasks` file, which moves the writing thread itself.
Status joinCgroup(std::vector<UniqueFd>& tasksFiles);
// Enters the network namespace, the ipc and uts namespaces (naming the host `hostname`) and,
// with `cgroup`, (v1) the cgroup akabox prepared; without, the `tasks` files stay in `e` for
// the command.
Status enterPrepared(Entry& e, const std::string& hostname, bool cgroup);

// --- the command (command.cc) ---

// How the command meets the init when it starts beside the init's mount work
// (early_command.cc); all -1 otherwise.
struct EarlyStart {
  int linkFd = -1;  // the init's words arrive here
  int procFd = -1;  // the host's /proc: the sandbox's is not mounted yet
  bool spin = false;
};

// The sandboxed command, from real root in the new namespaces to its exec.
[[noreturn]] void runCommand(const ContainContext& c, const SeccompPolicy* policy, bool restoreCpus, EarlyStart early);
// The command of an init that shares akabox's memory: on the init's stack, below its frames.
pid_t startSharedCommand(const ContainContext& c, Entry& entry, bool pinned);

// --- the early command (early_command.cc) ---

// The init's whole path when the command starts early (ContainContext::earlyCommand).
[[noreturn]] void runInitWithEarlyCommand(const ContainContext& c);
// The command's wait for the init's next word on their link ('r': rooted, 'm': mounted).
Status waitForInit(int linkFd, char word, bool spin);

}  // namespace akad::box
