"""runner - the only program that contains candidate code (the workspace's kernel.py, called
through the task's harness/invoke.py, which defines
    allocate_outputs(config: dict, inputs: dict) -> dict[str, torch.Tensor]   on the GPU
    invoke(kernel, config: dict, inputs: dict, outputs: dict) -> None          fills outputs).

  runner check --plan P --data D --out O   one kernel call per case, writes O/<case>.out.akt
  runner perf  --plan P --data D --out O   timed calls per perf group, writes
                                           O/<group>.times.json, O/<case>.out.akt and
                                           O/gpu_state.json (clocks/temperature before, after)

A timed call: (untimed) copy the next input set into the same input tensors on the GPU, fill the
outputs with 0xff bytes (NaN), write flush_bytes of GPU memory (evicts L2), synchronise the
device, queue a short GPU wait that hides the host's launch latency; then record the start
event, call, record the stop event and synchronise the whole device. samples_ns are event times; wall_ns (host clock around the same span, including launch
and synchronisation latency) come alongside for checks. Seeds in the plan are ignored.
Exit status: 0 when every case ran, 1 when one failed (the others still run), 2 on usage.
"""
import json
import os
import subprocess
import sys
import time
import traceback

HARNESS = os.path.dirname(os.path.abspath(__file__))
WORKSPACE = os.path.dirname(HARNESS)
sys.path.insert(0, HARNESS)
sys.path.insert(0, WORKSPACE)  # the candidate's modules (kernel.py) come first

import akaplan  # noqa: E402
import akt  # noqa: E402


def poison(outputs):
    # All-ones bytes: NaN for every float dtype, -1 for integers, like the hip harness.
    for t in outputs.values():
        if t.numel():
            t.view(-1).view(torch.uint8).fill_(0xFF)


def report(what, e):
    print(f"runner: {what}: {type(e).__name__}: {e}", file=sys.stderr)
    tb = traceback.extract_tb(e.__traceback__)
    if tb:
        print("runner:   at " + "; ".join(f"{os.path.basename(f.filename)}:{f.lineno}" for f in tb[-3:]),
              file=sys.stderr)


def check(plan, data, out_dir):
    failures = 0
    for case in plan["cases"]:
        try:
            config = dict(case["config"])
            inputs = {k: v.cuda() for k, v in akt.read_akt(os.path.join(data, case["name"] + ".in.akt")).items()}
            outputs = invoke.allocate_outputs(config, inputs)
            poison(outputs)
            torch.cuda.synchronize()
            invoke.invoke(kernel, config, inputs, outputs)
            torch.cuda.synchronize()
            akt.write_akt(os.path.join(out_dir, case["name"] + ".out.akt"), outputs)
        except Exception as e:
            report(f"case {case['name']}", e)
            failures += 1
    return 1 if failures else 0


def gpu_state():
    """GPU clocks and temperature for the scorer's throttling check: nvidia-smi when the
    sandbox has it (every visible GPU, with CUDA_VISIBLE_DEVICES), else what torch offers."""
    state = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    fields = ["index", "pci.bus_id", "clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu", "power.draw"]
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode == 0:
            gpus = []
            for line in r.stdout.strip().splitlines():
                values = [v.strip() for v in line.split(",")]
                gpu = {}
                for k, v in zip(fields, values):
                    try:
                        gpu[k] = float(v)
                    except ValueError:
                        gpu[k] = v
                gpus.append(gpu)
            state["gpus"] = gpus
            state["source"] = "nvidia-smi"
            return state
    except (OSError, subprocess.SubprocessError):
        pass
    state["source"] = "torch (nvidia-smi unavailable)"
    for key, fn in (("clocks.sm", "clock_rate"), ("temperature.gpu", "temperature")):
        try:
            state[key] = getattr(torch.cuda, fn)()
        except Exception as e:  # needs pynvml, which may be missing
            state[key] = f"unavailable: {type(e).__name__}"
    return state


# GPU cycles of a wait queued just before the start event (about 100 us at the H200's 2 GHz; longer
# at lower clocks). The host needs tens of microseconds to launch a Triton kernel or a ctypes
# call, more when other processes load the CPU; without the wait the GPU would sit idle between
# the start event and the kernel, and the events would time the host's launch latency too. With
# it the candidate's work is already queued when the GPU reaches the start event, so the events
# time the GPU work alone (do_bench gets the same from the cache clear it queues before each
# call). wall_ns still covers the host side.
LAUNCH_SHADOW_CYCLES = 200_000


