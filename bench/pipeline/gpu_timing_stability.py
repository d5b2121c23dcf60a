#!/usr/bin/env python3
"""Timing stability of GPU scoring against triton.testing.do_bench, for one kernel.

  gpu_timing_stability.py dobench --lib LIB --rows R --cols C
      one do_bench measurement (median of its repetitions, L2 cleared between them) of
      softmax_rows(x, y, rows, cols) from a shared library built from a hip2hip/softmax
      kernel.hip; prints {"median_ms": ...}. Run it once per process: each run is one
      "session", like one akad scoring.
  gpu_timing_stability.py summarise --status STATUS.json --dobench FILE [--json OUT]
      STATUS.json: `akactl --json status RUN` of a run that scored the same kernel N times
      (or the attempts of several runs in one {"attempts": [...]}; scorings of different task
      ids, e.g. one task and a copy of it with another timing plan, are summarised apart);
      FILE: one dobench JSON line per session. Prints, per task and configuration, the medians
      akad reported for the candidate in every scoring, their coefficient of variation, each
      scoring's speedup and interval, the speedups' coefficient of variation, and the same for
      do_bench.

The coefficient of variation is the sample standard deviation over the mean, in percent.
"""
import argparse
import json
import os
import statistics
import sys


def cv_percent(values):
    if len(values) < 2:
        return None
    return 100.0 * statistics.stdev(values) / statistics.fmean(values)


def bus_location(bus_id):
    """'00:06.0' from nvidia-smi's '0000:00:06.0' or torch's '00000000:00:06.0'."""
    if not bus_id:
        return "?"
    return str(bus_id).lower().split(":", 1)[-1]


def dobench(args):
    import ctypes

    import torch
    import triton.testing

    lib = ctypes.CDLL(args.lib)
    lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.softmax_rows.restype = None
    x = torch.randn(args.rows, args.cols, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)

    def call():
        lib.softmax_rows(x.data_ptr(), y.data_ptr(), args.rows, args.cols)

    call()
    torch.cuda.synchronize()
    err = (y - torch.softmax(x, dim=1)).abs().max().item()
    if not err < 1e-5:
        print(f"dobench: the kernel's output is wrong (max error {err})", file=sys.stderr)
        return 1
    ms = triton.testing.do_bench(call, warmup=25, rep=200, return_mode="median")
    props = torch.cuda.get_device_properties(0)
    try:  # the same form as nvidia-smi's pci.bus_id, which akad's scorings record
        gpu = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:
        gpu = "cuda:" + os.environ.get("CUDA_VISIBLE_DEVICES", "?")
    print(json.dumps({"median_ms": ms, "rows": args.rows, "cols": args.cols, "device": props.name, "gpu": gpu}))
    return 0


def summarise(args):
    with open(args.status) as f:
        status = json.load(f)
    per_config, per_gpu, speedups = {}, {}, {}
    tasks = {a.get("task_id") for a in status["attempts"]}
    for a in status["attempts"]:
        result = a.get("result") or {}
        perf = (result.get("gates") or {}).get("performance") or {}
        if a.get("state") != "scored" or not perf.get("pass"):
            print(f"attempt {a.get('id')}: not scored with a passing performance gate "
                  f"({a.get('state')}, {result.get('failure') or a.get('error')})", file=sys.stderr)
            continue
        states = perf.get("gpu_states") or [{}]
        gpu = bus_location(((states[0].get("state") or {}).get("before") or {}).get("pci_bus_id"))
        task = a.get("task_id") or "?"
        interval = result.get("speedup_interval") or {}
        walls = result.get("stage_wall_s") or {}
        print(f"attempt {a.get('id')} ({task}): speedup {result.get('speedup')} interval "
              f"[{interval.get('low')}, {interval.get('high')}] over {len(interval.get('rounds') or [])} rounds, "
              f"stages (s) {json.dumps(walls)}")
        if isinstance(result.get("speedup"), (int, float)):
            speedups.setdefault(task, []).append(result["speedup"])
        for c in perf["configs"]:
            name = c["name"] if len(tasks) == 1 else f"{task} {c['name']}"
            per_config.setdefault(name, []).append(c["candidate"]["median_ns"] / 1e3)
            per_gpu.setdefault((name, gpu), []).append(c["candidate"]["median_ns"] / 1e3)
    sessions, sessions_gpu = [], {}
    with open(args.dobench) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                d = json.loads(line)
                sessions.append(d["median_ms"] * 1e3)
                sessions_gpu.setdefault(bus_location(d.get("gpu")), []).append(d["median_ms"] * 1e3)
    out = {"akad": {}, "do_bench": {"medians_us": sessions, "cv_percent": cv_percent(sessions)}}
    for name, medians in sorted(per_config.items()):
        out["akad"][name] = {"medians_us": medians, "cv_percent": cv_percent(medians)}
        print(f"akad     {name:<16} n={len(medians):<3} mean median {statistics.fmean(medians):9.2f} us  "
              f"CV {cv_percent(medians) or float('nan'):.2f}%  values {[round(v, 2) for v in medians]}")
    out["speedups"] = {}
    for task, values in sorted(speedups.items()):
        out["speedups"][task] = {"values": values, "cv_percent": cv_percent(values)}
        print(f"akad     {task} speedups n={len(values)} CV {cv_percent(values) or float('nan'):.2f}%  values "
              f"{[round(v, 3) for v in values]}")
    if sessions:
        print(f"do_bench {'(same kernel)':<16} n={len(sessions):<3} mean median {statistics.fmean(sessions):9.2f} us  "
              f"CV {cv_percent(sessions) or float('nan'):.2f}%  values {[round(v, 2) for v in sessions]}")
    for (name, gpu), medians in sorted(per_gpu.items()):
        print(f"  akad     {name:<16} on {gpu}: n={len(medians)} CV {cv_percent(medians) or float('nan'):.2f}%")
    for gpu, medians in sorted(sessions_gpu.items()):
        print(f"  do_bench on {gpu}: n={len(medians)} CV {cv_percent(medians) or float('nan'):.2f}%")
    out["akad_per_gpu"] = {f"{n} {g}": v for (n, g), v in per_gpu.items()}
    out["do_bench_per_gpu"] = sessions_gpu
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dobench")
    d.add_argument("--lib", required=True)
    d.add_argument("--rows", type=int, required=True)
    d.add_argument("--cols", type=int, required=True)
    s = sub.add_parser("summarise")
    s.add_argument("--status", required=True)
    s.add_argument("--dobench", required=True)
    s.add_argument("--json")
    args = p.parse_args()
    return dobench(args) if args.cmd == "dobench" else summarise(args)


if __name__ == "__main__":
    sys.exit(main())
