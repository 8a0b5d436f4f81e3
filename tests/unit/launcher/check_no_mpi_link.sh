#!/bin/sh
# The launcher side links neither MPI nor CUDA/NCCL (cmake/GpurunLayers.cmake): gpurun
# runs before MPI_Init on every rank and gpurun-report on a login node, where neither library need
# exist. Checks each binary's direct dependencies (readelf -d, NEEDED) and everything the loader
# would bring in (ldd), so a dependency that arrives through another library is caught too.
# usage: check_no_mpi_link.sh BINARY...
set -u
bad='lib(mpi|open-pal|open-rte|pmix|cudart|cuda|nccl|nvidia-ml)[._-]'
status=0
for bin in "$@"; do
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p') || { echo "FAIL: readelf -d $bin"; exit 1; }
  loaded=$(ldd "$bin") || { echo "FAIL: ldd $bin"; exit 1; }
  # The check must be able to see a library at all: libc is always there.
  if ! printf '%s\n' "$needed" | grep -q '^libc\.so'; then
    echo "FAIL: $bin: readelf shows no NEEDED libc, cannot judge its dependencies"; exit 1
  fi
  if ! printf '%s\n' "$loaded" | grep -q 'libc\.so'; then
    echo "FAIL: $bin: ldd shows no libc, cannot judge its dependencies"; exit 1
  fi
  hits=$( (printf '%s\n' "$needed"; printf '%s\n' "$loaded") | sed 's/^[[:space:]]*//' |
         grep -E "$bad" | sort -u)
  if [ -n "$hits" ]; then
    echo "FAIL: $bin links a library the launcher side must not link:"
    printf '%s\n' "$hits" | sed 's/^/  /'
    status=1
  else
    echo "ok: $bin: NEEDED $(printf '%s ' $needed)"
  fi
done
exit $status
