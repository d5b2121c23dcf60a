"""y = gelu(x + bias) (erf form) on bf16: x uniform in [-4, 4), bias in [-1, 1), both rounded to
bf16; the reference works in float64 and rounds once to bf16."""
import torch


def generate(config, seed, device="cpu"):
    """Drawn on `device`: the driver draws its timed calls' inputs on the GPU, where the same seed
    gives other values than on the CPU."""
    g = torch.Generator(device).manual_seed(seed % (1 << 63))
    x = torch.rand(config["rows"], config["cols"], generator=g, device=device) * 8 - 4
    bias = torch.rand(config["cols"], generator=g, device=device) * 2 - 1
    return {"x": x.to(torch.bfloat16), "bias": bias.to(torch.bfloat16)}


def reference(config, inputs):
    v = inputs["x"].cuda().double() + inputs["bias"].cuda().double()
    return {"y": torch.nn.functional.gelu(v).to(torch.bfloat16)}
