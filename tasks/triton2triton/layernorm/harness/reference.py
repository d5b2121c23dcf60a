"""LayerNorm on bf16 with weight and bias: x uniform in [-3, 3), w in [0.5, 1.5), b in [-0.5, 0.5),
all rounded to bf16; eps from the configuration (default 1e-5). The reference works in float64."""
import torch


def _uniform(g, shape, lo, hi):
    return (torch.rand(*shape, generator=g, device=g.device) * (hi - lo) + lo).to(torch.bfloat16)


def generate(config, seed, device="cpu"):
    """Drawn on `device`: the driver draws its timed calls' inputs on the GPU, where the same seed
    gives other values than on the CPU."""
    g = torch.Generator(device).manual_seed(seed % (1 << 63))
    rows, cols = config["rows"], config["cols"]
    return {"x": _uniform(g, (rows, cols), -3, 3), "w": _uniform(g, (cols,), 0.5, 1.5),
            "b": _uniform(g, (cols,), -0.5, 0.5)}


def reference(config, inputs):
    x, w, b = (inputs[k].cuda().double() for k in ("x", "w", "b"))
    y = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, float(config.get("eps", 1e-5)))
    return {"y": y.to(torch.bfloat16)}
