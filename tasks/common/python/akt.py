"""akt - the .akt tensor file format (docs/tasks.md) for the python harness, on torch tensors.

Layout (little-endian): b"AKT1", u32 tensor count, then per tensor: u16 name length, name
bytes, u8 dtype, u8 rank, u64 dims[rank], row-major data.
"""
import os
import struct

import torch

# dtype code <-> torch dtype, in the code order of the format.
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int32, torch.int64, torch.uint8, torch.int8]
NAMES = ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8"]
MAX_RANK = 16


class AktError(Exception):
    pass


def dtype_name(dtype):
    return NAMES[DTYPES.index(dtype)] if dtype in DTYPES else str(dtype)


def read_akt(path):
    """Returns an ordered dict name -> CPU tensor; every size is checked against the file."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(n, what):
        nonlocal pos
        if n > len(data) - pos:
            raise AktError(f"{path}: truncated: {what} needs {n} bytes, {len(data) - pos} left")
        chunk = data[pos:pos + n]
        pos += n
        return chunk

    if take(4, "magic") != b"AKT1":
        raise AktError(f"{path}: bad magic (not an AKT1 file)")
    (count,) = struct.unpack("<I", take(4, "tensor count"))
    out = {}
    for i in range(count):
        (name_len,) = struct.unpack("<H", take(2, "name length"))
        name = take(name_len, "name").decode("utf-8")
        code, rank = struct.unpack("<BB", take(2, "dtype and rank"))
        if code >= len(DTYPES):
            raise AktError(f"{path}: tensor {i} ('{name}'): invalid dtype code {code}")
        if rank > MAX_RANK:
            raise AktError(f"{path}: tensor {i} ('{name}'): rank {rank} exceeds {MAX_RANK}")
        dims = list(struct.unpack(f"<{rank}Q", take(8 * rank, "dims")))
        dtype = DTYPES[code]
        elems = 1
        for d in dims:
            elems *= d
        nbytes = elems * torch.empty((), dtype=dtype).element_size()
        raw = take(nbytes, f"data of '{name}'")
        if name in out:
            raise AktError(f"{path}: duplicate tensor name '{name}'")
        if elems == 0:
            out[name] = torch.empty(dims, dtype=dtype)
        else:
            out[name] = torch.frombuffer(bytearray(raw), dtype=dtype).reshape(dims)
    if pos != len(data):
        raise AktError(f"{path}: {len(data) - pos} trailing bytes after the last tensor")
    return out


def write_akt(path, tensors):
    """Writes an ordered dict name -> tensor (any device, any layout) to path."""
    parts = [b"AKT1", struct.pack("<I", len(tensors))]
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise AktError(f"{path}: '{name}' is not a tensor")
        if t.dtype not in DTYPES:
            raise AktError(f"{path}: tensor '{name}' has unsupported dtype {t.dtype}")
        if t.dim() > MAX_RANK:
            raise AktError(f"{path}: tensor '{name}' has rank above {MAX_RANK}")
        encoded = name.encode("utf-8")
        parts.append(struct.pack("<H", len(encoded)) + encoded)
        parts.append(struct.pack("<BB", DTYPES.index(t.dtype), t.dim()))
        parts.append(struct.pack(f"<{t.dim()}Q", *t.shape))
        flat = t.detach().to("cpu").contiguous().reshape(-1)
        if flat.numel():
            parts.append(flat.view(torch.uint8).numpy())  # written as it is: no copy into bytes
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for p in parts:
            f.write(p)
    os.replace(tmp, path)
