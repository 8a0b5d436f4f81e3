#!/bin/sh
# gpurun --gpu-health on the recorded Lassen node (4 GPUs) with the fake NVML's node4 set, whose
# story is known: GPU 1 has ECC errors and retired pages pending, GPU 2 throttles hot, GPUs 0 and 3
# are healthy. Then two local ranks under a real mpirun that read different NVML values (only local
# rank 0 sees GPU 0 hot) must still agree, through rank 0's snapshot; a planted snapshot another
# user could write is not trusted.
# usage: test_gpu_health.sh MPIRUN GPURUN FAKE_NVML TOPOLOGY
set -u
mpirun=$1 gpurun=$2 fake=$3 topo=$4
tmp=$(mktemp -d /tmp/gr_health.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export GPURUN_NVML_LIBRARY="$fake" GR_FAKE_NVML=node4 TMPDIR="$tmp"
unset GPURUN_JOB_ID SLURM_JOB_ID SLURM_STEP_ID OMPI_MCA_ess_base_jobid OMPI_MCA_orte_ess_jobid \
  OMPI_MCA_orte_hnp_uri PMIX_NAMESPACE FLUX_JOB_ID PALS_APID
run() { "$gpurun" --topology "$topo" --local-rank 0 --local-size 2 --dry-run --all "$@"; }

# warn (the default): one line per unhealthy GPU, the plan unchanged.
run > "$tmp/warn.out" 2> "$tmp/warn.err" || fail "warn: exit $?"
cat "$tmp/warn.err"
[ "$(grep -c 'is unhealthy' "$tmp/warn.err")" = 2 ] || fail "warn: expected 2 lines"
grep -q '^gpurun: warning: GPU 1 0004:05:00.0 is unhealthy: 3 volatile uncorrected ECC errors, retired pages pending$' "$tmp/warn.err" || fail "warn: GPU 1"
grep -q '^gpurun: warning: GPU 2 0035:03:00.0 is unhealthy: hardware thermal slowdown active, software thermal slowdown active, 92 C at or above its slowdown threshold 88 C$' "$tmp/warn.err" || fail "warn: GPU 2"
grep -q 'rank 1/2 on .*: GPUs 2 0035:03:00.0, 3 0035:04:00.0' "$tmp/warn.out" || fail "warn changed the plan"

run --gpu-health off > /dev/null 2> "$tmp/off.err" || fail "off: exit $?"
grep -q 'unhealthy' "$tmp/off.err" && fail "off still warns"
GPURUN_GPU_HEALTH=bogus run > /dev/null 2> "$tmp/bad.err"
[ $? -eq 2 ] && grep -q "GPURUN_GPU_HEALTH: expected off, warn or avoid, got 'bogus'" "$tmp/bad.err" || fail "a bad mode is not a usage error"

# avoid: planned around GPUs 1 and 2, and the JSON says why.
run --gpu-health avoid --format json > "$tmp/avoid.json" 2>/dev/null || fail "avoid: exit $?"
/usr/bin/python3 - "$tmp/avoid.json" <<'PY' || fail "avoid: wrong plan"
import json, sys
d = json.load(open(sys.argv[1]))
got = [[g["pci"] for g in r["gpus"]] for r in d["ranks"]]
assert got == [["0004:04:00.0"], ["0035:04:00.0"]], got
w = " | ".join(d["warnings"])
assert "GPU 1 0004:05:00.0 avoided: 3 volatile uncorrected ECC errors" in w, w
assert "GPU 2 0035:03:00.0 avoided: hardware thermal slowdown active" in w, w
PY

# avoid with nothing healthy: exit 2 and the reasons.
GR_FAKE_NVML_ALL_ECC=1 run --gpu-health avoid > /dev/null 2> "$tmp/none.err"
rc=$?
cat "$tmp/none.err"
[ $rc -eq 2 ] || fail "no healthy GPU: exit $rc, expected 2"
grep -q '^gpurun: --gpu-health avoid: no healthy GPU left: GPU 0 0004:04:00.0: 1 volatile uncorrected ECC error; GPU 1' "$tmp/none.err" || fail "no healthy GPU: message"

# Two local ranks, different readings: only local rank 0 sees GPU 0 hot. Agreed through the
# snapshot, both plan over GPU 3 alone, so rank 1 shares it (gpu_sharers 2); alone it would have had
# GPU 3 to itself.
cat > "$tmp/wrap.sh" <<'SH'
#!/bin/sh
[ "${OMPI_COMM_WORLD_LOCAL_RANK:-$MPI_LOCALRANKID}" = 0 ] && export GR_FAKE_NVML_HOT0=1
[ "${OMPI_COMM_WORLD_LOCAL_RANK:-$MPI_LOCALRANKID}" = 1 ] && sleep 0.5   # rank 0 is usually first; make it so
exec "$@" > "$OUTDIR/rank${OMPI_COMM_WORLD_LOCAL_RANK:-$MPI_LOCALRANKID}.json"
SH
OUTDIR="$tmp" GPURUN_JOB_ID=healthjob timeout -k 5 60 "$mpirun" -np 2 --oversubscribe -x OUTDIR -x GPURUN_JOB_ID \
  -x TMPDIR -x GPURUN_NVML_LIBRARY -x GR_FAKE_NVML \
  sh "$tmp/wrap.sh" "$gpurun" --topology "$topo" --gpu-health avoid --dry-run --format json 2> "$tmp/agree.err" \
  || { cat "$tmp/agree.err"; fail "agree: mpirun exited $?"; }
/usr/bin/python3 - "$tmp/rank0.json" "$tmp/rank1.json" <<'PY' || fail "the local ranks did not agree"
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    r = d["ranks"][0]
    assert [g["pci"] for g in r["gpus"]] == ["0035:04:00.0"], (f, r["gpus"])
    assert r["gpu_sharers"] == 2, (f, r["gpu_sharers"])
    assert any("GPU 0 0004:04:00.0 avoided: hardware thermal slowdown active" in w for w in d["warnings"]), d["warnings"]
PY
ls "$tmp/gpurun-$(id -u)"/health-* > /dev/null || fail "no snapshot written"

# A snapshot others can write is not trusted: local rank 1 waits, then judges alone and says so.
# The planted verdicts (all healthy) sit under the launch's own header, in the launch's own file.
PMIX_NAMESPACE=plantjob "$gpurun" --topology "$topo" --local-rank 0 --local-size 2 --dry-run \
  --gpu-health avoid > /dev/null 2>&1 || fail "planted: rank 0 exit $?"
snap=$(ls -t "$tmp/gpurun-$(id -u)"/health-* | head -1)
grep -q '^launch PMIX_NAMESPACE=plantjob$' "$snap" || fail "planted: no snapshot of launch plantjob"
{ head -n 3 "$snap"; printf '0 \n0 \n0 \n0 \n'; } > "$tmp/planted"
cat "$tmp/planted" > "$snap"
chmod 666 "$snap"
PMIX_NAMESPACE=plantjob "$gpurun" --topology "$topo" --local-rank 1 --local-size 2 --dry-run --format json \
  --gpu-health avoid > "$tmp/alone.json" 2> "$tmp/alone.err" || fail "planted: exit $?"
cat "$tmp/alone.err"
grep -q 'no health snapshot from local rank 0' "$tmp/alone.err" || fail "planted snapshot was trusted"
grep -q 'GPU 1 0004:05:00.0 avoided' "$tmp/alone.json" || fail "planted: GPU 1 not avoided"
echo PASS
