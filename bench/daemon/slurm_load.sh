#!/usr/bin/env bash
# The Slurm front end's own throughput (issue 27): how many attempts a minute akad submits,
# follows and takes the results of, against the test cluster (scripts/slurm-test-cluster), with
# a node program that does no work. It stands in for akad-node: it writes the incarnation's
# result.json as akad-node does (whole, by rename) and returns, so what is measured is sbatch,
# Slurm's scheduling and job start, akad's squeue polling and its pick-up of results, not the
# attempts' own sandboxes (measured elsewhere: docs/operations.md, "Slurm").
#
#   bench/daemon/slurm_load.sh [build-dir] [attempts-per-task] [workers]
#
# 8 CPU tasks x attempts-per-task (default 25: 200 attempts), akad --workers (default 64: one
# per GPU of a 64-GPU cluster). Prints wall time, attempts per minute, akad's CPU seconds per
# attempt and the squeue calls it made.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(cd "${1:-build}" && pwd)
per_task=${2:-25}
workers=${3:-64}
for bin in "$build/daemon/akad" "$build/cli/akactl"; do
  [[ -x $bin ]] || { echo "slurm_load.sh: $bin missing; build first" >&2; exit 2; }
done
tmp=$(mktemp -d /tmp/akad-slurm-load-XXXXXX)
pid=
cleanup() {
  [[ -n $pid ]] && { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  scripts/slurm-test-cluster stop "$tmp/cluster" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# A node as large as the queue is deep, so every job can start at once.
eval "$(AKAD_TEST_CLUSTER_CPUS=$workers AKAD_TEST_CLUSTER_MEM_MB=$((workers * 6000)) scripts/slurm-test-cluster start "$tmp/cluster")"
cat >"$tmp/node" <<'NODE'
#!/bin/sh
# akad-node's contract without the attempt: usage "run --job DIR".
out="$3/out-$SLURM_JOB_ID-${SLURM_RESTART_COUNT:-0}"
mkdir -p "$out"
printf '{"ok":true,"result":{"load_test":true},"snapshot":null,"finished_at":"%s"}\n' \
  "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" >"$out/result.json.tmp"
sync "$out/result.json.tmp"
mv "$out/result.json.tmp" "$out/result.json"
NODE
chmod 755 "$tmp/node"
"$build/daemon/akad" --socket "$tmp/akad.sock" --state-dir "$tmp/state" --tasks-dir tasks \
  --gpus none --cgroup-parent "akad-slurm-load-$$" --workers "$workers" \
  --executor slurm --slurm-shared "$tmp/shared" --slurm-node-program "$tmp/node" \
  --log-level warn 2>"$tmp/akad.log" &
pid=$!
ctl() { "$build/cli/akactl" --socket "$tmp/akad.sock" "$@"; }
for _ in $(seq 300); do ctl ping >/dev/null 2>&1 && break; sleep 0.1; done

cpu_s() { awk '{printf "%.2f", ($14 + $15) / '"$(getconf CLK_TCK)"'}' "/proc/$pid/stat"; }
cpu0=$(cpu_s)
t0=$(date +%s.%N)
run=$(ctl --json submit cpu --agent noop -n "$per_task" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["id"])')
ctl watch "$run" >/dev/null
t1=$(date +%s.%N)
cpu1=$(cpu_s)
ctl --json status "$run" >"$tmp/status.json"
python3 - "$tmp/status.json" "$t0" "$t1" "$cpu0" "$cpu1" "$workers" <<'PY'
import json, sys
status = json.load(open(sys.argv[1]))
t0, t1, c0, c1 = map(float, sys.argv[2:6])
attempts = status["attempts"]
scored = sum(1 for a in attempts if a["state"] == "scored")
jobs = {a.get("executor_job") for a in attempts}
wall = t1 - t0
print(f"== Slurm front end load: {len(attempts)} attempts, --workers {sys.argv[6]}")
print(f"scored {scored}/{len(attempts)}, distinct Slurm jobs {len(jobs)}")
print(f"wall {wall:.1f} s -> {len(attempts) / wall * 60:.0f} attempts/minute")
print(f"akad CPU {c1 - c0:.2f} s -> {(c1 - c0) / len(attempts) * 1000:.1f} ms per attempt")
PY
ctl --json info | python3 -c 'import json,sys; print("squeue calls:", json.load(sys.stdin)["executor_state"].get("queue_polls"))'
