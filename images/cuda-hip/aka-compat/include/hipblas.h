#pragma once
// akad compat layer: the older top-level spelling of hipBLAS's header.
#include "hipblas/hipblas.h"
