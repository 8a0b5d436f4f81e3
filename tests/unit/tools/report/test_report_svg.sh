#!/bin/sh
# gpurun-report end to end on the fixture jobs: table, JSON, SVG rendered with rsvg-convert.
# usage: test_report_svg.sh GPURUN_REPORT FIXTURES
set -eu
report=$1 fixtures=$2
tmp=$(mktemp -d /tmp/gr_report_svg.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# PNG width and height from the IHDR chunk (bytes 16-23, big endian).
png_size() { od -An -tu1 -j16 -N8 "$1" | awk '{print $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8}'; }

for job in gpu_job cpu_job; do
  cp -r "$fixtures/$job" "$tmp/$job"
  "$report" "$tmp/$job" > "$tmp/$job.txt" || fail "gpurun-report $job exited $?"
  cat "$tmp/$job.txt"
  test -s "$tmp/$job/report.json" || fail "no report.json for $job"
  test -s "$tmp/$job/report.svg" || fail "no report.svg for $job"
  rsvg-convert -o "$tmp/$job.png" "$tmp/$job/report.svg" || fail "rsvg-convert rejected the $job SVG"
  set -- $(png_size "$tmp/$job.png")
  w=$1 h=$2
  svg_w=$(sed -n 's/.*<svg[^>]* width="\([0-9]*\)".*/\1/p' "$tmp/$job/report.svg")
  svg_h=$(sed -n 's/.*<svg[^>]* height="\([0-9]*\)".*/\1/p' "$tmp/$job/report.svg")
  [ "$w" = "$svg_w" ] && [ "$h" = "$svg_h" ] || fail "$job PNG is ${w}x$h, SVG says ${svg_w}x$svg_h"
  # Non-trivial: a blank white page of the same size compresses to almost nothing.
  printf '<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s"><rect width="%s" height="%s" fill="white"/></svg>' \
    "$w" "$h" "$w" "$h" > "$tmp/blank.svg"
  rsvg-convert -o "$tmp/blank.png" "$tmp/blank.svg"
  real=$(stat -c %s "$tmp/$job.png") blank=$(stat -c %s "$tmp/blank.png")
  echo "$job: ${w}x$h PNG, $real bytes (blank page: $blank bytes)"
  [ "$real" -gt $((blank * 5)) ] || fail "$job PNG ($real bytes) is hardly more than a blank page ($blank)"
done

# The table carries the hand-computed figures: 350 J and 1200 J, 1550 J in all, rank 1 flagged.
grep -q ' 350.0 ' "$tmp/gpu_job.txt" || fail "rank 0 energy 350.0 J missing"
grep -q ' 1200.0 ' "$tmp/gpu_job.txt" || fail "rank 1 energy 1200.0 J missing"
grep -q 'energy, all GPUs: 1550.0 J' "$tmp/gpu_job.txt" || fail "total energy missing"
grep -q '^slowest rank: 1 ' "$tmp/gpu_job.txt" || fail "slowest rank not 1"
grep -q 'coll wait' "$tmp/gpu_job.txt" || fail "no collective wait column"
# Rank 0's row shows its 2.500 s of waiting.
grep -E '^ +0 ' "$tmp/gpu_job.txt" | grep -q ' 2.500' || fail "rank 0 wait 2.500 s missing"

# Flight dumps: the missing rank is named; the job dir may also be given as the monitor root.
mkdir -p "$tmp/root"
cp -r "$fixtures/hang_job" "$tmp/root/123"
"$report" "$tmp/root" > "$tmp/hang.txt" || fail "gpurun-report on the root exited $?"
cat "$tmp/hang.txt"
grep -q 'comm world (mpi): rank(s) 0-2 wait in allreduce #17 (count 10 float32); NEVER ENTERED by rank(s) 3' "$tmp/hang.txt" \
  || fail "world finding wrong"
grep -q 'comm split-1 (mpi): rank(s) 0 wait in broadcast #5 .*NEVER ENTERED by rank(s) 2' "$tmp/hang.txt" \
  || fail "split-1 finding wrong"

# Bad use: a clear message and a non-zero exit.
if "$report" "$tmp/nonexistent" 2> "$tmp/err.txt"; then fail "missing dir accepted"; fi
grep -q 'cannot open directory' "$tmp/err.txt" || fail "no message for a missing dir"
echo PASS
