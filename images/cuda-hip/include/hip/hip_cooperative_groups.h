#pragma once
// HIP cooperative groups on CUDA: HIP adopted CUDA's namespace (cooperative_groups) and API
// (this_thread_block, tiled_partition<N>, thread_block_tile::shfl_down, grid_group::sync...),
// so CUDA's header serves as is. Tiles are at most 32 wide here (64 on AMD wave64).

#include "hip/hip_runtime.h"

// CUDA's C++ library (pulled in by cooperative_groups.h) has its own entities named __any and
// __all, which hip_runtime.h's warp-vote macros would rewrite: hide the macros meanwhile.
#pragma push_macro("__any")
#pragma push_macro("__all")
#undef __any
#undef __all
#include <cooperative_groups.h>
#pragma pop_macro("__any")
#pragma pop_macro("__all")
