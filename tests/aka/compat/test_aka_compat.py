"""The AKA compat layer's Python module (images/cuda-hip/aka-compat/python): option dropping,
.hip sources through cpp_extension, the managed-memory allocator. PyTorch and Triton are not
installed here: the classes that need them use tiny STAND-INS written by the test (named so),
each run in a fresh interpreter, as the layer runs in the harness's processes."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

COMPAT = os.environ.get("AKAD_COMPAT_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "images", "cuda-hip", "aka-compat")
COMPAT = os.path.abspath(COMPAT)
CUDA_HIP = os.path.dirname(COMPAT)
sys.path.insert(0, os.path.join(COMPAT, "python"))

import akad_aka_compat  # noqa: E402


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


def read_record(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Sandboxless(unittest.TestCase):
    """A temp dir, and a fresh interpreter with the layer and the stand-ins on its path."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="akad-compat-test-")
        self.record = os.path.join(self.dir, "record.jsonl")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def python(self, code, features, extra_env=None):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AKAD_AKA_COMPAT_RECORD": self.record,
               "PYTHONPATH": os.pathsep.join([self.dir, os.path.join(COMPAT, "python")]),
               "TORCH_EXTENSIONS_DIR": os.path.join(self.dir, "ext"), "HIP_PATH": CUDA_HIP}
        env.update(extra_env or {})
        prelude = "import akad_aka_compat\nakad_aka_compat.install(%r)\n" % (features,)
        return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], env=env, cwd=self.dir,
                              capture_output=True, text=True, timeout=60)


class AmdOptionDropping(Sandboxless):
    def test_amd_options_are_dropped_and_recorded_but_a_parameter_of_that_name_is_kept(self):
        os.environ["AKAD_AKA_COMPAT_RECORD"] = self.record
        try:
            kwargs = {"waves_per_eu": 2, "kpack": 1, "matrix_instr_nonkdim": 16, "BLOCK": 64, "num_warps": 8}
            dropped = akad_aka_compat.drop_amd_options(kwargs, {"x", "kpack", "BLOCK"}, "k")
        finally:
            del os.environ["AKAD_AKA_COMPAT_RECORD"]
        self.assertEqual(dropped, {"waves_per_eu": 2, "matrix_instr_nonkdim": 16})
        self.assertEqual(kwargs, {"kpack": 1, "BLOCK": 64, "num_warps": 8})
        self.assertEqual(sorted(e["option"] for e in read_record(self.record)), ["matrix_instr_nonkdim", "waves_per_eu"])


STAND_IN_TRITON = {
    "triton/__init__.py": """
        # STAND-IN for Triton: launches refuse unknown keyword arguments, as its CUDA backend does.
        from triton.runtime.jit import JITFunction

        def jit(fn):
            return JITFunction(fn)
        """,
    "triton/runtime/__init__.py": "",
    "triton/runtime/jit.py": """
        import inspect

        class JITFunction:
            def __init__(self, fn):
                self.fn, self.__name__ = fn, fn.__name__
                self.arg_names = list(inspect.signature(fn).parameters)

            def run(self, *args, grid, warmup, **kwargs):
                for k in kwargs:
                    if k not in self.arg_names and k != "num_warps":
                        raise KeyError("Keyword argument %s was specified but unrecognised" % k)
                return self.fn(*args, **{k: v for k, v in kwargs.items() if k in self.arg_names})

            def __getitem__(self, grid):
                return lambda *a, **kw: self.run(*a, grid=grid, warmup=False, **kw)
        """,
}

LAUNCHES = """
    import triton

    @triton.jit
    def plain(x):
        return x + 1

    @triton.jit
    def packed(x, kpack):
        return x * kpack

    print(plain[(1,)](1, waves_per_eu=2, matrix_instr_nonkdim=16, num_warps=4), packed[(1,)](3, kpack=2, waves_per_eu=0))
    """


