#!/bin/sh
# Another user takes the snapshot directory's name first, in a shared sticky directory like /tmp:
# the per-user directory TMPDIR/gpurun-UID (a directory of theirs, then a symlink to one; the
# snapshots themselves live only inside it). gpurun
# must still place every local rank consistently (--policy least-loaded: closest over every GPU,
# two each; --gpu-health avoid: each rank judges the health it reads), say why in one warning from
# local rank 0, and not wait 10 s for a snapshot that cannot come.
# usage: test_snapshot_squat.sh MPIRUN GPURUN FAKE_NVML TOPOLOGY
set -u
mpirun=$1 gpurun=$2 fake=$3 topo=$4
command -v su > /dev/null || { echo "SKIP: no su"; exit 77; }
tmp=$(mktemp -d /tmp/gr_snapsquat.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
chmod 1777 "$tmp"
export GPURUN_NVML_LIBRARY="$fake" GR_FAKE_NVML=node4 TMPDIR="$tmp"
unset GPURUN_JOB_ID SLURM_JOB_ID SLURM_JOBID SLURM_STEP_ID SLURM_STEPID OMPI_MCA_ess_base_jobid \
  OMPI_MCA_orte_ess_jobid OMPI_MCA_orte_hnp_uri PMIX_NAMESPACE FLUX_JOB_ID PALS_APID
uid=$(id -u)
# su to another user without a password needs root
if [ "$uid" != 0 ] || ! su nobody -s /bin/sh -c "test -w '$tmp'" 2> /dev/null; then
  echo "SKIP: cannot act as user nobody here (not root, or su refused)"
  exit 77
fi
su nobody -s /bin/sh -c "mkdir -m 755 '$tmp/gpurun-$uid'" || fail "nobody could not create the name"

cat > "$tmp/wrap.sh" <<'SH'
#!/bin/sh
export SLURM_JOB_ID=4243
r=${OMPI_COMM_WORLD_LOCAL_RANK:-$MPI_LOCALRANKID} # Open MPI; Hydra
[ "$r" = 0 ] && export GR_FAKE_NVML_IDLE0=1
exec "$@" > "$OUTDIR/$LAUNCH.$r.json" 2> "$OUTDIR/$LAUNCH.$r.err"
SH
chmod 755 "$tmp/wrap.sh"
launch() { # name, then gpurun's options; fails past 8 s (a rank waited for a snapshot)
  name=$1
  shift
  t0=$(date +%s%N)
  OUTDIR="$tmp" LAUNCH=$name timeout -k 5 60 "$mpirun" -np 2 --oversubscribe -x OUTDIR -x LAUNCH \
    -x TMPDIR -x GPURUN_NVML_LIBRARY -x GR_FAKE_NVML \
    sh "$tmp/wrap.sh" "$gpurun" --topology "$topo" --dry-run --format json "$@" \
    || { cat "$tmp/$name".*.err; fail "$name: mpirun exited $?"; }
  ms=$((($(date +%s%N) - t0) / 1000000))
  cat "$tmp/$name".*.err
  echo "$name: $ms ms"
  [ "$ms" -lt 8000 ] || fail "$name: took $ms ms: a local rank waited for the snapshot"
  grep -q 'judging alone\|no .* snapshot from local rank 0' "$tmp/$name".*.err && fail "$name: a local rank waited"
  true
}
check() { # launch, kind, the reason, then local rank 0's and local rank 1's GPUs (a,b)
  grep -q "^gpurun: warning: cannot share the $2 snapshot between the local ranks: $tmp/gpurun-$uid $3" "$tmp/$1.0.err" \
    || fail "$1: no clear warning from local rank 0"
  /usr/bin/python3 - "$tmp/$1.0.json" "$4" "$tmp/$1.1.json" "$5" <<'PY' || fail "$1: not placed consistently"
import json, sys
a = sys.argv[1:]
for f, want in zip(a[0::2], a[1::2]):
    r = json.load(open(f))["ranks"][0]
    got = [g["pci"] for g in r["gpus"]]
    assert got == want.split(","), (f, got, want)
PY
}
owned="is owned by uid 65534, not by this user (uid $uid)"
launch load --policy least-loaded --gpu-health off
check load load "$owned" 0004:04:00.0,0004:05:00.0 0035:03:00.0,0035:04:00.0
grep -q 'least-loaded: no load snapshot shared with the other local ranks; closest over every GPU' "$tmp/load.1.json" \
  || fail "load: the plan's warnings do not say why"
launch health --gpu-health avoid
check health health "$owned" 0004:04:00.0 0035:04:00.0

# A symlink in its place, to a directory the squatter owns.
rm -rf "$tmp/gpurun-$uid"
su nobody -s /bin/sh -c "mkdir -m 777 '$tmp/theirs' && ln -s '$tmp/theirs' '$tmp/gpurun-$uid'" || fail "nobody could not link"
launch link --policy least-loaded --gpu-health off
check link load "is a symlink or a file, not a directory" 0004:04:00.0,0004:05:00.0 \
  0035:03:00.0,0035:04:00.0
[ -z "$(ls -A "$tmp/theirs")" ] || fail "wrote into the squatter's directory"
echo PASS
