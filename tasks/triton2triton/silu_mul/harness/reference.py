"""SwiGLU on bf16: x [rows, 2d] uniform in [-4, 4) rounded to bf16; y = silu(x[:, :d]) * x[:, d:]
computed in float64 and rounded once to bf16."""
import torch


def generate(config, seed):
    g = torch.Generator().manual_seed(seed % (1 << 63))
    x = torch.rand(config["rows"], 2 * config["d"], generator=g) * 8 - 4
    return {"x": x.to(torch.bfloat16)}


def reference(config, inputs):
    x = inputs["x"].cuda().double()
    d = config["d"]
    return {"y": (torch.nn.functional.silu(x[:, :d]) * x[:, d:]).to(torch.bfloat16)}
