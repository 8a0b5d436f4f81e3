#!/bin/sh
# On a machine with a GPU: run the device kit's checks (scripts/device-kit). The GPU machines lent
# to this project have no Open MPI, hwloc or package access, so nothing is built there any more:
#   here (Debian, Open MPI installed):  scripts/device-kit          -> .device-kit/ (~22 MiB)
#   there, from the repository root:     tests/gpu/run-on-device.sh [--cpu-only]
# which runs .device-kit/run.sh (or $GPURUN_DEVICE_KIT/run.sh); outputs in ${OUT:-.device-kit/out}.
set -eu
cd "$(dirname "$0")/../.."
kit=${GPURUN_DEVICE_KIT:-.device-kit}
if [ ! -x "$kit/run.sh" ]; then
  echo "run-on-device.sh: no $kit/run.sh: make the kit with scripts/device-kit on a Debian machine" \
       "with gpurun's build dependencies, and bring $kit along" >&2
  exit 2
fi
exec "$kit/run.sh" "$@"
