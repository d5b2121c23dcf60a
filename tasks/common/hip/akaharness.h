// akaharness.h - the host-side per-task API of the hip harness (the cpp harness's Config and
// Rng, so inputs come out byte-identical for a given (configuration, seed) on every machine).
//
// A hip task implements four functions in two files:
//   harness/reference.cpp (trusted, host-only, built with g++ into `reference` and `driver`):
//     TensorSet akaGenerate(const Config&, uint64_t seed);
//     TensorSet akaReference(const Config&, const TensorSet& in);
//   harness/invoke.hip (built with hipcc into `runner` with the candidate's kernel.hip):
//     TensorSet akaAllocateOutputs(const Config&, const TensorSet& in);   // host shapes only
//     void akaInvoke(const Config&, const DeviceSet& in, DeviceSet& out); // see akadevice.h
// The generic mains (reference_main.cpp, driver_main.hip, runner_main.hip) do all file, plan and
// device handling. akaGenerate runs in the driver for every timed call (several at once, on
// threads), so it should be fast and must be thread-safe; akaReference runs once per kept call.
#pragma once

#include "akaconfig.h"

// Shape check for invoke.hip: inputs of an unexpected layout are reported, not misread.
inline void requireShape(const std::string& name, DType dtype, const std::vector<uint64_t>& dims,
                         DType wantDtype, const std::vector<uint64_t>& wantDims) {
  if (dtype == wantDtype && dims == wantDims) return;
  Tensor got, want;
  got.dims = dims;
  want.dims = wantDims;
  throw akt::Error("tensor '" + name + "' is " + akt::dtypeName(dtype) + got.shapeString() + ", expected " +
                   akt::dtypeName(wantDtype) + want.shapeString());
}

TensorSet akaGenerate(const Config& config, uint64_t seed);
TensorSet akaReference(const Config& config, const TensorSet& in);
