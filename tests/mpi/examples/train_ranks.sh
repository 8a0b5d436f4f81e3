#!/bin/bash
# train at 1, 2, 3 and 4 ranks, each through gpurun. Checks:
#  - the first batch loss is ln(classes) (all weights start at zero: a uniform softmax), computed
#    here; the program's self-check passed (loss fell by half, held-out accuracy >= 80%, all ranks
#    hold bit-identical weights);
#  - the weights' checksum is the same at every rank count (fixed-point gradient sums);
#  - a rank that spoils one weight (--perturb) makes the self-check fail with a non-zero exit.
#   train_ranks.sh MPIRUN GPURUN TRAIN
set -u
MPIRUN=$1 GPURUN=$2 TRAIN=$3
ARGS=(--steps 80 --batch 256 --classes 10 --features 24)
tmp=$(mktemp -d /tmp/gr-train-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# --help prints usage and exits 0; a bad option exits 2 naming it (no MPI needed for either).
"$TRAIN" --help | grep -q "^usage: train" || fail "train --help printed no usage"
"$TRAIN" --steps nonsense >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "bad option '--steps nonsense'" "$tmp/err" || fail "bad option: exit $rc, '$(cat "$tmp/err")'"
ln10=$(awk 'BEGIN { printf "%.4f", log(10) }')

ref=
for np in 1 2 3 4; do
  out=$tmp/out.$np
  "$MPIRUN" -np $np --oversubscribe "$GPURUN" "$TRAIN" "${ARGS[@]}" --quiet >"$out" 2>&1
  rc=$?
  cat "$out"
  [ $rc = 0 ] || fail "train at $np ranks exited $rc"
  grep -q "^train: self-check PASS" "$out" || fail "train at $np ranks: no PASS"
  grep -q "^train: loss $ln10 -> " "$out" || fail "train at $np ranks: first loss is not ln 10 = $ln10"
  grep -q "^train: weights bit-identical on all $np ranks" "$out" || fail "weights differ at $np ranks"
  sum=$(sed -n 's/^train: weights .*checksum //p' "$out")
  [ -n "$sum" ] || fail "no checksum at $np ranks"
  [ -z "$ref" ] && ref=$sum
  [ "$sum" = "$ref" ] || fail "checksum at $np ranks $sum != $ref at 1 rank"
done

"$MPIRUN" -np 2 --oversubscribe "$GPURUN" "$TRAIN" "${ARGS[@]}" --quiet --perturb >"$tmp/bad" 2>&1
rc=$?
[ $rc != 0 ] || { cat "$tmp/bad"; fail "spoiled weights passed the self-check (exit 0)"; }
grep -q "^train: weights DIFFER" "$tmp/bad" || { cat "$tmp/bad"; fail "spoiled weights not reported"; }
echo "PASS: train at 1-4 ranks, identical weights (checksum $ref), spoiled weights caught"
