#include "sandbox/run.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/unique_fd.h"
#include "sandbox/cgroup.h"
#include "sandbox/cpu.h"
#include "sandbox/mnt_template.h"
#include "sandbox/mnt_thread.h"
#include "sandbox/ns_thread.h"
#include "sandbox/seccomp.h"
#include "sandbox/subproc.h"

namespace akad::box {
namespace {

// A sandbox started with a closed stdout would get its pipes at fd 1 and 2; keep 0-2 taken.
void ensureStdFds() {
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", O_RDWR);
}

SandboxStatus decideStatus(const SandboxExit& ex, bool oomKilled) {
  if (ex.setupError) return SandboxStatus::SetupFailed;
  switch (ex.killedFor) {
    case KillReason::WallTime: return SandboxStatus::WallTimeout;
    case KillReason::CpuTime: return SandboxStatus::CpuTimeout;
    case KillReason::OutputLimit: return SandboxStatus::OutputLimit;
    case KillReason::Cancelled:
    case KillReason::None: break;
  }
  if (ex.commandSignaled && ex.signal == SIGXFSZ) return SandboxStatus::OutputLimit;
  if (ex.commandSignaled && ex.signal == SIGXCPU) return SandboxStatus::CpuTimeout;
  if (oomKilled) return SandboxStatus::Oom;
  return ex.commandSignaled ? SandboxStatus::Signaled : SandboxStatus::Exited;
}

// What akabox prepares after clone3, while its thread makes the network namespace and the
// init builds its mount namespace (without a template) or copies the template (with one,
// handed over first): the cores work in parallel. That is the mount template's descriptor,
// the cgroup (v1: from detection on, with its `tasks` files opened; v2: the directory had to
// exist before clone3), the seccomp policy and at last the network namespace. The limits
// come after the release (runSandbox).
Result<SandboxEntry> prepareEntry(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices,
                                  std::optional<CgroupVersion>& version, const CgroupLimits& limits,
                                  std::unique_ptr<SandboxCgroup>& cgroup, std::unique_ptr<SeccompPolicy>& policy,
                                  SandboxInit& init, NamespaceThread& netns, MountNamespaceThread& mountThread,
                                  bool lastTemplate, bool& staleTemplate) {
  // The template this layout used last, at once, and the check that it is still current
  // below, before the release; or the checked one, built first if need be.
  LastMountTemplate last = spec.mountTemplate && lastTemplate ? openLastMountTemplate(spec, devices) : LastMountTemplate{};
  const bool toCheck = last.fd.valid();
  SandboxEntry entry;
  if (spec.mountTemplate) {
    UniqueFd fd = std::move(last.fd);
    if (!toCheck) {
      auto t = openMountTemplate(spec, devices);
      if (!t) return t.error();
      fd = std::move(*t);
    }
    if (auto st = init.handMountNamespace(std::move(fd)); !st) return st.error();
  }
  std::vector<cgroupfs::Mount> mounts;
  if (!version) {
    auto v = detectCgroupVersion(spec.cgroupBackend, &mounts);
    if (!v) return v.error();
    version = *v;
  }
  const std::string what = "cgroup " + std::string(cgroupVersionName(*version)) + ": ";
  if (!cgroup) {
    auto made = createSandboxCgroupDirs(*version, spec.cgroupParent, limits, std::move(mounts));
    if (!made) return Error{what + made.error().message};
    cgroup = std::move(*made);
  }
  auto loaded = loadSeccompPolicy(spec.seccomp);
  if (!loaded) return loaded.error();
  policy = std::move(*loaded);
  entry.policy = policy.get();
  for (const auto& f : cgroup->selfJoinFiles()) {
    UniqueFd fd(::open(f.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd.valid()) return Error{what + errnoError("cannot open '" + f + "'").message};
    entry.cgroupJoin.push_back(std::move(fd));
  }
  // Without a template, the mount thread's namespace, as soon as akabox's own share is done
  // (the thread started before clone3) and the namespace can be entered; its build ends
  // beside the init's entry and the command's set-up, before the go signal (runOnce).
  if (mountThread.running()) {
    auto ns = mountThread.take(spinningPays());
    if (!ns) return ns.error();
    if (auto st = init.handMountNamespace(std::move(*ns)); !st) return st.error();
  }
  // The template taken at once must be the current one, checked while the thread may still
  // be at the namespaces. If not, the attempt is dropped: runOnce tells the init to exit and
  // reaps it, and the cgroup is removed on the way out.
  if (toCheck && !mountTemplateCurrent(spec, last)) {
    staleTemplate = true;
    return Error{"the mount template taken first is stale"};
  }
  if (spec.net == NetMode::None) {
    auto ns = netns.take(spinningPays());
    if (!ns) return ns.error();
    entry.ns = std::move(*ns);  // release() leaves ipc and uts out if the init makes its own
  }
  return entry;
}

// The cgroup's limits from the spec, and the devices the sandbox gets (each allowed in the
// device cgroup).
Status limitsAndDevices(const SandboxSpec& spec, CgroupLimits& limits, std::vector<DevicePassthrough>& devices) {
  limits.memoryBytes = spec.memoryBytes;
  limits.pids = spec.pids;
  limits.cpus = spec.cpus;
  // Without a limit that kills, the command and its children end normally and wait4's rusage
  // is exact; only then is the extra v1 hierarchy skipped.
  limits.cpuAccounting = spec.cpuTimeS > 0 || spec.wallTimeS > 0 || spec.memoryBytes > 0 || spec.outputLimitBytes > 0;
  limits.allowedDevices = standardDeviceRules();
  for (const auto& path : spec.devices) {
    auto d = resolveDevice(path);
    if (!d) return d.error();
    limits.allowedDevices.push_back(d->rule);
    devices.push_back(*d);
  }
  return {};
}

// v2 starts the init inside its cgroup (clone3's CLONE_INTO_CGROUP), so on a v2 host the
// version is settled before clone3. Elsewhere detection (which reads the mount table) waits
// until the init is running: none yet.
Result<std::optional<CgroupVersion>> cgroupVersionBeforeClone(const SandboxSpec& spec) {
  if (spec.cgroupBackend == CgroupBackendChoice::V2 || (spec.cgroupBackend == CgroupBackendChoice::Auto && cgroupV2Unified())) {
    auto v = detectCgroupVersion(spec.cgroupBackend);
    if (!v) return v.error();
    return std::optional<CgroupVersion>(*v);
  }
  return std::optional<CgroupVersion>();
}

// The command's stdin, opened here, not in the sandbox: the command sets itself up while
// akabox writes the cgroup's limits, and a v1 device list passes through "deny all" on the way.
Result<UniqueFd> openStdin(const SandboxSpec& spec) {
  const std::string stdinPath = spec.stdinPath.empty() ? "/dev/null" : spec.stdinPath;
  UniqueFd stdinFile(::open(stdinPath.c_str(), O_RDONLY | O_CLOEXEC));
  if (!stdinFile.valid()) return errnoError("cannot open stdin file '" + stdinPath + "'");
  return stdinFile;
}

// From the release to the go signal: the init enters what prepareEntry made, the limits are
// written while it does (they bind the command, which execs only after go()), and the go
// waits for lo (the namespace thread) and for the end of the mount thread's build (the host's
// tree detached and the root read-only, mnt_thread.h).
Status releaseAndGo(SandboxInit& init, SandboxEntry entry, SandboxCgroup& cgroup, const CgroupLimits& limits,
                    CgroupVersion version, NamespaceThread& netns, MountNamespaceThread& mountThread) {
  if (auto st = init.release(std::move(entry)); !st) return st;
  if (auto st = cgroup.applyLimits(limits); !st)
    return Error{"cgroup " + std::string(cgroupVersionName(version)) + ": " + st.error().message};
  if (auto st = netns.loopbackUp(spinningPays()); !st) return st;
  if (auto st = mountThread.finish(spinningPays()); !st) return st;
  return init.go();
}

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6; }

// The command's end, its times and memory, and its seccomp violations into `r`.
void describeExit(SandboxResult& r, const SandboxExit& ex, const CgroupUsage& usage, const SeccompPolicy* policy) {
  r.oomKilled = usage.oomKills > 0;
  r.status = decideStatus(ex, r.oomKilled);
  r.wallS = ex.wallS;
  r.userS = seconds(ex.usage.ru_utime);
  r.sysS = seconds(ex.usage.ru_stime);
  r.cpuS = r.userS + r.sysS;
  if (usage.cpuNs && *usage.cpuNs / 1e9 > r.cpuS) {
    // Processes killed with the sandbox never reach wait4; the cgroup saw them all.
    r.cpuS = static_cast<double>(*usage.cpuNs) / 1e9;
    if (usage.userNs && usage.sysNs) {
      r.userS = static_cast<double>(*usage.userNs) / 1e9;
      r.sysS = static_cast<double>(*usage.sysNs) / 1e9;
    }
  }
  r.peakMemoryBytes = usage.peakMemoryBytes.value_or(static_cast<uint64_t>(ex.usage.ru_maxrss) * 1024);
  r.pidsPeak = usage.pidsPeak;
  for (const auto& n : ex.violations.names()) r.seccompViolations.push_back(n);
  if (ex.commandSignaled && ex.signal == SIGSYS && policy)
    r.seccompViolations.push_back("SIGSYS (killed by a seccomp kill/trap action; syscall unknown)");
  if (ex.setupError) {
    r.message = *ex.setupError;
    r.exitStatus = ex.setupExitCode;
  } else {
    if (ex.commandExited) r.exitCode = ex.exitCode;
    if (ex.commandSignaled) r.signal = ex.signal;
    r.exitStatus = ex.commandExited ? ex.exitCode : 128 + ex.signal;
    if (ex.killedFor == KillReason::Cancelled)
      r.message = "akabox was stopped by signal " + std::to_string(ex.cancelSignal) + "; the sandbox was killed";
  }
}

// The result once the init is reaped: the output's counts, the cgroup's accounting (read
// before the cgroup is removed) and the exit; a failed clean-up is part of the message.
SandboxResult resultOf(const Result<SandboxExit>& ex, SandboxCgroup& cgroup, CgroupVersion version, const SeccompPolicy* policy,
                       const OutputCapture& output) {
  SandboxResult r;
  r.cgroupBackend = cgroupVersionName(version);
  r.seccompViolationsReported = policy && policy->reportsViolations();
  r.stdoutBytes = output.stdoutBytes();
  r.stderrBytes = output.stderrBytes();
  r.truncated = output.truncated();
  CgroupUsage usage = cgroup.usage();
  Status removed = cgroup.remove();
  if (!ex) {
    r = setupFailure(ex.error().message);
    r.cgroupBackend = cgroupVersionName(version);
    if (!removed) r.message += "; clean-up: " + removed.error().message;
    return r;
  }
  describeExit(r, *ex, usage, policy);
  if (!removed) {
    r.message += (r.message.empty() ? "" : "; ") + std::string("clean-up: ") + removed.error().message;
    if (r.status != SandboxStatus::SetupFailed) r.exitStatus = 125;
  }
  return r;
}

// How long a dropped attempt's init may take to reach its release and exit.
constexpr double kDropTimeoutS = 10;

// One attempt of runSandbox, after its checks; nothing (and nothing left behind) if the mount
// template it took first turned out stale, which only an attempt with `lastTemplate` does.
// akabox's side of the set-up in order; the init's is contain.cc's runSandboxInit.
std::optional<SandboxResult> runOnce(const SandboxSpec& spec, NamespaceThread& netns, InitLender* lender, bool lastTemplate) {
  auto ids = outsideIds(spec);
  if (!ids) return setupFailure(ids.error().message);
  CgroupLimits limits;
  std::vector<DevicePassthrough> devices;
  if (auto st = limitsAndDevices(spec, limits, devices); !st) return setupFailure(st.error().message);
  // Without a template the mount namespace is built on a thread from here on (mnt_thread.h),
  // beside the rest of akabox's set-up, clone3 and the init's start.
  MountNamespaceThread mountThread;
  if (mountNamespaceOnThread(spec))
    if (auto st = mountThread.start(spec, devices); !st) return setupFailure(st.error().message);
  // The init makes its own ipc and uts namespaces while it waits for the mount thread's.
  netns.withIpcAndUts(!mountThread.running());
  auto settled = cgroupVersionBeforeClone(spec);
  if (!settled) return setupFailure(settled.error().message);
  std::optional<CgroupVersion> version = *settled;
  auto failedAfterStart = [&](const std::string& message) {
    SandboxResult r = setupFailure(message);
    if (version) r.cgroupBackend = cgroupVersionName(*version);
    return r;
  };
  OutputCapture output(spec.outputLimitBytes);
  if (auto st = output.open(spec.stdoutPath, spec.stderrPath); !st) return setupFailure(st.error().message);
  auto stdinFile = openStdin(spec);
  if (!stdinFile) return setupFailure(stdinFile.error().message);
  // v1's init joins its cgroup later, so v1 creates its directories in parallel with the
  // init's set-up.
  std::unique_ptr<SandboxCgroup> cgroup;
  if (version == CgroupVersion::V2) {
    auto made = createSandboxCgroupDirs(*version, spec.cgroupParent, limits);
    if (!made) return setupFailure("cgroup v2: " + made.error().message);
    cgroup = std::move(*made);
  }

  std::unique_ptr<SeccompPolicy> policy;  // loaded while the init starts; outlives it
  SpawnRequest req;
  req.spec = &spec;
  req.output = &output;
  req.outsideUid = ids->first;
  req.outsideGid = ids->second;
  req.devices = devices;
  req.stdinFd = stdinFile->get();
  req.cloneIntoCgroupFd = cgroup ? cgroup->cloneIntoFd() : -1;
  req.ipcUtsFromThread = spec.net == NetMode::None && netns.running() && !mountThread.running();
  req.namespaceThread = spec.net == NetMode::None && netns.running() ? &netns : nullptr;
  req.mountNsFromThread = mountThread.running();
  req.lender = lender;
  // Declared after the cgroup: on a failure the init is killed and reaped before the cgroup
  // is removed.
  auto init = SandboxInit::start(req);
  if (!init) return failedAfterStart(init.error().message);

  // The init is making its namespaces now; prepare what it enters next.
  bool staleTemplate = false;
  auto entry = prepareEntry(spec, devices, version, limits, cgroup, policy, **init, netns, mountThread, lastTemplate, staleTemplate);
  if (!entry && staleTemplate) {
    // The init is told to go and waited for, not killed (init_messages.h's `drop`); then the
    // next attempt may build the current template (a fork).
    if ((*init)->drop(kDropTimeoutS)) return std::nullopt;
    return failedAfterStart("the mount template taken first is stale, and the sandbox's init did not end when told to");
  }
  if (!entry) return failedAfterStart(entry.error().message);
  if (auto st = releaseAndGo(**init, std::move(*entry), *cgroup, limits, *version, netns, mountThread); !st)
    return failedAfterStart(st.error().message);
  cgroup->prepareUsage();  // beside the init: the end of the run has only reads left
  auto ex = (*init)->supervise(*cgroup);
  init->reset();
  netns.finish();  // if it got no last job (no listener: the init's exit dropped the mounts)
  return resultOf(ex, *cgroup, *version, policy.get(), output);
}

}  // namespace

bool networkNamespaceEarly(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "run") != 0) return false;
  for (int i = 2; i < argc && std::strcmp(argv[i], "--") != 0; ++i)
    if (std::strncmp(argv[i], "--net", 5) == 0 || std::strncmp(argv[i], "--spec", 6) == 0) return false;
  return true;
}

