"""akad compat layer, feature host-reads-device-memory (docs/images.md): PyTorch's CUDA tensors
in managed memory, so HIP code that reads device data from the host (as ROCm allows) does not
crash on NVIDIA. Everything torch allocates on the GPU then goes through src/managed_alloc.c,
which keeps freed blocks for reuse as PyTorch's own cache does.
"""

import hashlib
import os
import subprocess
import sys

import akad_aka_compat

_SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "managed_alloc.c")


def build_allocator(cache_dir, cuda_home):
    """Compiles the allocator once per source version into cache_dir; returns the .so path."""
    with open(_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    so = os.path.join(cache_dir, "akad-managed-alloc-%s.so" % digest)
    if os.path.exists(so):
        return so
    os.makedirs(cache_dir, exist_ok=True)
    tmp = "%s.tmp-%d" % (so, os.getpid())
    lib = os.path.join(cuda_home, "lib64")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-I" + os.path.join(cuda_home, "include"), _SOURCE,
                    "-L" + lib, "-Wl,-rpath," + lib, "-lcudart", "-lpthread", "-o", tmp], check=True)
    os.replace(tmp, so)
    return so


def install(torch):
    if getattr(torch.version, "hip", None) is not None:
        return
    cache = os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR") or "/tmp", "akad-compat")
    try:
        so = build_allocator(cache, os.environ.get("CUDA_HOME", "/usr/local/cuda"))
        allocator = torch.cuda.memory.CUDAPluggableAllocator(so, "akad_managed_malloc", "akad_managed_free")
        torch.cuda.memory.change_current_allocator(allocator)
    except Exception as e:  # the task then runs as it would without the layer
        print("akad compat: managed memory not installed: %s" % e, file=sys.stderr)
        akad_aka_compat.record("host-reads-device-memory", "failed", reason=str(e)[:200])
        return
    akad_aka_compat.record("host-reads-device-memory", "managed allocator")
