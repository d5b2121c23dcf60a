"""Calls the fused HIP kernel in libkernel.so (built from kernel.hip) on torch's current stream."""
import ctypes
import os

import torch

_lib = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "libkernel.so"))
_lib.masked_softmax_f16.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_float, ctypes.c_void_p]
_lib.masked_softmax_f16.restype = ctypes.c_int


def masked_softmax(x, mask, scale, y):
    rows, cols = x.shape
    rc = _lib.masked_softmax_f16(x.data_ptr(), mask.data_ptr(), y.data_ptr(), rows, cols, scale,
                                 torch.cuda.current_stream().cuda_stream)
    if rc != 0:
        raise RuntimeError(f"masked_softmax_f16 launch failed with HIP error {rc}")
