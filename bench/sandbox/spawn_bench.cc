// Spawn-to-exit of /bin/true: akabox with full isolation (all namespaces, cgroup, seccomp,
// pivot_root; once building the root, once copying a kept mount template) against
// bwrap --unshare-all, interleaved in one run so all see the same machine load (each round
// in another order), stdio on /dev/null. Prints medians, the ratio and akabox's peak RSS
// (ru_maxrss from wait4). The template lives in a directory of the benchmark's own (unless
// AKABOX_TEMPLATE_DIR names one), removed with `akabox cleanup --templates` at the end.
//
//   spawn_bench AKABOX [RUNS]      (BWRAP=PATH: the bwrap binary, default /usr/bin/bwrap)

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

namespace {

// Runs argv with stdio on /dev/null; returns seconds, or -1 if it failed.
double timeOnce(const std::vector<std::string>& args, long* maxRssKb) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  double t0 = bench::now();
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    if (null < 0) _exit(127);
    for (int fd = 0; fd <= 2; ++fd) dup2(null, fd);
    if (null > 2) close(null);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  double t = bench::now() - t0;
  if (maxRssKb) *maxRssKb = std::max(*maxRssKb, ru.ru_maxrss);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s AKABOX [RUNS]\n", argv[0]);
    return 2;
  }
  int runs = argc > 2 ? std::atoi(argv[2]) : 50;
  // The kept template in a directory of its own (mkdtemp: root's, mode 0700, as akabox wants).
  std::string templateDir;
  const char* given = std::getenv("AKABOX_TEMPLATE_DIR");
  if (!given || !*given) {
    char dir[] = "/tmp/akabox-bench-XXXXXX";
    if (!mkdtemp(dir)) {
      std::perror("mkdtemp");
      return 1;
    }
    templateDir = dir;
    setenv("AKABOX_TEMPLATE_DIR", dir, 1);
  }
  // Unmounts and removes the template (and its directory, if it is ours). The cgroup parent
  // is one nobody uses: cleanup would otherwise also kill the default parent's sandboxes.
  auto removeTemplate = [&] {
    timeOnce({argv[1], "cleanup", "--cgroup-parent", "akabox-bench-none", "--templates"}, nullptr);
    if (templateDir.empty()) return;
    unlink((templateDir + "/.lock").c_str());  // the builders' lock; nobody else uses this directory
    rmdir(templateDir.c_str());
  };
  std::vector<std::string> akabox = {argv[1], "run", "--seccomp", "default", "--result", "/dev/null", "--", "/bin/true"};
  // The same with the root copied from a kept mount template (built by the warm-up runs).
  std::vector<std::string> templated = {argv[1], "run", "--mount-template", "--seccomp", "default", "--result", "/dev/null",
                                        "--", "/bin/true"};
  const char* bwrapBin = std::getenv("BWRAP");
  std::vector<std::string> bwrap = {bwrapBin && *bwrapBin ? bwrapBin : "/usr/bin/bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev",
                                    "--proc", "/proc", "/bin/true"};
  struct Case {
    const char* name;
    std::vector<std::string> argv;
    std::vector<double> times;
  };
  std::vector<Case> cases = {{"akabox", akabox, {}}, {"bwrap ", bwrap, {}}, {"akabox --mount-template", templated, {}}};
  long rss = 0;
  for (int i = 0; i < 3; ++i)  // warm caches (binaries, policy file, the mount template)
    for (auto& c : cases) timeOnce(c.argv, nullptr);
  // Each round starts with another case, so that every case follows every other equally
  // often: what one run leaves to the kernel's workers (a network namespace's teardown, for
  // one) overlaps the start of the next.
  for (int i = 0; i < runs; ++i)
    for (size_t k = 0; k < cases.size(); ++k) {
      Case& c = cases[(k + static_cast<size_t>(i)) % cases.size()];
      double t = timeOnce(c.argv, &c == &cases[0] ? &rss : nullptr);
      if (t < 0) {
        std::fprintf(stderr, "run %d failed: %s\n", i, c.name);
        removeTemplate();
        return 1;
      }
      c.times.push_back(t);
    }
  std::printf("runs: %d each, interleaved\n", runs);
  for (const auto& c : cases)
    std::printf("%s median: %.2f ms (min %.2f, max %.2f)\n", c.name, bench::median(c.times) * 1e3,
                *std::min_element(c.times.begin(), c.times.end()) * 1e3, *std::max_element(c.times.begin(), c.times.end()) * 1e3);
  double bwrapMedian = bench::median(cases[1].times);
  std::printf("ratio akabox/bwrap: %.2f, with --mount-template: %.2f (target <= 0.70)\n", bench::median(cases[0].times) / bwrapMedian,
              bench::median(cases[2].times) / bwrapMedian);
  std::printf("akabox peak RSS (ru_maxrss of akabox and its init): %ld KiB\n", rss);
  removeTemplate();
  return 0;
}
