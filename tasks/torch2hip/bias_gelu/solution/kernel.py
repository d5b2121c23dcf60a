"""Calls the fused HIP kernel in libkernel.so (built from kernel.hip) on torch's current stream."""
import ctypes
import os

import torch

_lib = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "libkernel.so"))
_lib.bias_gelu_bf16.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                                ctypes.c_longlong, ctypes.c_void_p]
_lib.bias_gelu_bf16.restype = ctypes.c_int


def bias_gelu(x, bias, y):
    rows, cols = x.shape
    stream = torch.cuda.current_stream().cuda_stream
    rc = _lib.bias_gelu_bf16(x.data_ptr(), bias.data_ptr(), y.data_ptr(), rows, cols, stream)
    if rc != 0:
        raise RuntimeError(f"bias_gelu_bf16 launch failed with HIP error {rc}")
