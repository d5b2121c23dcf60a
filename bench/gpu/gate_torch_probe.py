"""gate_torch_probe - the gate of exchange_bench's `gate` mode with real Python launches (issue 23,
docs/scoring.md "Hiding the host's launch behind a gate").

One process, a GPU, torch and Triton; it answers, for triton2triton/layernorm's baseline
(workspace/kernel.py) and solution (solution/kernel.py) on the task's visible configurations:

  1. whether torch wraps an address range that is only reserved (nothing mapped) as a tensor
     through __cuda_array_interface__ (the python worker's way of wrapping the pool);
  2. the time per call of a window of 20 calls, each on an input set of its own, in three modes,
     each less its own empty window (no calls):
       queued     the clock runs while Python launches the calls (today's queued window)
       gated      a one-thread gate kernel (PTX below) is queued first, then the calls, untimed;
                  the clock starts, a CPU store into pinned host memory opens the gate
       gated-map  as gated, but the calls' inputs are an address range reserved untimed and
                  mapped onto the input sets' physical memory only after the clock starts
       gated-remap as gated-map, but the range holds a placeholder allocation while the calls
                  are queued (so a launcher that checks its pointers finds them valid), swapped
                  for the input sets after the clock starts (does cuMemUnmap wait for the
                  queued work? the gate gives up after 5 s, and the mode reports it)
       graph-map  no gate: the calls are captured untimed into a CUDA graph over the range
                  while the placeholder is mapped there (the launchers' pointer checks pass),
                  the placeholder is unmapped before anything runs (nothing is queued, so
                  cuMemUnmap has nothing to wait for); after the clock starts the input sets
                  are mapped into the range and the graph is launched once
     against the calls' own CUDA events (gated, graph) and triton.testing.do_bench on one input
     set; every real window's outputs are poisoned first and one of them checked after;
  3. so the speedup each mode would credit, against do_bench's.

  python3 bench/gpu/gate_torch_probe.py [--windows N] [--json FILE]
"""
import argparse
import ctypes
import importlib.util
import json
import os
import statistics
import sys
import time

import torch
import triton
import triton.testing

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tasks", "common", "python"))
import akacuda  # noqa: E402  (the worker's own VMM helpers)

