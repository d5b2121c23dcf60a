#include "daemon/aka/measured.h"

#include "common/sha256.h"

namespace akad::aka {
namespace {

struct Measured {
  const char* name;    // AKA's task name
  Platform platform;
  const char* digest;  // taskDigest() of the files measured (AKA d6f7c8a4)
  TaskClass cls;
  const char* reason;
};

// Each entry: validated (akactl tasks validate) on an H200 and on an H100 at AKA d6f7c8a4;
// AKA's own correctness command failed on the pristine kernel on both (docs/aka.md, "One
// daemon, one request").
const Measured kMeasured[] = {
    {"triton2triton/rocmbench/hard/multreduce_matmul_dot_kernel", Platform::Nvidia,
     "984c06dc288c10fca45a24a79d042057be50225b386a915d85f68dea44199166", TaskClass::NeedsEdit,
     "measured (H200 and H100, AKA d6f7c8a4): the pristine kernel fails AKA's own test_matmul[1-8192-28672-False] "
     "(\"PyTorch and Triton Dot results don't match\") on NVIDIA; its fp16 tolerance needs an edit there"},
    {"hip2hip/gpumode/InnerProd", Platform::Nvidia,
     "5c9ac2faa3de8de0da94ef0f4eac71af1d61b87ec477a6ab90a9a7251ee686ff", TaskClass::NeedsEdit,
     "measured (H200 and H100, AKA d6f7c8a4): the pristine kernel fails AKA's own correctness check on NVIDIA "
     "(\"InnerProd results differ (case 2)\"); its tolerance or kernel needs an edit there"},
    {"hip2hip/gpumode/MaskedLanguageModel", Platform::Nvidia,
     "3adeb5ce60e8114e125aea96964e28b4fb2e01754d177be89f09a0533a27c5cf", TaskClass::NeedsEdit,
     "measured (H200 and H100, AKA d6f7c8a4): the pristine kernel fails AKA's own correctness check on NVIDIA "
     "(\"MaskedLanguageModel results differ (case 0)\"); its tolerance or kernel needs an edit there"},
};

}  // namespace

std::string taskDigest(const std::map<std::string, std::string>& files) {
  std::string all;
  for (const auto& [path, sha] : files) all += path + '\0' + sha + '\n';
  return sha256Hex(all);
}

bool applyMeasuredOutcome(const std::string& name, Platform platform, const std::string& digest, Classification& k) {
  for (const Measured& m : kMeasured) {
    if (name != m.name || platform != m.platform || digest != m.digest) continue;
    k.raise(m.cls, m.reason);
    return true;
  }
  return false;
}

}  // namespace akad::aka
