#!/bin/sh
# consumer_test.sh BUILD_DIR CONSUMER_SRC CC MPIEXEC [EXTRA_CFLAGS]
# EXTRA_CFLAGS: what a consumer of this particular build needs too (the sanitizer flags when the
# library was built with sanitizers).
set -eu
build=$1 src=$2 cc=$3 mpiexec=$4 extra=${5:-}
work=$(mktemp -d /tmp/gpurun-consumer.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null

# 1. find_package(gpurun CONFIG)
cmake -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_C_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
out=$("$mpiexec" -np 2 --oversubscribe "$work/cmake-build/consumer")
echo "$out"
echo "$out" | grep -q "consumer ok: 2 ranks"

# 2. pkg-config: cc app.c $(pkg-config --cflags --libs gpurun)
libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -1)
flags=$(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs gpurun)
cflags=$(PKG_CONFIG_PATH=$libdir pkg-config --cflags gpurun)
# shellcheck disable=SC2086
"$cc" $extra -o "$work/consumer-pc" "$src/consumer.c" $flags
out=$("$mpiexec" -np 2 --oversubscribe "$work/consumer-pc")
echo "$out"
echo "$out" | grep -q "consumer ok: 2 ranks"

# Headers are self-contained: every public header compiles alone (pool.h even without MPI's).
for h in "$prefix"/include/gpurun/*.h; do
  name=$(basename "$h")
  printf '#include <gpurun/%s>\nint main(void){return 0;}\n' "$name" >"$work/h.c"
  if [ "$name" = "coll.h" ] || [ "$name" = "dpool.h" ] || [ "$name" = "runtime.h" ] || [ "$name" = "gpurun.h" ]; then
    # shellcheck disable=SC2086
    "$cc" -std=c11 -Wall -Wextra -Werror -c "$work/h.c" -o "$work/h.o" $cflags
  else
    "$cc" -std=c11 -Wall -Wextra -Werror -c "$work/h.c" -o "$work/h.o" -I"$prefix/include"
  fi
done
echo "install consumer: find_package and pkg-config both build and run"