K = 20  # calls of a window, as the scorer's
MODES = ("queued", "gated", "gated-map", "gated-remap", "graph-map")
GATE_PTX = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry aka_gate(.param .u64 p_gate, .param .u32 p_want, .param .u64 p_beat, .param .u64 p_out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<5>;
  .reg .b64 %rd<15>;
  ld.param.u64 %rd10, [p_gate];
  ld.param.u32 %r1, [p_want];
  ld.param.u64 %rd7, [p_beat];
  ld.param.u64 %rd8, [p_out];
  mov.u64 %rd9, %globaltimer;
  cvta.to.global.u64 %rd2, %rd10;
  ld.volatile.global.u32 %r2, [%rd2];
  setp.eq.s32 %p1, %r2, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd3, %rd7;
  cvta.to.global.u64 %rd4, %rd8;
  mov.u64 %rd14, 1;
LOOP:
  st.volatile.global.u64 [%rd3], %rd14;
  mov.u64 %rd12, %globaltimer;
  sub.s64 %rd13, %rd12, %rd9;
  setp.gt.u64 %p2, %rd13, 5000000000;
  @%p2 bra LATE;
  add.s64 %rd14, %rd14, 1;
  ld.volatile.global.u32 %r3, [%rd2];
  setp.eq.s32 %p3, %r3, %r1;
  @%p3 bra DONE;
  bra.uni LOOP;
LATE:
  mov.u32 %r4, 1;
  st.volatile.global.u32 [%rd4], %r4;
DONE:
  ret;
}
"""


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Gate:
    """The gate kernel on torch's current stream and its words in pinned host memory: [0] the
    gate, [1] timed out, [2] (64-bit) the heartbeat."""

    def __init__(self):
        cu = akacuda._cu()
        cu.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        cu.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
        cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [ctypes.c_uint, ctypes.c_void_p,
                                                                                  ctypes.c_void_p, ctypes.c_void_p]
        self.mod, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
        akacuda._check(cu.cuModuleLoadData(ctypes.byref(self.mod), GATE_PTX.encode()), "cuModuleLoadData")
        akacuda._check(cu.cuModuleGetFunction(ctypes.byref(self.fn), self.mod, b"aka_gate"), "cuModuleGetFunction")
        self.words = torch.zeros(4, dtype=torch.int64, pin_memory=True)  # pinned: the GPU reads it
        base = self.words.data_ptr()
        self.gate = ctypes.c_uint32.from_address(base)
        self.late = ctypes.c_uint32.from_address(base + 8)
        self.beat = ctypes.c_uint64.from_address(base + 16)
        # The GPU's address of the pinned words (the same as the host's under unified addressing).
        cu.cuMemHostGetDevicePointer_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
        dptr = ctypes.c_uint64()
        akacuda._check(cu.cuMemHostGetDevicePointer_v2(ctypes.byref(dptr), ctypes.c_void_p(base), 0),
                       "cuMemHostGetDevicePointer")
        dev = dptr.value
        self.ptrs = (dev, dev + 16, dev + 8)
        self.want = 0

    def queue(self):
        self.want += 1
        self.late.value = 0
        args = [ctypes.c_uint64(self.ptrs[0]), ctypes.c_uint32(self.want), ctypes.c_uint64(self.ptrs[1]),
                ctypes.c_uint64(self.ptrs[2])]
        params = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
        stream = torch.cuda.current_stream().cuda_stream
        akacuda._check(akacuda._cu().cuLaunchKernel(self.fn, 1, 1, 1, 1, 1, 1, 0, ctypes.c_void_p(stream), params,
                                                    None), "cuLaunchKernel(gate)")

    def running(self):
        b0, until = self.beat.value, time.perf_counter() + 1.0
        while self.beat.value == b0:
            if time.perf_counter() > until:
                return False
        return True

    def open(self):
        self.gate.value = self.want


class Reserved(akacuda.Reservation):
    """The input sets' address range (akacuda.Reservation, the worker's own): nothing mapped,
    the input sets' physical memory (`phys`) or a placeholder of the same size (`dummy`, what
    gated-remap queues against)."""

    def __init__(self, phys, dummy):
        super().__init__(phys.size, phys.device)
        self.phys, self.dummy = phys, dummy

    def hold(self, what):
        """Before a window: `what` (None, or the placeholder) mapped."""
        if self.mapped != (what.handle if what is not None else 0):
            self.unmap()
            if what is not None:
                self.map(what.handle)


def per_call(t0, t1):
    return (t1 - t0) * 1e6 / K


def graph_window(fn, xs, rest, ys, reserved):
    """graph-map: capture over the placeholder, unmap it, then (timed) map the input sets there
    and launch the graph. An empty window maps and synchronises only (no graph of no calls)."""
    graph = None
    if xs:
        reserved.hold(reserved.dummy)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for j in range(len(xs)):
                fn(xs[j], *rest, ys[j])
    reserved.hold(None)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    reserved.map(reserved.phys.handle)
    e0.record()
    if graph is not None:
        graph.replay()
    e1.record()
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    return per_call(t0, t1), (e0.elapsed_time(e1) * 1e3 / len(xs) if xs else None)


def window(mode, fn, xs, rest, ys, gate, reserved, flush):
    """One window; its driver-clock time per call (us) and, gated, the events' per call."""
    if xs:
        for y in ys:
            y.fill_(float("nan"))  # a mode whose calls did not run leaves no earlier mode's answers
    flush.fill_(1)
    torch.cuda.synchronize()
    if mode == "graph-map":
        return graph_window(fn, xs, rest, ys, reserved)
    if mode == "queued":
        t0 = time.perf_counter()
        for j in range(len(xs)):
            fn(xs[j], *rest, ys[j])
        torch.cuda.synchronize()
        return per_call(t0, time.perf_counter()), None
    reserved.hold(reserved.dummy if mode == "gated-remap" else None)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gate.queue()
    e0.record()
    for j in range(len(xs)):
        fn(xs[j], *rest, ys[j])
    e1.record()
    if not gate.running():
        raise RuntimeError("the gate kernel's heartbeat did not move")
    t0 = time.perf_counter()
    if mode in ("gated-map", "gated-remap"):
        reserved.unmap()
        reserved.map(reserved.phys.handle)
    gate.open()
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    if gate.late.value:
        raise RuntimeError("the gate timed out")
    return per_call(t0, t1), (e0.elapsed_time(e1) * 1e3 / len(xs) if xs else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--windows", type=int, default=30)
    ap.add_argument("--json")
    a = ap.parse_args()
    dev = akacuda.current_device()
    device = f"cuda:{dev}"
    task = os.path.join(REPO, "tasks", "triton2triton", "layernorm")
    impls = {"baseline": load_module(os.path.join(task, "workspace", "kernel.py"), "ln_baseline").layernorm,
             "solution": load_module(os.path.join(task, "solution", "kernel.py"), "ln_solution").layernorm}
    gate = Gate()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=device)
    out = {"gpu": torch.cuda.get_device_name(dev), "configs": []}
    print(f"# {out['gpu']}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    for rows, cols in ((16384, 1024), (4096, 4096)):
        nbytes = rows * cols * 2
        phys = akacuda.SharedMemory.create(K * nbytes, dev)  # the input sets, mapped here for filling
        xs = [phys.tensor(j * nbytes, torch.bfloat16, [rows, cols]) for j in range(K)]
        for x in xs:
            x.normal_()
        dummy = akacuda.SharedMemory.create(K * nbytes, dev)
        reserved = Reserved(phys, dummy)
        try:
            xr = [reserved.tensor(j * nbytes, torch.bfloat16, [rows, cols]) for j in range(K)]
            wrap = "a reserved, unmapped range wraps as a tensor"
        except Exception as e:  # wrapped over the placeholder: the tensors keep their addresses
            wrap = f"a reserved range did not wrap unmapped ({type(e).__name__}: {str(e)[:200]}); wrapped while mapped"
            reserved.hold(dummy)
            xr = [reserved.tensor(j * nbytes, torch.bfloat16, [rows, cols]) for j in range(K)]
        print(f"# {rows}x{cols}: {wrap}", flush=True)
        w = torch.randn(cols, dtype=torch.bfloat16, device=device)
        b = torch.randn(cols, dtype=torch.bfloat16, device=device)
        ys = [torch.empty(rows, cols, dtype=torch.bfloat16, device=device) for _ in range(K)]
        cfg = {"rows": rows, "cols": cols, "wrap": wrap, "impls": {}}
        for name, f in impls.items():
            fn = lambda x, w_, b_, y: f(x, w_, b_, y, 1e-5)  # noqa: E731
            for _ in range(3):
                fn(xs[0], w, b, ys[0])
            torch.cuda.synchronize()
            res = {m: {"real": [], "empty": [], "events": [], "error": None, "correct": True} for m in MODES}
            ref = torch.nn.functional.layer_norm(xs[1].float(), (cols,), w.float(), b.float(), 1e-5)
            for i in range(a.windows + 3):
                for m in res:
                    for empty in (False, True):
                        if res[m]["error"]:
                            continue
                        src = xr if m.startswith(("gated-", "graph-")) else xs
                        try:
                            us, ev = window(m, fn, [] if empty else src, (w, b), ys, gate, reserved, flush)
                        except Exception as e:  # e.g. Triton refusing a pointer it cannot query
                            res[m]["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                            print(f"{rows}x{cols} {name} {m}: {res[m]['error']}", flush=True)
                            gate.open()  # a gate left queued would hold the stream for 5 s
                            torch.cuda.synchronize()
                            continue
                        if not empty:
                            res[m]["correct"] &= bool(torch.allclose(ys[1].float(), ref, atol=6e-2, rtol=6e-2))
                        if i < 3:
                            continue
                        res[m]["empty" if empty else "real"].append(us)
                        if ev is not None and not empty:
                            res[m]["events"].append(ev)
            dob = triton.testing.do_bench(lambda: fn(xs[0], w, b, ys[0])) * 1e3
            row = {"do_bench_us": dob}
            for m, r in res.items():
                if r["error"] or not r["real"]:
                    row[m] = {"error": r["error"]}
                    continue
                med, emp = statistics.median(r["real"]), statistics.median(r["empty"])
                cv = statistics.pstdev(r["real"]) / statistics.mean(r["real"])
                row[m] = {"per_call_us": med, "empty_us": emp, "net_us": med - emp, "cv": cv,
                          "events_us": statistics.median(r["events"]) if r["events"] else None,
                          "outputs_correct": r["correct"]}
                print(f"{rows}x{cols} {name:8s} {m:11s} per call {med:8.2f} us (cv {100 * cv:5.2f}%) empty {emp:7.2f} "
                      f"net {med - emp:8.2f}  events {row[m]['events_us'] or float('nan'):8.2f}  do_bench {dob:8.2f}"
                      f"  outputs {'correct' if r['correct'] else 'WRONG'}", flush=True)
            cfg["impls"][name] = row
        cfg["speedup_do_bench"] = cfg["impls"]["baseline"]["do_bench_us"] / cfg["impls"]["solution"]["do_bench_us"]
        line = []
        for m in MODES:
            bl, so = cfg["impls"]["baseline"][m], cfg["impls"]["solution"][m]
            if "net_us" in bl and "net_us" in so:
                cfg[f"speedup_{m}"] = bl["net_us"] / so["net_us"]
                line.append(f"{m} {cfg[f'speedup_{m}']:.2f}x")
        print(f"{rows}x{cols} speedup: {' '.join(line)} do_bench {cfg['speedup_do_bench']:.2f}x", flush=True)
        out["configs"].append(cfg)
        xs = xr = None  # the tensors over the ranges go before the ranges do
        reserved.close()
        phys.close()
        dummy.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
