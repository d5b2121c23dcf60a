#include "daemon/run_methods.h"

#include <mutex>

#include "common/log.h"
#include "common/protocol.h"
#include "daemon/gpu_leases.h"
#include "daemon/held_out_view.h"
#include "daemon/method_checks.h"
#include "daemon/pipeline/agent.h"
#include "daemon/pipeline/egress_proxy.h"
#include "daemon/pipeline/image.h"
#include "daemon/scheduler.h"

namespace akad {

using nlohmann::json;
namespace proto = protocol;

namespace {

constexpr std::size_t kMaxSelectors = 1000;
constexpr std::int64_t kMaxAttemptsPerTask = 100;
constexpr std::int64_t kMaxAttemptsPerRun = 10000;
constexpr std::size_t kMaxLabel = 200;
constexpr std::size_t kMaxAgentCommand = 64 * 1024;
// Names of secrets passed to the agent; each is kept with the run (its value is not).
constexpr std::size_t kMaxCredentials = 64;

// options: agent_time_limit_s (number > 0), gpu_model (string), gpu_share (1 to kMaxGpuShare:
// attempts of this run that may share one GPU), credentials (object of strings, kept in memory
// by the executor and never stored), network, allow.
Status checkRunOptions(const json& options) {
  for (const auto& [key, value] : options.items()) {
    if (key == "agent_time_limit_s") {
      if (!value.is_number() || value.get<double>() <= 0 || value.get<double>() > 86400)
        return invalidParams("option \"agent_time_limit_s\" must be a number of seconds in (0, 86400]");
    } else if (key == "gpu_model") {
      if (!value.is_string() || value.get<std::string>().size() > 128)
        return invalidParams("option \"gpu_model\" must be a string");
    } else if (key == "gpu_share") {
      if (!value.is_number_integer() || value.get<std::int64_t>() < 1 || value.get<std::int64_t>() > kMaxGpuShare)
        return invalidParams("option \"gpu_share\" must be a whole number of attempts from 1 to " + std::to_string(kMaxGpuShare) +
                             " (up to that many of this run's attempts share one GPU; their timings are labelled gpu_shared)");
    } else if (key == "network") {
      if (!value.is_string() || !parseNetworkLevel(value.get<std::string>()))
        return invalidParams("option \"network\" must be \"none\", \"allow\" or \"host\" (it may only narrow the agent's)");
    } else if (key == "allow") {
      if (!value.is_array() || value.size() > 100) return invalidParams("option \"allow\" must be a list of host:port entries");
      for (const auto& e : value)
        if (!e.is_string() || !parseEgressRule(e.get<std::string>()))
          return invalidParams("option \"allow\" must be a list of host:port entries, got " + e.dump());
    } else if (key == "credentials") {
      if (!value.is_object() || value.size() > kMaxCredentials)
        return invalidParams("option \"credentials\" must be an object of at most " + std::to_string(kMaxCredentials) +
                             " names to strings");
      for (const auto& [k, v] : value.items())
        if (!v.is_string() || k.empty() || k.size() > 128) return invalidParams("option \"credentials\" must map names to strings");
    } else {
      return invalidParams("unknown option \"" + key + "\" (known: agent_time_limit_s, gpu_model, gpu_share, credentials, network, allow)");
    }
  }
  return {};
}

// "tasks": a non-empty list of selectors (cpu, cpu/softmax).
Result<std::vector<std::string>> readSelectors(const json& params) {
  auto tasks = params.find("tasks");
  if (tasks == params.end()) return invalidParams("missing parameter \"tasks\" (e.g. [\"cpu\"] or [\"cpu/softmax\"])");
  if (!tasks->is_array() || tasks->empty()) {
    return invalidParams("parameter \"tasks\" must be a non-empty array of task selectors, got " +
                         std::string(tasks->type_name()));
  }
  if (tasks->size() > kMaxSelectors) {
    return invalidParams("parameter \"tasks\" has " + std::to_string(tasks->size()) + " selectors; the limit is " +
                         std::to_string(kMaxSelectors));
  }
  std::vector<std::string> selectors;
  for (std::size_t i = 0; i < tasks->size(); ++i) {
    const json& t = (*tasks)[i];
    if (!t.is_string()) {
      return invalidParams("parameter \"tasks\"[" + std::to_string(i) + "] must be a string, got " + t.type_name());
    }
    selectors.push_back(t.get<std::string>());
  }
  return selectors;
}

Result<json> readOptions(const json& params) {
  json options = json::object();
  if (auto o = params.find("options"); o != params.end() && !o->is_null()) {
    if (!o->is_object()) return invalidParams("parameter \"options\" must be an object, got " + std::string(o->type_name()));
    options = *o;
  }
  if (auto s = checkRunOptions(options); !s) return s.error();
  return options;
}

// The named agent exists, the run's network options only narrow its own (checked now, applied
// by the executor), and its image is installed (refused now, not attempt by attempt).
Status checkNamedAgent(const DaemonContext& ctx, const std::string& name, const json& options) {
  auto a = findAgent(ctx.agentsDir, name);
  if (!a) return invalidParams(a.error().message);
  if (auto s = applyRunNetwork(*a, options); !s) return invalidParams(s.error().message);
  if (!a->image.empty() && !ctx.imagesDir.empty()) {
    ImageProfile probe;
    if (auto s = layerImageProfile(probe, ctx.imagesDir, a->image); !s)
      return invalidParams("agent '" + a->name + "' needs image '" + a->image + "': " + s.error().message);
  }
  return {};
}

// Task files are validated here, at the border, and the exact version is imported so a result
// always names (and keeps) the task it was scored against. A GPU task needs a GPU here that
// may serve it. Fills the run's task hashes and GPU needs; returns the task ids.
Result<std::vector<std::string>> importSelectedTasks(DaemonContext& ctx, const std::vector<std::string>& selectors,
                                                     const json& options, NewRun& run) {
  auto ids = ctx.tasks.resolve(selectors);
  if (!ids) return ids.error();
  for (const std::string& id : *ids) {
    auto task = ctx.tasks.load(id);
    if (!task) return task.error();
    auto imported = importTask(*task, ctx.stateDir);
    if (!imported) return Error{imported.error().message, proto::kInternalError};
    run.taskHashes[id] = task->content_hash;
    if (task->gpu) {
      run.tasksNeedingGpu.insert(id);
      const bool gpusElsewhere = ctx.scheduler != nullptr && ctx.scheduler->placesGpusElsewhere();
      if (ctx.gpus != nullptr && !gpusElsewhere) {
        // The lease's rule (gpu_eligibility.h): the task image's vendor and the run's model.
        std::string vendor;
        if (!ctx.imagesDir.empty()) {
          auto image = loadImageProfile(ctx.imagesDir, task->image);
          if (!image) return invalidParams("task " + id + ": image '" + task->image + "': " + image.error().message);
          vendor = image->requires_gpu_vendor;
        }
        const GpuRequest want = gpuRequestOf(vendor, options);
        if (!ctx.gpus->exists(want))
          return invalidParams("task " + id + " needs " + want.describe() + " and this daemon has none (akactl gpus)");
      }
    }
  }
  return ids;
}

Result<NewRun> readSubmit(const json& params, DaemonContext& ctx) {
  if (auto s = proto::allowOnly(params, {"tasks", "agent", "agent_command", "attempts", "label", "options"}); !s) {
    return s.error();
  }
  NewRun run;
  auto selectors = readSelectors(params);
  if (!selectors) return selectors.error();
  auto agent = proto::optionalString(params, "agent");
  if (!agent) return agent.error();
  if (*agent && !isAgentName(**agent)) {
    return invalidParams("parameter \"agent\" must match " + std::string(kAgentNameRule) + ", got \"" + **agent + "\"");
  }
  auto command = proto::optionalString(params, "agent_command");
  if (!command) return command.error();
  if (*command && ((*command)->empty() || (*command)->size() > kMaxAgentCommand)) {
    return invalidParams("parameter \"agent_command\" must be 1.." + std::to_string(kMaxAgentCommand) + " bytes");
  }
  auto attempts = proto::optionalInt(params, "attempts", 1, 1, kMaxAttemptsPerTask);
  if (!attempts) return attempts.error();
  auto label = proto::optionalString(params, "label");
  if (!label) return label.error();
  if (*label && (*label)->size() > kMaxLabel) {
    return invalidParams("parameter \"label\" is longer than " + std::to_string(kMaxLabel) + " bytes");
  }
  auto options = readOptions(params);
  if (!options) return options.error();
  if (*agent && *command) return invalidParams("give either \"agent\" or \"agent_command\", not both");
  // Without an agent the run scores the untouched baseline.
  if (!*agent && !*command) *agent = "noop";
  if (*agent && !ctx.agentsDir.empty())
    if (auto s = checkNamedAgent(ctx, **agent, *options); !s) return s.error();
  auto ids = importSelectedTasks(ctx, *selectors, *options, run);
  if (!ids) return ids.error();
  if (static_cast<std::int64_t>(ids->size()) * *attempts > kMaxAttemptsPerRun) {
    return invalidParams(std::to_string(ids->size()) + " tasks x " + std::to_string(*attempts) +
                         " attempts is more than " + std::to_string(kMaxAttemptsPerRun) + " attempts in one run");
  }
  run.taskIds = std::move(*ids);
  run.attemptsPerTask = *attempts;
  run.agent = *agent;
  run.agentCommand = *command;
  run.label = label->value_or("");
  run.params = json{{"tasks", *selectors},
                    {"task_ids", run.taskIds},
                    {"agent", run.agent ? json(*run.agent) : json(nullptr)},
                    {"agent_command", run.agentCommand ? json(*run.agentCommand) : json(nullptr)},
                    {"attempts", run.attemptsPerTask},
                    {"label", run.label},
                    {"options", *options}};
  return run;
}

// The tenant's agent_network limit against the agent's network as the run narrows it.
Status checkAgentNetwork(DaemonContext& ctx, const Peer& peer, const NewRun& run) {
  if (!run.agent || ctx.agentsDir.empty()) return {};  // ad-hoc commands have no network
  auto agent = findAgent(ctx.agentsDir, *run.agent);
  if (!agent) return invalidParams(agent.error().message);
  if (auto s = applyRunNetwork(*agent, run.params.value("options", json::object())); !s) return invalidParams(s.error().message);
  const std::string cap = ctx.tenants.limitsFor(peer.uid).agent_network;
  auto capLevel = parseNetworkLevel(cap);
  if (capLevel && networkLevel(*agent) > *capLevel) {
    log::warn("refused: uid ", peer.uid, " asked for agent ", agent->name, " with network ",
              networkLevelName(networkLevel(*agent)), " over its limit ", cap);
    return Error{"agent '" + agent->name + "' has network '" + networkLevelName(networkLevel(*agent)) +
                     "'; your limit is '" + cap + "' (akactl quota; narrow it with --network)",
                 proto::kQuotaExceeded};
  }
  return {};
}

Result<std::string> readRunId(const json& params, std::initializer_list<std::string_view> allowed) {
  if (auto s = proto::allowOnly(params, allowed); !s) return s.error();
  return proto::requireString(params, "id");
}

bool endsRun(const EventRecord& ev) {
  if (ev.kind != "run.state") return false;
  auto s = ev.data.find("state");
  return s != ev.data.end() && s->is_string() && isTerminalRunState(s->get<std::string>());
}

// Replays a run's stored events, then follows the bus until the run ends.
void watchRun(DaemonContext& ctx, const Peer& peer, const json& params, std::shared_ptr<Responder> responder) {
  auto runId = readRunId(params, {"id", "from_start"});
  if (!runId) return responder->finish(runId.error());
  auto fromStart = proto::optionalBool(params, "from_start", true);
  if (!fromStart) return responder->finish(fromStart.error());
  auto run = ctx.store.getRun(*runId);
  if (!run) return responder->finish(run.error());
  if (auto s = ctx.tenants.mayAccess(peer, run->submitterUid, "run " + *runId); !s) return responder->finish(s.error());

  struct WatchState {
    std::mutex mutex;
    bool replaying = true;
    std::int64_t lastSeq = 0;
    std::vector<EventRecord> early;  // published while we were replaying
  };
  auto state = std::make_shared<WatchState>();
  std::weak_ptr<Responder> weak = responder;
  Store& store = ctx.store;
  std::string id = *runId;
  auto finishWithRun = [&store, id](Responder& r) {
    auto latest = store.getRun(id);
    if (!latest) return r.finish(latest.error());
    r.finish(json{{"run", latest->toJson()}});
  };
  // A tenant who is not an admin sees held-out configurations by opaque id only.
  const bool admin = ctx.tenants.isAdmin(peer);
  std::vector<AttemptRecord> attempts;
  if (!admin)
    if (auto listed = store.attemptsOf(id)) attempts = std::move(*listed);
  auto view = std::make_shared<const HeldOutView>(HeldOutView::forCaller(admin, ctx.stateDir, attempts));
  auto shown = [view](const EventRecord& ev) { return view->names(ev.toJson()); };
  // Subscribe before reading the table, so nothing published in between is missed.
  auto subscription = ctx.events.subscribe(id, [weak, state, finishWithRun, shown](const EventRecord& ev) {
    auto r = weak.lock();
    if (!r || r->done()) return;
    {
      std::lock_guard lock(state->mutex);
      if (state->replaying) {
        state->early.push_back(ev);
        return;
      }
      if (ev.seq <= state->lastSeq) return;
      state->lastSeq = ev.seq;
      r->event(shown(ev));
    }
    if (endsRun(ev)) finishWithRun(*r);
  });
  responder->hold(std::shared_ptr<EventBus::Subscription>(std::move(subscription)));

  auto stored = store.eventsOf(id, 0);
  if (!stored) return responder->finish(stored.error());
  {
    std::lock_guard lock(state->mutex);
    for (const EventRecord& ev : *stored) {
      if (*fromStart) responder->event(shown(ev));
      state->lastSeq = std::max(state->lastSeq, ev.seq);
    }
    for (const EventRecord& ev : state->early) {
      if (ev.seq <= state->lastSeq) continue;
      responder->event(shown(ev));
      state->lastSeq = ev.seq;
    }
    state->early.clear();
    state->replaying = false;
  }
  auto now = store.getRun(id);
  if (!now) return responder->finish(now.error());
  if (isTerminalRunState(now->state)) finishWithRun(*responder);
}

// run.submit: read and check the request, apply the tenant's limits, commit the run, then tell
// the scheduler and the watchers.
Result<json> submitRun(DaemonContext& ctx, const Peer& peer, const json& params) {
  auto in = readSubmit(params, ctx);
  if (!in) return in.error();
  in->submitterUid = peer.uid;
  in->submitterGid = peer.gid;
  if (auto s = applyTenantLimits(*in, peer, ctx.tenants); !s) return s.error();
  if (auto s = checkAgentNetwork(ctx, peer, *in); !s) return s.error();
  // Secrets stay out of the store: the executor keeps them in memory for this run only.
  std::map<std::string, std::string> credentials;
  if (in->params["options"].contains("credentials")) {
    for (const auto& [k, v] : in->params["options"]["credentials"].items()) credentials[k] = v.get<std::string>();
    in->params["options"]["credentials"] = json::array();
    for (const auto& [k, v] : credentials) in->params["options"]["credentials"].push_back(k);
  }
  auto change = ctx.store.submitRun(*in);
  if (!change) return change.error();
  if (ctx.scheduler != nullptr) {
    ctx.scheduler->setCredentials(change->run.id, std::move(credentials));
    ctx.scheduler->wake();
  }
  // Committed: now it is safe to tell watchers and the client.
  for (const EventRecord& ev : change->events) ctx.events.publish(ev);
  log::info("run ", change->run.id, " submitted by uid ", peer.uid, ": ", in->taskIds.size(), " task(s) x ",
            in->attemptsPerTask, " attempt(s)");
  return json{{"run", change->run.toJson()}};
}

Result<json> listRuns(DaemonContext& ctx, const Peer& peer, const json& params) {
  if (auto s = proto::allowOnly(params, {"state", "limit"}); !s) return s.error();
  auto state = proto::optionalString(params, "state");
  if (!state) return state.error();
  if (*state) {
    bool known = false;
    for (const char* s : kRunStates) known = known || **state == s;
    if (!known) return invalidParams("parameter \"state\" must be one of queued, running, done, cancelled, failed");
  }
  auto limit = proto::optionalInt(params, "limit", 50, 1, 1000);
  if (!limit) return limit.error();
  // A tenant lists its own runs; an admin everyone's.
  std::optional<std::int64_t> owner;
  if (!ctx.tenants.isAdmin(peer)) owner = peer.uid;
  // Summaries: a run's params and agent command (up to about 400 KiB each) are run.get's.
  auto runs = ctx.store.listRuns(*state, *limit, owner, Store::RunFields::Summary);
  if (!runs) return runs.error();
  json out = json::array();
  for (const RunRecord& r : *runs) {
    json row = r.toJson();
    row.erase("params");
    row.erase("agent_command");
    out.push_back(std::move(row));
  }
  return json{{"runs", out}};
}

}  // namespace

void registerRunMethods(MethodTable& table, DaemonContext& ctx) {
  table.addOffloaded("run.submit",
                     [&ctx](const Peer& peer, const json& params) { return submitRun(ctx, peer, params); });
  // Off the I/O thread: a listing of a thousand runs reads the store at length.
  table.addOffloaded("run.list", [&ctx](const Peer& peer, const json& params) { return listRuns(ctx, peer, params); });
  table.addOffloaded("run.get", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    auto id = readRunId(params, {"id"});
    if (!id) return id.error();
    auto run = ctx.store.getRun(*id);
    if (!run) return run.error();
    if (auto s = ctx.tenants.mayAccess(peer, run->submitterUid, "run " + *id); !s) return s.error();
    auto attempts = ctx.store.attemptsOf(*id);
    if (!attempts) return attempts.error();
    const HeldOutView view = HeldOutView::forCaller(ctx.tenants.isAdmin(peer), ctx.stateDir, *attempts);
    json list = json::array();
    for (const AttemptRecord& a : *attempts) list.push_back(view.attempt(a.toJson()));
    return json{{"run", run->toJson()}, {"attempts", list}};
  });

  table.add("run.cancel", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    auto id = readRunId(params, {"id"});
    if (!id) return id.error();
    auto run = ctx.store.getRun(*id);
    if (!run) return run.error();
    // Tenants share the daemon: only the submitter (or an admin) may cancel a run.
    if (auto s = ctx.tenants.mayAccess(peer, run->submitterUid, "run " + *id); !s) return s.error();
    auto change = ctx.store.cancelRun(*id);
    if (!change) return change.error();
    if (ctx.scheduler != nullptr) ctx.scheduler->cancelRun(*id);
    for (const EventRecord& ev : change->events) ctx.events.publish(ev);
    log::info("run ", *id, " cancelled by uid ", peer.uid);
    return json{{"run", change->run.toJson()}};
  });

  table.addStream("run.watch", [&ctx](const Peer& peer, const json& params, std::shared_ptr<Responder> r) {
    watchRun(ctx, peer, params, std::move(r));
  });
}

}  // namespace akad
