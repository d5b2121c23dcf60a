"""Row softmax on f16: x uniform in [-8, 8) rounded to f16; the reference works in float64."""
import torch


def generate(config, seed, device="cpu"):
    """Drawn on `device`: the driver draws its timed calls' inputs on the GPU, where the same seed
    gives other values than on the CPU."""
    g = torch.Generator(device).manual_seed(seed % (1 << 63))
    x = torch.rand(config["rows"], config["cols"], generator=g, device=device) * 16 - 8
    return {"x": x.to(torch.float16)}


def reference(config, inputs):
    x = inputs["x"].cuda().double()
    return {"y": torch.softmax(x, dim=-1).to(torch.float16)}
