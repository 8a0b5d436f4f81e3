#!/bin/bash
# The GPU truth kit's one prepared run (scripts/device-kit copies this file to DIR/run.sh).
# On the GPU machine, from the repository root, with DIR carried beside the checkout:
#   DIR/run.sh              every check, under 8 minutes on one GPU
#   DIR/run.sh --cpu-only   only what needs no GPU (the kit's own mpirun, 2 ranks of sim); the
#                           rest is reported SKIP
# Needs nothing the kit does not carry except a bash, coreutils, the NVIDIA driver, and a libnccl
# (the machine's own: see "nccl" below); Python with PyTorch only for the python check.
# Writes at most 8 files into $OUT (default DIR/out): device-summary.txt (one line per check:
# PASS/FAIL/SKIP and its figure) and the logs env.log, tests.log, sim.log, telemetry.log,
# bench.log, python.log. Exit status 0 when no check FAILed.
set -u
KIT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$PWD
[ -f "$REPO/include/gpurun/coll.h" ] || REPO=$(cd "$KIT/.." && pwd)
mode=gpu
case "${1:-}" in
  --cpu-only) mode=cpu ;;
  "") ;;
  *) echo "run.sh: unknown argument '$1' (only --cpu-only)" >&2; exit 2 ;;
esac
OUT=${OUT:-$KIT/out}
mkdir -p "$OUT" || exit 1
start=$(date +%s)
budget=${KIT_BUDGET_S:-470} # a check starts only if its own timeout still ends before 470 s
summary=$OUT/device-summary.txt
: >"$summary"
envlog=$OUT/env.log testlog=$OUT/tests.log simlog=$OUT/sim.log tellog=$OUT/telemetry.log
benchlog=$OUT/bench.log pylog=$OUT/python.log
: >"$envlog"; : >"$testlog"; : >"$simlog"; : >"$tellog"; : >"$benchlog"; : >"$pylog"
failed=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpurun-kit.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT

verdict() { # NAME PASS|FAIL|SKIP FIGURE...
  local name=$1 v=$2
  shift 2
  [ "$v" = FAIL ] && failed=1
  printf '%-28s %-4s %s\n' "$name" "$v" "$*" | tee -a "$summary"
}
elapsed() { echo $(($(date +%s) - start)); }
time_left() { [ $(($(elapsed) + ${1:-0})) -lt "$budget" ]; } # time_left [SECONDS the next step may take]
log() { local f=$1; shift; echo "== $*" >>"$f"; }

# ---- the kit's environment: relocated Open MPI, PMIx, hwloc, UCX -----------------------------------
R=$KIT/root/usr
L=$R/lib/x86_64-linux-gnu
export OPAL_PREFIX=$R OPAL_EXEC_PREFIX=$R OPAL_BINDIR=$R/bin OPAL_LIBDIR=$L/openmpi/lib
export OPAL_PKGLIBDIR=$L/openmpi/lib/openmpi3 OPAL_DATAROOTDIR=$R/share OPAL_DATADIR=$R/share
export OPAL_PKGDATADIR=$R/share/openmpi OPAL_SYSCONFDIR=$KIT/root/etc/openmpi
export OMPI_MCA_mca_base_component_path=$OPAL_PKGLIBDIR
export PMIX_PREFIX=$L/pmix2 PMIX_MCA_mca_base_component_path=$L/pmix2/lib/pmix
export HWLOC_PLUGINS_PATH=$L/hwloc UCX_MODULE_DIR=$L/ucx
# One node, as root, maybe more ranks than cores; no ssh there (plm isolated); shared memory and
# TCP only (Debian's Open MPI has no CUDA support: device buffers never go to MPI).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_plm=isolated OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export PATH=$R/bin:$PATH
MPIRUN=$R/bin/mpirun
B=$KIT/build
# A copy that lost its modes (some transfers do) still runs.
[ -x "$B/launcher/gpurun" ] && [ -x "$R/bin/orterun" ] ||
  find "$B" "$R/bin" -type f -exec chmod u+x {} + 2>/dev/null
