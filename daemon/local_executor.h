#pragma once
// The local executor: an attempt's stages run in akabox sandboxes on this host (the pipeline in
// daemon/pipeline/attempt.cc), GPU tasks with a GPU leased from this daemon's GpuLeases for each
// stage that needs one.

#include "daemon/executor.h"
#include "daemon/gpu_leases.h"

namespace akad {

// What a queued attempt asks of a GPU (gpu_eligibility.h), as the scheduler can tell at the
// claim; nullopt where it cannot (its run or task version unreadable just now).
using GpuRequestResolver = std::function<std::optional<GpuRequest>(const AttemptRecord&)>;

class LocalExecutor : public Executor {
 public:
  // `tasksDir` holds the imported task versions (<tasksDir>/<hash>/def).
  LocalExecutor(AttemptSetup setup, std::filesystem::path tasksDir, snapshot::SnapshotStore& snapshots,
                GpuLeases& gpus, GpuRequestResolver requestOf = {})
      : setup_(std::move(setup)), tasks_dir_(std::move(tasksDir)), snapshots_(snapshots), gpus_(gpus),
        request_of_(std::move(requestOf)) {}
  std::string name() const override { return "local"; }
  // A GPU task only while a GPU it may use is free (the lease's rule), so CPU tasks, and GPU
  // tasks for the GPUs that are free, keep running meanwhile.
  bool canStart(const AttemptRecord& a) const override;
  Result<nlohmann::json> execute(const AttemptExecution& e) override;

 private:
  // One GPU for one stage, for as long as the returned holder lives.
  Result<AttemptServices::StageGpu> leaseGpu(const AttemptExecution& e, const std::string& stage, bool alone);

  AttemptSetup setup_;  // tasks_def_root is per task: set per attempt
  std::filesystem::path tasks_dir_;
  snapshot::SnapshotStore& snapshots_;
  GpuLeases& gpus_;
  GpuRequestResolver request_of_;
};

}  // namespace akad
