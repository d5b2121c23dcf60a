#pragma once
// akad compat layer: the name some hipified sources use for ROCm PyTorch's context header
// (hip2hip/others/assign_score_withk includes it); the same as ATen/hip/HIPContext.h. Only this
// file is here: ATen/cuda/CUDAContext.h and the rest of ATen/cuda/ stay torch's own.
#include <ATen/hip/HIPContext.h>
