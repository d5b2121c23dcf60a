#pragma once
// What the spawn benchmarks share: one timed run of a command with stdio on /dev/null, and a
// mount-template directory of the benchmark's own, removed at the end.

#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "timing.h"

namespace bench {

// Runs argv from fork to wait4 with stdio on /dev/null; seconds, or -1 if it did not exit 0.
// With maxRssKb, the largest ru_maxrss seen (the command and its reaped children).
inline double timeSpawn(const std::vector<std::string>& args, long* maxRssKb = nullptr) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const double t0 = now();
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int null = open("/dev/null", O_RDWR);
    if (null < 0) _exit(127);
    for (int fd = 0; fd <= 2; ++fd) dup2(null, fd);
    if (null > 2) close(null);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  if (wait4(pid, &status, 0, &ru) != pid) return -1;
  const double t = now() - t0;
  if (maxRssKb) *maxRssKb = std::max(*maxRssKb, ru.ru_maxrss);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return t;
}

// Kept mount templates go to a directory of the benchmark's own (mkdtemp: root's, mode 0700,
// as akabox wants) unless AKABOX_TEMPLATE_DIR names one; remove() unmounts them with
// `akabox cleanup --templates` and removes the directory if it is ours.
class TemplateDir {
 public:
  explicit TemplateDir(std::string akabox) : akabox_(std::move(akabox)) {
    const char* given = std::getenv("AKABOX_TEMPLATE_DIR");
    if (given && *given) return;
    char dir[] = "/tmp/akabox-bench-XXXXXX";
    if (!mkdtemp(dir)) {
      std::perror("mkdtemp");
      failed_ = true;
      return;
    }
    own_ = dir;
    setenv("AKABOX_TEMPLATE_DIR", dir, 1);
  }
  TemplateDir(const TemplateDir&) = delete;
  TemplateDir& operator=(const TemplateDir&) = delete;
  ~TemplateDir() { remove(); }

  // False if the directory could not be made: the caller stops before any run, since the
  // templates would otherwise go to the default directory, and the cleanup with them.
  bool ok() const { return !failed_; }

  // The cgroup parent is one nobody uses: cleanup would otherwise also kill the default
  // parent's sandboxes.
  void remove() {
    if (removed_ || failed_) return;
    removed_ = true;
    timeSpawn({akabox_, "cleanup", "--cgroup-parent", "akabox-bench-none", "--templates"});
    if (own_.empty()) return;
    unlink((own_ + "/.lock").c_str());  // the builders' lock; nobody else uses this directory
    rmdir(own_.c_str());
  }

 private:
  std::string akabox_;
  std::string own_;
  bool removed_ = false;
  bool failed_ = false;
};

// `akabox run` of /bin/true with full isolation and the default policy, as the benchmarks
// time it.
inline std::vector<std::string> akaboxTrue(const std::string& akabox, bool mountTemplate) {
  std::vector<std::string> a = {akabox, "run"};
  if (mountTemplate) a.push_back("--mount-template");
  for (const char* s : {"--seccomp", "default", "--result", "/dev/null", "--", "/bin/true"}) a.push_back(s);
  return a;
}

}  // namespace bench
