"""runner - the only program that contains candidate code (the workspace's kernel.py, called
through the task's harness/invoke.py, which defines
    allocate_outputs(config: dict, inputs: dict) -> dict[str, torch.Tensor]   on the GPU
    invoke(kernel, config: dict, inputs: dict, outputs: dict) -> None          fills outputs).

  runner serve --channel SOCK              the worker of a trusted driver (driver_main.py):
                                           connects to SOCK and runs the calls it sends until
                                           it says goodbye. It holds nothing worth tampering
                                           with: no clock that counts, no input before its
                                           call, no say in which outputs get checked.
  runner check --plan P --data D --out O   one kernel call per case, writes O/<case>.out.akt
  runner perf  --plan P --data D --out O   timed calls per perf group, writes
                                           O/<group>.times.json, O/<case>.out.akt and
                                           O/gpu_state.json (clocks/temperature before, after)

serve, per configuration (akachannel.py, akacuda.py): the driver names the input tensors; the
runner asks allocate_outputs for the output shapes (on placeholder inputs), answers with them,
maps the header page and the GPU memory the driver shares, and then, per `go`: records a start
event, calls invoke (not on an empty call), records a stop event, synchronises its device, writes
the event time to the header (the driver's second opinion) and posts `done`. In a queued window
(WINDOW_QUEUED) a call posts `done` once invoke has returned; the events span the window and the
device is synchronised at its last call only.

check and perf are the older in-process harness (the hip harness's twin, and the scorer's path
before the driver; scripts/device-python-driver compares the driver with it): a timed call
there is (untimed) copy the next input set into the same input tensors on the GPU, fill the
outputs with 0xff bytes (NaN), write flush_bytes of GPU memory (evicts L2), synchronise the
device, queue a short GPU wait that hides the host's launch latency;
then record the start event, call, record the stop event and synchronise the whole device.
samples_ns are event times; wall_ns (host clock around the same span, including launch and
synchronisation latency) come alongside for checks. Seeds in the plan are ignored.
Exit status: 0 when every case ran (serve: after the driver's goodbye), 1 when one failed (the
others still run; serve: the channel or a call failed), 2 on usage.
"""
import json
import os
import sys
import time
import traceback

# One hardware queue for the CUDA context made later: a queued window's calls may not run side by
# side on streams of the candidate's own (the scorer's sandbox sets the same before start).
os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"

HARNESS = os.path.dirname(os.path.abspath(__file__))
WORKSPACE = os.path.dirname(HARNESS)
sys.path.insert(0, HARNESS)
sys.path.insert(0, WORKSPACE)  # the candidate's modules (kernel.py) come first

import akachannel as chan  # noqa: E402
import akaplan  # noqa: E402


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
    state = {"before": akacuda.gpu_state()}
    fb = plan["perf"]["flush_bytes"]
    flush = torch.empty(fb, dtype=torch.uint8, device="cuda") if fb > 0 else None
    failures = 0
    for group in plan["perf"]["groups"]:
        try:
            perf_group(plan, group, data, out_dir, flush)
        except Exception as e:
            report(f"perf group {group['name']}", e)
            failures += 1
    state["after"] = akacuda.gpu_state()
    with open(os.path.join(out_dir, "gpu_state.json"), "w") as f:
        json.dump(state, f, indent=1)
        f.write("\n")
    return 1 if failures else 0


def dtype_of(name):
    if name not in akt.NAMES:
        raise ValueError(f"unknown dtype '{name}'")
    return akt.DTYPES[akt.NAMES.index(name)]


def output_table(config, in_layout):
    """The output shapes allocate_outputs gives for inputs of these shapes (placeholders,
    uninitialised, freed right after)."""
    placeholders = {n: torch.empty(dims, dtype=dt, device="cuda") for n, dt, dims in in_layout}
    outputs = invoke.allocate_outputs(dict(config), placeholders)
    table = []
    for n, t in outputs.items():
        if not isinstance(t, torch.Tensor) or t.dtype not in akt.DTYPES:
            raise ValueError(f"allocate_outputs gave '{n}' of an unsupported type or dtype")
        table.append({"name": n, "dtype": akt.dtype_name(t.dtype), "dims": list(t.shape)})
    del placeholders, outputs
    torch.cuda.empty_cache()
    return table


