#!/bin/bash
# sim at 1, 2, 3 and 4 ranks, each through gpurun. Checks, independently of the program:
#  - every point of the final field equals the closed-form answer g^n sin(pi x) sin(pi y), computed
#    here by awk (to 1e-12);
#  - the field is bit-identical (every value printed with 17 digits) whatever the rank count, and
#    the printed checksum agrees;
#  - a spoiled point (--perturb) makes the program fail its own self-check with a non-zero exit.
#   sim_ranks.sh MPIRUN GPURUN SIM
set -u
MPIRUN=$1 GPURUN=$2 SIM=$3
NX=61 NY=44 STEPS=40
tmp=$(mktemp -d /tmp/gr-sim-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# --help prints usage and exits 0; a bad option exits 2 naming it (no MPI needed for either).
"$SIM" --help | grep -q "^usage: sim" || fail "sim --help printed no usage"
"$SIM" --steps nonsense >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "bad option '--steps nonsense'" "$tmp/err" || fail "bad option: exit $rc, '$(cat "$tmp/err")'"

check_field() { # FILE: "gx gy value" lines for the whole grid
  awk -v nx=$NX -v ny=$NY -v n=$STEPS -v r=0.25 '
    BEGIN { pi = atan2(0, -1); sx = sin(pi / (2 * (nx + 1))); sy = sin(pi / (2 * (ny + 1)))
            g = 1 - 4 * r * (sx * sx + sy * sy); amp = g ^ n; worst = 0 }
    { key = $1 " " $2; if (key in seen) { print "duplicate point " key; bad = 1 } seen[key] = 1
      if ($1 < 0 || $1 >= nx || $2 < 0 || $2 >= ny) { print "point out of range " key; bad = 1 }
      e = $3 - amp * sin(pi * ($1 + 1) / (nx + 1)) * sin(pi * ($2 + 1) / (ny + 1))
      if (e < 0) e = -e; if (e > worst) worst = e; count++ }
    END { if (count != nx * ny) { print "got " count " points, expected " nx * ny; bad = 1 }
          printf "closed form: %d points, max error %.3g\n", count, worst
          if (worst > 1e-12 || bad) exit 1 }' "$1"
}

ref_sum=
for np in 1 2 3 4; do
  out=$tmp/out.$np
  "$MPIRUN" -np $np --oversubscribe "$GPURUN" "$SIM" --cpu --nx $NX --ny $NY --steps $STEPS \
    --dump "$tmp/field$np" >"$out" 2>&1
  rc=$?
  cat "$out"
  [ $rc = 0 ] || fail "sim at $np ranks exited $rc"
  grep -q "^sim: self-check PASS" "$out" || fail "sim at $np ranks: no PASS"
  cat "$tmp/field$np".* | sort -n -k2,2 -k1,1 >"$tmp/all$np"
  check_field "$tmp/all$np" || fail "sim at $np ranks: field differs from the closed form"
  if [ $np = 1 ]; then
    ref_sum=$(sed -n 's/^sim: checksum //p' "$out")
  else
    cmp -s "$tmp/all1" "$tmp/all$np" || fail "field at $np ranks is not bit-identical to 1 rank"
    sum=$(sed -n 's/^sim: checksum //p' "$out")
    [ "$sum" = "$ref_sum" ] || fail "checksum at $np ranks $sum != $ref_sum at 1 rank"
  fi
done

"$MPIRUN" -np 2 --oversubscribe "$GPURUN" "$SIM" --cpu --nx $NX --ny $NY --steps $STEPS --quiet \
  --perturb >"$tmp/bad" 2>&1
rc=$?
[ $rc != 0 ] || { cat "$tmp/bad"; fail "a spoiled field passed the self-check (exit 0)"; }
grep -q "^sim: self-check FAIL" "$tmp/bad" || { cat "$tmp/bad"; fail "no FAIL line for a spoiled field"; }
echo "PASS: closed form at 1-4 ranks, bit-identical fields (checksum $ref_sum), spoiled field caught"
