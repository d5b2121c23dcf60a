// The init's side of akabox's release: receiving the EntryMessage
// with its descriptors and filter (init_messages.h), and entering the namespaces and the
// cgroup it brings.

#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/contain_steps.h"
#include "sandbox/fdpass.h"
#include "sandbox/helper_thread.h"

namespace akad::box {

Result<Entry> receiveEntry(int channelFd, bool spin) {
  EntryMessage m;
  std::unique_ptr<char[]> filter(new char[kMaxFilterBytes]);  // not zero-filled: only what arrives is read
  iovec iov[2] = {{&m, sizeof(m)}, {filter.get(), kMaxFilterBytes}};
  RightsBuffer control{};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  msg.msg_control = control.bytes;
  msg.msg_controllen = sizeof(control.bytes);
  ssize_t got = -1;
  int err = EAGAIN;
  for (const double until = spin ? monotonicS() + 0.001 : 0; spin && monotonicS() < until;) {
    got = ::recvmsg(channelFd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (got >= 0) break;
    err = errno;
    if (err != EAGAIN && err != EINTR) break;
  }
  if (got < 0 && (err == EAGAIN || err == EINTR)) {
    do got = ::recvmsg(channelFd, &msg, MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
  }
  if (got < 0) return errnoError("recvmsg(waiting for akabox)");
  if (got < static_cast<ssize_t>(sizeof(m))) return Error{"akabox went away before releasing the sandbox"};
  if (m.drop) ::_exit(0);  // between steps, so no lock of a shared heap is held (init_messages.h)
  std::vector<UniqueFd> fds = takeRights(msg);
  Entry e;
  const size_t expected = static_cast<size_t>(m.hasMountNs + m.hasNsTask + m.hasNetns + 2 * m.hasIpcUts + m.cgroupJoinCount);
  size_t i = 0;
  auto next = [&] { return i < fds.size() ? std::move(fds[i++]) : UniqueFd(); };
  if (m.hasMountNs) e.mountNs = next();
  if (m.hasNsTask) e.ns.task = next();
  if (m.hasNetns) e.ns.net = next();
  if (m.hasIpcUts) {
    e.ns.ipc = next();
    e.ns.uts = next();
  }
  e.ipcUts = m.hasNsTask ? m.nsTaskIpcUts != 0 : m.hasIpcUts != 0;
  while (i < fds.size()) e.cgroupJoin.push_back(next());
  if (fds.size() != expected || (msg.msg_flags & MSG_CTRUNC))
    return Error{std::string("the release message from akabox carries ") + std::to_string(fds.size()) + " descriptors, not " +
                 std::to_string(expected)};
  if ((msg.msg_flags & MSG_TRUNC) || static_cast<size_t>(got) - sizeof(m) != m.policyBytes)
    return Error{std::string("the release message from akabox does not carry the ") + std::to_string(m.policyBytes) +
                 " bytes of its seccomp filter"};
  if (m.policyBytes) {
    e.policy = SeccompPolicy::deserialize(std::string_view(filter.get(), m.policyBytes), "from akabox");
    if (!e.policy) return Error{"the seccomp filter from akabox is malformed"};
  }
  return e;
}

// Writing "0" to a `tasks` file (cgroup v1) moves the writing thread itself, which skips the
// kernel's global migration lock (cgroup.h says why).
Status joinCgroup(std::vector<UniqueFd>& tasksFiles) {
  for (auto& fd : tasksFiles) {
    ssize_t n = ::write(fd.get(), "0", 1);
    int err = errno;
    fd.reset();
    if (n != 1) return errnoError("write 0 to the sandbox cgroup's tasks file", err);
  }
  tasksFiles.clear();
  return {};
}

// Enters the network namespace, the ipc and uts namespaces (naming the host `hostname`) and,
// with `cgroup`, (v1) the cgroup akabox prepared; without, the `tasks` files stay in `e` for
// the command.
Status enterPrepared(Entry& e, const std::string& hostname, bool cgroup) {
  SandboxNamespaces& ns = e.ns;
  if (ns.task.valid()) {
    // All at once, from the task that made them (akabox's namespace thread).
    const int which = CLONE_NEWNET | (e.ipcUts ? CLONE_NEWIPC | CLONE_NEWUTS : 0);
    if (::setns(ns.task.get(), which) != 0)
      return errnoError(e.ipcUts ? "setns(network, ipc and uts namespaces)" : "setns(network namespace)");
  } else {
    if (ns.net.valid() && ::setns(ns.net.get(), CLONE_NEWNET) != 0) return errnoError("setns(network namespace)");
    if (e.ipcUts) {
      if (::setns(ns.ipc.get(), CLONE_NEWIPC) != 0) return errnoError("setns(ipc namespace)");
      if (::setns(ns.uts.get(), CLONE_NEWUTS) != 0) return errnoError("setns(uts namespace)");
    }
  }
  if (e.ipcUts && ::sethostname(hostname.data(), hostname.size()) != 0) return errnoError("sethostname");
  ns = SandboxNamespaces{};
  return cgroup ? joinCgroup(e.cgroupJoin) : Status{};
}

}  // namespace akad::box
