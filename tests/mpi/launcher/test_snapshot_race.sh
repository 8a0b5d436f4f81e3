#!/bin/sh
# Two launches in one Slurm allocation (the same SLURM_JOB_ID in every rank's environment, no step
# id: two mpiruns in one batch script) must not read each other's load snapshot. Launch A's local
# rank 0 sees GPU 0 idle (fake NVML, GR_FAKE_NVML_IDLE0) and publishes that: A plans over GPUs 0
# and 1. Launch B starts while A's snapshot is fresh; its local rank 0 is half a second late and
# reads the node4 loads as they are (GPUs 1 and 2 least used), its local rank 1 is on time. B's
# ranks must both pick from B's own readings (GPU 1 and GPU 2): one taken from A's snapshot puts
# B's local rank 1 on GPU 1, beside its local rank 0. Then a snapshot with the right name but
# another launch's identity inside is not trusted.
# usage: test_snapshot_race.sh MPIRUN GPURUN FAKE_NVML TOPOLOGY
set -u
mpirun=$1 gpurun=$2 fake=$3 topo=$4
tmp=$(mktemp -d /tmp/gr_snaprace.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export GPURUN_NVML_LIBRARY="$fake" GR_FAKE_NVML=node4 TMPDIR="$tmp" GPURUN_GPU_HEALTH=off
unset GPURUN_JOB_ID SLURM_JOB_ID SLURM_JOBID SLURM_STEP_ID SLURM_STEPID OMPI_MCA_ess_base_jobid \
  OMPI_MCA_orte_ess_jobid OMPI_MCA_orte_hnp_uri PMIX_NAMESPACE FLUX_JOB_ID PALS_APID

# The ranks inherit the allocation's id as they would inside a batch script; mpirun itself does not
# see it (Open MPI would then look for the rest of a Slurm allocation).
cat > "$tmp/wrap.sh" <<'SH'
#!/bin/sh
export SLURM_JOB_ID=4242
r=${OMPI_COMM_WORLD_LOCAL_RANK:-$MPI_LOCALRANKID} # Open MPI; Hydra
case "$LAUNCH.$r" in
A.0) export GR_FAKE_NVML_IDLE0=1 ;;
A.1) sleep 0.5 ;;
B.0) sleep 0.5 ;;
esac
exec "$@" > "$OUTDIR/$LAUNCH.$r.json" 2> "$OUTDIR/$LAUNCH.$r.err"
SH
launch() {
  OUTDIR="$tmp" LAUNCH=$1 timeout -k 5 60 "$mpirun" -np 2 --oversubscribe -x OUTDIR -x LAUNCH \
    -x TMPDIR -x GPURUN_NVML_LIBRARY -x GR_FAKE_NVML -x GPURUN_GPU_HEALTH \
    sh "$tmp/wrap.sh" "$gpurun" --topology "$topo" --policy least-loaded --dry-run --format json \
    || { cat "$tmp/$1".*.err; fail "launch $1: mpirun exited $?"; }
}
check() { # launch, then the PCI address of local rank 0's and local rank 1's GPU
  /usr/bin/python3 - "$tmp/$1.0.json" "$2" "$tmp/$1.1.json" "$3" <<'PY' || { cat "$tmp/$1".*.err; fail "launch $1 did not plan from its own readings"; }
import json, sys
args = sys.argv[1:]
for f, want in zip(args[0::2], args[1::2]):
    r = json.load(open(f))["ranks"][0]
    got = [g["pci"] for g in r["gpus"]]
    assert got == [want], (f, got, want)
PY
}
launch A
check A 0004:04:00.0 0004:05:00.0
launch B
check B 0004:05:00.0 0035:03:00.0
cat "$tmp"/B.*.err
grep -q 'judging alone\|no .* snapshot from local rank 0' "$tmp"/B.*.err && fail "launch B: a local rank found no snapshot"

# The snapshot says which launch and which GPUs it is for.
snaps=$(ls "$tmp/gpurun-$(id -u)"/load-* 2> /dev/null | wc -l)
[ "$snaps" -eq 2 ] || fail "expected one load snapshot per launch in $tmp/gpurun-$(id -u), found $snaps"
for f in "$tmp/gpurun-$(id -u)"/load-*; do
  # Open MPI names a launch by its PMIx namespace; Hydra (MPICH) exports none: gpurun names it by
  # the rank's hydra_pmi_proxy (launcher/snapshot.c)
  grep -q '^launch .*\(PMIX_NAMESPACE\|hydra_pmi_proxy\)=' "$f" || fail "$f does not name its launch: $(grep '^launch' "$f")"
  grep -q '^gpus 0004:04:00.0 0004:05:00.0 0035:03:00.0 0035:04:00.0$' "$f" || fail "$f does not name its GPUs"
done
[ "$(stat -c %a "$tmp/gpurun-$(id -u)")" = 700 ] || fail "the snapshot directory is not 0700"

# Local rank 0 removes snapshots over ten minutes old, and the temporary files a local rank 0
# killed before its rename left; a young temporary file (a writer at work) stays.
dir="$tmp/gpurun-$(id -u)"
for f in load-00000000000000aa .load-00000000000000aa.4242.0.tmp .health-00000000000000aa.4242.1.tmp \
  .load-00000000000000bb.4243.0.tmp; do
  echo x > "$dir/$f"
done
touch -d '-11 minutes' "$dir/load-00000000000000aa" "$dir/.load-00000000000000aa.4242.0.tmp" \
  "$dir/.health-00000000000000aa.4242.1.tmp"
# Same name, another launch inside: local rank 1 of launch C must not take it (it waits for local
# rank 0, which never comes, and then plans by closest over every GPU and says so).
PMIX_NAMESPACE=launchC "$gpurun" --topology "$topo" --local-rank 0 --local-size 2 --policy least-loaded \
  --dry-run --format json > /dev/null 2> "$tmp/C.0.err" || fail "launch C rank 0: exit $?"
for f in load-00000000000000aa .load-00000000000000aa.4242.0.tmp .health-00000000000000aa.4242.1.tmp; do
  [ -e "$dir/$f" ] && fail "$f (over ten minutes old) was not removed"
done
[ -e "$dir/.load-00000000000000bb.4243.0.tmp" ] || fail "a young temporary file was removed"
rm -f "$dir/.load-00000000000000bb.4243.0.tmp"
snap=$(ls -t "$tmp/gpurun-$(id -u)"/load-* | head -1)
grep -q '^launch PMIX_NAMESPACE=launchC$' "$snap" || fail "launch C's snapshot not found"
sed -i 's/^launch .*/launch PMIX_NAMESPACE=launchD/; s/^[0-9.]* /0.0 /' "$snap"
PMIX_NAMESPACE=launchC "$gpurun" --topology "$topo" --local-rank 1 --local-size 2 --policy least-loaded \
  --dry-run --format json > "$tmp/C.1.json" 2> "$tmp/C.1.err" || fail "launch C rank 1: exit $?"
cat "$tmp/C.1.err"
grep -q 'no load snapshot from local rank 0' "$tmp/C.1.err" || fail "another launch's snapshot was trusted"
echo PASS
