"""driver - trusted: runs a worker's calls and owns everything a candidate would want to touch
(docs/scoring.md, "Driver and worker"), for the python harness (triton2triton, torch2hip). It
imports the harness modules beside it and the task's reference.py, never candidate code; the
scorer runs it in a sandbox of its own, outside the worker's pid namespace, so the worker can
neither signal, trace nor write to it.

  driver check --plan P --channel SOCK --out O [--worker CMD...]
      one call per case of the plan, on inputs generated from the case's seed; every output is
      kept for the checker
  driver perf  --plan P --channel SOCK --out O [--worker CMD...]
      per perf group: `warmup` untimed calls, then `samples` timed calls (plus the group's
      `empty` calibration calls, spread among them), each on inputs generated from a fresh
      seed; after each timed call a coin with the group's `keep` probability decides whether its
      output is verified

The driver listens on SOCK; with --worker it starts CMD serve --channel SOCK itself (`make test`,
`make bench`), otherwise a worker in another sandbox connects. It writes into O:
<case>.out.akt and <case>.ref.akt for every kept call, verify.json ({"cases": [{name, config}]},
for akacheck), report.json ({"mode", "groups": [{name, samples_ns, empty_ns, inproc_ns, kept,
tail_ns, empty_tail_ns}]}: the cpp driver's fields, plus per timed and per empty call the time
from seeing `done` to T1, see below) and, in perf mode, gpu_state.json (clocks before and after,
as the old runner wrote).

Channel (akachannel.py: the cpp harness's protocol). Per configuration:
  driver -> {"type": "group", "name", "config", "inputs": [{"name", "dtype", "dims"}]}
  worker -> {"type": "outputs", "outputs": [{"name", "dtype", "dims"}]}   hostile: at most 64
            tensors and 8 GiB, checked before anything is allocated
  driver -> {"type": "region", "size": 4096, "inputs": [], "outputs": []}  + the header's memfd
  driver -> {"type": "device-memory", "api": "cuda-vmm", "device": PCI bus id, "size": bytes,
             "inputs": [], "outputs": [byte offsets]}                       + the outputs' VMM fd
  worker -> {"type": "mapped"}
then the calls through the header's go/done words, ended by END_GROUP; after the last
configuration {"type": "bye"}. Each window's inputs come, after its clock has started, as
{"type": "pool", "size", "sets", "stride", "offsets"} with a new VMM allocation holding them
(akacuda.py: the CUDA VMM API, because legacy CUDA IPC does not cross pid namespaces), every
tensor at a 4096-byte aligned offset.

A window of calls, on the driver's clock (time.perf_counter_ns; docs/scoring.md, "GPU harnesses"):
 1. untimed: generate two input sets per call, each from a fresh getrandom seed (the task's
    reference.generate; one set the call uses, one decoy), into a new allocation (InputPool),
    fill the output sets with 0xff bytes (NaN), write flush_bytes of GPU memory (evicts L2),
    synchronize, and have the worker prime (PRIME: ~100 us of GPU work of its own, so that the
    GPU runs the worker's context when the clock starts: a switch between the two contexts costs
    ~140 us);
 2. T0; send the pool's descriptor; per call: name its set and output set in the header, go;
 3. the worker (mapping the pool at the first call) calls invoke.invoke(kernel, config, inputs,
    outputs), synchronises only at the window's last call (queued windows, the default), before that
    call's done, and writes its own event time for the window to inprocNs; in synced windows
    (the task's timing.window, or AKA_WINDOW) it synchronises its device after every call and
    posts done; in graph windows the worker has captured the window's calls before step 2
    (CAPTURE, with the window's layout and calls but no pool), and one REPLAY maps the pool and
    launches the calls' graphs;
 4. read random pieces of every call's output into page-locked memory through a copy engine
    (Sample; no context switch); T1. The sample is (T1 - T0) / calls.
Nothing about a call's inputs exists anywhere the worker can reach before T0. Work the worker
leaves running at the last done is either finished before the pieces are read (and inside the
time) or makes the pieces differ from the whole output read after the window for a kept call,
which fails the run as the worker's fault. Work that has not reached the GPU by then (handed to
a thread) is missing from the output: poison, and a kept call fails verification.

Inputs of timed calls are generated on the GPU when the task's generate takes a `device`
argument (reference.generate(config, seed, device="cuda")): the CPU generator takes hundreds of
milliseconds for 128 MB of inputs, and a configuration has hundreds of calls. The same seed gives
the same inputs again on the same GPU and torch version, which is all that verification after the
worker has gone needs. Check mode generates on the CPU, like `reference generate`, so a plan's
check seeds give the same inputs in both paths and on any machine.

L2: the inputs are copied into their allocation before the flush, so they start cold; the
outputs are poisoned, then flushed. Baseline and candidate see the same.

Empty windows (cmd EMPTY; only the trusted baseline's are used): the same hand-over, mapping,
exchanges and sample reads; the worker calls nothing (queued: it synchronises at the last call
only). Their median is the per-call overhead the scorer subtracts.

Kept outputs are copied within the driver's GPU memory (up to KEEP_ON_GPU_BYTES, to host memory
beyond) and written when the worker has gone, beside the reference's answers on inputs
regenerated from the kept seeds.

Exit status: 0 done; 1 the driver itself failed (a task problem); 2 usage; 3 the worker failed
or broke the protocol (the candidate's failure).
"""
import inspect
import json
import os
import socket
import subprocess
import sys
import time