# AKA_TRACE=1: one line on stderr per graph window with the worker's host times (the driver's
# trace says more); a diagnostic, never read by the driver.
TRACE = os.environ.get("AKA_TRACE") == "1"
# A graph window's calls run as one launch of a graph whose child nodes are the calls' graphs, in
# a chain (akacuda.GraphChain): a call starts only once the whole call before it has finished,
# as with one launch per call, without the gap between launches on the GPU (docs/scoring.md,
# "Where graph windows lost time"). A call whose graph cannot be a child (a memory node: torch's
# cudaMallocAsync allocator) falls back to one launch per call, which only costs the candidate
# time. AKA_GRAPH_CHAIN=0 launches every call's graph by itself, for scripts/device-python-driver's
# window variants (graph/loop); nothing scores with it.
GRAPH_CHAIN = os.environ.get("AKA_GRAPH_CHAIN", "1") != "0"


def new_graph():
    """A graph to capture one call into, and whether its CUgraph is kept for the chain (torch 2.8
    on), in which case it is instantiated only when asked (or at its first replay)."""
    if GRAPH_CHAIN:
        try:
            return torch.cuda.CUDAGraph(keep_graph=True), True
        except TypeError:
            pass
    return torch.cuda.CUDAGraph(), False


def receive(sock, what):
    msg, fd = chan.receive_message(sock)
    if msg is None:
        if fd is not None:
            os.close(fd)
        raise RuntimeError(f"the driver hung up instead of sending {what}")
    return msg, fd


def serve_group(sock, group, device):
    """Runs the calls of one configuration until the driver ends it."""
    config = dict(group["config"])
    in_layout = [(t["name"], dtype_of(t["dtype"]), list(t["dims"])) for t in group["inputs"]]
    table = output_table(config, in_layout)
    out_layout = [(t["name"], dtype_of(t["dtype"]), t["dims"]) for t in table]
    chan.send_message(sock, {"type": "outputs", "outputs": table})

    region, fd = receive(sock, "the region")
    if fd is None or region.get("type") != "region":
        raise RuntimeError("the driver sent no region")
    header = chan.Header.attach(fd, int(region["size"]))
    memory = None
    try:
        dm, fd = receive(sock, "the device memory")
        if fd is None or dm.get("type") != "device-memory" or dm.get("api") != "cuda-vmm":
            raise RuntimeError("the driver sent no device memory")
        try:
            if dm["device"] != akacuda.device_id(device):
                raise RuntimeError(f"the driver's GPU {dm['device']} is not this worker's "
                                   f"({akacuda.device_id(device)})")
            memory = akacuda.SharedMemory.import_fd(fd, int(dm["size"]), device)
        finally:
            os.close(fd)
        output_sets = output_sets_in(memory, out_layout, dm)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        alive = lambda: not chan.peer_gone(sock)  # a driver that is gone ends this worker too
        last = header.go()  # before "mapped": the first go may follow it at once
        chan.send_message(sock, {"type": "mapped"})
        pool = graph = None
        captured = False  # a graph window of this group's calls has been captured (the first warms up)
        calls = 0  # of the window so far (queued: the events span them all)
        while True:
            n = header.wait_go(last, alive)
            last = n
            cmd = header.cmd()
            slot, out_set, window = header.call_fields()
            status, inproc = chan.OK, 0
            if cmd in (chan.CALL, chan.EMPTY):
                try:
                    if window & chan.WINDOW_OPEN:
                        # This window's inputs: an allocation of their own, whose descriptor the
                        # driver sends only after its clock has started; unmapped after the
                        # window's last call.
                        if pool is not None:
                            pool.close()
                            pool = None
                        pool = InputPool(receive(sock, "the inputs"), in_layout, device)
                    if pool is None:
                        raise RuntimeError("the driver named an input set before sending a pool")
                    if out_set >= len(output_sets):
                        raise RuntimeError(f"the driver named output set {out_set}")
                    inputs = pool.inputs(slot)
                    # Queued: the events span the window and the device is synchronised once,
                    # at its last call; until then done means launched.
                    queued = window & chan.WINDOW_QUEUED
                    if not queued or window & chan.WINDOW_OPEN:
                        start.record()
                        calls = 0
                    calls += 1
                    if cmd == chan.CALL:
                        invoke.invoke(kernel, config, inputs, output_sets[out_set])
                    if not queued or window & chan.WINDOW_CLOSE:
                        stop.record()
                        torch.cuda.synchronize()
                        inproc = int(start.elapsed_time(stop) * 1e6 / calls)
                except Exception as e:
                    status = call_failed(sock, f"{config.get('name', '?')}: call", e)
            elif cmd == chan.CAPTURE:
                try:
                    if graph is not None:
                        graph.close()
                        graph = None
                    msg, fd = receive(sock, "the window")
                    if fd is not None:
                        os.close(fd)
                    graph = GraphWindow(msg, in_layout, output_sets, config, device, not captured)
                    captured = captured or graph.calls > 0
                except Exception as e:
                    # The candidate's call runs here, so most capture failures are its own.
                    status = call_failed(sock, f"{config.get('name', '?')}: capture (this task times graph windows: "
                                         "a call must be capturable into a CUDA graph, with no device "
                                         "synchronisation and no host read of a device value)", e)
            elif cmd == chan.REPLAY:
                try:
                    if graph is None:
                        raise RuntimeError("the driver asked for a replay before a capture")
                    inproc = graph.replay(receive(sock, "the inputs"), start, stop)
                except Exception as e:
                    status = call_failed(sock, f"{config.get('name', '?')}: replay", e)
            elif cmd == chan.PRIME:
                # ~100 us of GPU work of ours: the GPU switches to this process's context and
                # leaves its idle state before the driver's clock starts.
                launch_shadow()
                torch.cuda.synchronize()
            else:
                torch.cuda.synchronize()  # nothing of ours may still touch the memory we unmap
            header.finish(n, status, inproc)
            inputs = None
            if window & chan.WINDOW_CLOSE and pool is not None:
                pool.close()
                pool = None
            if cmd == chan.REPLAY and graph is not None:
                graph.close()  # after done, as a queued window's pool: see GraphWindow.replay
                graph = None
            if cmd == chan.END_GROUP:
                return
    finally:
        inputs = output_sets = None
        if graph is not None:
            graph.close()
        if pool is not None:
            pool.close()
        if memory is not None:
            memory.close()
        header.close()


