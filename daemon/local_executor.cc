#include "daemon/local_executor.h"

#include <chrono>
#include <memory>

namespace akad {

Result<AttemptServices::StageGpu> LocalExecutor::leaseGpu(const AttemptExecution& e, const std::string& stage) {
  const std::string model =
      e.run.params.value("options", nlohmann::json::object()).value("gpu_model", std::string());
  // The image decides the vendor: the cuda-hip toolchain cannot drive an AMD GPU.
  const std::string vendor = e.images.task.requires_gpu_vendor;
  if (!gpus_.exists(model, vendor))
    return Error{"the task needs a " + (vendor == "none" ? std::string() : vendor + " ") + "GPU" +
                 (model.empty() ? std::string() : " of model '" + model + "'") +
                 " and this daemon has none (see akactl gpus)"};
  const std::string holder = "attempt " + std::to_string(e.attempt.id) + " (" + stage + ")";
  SandboxCanceller* canceller = e.canceller;
  auto g = gpus_.acquire(holder, model, [canceller] { return canceller && canceller->cancelled(); }, vendor);
  if (!g) return Error{"cancelled"};
  const auto since = std::chrono::steady_clock::now();
  std::shared_ptr<GpuLease> lease(new GpuLease(gpus_, g), [since, report = e.on_gpu_time](GpuLease* p) {
    delete p;
    if (report) report(std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count());
  });
  return AttemptServices::StageGpu{lease, {g->id}, g->model};
}

Result<nlohmann::json> LocalExecutor::execute(const AttemptExecution& e) {
  AttemptSetup setup = setup_;
  setup.tasks_def_root = tasks_dir_ / e.task.content_hash / "def";
  AttemptServices s = baseServices(setup, e.images, &snapshots_);
  if (e.candidate_uid) {
    s.scoring.candidate_uid = *e.candidate_uid;
    s.scoring.candidate_gid = *e.candidate_uid;
  }
  s.scoring.canceller = e.canceller;
  s.on_stage = e.on_stage;
  s.on_snapshot = e.on_snapshot;
  s.lease_gpu = [this, &e](const std::string& stage) { return leaseGpu(e, stage); };
  return runAttempt(e.plan, s);
}

}  // namespace akad
