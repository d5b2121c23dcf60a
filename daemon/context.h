#pragma once
// What method handlers share: the store, the event bus, the task catalog and facts about this
// daemon. Owned by main(); handlers keep a reference.

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "daemon/events.h"
#include "daemon/store.h"
#include "daemon/task_catalog.h"
#include "daemon/tenants.h"

namespace akad {
class Scheduler;
class GpuLeases;
namespace snapshot {
class SnapshotStore;
}
}  // namespace akad

namespace akad {

struct DaemonContext {
  Store& store;
  EventBus& events;
  TaskCatalog& tasks;
  std::filesystem::path socketPath;
  std::filesystem::path stateDir;
  std::chrono::steady_clock::time_point startedAt = std::chrono::steady_clock::now();
  std::string startedAtIso;
  // Reported by daemon.info; the issue that adds the attempt executor changes it.
  std::string executor = "none (runs stay queued)";
  // Connection statistics from the server, for daemon.info.
  std::function<nlohmann::json()> serverStats;
  // Connections a uid has open now (for tenant.quota); any thread.
  std::function<std::size_t(uid_t)> connectionsOf;
  // The executor and what it uses (null/empty when akad runs with --workers 0).
  Scheduler* scheduler = nullptr;
  snapshot::SnapshotStore* snapshots = nullptr;
  GpuLeases* gpus = nullptr;
  std::filesystem::path agentsDir;
  std::filesystem::path imagesDir;
  TenantPolicy tenants;  // who is an admin (akad --tenants)
};

}  // namespace akad
