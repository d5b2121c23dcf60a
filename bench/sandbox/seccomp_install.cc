// What installing the sandbox's seccomp filter costs, in a fresh process each time (as in a
// sandbox: the first filter of a new process), next to two filters built here that separate
// the kernel's share of the work:
//   - the policy: akabox's compiled default (or the named) policy, installed as the sandbox
//     installs it (with its notification listener when it reports violations);
//   - "same length, short paths": as many instructions, but the second one jumps straight to
//     "allow". The kernel still checks, converts and JIT-compiles every instruction, while its
//     per-syscall cache (it runs the filter once per syscall number at install time) costs
//     almost nothing;
//   - "two instructions": load the syscall number and allow: what any filter costs.
// Median, 10th and 90th percentiles of RUNS installs each, interleaved.
//
//   akabox_seccomp_install [RUNS] [POLICY]     (default 200, "default")

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sandbox/seccomp.h"
#include "timing.h"

namespace {

// A filter of `length` instructions whose every path is two instructions long.
std::vector<sock_filter> shortPaths(size_t length) {
  std::vector<sock_filter> f;
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  if (length > 2) f.push_back(BPF_JUMP(BPF_JMP | BPF_JA, static_cast<unsigned>(length - 3), 0, 0));
  while (f.size() + 1 < length) f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 100000 + static_cast<unsigned>(f.size()), 0, 0));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  return f;
}

struct Case {
  std::string name;
  const akad::box::SeccompPolicy* policy = nullptr;  // or:
  std::vector<sock_filter> raw;
  std::vector<double> seconds;
};

// One install in a new child; the child writes its time into `shared`. -1 if it failed.
double installOnce(const Case& c, volatile double* shared) {
  *shared = -1;
  pid_t pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(1);
    double t0 = bench::now();
    int rc;
    if (c.policy) {
      int listener = -1;
      rc = c.policy->install(&listener);
    } else {
      sock_fprog prog{static_cast<unsigned short>(c.raw.size()), const_cast<sock_filter*>(c.raw.data())};
      rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : errno;
    }
    double t1 = bench::now();
    if (rc == 0) *shared = t1 - t0;
    _exit(rc == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return *shared;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 200;
  const std::string which = argc > 2 ? argv[2] : "default";
  auto loaded = akad::box::loadSeccompPolicy(which);
  if (!loaded || !*loaded) {
    std::fprintf(stderr, "akabox_seccomp_install: %s\n", loaded ? "policy 'none' has no filter" : loaded.error().message.c_str());
    return 2;
  }
  const auto& policy = **loaded;
  auto* shared = static_cast<volatile double*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return 2;

  std::vector<Case> cases(3);
  cases[0].name = "policy, " + std::to_string(policy.instructionCount()) + " instructions" +
                  (policy.reportsViolations() ? ", with listener" : "");
  cases[0].policy = &policy;
  cases[1].name = "same length, short paths";
  cases[1].raw = shortPaths(policy.instructionCount());
  cases[2].name = "two instructions";
  cases[2].raw = shortPaths(2);

  for (auto& c : cases) installOnce(c, shared);  // warm-up
  for (int i = 0; i < runs; ++i)
    for (size_t k = 0; k < cases.size(); ++k) {
      Case& c = cases[(k + static_cast<size_t>(i)) % cases.size()];  // each round starts with another case
      double s = installOnce(c, shared);
      if (s < 0) {
        std::fprintf(stderr, "akabox_seccomp_install: installing '%s' failed\n", c.name.c_str());
        return 1;
      }
      c.seconds.push_back(s);
    }
  std::printf("seccomp filter install, %d runs each, in a fresh process (microseconds)\n", runs);
  for (const auto& c : cases)
    std::printf("  %-40s median %7.1f  p10 %7.1f  p90 %7.1f\n", c.name.c_str(), bench::median(c.seconds) * 1e6,
                akad::quantile(c.seconds, 0.1) * 1e6, akad::quantile(c.seconds, 0.9) * 1e6);
  return 0;
}
