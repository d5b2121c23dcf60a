import torch


def allocate_outputs(config, inputs):
    return {"y": torch.empty(config["rows"], config["cols"], dtype=torch.bfloat16, device="cuda")}


def invoke(kernel, config, inputs, outputs):
    rows, cols = config["rows"], config["cols"]
    x, w, b = inputs["x"], inputs["w"], inputs["b"]
    assert x.shape == (rows, cols) and w.shape == (cols,) and b.shape == (cols,), "unexpected input shapes"
    kernel.layernorm(x, w, b, outputs["y"], float(config.get("eps", 1e-5)))
