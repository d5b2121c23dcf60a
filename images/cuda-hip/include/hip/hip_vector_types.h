#pragma once
// HIP vector types (float4, int2, make_float4, ...) are CUDA's. Unlike ROCm's, CUDA's vector
// types have no arithmetic operators: code relying on `float4 + float4` must spell it out.

#include "hip/hip_common.h"

#include <vector_types.h>
#include <vector_functions.h>
