"""RMSNorm on f16: x uniform in [-3, 3), w in [0.5, 1.5), both rounded to f16; eps from the
configuration (default 1e-6); the reference works in float64 and rounds once to f16."""
import torch


def generate(config, seed, device="cpu"):
    """Drawn on `device`: the driver draws its timed calls' inputs on the GPU, where the same seed
    gives other values than on the CPU."""
    g = torch.Generator(device).manual_seed(seed % (1 << 63))
    x = torch.rand(config["rows"], config["cols"], generator=g, device=device) * 6 - 3
    w = torch.rand(config["cols"], generator=g, device=device) + 0.5
    return {"x": x.to(torch.float16), "w": w.to(torch.float16)}


def reference(config, inputs):
    x, w = inputs["x"].cuda().double(), inputs["w"].cuda().double()
    eps = float(config.get("eps", 1e-6))
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    return {"y": y.to(torch.float16)}
