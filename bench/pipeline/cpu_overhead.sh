#!/usr/bin/env bash
# Pipeline overhead on the CPU suite: what akad adds around one attempt of a real task with the
# reference agent, through a real akad and akabox (root). An attempt's overhead is its time from
# being claimed to being scored (started_at to ended_at) minus the time spent inside the stages'
# own programs (agent, trusted build, compile, runners, checker: result.timing.in_commands_s),
# so it holds the workspace, the sandboxes' set-up, the snapshot, extraction and the store.
# ROUNDS rounds of the suite (default 1) in one run, one worker; a task's first attempt also
# builds its trusted programs (inside a sandbox: command time). Prints the median and p90
# overhead per attempt, overall and per task, and the submit-to-scored time of the whole run
# (bench/pipeline/overhead_report.py).
#
#   bench/pipeline/cpu_overhead.sh [build-dir] [rounds]
#
# Its figures are in docs/operations.md, "Pipeline overhead".
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${2:-1}
if [[ $(id -u) -ne 0 ]]; then echo "cpu_overhead.sh: run as root (akad's sandboxes)" >&2; exit 2; fi
tmp=$(mktemp -d /tmp/akad-cpu-bench-XXXXXX)
pid=
trap '[[ -n $pid ]] && kill -TERM $pid 2>/dev/null; [[ -n $pid ]] && wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
"$build/daemon/akad" --socket "$tmp/s" --state-dir "$tmp/state" --tasks-dir "$root/tasks" \
  --cgroup-parent "akad-cpu-bench-$$" --gpus none 2>"$tmp/akad.log" &
pid=$!
for _ in $(seq 100); do "$build/cli/akactl" --socket "$tmp/s" ping >/dev/null 2>&1 && break; sleep 0.05; done
ctl() { "$build/cli/akactl" --socket "$tmp/s" "$@"; }
submit() { ctl --json submit cpu --agent reference "$@" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["id"])'; }

run=$(submit --attempts "$rounds")
ctl watch "$run" >/dev/null
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); akad $("$build/daemon/akad" --version)"
ctl --json status "$run" | python3 "$root/bench/pipeline/overhead_report.py"
