// akaharness.h - the per-task API of the cpp harness.
//
// A task implements four functions in two files:
//   harness/reference.cpp (trusted, linked only into `reference`):
//     TensorSet akaGenerate(const Config&, uint64_t seed);
//     TensorSet akaReference(const Config&, const TensorSet& in);
//   harness/invoke.cpp (linked into `runner` with the candidate's kernel.cpp):
//     TensorSet akaAllocateOutputs(const Config&, const TensorSet& in);
//     void akaInvoke(const Config&, const TensorSet& in, TensorSet& out);
// The generic mains (reference_main.cpp, runner_main.cpp) do all file and plan handling.
#pragma once

#include "akaconfig.h"

// Shape check for invoke.cpp: inputs of an unexpected layout are reported, not misread.
inline void requireShape(const Tensor& t, DType dtype, const std::vector<uint64_t>& dims) {
  if (t.dtype == dtype && t.dims == dims) return;
  Tensor expected;
  expected.dims = dims;
  throw akt::Error("tensor '" + t.name + "' is " + akt::dtypeName(t.dtype) + t.shapeString() + ", expected " +
                   akt::dtypeName(dtype) + expected.shapeString());
}

TensorSet akaGenerate(const Config& config, uint64_t seed);
TensorSet akaReference(const Config& config, const TensorSet& in);
TensorSet akaAllocateOutputs(const Config& config, const TensorSet& in);
void akaInvoke(const Config& config, const TensorSet& in, TensorSet& out);
