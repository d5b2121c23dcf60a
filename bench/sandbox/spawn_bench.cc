// Spawn-to-exit of /bin/true: akabox with full isolation (all namespaces, cgroup, seccomp,
// pivot_root; once building the root, once copying a kept mount template) against
// bwrap --unshare-all, interleaved in one run so both see the same
// machine load. Prints medians, the ratio and akabox's peak RSS (ru_maxrss from wait4).
//
//   spawn_bench AKABOX [RUNS]      (BWRAP=PATH: the bwrap binary, default /usr/bin/bwrap)

#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

double now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Runs argv with stdio on /dev/null; returns seconds, or -1 if it failed.
double timeOnce(const std::vector<std::string>& args, long* maxRssKb) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  double t0 = now();
  pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  double t = now() - t0;
  if (maxRssKb) *maxRssKb = std::max(*maxRssKb, ru.ru_maxrss);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s AKABOX [RUNS]\n", argv[0]);
    return 2;
  }
  int runs = argc > 2 ? std::atoi(argv[2]) : 50;
  std::vector<std::string> akabox = {argv[1], "run", "--seccomp", "default", "--result", "/dev/null", "--", "/bin/true"};
  // The same with the root copied from a kept mount template (built by the warm-up runs).
  std::vector<std::string> templated = {argv[1], "run", "--mount-template", "--seccomp", "default", "--result", "/dev/null",
                                        "--", "/bin/true"};
  const char* bwrapBin = std::getenv("BWRAP");
  std::vector<std::string> bwrap = {bwrapBin && *bwrapBin ? bwrapBin : "/usr/bin/bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev",
                                    "--proc", "/proc", "/bin/true"};
  long rss = 0;
  for (int i = 0; i < 3; ++i) {  // warm caches (binaries, policy file)
    timeOnce(akabox, nullptr);
    timeOnce(templated, nullptr);
    timeOnce(bwrap, nullptr);
  }
  std::vector<double> a, t, b;
  for (int i = 0; i < runs; ++i) {
    double ta = timeOnce(akabox, &rss);
    double tt = timeOnce(templated, nullptr);
    double tb = timeOnce(bwrap, nullptr);
    if (ta < 0 || tt < 0 || tb < 0) {
      std::fprintf(stderr, "run %d failed (akabox %s, akabox --mount-template %s, bwrap %s)\n", i, ta < 0 ? "failed" : "ok",
                   tt < 0 ? "failed" : "ok", tb < 0 ? "failed" : "ok");
      return 1;
    }
    a.push_back(ta);
    t.push_back(tt);
    b.push_back(tb);
  }
  double ma = median(a), mt = median(t), mb = median(b);
  std::printf("runs: %d each, interleaved\n", runs);
  std::printf("akabox median: %.2f ms (min %.2f, max %.2f)\n", ma * 1e3, *std::min_element(a.begin(), a.end()) * 1e3,
              *std::max_element(a.begin(), a.end()) * 1e3);
  std::printf("bwrap  median: %.2f ms (min %.2f, max %.2f)\n", mb * 1e3, *std::min_element(b.begin(), b.end()) * 1e3,
              *std::max_element(b.begin(), b.end()) * 1e3);
  std::printf("akabox --mount-template median: %.2f ms (min %.2f, max %.2f)\n", mt * 1e3,
              *std::min_element(t.begin(), t.end()) * 1e3, *std::max_element(t.begin(), t.end()) * 1e3);
  std::printf("ratio akabox/bwrap: %.2f, with --mount-template: %.2f (target <= 0.70)\n", ma / mb, mt / mb);
  std::printf("akabox peak RSS (ru_maxrss of akabox and its init): %ld KiB\n", rss);
  return 0;
}