def launch_shadow():
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        sleep(LAUNCH_SHADOW_CYCLES)


def perf_group(plan, group, data, out_dir, flush):
    first = akaplan.find_case(plan, group["cases"][0])
    config = dict(first["config"])
    staged = []
    for name in group["cases"]:
        if akaplan.find_case(plan, name)["config"] != first["config"]:
            raise ValueError(f"case '{name}' has another configuration than '{first['name']}'")
        s = {k: v.cuda() for k, v in akt.read_akt(os.path.join(data, name + ".in.akt")).items()}
        if staged:
            ref = staged[0]
            if list(s) != list(ref) or any(s[k].dtype != ref[k].dtype or s[k].shape != ref[k].shape for k in s):
                raise ValueError(f"input sets of perf group '{group['name']}' differ in their tensors")
        staged.append(s)
    # One set of input tensors for the whole group: every call sees the same addresses, and
    # rotating distinct contents through them defeats caching results by pointer.
    inputs = {k: v.clone() for k, v in staged[0].items()}
    outputs = invoke.allocate_outputs(config, inputs)
    n = len(staged)

    def prepare(k):
        for name, t in inputs.items():
            t.copy_(staged[k][name])
        poison(outputs)

    for i in range(plan["perf"]["warmup"]):
        prepare(i % n)
        torch.cuda.synchronize()
        invoke.invoke(kernel, config, inputs, outputs)
        torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples, wall = [], []
    count = plan["perf"]["samples"]
    total = max(count, n)
    for i in range(total):
        k = i % n
        prepare(k)
        if flush is not None:
            flush.fill_(i % 251 + 1)
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        launch_shadow()
        start.record()
        invoke.invoke(kernel, config, inputs, outputs)
        stop.record()
        torch.cuda.synchronize()
        t1 = time.perf_counter_ns()
        if i < count:
            samples.append(int(start.elapsed_time(stop) * 1e6))
            wall.append(t1 - t0)
        if i + n >= total:  # the last call on input set k
            akt.write_akt(os.path.join(out_dir, group["cases"][k] + ".out.akt"), outputs)
    with open(os.path.join(out_dir, group["name"] + ".times.json"), "w") as f:
        json.dump({"samples_ns": samples, "wall_ns": wall, "warmup": plan["perf"]["warmup"],
                   "input_sets": n, "timer": "torch.cuda.Event"}, f)
        f.write("\n")
    median = sorted(samples)[len(samples) // 2]
    print(f"runner: {group['name']}: median {median / 1e3:.1f} us over {len(samples)} samples", file=sys.stderr)


def perf(plan, data, out_dir):
    if plan["perf"] is None:
        raise ValueError("the plan has no 'perf' section")
    state = {"before": gpu_state()}
    fb = plan["perf"]["flush_bytes"]
    flush = torch.empty(fb, dtype=torch.uint8, device="cuda") if fb > 0 else None
    failures = 0
    for group in plan["perf"]["groups"]:
        try:
            perf_group(plan, group, data, out_dir, flush)
        except Exception as e:
            report(f"perf group {group['name']}", e)
            failures += 1
    state["after"] = gpu_state()
    with open(os.path.join(out_dir, "gpu_state.json"), "w") as f:
        json.dump(state, f, indent=1)
        f.write("\n")
    return 1 if failures else 0


def main(argv):
    global torch, invoke, kernel
    if len(argv) < 2 or argv[1] not in ("check", "perf"):
        sys.stderr.write("usage: runner check|perf --plan P --data D --out O\n")
        return 2
    try:
        opts = akaplan.parse_options(argv[2:], ("plan", "data", "out"))
        plan = akaplan.read_plan(opts["plan"])
        os.makedirs(opts["out"], exist_ok=True)
    except Exception as e:
        print(f"runner: {e}", file=sys.stderr)
        return 2
    try:
        import torch
        import invoke  # the task's harness/invoke.py
        import kernel  # the candidate
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to torch")
        with torch.no_grad():
            if argv[1] == "check":
                return check(plan, opts["data"], opts["out"])
            return perf(plan, opts["data"], opts["out"])
    except Exception as e:
        report("fatal", e)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
