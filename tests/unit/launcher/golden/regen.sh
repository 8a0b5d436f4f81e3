#!/bin/sh
# Rewrites the golden plans from the gpurun in BUILD (default: build/), after a placement change
# you mean; review the diff (git diff tests/unit/launcher/golden) before committing it.
#   tests/unit/launcher/golden/regen.sh [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
build=${1:-$root/build}
exec python3 "$here/../test_golden.py" "$build/launcher/gpurun" "$root/configs/topologies" "$here" --update
