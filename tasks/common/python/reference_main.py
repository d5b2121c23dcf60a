"""reference - trusted: generates every case's inputs from its seed and the reference outputs.

It never loads candidate code: it imports only the harness modules next to it (akt, akaplan and
the task's reference.py, which defines
    generate(config: dict, seed: int) -> dict[str, torch.Tensor]     inputs, in order
    reference(config: dict, inputs: dict) -> dict[str, torch.Tensor]  reference outputs).

  reference generate --plan P --data D   writes D/<case>.in.akt and D/<case>.ref.akt
  reference plan --configs C --out P [--seed S] [--warmup N] [--samples N] [--input_sets N]
                                         writes a plan for the configurations in C (a
                                         configs.json) with seeds derived from S (random when
                                         absent); for `make test` and `make bench`, never used
                                         by the scorer. Its perf groups ask the driver to verify
                                         30% of the timed calls and to make samples/4 (at least
                                         5) empty calls, so `make bench` shows the overhead.
"""
import json
import os
import random
import sys

HARNESS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HARNESS)

import akaplan  # noqa: E402

MASK64 = (1 << 64) - 1


def need(opts, key):
    if key not in opts:
        raise ValueError(f"missing --{key}")
    return opts[key]


def generate(plan_path, data_dir):
    import akt  # torch: only generating needs it, writing a plan does not
    import reference  # the task's trusted harness/reference.py
    import torch

    plan = akaplan.read_plan(plan_path)
    os.makedirs(data_dir, exist_ok=True)
    for case in plan["cases"]:
        if "seed" not in case:
            raise ValueError(f"{plan_path}: case '{case['name']}' has no seed")
        with torch.no_grad():
            inputs = reference.generate(dict(case["config"]), case["seed"])
            outputs = reference.reference(dict(case["config"]), inputs)
        akt.write_akt(os.path.join(data_dir, case["name"] + ".in.akt"), inputs)
        akt.write_akt(os.path.join(data_dir, case["name"] + ".ref.akt"), outputs)
    print(f"reference: generated {len(plan['cases'])} cases in {data_dir}", file=sys.stderr)
    return 0


def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def write_plan(configs_path, out_path, seed, overrides):
    with open(configs_path) as f:
        cfg = json.load(f)
    if not isinstance(cfg.get("configs"), list):
        raise ValueError(f"{configs_path}: no 'configs' array")
    timing = dict(cfg.get("timing", {}))
    for key in ("warmup", "samples", "input_sets"):
        if key in overrides:
            timing[key] = int(overrides[key])
    samples = int(timing.get("samples", 30))
    input_sets = int(timing.get("input_sets", 3))
    cases, groups, n = [], [], 0
    for c in cfg["configs"]:
        name = c["name"]
        n += 1
        cases.append({"name": name + ".s0", "config": c, "seed": mix((seed + n) & MASK64)})
        group = {"name": name, "cases": [], "keep": 0.3, "empty": max(5, samples // 4)}
        for i in range(input_sets):
            n += 1
            case_name = f"{name}.p{i}"
            cases.append({"name": case_name, "config": c, "seed": mix((seed + n) & MASK64)})
            group["cases"].append(case_name)
        groups.append(group)
    plan = {"cases": cases,
            "perf": {"warmup": int(timing.get("warmup", 3)), "samples": samples,
                     "flush_bytes": int(timing.get("flush_bytes", 64 << 20)), "groups": groups}}
    if "window" in timing:  # the task's window mode, so that `make bench` times as the scorer does
        plan["perf"]["window"] = str(timing["window"])
    with open(out_path, "w") as f:
        json.dump(plan, f, indent=1)
        f.write("\n")
    return 0


def main(argv):
    usage = ("usage: reference generate --plan P --data D\n"
             "       reference plan --configs C --out P [--seed S] [--warmup N] [--samples N] [--input_sets N]\n")
    if len(argv) < 2:
        sys.stderr.write(usage)
        return 2
    try:
        opts = akaplan.parse_options(argv[2:])
        if argv[1] == "generate":
            return generate(need(opts, "plan"), need(opts, "data"))
        if argv[1] == "plan":
            seed = int(opts["seed"]) if "seed" in opts else random.SystemRandom().getrandbits(64)
            return write_plan(need(opts, "configs"), need(opts, "out"), seed, opts)
    except Exception as e:  # every failure is reported with its cause, never a bare traceback
        print(f"reference: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    sys.stderr.write(usage)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
