#!/usr/bin/env bash
# Builds and runs the cuda-hip HIP test programs without CMake, e.g. on a GPU machine that has
# only the CUDA toolkit: bash tests/images/run_hip_on_gpu.sh [out-dir]. Exit 0 only if both
# programs ran on a GPU and every check passed (a skip for want of a GPU counts as failure here).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
status=0
for prog in hip_api_test hip_kernel_test; do
  "$root/images/cuda-hip/bin/hipcc" -O2 -std=c++17 --offload-arch="${HIPCC_OFFLOAD_ARCH:-sm_90}" \
    "$root/tests/images/hip/$prog.cpp" -o "$out/$prog"
  rc=0
  "$out/$prog" || rc=$?
  echo "$prog exit code $rc"
  [[ $rc == 0 ]] || status=1
done
exit $status
