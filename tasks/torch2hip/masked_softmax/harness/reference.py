"""y = softmax(x * scale + mask) per row on f16: x uniform in [-8, 8), mask [cols] is 0 or -10000
(a quarter of the columns masked), both f16; scale from the configuration. The reference works
in float64 and rounds once to f16."""
import torch


def generate(config, seed, device="cpu"):
    """Drawn on `device`: the driver draws its timed calls' inputs on the GPU, where the same seed
    gives other values than on the CPU."""
    g = torch.Generator(device).manual_seed(seed % (1 << 63))
    x = torch.rand(config["rows"], config["cols"], generator=g, device=device) * 16 - 8
    masked = torch.rand(config["cols"], generator=g, device=device) < 0.25
    mask = torch.where(masked, torch.tensor(-10000.0, device=device), torch.tensor(0.0, device=device))
    return {"x": x.to(torch.float16), "mask": mask.to(torch.float16)}


def reference(config, inputs):
    x, mask = inputs["x"].cuda().double(), inputs["mask"].cuda().double()
    y = torch.softmax(x * float(config["scale"]) + mask, dim=-1)
    return {"y": y.to(torch.float16)}