base_ld=$B:$KIT/lib:$L/openmpi/lib:$L/pmix2/lib:$L
export LD_LIBRARY_PATH=$base_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KIT REPO MPIRUN

{
  echo "run.sh $mode on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ), kit $KIT, repository $REPO"
  sed -n '1,6p' "$KIT/MANIFEST.txt" 2>/dev/null
  echo "kernel $(uname -r), $(nproc) CPUs, $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}")"
} >>"$envlog"

# ---- fallback libraries: only for sonames this machine lacks ------------------------------------------
fb=$scratch/fallback
mkdir -p "$fb"
missing_libs() {
  { find "$B" -type f; ls "$R/bin/orterun" "$L"/openmpi/lib/openmpi3/*.so "$L"/pmix2/lib/pmix/*.so \
      "$L"/hwloc/*.so 2>/dev/null; } | while read -r f; do
    head -c 4 "$f" 2>/dev/null | grep -q ELF || continue
    ldd "$f" 2>/dev/null | awk -v f="$f" '/not found/ {print $1, f}'
  done
}
if command -v ldd >/dev/null; then
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$fb
  missing_libs >"$scratch/missing"
  for so in $(awk '{print $1}' "$scratch/missing" | sort -u); do
    [ -e "$KIT/fallback/$so" ] && ln -sf "$KIT/fallback/$so" "$fb/$so" &&
      echo "fallback used for $so (this machine has none)" >>"$envlog"
  done
else
  echo "no ldd here: library closure not checked" >>"$envlog"
  : >"$scratch/missing"
fi

# ---- nccl: the newest libnccl.so.2 this machine has (the kit carries none) -------------------------
built_nccl=$(sed -n 's/^nccl compiled against: \([0-9]*\).*/\1/p' "$KIT/MANIFEST.txt" 2>/dev/null)
nccl_dir="" nccl_ver=-1
find_nccl() {
  local c v
  {
    [ -n "${KIT_NCCL:-}" ] && echo "$KIT_NCCL"
    for py in python3 /usr/bin/python3; do
      command -v "$py" >/dev/null 2>&1 || continue
      timeout 60 "$py" - 2>/dev/null <<'EOF'
import glob, os
try:
    import nvidia.nccl as n
    for p in list(getattr(n, "__path__", [])):
        for f in glob.glob(os.path.join(p, "lib", "libnccl.so*")):
            print(f)
except Exception:
    pass
EOF
    done
    ls /usr/local/cuda/lib64/libnccl.so* /usr/local/cuda/targets/*/lib/libnccl.so* 2>/dev/null
    ldconfig -p 2>/dev/null | awk '/libnccl\.so/ {print $NF}'
    timeout 20 find /usr /opt -xdev -name 'libnccl.so*' -type f 2>/dev/null
  } | while read -r c; do [ -f "$c" ] && readlink -f "$c"; done | sort -u >"$scratch/nccl-candidates"
  while read -r c; do
    v=$("$B/tests/gpu/runtime/device_probe" nccl-version "$c" 2>/dev/null | sed -n 's/^nccl_file_version=//p')
    echo "libnccl candidate: $c version ${v:--1}" >>"$envlog"
    if [ "${v:--1}" -gt "$nccl_ver" ] 2>/dev/null; then nccl_ver=$v; nccl_dir=$(dirname "$c"); fi
  done <"$scratch/nccl-candidates"
}
find_nccl
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH=$base_ld:$nccl_dir${LD_LIBRARY_PATH#"$base_ld"}

# What is still missing once libnccl is on the path too.
if command -v ldd >/dev/null; then missing_libs | sort -u >"$scratch/missing"; fi
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >>"$envlog"

# ---- check: environment -------------------------------------------------------------------------------
ngpu=0 gpu_name="" driver=""
if [ "$mode" = gpu ]; then
  log "$envlog" "nvidia-smi -L"
  timeout 30 nvidia-smi -L >>"$envlog" 2>&1
  ngpu=$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  timeout 30 nvidia-smi --query-gpu=name,driver_version,pci.bus_id,memory.total --format=csv,noheader \
    >"$scratch/smi-q" 2>>"$envlog"
  cat "$scratch/smi-q" >>"$envlog"
  { echo "libnvidia-ml (gpurun's telemetry dlopens it):"; ldconfig -p 2>/dev/null | grep -E 'libnvidia-ml|libcuda\.so'; } >>"$envlog"
  gpu_name=$(head -n1 "$scratch/smi-q" | cut -d, -f1)
  driver=$(head -n1 "$scratch/smi-q" | cut -d, -f2 | tr -d ' ')
fi
log "$envlog" "device_probe info"
timeout 60 "$B/tests/gpu/runtime/device_probe" info >"$scratch/probe" 2>&1
cat "$scratch/probe" >>"$envlog"
log "$envlog" "mpirun --version (the kit's: $MPIRUN)"
timeout 30 "$MPIRUN" --version >>"$envlog" 2>&1
mpi_ok=$?
cuda_line="CUDA driver $(sed -n 's/^cuda_driver=//p' "$scratch/probe") runtime $(sed -n 's/^cuda_runtime=//p' "$scratch/probe")"
nccl_fig="libnccl ${nccl_ver} at ${nccl_dir:-nowhere}, built against ${built_nccl:-?}"
if [ -s "$scratch/missing" ]; then
  { echo "libraries not found:"; cat "$scratch/missing"; } >>"$envlog"
  verdict environment FAIL "missing: $(awk '{print $1}' "$scratch/missing" | sort -u | tr '\n' ' ')"
elif [ "$mpi_ok" != 0 ]; then
  verdict environment FAIL "the kit's mpirun --version failed (env.log)"
elif [ "$mode" = gpu ] && { [ "$ngpu" -lt 1 ] || [ -z "$nccl_dir" ]; }; then
  verdict environment FAIL "$ngpu GPU(s) from nvidia-smi; $nccl_fig; $cuda_line"
elif [ "$mode" = gpu ]; then
  verdict environment PASS "$ngpu x ${gpu_name:-?}, driver ${driver:-?}, $cuda_line; $nccl_fig"
else
  verdict environment PASS "kit mpirun $(timeout 10 "$MPIRUN" --version 2>&1 | sed -n '1s/.*) //p'); $nccl_fig"
fi

# ---- closed form of sim's heat equation, and bit-identity across rank counts ----------------------
NX=200 NY=150 STEPS=50
sim_ranks() { # DEVICE(cpu|gpu) NP...: each at np ranks, closed form to 1e-12, identical fields
  local dev=$1 np worst="" first=""
  shift
  for np in "$@"; do
    log "$simlog" "mpirun -np $np gpurun sim --$dev --nx $NX --ny $NY --steps $STEPS"
    rm -f "$scratch/field$np".*
    timeout -k 5 55 "$MPIRUN" -np "$np" "$B/launcher/gpurun" "$B/examples/sim/sim" --"$dev" \
      --nx $NX --ny $NY --steps $STEPS --dump "$scratch/field$np" >>"$simlog" 2>&1 ||
      { echo "sim --$dev at $np ranks failed (sim.log)"; return 1; }
    tail -n 8 "$simlog" | grep -q "^sim: self-check PASS" || { echo "no self-check PASS at $np ranks"; return 1; }
    [ "$dev" = gpu ] && { tail -n 8 "$simlog" | grep -q "device gpu" ||
      { echo "sim at $np ranks did not use the GPU"; return 1; }; }
    cat "$scratch/field$np".* | sort -n -k2,2 -k1,1 >"$scratch/all$np"
    local e
    e=$(awk -v nx=$NX -v ny=$NY -v n=$STEPS -v r=0.25 '
      BEGIN { pi = atan2(0, -1); sx = sin(pi / (2 * (nx + 1))); sy = sin(pi / (2 * (ny + 1)))
              g = 1 - 4 * r * (sx * sx + sy * sy); amp = g ^ n; worst = 0 }
      { e = $3 - amp * sin(pi * ($1 + 1) / (nx + 1)) * sin(pi * ($2 + 1) / (ny + 1))
        if (e < 0) e = -e; if (e > worst) worst = e; count++ }
      END { printf "%.3g", worst; if (count != nx * ny || worst > 1e-12) exit 1 }' "$scratch/all$np") ||
      { echo "field at $np ranks is not the closed form (max error $e)"; return 1; }
    echo "closed form at $np ranks: max error $e" >>"$simlog"
    worst="$worst${worst:+/}$e"
    if [ -z "$first" ]; then first=$np
    elif ! cmp -s "$scratch/all$first" "$scratch/all$np"; then
      echo "field at $np ranks is not bit-identical to $first rank(s)"; return 1
    fi
  done
  echo "max |u - exact| $worst at $(echo "$@" | tr ' ' '/') ranks, bit-identical"
}

if [ "$mode" = cpu ]; then
  log "$simlog" "which mpirun: $(command -v mpirun)"
  if [ "$(command -v mpirun)" != "$MPIRUN" ]; then
    verdict mpi-sim-2-ranks FAIL "mpirun on PATH is $(command -v mpirun), not the kit's"
  elif fig=$(sim_ranks cpu 1 2); then
    verdict mpi-sim-2-ranks PASS "kit mpirun, CPU sim: $fig"
  else
    verdict mpi-sim-2-ranks FAIL "$fig"
  fi
  for c in gpu-tests coll-exact-nccl-shared sim-cuda-1-2-4 placement telemetry-vs-smi \
           bench-nccl-vs-raw python-cuda-allreduce; do
    verdict "$c" SKIP "needs a GPU (--cpu-only)"
  done
  echo "run.sh --cpu-only: done in $(elapsed) s; $summary" >&2
  exit $failed
fi

# ---- check: the gpu-labelled tests ---------------------------------------------------------------------
npass=0 nfail=0 nskip=0 fails=""
t() { # NAME TIMEOUT SKIP_RC ENV... -- COMMAND...
  local name=$1 to=$2 skip=$3 rc s0
  shift 3
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  [ "$to" -gt 150 ] && to=150 # one GPU: each of these takes seconds; a hang must not eat the run
  if ! time_left "$to"; then nskip=$((nskip + 1)); echo "$name: not run (out of time)" >>"$testlog"; return; fi
  log "$testlog" "$name"
  s0=$(date +%s)
  (cd "$scratch" && env "${envs[@]}" timeout -k 5 "$to" "$@") >>"$testlog" 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then npass=$((npass + 1)); echo "$name: PASS ($(($(date +%s) - s0)) s)" >>"$testlog"
  elif [ "$rc" = "$skip" ]; then nskip=$((nskip + 1)); echo "$name: SKIP" >>"$testlog"
  else nfail=$((nfail + 1)); fails="$fails $name"; echo "$name: FAIL (exit $rc)" >>"$testlog"; fi
}
# shellcheck source=/dev/null
. "$KIT/gpu-tests.sh"
if [ $nfail -gt 0 ]; then verdict gpu-tests FAIL "$npass passed, $nfail failed:$fails, $nskip skipped"
elif [ $npass -gt 0 ]; then verdict gpu-tests PASS "$npass passed, $nskip skipped (1 GPU: one-GPU-per-rank tests skip)"
else verdict gpu-tests SKIP "$npass passed, $nskip skipped"; fi

# ---- check: the exact suite on the NCCL backend, ranks sharing the GPU ----------------------------------
# NCCL refuses two ranks on one GPU; the backend groups them (collectives/nccl_share.c) and rank 0
# logs the grouping at info ("collectives on world: ranks 0,1 share GPU <bus id>; NCCL runs among
# 1 leader(s) ..."). PASS needs exact results AND that line: the results came through the grouping.
shared_ok=0
if ! time_left 205; then
  verdict coll-exact-nccl-shared SKIP "out of time"
else
  res="" bad=0
  for np in 2 4; do
    log "$testlog" "GPURUN_EXACT_SHARE_GPU=1 mpirun -np $np test_coll_exact_gpu (ranks sharing GPU 0)"
    GPURUN_EXACT_SHARE_GPU=1 GPURUN_LOG=info timeout -k 5 95 "$MPIRUN" -np $np \
      "$B/tests/gpu/collectives/test_coll_exact_gpu" >"$scratch/shared$np" 2>&1
    rc=$?
    cat "$scratch/shared$np" >>"$testlog"
    ranks=$(seq -s, 0 $((np - 1)))
    path=$(grep -m1 -E "collectives on world: ranks $ranks share GPU" "$scratch/shared$np" |
      sed 's/.*collectives on world: //' | cut -c1-120)
    why=$(grep -i -m1 -E 'duplicate|invalid usage|FAIL' "$scratch/shared$np" | cut -c1-120)
    if [ $rc = 77 ]; then bad=2; res="$res np$np SKIP ($(grep -m1 skipped "$scratch/shared$np"));"
    elif [ $rc = 0 ] && [ -n "$path" ]; then res="$res np$np PASS;"
    elif [ $rc = 0 ]; then bad=1; res="$res np$np FAIL (exact, but no 'ranks $ranks share GPU' line: not the grouping);"
    else bad=1; res="$res np$np FAIL (exit $rc${why:+: $why});"; fi
  done
  [ -n "$path" ] || path="none reported in GPURUN_LOG=info"
  if [ $bad = 0 ]; then shared_ok=1; verdict coll-exact-nccl-shared PASS "${res# } path: $path"
  elif [ $bad = 2 ]; then verdict coll-exact-nccl-shared SKIP "${res# }"
  else verdict coll-exact-nccl-shared FAIL "${res# } path: $path"; fi
fi

# ---- check: sim's CUDA kernel against the closed form at 1, 2 and 4 ranks --------------------------------
if ! time_left 185; then verdict sim-cuda-1-2-4 SKIP "out of time"
elif fig=$(sim_ranks gpu 1 2 4); then verdict sim-cuda-1-2-4 PASS "$fig"
else verdict sim-cuda-1-2-4 FAIL "$fig"; fi

# ---- check: gr_init's placement against CUDA's PCI bus id ------------------------------------------------
if ! time_left 65; then verdict placement SKIP "out of time"
else
  log "$testlog" "mpirun -np 1 gpurun device_probe placement"
  timeout -k 5 60 "$MPIRUN" -np 1 "$B/launcher/gpurun" "$B/tests/gpu/runtime/device_probe" placement \
    >"$scratch/place" 2>&1
  rc=$?
  cat "$scratch/place" >>"$testlog"
  line=$(grep -m1 '^rank=0' "$scratch/place" | cut -c1-160)
  case $rc in 0) verdict placement PASS "$line" ;; 77) verdict placement SKIP "${line:-nothing to compare}" ;;
              *) verdict placement FAIL "${line:-exit $rc (tests.log)}" ;; esac
fi

# ---- check: telemetry (NVML through gpurun --monitor) against nvidia-smi, during a busy kernel -------------
if ! time_left 65; then verdict telemetry-vs-smi SKIP "out of time"
else
  mon=$scratch/monitor
  smi=$scratch/smi.csv
  : >"$smi"
  ( while :; do
      l=$(timeout 5 nvidia-smi --query-gpu=utilization.gpu,memory.used,temperature.gpu,power.draw \
            --format=csv,noheader,nounits -i 0 2>/dev/null) && echo "$(date +%s.%N),$l" >>"$smi"
      sleep 0.4
    done ) &
  sampler=$!
  log "$tellog" "mpirun -np 1 gpurun --monitor=0.5 --time-limit 15 sim --gpu --nx 8192 --ny 8192 (busy, stopped at 15 s)"
  GPURUN_MONITOR_DIR=$mon timeout -k 5 60 "$MPIRUN" -np 1 "$B/launcher/gpurun" --monitor=0.5 \
    --time-limit 15 "$B/examples/sim/sim" --gpu --nx 8192 --ny 8192 --steps 100000000 --quiet \
    >>"$tellog" 2>&1
  echo "(exit $? : 124 = stopped by --time-limit, as intended)" >>"$tellog"
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  csv=$(find "$mon" -name '*.csv' 2>/dev/null | head -n1)
  if [ -z "$csv" ] || [ ! -s "$smi" ]; then
    verdict telemetry-vs-smi FAIL "no samples (gpurun csv: ${csv:-none}, nvidia-smi lines: $(wc -l <"$smi"))"
  else
    # Each gpurun sample beside the nvidia-smi sample nearest in time (within 0.6 s).
    awk -F, -v smi="$smi" '
      BEGIN { while ((getline l < smi) > 0) { split(l, a, ","); n++; st[n] = a[1]; su[n] = a[2] + 0
                sm[n] = a[3] + 0; stc[n] = a[4] + 0; sp[n] = a[5] + 0 }
              printf "%-15s | %5s %5s | %9s %9s | %4s %4s | %7s %7s\n", "time", "util", "smi",
                     "mem_MiB", "smi", "C", "smi", "power_W", "smi" }
      NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
      $col["gpu_util"] != "" { t = $1; best = 0; bd = 1e9
        for (i = 1; i <= n; i++) { d = st[i] - t; if (d < 0) d = -d; if (d < bd) { bd = d; best = i } }
        if (bd > 0.6) next
        printf "%-15.3f | %5d %5d | %9.1f %9.1f | %4d %4d | %7.1f %7.1f\n", t, $col["gpu_util"], su[best],
               $col["mem_used_mib"], sm[best], $col["temp_c"], stc[best], $col["power_w"], sp[best] }' \
      "$csv" >"$scratch/side"
    cat "$scratch/side" >>"$tellog"
    # Verdict over the busy samples (both say >= 50 % utilisation): memory within 1 GiB (NVML's v1
    # "used" counts reserved memory, nvidia-smi's does not), temperature within 3 C, power within 25 %.
    fig=$(awk -F'|' 'NR > 1 { split($2, u, " "); split($3, m, " "); split($4, c, " "); split($5, p, " ")
        if (u[1] < 50 || u[2] < 50) next
        k++; dm = m[1] - m[2]; if (dm < 0) dm = -dm; dc = c[1] - c[2]; if (dc < 0) dc = -dc
        dp = p[2] > 0 ? (p[1] - p[2]) / p[2] : 1; if (dp < 0) dp = -dp
        if (dm > wm) wm = dm; if (dc > wc) wc = dc; if (dp > wp) wp = dp; su += u[1]; ss += u[2] }
      END { if (k < 5) { printf "only %d busy paired samples", k; exit 2 }
            printf "%d busy samples: util %.0f%% vs smi %.0f%% (mean), worst |mem diff| %.0f MiB, |temp diff| %d C, power diff %.0f%%",
                   k, su / k, ss / k, wm, wc, 100 * wp
            if (wm > 1024 || wc > 3 || wp > 0.25) exit 1 }' "$scratch/side")
    rc=$?
    awk -F, 'NR > 1 && $5 == "-" { n++ } END { exit n > 0 ? 0 : 1 }' "$csv" &&
      fig="$fig; gpurun's rows have no GPU (NVML not loaded: libnvidia-ml.so.1 on the loader path?)"
    case $rc in 0) verdict telemetry-vs-smi PASS "$fig" ;; *) verdict telemetry-vs-smi FAIL "$fig" ;; esac
  fi
fi

# ---- check: the collective benchmark on device buffers, gpurun against raw NCCL ---------------------------
if ! time_left 155; then verdict bench-nccl-vs-raw SKIP "out of time"
else
  log "$benchlog" "mpirun -np 1 nccl_side_by_side -b 8 -e 128M -f 4 -n 20 -w 5 -R 5"
  timeout -k 5 150 "$MPIRUN" -np 1 "$B/tests/gpu/collectives/nccl_side_by_side" -b 8 -e 128M -f 4 \
    -n 20 -w 5 -R 5 >"$scratch/bench" 2>&1
  rc=$?
  cat "$scratch/bench" >>"$benchlog"
  fig=$(awk '$1 == 8 || $1 == 2097152 || $1 == 134217728 { printf "%s%s B: gr/raw %s (%s)", sep, $1, $(NF-1), $NF; sep = "; " }' \
          "$scratch/bench")
  case $rc in 0) verdict bench-nccl-vs-raw PASS "1 rank, $fig; 0 wrong" ;;
              77) verdict bench-nccl-vs-raw SKIP "$(head -n1 "$scratch/bench")" ;;
              *) verdict bench-nccl-vs-raw FAIL "exit $rc ${fig} (bench.log)" ;; esac
  if time_left 125; then
    log "$benchlog" "mpirun -np 1 gpurun-bench-coll --backend nccl -o allreduce -b 8 -e 256M -f 4 -n 20 -w 5 -R 3 -c 1"
    timeout -k 5 120 "$MPIRUN" -np 1 "$B/bench/coll/gpurun-bench-coll" --backend nccl -o allreduce \
      -b 8 -e 256M -f 4 -n 20 -w 5 -R 3 -c 1 >>"$benchlog" 2>&1 ||
      echo "(gpurun-bench-coll exited $?)" >>"$benchlog"
  fi
fi

# ---- check: the Python package's allreduce on CUDA tensors -----------------------------------------------
if [ ! -d "$REPO/python/gpurun" ]; then verdict python-cuda-allreduce SKIP "no python/gpurun in this checkout"
elif ! time_left 125; then verdict python-cuda-allreduce SKIP "out of time"
else
  cat >"$scratch/py_allreduce.py" <<'EOF'
import sys
import torch
import gpurun
gpurun.init()
w = gpurun.world()
n = (1 << 20) + 3
x = (torch.arange(n, device="cuda", dtype=torch.float32) % 13) + w.rank
y = w.allreduce(x, op="sum")
torch.cuda.synchronize()
want = (torch.arange(n, device="cuda", dtype=torch.float32) % 13) * w.size + w.size * (w.size - 1) / 2
bad = int((y != want).sum().item())
print(f"rank {w.rank}/{w.size} backend {w.backend} device {y.device}: {bad} wrong of {n}", flush=True)
gpurun.finalize()
sys.exit(1 if bad or y.device.type != "cuda" else 0)
EOF
  res="" bad=0
  nps="1"
  [ $shared_ok = 1 ] && nps="1 2"
  for np in $nps; do
    log "$pylog" "mpirun -np $np gpurun python3 py_allreduce.py"
    GPURUN_LIB=$B/libgpurun.so.0 PYTHONPATH=$REPO/python${PYTHONPATH:+:$PYTHONPATH} \
      PYTHONUNBUFFERED=1 timeout -k 5 55 \
      "$MPIRUN" -np $np "$B/launcher/gpurun" python3 "$scratch/py_allreduce.py" >>"$pylog" 2>&1
    rc=$?
    [ $rc = 0 ] && res="$res np$np PASS;" || { bad=1; res="$res np$np FAIL (exit $rc);"; }
  done
  [ $bad = 0 ] && verdict python-cuda-allreduce PASS "${res# } 1Mi+3 float32 on cuda" ||
    verdict python-cuda-allreduce FAIL "${res# } (python.log)"
fi

echo "run.sh: done in $(elapsed) s; $summary" >&2
exit $failed
