"""akaplan - the plan file the scorer writes (docs/tasks.md, "The harness contract")."""
import json
import re

_SAFE = re.compile(r"[A-Za-z0-9._-]+")


class PlanError(Exception):
    pass


def parse_options(args, required=()):
    """`--key value` pairs of a harness program's command line -> {key: value}; ValueError on
    anything else or when a key in `required` is missing."""
    if len(args) % 2:
        raise ValueError(f"bad arguments {args}")
    opts = {}
    for key, value in zip(args[0::2], args[1::2]):
        if not key.startswith("--"):
            raise ValueError(f"bad argument '{key}'")
        opts[key[2:]] = value
    for k in required:
        if k not in opts:
            raise ValueError(f"missing --{k}")
    return opts


def safe_name(s):
    return isinstance(s, str) and 0 < len(s) <= 200 and s[0] != "." and _SAFE.fullmatch(s) is not None


def read_plan(path):
    """Returns {"cases": [{"name", "config", "seed"?}], "perf": {...} or None}, validated. A perf
    group is {"name", "cases", "empty", "keep"}: the driver's calibration calls (only the trusted
    baseline gets them) and the probability that a timed call's output is verified."""
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        raise PlanError(f"{path}: {e}")
    if not isinstance(j, dict) or not isinstance(j.get("cases"), list):
        raise PlanError(f"{path}: plan has no 'cases' array")
    cases, names = [], set()
    for c in j["cases"]:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise PlanError(f"{path}: a case has no string 'name'")
        name = c["name"]
        if not safe_name(name):
            raise PlanError(f"{path}: case name '{name}' is not [A-Za-z0-9._-]+")
        if name in names:
            raise PlanError(f"{path}: duplicate case '{name}'")
        if not isinstance(c.get("config"), dict) or not isinstance(c["config"].get("name"), str):
            raise PlanError(f"{path}: case '{name}' has no 'config' object with a name")
        case = {"name": name, "config": c["config"]}
        if "seed" in c:
            seed = c["seed"]
            if isinstance(seed, str) and seed.isdigit() and len(seed) <= 20:
                seed = int(seed)
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 64:
                raise PlanError(f"{path}: case '{name}': seed must be an integer in [0, 2^64)")
            case["seed"] = seed
        names.add(name)
        cases.append(case)
    perf = None
    if "perf" in j:
        p = j["perf"]
        try:
            perf = {"warmup": int(p.get("warmup", 0)), "samples": int(p.get("samples", 0)),
                    "flush_bytes": int(p.get("flush_bytes", 0)), "groups": []}
            if perf["warmup"] < 0 or perf["samples"] < 1 or perf["flush_bytes"] < 0:
                raise PlanError(f"{path}: perf needs warmup >= 0, samples >= 1, flush_bytes >= 0")
            for g in p["groups"]:
                if not safe_name(g["name"]):
                    raise PlanError(f"{path}: perf group name '{g['name']}' is not [A-Za-z0-9._-]+")
                for cn in g["cases"]:
                    if cn not in names:
                        raise PlanError(f"{path}: perf group '{g['name']}' names unknown case '{cn}'")
                if not g["cases"]:
                    raise PlanError(f"{path}: perf group '{g['name']}' has no cases")
                empty, keep = g.get("empty", 0), g.get("keep", 0.0)
                if (isinstance(empty, bool) or not isinstance(empty, int) or empty < 0
                        or isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0 <= keep <= 1):
                    raise PlanError(f"{path}: perf group '{g['name']}' needs empty >= 0 and keep in [0, 1]")
                verify = g.get("verify", True)
                if not isinstance(verify, bool):
                    raise PlanError(f"{path}: perf group '{g['name']}': verify must be true or false")
                perf["groups"].append({"name": g["name"], "cases": list(g["cases"]), "empty": empty,
                                       "keep": float(keep), "verify": verify})
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise PlanError(f"{path}: malformed perf section: {e!r}")
    return {"cases": cases, "perf": perf}


def find_case(plan, name):
    for c in plan["cases"]:
        if c["name"] == name:
            return c
    return None
