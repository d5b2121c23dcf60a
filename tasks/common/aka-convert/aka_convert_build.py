"""Builds a converted AgentKernelArena task's HIP file into a PyTorch extension, as AKA's harness
does (torch.utils.cpp_extension.load), into build/aka-ext/, and writes build/aka-ext/built.json
for akad's loader (kernel.py). An empty HIP file (torch2hip ships its target file empty) builds
nothing: the loader then gives no `forward` and the PyTorch functional runs. On NVIDIA, a task
classified for akad's compat layer builds through it (docs/images.md), installed here from the
cuda-hip image the task's image binds. An extension already built from the same bytes (this
workspace's build/aka-ext, restored by the scorer's build cache, or the trusted build's in
$AKA_TRUSTED) is taken instead of building it again. Run from the workspace root."""
import hashlib
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join("build", "aka-ext")


def reuse(built, folder):
    """Takes the extension built in `folder` (this workspace's, restored by the scorer's build
    cache, or the trusted build's) when it was built from these same bytes."""
    try:
        with open(os.path.join(folder, "built.json")) as f:
            earlier = json.load(f)
    except (OSError, ValueError):
        return False
    so = os.path.join(folder, os.path.basename(str(earlier.get("path", ""))))
    if earlier.get("sha256") != built["sha256"] or earlier.get("kind") != "extension" or not os.path.isfile(so):
        return False
    here = os.path.join(OUT, os.path.basename(so))
    if os.path.abspath(so) != os.path.abspath(here):
        shutil.copyfile(so, here)
    built["path"] = here
    built["reused"] = folder
    return True


def main():
    with open(os.path.join(HERE, "aka_convert.json")) as f:
        spec = json.load(f)
    hip = spec["hip"]
    os.makedirs(OUT, exist_ok=True)
    with open(hip, "rb") as f:
        source = f.read()
    empty = not source.strip()
    built = {"hip": hip, "kind": "pytorch" if empty else "extension", "sha256": hashlib.sha256(source).hexdigest()}
    if not empty and reuse(built, OUT):
        pass
    elif not empty and os.environ.get("AKA_TRUSTED") and reuse(built, os.path.join(os.environ["AKA_TRUSTED"], OUT)):
        pass
    elif not empty:
        # The HIP file is always built through cpp_extension here, whatever AKA's own scripts do.
        features = sorted({f for f in spec.get("compat", []) if f != "perf-helpers"} | {"hip-extension"})
        layer = os.path.join(os.environ.get("AKAD_CUDA_HIP", "/akad/images/cuda-hip"), "aka-compat", "python")
        if os.path.isdir(layer):
            sys.path.insert(0, layer)
            os.environ.setdefault("HIPCXX", os.path.join(os.environ.get("HIP_PATH", ""), "bin", "hipcc"))
            import akad_aka_compat
            akad_aka_compat.install(features)
            built["compat"] = features
        os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.abspath(os.path.join(OUT, "torch-extensions")))
        # The build sandbox has no GPU to ask for its architecture: the image's target instead
        # of every architecture torch knows; and ninja from the interpreter's environment.
        arch = os.environ.get("HIPCC_OFFLOAD_ARCH", "")
        if arch.startswith("sm_") and arch[3:].isdigit():
            os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{arch[3:-1]}.{arch[-1]}")
        os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
        from torch.utils import cpp_extension
        name = "aka_candidate"
        ext = cpp_extension.load(name=name, sources=[os.path.abspath(hip)],
                                 build_directory=os.path.abspath(OUT), verbose=False)
        if not hasattr(ext, "forward"):
            print(f"{hip}: the extension defines no 'forward'", file=sys.stderr)
            return 1
        # A build the compat layer found in its cache lives there: the worker loads a copy here.
        so = os.path.join(OUT, name + ".so")
        if os.path.abspath(ext.__file__) != os.path.abspath(so):
            shutil.copyfile(ext.__file__, so)
        built["path"] = so
    with open(os.path.join(OUT, "built.json"), "w") as f:
        json.dump(built, f)
    print(f"aka-convert: {hip}: {built['kind']}" + (f" ({built['path']})" if "path" in built else "") +
          (f", reused from {built['reused']}" if "reused" in built else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
