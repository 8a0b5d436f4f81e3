#!/bin/bash
# The device kit on this (GPU-less) machine: make it from this build, check its size and contents,
# then run its run.sh --cpu-only in a private mount namespace where this machine's Open MPI,
# PMIx, hwloc, UCX and libevent are covered by empty files and folders - every file the kit
# carries, at its path here, plus Open MPI's plugin and config folders, mpirun and ssh (the GPU
# machine has none of them). A library or plugin the kit lacks then fails here, not there.
#   device_kit_cpu_only.sh SOURCE_DIR BUILD_DIR      (root; 77 = skipped: no unshare/mount rights)
set -u
SRC=$1 BUILD=$2
tmp=$(mktemp -d /tmp/gr-devkit-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
if ! unshare -m true 2>/dev/null; then
  echo "SKIP: unshare -m is not allowed here (needs root or CAP_SYS_ADMIN)"
  exit 77
fi
kit=$tmp/kit
"$SRC/scripts/device-kit" --no-build --build-dir "$BUILD" "$kit" >"$tmp/make.log" 2>&1 ||
  { cat "$tmp/make.log"; fail "scripts/device-kit exited $?"; }
tail -n 1 "$tmp/make.log"

# Size and contents.
bytes=$(du -sb "$kit" | cut -f1)
echo "kit size: $bytes bytes"
[ "$bytes" -le $((60 * 1048576)) ] || fail "the kit is $bytes bytes, over 60 MiB"
grep -Eq "^size: +$bytes bytes" "$kit/MANIFEST.txt" || fail "MANIFEST.txt's size is not the kit's ($bytes)"
grep -q 'sm_90' "$kit/MANIFEST.txt" || fail "MANIFEST.txt does not record sm_90 code in sim"
[ -x "$kit/run.sh" ] || fail "no run.sh"
grep -q '^t coll_gpu_exact_np1 ' "$kit/gpu-tests.sh" || fail "gpu-tests.sh lacks coll_gpu_exact_np1"
grep -q "$BUILD" "$kit/gpu-tests.sh" && fail "gpu-tests.sh still names the build directory $BUILD"
for f in root/usr/bin/orterun root/usr/lib/x86_64-linux-gnu/libmpi.so.40 \
         root/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_vader.so \
         root/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so.2 build/launcher/gpurun \
         build/examples/sim/sim build/tests/gpu/runtime/device_probe; do
  [ -e "$kit/$f" ] || fail "the kit lacks $f"
done
[ -z "$(find "$kit" -name 'libc.so*' -o -name 'libnccl.so*')" ] || fail "the kit carries libc or libnccl"

# Hide this machine's copies, then run the kit's CPU checks.
mkdir "$tmp/empty-dir"
: >"$tmp/empty-file"
cat >"$tmp/hidden.sh" <<'EOS'
set -u
kit=$1 tmp=$2
cover() { # cover PATH with an empty folder or file (the real file, when PATH is a link)
  local p
  p=$(readlink -f "$1") || return 0
  if [ -d "$p" ]; then mount --bind "$tmp/empty-dir" "$p"
  elif [ -f "$p" ]; then mount --bind "$tmp/empty-file" "$p"; fi
}
n=0
while read -r f; do
  [ -e "/$f" ] && cover "/$f" && n=$((n + 1))
done < <(cd "$kit/root" && find . -type f | sed 's|^\./||')
for p in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 \
         /usr/lib/x86_64-linux-gnu/hwloc /usr/lib/x86_64-linux-gnu/ucx /etc/openmpi \
         /usr/share/openmpi /usr/bin/mpirun /usr/bin/mpiexec /usr/bin/orterun /usr/bin/ssh \
         /usr/bin/rsh; do
  [ -e "$p" ] && cover "$p"
done
# And, independently of what the kit holds, the libraries of the Open MPI stack by name.
for p in /usr/lib/x86_64-linux-gnu/lib{mpi,open-rte,open-pal,mca_common_,hwloc,pmix,event,ucp,uct,ucs,ucm,fabric,psm,munge}*.so*; do
  [ -f "$p" ] && [ ! -L "$p" ] && cover "$p" && n=$((n + 1))
done
# (Base libraries such as libudev cannot be made absent this way: the loader's cache still names
# them, and an empty file fails to load instead of being "not found".)
echo "covered $n files of this machine (those the kit carries, the Open MPI stack's libraries) and Open MPI's folders"
# The proof that the host's Open MPI is out of reach: its mpirun and libmpi are empty here.
if /usr/bin/mpirun --version >/dev/null 2>&1; then echo "FAIL: the host's mpirun still runs"; exit 1; fi
[ -s /usr/lib/x86_64-linux-gnu/libmpi.so.40 ] && { echo "FAIL: the host's libmpi is visible"; exit 1; }
[ -n "$(ls -A /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 2>/dev/null)" ] &&
  { echo "FAIL: the host's Open MPI plugins are visible"; exit 1; }
OUT=$tmp/out "$kit/run.sh" --cpu-only
EOS
unshare -m --propagation private bash "$tmp/hidden.sh" "$kit" "$tmp"
rc=$?
for f in "$tmp"/out/*; do echo "---- $(basename "$f")"; tail -n 30 "$f"; done
[ $rc = 0 ] || fail "run.sh --cpu-only with the host's Open MPI hidden exited $rc"
n=$(ls "$tmp/out" | wc -l)
[ "$n" -le 8 ] || fail "run.sh wrote $n files (at most 8)"
grep -q '^environment  *PASS' "$tmp/out/device-summary.txt" || fail "environment check did not PASS"
grep -q '^mpi-sim-2-ranks  *PASS' "$tmp/out/device-summary.txt" || fail "2 ranks of sim did not PASS"
[ "$(grep -c ' SKIP needs a GPU' "$tmp/out/device-summary.txt")" -ge 6 ] ||
  fail "the GPU checks were not all reported SKIP"
echo "PASS: the kit ($bytes bytes) runs 2 ranks of sim with its own Open MPI, the host's hidden"
