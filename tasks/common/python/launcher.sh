#!/bin/sh
# Launcher for the python harness: copied to ./runner and ./reference at build time; runs
# harness/<name>_main.py next to itself, wherever the built workspace is mounted.
# AKA_PYTHON names the interpreter with torch (the torch image sets it).
# Bytecode: with PYTHONPYCACHEPREFIX (the scorer points it into the sandbox's JIT cache) Python
# keeps compiled modules there, so only the first process of a cache compiles torch's thousands
# of modules; without it nothing is written (-B), not even into the workspace.
d=$(cd "$(dirname "$0")" && pwd) || exit 2
nobytecode=-B
[ -n "${PYTHONPYCACHEPREFIX:-}" ] && nobytecode=
exec "${AKA_PYTHON:-python3}" $nobytecode "$d/harness/$(basename "$0")_main.py" "$@"
