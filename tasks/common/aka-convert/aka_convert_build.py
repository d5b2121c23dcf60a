"""Builds a converted AgentKernelArena task's HIP file into a PyTorch extension, as AKA's harness
does (torch.utils.cpp_extension.load), into build/aka-ext/, and writes build/aka-ext/built.json
for akad's loader (kernel.py). An empty HIP file (torch2hip ships its target file empty) builds
nothing: the loader then gives no `forward` and the PyTorch functional runs. On NVIDIA, a task
classified for akad's compat layer builds through it (docs/images.md), installed here from the
cuda-hip image the task's image binds. Run from the workspace root."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join("build", "aka-ext")


def main():
    with open(os.path.join(HERE, "aka_convert.json")) as f:
        spec = json.load(f)
    hip = spec["hip"]
    os.makedirs(OUT, exist_ok=True)
    with open(hip, "rb") as f:
        empty = not f.read().strip()
    built = {"hip": hip, "kind": "pytorch" if empty else "extension"}
    if not empty:
        features = [f for f in spec.get("compat", []) if f != "perf-helpers"]
        layer = os.path.join(os.environ.get("AKAD_CUDA_HIP", "/akad/images/cuda-hip"), "aka-compat", "python")
        if features and os.path.isdir(layer):
            sys.path.insert(0, layer)
            os.environ.setdefault("HIPCXX", os.path.join(os.environ.get("HIP_PATH", ""), "bin", "hipcc"))
            import akad_aka_compat
            akad_aka_compat.install(features)
            built["compat"] = features
        os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.abspath(os.path.join(OUT, "torch-extensions")))
        from torch.utils import cpp_extension
        name = "aka_candidate"
        ext = cpp_extension.load(name=name, sources=[os.path.abspath(hip)],
                                 build_directory=os.path.abspath(OUT), verbose=False)
        if not hasattr(ext, "forward"):
            print(f"{hip}: the extension defines no 'forward'", file=sys.stderr)
            return 1
        built["path"] = os.path.relpath(ext.__file__)
    with open(os.path.join(OUT, "built.json"), "w") as f:
        json.dump(built, f)
    print(f"aka-convert: {hip}: {built['kind']}" + (f" ({built['path']})" if "path" in built else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
