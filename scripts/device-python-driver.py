"""Helpers of scripts/device-python-driver (run on the GPU machine with the torch interpreter).

  compare BASE_WS SOL_WS      per visible configuration: triton.testing.do_bench (median) of the
                              baseline's and the solution's kernel through invoke, and the time
                              of the task's generate on the CPU and on the GPU; JSON on stdout
  attacks TASK WORK           writes WORK/attack-*.py: the solution's kernel.py, cheating
  ipc-export PATH             a cupy buffer's legacy IPC handle into PATH; waits for PATH.done
  ipc-import PATH             opens that handle and reads the buffer, or says why not
  verdict FILE                one line for an akacheck verdict
  summary WORK TASK...        the table of the run
  procs-plan PLAN OUT CONFIG  PLAN (a perf plan) with CONFIG (JSON) as its one configuration
  sample CWD OUT STOP         every 50 ms until STOP exists: the CPU and the involuntary context
                              switches of each python process working in CWD (driver_main.py or
                              runner_main.py), one JSON line per process at the end into OUT
  procs-summary WORK TID      one line per process pair of the procs phase, and per arrangement
"""
import glob
import importlib.util
import json
import os
import statistics
import sys
import time


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def compare(base_ws, sol_ws):
    import torch
    import triton

    torch.set_grad_enabled(False)
    reference = load_module("reference", f"{base_ws}/harness/reference.py")
    invoke = load_module("invoke", f"{base_ws}/harness/invoke.py")
    kernels = {"baseline": load_module("kernel_baseline", f"{base_ws}/kernel.py"),
               "solution": load_module("kernel_solution", f"{sol_ws}/kernel.py")}
    result = {}
    cfg = json.load(open(f"{base_ws}/configs.json"))
    for c in cfg["configs"] + (cfg["held_out"] if os.environ.get("PERF_HELD_OUT") == "1" else []):
        t0 = time.perf_counter()
        made = reference.generate(dict(c), 12345)
        cpu_s = time.perf_counter() - t0
        gpu = []
        for seed in range(6):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            reference.generate(dict(c), seed, device="cuda")
            torch.cuda.synchronize()
            gpu.append(time.perf_counter() - t0)
        inputs = {k: v.cuda() for k, v in made.items()}
        outputs = invoke.allocate_outputs(dict(c), inputs)
        r = {"generate_cpu_ms": cpu_s * 1e3, "generate_gpu_ms": statistics.median(gpu[1:]) * 1e3}
        for who, k in kernels.items():
            ms = triton.testing.do_bench(lambda: invoke.invoke(k, c, inputs, outputs), warmup=100, rep=500,
                                         return_mode="median")
            r[f"dobench_{who}_us"] = ms * 1e3
        if os.environ.get("COMPARE_PLACES") == "1":
            r.update(compare_places(c, reference, invoke, kernels, inputs, outputs, f"{base_ws}/harness"))
        result[c["name"]] = r
        print(c["name"], r, file=sys.stderr)
    json.dump(result, sys.stdout)


