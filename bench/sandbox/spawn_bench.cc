// Spawn-to-exit of /bin/true: akabox with full isolation (all namespaces, cgroup, seccomp,
// pivot_root; once building the root, once copying a kept mount template) against
// bwrap --unshare-all, interleaved in one run so all see the same machine load (each round
// in another order), stdio on /dev/null. Prints medians, the ratio and akabox's peak RSS
// (ru_maxrss from wait4). The template lives in a directory of the benchmark's own (unless
// AKABOX_TEMPLATE_DIR names one), removed with `akabox cleanup --templates` at the end.
//
//   spawn_bench AKABOX [RUNS]      (BWRAP=PATH: the bwrap binary, default /usr/bin/bwrap)

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "spawn.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s AKABOX [RUNS]\n", argv[0]);
    return 2;
  }
  int runs = argc > 2 ? std::atoi(argv[2]) : 50;
  bench::TemplateDir templates(argv[1]);  // removed, with its templates, on the way out
  if (!templates.ok()) return 1;
  const std::vector<std::string> akabox = bench::akaboxTrue(argv[1], false);
  // The same with the root copied from a kept mount template (built by the warm-up runs).
  const std::vector<std::string> templated = bench::akaboxTrue(argv[1], true);
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
    for (auto& c : cases) bench::timeSpawn(c.argv, nullptr);
  // Each round starts with another case, so that every case follows every other equally
  // often: what one run leaves to the kernel's workers (a network namespace's teardown, for
  // one) overlaps the start of the next.
  for (int i = 0; i < runs; ++i)
    for (size_t k = 0; k < cases.size(); ++k) {
      Case& c = cases[(k + static_cast<size_t>(i)) % cases.size()];
      double t = bench::timeSpawn(c.argv, &c == &cases[0] ? &rss : nullptr);
      if (t < 0) {
        std::fprintf(stderr, "run %d failed: %s\n", i, c.name);
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
  return 0;
}
