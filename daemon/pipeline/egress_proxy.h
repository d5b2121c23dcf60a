#pragma once
// The allow-list network of an agent (`network: allow` in its definition; docs/agents.md,
// "Network"). The agent's sandbox keeps its own network namespace with loopback only; the one
// way out is this HTTP proxy, which akad runs for the attempt on a Unix socket bound into the
// sandbox (a bridge in the sandbox, `akanet-bridge`, offers it to the agent as
// http://127.0.0.1:3128). It serves CONNECT (TLS) and plain http requests in absolute form,
// resolves names itself, connects only to the allow-listed host:port pairs, refuses addresses
// in private, loopback, link-local and metadata ranges unless the entry allows them, limits
// connections and bytes per attempt, and records every connection and every denial.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/unique_fd.h"

namespace akad {

struct EgressRule {
  std::string host;  // lower case; a name or an address
  int port = 0;
  bool allow_private = false;  // may resolve to a private, loopback or link-local address
};

struct EgressPolicy {
  std::vector<EgressRule> allow;
  int max_connections = 64;                        // open at once
  std::uint64_t max_bytes = 512ull << 20;          // both directions, all connections together
  std::chrono::seconds idle_timeout{120};          // a connection with no traffic this long ends
  std::chrono::seconds connect_timeout{10};
};

// "host:port", "[v6addr]:port", with an optional " private" suffix; an error names the entry.
Result<EgressRule> parseEgressRule(const std::string& text);

// Whether `address` (numeric) is private, loopback, link-local, unspecified, multicast or in
// the cloud metadata ranges (169.254.0.0/16, fd00:ec2::254).
bool isNonPublicAddress(const std::string& address);

class EgressProxy {
 public:
  // Listens on a Unix socket at `socketPath` (mode 0666: the agent runs as another uid; the
  // socket's folder decides who reaches it) and serves until stop().
  static Result<std::unique_ptr<EgressProxy>> start(const std::filesystem::path& socketPath, EgressPolicy policy);
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Ends every connection and the listener; joins the threads.
  void stop();
  // One JSON object per connection or denial, in order of their end: host, port, allowed,
  // reason (denials), address, bytes_up, bytes_down, started_at, duration_s.
  std::vector<nlohmann::json> log() const;
  // {connections, denied, bytes_up, bytes_down}
  nlohmann::json summary() const;

 private:
  EgressProxy(std::filesystem::path path, UniqueFd listener, EgressPolicy policy);
  void acceptLoop();
  // One connection: its request head, the allow list, the server, then the relay.
  void serve(int client);
  struct Relayed {
    std::uint64_t bytes_up = 0, bytes_down = 0;
    std::string end = "closed";
  };
  Relayed relay(int client, int upstream);
  void record(nlohmann::json entry);
  bool spend(std::uint64_t bytes);  // false once the attempt's byte budget is gone

  std::filesystem::path path_;
  UniqueFd listener_;
  UniqueFd stopPipeRead_, stopPipeWrite_;
  EgressPolicy policy_;
  std::thread acceptor_;
  mutable std::mutex mutex_;
  std::vector<std::thread> workers_;
  std::vector<nlohmann::json> log_;
  std::atomic<int> open_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace akad
