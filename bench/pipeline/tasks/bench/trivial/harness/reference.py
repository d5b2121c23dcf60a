#!/usr/bin/env python3
# reference generate --plan P --data D: one small f32 tensor per case, its own reference.
import json, struct, sys
plan, data = sys.argv[sys.argv.index("--plan") + 1], sys.argv[sys.argv.index("--data") + 1]
for case in json.load(open(plan))["cases"]:
    n = int(case["config"]["n"])
    body = struct.pack("<H", 1) + b"x" + bytes([0, 1]) + struct.pack("<Q", n) + struct.pack("<%df" % n, *[1.0 + i + case["seed"] % 7 for i in range(n)])
    blob = b"AKT1" + struct.pack("<I", 1) + body
    open(f"{data}/{case['name']}.in.akt", "wb").write(blob)
    open(f"{data}/{case['name']}.ref.akt", "wb").write(blob)
