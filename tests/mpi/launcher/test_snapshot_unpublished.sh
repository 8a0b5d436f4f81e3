#!/bin/sh
# Local rank 0 cannot publish its load snapshot (here the snapshot's name is taken by a directory
# in the user's own snapshot directory; a full or over-quota TMPDIR fails the same write). The
# local ranks then hold no common reading, so none may plan from a reading of its own: local rank
# 0 reads GPUs 1 and 2 as least used (the node4 loads), local rank 1 would read GPUs 0 and 1
# (GR_FAKE_NVML_IDLE0), and each taking its first or second pick puts both on GPU 1. Both must
# plan by closest over every GPU (two each, no GPU twice) and say why.
# usage: test_snapshot_unpublished.sh GPURUN FAKE_NVML TOPOLOGY
set -u
gpurun=$1 fake=$2 topo=$3
tmp=$(mktemp -d /tmp/gr_snapunpub.XXXXXX)
r0= r1=
trap '[ -n "$r0" ] && kill "$r0" 2> /dev/null; [ -n "$r1" ] && kill "$r1" 2> /dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export GPURUN_NVML_LIBRARY="$fake" GR_FAKE_NVML=node4 TMPDIR="$tmp" GPURUN_GPU_HEALTH=off
unset GPURUN_JOB_ID SLURM_JOB_ID SLURM_JOBID SLURM_STEP_ID SLURM_STEPID OMPI_MCA_ess_base_jobid \
  OMPI_MCA_orte_ess_jobid OMPI_MCA_orte_hnp_uri PMIX_NAMESPACE FLUX_JOB_ID PALS_APID GR_FAKE_NVML_IDLE0
run() { # local rank, then the output's name
  PMIX_NAMESPACE=launchE "$gpurun" --topology "$topo" --local-rank "$1" --local-size 2 \
    --policy least-loaded --dry-run --format json > "$tmp/$2.json" 2> "$tmp/$2.err"
}
# The snapshot's name for this launch, from one run of local rank 0 alone; then a directory there.
run 0 name || fail "local rank 0 alone: exit $?"
snap=$(ls "$tmp/gpurun-$(id -u)"/load-*) || fail "no load snapshot written"
rm -f "$snap" && mkdir "$snap" || fail "cannot put a directory in place of $snap"

run 0 E.0 &
r0=$!
GR_FAKE_NVML_IDLE0=1 run 1 E.1 &
r1=$!
wait "$r0" || fail "local rank 0: exit $?"
r0=
wait "$r1" || fail "local rank 1: exit $?"
r1=
cat "$tmp"/E.*.err
grep -q "cannot write the load snapshot" "$tmp/E.0.err" || fail "local rank 0 did not say that it could not publish"
/usr/bin/python3 - "$tmp/E.0.json" "$tmp/E.1.json" <<'PY' || fail "the local ranks did not both plan by closest over every GPU"
import json, sys
want = [["0004:04:00.0", "0004:05:00.0"], ["0035:03:00.0", "0035:04:00.0"]]
ok = True
for r, (f, w) in enumerate(zip(sys.argv[1:], want)):
    d = json.load(open(f))
    got = [g["pci"] for g in d["ranks"][0]["gpus"]]
    said = any("no load snapshot shared" in x for x in d["warnings"])
    print("local rank %d: %s (want %s)%s" % (r, got, w, "" if said else ", no warning why"))
    ok &= got == w and said
sys.exit(0 if ok else 1)
PY
echo PASS