def compare_places(c, reference, invoke, kernels, inputs, outputs, harness):
    """COMPARE_PLACES=1: do_bench again with the inputs where a driven window has them, one thing
    changed at a time: made by the GPU generator (gpu), in memory of cuMemCreate mapped into a
    reserved range as the worker maps the driver's pool (vmm; the outputs too), and a new set of
    eight for every call (rotate: their translations and lines are not the last call's); and, not
    by do_bench, bursts of 20 calls over the rotating sets timed by events, back to back (burst)
    or each after 5 ms of the GPU idle (idle), as the windows follow the driver's set-up."""
    import torch
    import triton
    akacuda = load_module("akacuda", f"{harness}/akacuda.py")
    device = akacuda.current_device()
    placed = []

    def in_vmm(tensors):
        align = 2 << 20
        offsets, total = {}, 0
        for n, t in tensors.items():
            offsets[n] = total
            total += (t.numel() * t.element_size() + align - 1) // align * align
        handle, size = akacuda.create_handle(total, device)
        rng = akacuda.Reservation(size, device)
        rng.map(handle)
        placed.append((rng, handle))
        out = {}
        for n, t in tensors.items():
            out[n] = rng.tensor(offsets[n], t.dtype, list(t.shape))
            out[n].copy_(t)
        return out

    def bench(fn):
        return triton.testing.do_bench(fn, warmup=100, rep=500, return_mode="median") * 1e3

    r = {}
    try:
        on_gpu = {k: v.contiguous() for k, v in reference.generate(dict(c), 7, device="cuda").items()}
        vmm_in, vmm_out = in_vmm(inputs), in_vmm(outputs)
        sets = [{k: v.contiguous() for k, v in reference.generate(dict(c), 100 + i, device="cuda").items()}
                for i in range(8)]
        turn = [0]

        def rotating(k):
            turn[0] = (turn[0] + 1) % len(sets)
            invoke.invoke(k, c, sets[turn[0]], outputs)

        def bursts(k, idle_s):
            # 20 calls back to back over the rotating sets, events around them, as a window;
            # idle_s of host sleep before each burst lets the GPU idle as it does between windows.
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            per = []
            for _ in range(30):
                torch.cuda.synchronize()
                time.sleep(idle_s)
                start.record()
                for _ in range(20):
                    rotating(k)
                stop.record()
                torch.cuda.synchronize()
                per.append(start.elapsed_time(stop) * 1e3 / 20)
            return statistics.median(per)

        for who, k in kernels.items():
            r[f"dobench_{who}_gpu_us"] = bench(lambda: invoke.invoke(k, c, on_gpu, outputs))
            r[f"dobench_{who}_vmm_us"] = bench(lambda: invoke.invoke(k, c, vmm_in, vmm_out))
            r[f"dobench_{who}_rotate_us"] = bench(lambda: rotating(k))
            r[f"dobench_{who}_burst_us"] = bursts(k, 0)
            r[f"dobench_{who}_idle_us"] = bursts(k, 0.005)
    except Exception as e:  # an experiment: say why, keep the plain do_bench figures
        r["places_error"] = f"{type(e).__name__}: {e}"
    finally:
        torch.cuda.synchronize()
        vmm_in = vmm_out = None
        for rng, handle in placed:
            rng.close()
            akacuda.release(handle)
    return r


ATTACKS = {
    "a1-side-stream": '''
import torch
_side = None
_calls = 0


def silu_mul(x, y):
    """Attack a1: after three honest calls the work goes to a side stream and the call returns
    without waiting for it."""
    global _side, _calls
    _calls += 1
    if _calls <= 3:
        return _honest_silu_mul(x, y)
    if _side is None:
        _side = torch.cuda.Stream()
    with torch.cuda.stream(_side):
        _honest_silu_mul(x, y)
''',
    "b-deferred": '''
import threading
import time

import torch
_calls = 0


def silu_mul(x, y):
    """Attack b: after three honest calls the call returns at once and a thread does the work
    1 ms later."""
    global _calls
    _calls += 1
    if _calls <= 3:
        return _honest_silu_mul(x, y)

    def later():
        time.sleep(0.001)
        _honest_silu_mul(x, y)
        torch.cuda.synchronize()

    threading.Thread(target=later, daemon=True).start()
''',
}
# a2: a1, and the loader's device synchronise and event timer patched away, so that the worker
# posts done right after the launch.
ATTACKS["a2-side-stream-unsynced"] = ATTACKS["a1-side-stream"] + '''

torch.cuda.synchronize = lambda device=None: None
torch.cuda.Event.elapsed_time = lambda self, end: 0.001
'''


def attacks(task, work):
    honest = open(f"tasks/{task}/solution/kernel.py").read().replace("def silu_mul(", "def _honest_silu_mul(")
    for name, code in ATTACKS.items():
        with open(f"{work}/attack-{name}.py", "w") as f:
            f.write(honest + "\n" + code)


def ipc_export(path):
    import cupy as cp

    a = cp.arange(1024, dtype=cp.float32)
    handle = cp.cuda.runtime.ipcGetMemHandle(a.data.ptr)
    with open(path + ".tmp", "wb") as f:
        f.write(bytes(handle))
    os.rename(path + ".tmp", path)
    for _ in range(600):
        if os.path.exists(path + ".done"):
            return
        time.sleep(0.1)


def ipc_import(path):
    import cupy as cp

    try:
        p = cp.cuda.runtime.ipcOpenMemHandle(open(path, "rb").read())
        mem = cp.cuda.UnownedMemory(p, 4096, None)
        arr = cp.ndarray((1024,), cp.float32, cp.cuda.MemoryPointer(mem, 0))
        print(f"opened, sum {float(arr.sum()):.0f} (expected 523776), pid {os.getpid()}")
        cp.cuda.runtime.ipcCloseMemHandle(p)
    except Exception as e:
        print(f"failed: {type(e).__name__}: {e} (pid {os.getpid()})")