SandboxResult runSandbox(const SandboxSpec& spec, EarlyThreads early) {
  ensureStdFds();
  ::signal(SIGPIPE, SIG_IGN);
  // A caller that ignores SIGCHLD hands that on through exec, and the kernel would then reap
  // the init by itself: wait4 would find no child and the command's status would be lost.
  ::signal(SIGCHLD, SIG_DFL);
  if (::geteuid() != 0) return setupFailure("akabox must run as root (it creates cgroups and mounts); run it through akad or sudo");
  if (spec.resultFd >= 0 && ::fcntl(spec.resultFd, F_GETFD) < 0)
    return setupFailure("--result-fd " + std::to_string(spec.resultFd) + " is not an open file descriptor");

  // First, so that it runs beside everything else (ns_thread.h), unless main() started it already.
  NamespaceThread own;
  NamespaceThread* earlyNet = early.netns;
  NamespaceThread& netns = earlyNet && earlyNet->running() && spec.net == NetMode::None ? *earlyNet : own;
  if (earlyNet && &netns != earlyNet) earlyNet->finish();  // started for nothing: the spec has another network
  if (spec.net == NetMode::None && !netns.running())
    if (auto st = netns.start(); !st) return setupFailure(st.error().message);

  // With a mount template, the first attempt takes the template its layout used last and
  // checks it while the namespace thread works; if the host changed meanwhile (rare: a mount
  // over a path the root takes from it, a changed /etc file), that attempt is dropped before
  // the init is released, and the second builds or takes the current one.
  // The thread main() started to lend the init its state serves one attempt, if it is ready
  // by then (InitLender); the other starts its own.
  if (auto r = runOnce(spec, netns, early.lender, true)) return *r;
  return *runOnce(spec, netns, early.lender, false);
}

Status deliverResult(const SandboxSpec& spec, const SandboxResult& result) {
  std::string text = resultToJson(result).dump() + "\n";
  auto writeAll = [&](int fd) -> Status {
    size_t off = 0;
    while (off < text.size()) {
      ssize_t n = ::write(fd, text.data() + off, text.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errnoError("cannot write the result");
      }
      off += static_cast<size_t>(n);
    }
    return {};
  };
  if (spec.resultFd >= 0) return writeAll(spec.resultFd);
  if (!spec.resultPath.empty()) {
    UniqueFd fd(::open(spec.resultPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.valid()) return errnoError("cannot open result file '" + spec.resultPath + "'");
    return writeAll(fd.get());
  }
  std::string line = resultSummary(result) + "\n";
  (void)!::write(2, line.data(), line.size());
  return {};
}

Result<int> cleanupLeftovers(const std::string& parent, CgroupBackendChoice backend) {
  auto version = detectCgroupVersion(backend);
  if (!version) return version.error();
  return cleanupCgroupParent(*version, parent);
}

}  // namespace akad::box
