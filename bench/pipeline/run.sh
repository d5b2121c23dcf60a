#!/usr/bin/env bash
# Pipeline overhead: N attempts (default 50) of a trivial task with the noop agent, through a
# real akad and akabox. Prints attempts per minute and the median per-attempt time spent outside
# the commands the task and agent run (prepare, sandbox spawns, snapshot, store), from each
# attempt's result.timing. Usage: bench/pipeline/run.sh [build-dir] [attempts]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
n=${2:-50}
tmp=$(mktemp -d /tmp/akad-bench-XXXXXX)
parent=akad-bench-$$
# The daemon, its files and the cgroup parent it made for its sandboxes (empty once it stopped).
cleanup() {
  kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$tmp"
  for c in /sys/fs/cgroup/$parent /sys/fs/cgroup/*/$parent; do [[ -d $c ]] && rmdir "$c" 2>/dev/null; done
  return 0
}
trap cleanup EXIT
"$build/daemon/akad" --socket "$tmp/s" --state-dir "$tmp/state" --tasks-dir "$root/bench/pipeline/tasks" \
  --cgroup-parent "$parent" --gpus none 2>"$tmp/akad.log" &
pid=$!
for _ in $(seq 100); do "$build/cli/akactl" --socket "$tmp/s" ping >/dev/null 2>&1 && break; sleep 0.05; done
ctl() { "$build/cli/akactl" --socket "$tmp/s" "$@"; }
# One warm-up attempt builds the trusted programs, which every later attempt reuses.
warm=$(ctl --json submit bench/trivial --agent noop | python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["id"])')
ctl watch "$warm" >/dev/null
run=$(ctl --json submit bench/trivial --agent noop --attempts "$n" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["id"])')
ctl watch "$run" >/dev/null
ctl --json status "$run" | python3 -c '
import json, statistics, sys
from datetime import datetime
d = json.load(sys.stdin)
runinfo, attempts = d["run"], d["attempts"]
ok = [a for a in attempts if a["state"] == "scored" and a["result"]["correct"]]
t = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")
span = (t(runinfo["ended_at"]) - t(runinfo["created_at"])).total_seconds()
over = sorted(a["result"]["timing"]["overhead_s"] for a in ok)
inside = sorted(a["result"]["timing"]["in_commands_s"] for a in ok)
total = sorted(a["result"]["timing"]["total_s"] for a in ok)
print(f"attempts scored correct: {len(ok)}/{len(attempts)}")
print(f"wall time of the run: {span:.1f} s -> {60 * len(attempts) / span:.1f} attempts/min")
print(f"per attempt: total median {1000*statistics.median(total):.0f} ms, in commands {1000*statistics.median(inside):.0f} ms, "
      f"overhead median {1000*statistics.median(over):.0f} ms (p90 {1000*over[int(0.9*(len(over)-1))]:.0f} ms)")
'
