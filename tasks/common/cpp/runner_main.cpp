// runner - the only program that contains candidate code (kernel.cpp, via the task's invoke.cpp).
//
//   runner check --plan P --data D --out O   one kernel call per case, writes O/<case>.out.akt
//   runner perf  --plan P --data D --out O   timed calls per perf group, writes
//                                            O/<group>.times.json and O/<case>.out.akt
//
// It reads only D/<case>.in.akt of the cases it runs; seeds in the plan are ignored.
// Exit status: 0 when every case ran, 1 when one failed (the others still run), 2 on usage.
#include "akaharness.h"
#include "akaplan.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sys/stat.h>

namespace {

std::map<std::string, std::string> parseOptions(int argc, char** argv) {
  std::map<std::string, std::string> opts;
  for (int i = 2; i < argc; ++i) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || i + 1 >= argc) throw std::runtime_error("bad argument '" + key + "'");
    opts[key.substr(2)] = argv[++i];
  }
  for (const char* k : {"plan", "data", "out"})
    if (!opts.count(k)) throw std::runtime_error(std::string("missing --") + k);
  return opts;
}

// Outputs start as all-ones bytes (NaN for floats, -1 for integers), so a kernel that skips
// elements cannot pass on whatever an earlier call left behind.
void poison(TensorSet& out) {
  for (Tensor& t : out.tensors) std::memset(t.bytes.data(), 0xff, t.bytes.size());
}

// Evicts the kernel's data from the caches between timed calls.
class CacheFlusher {
 public:
  explicit CacheFlusher(uint64_t bytes) : scratch_(bytes) {}
  void flush() {
    if (scratch_.size() == 0) return;
    std::memset(scratch_.data(), ++round_, scratch_.size());
    sink_ = sink_ + scratch_.data()[round_ % scratch_.size()];
  }

 private:
  akt::Buffer scratch_;
  unsigned char round_ = 0;
  volatile unsigned sink_ = 0;
};

int check(const akaplan::Plan& plan, const std::string& data, const std::string& outDir) {
  int failures = 0;
  for (const akaplan::Case& c : plan.cases) {
    try {
      Config config(c.config);
      TensorSet in = akt::readAkt(data + "/" + c.name + ".in.akt");
      TensorSet out = akaAllocateOutputs(config, in);
      poison(out);
      akaInvoke(config, in, out);
      akt::writeAkt(outDir + "/" + c.name + ".out.akt", out);
    } catch (const std::exception& e) {
      std::cerr << "runner: case " << c.name << ": " << e.what() << "\n";
      ++failures;
    }
  }
  return failures ? 1 : 0;
}

void copyInto(TensorSet& dst, const TensorSet& src) {
  for (size_t i = 0; i < dst.tensors.size(); ++i) {
    const Tensor& s = src.tensors[i];
    Tensor& d = dst.tensors[i];
    if (s.name != d.name || s.dtype != d.dtype || s.dims != d.dims)
      throw std::runtime_error("input sets of one perf group differ in tensor '" + s.name + "'");
    std::memcpy(d.bytes.data(), s.bytes.data(), s.bytes.size());
  }
}

void perfGroup(const akaplan::Plan& plan, const akaplan::PerfGroup& group, const std::string& data,
               const std::string& outDir, CacheFlusher& flusher) {
  const akaplan::Case& first = *plan.findCase(group.cases.front());
  Config config(first.config);
  std::vector<TensorSet> sets;
  for (const std::string& name : group.cases) {
    if (plan.findCase(name)->config != first.config)
      throw std::runtime_error("case '" + name + "' has another configuration than '" + first.name + "'");
    sets.push_back(akt::readAkt(data + "/" + name + ".in.akt"));
    if (sets.back().size() != sets.front().size())
      throw std::runtime_error("case '" + name + "' has a different number of input tensors");
  }
  // One set of buffers for the whole group: every call sees the same addresses, and rotating
  // distinct contents through them defeats caching results by pointer.
  TensorSet in = sets.front();
  TensorSet out = akaAllocateOutputs(config, in);
  const size_t n = sets.size();
  for (int i = 0; i < plan.perf.warmup; ++i) {
    copyInto(in, sets[i % n]);
    poison(out);
    akaInvoke(config, in, out);
  }
  std::vector<int64_t> samples;
  std::vector<bool> written(n, false);
  const int total = std::max<int>(plan.perf.samples, static_cast<int>(n));
  for (int i = 0; i < total; ++i) {
    const size_t k = i % n;
    copyInto(in, sets[k]);
    poison(out);
    flusher.flush();
    auto t0 = std::chrono::steady_clock::now();
    akaInvoke(config, in, out);
    auto t1 = std::chrono::steady_clock::now();
    if (i < plan.perf.samples)
      samples.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    if (i + static_cast<int>(n) >= total) {  // the last call on input set k
      akt::writeAkt(outDir + "/" + group.cases[k] + ".out.akt", out);
      written[k] = true;
    }
  }
  nlohmann::json times = {{"samples_ns", samples}, {"warmup", plan.perf.warmup}, {"input_sets", n}};
  std::ofstream f(outDir + "/" + group.name + ".times.json");
  f << times.dump() << "\n";
  if (!f.flush()) throw std::runtime_error("cannot write " + outDir + "/" + group.name + ".times.json");
  std::vector<int64_t> sorted = samples;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  std::cerr << "runner: " << group.name << ": median " << sorted[sorted.size() / 2] / 1e6 << " ms over "
            << samples.size() << " samples\n";
}

int perf(const akaplan::Plan& plan, const std::string& data, const std::string& outDir) {
  if (!plan.hasPerf) throw std::runtime_error("the plan has no 'perf' section");
  CacheFlusher flusher(plan.perf.flushBytes);
  int failures = 0;
  for (const akaplan::PerfGroup& g : plan.perf.groups) {
    try {
      perfGroup(plan, g, data, outDir, flusher);
    } catch (const std::exception& e) {
      std::cerr << "runner: perf group " << g.name << ": " << e.what() << "\n";
      ++failures;
    }
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "check") != 0 && std::strcmp(argv[1], "perf") != 0)) {
    std::cerr << "usage: runner check|perf --plan P --data D --out O\n";
    return 2;
  }
  std::map<std::string, std::string> opts;
  akaplan::Plan plan;
  try {
    opts = parseOptions(argc, argv);
    plan = akaplan::readPlan(opts["plan"]);
    if (mkdir(opts["out"].c_str(), 0755) != 0 && errno != EEXIST)
      throw std::runtime_error("cannot create " + opts["out"] + ": " + std::strerror(errno));
  } catch (const std::exception& e) {
    std::cerr << "runner: " << e.what() << "\n";
    return 2;
  }
  try {
    if (std::strcmp(argv[1], "check") == 0) return check(plan, opts["data"], opts["out"]);
    return perf(plan, opts["data"], opts["out"]);
  } catch (const std::exception& e) {
    std::cerr << "runner: " << e.what() << "\n";
    return 1;
  }
}
