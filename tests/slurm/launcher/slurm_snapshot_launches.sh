#!/bin/bash
# Launch snapshots inside one real Slurm allocation (a private localhost cluster): one batch job
# runs two mpiruns, then two srun steps (--mpi=none, so only SLURM_JOB_ID and SLURM_STEP_ID tell
# them apart), each with --policy least-loaded on the recorded Lassen node and the fake NVML's
# node4 loads. In the first launch of each pair local rank 0 sees GPU 0 idle (GPUs 0 and 1 for the
# two ranks); in the second its local rank 0 is half a second late and reads the loads as they are
# (GPUs 1 and 2). The second launch's local rank 1 must wait for its own local rank 0 rather than
# take the first launch's snapshot, which every rank of the allocation could name by SLURM_JOB_ID.
#   slurm_snapshot_launches.sh GPURUN FAKE_NVML TOPOLOGY MPIRUN
set -eu
GPURUN=$1 FAKE=$2 TOPO=$3 MPIRUN=$4
. "$(dirname "$0")/../lib/slurm-cluster.sh"
fail() { echo "FAIL: $*"; exit 1; }

slurm_cluster_start 4 2
out=$SLURM_DIR/out
mkdir -m 700 "$out"
cat > "$SLURM_DIR/wrap.sh" <<'SH'
#!/bin/sh
r=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-$SLURM_LOCALID}}
case "$LAUNCH.$r" in
A.0 | C.0) export GR_FAKE_NVML_IDLE0=1 ;;
A.1 | C.1 | B.0 | D.0) sleep 0.5 ;;
esac
exec "$@" > "$OUTDIR/$LAUNCH.$r.json" 2> "$OUTDIR/$LAUNCH.$r.err"
SH
cat > "$SLURM_DIR/job.sh" <<SH
#!/bin/sh
export OUTDIR='$out' TMPDIR='$out' GPURUN_NVML_LIBRARY='$FAKE' GR_FAKE_NVML=node4 GPURUN_GPU_HEALTH=off
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset GPURUN_JOB_ID
set -- '$GPURUN' --topology '$TOPO' --policy least-loaded --dry-run --format json
for l in A B; do
  LAUNCH=\$l timeout 60 '$MPIRUN' -np 2 --oversubscribe -x LAUNCH sh '$SLURM_DIR/wrap.sh' "\$@" || exit 1
done
for l in C D; do
  LAUNCH=\$l timeout 60 srun --mpi=none -n 2 sh '$SLURM_DIR/wrap.sh' "\$@" || exit 1
done
SH
id=$(slurm_submit "$SLURM_DIR/job.sh" -n 2 -o "$SLURM_DIR/job.out")
slurm_wait "$id" 100 || { cat "$SLURM_DIR/job.out" "$out"/*.err; slurm_dump_logs; fail "the batch job failed"; }
cat "$SLURM_DIR/job.out" "$out"/*.err
python3 - "$out" <<'PY' || fail "a launch did not plan from its own readings"
import json, sys
out = sys.argv[1]
want = {"A": ["0004:04:00.0", "0004:05:00.0"], "B": ["0004:05:00.0", "0035:03:00.0"],
        "C": ["0004:04:00.0", "0004:05:00.0"], "D": ["0004:05:00.0", "0035:03:00.0"]}
ok = True
for launch, gpus in sorted(want.items()):
    for r in (0, 1):
        got = [g["pci"] for g in json.load(open("%s/%s.%d.json" % (out, launch, r)))["ranks"][0]["gpus"]]
        good = got == [gpus[r]]
        print(("ok   " if good else "FAIL ") + "launch %s local rank %d: %s (want %s)" % (launch, r, got, gpus[r]))
        ok &= good
sys.exit(0 if ok else 1)
PY
grep -l 'judging alone\|no .* snapshot from local rank 0' "$out"/*.err && fail "a local rank found no snapshot"
grep -q '^launch .*SLURM_JOB_ID=[0-9]* SLURM_STEP_ID=[0-9]*$' "$out"/gpurun-*/load-* ||
  fail "no srun step's snapshot names its job and step"
echo "PASS: two mpiruns and two srun steps in one allocation each planned from their own snapshot"
