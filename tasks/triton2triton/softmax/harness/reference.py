"""Row softmax on f16: x uniform in [-8, 8) rounded to f16; the reference works in float64."""
import torch


def generate(config, seed):
    g = torch.Generator().manual_seed(seed % (1 << 63))
    x = torch.rand(config["rows"], config["cols"], generator=g) * 16 - 8
    return {"x": x.to(torch.float16)}


def reference(config, inputs):
    x = inputs["x"].cuda().double()
    return {"y": torch.softmax(x, dim=-1).to(torch.float16)}