def median(v):
    return statistics.median(v) if v else float("nan")


def cv(v):
    return statistics.pstdev(v) / statistics.fmean(v) if len(v) > 1 else float("nan")


def reports(work, pattern):
    out = {}
    for path in sorted(glob.glob(f"{work}/{pattern}/report.json")):
        for g in json.load(open(path))["groups"]:
            d = out.setdefault(g["name"], {"samples": [], "empty": [], "inproc": [], "kept": 0, "tail": [],
                                           "empty_tail": []})
            d["samples"] += g["samples_ns"]
            d["empty"] += g["empty_ns"]
            d["inproc"] += g["inproc_ns"]
            d["kept"] += g["kept"]
            d["tail"] += g.get("tail_ns", [])
            d["empty_tail"] += g.get("empty_tail_ns", [])
    return out


def old_harness(ws):
    out = {}
    for path in glob.glob(f"{ws}/old-out/*.times.json"):
        out[os.path.basename(path)[:-len(".times.json")]] = median(json.load(open(path))["samples_ns"])
    return out


def verdict(work, name):
    return verdict_line(f"{work}/{name}.verdict.json")


def verdict_line(path):
    try:
        v = json.load(open(path))
    except (OSError, ValueError):
        return "no verdict"
    bad = [c for c in v["cases"] if not c["ok"]]
    line = f"{'ok' if v['ok'] else 'WRONG'}, {len(v['cases']) - len(bad)}/{len(v['cases'])} kept calls right"
    if bad:
        line += f" (first wrong: {bad[0]['name']}: {bad[0]['reason']})"
    return line


def summary(work, tasks):
    for task in tasks:
        tid = task.replace("/", "-")
        print(f"\n{task}: check baseline {verdict(work, tid + '-check-baseline')}, "
              f"solution {verdict(work, tid + '-check-solution')}")
        modes = {"perf": "queued", "sync": "synced", "graph": "graph"}
        # The variants of each mode after it (graph-chain-n60: graph windows, two switches).
        pres = sorted({os.path.basename(p)[len(tid) + 1:].rsplit("-baseline-", 1)[0]
                       for p in glob.glob(f"{work}/{tid}-*-baseline-*") if os.path.isdir(p)},
                      key=lambda p: (list(modes).index(p.split("-")[0]) if p.split("-")[0] in modes else 9, p))
        for pre in pres:
            mode = modes.get(pre.split("-")[0])
            if mode is None or not glob.glob(f"{work}/{tid}-{pre}-baseline-*/report.json"):
                continue
            print(f"  -- {mode} windows" + (f" ({pre.split('-', 1)[1]})" if "-" in pre else ""))
            perf_summary(work, tid, pre)
            trace_summary(work, tid, pre)
        attack_summary(work, tid)


def perf_summary(work, tid, pre):
    us = lambda ns: ns / 1e3
    base, sol = reports(work, f"{tid}-{pre}-baseline-*"), reports(work, f"{tid}-{pre}-candidate-*")
    try:
        cmp = json.load(open(f"{work}/{tid}-compare.json"))
    except (OSError, ValueError):
        cmp = {}
    old_b, old_s = old_harness(f"{work}/{tid}-baseline"), old_harness(f"{work}/{tid}-solution")
    for name in base:
        b, s = base[name], sol.get(name)
        overhead = median(b["empty"])
        print(f"  {name}: overhead (empty calls) {us(overhead):.1f} us, IQR "
              f"{us(statistics.quantiles(b['empty'], n=4)[2] - statistics.quantiles(b['empty'], n=4)[0]) if len(b['empty']) > 3 else float('nan'):.1f} us"
              f" over {len(b['empty'])} empty windows")
        rows = [("baseline", b), ("solution", s)]
        nets = {}
        for who, d in rows:
            if not d:
                print(f"    {who}: no perf report")
                continue
            net = [x - overhead for x in d["samples"]]
            nets[who] = median(net)
            print(f"    {who:8s} raw {us(median(d['samples'])):8.1f} us  net {us(median(net)):8.1f} us  "
                  f"in-process {us(median(d['inproc'])):8.1f} us  after done {us(median(d['tail'])):6.1f} us  "
                  f"CV raw {cv(d['samples']):.3f} net {cv(net):.3f}  n={len(d['samples'])} kept={d['kept']}")
        c = cmp.get(name, {})
        line = "    speedup: driver net "
        line += f"{nets['baseline'] / nets['solution']:.2f}x" if len(nets) == 2 else "?"
        if base[name]["samples"] and s:
            line += f", driver raw {median(b['samples']) / median(s['samples']):.2f}x"
        if c:
            line += (f"; do_bench {c['dobench_baseline_us']:.1f} / {c['dobench_solution_us']:.1f} us = "
                     f"{c['dobench_baseline_us'] / c['dobench_solution_us']:.2f}x")
        if name in old_b and name in old_s:
            line += f"; old harness {us(old_b[name]):.1f} / {us(old_s[name]):.1f} us = {old_b[name] / old_s[name]:.2f}x"
        print(line)
        if c:
            print(f"    generate: CPU {c['generate_cpu_ms']:.0f} ms, GPU {c['generate_gpu_ms']:.2f} ms per call")
        for place in ("gpu", "vmm", "rotate", "burst", "idle"):
            if f"dobench_baseline_{place}_us" in c:
                b_us, s_us = c[f"dobench_baseline_{place}_us"], c[f"dobench_solution_{place}_us"]
                how = "do_bench, inputs" if place in ("gpu", "vmm", "rotate") else "events, 20-call bursts,"
                print(f"    {how} {place}: {b_us:.1f} / {s_us:.1f} us = {b_us / s_us:.2f}x")
        if "places_error" in c:
            print(f"    do_bench places: {c['places_error']}")