class InputPool:
    """A window's input sets (the driver's "pool" message and its descriptor): `sets` sets of the
    group's layout, `stride` bytes apart; the tensors of a set are made only when a call uses it."""

    def __init__(self, received, in_layout, device):
        msg, fd = received
        try:
            if fd is None or not isinstance(msg, dict) or msg.get("type") != "pool":
                raise RuntimeError("the driver sent no input pool")
            self.memory = akacuda.SharedMemory.import_fd(fd, int(msg["size"]), device)
        finally:
            if fd is not None:
                os.close(fd)
        self.sets, self.stride, self.offsets = int(msg["sets"]), int(msg["stride"]), list(msg["offsets"])
        self.layout = in_layout
        if self.sets <= 0 or self.stride <= 0 or self.sets * self.stride > self.memory.size \
                or len(self.offsets) != len(in_layout):
            self.close()
            raise RuntimeError("the driver's input pool does not fit its memory")

    def inputs(self, i):
        if not 0 <= i < self.sets:
            raise RuntimeError(f"the driver named input set {i} of {self.sets}")
        return {n: self.memory.tensor(i * self.stride + off, dt, dims)
                for (n, dt, dims), off in zip(self.layout, self.offsets)}

    def close(self):
        torch.cuda.synchronize()  # nothing of ours may still touch the memory we unmap
        self.memory.close()


def call_failed(sock, what, e):
    """A call (or a graph window's capture or replay) failed: said on stderr and to the driver;
    the status to post."""
    report(what, e)
    chan.send_message(sock, {"type": "error", "message": f"{type(e).__name__}: {e}"[:2000]})
    return chan.FAILED


