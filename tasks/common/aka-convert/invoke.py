"""The worker's side of a converted AgentKernelArena gpumode task: AKA's functional model (its
parameters made as the reference's) called with the candidate's extension `forward` as `fn`,
as AKA's harness calls it. kernel.py (akad's loader in the workspace) gives `forward`, or None
when the HIP file is empty (torch2hip ships it so: the PyTorch functional runs instead)."""
import torch

import aka_convert

_FUNCTIONAL = None


def functional():
    global _FUNCTIONAL
    if _FUNCTIONAL is None:
        _, _FUNCTIONAL = aka_convert.models(torch)
    return _FUNCTIONAL


def allocate_outputs(config, inputs):
    # The shapes of the PyTorch model's results, on zeros (the placeholders are uninitialised,
    # and an index input must stay in range).
    args = [torch.zeros_like(t) for t in aka_convert.arguments(inputs)]
    out = aka_convert.flatten(torch, functional()(*args))
    return {name: torch.empty_like(t, memory_format=torch.contiguous_format) for name, t in out.items()}


def invoke(kernel, config, inputs, outputs):
    args = aka_convert.arguments(inputs)
    result = functional()(*args, fn=kernel.forward) if kernel.forward is not None else functional()(*args)
    for name, t in aka_convert.flatten(torch, result).items():
        outputs[name].copy_(t)
