"""One program per row holding the whole row in registers: one read of x, one write of y.
Rows wider than 16384 columns fall back to a looped kernel with wide blocks."""
import triton
import triton.language as tl


@triton.jit
def _softmax_row(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    v = tl.load(x_ptr + row * cols + offs, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))
    out = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * cols + offs, out.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_looped(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_row + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        new_m = tl.maximum(m, v)
        s = s * tl.exp(m - new_m) + tl.exp(v - new_m)
        s = tl.where(new_m == float("-inf"), 0.0, s)
        m = new_m
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_row + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        tl.store(y_row + offs, (tl.exp(v - row_max) / total).to(y_ptr.dtype.element_ty), mask=offs < cols)


def softmax(x, y):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    if block <= 16384:
        warps = 4 if block <= 1024 else (8 if block <= 4096 else 16)
        _softmax_row[(rows,)](x, y, cols, BLOCK=block, num_warps=warps)
    else:
        _softmax_looped[(rows,)](x, y, cols, BLOCK=4096, num_warps=16)
