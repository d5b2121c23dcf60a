#include "daemon/local_executor.h"

#include <chrono>
#include <memory>

#include "daemon/pipeline/task_scan.h"

namespace akad {

Result<AttemptServices::StageGpu> LocalExecutor::leaseGpu(const AttemptExecution& e, const std::string& stage,
                                                            bool alone) {
  // The image decides the vendor (the cuda-hip toolchain cannot drive an AMD GPU), the run
  // the model: gpu_eligibility.h's rule, as at submit and at the claim.
  GpuRequest want =
      gpuRequestOf(e.images.task.requires_gpu_vendor, e.run.params.value("options", nlohmann::json::object()), e.run.id);
  want.alone = alone;
  if (!gpus_.exists(want)) return Error{"the task needs " + want.describe() + " and this daemon has none (see akactl gpus)"};
  const std::string holder = "attempt " + std::to_string(e.attempt.id) + " (" + stage + (alone ? ", alone" : "") + ")";
  SandboxCanceller* canceller = e.canceller;
  auto g = gpus_.acquire(holder, want, [canceller] { return canceller && canceller->cancelled(); });
  if (!g) return Error{"cancelled"};
  const auto since = std::chrono::steady_clock::now();
  std::shared_ptr<GpuLease> lease(new GpuLease(gpus_, g, holder), [since, report = e.on_gpu_time](GpuLease* p) {
    delete p;
    if (report) report(std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count());
  });
  return AttemptServices::StageGpu{lease, {g->id}, g->model};
}

bool LocalExecutor::canStart(const AttemptRecord& a) const {
  if (!a.needsGpu) return true;
  const std::optional<GpuRequest> want = request_of_ ? request_of_(a) : std::nullopt;
  // Not known: any free GPU lets it start, and its lease names what is wrong.
  return gpus_.anyFree(want.value_or(GpuRequest{}));
}

Result<nlohmann::json> LocalExecutor::execute(const AttemptExecution& e) {
  AttemptSetup setup = setup_;
  setup.tasks_def_root = taskVersionRoot(tasks_dir_, e.task.content_hash);
  AttemptServices s = baseServices(setup, e.images, &snapshots_);
  if (e.candidate_uid) {
    s.scoring.candidate_uid = *e.candidate_uid;
    s.scoring.candidate_gid = *e.candidate_uid;
  }
  s.scoring.canceller = e.canceller;
  // A run that lets its attempts share a GPU has every GPU timing labelled, and no held-out
  // choice recorded from it (a case may fail for want of a neighbour's memory).
  s.scoring.gpu_shared = gpuRequestOf("", e.run.params.value("options", nlohmann::json::object()), e.run.id).share_slots > 1;
  // A candidate's kept builds serve only its own submitter's later scorings.
  s.scoring.build_cache_scope = "uid " + std::to_string(e.run.submitterUid);
  s.on_stage = e.on_stage;
  s.on_snapshot = e.on_snapshot;
  s.lease_gpu = [this, &e](const std::string& stage, bool alone) { return leaseGpu(e, stage, alone); };
  return runAttempt(e.plan, s);
}

}  // namespace akad