class GraphWindow:
    """A graph window (the task's timing.window: graph, or AKA_WINDOW=graph): its calls captured,
    untimed, one CUDA graph per call, over an address range of the pool's size where only a placeholder of
    the worker's own is mapped, which is unmapped again before anything has run (a capture only
    records). So launchers that check their pointers find them valid, no input byte is in this
    process before the driver's clock starts, and no mapping changes under queued work. Timed,
    replay() maps the pool the driver sends into the range and launches the calls' graphs, chained
    in one graph (GRAPH_CHAIN) or one by one on one stream. Either way a call starts only once the
    whole call before it has finished, and a capture must join every stream it forked, so no
    call's work can overlap another's (one capture of all the calls would let work forked in one
    call and joined in a later one run beside it)."""

    def __init__(self, msg, in_layout, output_sets, config, device, warm):
        if not isinstance(msg, dict) or msg.get("type") != "window":
            raise RuntimeError("the driver sent no window")
        self.size, self.sets, self.stride = int(msg["size"]), int(msg["sets"]), int(msg["stride"])
        offsets, calls = list(msg["offsets"]), msg["calls"]
        if self.sets <= 0 or self.stride <= 0 or self.sets * self.stride > self.size \
                or len(offsets) != len(in_layout) or not isinstance(calls, list) or len(calls) > len(output_sets):
            raise RuntimeError("the driver's window does not fit its memory")
        self.calls, self.graphs, self.pool, self.chain = len(calls), [], 0, None
        self.range = akacuda.Reservation(self.size, device)
        placeholder = 0
        try:
            if calls:
                # As large as the pool: the GPU holds both for a moment (one granule mapped over
                # and over would do, were memory short). An empty window needs none.
                placeholder, size = akacuda.create_handle(self.size, device)
                if size != self.size:
                    raise RuntimeError(f"the pool's {self.size} bytes are not a whole number of allocation granules")
                self.range.map(placeholder)
                sets = []
                for slot, out in calls:
                    if not (0 <= slot < self.sets and 0 <= out < len(output_sets)):
                        raise RuntimeError(f"the driver named input set {slot} or output set {out}")
                    sets.append(({n: self.range.tensor(slot * self.stride + off, dt, dims)
                                  for (n, dt, dims), off in zip(in_layout, offsets)}, output_sets[out]))
                if warm:
                    # The group's first capture: the calls once, eagerly, over a zeroed
                    # placeholder (index inputs of zeros stay in range), so that lazy set-up
                    # (Triton's compilation and module loads, the allocator's first blocks)
                    # happens before the capture, where it may not.
                    self.range.tensor(0, torch.uint8, [self.size]).zero_()
                    for inputs, outputs in sets:
                        invoke.invoke(kernel, config, inputs, outputs)
                    torch.cuda.synchronize()
                for inputs, outputs in sets:
                    # One memory pool for all of them: they replay in the order captured.
                    pool = self.graphs[0].pool() if self.graphs else None
                    graph, kept = new_graph()
                    self.graphs.append(graph)
                    with torch.cuda.graph(graph, pool=pool):
                        invoke.invoke(kernel, config, inputs, outputs)
                if self.graphs and kept:
                    try:
                        self.chain = akacuda.GraphChain([g.raw_cuda_graph() for g in self.graphs])
                    except akacuda.CudaError as e:
                        sys.stderr.write(f"the calls' graphs cannot be chained ({e}): one launch per call\n")
                        for g in self.graphs:
                            g.instantiate()  # here, not at the first replay, inside the clock
            torch.cuda.synchronize()
            self.range.unmap()
        except BaseException:
            self.close()
            raise
        finally:
            akacuda.release(placeholder)

    def replay(self, received, start, stop):
        """Timed: the pool into the range, each call's graph once, the device synchronised; the
        worker's own time per call. The pool stays mapped until close(), which the worker calls
        after done, as a queued window's pool is unmapped after its last call's done: unmapping
        memory the GPU has used, releasing it and destroying the graphs cost more than the
        empty windows' (nothing used, no graphs), which would not calibrate away."""
        msg, fd = received
        recv = time.perf_counter_ns()
        try:
            if fd is None or not isinstance(msg, dict) or msg.get("type") != "pool" or int(msg["size"]) != self.size:
                raise RuntimeError("the driver sent no pool of the window's size")
            self.pool = akacuda.import_handle(fd)
        finally:
            if fd is not None:
                os.close(fd)
        imported = time.perf_counter_ns()
        self.range.map(self.pool)
        mapped = time.perf_counter_ns()
        start.record()
        if self.chain is not None:
            self.chain.launch(torch.cuda.current_stream().cuda_stream)
        else:
            for graph in self.graphs:
                graph.replay()
        stop.record()
        launched = time.perf_counter_ns()
        torch.cuda.synchronize()
        inproc = int(start.elapsed_time(stop) * 1e6 / max(self.calls, 1))
        if TRACE:
            synced = time.perf_counter_ns()
            sys.stderr.write(f"trace worker graph {self.calls} recv={recv} imported={imported} mapped={mapped} "
                             f"launched={launched} synced={synced} events={inproc * max(self.calls, 1)}\n")
        return inproc

    def close(self):
        """Nothing of ours still runs on the pool, then the pool unmapped and released, the graphs
        and the range dropped."""
        try:
            torch.cuda.synchronize()
        finally:
            if self.chain is not None:
                self.chain.close()
                self.chain = None
            self.graphs = []
            self.range.close()
            akacuda.release(self.pool)
            self.pool = 0


