#include "cli/daemon_commands.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <vector>

#include "cli/options.h"
#include "common/quantile.h"

namespace akad::cli {

using nlohmann::json;

namespace {

std::string formatDuration(double seconds) {
  long s = static_cast<long>(seconds);
  char buf[64];
  if (s >= 86400) std::snprintf(buf, sizeof buf, "%ldd %ldh %ldm", s / 86400, s % 86400 / 3600, s % 3600 / 60);
  else if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh %ldm %lds", s / 3600, s % 3600 / 60, s % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm %lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  return buf;
}

// "3 (queued 2, cancelled 1)": only the non-zero states.
std::string formatCounts(std::int64_t total, const json& byState) {
  std::string out = std::to_string(total);
  std::string parts;
  for (const auto& [state, n] : byState.items()) {
    if (state == "total" || !n.is_number_integer() || n.get<std::int64_t>() == 0) continue;
    parts += (parts.empty() ? "" : ", ") + state + " " + std::to_string(n.get<std::int64_t>());
  }
  if (!parts.empty()) out += " (" + parts + ")";
  return out;
}

int runInfo() {
  int exitCode = kExitOk;
  auto info = callDaemon("daemon.info", json::object(), exitCode);
  if (!info) return exitCode;
  if (cliOptions().json) {
    printJson(*info);
    return kExitOk;
  }
  const json& i = *info;
  const json& counts = i.at("counts");
  std::cout << "akad " << i.value("version", "?") << " (protocol " << i.value("protocol_version", 0) << "), pid "
            << i.value("pid", 0) << ", up " << formatDuration(i.value("uptime_s", 0.0)) << "\n"
            << "  socket       " << i.value("socket", "") << "\n"
            << "  state dir    " << i.value("state_dir", "") << " (schema v" << i.value("schema_version", 0) << ")\n"
            << "  tasks dir    " << i.value("tasks_dir", "") << "\n"
            << "  you          uid " << i.at("peer").value("uid", -1) << ", gid " << i.at("peer").value("gid", -1)
            << " (as akad sees you)\n"
            << "  runs         " << formatCounts(counts.value("runs", 0), counts.at("runs_by_state")) << "\n"
            << "  attempts     " << formatCounts(counts.at("attempts").value("total", 0), counts.at("attempts"))
            << "\n"
            << "  executor     " << i.value("executor", "") << "\n"
            << "  connections  " << i.at("connections").value("open", 0) << " open, "
            << i.at("connections").value("accepted", 0) << " since start\n";
  return kExitOk;
}

int runPing(int count) {
  auto client = connectDaemon();
  if (!client) return reportError(client.error());
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = client->call("daemon.ping");
    auto t1 = std::chrono::steady_clock::now();
    if (!r) return reportError(r.error());
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = quantileOfSorted(sorted, 0.5), p99 = quantileOfSorted(sorted, 0.99);
  if (cliOptions().json) {
    printJson(json{{"pong", true},
                   {"socket", client->socketPath().string()},
                   {"count", count},
                   {"median_ms", median},
                   {"p99_ms", p99},
                   {"min_ms", sorted.front()},
                   {"max_ms", sorted.back()}});
    return kExitOk;
  }
  char line[256];
  if (count == 1) {
    std::snprintf(line, sizeof line, "pong from akad at %s in %.3f ms", client->socketPath().c_str(), median);
  } else {
    std::snprintf(line, sizeof line, "%d pongs from akad at %s: median %.3f ms, p99 %.3f ms, min %.3f ms, max %.3f ms",
                  count, client->socketPath().c_str(), median, p99, sorted.front(), sorted.back());
  }
  std::cout << line << "\n";
  return kExitOk;
}

// "3 of 1000", or "3 (no limit)"; a limit of 0 is none.
std::string ofLimit(const std::string& used, const json& limit) {
  const double l = limit.is_number() ? limit.get<double>() : 0;
  if (l <= 0) return used + " (no limit)";
  std::ostringstream out;
  out << used << " of " << l;
  return out.str();
}

std::string limitOnly(const json& limit, const std::string& unit) {
  const double l = limit.is_number() ? limit.get<double>() : 0;
  if (l <= 0) return "no limit";
  std::ostringstream out;
  out << l << unit;
  return out.str();
}

std::string hours(double h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", h);
  return buf;
}

int runQuota(std::int64_t uid) {
  int exitCode = kExitOk;
  json params = json::object();
  if (uid >= 0) params["uid"] = uid;
  auto q = callDaemon("tenant.quota", params, exitCode);
  if (!q) return exitCode;
  if (cliOptions().json) {
    printJson(*q);
    return kExitOk;
  }
  const json& l = q->at("limits");
  const json& u = q->at("usage");
  std::cout << "uid " << q->value("uid", -1) << (q->value("admin", false) ? " (admin: no limits)" : "") << "\n"
            << "  queued or running attempts  "
            << ofLimit(std::to_string(u.value("open_attempts", 0)), l["max_queued_attempts"]) << "\n"
            << "  running attempts            "
            << ofLimit(std::to_string(u.value("running_attempts", 0)), l["max_concurrent_attempts"]) << "\n"
            << "  GPU hours, last 24 h        " << ofLimit(hours(u.value("gpu_hours_24h", 0.0)), l["gpu_hours_per_day"])
            << "\n"
            << "  attempt hours, last 24 h    " << hours(u.value("attempt_hours_24h", 0.0)) << "\n"
            << "  connections                 "
            << ofLimit(std::to_string(u.value("connections", 0)), l["max_connections"]) << "\n"
            << "  requests per second         " << limitOnly(l["requests_per_second"], "") << "\n"
            << "  agent time ceiling          " << limitOnly(l["max_agent_time_s"], " s") << "\n";
  return kExitOk;
}

}  // namespace

void addDaemonCommands(CLI::App& app, int& exitCode) {
  auto* info = app.add_subcommand("info", "Show the daemon's version, paths, counts of runs and attempts");
  info->callback([&exitCode] { exitCode = runInfo(); });

  auto* ping = app.add_subcommand("ping", "Check that akad answers; with --count, measure round-trip latency");
  auto count = std::make_shared<int>(1);
  ping->add_option("-c,--count", *count, "Pings to send over one connection")->check(CLI::Range(1, 10000000));
  ping->callback([&exitCode, count] { exitCode = runPing(*count); });

  auto* quota = app.add_subcommand("quota", "Your limits on this daemon and how much of them you use");
  auto uid = std::make_shared<std::int64_t>(-1);
  quota->add_option("--uid", *uid, "Another user's (admins only)")->check(CLI::Range(0LL, 4294967294LL));
  quota->callback([&exitCode, uid] { exitCode = runQuota(*uid); });
}

}  // namespace akad::cli
