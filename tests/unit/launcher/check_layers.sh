#!/bin/sh
# The layers' include directories hold (cmake/GpurunLayers.cmake): each probe in
# layer_probes/ is an OBJECT library (EXCLUDE_FROM_ALL) with the usage requirements of one layer.
# Every control must build; every other probe must fail on the header it names, and on nothing else.
# usage: check_layers.sh BUILD_DIR CONTROL... -- PROBE:HEADER...
set -u
build=$1
shift
status=0
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  out=$(cmake --build "$build" --target "layer_probe_$1" 2>&1)
  if [ $? -ne 0 ]; then
    echo "FAIL: the control probe $1 does not build:"
    printf '%s\n' "$out" | tail -20
    exit 1
  fi
  echo "ok: control $1 builds"
  shift
done
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || { echo "FAIL: no forbidden probes given"; exit 1; }
for pair in "$@"; do
  probe=${pair%%:*}
  header=${pair#*:}
  out=$(cmake --build "$build" --target "layer_probe_$probe" 2>&1)
  rc=$?
  # gcc: "gr_pool.h: No such file or directory"; clang: "'gr_pool.h' file not found"
  if [ $rc -ne 0 ] && printf '%s\n' "$out" | grep -Eq "$header'?:? (No such file|file not found)"; then
    echo "ok: $probe does not compile ($header not found)"
  else
    echo "FAIL: $probe: expected the build to fail on $header, got rc=$rc:"
    printf '%s\n' "$out" | tail -20
    status=1
  fi
done
exit $status
