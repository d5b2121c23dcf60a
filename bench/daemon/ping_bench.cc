// akad_bench_ping: daemon.ping round-trip latency (one connection, sequential requests) and
// throughput (N concurrent clients, each its own connection, each waiting for its answer).
//
//   akad_bench_ping --socket PATH [--sequential 1000] [--clients 50] [--seconds 3] [--json]
//
// Connects to a running akad; bench/daemon/run.sh starts one on a temporary socket.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/client.h"

using namespace akad;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string socket;
  int sequential = 1000;
  int clients = 50;
  double seconds = 3.0;
  bool json = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "akad_bench_ping: %s\nusage: akad_bench_ping --socket PATH [--sequential N] "
                       "[--clients N] [--seconds S] [--json]\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--socket") o.socket = next();
    else if (a == "--sequential") o.sequential = std::stoi(next());
    else if (a == "--clients") o.clients = std::stoi(next());
    else if (a == "--seconds") o.seconds = std::stod(next());
    else if (a == "--json") o.json = true;
    else usage(("unknown argument " + a).c_str());
  }
  if (o.socket.empty()) usage("--socket is required");
  if (o.sequential < 1 || o.clients < 1 || o.seconds <= 0) usage("counts must be positive");
  return o;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);

  auto client = Client::connect(o.socket);
  if (!client) {
    std::fprintf(stderr, "akad_bench_ping: %s\n", client.error().message.c_str());
    return 3;
  }
  for (int i = 0; i < 100; ++i) (void)client->call("daemon.ping");  // warm-up
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(o.sequential));
  for (int i = 0; i < o.sequential; ++i) {
    auto t0 = Clock::now();
    auto r = client->call("daemon.ping");
    auto t1 = Clock::now();
    if (!r) {
      std::fprintf(stderr, "akad_bench_ping: ping %d: %s\n", i, r.error().message.c_str());
      return 1;
    }
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }

  std::atomic<bool> go{false}, stop{false};
  std::atomic<long> total{0}, failures{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&] {
      auto cl = Client::connect(o.socket);
      if (!cl) {
        ++failures;
        return;
      }
      while (!go) std::this_thread::yield();
      long n = 0;
      while (!stop) {
        if (cl->call("daemon.ping")) ++n;
        else ++failures;
      }
      total += n;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let every client connect
  auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  double rps = static_cast<double>(total.load()) / elapsed;

  nlohmann::json out{{"sequential_pings", o.sequential},
                     {"latency_us_median", percentile(us, 0.5)},
                     {"latency_us_p99", percentile(us, 0.99)},
                     {"latency_us_min", percentile(us, 0.0)},
                     {"concurrent_clients", o.clients},
                     {"concurrent_seconds", elapsed},
                     {"concurrent_requests", total.load()},
                     {"concurrent_failures", failures.load()},
                     {"requests_per_second", rps}};
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("daemon.ping over one connection, %d sequential requests:\n"
                "  median %.1f us, p99 %.1f us, min %.1f us\n"
                "%d concurrent clients for %.1f s: %ld requests, %.0f requests/s, %ld failures\n",
                o.sequential, percentile(us, 0.5), percentile(us, 0.99), percentile(us, 0.0), o.clients,
                elapsed, total.load(), rps, failures.load());
  }
  return failures.load() == 0 ? 0 : 1;
}
