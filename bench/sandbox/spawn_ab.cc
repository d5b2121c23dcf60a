// Two or more akabox builds against each other: spawn-to-exit of /bin/true with full
// isolation, interleaved run by run (each run starts with another build, so that every build
// follows every other equally often), with a median per build and round. Rounds show how far
// the machine drifts; a difference smaller than that drift between rounds is noise. This is
// how a change to the spawn path is judged before it is kept: spawn_bench's ratio against
// bwrap moves with bwrap's own drift between machines.
//
// Each build runs from a copy the tool writes into a directory of its own, so that all are in
// the same state in the page cache: on the development VM (AMD kind), akabox as the linker
// wrote it spawned 0.35 ms slower than a copy of the same bytes, and 0.65 ms slower once its
// cached pages were dropped and faulted in again (docs/akabox-performance.md).
//
//   spawn_ab [--mount-template] RUNS ROUNDS AKABOX_A AKABOX_B [AKABOX...]

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "spawn.h"

namespace {

// Copies `from` to `to` (mode 0755) in large writes; false, having said why, if it failed.
bool copyExecutable(const std::string& from, const std::string& to) {
  const int in = open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    std::fprintf(stderr, "cannot open %s: %s\n", from.c_str(), std::strerror(errno));
    return false;
  }
  const int out = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
  bool ok = out >= 0;
  std::vector<char> buf(1 << 20);
  while (ok) {
    const ssize_t n = read(in, buf.data(), buf.size());
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    for (ssize_t done = 0; ok && done < n;) {
      const ssize_t w = write(out, buf.data() + done, static_cast<size_t>(n - done));
      ok = w > 0;
      done += w;
    }
  }
  if (!ok) std::fprintf(stderr, "cannot copy %s to %s: %s\n", from.c_str(), to.c_str(), std::strerror(errno));
  close(in);
  if (out >= 0) close(out);
  return ok;
}

// The copies' directory, removed with them.
struct CopyDir {
  std::string path;
  std::vector<std::string> files;
  ~CopyDir() {
    for (const auto& f : files) unlink(f.c_str());
    if (!path.empty()) rmdir(path.c_str());
  }
};

}  // namespace

int main(int argc, char** argv) {
  int arg = 1;
  const bool mountTemplate = arg < argc && std::strcmp(argv[arg], "--mount-template") == 0;
  if (mountTemplate) ++arg;
  if (argc - arg < 4) {
    std::fprintf(stderr, "usage: %s [--mount-template] RUNS ROUNDS AKABOX_A AKABOX_B [AKABOX...]\n", argv[0]);
    return 2;
  }
  const int runs = std::atoi(argv[arg]), rounds = std::atoi(argv[arg + 1]);
  if (runs < 1 || rounds < 1) {
    std::fprintf(stderr, "RUNS and ROUNDS must be positive numbers\n");
    return 2;
  }
  const std::vector<std::string> builds(argv + arg + 2, argv + argc);
  CopyDir copies;
  char dir[] = "/tmp/akabox-ab-XXXXXX";
  if (!mkdtemp(dir)) {
    std::perror("mkdtemp");
    return 1;
  }
  copies.path = dir;
  std::vector<std::vector<std::string>> commands;
  for (size_t b = 0; b < builds.size(); ++b) {
    copies.files.push_back(copies.path + "/akabox-" + std::to_string(b));
    if (!copyExecutable(builds[b], copies.files.back())) return 1;
    commands.push_back(bench::akaboxTrue(copies.files.back(), mountTemplate));
  }
  // Declared after the copies: it runs the first one to remove the templates.
  bench::TemplateDir templates(copies.files.front());
  if (!templates.ok()) return 1;
  for (int i = 0; i < 3; ++i)  // warm caches (binaries, policy file, the mount templates)
    for (const auto& c : commands) bench::timeSpawn(c);
  std::printf("%d runs a round, interleaved, %s; medians in ms:\n", runs, mountTemplate ? "with --mount-template" : "building the root");
  for (size_t b = 0; b < builds.size(); ++b) std::printf("  [%zu] %s\n", b, builds[b].c_str());
  const size_t n = builds.size();
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::vector<double>> times(n);
    for (int i = 0; i < runs; ++i)
      for (size_t k = 0; k < n; ++k) {
        const size_t b = (k + static_cast<size_t>(i) + static_cast<size_t>(r)) % n;
        const double t = bench::timeSpawn(commands[b]);
        if (t < 0) {
          std::fprintf(stderr, "round %d, run %d failed: %s\n", r, i, builds[b].c_str());
          return 1;
        }
        times[b].push_back(t);
      }
    std::printf("round %d:", r);
    for (size_t b = 0; b < n; ++b) std::printf("  [%zu] %.3f", b, bench::median(times[b]) * 1e3);
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
