"""akad's loader for a converted AgentKernelArena task (written into the workspace as kernel.py;
the scorer always uses its own copy): `forward` is the `forward` of the extension that
harness/aka_convert_build.py built from the HIP file you edit, or None when that file is empty
(the PyTorch functional runs then)."""
import importlib.machinery
import importlib.util
import json
import os

import torch  # noqa: F401  (an extension needs torch's libraries loaded first)

_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, "build", "aka-ext", "built.json")) as _f:
    _BUILT = json.load(_f)

forward = None
if _BUILT["kind"] == "extension":
    _path = os.path.join(_HERE, _BUILT["path"])
    _loader = importlib.machinery.ExtensionFileLoader("aka_candidate", _path)
    _spec = importlib.util.spec_from_loader("aka_candidate", _loader)
    _ext = importlib.util.module_from_spec(_spec)
    _loader.exec_module(_ext)
    forward = _ext.forward
