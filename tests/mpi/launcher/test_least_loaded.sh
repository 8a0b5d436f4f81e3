#!/bin/sh
# --policy least-loaded on the recorded Lassen node with the fake NVML's node4 set, whose loads are
# known: memory in use GPU 0 1536 MiB (90%), GPU 1 0 MiB (5%), GPU 2 1024 MiB (50%), GPU 3 4096 MiB
# (30%). Least memory first: one rank takes GPU 1, two take GPUs 1 and 2, each with the cores next
# to it. Two local ranks under mpirun that read different loads (only local rank 0 sees GPU 0 idle)
# must pick from rank 0's snapshot: GPUs 0 and 1.
# usage: test_least_loaded.sh MPIRUN GPURUN FAKE_NVML TOPOLOGY
set -u
mpirun=$1 gpurun=$2 fake=$3 topo=$4
tmp=$(mktemp -d /tmp/gr_least.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export GPURUN_NVML_LIBRARY="$fake" GR_FAKE_NVML=node4 TMPDIR="$tmp" GPURUN_GPU_HEALTH=off
unset GPURUN_JOB_ID SLURM_JOB_ID OMPI_MCA_ess_base_jobid PMIX_NAMESPACE
plan() { # local size, then extra options; prints "rank:pci,pci:cpus" per rank
  n=$1; shift
  "$gpurun" --topology "$topo" --local-rank 0 --local-size "$n" --dry-run --all --format json \
    --policy least-loaded "$@" > "$tmp/plan.json" || fail "gpurun exited $?"
  /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["policy"] == "least-loaded", d["policy"]
for r in d["ranks"]:
    print("%d:%s:%s" % (r["local_rank"], ",".join(g["pci"] for g in r["gpus"]), r["cpus"]))
print("warnings:", " | ".join(d["warnings"]))' "$tmp/plan.json"
}
out=$(plan 1) || fail "1 rank"
echo "$out"
echo "$out" | grep -q '^0:0004:05:00.0:8,12,16,20,24,28,32,36,40,44,48,52,56,60,64,68,72,76,80,84$' || fail "1 rank: not GPU 1 with its NUMA node's cores"
echo "$out" | grep -q 'least-loaded: GPUs 1 of 4' || fail "1 rank: no note"
out=$(plan 2) || fail "2 ranks"
echo "$out"
echo "$out" | grep -q '^0:0004:05:00.0:' || fail "2 ranks: rank 0 not on GPU 1"
echo "$out" | grep -q '^1:0035:03:00.0:96,' || fail "2 ranks: rank 1 not on GPU 2 with NUMA 8's cores"
out=$(plan 2 --gpus-per-rank 2) || fail "2x2"
echo "$out" | grep -q 'least-loaded' && fail "every GPU is needed: nothing to choose"
# closest (the default) over all four, for contrast
"$gpurun" --topology "$topo" --local-rank 0 --local-size 2 --dry-run --all 2>/dev/null | grep -q 'rank 0/2 .*GPUs 0 0004:04:00.0, 1 0004:05:00.0' \
  || fail "closest changed"

cat > "$tmp/wrap.sh" <<'SH'
#!/bin/sh
[ "${OMPI_COMM_WORLD_LOCAL_RANK:-$MPI_LOCALRANKID}" = 0 ] && export GR_FAKE_NVML_IDLE0=1
[ "${OMPI_COMM_WORLD_LOCAL_RANK:-$MPI_LOCALRANKID}" = 1 ] && sleep 0.5
exec "$@" > "$OUTDIR/rank${OMPI_COMM_WORLD_LOCAL_RANK:-$MPI_LOCALRANKID}.json"
SH
OUTDIR="$tmp" GPURUN_JOB_ID=leastjob timeout -k 5 60 "$mpirun" -np 2 --oversubscribe -x OUTDIR \
  -x GPURUN_JOB_ID -x TMPDIR -x GPURUN_NVML_LIBRARY -x GR_FAKE_NVML -x GPURUN_GPU_HEALTH \
  sh "$tmp/wrap.sh" "$gpurun" --topology "$topo" --policy least-loaded --dry-run --format json \
  || fail "agree: mpirun exited $?"
/usr/bin/python3 - "$tmp/rank0.json" "$tmp/rank1.json" <<'PY' || fail "the local ranks did not pick from one snapshot"
import json, sys
want = {0: "0004:04:00.0", 1: "0004:05:00.0"}
for f in sys.argv[1:]:
    r = json.load(open(f))["ranks"][0]
    got = [g["pci"] for g in r["gpus"]]
    assert got == [want[r["local_rank"]]], (f, got)
PY
echo PASS
