"""y = gelu(x + bias) (erf form) on bf16: x uniform in [-4, 4), bias in [-1, 1), both rounded to
bf16; the reference works in float64 and rounds once to bf16."""
import torch


def generate(config, seed):
    g = torch.Generator().manual_seed(seed % (1 << 63))
    x = torch.rand(config["rows"], config["cols"], generator=g) * 8 - 4
    bias = torch.rand(config["cols"], generator=g) * 2 - 1
    return {"x": x.to(torch.bfloat16), "bias": bias.to(torch.bfloat16)}


def reference(config, inputs):
    v = inputs["x"].cuda().double() + inputs["bias"].cuda().double()
    return {"y": torch.nn.functional.gelu(v).to(torch.bfloat16)}
