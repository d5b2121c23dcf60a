#pragma once
// Runs the real akabox with the probe and checks afterwards that nothing of the sandbox is
// left: no cgroup under the test's parent, no process in it or carrying the test's marker,
// no mount mentioning the test's directory in the host's mount table.

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sandbox/cgroup.h"

namespace akabox_test {

inline std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The build-time paths, unless $AKABOX_BIN / $AKABOX_PROBE say otherwise (a copied build
// tree on another machine, e.g. the cgroup v2 GPU host).
inline std::string akaboxBin() {
  const char* e = std::getenv("AKABOX_BIN");
  return e && *e ? e : AKABOX_BIN;
}
inline std::string probeBin() {
  const char* e = std::getenv("AKABOX_PROBE");
  return e && *e ? e : AKABOX_PROBE;
}

inline std::string probeDir() {
  std::string p = probeBin();
  return p.substr(0, p.rfind('/'));
}
inline std::string probeName() {
  std::string p = probeBin();
  return p.substr(p.rfind('/') + 1);
}
// The probe as seen inside the sandbox (its build directory is bound at /probes).
inline std::string probe() { return "/probes/" + probeName(); }

// Held by the tests that mount over a host /etc file and count on which template each run
// takes: the same test runs in several modes at once (ctest -j), and one's mount would renew
// the other's template or stack on its mount.
class HostEtcLock {
 public:
  HostEtcLock() : fd_(::open("/tmp/akabox-test-host-etc.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~HostEtcLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  HostEtcLock(const HostEtcLock&) = delete;
  HostEtcLock& operator=(const HostEtcLock&) = delete;

 private:
  int fd_;
};

struct BoxRun {
  int exitStatus = -1;
  nlohmann::json result;
  std::string out, err;
};

inline std::vector<std::string> cgroupParentDirs(const std::string& parent) {
  std::vector<std::string> dirs;
  for (const auto& m : akad::box::cgroupfs::mounts()) dirs.push_back(m.path + "/" + parent);
  return dirs;
}

class BoxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    char tmpl[] = "/tmp/akabox-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    ::chmod(tmp_.c_str(), 0755);
    marker_ = tmp_.substr(5);  // "akabox-test-XXXXXX": unique, in argv of what we start
    parent_ = "akabox-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }

  void TearDown() override {
    if (templateMode()) removeTemplates();
    expectNothingLeft();
    for (const auto& d : cgroupParentDirs(parent_)) ::rmdir(d.c_str());
    std::string cmd = "rm -rf '" + tmp_ + "'";
    (void)!std::system(cmd.c_str());
  }

  // akabox run --cgroup-parent P --result R --stdout O --stderr E --bind probes <args> -- <cmd>
  BoxRun run(const std::vector<std::string>& args, const std::vector<std::string>& cmd, int inheritFd = -1) {
    return finish(start(args, cmd, inheritFd));
  }

  // The same, started without waiting: finish() waits for it and reads what it left.
  pid_t start(const std::vector<std::string>& args, const std::vector<std::string>& cmd, int inheritFd = -1) {
    std::vector<std::string> argv = {akaboxBin(), "run", "--cgroup-parent", parent_, "--result", tmp_ + "/result.json",
                                     "--stdout", tmp_ + "/stdout", "--stderr", tmp_ + "/stderr",
                                     "--bind", probeDir() + ":/probes"};
    if (templateMode()) argv.push_back("--mount-template");
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::unlink((tmp_ + "/result.json").c_str());
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("AKABOX_TEMPLATE_DIR", templateDir().c_str(), 1);
      if (testMode() == "spin") ::setenv("AKABOX_SPIN", "1", 1);
      if (inheritFd >= 0) ::fcntl(inheritFd, F_SETFD, 0);  // deliberately leak it into akabox
      if (inChild_) inChild_();
      ::execv(cargv[0], cargv.data());
      ::_exit(126);
    }
    return pid;
  }

  // Whether the akabox `pid` (from start()) ends within `seconds`; it is left for finish() to
  // reap. If not, it and the processes it started are killed by pid and reaped here.
  bool waitWithin(pid_t pid, double seconds) {
    for (int i = 0; i < static_cast<int>(seconds * 100); ++i) {
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) return true;
      ::usleep(10000);
    }
    std::vector<pid_t> children;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      std::istringstream in(readAll(task.path().string() + "/children"));
      for (pid_t child; in >> child;) children.push_back(child);
    }
    ::kill(pid, SIGKILL);
    for (pid_t child : children) ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return false;
  }

