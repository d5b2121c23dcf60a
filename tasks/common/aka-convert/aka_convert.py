"""akad's convert mode for AgentKernelArena's gpumode tasks (docs/aka.md, "Scoring (convert
mode)"): what the trusted reference, the worker's invoke and the build share.

harness/aka_convert.json, written by the importer, names the task's PyTorch module
(aka_module.py: the reference), its functional form (aka_functional.py: the same model whose
forward takes `fn`, the kernel entry point AKA's harness passes the HIP extension's `forward`
as), the class both define, the HIP file the agent edits and how many input cases AKA's
`get_inputs()` yields. Parameters are made as AKA's harness makes them: torch.manual_seed(0),
then the module and the functional model built from `get_init_inputs()`, the functional
model's parameters copied from the module's by name.
"""
import ast
import importlib.util
import json
import os
import re
import types

HARNESS = os.path.dirname(os.path.abspath(__file__))
_SPEC = None
_MODULES = {}
_HELD_OUT = {}  # case text -> held_out_module(case text): the driver draws many calls of a case


def spec():
    global _SPEC
    if _SPEC is None:
        with open(os.path.join(HARNESS, "aka_convert.json")) as f:
            _SPEC = json.load(f)
    return _SPEC


def load(which):
    """The module of harness/aka_<which>.py (module or functional), loaded once."""
    if which not in _MODULES:
        path = os.path.join(HARNESS, spec()[which])
        s = importlib.util.spec_from_file_location("aka_" + which, path)
        m = importlib.util.module_from_spec(s)
        s.loader.exec_module(m)
        _MODULES[which] = m
    return _MODULES[which]


def inputs_module(config):
    """AKA's module, whose get_inputs() yields the cases, and the configuration's case index. A
    held-out configuration names no index but a case's text (`case_text`, made by akad's rules
    from the visible ones): get_inputs() as AKA wrote it, its case list that one case alone."""
    if "case_text" in config:
        text = config["case_text"]
        if text not in _HELD_OUT:
            _HELD_OUT[text] = held_out_module(text)
        return _HELD_OUT[text], 0
    return load("module"), int(config["case"])


def held_out_module(case_text):
    """An object whose get_inputs() is AKA's with the list its loop goes over (a literal, or a
    name bound to one before the loop) replaced by [case_text], run among the module's names."""
    module = load("module")
    path = os.path.join(HARNESS, spec()["module"])
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    loop = next((n for n in fn.body if isinstance(n, ast.For)), None) if fn else None
    if loop is None:
        raise ValueError("get_inputs has no loop at its top level")
    one = ast.List(elts=[ast.parse(case_text, mode="eval").body], ctx=ast.Load())
    if isinstance(loop.iter, (ast.List, ast.Tuple)):
        loop.iter = one
    elif isinstance(loop.iter, ast.Name):
        bound = [n for n in fn.body[:fn.body.index(loop)] if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == loop.iter.id for t in n.targets)]
        if not bound:
            raise ValueError(f"get_inputs loops over {loop.iter.id}, which it does not bind to a list")
        bound[-1].value = one
    else:
        raise ValueError("get_inputs loops over something other than a list")
    names = dict(vars(module))
    exec(compile(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[])), path, "exec"), names)
    return types.SimpleNamespace(get_inputs=names["get_inputs"])


def _mix(seed, index):
    """A 63-bit seed of its own for case `index` of a call's seed."""
    x = (seed * 0x9E3779B97F4A7C15 + index + 1) & ((1 << 64) - 1)
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & ((1 << 64) - 1)
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & ((1 << 64) - 1)
    return (x ^ (x >> 31)) % (1 << 63)


def _nth_case(torch, module, index, seed, device, skip_on_meta):
    """Runs get_inputs() up to case `index`; torch's global generators are seeded from the
    call's seed before each case's own code runs (AKA's cases draw from them). With
    skip_on_meta the cases before it are made on the meta device, which costs nothing."""
    produced = module.get_inputs()
    if not hasattr(produced, "__next__"):
        produced = iter([produced])
    for i in range(index + 1):
        torch.manual_seed(_mix(seed, i))
        with torch.device("meta" if skip_on_meta and i < index else device):
            try:
                case = next(produced)
            except StopIteration:
                raise ValueError(f"get_inputs yielded no case {index}") from None
    return case


def case_inputs(torch, config, seed, device):
    """Case `case` of get_inputs() drawn from `seed`, made on `device`: {"in0": tensor, ...}."""
    module, index = inputs_module(config)
    try:
        case = _nth_case(torch, module, index, seed, device, True)
    except ValueError:
        raise
    except Exception:  # a case before it that cannot be made on meta (it reads its values): all of them
        case = _nth_case(torch, module, index, seed, device, False)
    case = list(case) if isinstance(case, (list, tuple)) else [case]
    out = {}
    for i, t in enumerate(case):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"case {index}: input {i} is a {type(t).__name__}, not a tensor (convert mode takes tensors)")
        out[f"in{i}"] = t.to(device).contiguous()
    return out


def arguments(inputs):
    return [inputs[f"in{i}"] for i in range(len(inputs))]


def _build(torch, which):
    m = load(which)
    cls = getattr(m, spec()["class"])
    init = m.get_init_inputs()
    if isinstance(init, (list, tuple)) and len(init) == 2 and isinstance(init[0], list) and isinstance(init[1], dict):
        return cls(*init[0], **init[1])
    return cls(*init)


def _canonical(key):
    return re.sub(r"[^a-z0-9]", "", key.lower())


def _module_key(key, module_keys):
    """The module parameter a functional parameter takes its value from: the same name, else the
    same name up to case and punctuation, else the one name that ends with it or that it ends
    with (AKA's alignment)."""
    if key in module_keys:
        return key
    c = _canonical(key)
    for match in ([k for k in module_keys if _canonical(k) == c],
                  [k for k in module_keys if _canonical(k).endswith(c)],
                  [k for k in module_keys if c.endswith(_canonical(k))]):
        if len(match) == 1 or (match and _canonical(match[0]) == c):
            return match[0]
    return None


def models(torch, device="cuda"):
    """(module, functional), parameters as AKA's harness makes them, in eval mode on `device`."""
    torch.manual_seed(0)
    module = _build(torch, "module")
    functional = _build(torch, "functional")
    msd = module.state_dict()
    aligned = dict(functional.state_dict())
    params = {k for k, _ in functional.named_parameters()}
    used = set()
    for key, value in functional.state_dict().items():
        mk = _module_key(key, [k for k in msd if k not in used])
        if mk is None or msd[mk].shape != value.shape:
            if key in params:
                raise ValueError(f"functional parameter '{key}' has no module parameter of its shape")
            continue
        aligned[key] = msd[mk].detach().clone()
        used.add(mk)
    functional.load_state_dict(aligned, strict=False)
    return module.to(device).eval(), functional.to(device).eval()


def flatten(torch, result):
    """A model's result as {"out0": tensor, ...}: tensors of nested tuples and lists in order;
    booleans as u8 (the checker's dtypes)."""
    out = []

    def walk(r):
        if isinstance(r, torch.Tensor):
            r = r.detach()
            out.append(r.to(torch.uint8) if r.dtype == torch.bool else r)
        elif isinstance(r, (list, tuple)):
            for x in r:
                walk(x)
        elif isinstance(r, dict):
            for k in sorted(r):
                walk(r[k])
        else:
            raise ValueError(f"the model returned a {type(r).__name__}; convert mode checks tensors")
    walk(result)
    if not out:
        raise ValueError("the model returned no tensor")
    return {f"out{i}": t for i, t in enumerate(out)}
