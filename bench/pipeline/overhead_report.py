#!/usr/bin/env python3
# Reads `akactl --json status RUN` on stdin and prints the pipeline's overhead per attempt: the
# time from an attempt's claim to its score (started_at to ended_at) less the time inside the
# stages' own programs (result.timing.in_commands_s). Used by cpu_overhead.sh; by hand:
#   akactl --json status RUN | bench/pipeline/overhead_report.py
import json
import statistics
import sys
from collections import defaultdict
from datetime import datetime

d = json.load(sys.stdin)
runinfo, attempts = d["run"], d["attempts"]
t = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")
scored = [a for a in attempts if a["state"] == "scored" and a.get("result") and "timing" in a["result"]]
if not scored:
    sys.exit("no attempt of the run was scored")
if len(scored) != len(attempts):
    print(f"only {len(scored)} of {len(attempts)} attempts were scored:",
          [(a["task_id"], a["state"], a.get("error")) for a in attempts if a not in scored])


def overhead(a):
    span = (t(a["ended_at"]) - t(a["started_at"])).total_seconds()
    return span - a["result"]["timing"]["in_commands_s"]


def pct(xs, p):
    xs = sorted(xs)
    return xs[int(p * (len(xs) - 1))]


over = [overhead(a) for a in scored]
inside = [a["result"]["timing"]["in_commands_s"] for a in scored]
correct = sum(1 for a in scored if a["result"].get("correct"))
print(f"attempts: {len(scored)} scored, {correct} correct")
if runinfo.get("ended_at"):
    span = (t(runinfo["ended_at"]) - t(runinfo["created_at"])).total_seconds()
    print(f"submit to scored for the whole run: {span:.1f} s")
print(f"per attempt: in commands median {statistics.median(inside):.2f} s; "
      f"overhead median {1000 * statistics.median(over):.0f} ms, p90 {1000 * pct(over, 0.9):.0f} ms, "
      f"min {1000 * min(over):.0f} ms")
by = defaultdict(list)
for a in scored:
    by[a["task_id"]].append(overhead(a))
for task in sorted(by):
    print(f"  {task:<16} overhead median {1000 * statistics.median(by[task]):.0f} ms over {len(by[task])}")
