#!/bin/sh
# Launcher for the python harness: copied to ./runner and ./reference at build time; runs
# harness/<name>_main.py next to itself, wherever the built workspace is mounted.
# AKA_PYTHON names the interpreter with torch (the torch image sets it).
d=$(cd "$(dirname "$0")" && pwd) || exit 2
exec "${AKA_PYTHON:-python3}" -B "$d/harness/$(basename "$0")_main.py" "$@"
