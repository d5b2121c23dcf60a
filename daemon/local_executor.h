#pragma once
// The local executor: an attempt's stages run in akabox sandboxes on this host (the pipeline in
// daemon/pipeline/attempt.cc), GPU tasks with a GPU leased from this daemon's GpuLeases for each
// stage that needs one.

#include "daemon/executor.h"
#include "daemon/gpu_leases.h"

namespace akad {

class LocalExecutor : public Executor {
 public:
  // `tasksDir` holds the imported task versions (<tasksDir>/<hash>/def).
  LocalExecutor(AttemptSetup setup, std::filesystem::path tasksDir, snapshot::SnapshotStore& snapshots,
                GpuLeases& gpus)
      : setup_(std::move(setup)), tasks_dir_(std::move(tasksDir)), snapshots_(snapshots), gpus_(gpus) {}
  std::string name() const override { return "local"; }
  // GPU tasks only while a GPU is free, so CPU tasks keep running meanwhile.
  bool canStart(const AttemptRecord& a) const override { return !a.needsGpu || gpus_.anyFree(""); }
  Result<nlohmann::json> execute(const AttemptExecution& e) override;

 private:
  // One GPU for one stage, for as long as the returned holder lives.
  Result<AttemptServices::StageGpu> leaseGpu(const AttemptExecution& e, const std::string& stage);

  AttemptSetup setup_;  // tasks_def_root is per task: set per attempt
  std::filesystem::path tasks_dir_;
  snapshot::SnapshotStore& snapshots_;
  GpuLeases& gpus_;
};

}  // namespace akad
