#pragma once
// HIP half precision on CUDA: __half, __half2 (and the `half`/`half2` aliases) with the same
// conversion and arithmetic intrinsics (__float2half, __half2float, __hadd, __hmul, __hfma,
// hexp, h2sqrt, ...), which HIP took from CUDA by name.

#include "hip/hip_common.h"

#include <cuda_fp16.h>
