#!/bin/bash
# sim's CUDA path at 1 and 2 ranks through gpurun (skipped, exit 77, without a usable GPU or a
# CUDA build). Checks: the final field equals the closed form (computed here by awk) to 1e-12, and
# the field is bit-identical at 1 and 2 ranks (the kernel does the same operations per point).
#   sim_gpu.sh MPIRUN GPURUN SIM
set -u
MPIRUN=$1 GPURUN=$2 SIM=$3
NX=200 NY=150 STEPS=50
tmp=$(mktemp -d /tmp/gr-simgpu-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$MPIRUN" -np 1 "$GPURUN" "$SIM" --gpu --n 16 --steps 1 --quiet >"$tmp/probe" 2>&1
rc=$?
if [ $rc != 0 ]; then
  cat "$tmp/probe"
  grep -q "no GPU is usable" "$tmp/probe" && { echo "SKIP: no usable GPU"; exit 77; }
  fail "sim --gpu probe exited $rc"
fi
for np in 1 2; do
  "$MPIRUN" -np $np --oversubscribe "$GPURUN" "$SIM" --gpu --nx $NX --ny $NY --steps $STEPS \
    --dump "$tmp/field$np" >"$tmp/out$np" 2>&1 || { cat "$tmp/out$np"; fail "sim --gpu at $np ranks"; }
  cat "$tmp/out$np"
  grep -q "device gpu" "$tmp/out$np" || fail "sim at $np ranks did not use the GPU"
  grep -q "^sim: self-check PASS" "$tmp/out$np" || fail "sim --gpu at $np ranks: no PASS"
  cat "$tmp/field$np".* | sort -n -k2,2 -k1,1 >"$tmp/all$np"
  awk -v nx=$NX -v ny=$NY -v n=$STEPS -v r=0.25 '
    BEGIN { pi = atan2(0, -1); sx = sin(pi / (2 * (nx + 1))); sy = sin(pi / (2 * (ny + 1)))
            g = 1 - 4 * r * (sx * sx + sy * sy); amp = g ^ n; worst = 0 }
    { e = $3 - amp * sin(pi * ($1 + 1) / (nx + 1)) * sin(pi * ($2 + 1) / (ny + 1))
      if (e < 0) e = -e; if (e > worst) worst = e; count++ }
    END { printf "closed form: %d points, max error %.3g\n", count, worst
          if (count != nx * ny || worst > 1e-12) exit 1 }' "$tmp/all$np" ||
    fail "GPU field at $np ranks differs from the closed form"
done
cmp -s "$tmp/all1" "$tmp/all2" || fail "GPU field at 2 ranks is not bit-identical to 1 rank"
echo "PASS: sim's CUDA kernel matches the closed form, bit-identical at 1 and 2 ranks"