def trace_lines(path, side):
    """The AKA_TRACE lines of one side's log: [(kind, calls, {mark: ns})]."""
    out = []
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return out
    for line in lines:
        f = line.split()
        if len(f) >= 4 and f[0] == "trace" and f[1] == side:
            marks = dict(x.split("=", 1) for x in f[4:] if "=" in x)
            out.append((f[2], int(f[3]), marks))
    return out


# The segments of a window, from the driver's and the worker's marks (the same CLOCK_MONOTONIC).
TRACE_SEGMENTS = (("hand", "t0", "sent"), ("wake", "sent", "recv"), ("import", "recv", "imported"),
                  ("map", "imported", "mapped"), ("launch", "mapped", "launched"), ("drain", "launched", "synced"),
                  ("done", "synced", "done"), ("pieces", "done", "t1"), ("exchange", "sent", "done"))


def trace_summary(work, tid, pre):
    """Where a window's time goes (AKA_TRACE=1 runs): per configuration, side and kind of window,
    the median of each segment in us per call, and the worker's events."""
    rows = {}
    for who in ("baseline", "candidate"):
        for log in sorted(glob.glob(f"{work}/{tid}-{pre}-{who}-*.driver.log")):
            drv = trace_lines(log, "driver")
            wrk = trace_lines(log[:-len(".driver.log")] + ".worker.log", "worker")
            for i, (kind, calls, m) in enumerate(drv):
                marks = {k: int(v) for k, v in m.items() if k != "group"}
                if len(wrk) == len(drv):
                    marks.update({k: int(v) for k, v in wrk[i][2].items()})
                d = rows.setdefault((m.get("group", "?"), who, kind), {})
                per = max(calls, 1)
                for name, a, b in TRACE_SEGMENTS:
                    if a in marks and b in marks:
                        d.setdefault(name, []).append((marks[b] - marks[a]) / per / 1e3)
                if "events" in marks:
                    d.setdefault("events", []).append(marks["events"] / per / 1e3)
                d.setdefault("total", []).append((marks["t1"] - marks["t0"]) / per / 1e3)
    if not rows:
        return
    names = [n for n, _, _ in TRACE_SEGMENTS] + ["events", "total"]
    print("    trace, median us per call: " + " ".join(names))
    for (group, who, kind), d in sorted(rows.items()):
        cells = " ".join(f"{median(d[n]):.1f}" if n in d else "-" for n in names)
        print(f"    {group} {who} {kind} (n={len(d['total'])}): {cells}")


def attack_summary(work, tid):
    us = lambda ns: ns / 1e3
    for a in ("a1-side-stream", "a2-side-stream-unsynced", "b-deferred"):
        if not os.path.exists(f"{work}/{tid}-check-{a}.driver.log"):
            continue
        r = reports(work, f"{tid}-perf-{a}-0")
        times = ", ".join(f"{n}: raw {us(median(d['samples'])):.1f} us, in-process {us(median(d['inproc'])):.1f} us, "
                          f"after done {us(median(d['tail'])):.1f} us" for n, d in r.items())
        print(f"  attack {a}: check {verdict(work, tid + '-check-' + a)}; perf kept calls "
              f"{verdict(work, tid + '-perf-' + a + '-0')}; {times or 'no perf report'}")


