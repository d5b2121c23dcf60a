"""SwiGLU on bf16: x [rows, 2d] uniform in [-4, 4) rounded to bf16; y = silu(x[:, :d]) * x[:, d:]
computed in float64 and rounded once to bf16."""
import torch


def generate(config, seed, device="cpu"):
    """Drawn on `device`: the driver draws its timed calls' inputs on the GPU, where the same seed
    gives other values than on the CPU."""
    g = torch.Generator(device).manual_seed(seed % (1 << 63))
    x = torch.rand(config["rows"], 2 * config["d"], generator=g, device=device) * 8 - 4
    return {"x": x.to(torch.bfloat16)}


def reference(config, inputs):
    x = inputs["x"].cuda().double()
    d = config["d"]
    return {"y": (torch.nn.functional.silu(x[:, :d]) * x[:, d:]).to(torch.bfloat16)}
