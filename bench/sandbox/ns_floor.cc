// The floor under any namespace sandbox on this kernel: fork, unshare the given namespaces
// (no mounts, cgroup or seccomp), fork once more into a new pid namespace, exec /bin/true.
// Median of RUNS for each namespace alone and for all seven, next to a plain fork+exec.
//
//   ns_floor [RUNS]     (root)

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "timing.h"

namespace {

[[noreturn]] void execTrue() {
  execl("/bin/true", "true", static_cast<char*>(nullptr));
  _exit(127);
}

// One spawn-to-exit; -1 if it failed.
double spawnOnce(int flags) {
  double t0 = bench::now();
  pid_t pid = fork();
  if (pid == 0) {
    if (flags != 0 && unshare(flags) != 0) _exit(126);
    if (!(flags & CLONE_NEWPID)) execTrue();
    pid_t inner = fork();  // the first child of a new pid namespace is its pid 1
    if (inner == 0) execTrue();
    int st = 0;
    waitpid(inner, &st, 0);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return bench::now() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 100;
  struct Case {
    const char* name;
    int flags;
  };
  const int all = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  const Case cases[] = {{"fork+exec, no namespace", 0}, {"user", CLONE_NEWUSER}, {"mount", CLONE_NEWNS},
                        {"net", CLONE_NEWNET},          {"pid", CLONE_NEWPID},   {"ipc", CLONE_NEWIPC},
                        {"uts", CLONE_NEWUTS},          {"cgroup", CLONE_NEWCGROUP}, {"all seven", all}};
  for (const Case& c : cases) {
    spawnOnce(c.flags);  // warm-up
    std::vector<double> t;
    for (int i = 0; i < runs; ++i) {
      double s = spawnOnce(c.flags);
      if (s < 0) {
        std::fprintf(stderr, "%s: unshare or exec failed (run as root)\n", c.name);
        return 1;
      }
      t.push_back(s);
    }
    std::sort(t.begin(), t.end());
    std::printf("%-26s median %.3f ms  (min %.3f)\n", c.name, t[t.size() / 2] * 1e3, t.front() * 1e3);
  }
  return 0;
}
