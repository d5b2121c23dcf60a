#pragma once
// convert mode (docs/aka.md, "Scoring (convert mode)"): an AgentKernelArena gpumode task
// (hip2hip/gpumode, torch2hip/gpumode, torch2hip/kernelbench) imported as an akad task of the
// `aka-convert` harness, which is the python harness's driver and worker with a generic trusted
// reference (tasks/common/aka-convert): inputs are AKA's get_inputs() cases drawn from fresh
// seeds in the driver, the expected outputs those of AKA's PyTorch module, and the candidate's
// HIP extension is called through AKA's functional model in the worker, so the clock, the
// inputs and the checks stay out of the candidate's process (issue 7's protections).

#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/aka/config.h"
#include "daemon/aka/convert_held_out.h"
#include "daemon/aka/import.h"
#include "daemon/aka/task_folder.h"

namespace akad::aka {

inline constexpr const char* kConvertHarness = "aka-convert";
// The common harness layers a converted task is assembled from (the aka-convert layer's BASE
// names cpp and python; every harness takes the checker).
inline const std::vector<std::string> kConvertLayers = {"cpp", "python", "aka-convert", "checker"};

// Whether convert mode applies to the task (its AKA name's category and sub-suite).
bool convertible(const std::string& taskName);

// The element texts of the literal list AKA's get_inputs() loops over: one `for` at the top of
// its body, over a list or tuple literal or a name bound to one there, with one `yield` and no
// loop inside it. Each element is one input case. An Error says why the source is not so.
Result<std::vector<std::string>> caseListElements(const std::string& moduleSource);

// What the conversion takes from the task: the files AKA's correctness command names
// (--py_modu_file, --py_func_file, --hip_file), the class AKA's harness instantiates (named by
// the HIP file: hip_<id>_<Class>.hip), the case list and held-out cases made from it.
struct ConvertPlan {
  std::string module, functional, hip, className;
  std::vector<std::string> cases;
  std::vector<HeldOutCase> heldOut;  // made from the cases (convert_held_out.h)
};
// Refused when a case makes a tensor too large for one data file (largestShapeBytes); held-out
// cases that would are not made.
Result<ConvertPlan> planConversion(const AkaTaskConfig& config, const TaskFolder& folder);

// The bytes of the largest tensor a case's text describes, taking every list of whole numbers
// ("[64, 128]") for a shape of float32 elements (torch.rand's default). Tuples are not taken:
// in kernelbench's cases, "(1024, 2048, 1024)" are the sizes of several matrices (M, K, N), not
// one shape; largestLoopTensorBytes reads what get_inputs makes of them.
double largestShapeBytes(const std::string& caseText);

// The bytes of the largest tensor get_inputs's loop makes for one case whose tuple of whole
// numbers it unpacks into names: `for M, K in [(4096, 262144)]: yield [torch.rand(M, K),
// torch.rand(K, 1)]` makes a 4096 x 262144 float32 tensor (4 GiB). Only torch.rand, randn,
// zeros, ones and empty with sizes that are those names or whole numbers are read, in float32
// unless their dtype= says a 16- or 64-bit type. 0 when the loop unpacks no such tuple.
double largestLoopTensorBytes(const std::string& moduleSource, const std::string& caseText);

// "aka-hip2hip-gpumode/gelu" -> "aka-convert-hip2hip-gpumode/gelu".
std::string convertedId(const std::string& wrapId);

// Copies the daemon's common harness layers (kConvertLayers, from `commonSource`, its
// tasks/common) into `tasksRoot`/common, replacing what an earlier import put there, so the
// converted tasks' version hashes and scorings read the layers they are built from.
Status installConvertHarness(const std::filesystem::path& commonSource, const std::filesystem::path& tasksRoot);

// Writes the converted task `t.id` (already convertedId'd) into the report's tasks root.
Status writeConvertedTask(const ImportedTask& t, const AkaTaskConfig& config, const TaskFolder& folder,
                          const ConvertPlan& plan, const ImportReport& report, const std::filesystem::path& commonSource);

}  // namespace akad::aka