def output_sets_in(memory, out_layout, dm):
    """The group's output sets, one per call of a window, in the memory the driver lends."""
    sets, stride = int(dm["output_sets"]), int(dm["output_stride"])
    if not 0 < sets <= 1024 or stride < 0 or (sets - 1) * stride > memory.size:
        raise RuntimeError(f"the driver's {sets} output sets do not fit its memory")
    return [{n: memory.tensor(j * stride + off, dt, dims) for (n, dt, dims), off in zip(out_layout, dm["outputs"])}
            for j in range(sets)]


def serve(channel):
    device = akacuda.current_device()
    sock = chan.connect(channel)
    chan.send_message(sock, {"type": "hello", "harness": "python"})
    while True:
        msg, fd = chan.receive_message(sock)
        if fd is not None:
            os.close(fd)
        if msg is None:
            raise RuntimeError("the driver hung up without a goodbye")
        kind = msg.get("type") if isinstance(msg, dict) else None
        if kind == "bye":
            return 0
        if kind != "group":
            raise RuntimeError(f"unexpected message '{kind}'")
        try:
            serve_group(sock, msg, device)
            # What the group's calls left in PyTorch's cache goes back to the GPU: on a GPU shared
            # with other scorings (the run option gpu_share) a process holds only what it uses.
            torch.cuda.empty_cache()
        except Exception as e:
            # The driver names the failure in its log; the worker's own stderr says it too.
            try:
                chan.send_message(sock, {"type": "error", "message": f"{type(e).__name__}: {e}"[:2000]})
            except OSError:  # the driver is gone already
                pass
            raise


def main(argv):
    global torch, invoke, kernel, akt, akacuda
    usage = "usage: runner serve --channel SOCK\n       runner check|perf --plan P --data D --out O\n"
    if len(argv) < 2 or argv[1] not in ("serve", "check", "perf"):
        sys.stderr.write(usage)
        return 2
    try:
        if argv[1] == "serve":
            opts = akaplan.parse_options(argv[2:], ("channel",))
        else:
            opts = akaplan.parse_options(argv[2:], ("plan", "data", "out"))
            plan = akaplan.read_plan(opts["plan"])
            os.makedirs(opts["out"], exist_ok=True)
    except Exception as e:
        print(f"runner: {e}", file=sys.stderr)
        return 2
    try:
        import torch
        import akacuda
        import akt
        import invoke  # the task's harness/invoke.py
        import kernel  # the candidate
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to torch")
        with torch.no_grad():
            if argv[1] == "serve":
                return serve(opts["channel"])
            if argv[1] == "check":
                return check(plan, opts["data"], opts["out"])
            return perf(plan, opts["data"], opts["out"])
    except Exception as e:
        report("fatal", e)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
