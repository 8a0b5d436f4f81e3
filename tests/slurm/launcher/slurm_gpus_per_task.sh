#!/bin/bash
# The README's Slurm pattern, srun --ntasks-per-node=4 --gpus-per-task=1 gpurun PROGRAM, on a private
# Slurm cluster with 4 fake GPUs. gpurun reads the recorded 8xT4 node as this machine
# (HWLOC_XMLFILE): Slurm's node-wide GPU indexes 0-3 are its first four T4s in PCI bus order.
# Checks for every task: Slurm gave it its own GPU; gpurun kept CUDA_VISIBLE_DEVICES as Slurm set
# it, planned exactly that GPU (its bus id), exported no MPS caps, and bound it to cores next to
# that GPU (hwloc-calc on the same XML), disjoint from every other task's cores.
#   slurm_gpus_per_task.sh GPURUN T4_XML
set -eu
GPURUN=$1 XML=$2
. "$(dirname "$0")/../lib/slurm-cluster.sh"
fail() { echo "FAIL: $*"; exit 1; }
command -v hwloc-calc >/dev/null || { echo "SKIP: hwloc-calc not installed"; exit 77; }

slurm_cluster_start 4 8
out=$SLURM_DIR/tasks.out
HWLOC_XMLFILE=$XML HWLOC_THISSYSTEM=0 timeout 60 \
  srun -l -N 1 -n 4 --ntasks-per-node=4 --gpus-per-task=1 \
  "$GPURUN" --policy none env >"$out" 2>"$SLURM_DIR/tasks.err" ||
  { cat "$SLURM_DIR/tasks.err"; slurm_dump_logs; fail "srun --gpus-per-task=1 gpurun env failed"; }
cat "$SLURM_DIR/tasks.err"

python3 - "$out" "$XML" <<'PY' || fail "placement checks failed"
import subprocess, sys
out, xml = sys.argv[1:3]
tasks = {}
for line in open(out):
    tid, _, kv = line.rstrip("\n").partition(": ")
    if "=" in kv:
        k, v = kv.split("=", 1)
        tasks.setdefault(int(tid), {})[k] = v
def near(pci):
    s = subprocess.run(["hwloc-calc", "--if", "xml", "--input", xml, "pci=" + pci, "--po", "-I", "pu"],
                       capture_output=True, text=True, check=True).stdout.strip()
    return set(int(x) for x in s.split(","))
def cpus(s):
    r = set()
    for part in s.split(","):
        a, _, b = part.partition("-")
        r.update(range(int(a), int(b or a) + 1))
    return r
# 3D controllers of the XML in bus order (lstopo's own listing)
ls = subprocess.run(["hwloc-ls", "--if", "xml", "--input", xml, "--only", "pcidev"], capture_output=True, text=True, check=True).stdout
gpus = sorted("0000:" + l.split()[1] for l in ls.splitlines() if "(3D)" in l)
ok, seen, used = True, set(), set()
if sorted(tasks) != [0, 1, 2, 3]:
    print("FAIL: expected tasks 0-3, got", sorted(tasks)); sys.exit(1)
for t, env in sorted(tasks.items()):
    cvd = env.get("CUDA_VISIBLE_DEVICES", "")
    step = env.get("SLURM_STEP_GPUS", "")
    want = gpus[int(cvd)] if cvd.isdigit() else "?"
    c = cpus(env.get("GPURUN_CPUS", "99999"))
    mps = [k for k in env if k.startswith("CUDA_MPS_")]
    checks = [
        (cvd.isdigit() and cvd not in seen, "own GPU from Slurm (CUDA_VISIBLE_DEVICES=%s, SLURM_STEP_GPUS=%s)" % (cvd, step)),
        (env.get("GPURUN_GPUS") == want, "plans exactly that GPU %s (GPURUN_GPUS=%s)" % (want, env.get("GPURUN_GPUS"))),
        (not mps, "no MPS caps (%s)" % mps),
        (want != "?" and c <= near(want), "cores %s next to its GPU" % env.get("GPURUN_CPUS")),
        (not (c & used), "cores shared with no other task"),
    ]
    seen.add(cvd); used |= c
    for good, what in checks:
        print(("ok   " if good else "FAIL ") + "task %d: %s" % (t, what))
        ok &= good
sys.exit(0 if ok else 1)
PY
echo "PASS: srun --gpus-per-task=1 gpurun: 4 tasks, each on its own GPU alone, next to it, no MPS caps"