HARNESS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HARNESS)  # the harness only: nothing is ever imported from the workspace

import akachannel as chan  # noqa: E402
import akaplan  # noqa: E402

MAX_OUTPUT_TENSORS = 64
MAX_OUTPUT_BYTES = 8 << 30
MAX_NAME = 256
ACCEPT_TIMEOUT_S = 180
KEEP_ON_GPU_BYTES = 8 << 30
# A timed call's output tensor of more than SAMPLE_ABOVE elements is verified on SAMPLED_ELEMENTS
# of them (the candidate's and the reference's at the same positions), drawn from a getrandom seed
# only after the call: skipped or replayed calls are wrong nearly everywhere, and faking 0.01% of
# the elements is caught 99.8% of the time, for 256 KiB of float32 instead of GBs a scoring. The
# correctness run's outputs are kept whole (the C++ drivers do the same: cpp/driver_main.cpp).
SAMPLE_ABOVE = 1 << 20
SAMPLED_ELEMENTS = 1 << 16


class WorkerFault(Exception):
    """What the worker did wrong: the candidate's failure, not the task's."""


def secure_random():
    return int.from_bytes(os.getrandom(8), "little")


def coin(p):
    """True with probability p, from the kernel's random source: nothing in the worker's reach can
    predict it, and it is drawn only after the call has finished."""
    if p >= 1:
        return True
    if p <= 0:
        return False
    return (secure_random() >> 11) * 2.0 ** -53 < p


def nbytes(dtype, dims):
    n = torch.empty((), dtype=dtype).element_size()
    for d in dims:
        n *= d
    return n


def table_of(layout):
    return [{"name": n, "dtype": akt.dtype_name(dt), "dims": dims} for n, dt, dims in layout]


def layout_of(tensors):
    return [(n, t.dtype, list(t.shape)) for n, t in tensors.items()]


def parse_output_table(msg):
    """The worker's answer to "which outputs do you write": hostile input, checked before any of
    it sizes an allocation."""
    if not isinstance(msg, dict) or msg.get("type") != "outputs" or not isinstance(msg.get("outputs"), list):
        raise WorkerFault("the worker did not describe its outputs: " + json.dumps(msg)[:300])
    table = msg["outputs"]
    if not 0 < len(table) <= MAX_OUTPUT_TENSORS:
        raise WorkerFault(f"the worker describes {len(table)} output tensors")
    layout, total, names = [], 0, set()
    for t in table:
        if not (isinstance(t, dict) and isinstance(t.get("name"), str) and 0 < len(t["name"]) <= MAX_NAME
                and isinstance(t.get("dtype"), str) and isinstance(t.get("dims"), list)
                and len(t["dims"]) <= akt.MAX_RANK
                and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in t["dims"])):
            raise WorkerFault("malformed output tensor description: " + json.dumps(t)[:200])
        if t["dtype"] not in akt.NAMES:
            raise WorkerFault(f"output '{t['name']}' has unknown dtype '{t['dtype']}'")
        if t["name"] in names:
            raise WorkerFault(f"duplicate output tensor '{t['name']}'")
        dtype = akt.DTYPES[akt.NAMES.index(t["dtype"])]
        total += nbytes(dtype, t["dims"])
        if total > MAX_OUTPUT_BYTES:
            raise WorkerFault("the outputs are larger than the limit")
        names.add(t["name"])
        layout.append((t["name"], dtype, list(t["dims"])))
    return layout


class InputSource:
    """A configuration's inputs from a seed, on the GPU, from the task's trusted generate."""

    def __init__(self, config, on_device):
        self.config = config
        self.on_device = on_device and "device" in inspect.signature(reference.generate).parameters

    def __call__(self, seed):
        if self.on_device:
            made = reference.generate(dict(self.config), seed, device="cuda")
        else:
            made = reference.generate(dict(self.config), seed)
        return {k: v.to("cuda").contiguous() for k, v in made.items()}


