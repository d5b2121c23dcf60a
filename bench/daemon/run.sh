#!/usr/bin/env bash
# Measures akad's request path: starts akad on a temporary socket and state dir, runs
# akad_bench_ping (latency over 1000 sequential pings, requests/s from 50 concurrent clients),
# then times `akactl ping` as a user sees it (process start included), and stops the daemon.
# Last, a second akad on this clone's tasks (no executor, so submitted runs stay queued): ping
# latency on a quiet connection while two connections flood it with pipelined tasks.list and
# run.submit requests (each of which scans or imports task trees).
#
#   bench/daemon/run.sh [build-dir]      (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
for bin in "$build/daemon/akad" "$build/cli/akactl" "$build/bench/daemon/akad_bench_ping"; do
  [[ -x $bin ]] || { echo "run.sh: $bin missing; build first (cmake --build $build)" >&2; exit 2; }
done

tmp=$(mktemp -d /tmp/akad-bench-XXXXXX)
mkdir -p "$tmp/tasks"
"$build/daemon/akad" --socket "$tmp/akad.sock" --state-dir "$tmp/state" --tasks-dir "$tmp/tasks" \
  --log-level warn 2>"$tmp/akad.log" &
pid=$!
cleanup() { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
for _ in $(seq 200); do
  "$build/cli/akactl" --socket "$tmp/akad.sock" ping >/dev/null 2>&1 && break
  sleep 0.05
done

echo "== akad_bench_ping ($(nproc) CPU(s))"
"$build/bench/daemon/akad_bench_ping" --socket "$tmp/akad.sock" --sequential 1000 --clients 50 --seconds 3

echo "== akactl ping -c 1000 (one akactl process, 1000 round trips)"
"$build/cli/akactl" --socket "$tmp/akad.sock" ping -c 1000

echo "== akactl ping, whole command (process spawn + connect + round trip), 200 runs"
python3 - "$build/cli/akactl" "$tmp/akad.sock" <<'PY'
import statistics, subprocess, sys, time
ctl, sock = sys.argv[1], sys.argv[2]
times = []
for _ in range(200):
    t0 = time.perf_counter()
    subprocess.run([ctl, "--socket", sock, "ping"], check=True, stdout=subprocess.DEVNULL)
    times.append((time.perf_counter() - t0) * 1000)
times.sort()
print(f"  median {statistics.median(times):.2f} ms, p99 {times[int(0.99 * len(times)) - 1]:.2f} ms, "
      f"min {times[0]:.2f} ms")
PY
echo "== akad VmRSS after the benchmark: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"

"$build/daemon/akad" --socket "$tmp/flood.sock" --state-dir "$tmp/flood-state" --tasks-dir tasks --workers 0 \
  --gpus none --log-level warn 2>"$tmp/flood.log" &
flood_pid=$!
cleanup() {
  kill -TERM "$pid" "$flood_pid" 2>/dev/null; wait "$pid" "$flood_pid" 2>/dev/null || true; rm -rf "$tmp"
}
for _ in $(seq 200); do
  "$build/cli/akactl" --socket "$tmp/flood.sock" ping >/dev/null 2>&1 && break
  sleep 0.05
done
echo "== ping under a flood of tasks.list and run.submit (2 flooding connections, $(ls -d tasks/*/*/ | wc -l) task folders)"
"$build/bench/daemon/akad_bench_ping" --socket "$tmp/flood.sock" --flood 2 --sequential 20000
