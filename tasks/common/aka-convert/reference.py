"""The trusted reference of a converted AgentKernelArena gpumode task (aka_convert.py): inputs
are case `case` of AKA's get_inputs() drawn from the call's seed, the expected outputs AKA's
PyTorch module's on them."""
import torch

import aka_convert

_MODULE = None


def generate(config, seed, device="cpu"):
    return aka_convert.case_inputs(torch, config, seed, device)


def reference(config, inputs):
    global _MODULE
    if _MODULE is None:
        _MODULE, _ = aka_convert.models(torch)
    args = [t.cuda() for t in aka_convert.arguments(inputs)]
    return aka_convert.flatten(torch, _MODULE(*args))