def set_layout(layout):
    """Byte offsets of a tensor set laid out at TENSOR_ALIGN, and the set's size."""
    offsets, off = [], 0
    for _n, dtype, dims in layout:
        offsets.append(off)
        off = chan.align_up(off + nbytes(dtype, dims), chan.TENSOR_ALIGN)
    return offsets, max(off, chan.TENSOR_ALIGN)


class SharedTensors:
    """One configuration's output sets (one per call of a window) in GPU memory shared with the
    worker for the whole group."""

    def __init__(self, device, out_layout, sets):
        offsets, stride = set_layout(out_layout)
        self.memory = akacuda.SharedMemory.create(stride * sets, device)
        self.out_offsets, self.stride, self.sets = offsets, stride, sets
        self.outputs = [{n: self.memory.tensor(j * stride + o, dtype, dims) for o, (n, dtype, dims) in zip(offsets, out_layout)}
                        for j in range(sets)]
        # All-ones bytes: NaN for every float dtype, -1 for integers.
        self.poison_views = [t.view(-1).view(torch.uint8) for out in self.outputs for t in out.values() if t.numel()]
        # Per set, (device pointer, bytes) of every output, for the samples.
        self.ranges = [[(self.memory.ptr + j * stride + o, nbytes(dtype, dims)) for o, (_n, dtype, dims) in zip(offsets, out_layout)]
                       for j in range(sets)]

    def describe(self, bus_id):
        return {"type": "device-memory", "api": "cuda-vmm", "device": bus_id, "size": self.memory.size,
                "inputs": [], "outputs": self.out_offsets, "output_sets": self.sets, "output_stride": self.stride}

    def close(self):
        self.outputs = self.poison_views = None
        self.memory.close()


class InputPool:
    """A window's input sets in an allocation of their own, lent to the worker only after the
    driver's clock has started."""

    def __init__(self, device, layout, sets):
        self.offsets, self.stride = set_layout(layout)
        self.layout, self.sets = layout, sets
        self.memory = akacuda.SharedMemory.create(self.stride * sets, device)

    def fill(self, i, inputs):
        for o, (n, dtype, dims) in zip(self.offsets, self.layout):
            self.memory.tensor(i * self.stride + o, dtype, dims).copy_(inputs[n])

    def describe(self):
        return {"type": "pool", "size": self.memory.size, "sets": self.sets, "stride": self.stride,
                "offsets": self.offsets}

    def close(self):
        torch.cuda.synchronize()  # the copies into it are done before it is unmapped
        self.memory.close()


class Sample:
    """What the driver reads of a call's output as soon as the worker says done: PIECES pieces of
    PIECE_BYTES at offsets drawn from getrandom before the window (the whole output when it is
    that small), queued on a copy engine at done while the window goes on. compare() holds them against the
    whole output read after the window, recheck() against the same pieces read again: a kernel
    still writing at done (or finishing a call's output during a later call) makes them differ."""
    PIECES = 8
    PIECE_BYTES = 4096
    HOST_BYTES = PIECES * PIECE_BYTES

    def __init__(self, host):
        self.host = host  # HOST_BYTES of page-locked memory; a window's samples lie one after another
        self.pieces = []  # (output index, byte offset, bytes)
        self.ranges = []

    def draw(self, ranges):
        """Before the window: the pieces, from getrandom (kept in the driver's memory, which the
        worker cannot read, so as secret as a draw after done, and no cost to the window)."""
        total = sum(n for _p, n in ranges)
        pieces = []
        if total <= self.PIECES * self.PIECE_BYTES:
            for i, (_p, n) in enumerate(ranges):
                pieces += [(i, off, min(self.PIECE_BYTES, n - off)) for off in range(0, n, self.PIECE_BYTES)]
        else:
            for _ in range(self.PIECES):
                at, i = secure_random() % total, 0
                while at >= ranges[i][1]:
                    at -= ranges[i][1]
                    i += 1
                off = at // self.PIECE_BYTES * self.PIECE_BYTES
                pieces.append((i, off, min(self.PIECE_BYTES, ranges[i][1] - off)))
        self.pieces, self.ranges = pieces, ranges

    def share(self, first, ranges):
        """A queued window's calls share one draw, so that one strided copy per piece reads it for
        every call (read_window_async): far less host time inside the clock than a copy per piece
        and call. `ranges`: this call's output set, at the same offsets as the first's."""
        self.pieces, self.ranges = first.pieces, ranges

    def read_async(self, stream):
        self._copy(self.host, stream, wait=False)

    def read_window_async(self, calls, stride, stream):
        """Queues the pieces of `calls` output sets, set j `stride` bytes after this one's, into
        this sample's host memory + j * HOST_BYTES; the sets' samples share this one's draw."""
        for k, (i, off, n) in enumerate(self.pieces):
            akacuda.read_rows(self.ranges[i][0] + off, stride, self.host.data_ptr() + k * self.PIECE_BYTES,
                              self.HOST_BYTES, n, calls, stream)

    def _copy(self, host, stream, wait):
        akacuda.read_pieces([(self.ranges[i][0] + off, n) for i, off, n in self.pieces], host.data_ptr(),
                            self.PIECE_BYTES, stream, wait=wait)

    def compare(self, outputs):
        """outputs: the call's output tensors in layout order, read after the window."""
        host = self.host.numpy()
        for k, (i, off, n) in enumerate(self.pieces):
            whole = outputs[i].reshape(-1).view(torch.uint8)[off:off + n].cpu().numpy()
            if whole.tobytes() != host[k * self.PIECE_BYTES:k * self.PIECE_BYTES + n].tobytes():
                raise _late()

    def recheck(self, scratch, stream):
        self._copy(scratch, stream, wait=True)
        a, b = self.host.numpy(), scratch.numpy()
        for k, (_i, _off, n) in enumerate(self.pieces):
            lo = k * self.PIECE_BYTES
            if a[lo:lo + n].tobytes() != b[lo:lo + n].tobytes():
                raise _late()


