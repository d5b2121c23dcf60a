#pragma once
// Where akad-node puts its job's sandbox cgroups. With Slurm's cgroup/v2 plugin the job runs in
// a cgroup of its own (…/job_<id>/step_batch/user/task_0) whose limits Slurm sets
// (ConstrainRAMSpace, ConstrainCores, the GPU's device rules); akad-node nests its sandboxes
// under it, so those limits bound them too and Slurm's end of the job reaches every process.
//
// cgroup v2 lets a cgroup hand controllers to its children only while no process lives in it,
// so akad-node first moves the job's processes (itself) into a child `akad-node`, and the
// sandboxes go under a sibling `sandboxes`:
//
//   <job cgroup>/akad-node      akad-node (and the batch step's other processes, if any)
//   <job cgroup>/sandboxes/...  akabox's cgroups (akabox enables the controllers on the way)
//
// On cgroup v1 each controller has its own job path, which one cgroup parent cannot name:
// there (and outside a job cgroup) the sandboxes get a parent of their own at the root of
// each hierarchy, as on a local akad host.

#include <string>

#include "common/result.h"

namespace akad::slurm {

struct JobCgroup {
  std::string root;            // the cgroup2 mount (/sys/fs/cgroup)
  std::string job;             // the job's cgroup, relative to root, without a leading '/'
  std::string sandbox_parent;  // what akabox gets as --cgroup-parent: <job>/sandboxes
};

// This process's cgroup v2 path ("0::/path" in /proc/self/cgroup); "/" when at the root.
Result<std::string> ownCgroupV2(const std::string& procSelfCgroup = "/proc/self/cgroup");

// Moves every process of `job` (relative to `root`) into <job>/akad-node and returns the parent
// for the sandboxes. Fails (and changes nothing that stays) when `job` is the root.
Result<JobCgroup> nestUnderJobCgroup(const std::string& root, const std::string& job);

// After akabox's clean-up emptied <job>/sandboxes: removes it, hands the controllers back and
// moves this process back into the job's cgroup, so Slurm finds its cgroup as it made it.
Status leaveJobCgroup(const JobCgroup& cgroup);

}  // namespace akad::slurm
