#pragma once
// HIP's __hip_bfloat16 on CUDA: the same 16-bit brain float as __nv_bfloat16, with the same
// intrinsics (__float2bfloat16, __bfloat162float, __hadd, __hmul, __hfma, ...).

#include "hip/hip_common.h"

#include <cuda_bf16.h>

typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat162 __hip_bfloat162;
typedef __nv_bfloat16_raw __hip_bfloat16_raw;
typedef __nv_bfloat162_raw __hip_bfloat162_raw;
