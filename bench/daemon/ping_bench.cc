// akad_bench_ping: daemon.ping round-trip latency (one connection, sequential requests) and
// throughput (N concurrent clients, each its own connection, each waiting for its answer).
// With --flood N: first N connections flood the daemon with pipelined tasks.list and
// run.submit requests (batches of 40 lines, about 6 KB, answers read after each batch) while
// the quiet connection's sequential pings are timed; nothing else is measured then.
//
//   akad_bench_ping --socket PATH [--sequential 1000] [--clients 50] [--seconds 3] [--json]
//   akad_bench_ping --socket PATH --flood 2 [--sequential 1000] [--json]
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

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/client.h"
#include "common/quantile.h"

using namespace akad;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string socket;
  int sequential = 1000;
  int clients = 50;
  double seconds = 3.0;
  bool json = false;
  int flood = 0;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "akad_bench_ping: %s\nusage: akad_bench_ping --socket PATH [--sequential N] "
                       "[--clients N] [--seconds S] [--flood N] [--json]\n", why);
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
    else if (a == "--flood") o.flood = std::stoi(next());
    else usage(("unknown argument " + a).c_str());
  }
  if (o.socket.empty()) usage("--socket is required");
  if (o.sequential < 1 || o.clients < 1 || o.seconds <= 0) usage("counts must be positive");
  return o;
}

// One flooding connection: batches of pipelined requests, then every answer, until `stop`.
// Returns the requests answered, or -1 when the connection failed.
long flood(const std::string& socket, const std::atomic<bool>& stop) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  std::string batch;
  for (int i = 0; i < 40; ++i) {
    if (i % 2 == 0)
      batch += R"({"id":)" + std::to_string(i) + R"(,"method":"tasks.list","params":{}})" "\n";
    else
      batch += R"({"id":)" + std::to_string(i) +
               R"(,"method":"run.submit","params":{"tasks":["cpu"],"agent":"noop","label":"flood"}})" "\n";
  }
  long answered = 0;
  std::string buf(1 << 16, '\0');
  while (!stop) {
    for (size_t off = 0; off < batch.size();) {
      ssize_t n = ::write(fd, batch.data() + off, batch.size() - off);
      if (n <= 0) return ::close(fd), -1;
      off += static_cast<size_t>(n);
    }
    for (int lines = 0; lines < 40;) {
      ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n <= 0) return ::close(fd), -1;
      for (ssize_t i = 0; i < n; ++i) lines += buf[static_cast<size_t>(i)] == '\n';
    }
    answered += 40;
  }
  ::close(fd);
  return answered;
}

double percentile(std::vector<double> v, double q) { return akad::quantile(std::move(v), q); }

// Concurrent pings: `clients` connections, each sending a ping as soon as the last is answered.
struct Throughput {
  double seconds = 0;
  long requests = 0, failures = 0;
};

Throughput concurrentPings(const Options& o) {
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
  return {std::chrono::duration<double>(Clock::now() - start).count(), total.load(), failures.load()};
}

// The quiet connection's sequential pings while `flood` connections flood the daemon.
int measureUnderFlood(const Options& o, Client& client) {
  std::atomic<bool> stop{false};
  std::atomic<long> flooded{0}, broken{0};
  std::vector<std::thread> flooders;
  for (int f = 0; f < o.flood; ++f)
    flooders.emplace_back([&] {
      long n = flood(o.socket, stop);
      if (n < 0) ++broken;
      else flooded += n;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the flood is under way
  std::vector<double> ms;
  const auto start = Clock::now();
  for (int i = 0; i < o.sequential; ++i) {
    auto t0 = Clock::now();
    auto r = client.call("daemon.ping");
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!r) {
      std::fprintf(stderr, "akad_bench_ping: ping %d: %s\n", i, r.error().message.c_str());
      stop = true;
      for (auto& t : flooders) t.join();
      return 1;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  for (auto& t : flooders) t.join();
  nlohmann::json out{{"flooding_connections", o.flood},
                     {"flood_requests_answered", flooded.load()},
                     {"flood_connections_broken", broken.load()},
                     {"quiet_pings", o.sequential},
                     {"seconds", seconds},
                     {"ping_ms_median", percentile(ms, 0.5)},
                     {"ping_ms_p99", percentile(ms, 0.99)},
                     {"ping_ms_max", percentile(ms, 1.0)}};
  if (o.json) std::printf("%s\n", out.dump(2).c_str());
  else
    std::printf("daemon.ping on a quiet connection while %d connection(s) flood tasks.list and run.submit:\n"
                "  %d pings in %.1f s: median %.2f ms, p99 %.2f ms, max %.2f ms; flood answered %ld requests "
                "(%.0f/s)%s\n",
                o.flood, o.sequential, seconds, percentile(ms, 0.5), percentile(ms, 0.99), percentile(ms, 1.0),
                flooded.load(), static_cast<double>(flooded.load()) / seconds,
                broken.load() ? ", SOME FLOOD CONNECTIONS BROKE" : "");
  return broken.load() == 0 ? 0 : 1;
}

// Sequential latency over one connection, then concurrent throughput.
int measureLatencyAndThroughput(const Options& o, Client& client) {
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(o.sequential));
  for (int i = 0; i < o.sequential; ++i) {
    auto t0 = Clock::now();
    auto r = client.call("daemon.ping");
    auto t1 = Clock::now();
    if (!r) {
      std::fprintf(stderr, "akad_bench_ping: ping %d: %s\n", i, r.error().message.c_str());
      return 1;
    }
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }

  const Throughput t = concurrentPings(o);
  const double elapsed = t.seconds, rps = static_cast<double>(t.requests) / elapsed;
  nlohmann::json out{{"sequential_pings", o.sequential},
                     {"latency_us_median", percentile(us, 0.5)},
                     {"latency_us_p99", percentile(us, 0.99)},
                     {"latency_us_min", percentile(us, 0.0)},
                     {"concurrent_clients", o.clients},
                     {"concurrent_seconds", elapsed},
                     {"concurrent_requests", t.requests},
                     {"concurrent_failures", t.failures},
                     {"requests_per_second", rps}};
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("daemon.ping over one connection, %d sequential requests:\n"
                "  median %.1f us, p99 %.1f us, min %.1f us\n"
                "%d concurrent clients for %.1f s: %ld requests, %.0f requests/s, %ld failures\n",
                o.sequential, percentile(us, 0.5), percentile(us, 0.99), percentile(us, 0.0), o.clients,
                elapsed, t.requests, rps, t.failures);
  }
  return t.failures == 0 ? 0 : 1;
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
  return o.flood > 0 ? measureUnderFlood(o, *client) : measureLatencyAndThroughput(o, *client);
}
