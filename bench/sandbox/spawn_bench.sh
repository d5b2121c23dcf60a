#!/bin/sh
# Builds akabox and the spawn benchmark, then runs akabox and bwrap side by side.
#   bench/sandbox/spawn_bench.sh [RUNS] [BUILD_DIR]
set -eu
runs=${1:-50}
build=${2:-build}
cd "$(dirname "$0")/../.."
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j2 --target akabox akabox_spawn_bench >/dev/null
exec "$build/bench/sandbox/akabox_spawn_bench" "$build/sandbox/akabox" "$runs"