def procs_plan(plan, out, config):
    p = json.load(open(plan))
    c = json.loads(config)
    p["cases"] = [{"name": c["name"], "config": c}]
    g = p["perf"]["groups"][0]
    g.update({"name": c["name"], "cases": [c["name"]]})
    p["perf"]["groups"] = [g]
    json.dump(p, open(out, "w"))


def _proc_fields(pid):
    """(role, cpu, involuntary switches, voluntary switches, threads) of a harness process, or None."""
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        role = "driver" if any(a.endswith(b"driver_main.py") for a in cmd) else \
            "worker" if any(a.endswith(b"runner_main.py") for a in cmd) else None
        if role is None:
            return None
        stat = open(f"/proc/{pid}/stat").read()
        cpu = int(stat[stat.rindex(")") + 2:].split()[36])  # field 39, "processor"
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
        return (role, cpu, int(status["nonvoluntary_ctxt_switches"]), int(status["voluntary_ctxt_switches"]),
                int(status["Threads"]))
    except (OSError, ValueError, KeyError, IndexError):
        return None


def sample(cwd, out, stop):
    """Only processes by their working directory (this run's workspace), read, never signalled."""
    cwd = os.path.realpath(cwd)
    seen = {}
    while not os.path.exists(stop):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/cwd") != cwd:
                    continue
            except OSError:
                continue
            f = _proc_fields(pid)
            if f is None:
                continue
            d = seen.setdefault(pid, {"pid": int(pid), "role": f[0], "cpus": [], "nivcsw": 0, "nvcsw": 0, "threads": 0})
            d["cpus"].append(f[1])
            d["nivcsw"], d["nvcsw"], d["threads"] = f[2], f[3], max(d["threads"], f[4])
        time.sleep(0.05)
    with open(out, "w") as o:
        for d in seen.values():
            o.write(json.dumps(d) + "\n")


def procs_summary(work, tid):
    us = lambda ns: ns / 1e3
    by_arr = {}
    for path in sorted(glob.glob(f"{work}/{tid}-procs-*-*/report.json"), key=os.path.getmtime):
        run = os.path.dirname(path)
        arr = os.path.basename(run).split("-procs-")[1].rsplit("-", 1)[0]
        g = next(iter(reports(work, os.path.basename(run)).values()))  # its one configuration
        net = median(g["samples"]) - median(g["empty"])
        procs = [json.loads(line) for line in open(run + ".procs.jsonl")] if os.path.exists(run + ".procs.jsonl") else []
        side = {p["role"]: p for p in procs}
        drv, wrk = side.get("driver", {}), side.get("worker", {})
        n = min(len(drv.get("cpus", [])), len(wrk.get("cpus", [])))
        shared = sum(1 for a, b in zip(drv.get("cpus", [])[-n:], wrk.get("cpus", [])[-n:]) if a == b)
        by_arr.setdefault(arr, []).append(net)
        print(f"  {os.path.basename(run)}: net {us(net):7.1f} us (empty {us(median(g['empty'])):5.1f} us, "
              f"in-process {us(median(g['inproc'])):6.1f} us); driver CPUs {sorted(set(drv.get('cpus', [])))} "
              f"invol {drv.get('nivcsw', '?')} threads {drv.get('threads', '?')}; worker CPUs "
              f"{sorted(set(wrk.get('cpus', [])))} invol {wrk.get('nivcsw', '?')} threads {wrk.get('threads', '?')}; "
              f"same CPU in {shared}/{n} samples")
    for arr, nets in by_arr.items():
        print(f"  {arr}: {len(nets)} process pairs, net median {us(median(nets)):.1f} us, "
              f"min-max {us(min(nets)):.1f}-{us(max(nets)):.1f} us, CV {cv(nets):.3f}")


def main(argv):
    cmd = argv[1]
    if cmd == "compare":
        compare(argv[2], argv[3])
    elif cmd == "attacks":
        attacks(argv[2], argv[3])
    elif cmd == "ipc-export":
        ipc_export(argv[2])
    elif cmd == "ipc-import":
        ipc_import(argv[2])
    elif cmd == "verdict":
        print(verdict_line(argv[2]))
    elif cmd == "summary":
        summary(argv[2], argv[3:])
    elif cmd == "procs-plan":
        procs_plan(argv[2], argv[3], argv[4])
    elif cmd == "sample":
        sample(argv[2], argv[3], argv[4])
    elif cmd == "procs-summary":
        procs_summary(argv[2], argv[3])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
