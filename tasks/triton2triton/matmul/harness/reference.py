"""C = A @ B on f16: A [m, k], B [k, n] uniform in [-1, 1) rounded to f16; the reference
multiplies in float64 and rounds once to f16."""
import torch


def generate(config, seed, device="cpu"):
    """Drawn on `device`: the driver draws its timed calls' inputs on the GPU, where the same seed
    gives other values than on the CPU."""
    g = torch.Generator(device).manual_seed(seed % (1 << 63))
    m, n, k = config["m"], config["n"], config["k"]
    a = (torch.rand(m, k, generator=g, device=device) * 2 - 1).to(torch.float16)
    b = (torch.rand(k, n, generator=g, device=device) * 2 - 1).to(torch.float16)
    return {"a": a, "b": b}


def reference(config, inputs):
    a, b = inputs["a"].cuda().double(), inputs["b"].cuda().double()
    return {"c": (a @ b).to(torch.float16)}
