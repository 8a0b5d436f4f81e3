#!/bin/sh
# gpurun's allreduce against each MPI's own MPI_Allreduce, under Open MPI and under MPICH, on 2 and 4
# ranks of this node: two builds of gpurun-bench-coll (one per MPI family), runs interleaved family by
# family with the order flipped every repeat, each run alternating gpurun and raw rounds on the same
# buffers (--compare). Prints, per family, ranks and size, the median over the repeats of gpurun's
# median round, of the raw call's, and of their ratio, with the ratio's min-max.
#   bench/coll/mpi_families.sh OMPI_BENCH MPICH_BENCH [REPEATS] [OUT]
# OMPI_BENCH runs under mpirun (Open MPI), MPICH_BENCH under mpiexec.mpich (Hydra); both default to
# the float32 sum from 64 KiB to 16 MiB.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: bench/coll/mpi_families.sh OMPI_BENCH MPICH_BENCH [REPEATS] [OUT]" >&2
  exit 2
fi
ompi=$1 mpich=$2 reps=${3:-3} out=${4:-$(mktemp -d /tmp/gpurun-families.XXXXXX)}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
MPIRUN=${MPIRUN:-mpirun} MPIEXEC_MPICH=${MPIEXEC_MPICH:-mpiexec.mpich}
mkdir -p "$out"
args="-o allreduce -b 64K -e 16M -f 4 --compare --timeout 60 -R 5 -n 10 -w 3"
r=1
while [ "$r" -le "$reps" ]; do
  if [ $((r % 2)) = 1 ]; then order="ompi mpich"; else order="mpich ompi"; fi
  for np in 2 4; do
    for f in $order; do
      # shellcheck disable=SC2086
      if [ "$f" = ompi ]; then
        "$MPIRUN" -np "$np" --oversubscribe "$ompi" $args >"$out/$f.np$np.rep$r.txt" 2>&1
      else
        "$MPIEXEC_MPICH" -n "$np" "$mpich" $args >"$out/$f.np$np.rep$r.txt" 2>&1
      fi
    done
  done
  r=$((r + 1))
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg); runs in $out"
python3 - "$out" <<'EOF'
import glob, re, statistics, sys
res = {}
for f in glob.glob(sys.argv[1] + "/*.rep*.txt"):
    m = re.match(r".*/(ompi|mpich)\.np(\d+)\.rep\d+\.txt$", f)
    for line in open(f):
        x = line.split()
        if line.startswith("#") or len(x) < 18:
            continue
        # columns: size [0], gpurun's median round time(us) [5], raw mpi(us) [16], ratio [17]
        res.setdefault((m.group(1), int(m.group(2)), int(x[0])), []).append(
            (float(x[5]), float(x[16]), float(x[17])))
print("%-6s %5s %10s %12s %12s %8s %15s %5s" % ("mpi", "ranks", "bytes", "gpurun(us)", "raw(us)",
                                               "ratio", "ratio min-max", "runs"))
for fam, np, size in sorted(res):
    v = res[(fam, np, size)]
    g = statistics.median(a for a, _, _ in v)
    raw = statistics.median(b for _, b, _ in v)
    rs = [c for _, _, c in v]
    print("%-6s %5d %10d %12.1f %12.1f %8.3f %7.3f-%-7.3f %5d" % (
        fam, np, size, g, raw, statistics.median(rs), min(rs), max(rs), len(v)))
EOF