def _late():
    return WorkerFault("an output changed after the worker said the call was done (work left running past its end)")


# Calls per window, and input sets in a window's pool per timed call: the one it uses and a decoy
# generated the same way (docs/scoring.md "GPU harnesses": the pool is the worker's from the
# window's start, so a worker that wanted a later call's answer early would have to compute
# every set of the pool). AKA_WINDOW_CALLS and AKA_MAX_POOL_GIB change the first and the pool's
# ceiling for scripts/device-python-driver's window variants (an experiment: longer windows
# spread the window's fixed costs over more calls); nothing scores with them.
def _env_count(name, default, most):
    try:
        return max(1, min(most, int(os.environ.get(name, default))))
    except ValueError:
        return default


WINDOW_CALLS = _env_count("AKA_WINDOW_CALLS", 20, 256)
SETS_PER_TIMED_CALL = 2
MAX_POOL_BYTES = _env_count("AKA_MAX_POOL_GIB", 4, 64) << 30


def window_calls_for(input_bytes):
    per_call = max(1, input_bytes) * SETS_PER_TIMED_CALL
    return max(1, min(WINDOW_CALLS, MAX_POOL_BYTES // per_call))


class Window:
    """Calls that share one pool and one clock: all kernel calls (timed, warm-up or check) or all
    empty calls (the trusted baseline's calibration). calls: [(seed or None, keep-as name)]."""

    def __init__(self, cmd, timed, sets_per_call, calls):
        self.cmd, self.timed, self.sets_per_call, self.calls = cmd, timed, sets_per_call, calls


def windows_of(g, k):
    if g["check"]:
        cases = g["check"]
        return [Window(chan.CALL, False, 1, [(seed, name) for name, seed in cases[i:i + k]])
                for i in range(0, len(cases), k)]
    per = lambda n: -(-n // k) if n > 0 else 0
    ws = [Window(chan.CALL, False, 1, [(None, "")] * k) for _ in range(per(g["warmup"]))]
    samples, empty = per(g["samples"]), per(g["empty"])
    total, empty_done = samples + empty, 0
    for i in range(total):
        # The empty windows are spread evenly over the timed ones, so drift reaches both alike.
        if empty_done < empty and (i + 1) * empty // total > empty_done:
            empty_done += 1
            ws.append(Window(chan.EMPTY, True, 1, [(None, "")] * k))
        else:
            ws.append(Window(chan.CALL, True, SETS_PER_TIMED_CALL, [(None, "")] * k))
    return ws


class KeptCall:
    def __init__(self, name, config, seed, on_device, outputs, pick, verify=True):
        self.name, self.config, self.seed, self.on_device, self.outputs = name, config, seed, on_device, outputs
        self.pick = pick  # 0: outputs whole; else the seed of sampled()'s positions
        self.verify = verify  # False: copied only so that both sides do the same work


def sampled(t, pick):
    """t as it is verified: whole when pick is 0 or t is small, else SAMPLED_ELEMENTS of its
    elements at positions drawn from pick."""
    n = t.numel()
    if pick == 0 or n <= SAMPLE_ABOVE:
        return t
    gen = torch.Generator(device="cpu")
    gen.manual_seed(pick)
    at = torch.randint(0, n, (SAMPLED_ELEMENTS,), generator=gen).to(t.device)
    return t.reshape(-1)[at]


class GroupTimes:
    def __init__(self, name):
        self.name = name
        self.samples, self.empty, self.inproc = [], [], []
        self.kept = 0
        self.window_calls = 1

    def report(self):
        return {"name": self.name, "samples_ns": self.samples, "empty_ns": self.empty,
                "inproc_ns": self.inproc, "kept": self.kept, "window_calls": self.window_calls}


WINDOWS = ("queued", "synced", "graph")

# AKA_TRACE=1: one line on stderr per window with the driver's host times (CLOCK_MONOTONIC, as
# the worker's own trace lines), for scripts/device-python-driver.py's trace summary: where a
# window's time goes between T0 and T1. A diagnostic; nothing here reaches a result.
TRACE = os.environ.get("AKA_TRACE") == "1"


def trace(side, kind, calls, **marks):
    sys.stderr.write(f"trace {side} {kind} {calls} " + " ".join(f"{k}={v}" for k, v in marks.items()) + "\n")


def window_mode(plan):
    """The task's timing.window, which the scorer writes into the perf plan; AKA_WINDOW in the
    driver's environment overrides it (the device scripts time one task in every mode)."""
    mode = os.environ.get("AKA_WINDOW") or plan.get("perf", {}).get("window", "queued")
    if mode not in WINDOWS:
        raise ValueError(f"unknown window mode '{mode}' (queued, synced or graph)")
    return mode


class Driver:
    def __init__(self, sock, device, flush_bytes, window="queued"):
        self.sock = sock
        self.device = device
        self.bus_id = akacuda.device_id(device)
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda") if flush_bytes > 0 else None
        self.flush_round = 0
        self.seq = 0
        self.kept = []
        self.kept_gpu_bytes = 0
        self.timed_calls = 0
        self.group = None  # the configuration being timed, for the trace
        # Queued windows (calls back to back, one synchronisation at the window's last call)
        # unless synced: since one strided copy per piece reads a queued window's outputs, queued
        # speedups track do_bench's and synced ones read 13-33% below it (docs/scoring.md,
        # "Queued and synced windows"; scripts/device-python-driver times both).
        self.queued = window != "synced"
        # Graph windows (docs/scoring.md, "Hiding the host's launch"): the worker captures the
        # window's calls untimed, one CUDA graph each, over a range where the pool is not, and
        # launches them after T0, so Python's launches leave the clock.
        self.graph = window == "graph"

    def send(self, msg, fd=None):
        try:
            chan.send_message(self.sock, msg, fd)
        except OSError as e:
            raise WorkerFault(f"the worker hung up: {e}")

    def receive(self, what):
        try:
            msg, fd = chan.receive_message(self.sock)
        except OSError as e:
            raise WorkerFault(f"the worker hung up instead of sending {what}: {e}")
        if fd is not None:
            os.close(fd)
        if msg is None:
            raise WorkerFault(f"the worker hung up instead of sending {what}")
        if isinstance(msg, dict) and msg.get("type") == "error":
            raise WorkerFault("the worker failed: " + str(msg.get("message", "?"))[:1000])
        return msg

    def run_group(self, g, times):
        config = g["config"]
        source = InputSource(config, on_device=not g["check"])
        # The layout comes from one set generated for it alone; the worker learns the shapes,
        # never the values (timed calls use sets generated later, from seeds of their own).
        first = source(g["check"][0][1] if g["check"] else secure_random())
        layout = layout_of(first)
        k = window_calls_for(sum(t.numel() * t.element_size() for t in first.values()))
        times.window_calls = k
        self.group = g["name"]
        self.send({"type": "group", "name": g["name"], "config": config, "inputs": table_of(layout)})
        out_layout = parse_output_table(self.receive("its outputs"))
        header = chan.Header.create()
        shared = None
        try:
            shared = SharedTensors(self.device, out_layout, k)
            self.send({"type": "region", "size": header.size, "inputs": [], "outputs": []}, header.fd)
            vmm_fd = shared.memory.export_fd()
            try:
                self.send(shared.describe(self.bus_id), vmm_fd)
            finally:
                os.close(vmm_fd)
            if self.receive("the mapping") != {"type": "mapped"}:
                raise WorkerFault("the worker did not map the shared memory")
            run = torch.empty(k * Sample.HOST_BYTES, dtype=torch.uint8, pin_memory=True)
            samples = [Sample(run[j * Sample.HOST_BYTES:(j + 1) * Sample.HOST_BYTES]) for j in range(k)]
            scratch = torch.empty(Sample.HOST_BYTES, dtype=torch.uint8, pin_memory=True)
            for w in windows_of(g, k):
                ns, inproc, seeds = self.window(header, shared, w, source, layout, samples)
                if w.cmd == chan.EMPTY:
                    times.empty.append(ns)
                    continue
                if w.timed:
                    times.samples.append(ns)
                    times.inproc.append(sum(inproc) // len(inproc))
                self.after_window(g, w, times, shared, samples, scratch, seeds, source.on_device)
            self.exchange(header, chan.END_GROUP)
        finally:
            if shared is not None:
                torch.cuda.synchronize()
                shared.close()
            header.close()
            # The group's input sets and kept outputs go back to the GPU, not to PyTorch's cache:
            # scorings that share a GPU (gpu_share) run out of memory on each other's caches.
            first = None
            torch.cuda.empty_cache()

    def window(self, header, shared, w, source, layout, samples):
        """One window of calls (docs/scoring.md, "GPU harnesses"); returns its time per call,
        the worker's own times and each call's seed. Untimed: the pool's input sets, each from a
        fresh seed (check: the plan's), go into an allocation the worker has no handle to yet
        (empty windows: a pool of the same size with nothing in it), the output sets are
        poisoned, L2 flushed, and the worker runs an empty kernel (PRIME) so that the GPU holds
        its context when the clock starts (a switch between the two processes' contexts costs
        ~140 us on an H200). Timed: the pool's descriptor goes to the worker, which maps it with
        the first call; per call the header names its set and output set; on done the driver
        queues the read of random pieces of that output on a copy engine; after the last call
        the pieces are in: T1."""
        m, n = w.sets_per_call, len(w.calls)
        pool = InputPool(self.device, layout, n * m)
        fd = -1
        stream = torch.cuda.current_stream().cuda_stream
        try:
            used, seeds = [0] * n, [None] * n
            if w.cmd == chan.CALL:
                for j, (seed, _name) in enumerate(w.calls):
                    used[j] = j * m + (secure_random() % m if m > 1 else 0)
                    for i in range(j * m, j * m + m):
                        s = seed if (i == used[j] and seed is not None) else secure_random()
                        made = source(s)
                        if layout_of(made) != layout:
                            raise RuntimeError("generate made inputs of another layout for the same configuration")
                        pool.fill(i, made)
                        if i == used[j]:
                            seeds[j] = s
            for t in shared.poison_views:
                t.fill_(0xFF)
            if self.flush is not None:
                self.flush_round = self.flush_round % 251 + 1
                self.flush.fill_(self.flush_round)
            torch.cuda.synchronize()
            one_draw = self.queued and shared.stride <= akacuda.MAX_PITCH
            for j in range(n):
                if one_draw and j > 0:
                    samples[j].share(samples[0], shared.ranges[j])
                else:
                    samples[j].draw(shared.ranges[j])
            fd = pool.memory.export_fd()
            if self.graph:
                calls = [[used[j], j] for j in range(n)] if w.cmd == chan.CALL else []
                self.send(dict(pool.describe(), type="window", calls=calls))
                self.exchange(header, chan.CAPTURE)
            self.exchange(header, chan.PRIME)
            inproc = []
            t0 = time.perf_counter_ns()
            self.send(pool.describe(), fd)
            queued = chan.WINDOW_QUEUED if self.queued else 0
            sent = time.perf_counter_ns() if TRACE else 0
            if self.graph:
                self.exchange(header, chan.REPLAY)
                inproc.append(header.inproc_ns())
            for j in range(0 if self.graph else n):
                flags = (chan.WINDOW_OPEN if j == 0 else 0) | (chan.WINDOW_CLOSE if j == n - 1 else 0) | queued
                self.exchange(header, w.cmd, used[j], j, flags)
                if not queued or j == n - 1:
                    inproc.append(header.inproc_ns())  # queued: one figure, the window's
                if not queued:
                    samples[j].read_async(stream)
            # Queued, done means launched until the last call, whose done comes after the
            # worker's device is idle: only then are the outputs final.
            if one_draw:
                samples[0].read_window_async(n, shared.stride, stream)
            elif queued:
                for j in range(n):
                    samples[j].read_async(stream)
            done = time.perf_counter_ns() if TRACE else 0
            akacuda.synchronize(stream)
            t1 = time.perf_counter_ns()
            if TRACE:
                trace("driver", "call" if w.cmd == chan.CALL else "empty", n, group=self.group, t0=t0, sent=sent,
                      done=done, t1=t1)
        finally:
            if fd >= 0:
                os.close(fd)
            pool.close()
        return (t1 - t0) // n, inproc, seeds

    def after_window(self, g, w, times, shared, samples, scratch, seeds, on_device):
        """Untimed: every call's pieces are held against its output as it stands now; a coin,
        drawn only now, decides per timed call whether its output is kept (check: every one)."""
        stream = torch.cuda.current_stream().cuda_stream
        for j, (_seed, name) in enumerate(w.calls):
            if w.timed and coin(g["keep"]):
                name = f"{g['name']}.c{self.timed_calls + j}"
            if not name:
                samples[j].recheck(scratch, stream)
                continue
            samples[j].compare(list(shared.outputs[j].values()))
            pick = secure_random() | 1 if w.timed else 0
            # A group that is not verified (the baseline's) copies like the candidate's, so that
            # both sides do the same work between windows; write_verification drops the copy.
            self.keep(name, g["config"], seeds[j], on_device, shared.outputs[j], pick, g.get("verify", True))
            if g.get("verify", True):
                times.kept += 1
        if w.timed:
            self.timed_calls += len(w.calls)

    def exchange(self, header, cmd, slot=0, out_set=0, window=0):
        """One go/done exchange. A worker that dies or hangs up ends the run instead of leaving
        the driver waiting."""
        self.seq = self.seq % 0xFFFFFFFF + 1
        header.post(self.seq, cmd, slot, out_set, window)
        try:
            header.wait_done(self.seq, lambda: not chan.peer_gone(self.sock))
        except chan.ChannelError:
            raise WorkerFault("the worker exited in the middle of a call" + self.last_words())
        if header.status() != chan.OK:
            raise WorkerFault("the worker reports that the kernel call failed" + self.last_words())

    def last_words(self):
        """The error message the worker sent before it failed or hung up, if any."""
        try:
            self.sock.settimeout(0.5)
            msg, fd = chan.receive_message(self.sock)
            if fd is not None:
                os.close(fd)
        except (OSError, chan.ChannelError):
            return ""
        finally:
            self.sock.settimeout(None)
        if isinstance(msg, dict) and msg.get("type") == "error":
            return ": " + str(msg.get("message", "?"))[:1000]
        return ""

    def keep(self, name, config, seed, on_device, readback, pick, verify=True):
        outputs = {}
        for k, t in readback.items():
            t = sampled(t, pick)
            size = t.numel() * t.element_size()
            if self.kept_gpu_bytes + size <= KEEP_ON_GPU_BYTES:
                outputs[k] = t.clone()
                self.kept_gpu_bytes += size
            else:
                outputs[k] = t.to("cpu")
        self.kept.append(KeptCall(name, config, seed, on_device, outputs, pick, verify))

    def finish(self):
        self.send({"type": "bye"})


def groups_of(mode, plan):
    groups = []
    if mode == "check":
        for c in plan["cases"]:
            if "seed" not in c:
                raise ValueError(f"case '{c['name']}' has no seed")
            g = next((g for g in groups if g["config"] == c["config"]), None)
            if g is None:
                g = {"name": c["config"]["name"], "config": c["config"], "check": []}
                groups.append(g)
            g["check"].append((c["name"], c["seed"]))
        return groups
    perf = plan["perf"]
    if perf is None:
        raise ValueError("the plan has no 'perf' section")
    for pg in perf["groups"]:
        groups.append({"name": pg["name"], "config": akaplan.find_case(plan, pg["cases"][0])["config"], "check": [],
                       "warmup": perf["warmup"], "samples": perf["samples"], "empty": pg["empty"], "keep": pg["keep"],
                       "verify": pg.get("verify", True)})
    return groups


class Listener:
    def __init__(self, path):
        self.path = path
        # The worker runs as another user in another sandbox and must be able to connect, so
        # the socket gets its name only once it is open to others (the worker waits meanwhile).
        tmp = path + ".tmp"
        for p in (path, tmp):
            if os.path.lexists(p):
                os.unlink(p)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(tmp)
        self.sock.listen(1)
        os.chmod(tmp, 0o666)
        os.rename(tmp, path)

    def accept(self, timeout_s, local):
        deadline = time.monotonic() + timeout_s
        self.sock.settimeout(1.0)
        while True:
            try:
                conn, _ = self.sock.accept()
                conn.settimeout(None)
                return conn
            except socket.timeout:
                if local is not None and local.poll() is not None:
                    raise WorkerFault(f"the worker exited (status {local.poll()}) before connecting")
                if time.monotonic() > deadline:
                    raise WorkerFault(f"no worker connected within {timeout_s} s")

    def close(self):
        self.sock.close()
        if os.path.lexists(self.path):
            os.unlink(self.path)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
        f.write("\n")


def write_verification(out_dir, kept):
    """After the worker is gone: the reference's answers for the kept calls, from inputs
    generated again from their seeds, beside the outputs the worker gave. Copies of a group that
    is not verified (the baseline's) are dropped."""
    cases = []
    for k in kept:
        if not k.verify:
            continue
        inputs = InputSource(k.config, k.on_device)(k.seed)
        ref = reference.reference(dict(k.config), inputs)
        akt.write_akt(os.path.join(out_dir, k.name + ".ref.akt"), {n: sampled(t, k.pick) for n, t in ref.items()})
        akt.write_akt(os.path.join(out_dir, k.name + ".out.akt"), k.outputs)
        k.outputs = None
        cases.append({"name": k.name, "config": k.config})
    write_json(os.path.join(out_dir, "verify.json"), {"cases": cases})


def summary(g, t):
    if g["check"]:
        return f"{len(g['check'])} calls, {t.kept} kept for verification"
    med = lambda v: sorted(v)[len(v) // 2] / 1e3
    s = f"{len(t.samples)} windows of {t.window_calls} calls, median {med(t.samples):.1f} us a call"
    if t.empty:
        s += f" (overhead {med(t.empty):.1f} us from {len(t.empty)} empty windows: net {med(t.samples) - med(t.empty):.1f} us)"
    return s + f", worker's own clock {med(t.inproc):.1f} us, {t.kept} kept for verification"


def drive(mode, opts, worker_cmd):
    global torch, akt, akacuda, reference
    plan = akaplan.read_plan(opts["plan"])
    groups = groups_of(mode, plan)
    window = window_mode(plan) if mode == "perf" else "queued"
    out_dir = opts["out"]
    os.makedirs(out_dir, exist_ok=True)
    # Listening before torch loads (seconds): a worker started alongside finds the socket early.
    listener = Listener(opts["channel"])
    local = None
    try:
        if worker_cmd:
            local = subprocess.Popen(worker_cmd + ["serve", "--channel", opts["channel"]])
        import torch
        import akacuda
        import akt
        import reference  # the task's trusted harness/reference.py
        torch.set_grad_enabled(False)
        device = akacuda.current_device()
        sock = listener.accept(ACCEPT_TIMEOUT_S, local)
        driver = Driver(sock, device, plan["perf"]["flush_bytes"] if mode == "perf" else 0, window)
        hello = driver.receive("hello")
        if not isinstance(hello, dict) or hello.get("type") != "hello":
            raise WorkerFault("the worker did not say hello")
        state = {"before": akacuda.gpu_state()} if mode == "perf" else None
        report = {"mode": mode, "groups": []}
        if mode == "perf":
            report["window"] = window
        for g in groups:
            t = GroupTimes(g["name"])
            driver.run_group(g, t)
            report["groups"].append(t.report())
            print(f"driver: {g['name']}: {summary(g, t)}", file=sys.stderr)
        driver.finish()
        sock.close()
        if local is not None:
            status = local.wait()
            local = None
            if status != 0:
                raise WorkerFault(f"the worker exited with status {status} after the last call")
        write_verification(out_dir, driver.kept)
        write_json(os.path.join(out_dir, "report.json"), report)
        if state is not None:
            state["after"] = akacuda.gpu_state()
            with open(os.path.join(out_dir, "gpu_state.json"), "w") as f:
                json.dump(state, f, indent=1)
                f.write("\n")
        return 0
    finally:
        listener.close()
        if local is not None:
            local.kill()
            local.wait()


def main(argv):
    usage = "usage: driver check|perf --plan P --channel SOCK --out O [--worker CMD...]\n"
    if len(argv) < 2 or argv[1] not in ("check", "perf"):
        sys.stderr.write(usage)
        return 2
    args, worker = argv[2:], []
    if "--worker" in args:
        i = args.index("--worker")
        args, worker = args[:i], args[i + 1:]
        if not worker:
            sys.stderr.write(usage)
            return 2
    try:
        opts = akaplan.parse_options(args, ("plan", "channel", "out"))
    except ValueError as e:
        print(f"driver: {e}", file=sys.stderr)
        return 2
    try:
        return drive(argv[1], opts, worker)
    except (WorkerFault, chan.ChannelError) as e:
        print(f"driver: worker: {e}", file=sys.stderr)
        return 3
    except Exception as e:  # every failure is reported with its cause, never a bare traceback
        print(f"driver: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