  BoxRun finish(pid_t pid, bool expectResult = true) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    BoxRun r;
    r.exitStatus = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::string text = readAll(tmp_ + "/result.json");
    r.result = nlohmann::json::parse(text, nullptr, false);
    r.out = readAll(tmp_ + "/stdout");
    r.err = readAll(tmp_ + "/stderr");
    if (expectResult) {
      EXPECT_FALSE(r.result.is_discarded()) << "no result JSON; stderr: " << r.err;
    }
    return r;
  }

  // AKABOX_TEST_MOUNT_TEMPLATE=1 (ctest's sandbox_template.*): every run copies a kept mount
  // template instead of building its root, so each guarantee is checked on that path too.
  // AKABOX_TEST_MODE (one variable: ctest's ENVIRONMENT property takes only the first of a
  // list here): "spin" is AKABOX_SPIN=1 without a template (the polled hand-overs of a machine
  // with four CPUs or more, and with them the mount namespace built on akabox's thread,
  // mnt_thread.h).
  static std::string testMode() {
    const char* e = std::getenv("AKABOX_TEST_MODE");
    return e ? e : "";
  }
  static bool templateMode() {
    const char* e = std::getenv("AKABOX_TEST_MOUNT_TEMPLATE");
    return e && std::string(e) == "1";
  }
  // The test's own template directory, so its templates go with it.
  std::string templateDir() const { return tmp_ + "/templates"; }

  // akabox cleanup --templates: afterwards no mount of the test directory may be left.
  int removeTemplates() {
    std::string cmd = "AKABOX_TEMPLATE_DIR='" + templateDir() + "' '" + akaboxBin() + "' cleanup --cgroup-parent '" + parent_ +
                      "' --templates 2>/dev/null";
    return std::system(cmd.c_str());
  }

  // Run in the forked child just before it execs akabox (e.g. to make a step fail on purpose).
  std::function<void()> inChild_;

  static std::string cmdlineOf(const std::string& pid) {
    std::string cmdline = readAll("/proc/" + pid + "/cmdline");
    for (auto& c : cmdline) if (c == '\0') c = ' ';
    return cmdline;
  }

  // "PID COMMAND LINE" of every process in one of this test's sandbox cgroups.
  std::vector<std::string> processesInSandboxCgroups() const {
    std::vector<std::string> found;
    DIR* proc = ::opendir("/proc");
    while (dirent* e = ::readdir(proc)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      if (readAll(std::string("/proc/") + e->d_name + "/cgroup").find("/" + parent_ + "/") != std::string::npos)
        found.push_back(std::string(e->d_name) + " " + cmdlineOf(e->d_name));
    }
    ::closedir(proc);
    return found;
  }

  void expectNothingLeft() {
    for (const auto& d : cgroupParentDirs(parent_)) {
      DIR* dir = ::opendir(d.c_str());
      if (!dir) continue;
      while (dirent* e = ::readdir(dir)) {
        std::string n = e->d_name;
        if (e->d_type == DT_DIR && n != "." && n != "..") ADD_FAILURE() << "cgroup left behind: " << d << "/" << n;
      }
      ::closedir(dir);
    }
    for (const auto& p : processesInSandboxCgroups()) ADD_FAILURE() << "process left in the sandbox cgroup: " << p;
    DIR* proc = ::opendir("/proc");
    while (dirent* e = ::readdir(proc)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::string cmdline = cmdlineOf(e->d_name);
      if (cmdline.find(marker_) != std::string::npos && cmdline.find("rm -rf") == std::string::npos &&
          std::string(e->d_name) != std::to_string(::getpid()))
        ADD_FAILURE() << "process with the test marker left: " << e->d_name << " " << cmdline;
    }
    ::closedir(proc);
    std::string mounts = readAll("/proc/self/mountinfo");
    EXPECT_EQ(mounts.find(tmp_), std::string::npos) << "a mount of the test directory is left in the host namespace";
    EXPECT_EQ(mounts.find("/.oldroot"), std::string::npos);
  }

  std::string tmp_, marker_, parent_;
};

inline bool hasLine(const std::string& out, const std::string& line) {
  std::istringstream in(out);
  std::string l;
  while (std::getline(in, l))
    if (l == line) return true;
  return false;
}

inline std::string value(const std::string& out, const std::string& key) {
  std::istringstream in(out);
  std::string l;
  while (std::getline(in, l))
    if (l.rfind(key + "=", 0) == 0) return l.substr(key.size() + 1);
  return "<missing " + key + ">";
}

}  // namespace akabox_test