class TritonLaunchesWithAStandInTriton(Sandboxless):
    def setUp(self):
        super().setUp()
        for rel, text in STAND_IN_TRITON.items():
            write(self.dir, rel, text)

    def test_launches_lose_amd_options_and_keep_real_parameters(self):
        r = self.python(LAUNCHES, ["triton-amd-options"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["2", "6"])
        seen = sorted((e["kernel"], e["option"]) for e in read_record(self.record))
        self.assertEqual(seen, [("packed", "waves_per_eu"), ("plain", "matrix_instr_nonkdim"), ("plain", "waves_per_eu")])

    def test_without_the_feature_the_stand_in_refuses_them(self):
        r = self.python(LAUNCHES, ["hip-extension"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("waves_per_eu was specified but unrecognised", r.stderr)
        self.assertEqual(read_record(self.record), [])


def stand_in_torch(root, hip_version):
    write(root, "torch/__init__.py", "from torch import version\n")
    write(root, "torch/version.py", "hip = %r\n" % (hip_version,))
    write(root, "torch/utils/__init__.py", "")
    # STAND-IN for cpp_extension: load() and load_inline() print what they were given; load()
    # "builds" <name>.so (a JSON file naming its sources) where PyTorch would, and the stand-in
    # _import_module_from_library reads such a file back.
    write(root, "torch/utils/cpp_extension.py", """
        import json, os, types

        def _get_build_directory(name, verbose):
            return os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], name)

        def _import_module_from_library(name, path, is_python_module):
            with open(os.path.join(path, name + ".so")) as f:
                return types.SimpleNamespace(**json.load(f))

        def load(name, sources, extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None,
                 extra_include_paths=None, verbose=False):
            print(json.dumps({"name": name, "sources": sources, "cuda": extra_cuda_cflags,
                              "ld": extra_ldflags, "include": extra_include_paths}))
            os.makedirs(_get_build_directory(name, False), exist_ok=True)
            with open(os.path.join(_get_build_directory(name, False), name + ".so"), "w") as f:
                json.dump({"built_from": sources}, f)
            return types.SimpleNamespace(built_from=sources)

        def load_inline(name, cpp_sources, cuda_sources=None, extra_include_paths=None, **kw):
            print(json.dumps({"name": name, "include": extra_include_paths}))
        """)


HIP_SOURCE = """
    #include <hip/hip_runtime.h>
    #include <hipblas/hipblas.h>
    #include "helper.h"

    __global__ void twice(float* x, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) x[i] = helper_scale() * x[i] + __shfl_down(x[i], 1);
    }
    hipblasStatus_t make(hipblasHandle_t* h) { return hipblasCreate(h); }
    """


class HipExtensionWithAStandInTorch(Sandboxless):
    def setUp(self):
        super().setUp()
        write(self.dir, "task/hip/helper.h", "__device__ inline float helper_scale() { return 2.0f; }\n")
        self.hip = write(self.dir, "task/hip/k.hip", HIP_SOURCE)

    def load(self, hip_version, features):
        stand_in_torch(self.dir, hip_version)
        r = self.python("""
            from torch.utils.cpp_extension import load, load_inline
            load("k", sources=["task/hip/k.hip"], extra_cuda_cflags=["-O3"])
            load_inline("inline", cpp_sources="")
            """, features)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [json.loads(line) for line in r.stdout.splitlines()]

    def test_hip_sources_are_built_as_cuda_with_the_shims_and_cublas(self):
        features = ["hip-extension", "rocm-torch-headers", "hipblas-on-cublas"]
        got, inline = self.load(None, features)
        (cu,) = got["sources"]
        self.assertTrue(cu.endswith(".cu"), cu)
        with open(cu) as f:
            text = f.read()
        self.assertIn('#include "%s"' % os.path.abspath(self.hip), text)
        with open(self.hip, "rb") as f:
            import hashlib
            self.assertIn(hashlib.sha256(f.read()).hexdigest(), text)
        shims, hip_headers = os.path.join(COMPAT, "include"), os.path.join(CUDA_HIP, "include")
        self.assertEqual(got["include"], [shims, hip_headers])
        self.assertEqual(inline["include"], [shims, hip_headers])
        self.assertEqual(got["cuda"], ["-O3", "-D__HIP_PLATFORM_NVIDIA__=1"])
        self.assertIn("-lcublas", got["ld"])
        actions = {(e["feature"], e["action"]) for e in read_record(self.record)}
        self.assertIn(("hip-extension", "built .hip as CUDA"), actions)
        self.assertIn(("hipblas-on-cublas", "linked cuBLAS"), actions)
        self.assertIn(("rocm-torch-headers", "applied"), actions)

    def test_a_changed_hip_source_gets_a_new_cuda_source(self):
        first = self.load(None, ["hip-extension"])[0]["sources"][0]
        with open(self.hip, "a") as f:
            f.write("// edited\n")
        second = self.load(None, ["hip-extension"])[0]["sources"][0]
        self.assertNotEqual(first, second)

    def test_a_rocm_build_of_pytorch_is_left_alone(self):
        got, inline = self.load("6.2.41133", ["hip-extension", "hipblas-on-cublas"])
        self.assertEqual(got["sources"], ["task/hip/k.hip"])
        self.assertIsNone(got["include"])
        self.assertIsNone(inline["include"])
        self.assertEqual(read_record(self.record), [])

    def build_twice(self, first, second, edit=None):
        """Loads `first`, applies `edit`, loads `second` (each in a fresh interpreter); returns
        the lines load() printed (one per real build) and the record's actions."""
        stand_in_torch(self.dir, None)
        built = []
        for src in (first, second):
            r = self.python("""
                from torch.utils.cpp_extension import load
                m = load("k", sources=[%r], extra_cuda_cflags=["-O3"])
                """ % src, ["hip-extension"])
            self.assertEqual(r.returncode, 0, r.stderr)
            built += [json.loads(line) for line in r.stdout.splitlines()]
            if edit:
                edit()
                edit = None
        return built, [(e["action"], e.get("extension")) for e in read_record(self.record) if e["feature"] == "build-cache"]

    def test_the_same_sources_are_built_once_and_loaded_from_the_cache_after(self):
        built, cache = self.build_twice("task/hip/k.hip", "task/hip/k.hip")
        self.assertEqual(len(built), 1, built)
        self.assertEqual(cache, [("kept", "k"), ("reused", "k")])

    def test_a_copy_in_another_folder_gets_its_own_cuda_source_and_the_same_build(self):
        # AKA's harnesses copy the .hip into a temporary folder for each run and delete it after.
        shutil.copytree(os.path.join(self.dir, "task/hip"), os.path.join(self.dir, "temp/hip"))
        built, cache = self.build_twice("task/hip/k.hip", "temp/hip/k.hip")
        self.assertEqual(len(built), 1, built)
        self.assertEqual(cache, [("kept", "k"), ("reused", "k")])
        cus = sorted(os.listdir(os.path.join(self.dir, "ext", "akad-hip-sources")))
        self.assertEqual(len(cus), 2, cus)
        texts = []
        for c in cus:
            with open(os.path.join(self.dir, "ext", "akad-hip-sources", c)) as f:
                texts.append(f.read())
        for d in ("task", "temp"):  # each copy's .cu includes that copy
            line = '#include "%s"' % os.path.join(self.dir, d, "hip/k.hip")
            self.assertEqual(sum(line in t for t in texts), 1, (line, texts))

    def test_a_changed_header_the_source_includes_is_built_again(self):
        def edit():
            write(self.dir, "task/hip/helper.h", "__device__ inline float helper_scale() { return 3.0f; }\n")
        built, cache = self.build_twice("task/hip/k.hip", "task/hip/k.hip", edit)
        self.assertEqual(len(built), 2, built)
        self.assertEqual(cache, [("kept", "k"), ("kept", "k")])

    def test_a_source_whose_includes_cannot_all_be_found_is_not_cached(self):
        write(self.dir, "task/hip/k.hip", HIP_SOURCE + '#include "../elsewhere/missing.h"\n')
        built, cache = self.build_twice("task/hip/k.hip", "task/hip/k.hip")
        self.assertEqual(len(built), 2, built)
        self.assertEqual(cache, [])

    @unittest.skipUnless(shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc"), "nvcc not installed")
    def test_the_cuda_source_made_of_a_hip_file_compiles_with_nvcc(self):
        (cu,), _, blas = akad_aka_compat.hip_as_cuda([self.hip], os.path.join(self.dir, "cu"))
        self.assertTrue(blas)
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        includes = ["-I" + d for d in [os.path.join(COMPAT, "include"), os.path.join(CUDA_HIP, "include")]]
        r = subprocess.run([nvcc, "-arch=sm_90", "-c", cu, "-o", os.path.join(self.dir, "k.o")] + includes +
                           akad_aka_compat.CUDA_FLAGS, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)


class ManagedMemoryWithAStandInTorch(Sandboxless):
    def test_the_allocator_is_built_and_handed_to_torch(self):
        if not os.path.exists("/usr/local/cuda/include/cuda_runtime_api.h") or not shutil.which("cc"):
            self.skipTest("no CUDA toolkit or C compiler here")
        write(self.dir, "torch/__init__.py", """
            import types
            version = types.SimpleNamespace(hip=None)

            class CUDAPluggableAllocator:
                def __init__(self, path, alloc, free):
                    self.args = (path, alloc, free)

            def change_current_allocator(a):
                print("allocator", *a.args)

            cuda = types.SimpleNamespace(memory=types.SimpleNamespace(
                CUDAPluggableAllocator=CUDAPluggableAllocator, change_current_allocator=change_current_allocator))
            """)
        r = self.python("import torch\n", ["host-reads-device-memory"], {"CUDA_HOME": "/usr/local/cuda"})
        self.assertEqual(r.returncode, 0, r.stderr)
        words = r.stdout.split()
        self.assertEqual(words[0], "allocator")
        self.assertEqual(words[2:], ["akad_managed_malloc", "akad_managed_free"])
        symbols = subprocess.run(["nm", "-D", "--defined-only", words[1]], capture_output=True, text=True).stdout
        self.assertIn("akad_managed_malloc", symbols)
        self.assertIn("akad_managed_free", symbols)
        self.assertEqual([e["action"] for e in read_record(self.record)], ["managed allocator"])


class ManagedAllocatorBlocks(Sandboxless):
    """The allocator's own reuse of freed blocks, through ctypes; without a GPU a new block cannot
    be had, which shows the kept one is what a matching request gets."""

    REUSE = """
        import ctypes, sys
        lib = ctypes.CDLL(sys.argv[1])
        lib.akad_managed_malloc.restype = ctypes.c_void_p
        lib.akad_managed_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        lib.akad_managed_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        kept = ctypes.create_string_buffer(4096)
        lib.akad_managed_free(ctypes.addressof(kept), 4096, 0, 7)
        print(lib.akad_managed_malloc(4096, 0, 8) == ctypes.addressof(kept),  # another stream
              lib.akad_managed_malloc(2048, 0, 7) == ctypes.addressof(kept),  # another size
              lib.akad_managed_malloc(4096, 0, 7) == ctypes.addressof(kept),  # the same
              lib.akad_managed_malloc(4096, 0, 7) == ctypes.addressof(kept))  # taken already
        """

    def test_a_freed_block_serves_the_next_request_of_its_size_device_and_stream_only(self):
        cuda = "/usr/local/cuda"
        if not os.path.exists(os.path.join(cuda, "include", "cuda_runtime_api.h")) or not shutil.which("cc"):
            self.skipTest("no CUDA toolkit or C compiler here")
        if os.path.exists("/dev/nvidiactl"):
            self.skipTest("a GPU is here: new blocks would be real, the test needs them to fail")
        import akad_managed_memory
        so = akad_managed_memory.build_allocator(os.path.join(self.dir, "so"), cuda)
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(cuda, "lib64"))
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(self.REUSE), so], env=env, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["False", "False", "True", "False"])


if __name__ == "__main__":
    unittest.main()
