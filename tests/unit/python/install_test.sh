#!/bin/sh
# Install the build into a scratch prefix; the installed package must import with one PYTHONPATH
# and load the installed libgpurun (not the build tree's), then run as a singleton. The caller's
# GPURUN_LIB (an environment module's, say) would be loaded instead: unset.
set -eu
unset GPURUN_LIB
build=$1 py=$2 pydir=$3
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/$pydir/gpurun/__init__.py"
PYTHONPATH="$prefix/$pydir" "$py" - "$prefix" <<'PY'
import sys, numpy as np, gpurun
prefix = sys.argv[1]
assert gpurun.__file__.startswith(prefix), gpurun.__file__
assert gpurun._lib._name.startswith(prefix), gpurun._lib._name
w = gpurun.init()
assert (w.rank, w.size) == (0, 1)
assert gpurun.world().allreduce(np.arange(3.0)).tolist() == [0.0, 1.0, 2.0]
print("installed package OK:", gpurun._lib._name)
PY
