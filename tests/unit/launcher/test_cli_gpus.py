#!/usr/bin/env python3
"""gpurun under the GPU variables a scheduler sets, end to end: a recorded node given as this machine
(HWLOC_XMLFILE), gpurun exec'ing env(1), and what the program really receives compared with
hwloc-calc's answer for the same XML (the PUs next to a PCI bus id).
usage: test_cli_gpus.py GPURUN TOPO_DIR"""
import os, subprocess, sys

gpurun, topo_dir = sys.argv[1:3]
failures = []
if "ASAN_OPTIONS" in os.environ:
    os.environ["ASAN_OPTIONS"] += ":detect_leaks=0"
CLEAN = {k: v for k, v in os.environ.items()
         if not k.startswith(("OMPI_", "PMIX_", "SLURM_", "GPURUN_", "FLUX_", "PALS_", "MV2_", "MPI_LOCAL",
                              "CUDA_", "ROCR_", "HIP_", "GPU_DEVICE", "OMP_"))}
T4 = os.path.join(topo_dir, "mpibind-aws-g4dn-metal-8xT4.xml")
# the T4 node's GPUs in PCI bus order, and their UUIDs (from the XML, independently of gpurun)
T4_PCI = ["0000:18:00.0", "0000:19:00.0", "0000:35:00.0", "0000:36:00.0",
          "0000:e7:00.0", "0000:e8:00.0", "0000:f4:00.0", "0000:f5:00.0"]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(env, args=None):
    e = dict(CLEAN, HWLOC_XMLFILE=T4, HWLOC_THISSYSTEM="0")
    e.update(env)
    r = subprocess.run([gpurun] + (args or ["--policy", "none", "env"]), capture_output=True,
                       text=True, env=e, timeout=30)
    got = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
    return r, got


def pus_near(pci):
    out = subprocess.run(["hwloc-calc", "--if", "xml", "--input", T4, "pci=" + pci, "--po", "-I", "pu"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return set(int(x) for x in out.split(","))


def cpus(s):
    r = set()
    for part in s.split(","):
        a, _, b = part.partition("-")
        r.update(range(int(a), int(b or a) + 1))
    return r


def is_exact(env, pci, what):
    """the program got the GPU with this bus id alone: no MPS caps, cores next to it"""
    check(env.get("GPURUN_GPUS") == pci, "%s: GPURUN_GPUS %s (got %s)" % (what, pci, env.get("GPURUN_GPUS")))
    check("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env and "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in env,
          "%s: no MPS caps for a task owning its GPU" % what)
    c = cpus(env.get("GPURUN_CPUS", "999999"))
    check(c <= pus_near(pci), "%s: cores %s next to %s" % (what, env.get("GPURUN_CPUS"), pci))


# the case: srun task 1 of 4 holding GPU 2
r, env = run({"SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "4", "CUDA_VISIBLE_DEVICES": "2"})
check(r.returncode == 0, "task 1 of 4, CUDA_VISIBLE_DEVICES=2 runs (%s)" % r.stderr.strip())
check(env.get("CUDA_VISIBLE_DEVICES") == "2", "CUDA_VISIBLE_DEVICES stays 2 (got %s)" % env.get("CUDA_VISIBLE_DEVICES"))
is_exact(env, T4_PCI[2], "task 1 of 4 on GPU 2")

# --gpus-per-task=1 with the step's list: every task on its own GPU, the 4 tasks' cores disjoint
seen = set()
for t in range(4):
    r, env = run({"SLURM_LOCALID": str(t), "SLURM_TASKS_PER_NODE": "4", "SLURM_STEP_GPUS": "0,1,2,3",
                  "CUDA_VISIBLE_DEVICES": str(t)})
    is_exact(env, T4_PCI[t], "task %d of 4, --gpus-per-task=1" % t)
    c = cpus(env.get("GPURUN_CPUS", "999999"))
    check(not (c & seen), "task %d's cores overlap no other task's" % t)
    seen |= c

# ConstrainDevices: the step holds node GPUs 4,5, the task sees its GPU as 1
r, env = run({"SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "2", "SLURM_STEP_GPUS": "4,5",
              "CUDA_VISIBLE_DEVICES": "1"})
is_exact(env, T4_PCI[5], "ConstrainDevices, visible 1 of step GPUs 4,5")
check(env.get("CUDA_VISIBLE_DEVICES") == "1", "relative ordinal exported as given (got %s)" % env.get("CUDA_VISIBLE_DEVICES"))

# a UUID stays a UUID
uuid = "GPU-541de847-535a-023c-84c0-5bead20b12e0"   # NVIDIAUUID of 0000:35:00.0 in the XML
r, env = run({"CUDA_VISIBLE_DEVICES": uuid})
check(env.get("CUDA_VISIBLE_DEVICES") == uuid and env.get("GPURUN_GPUS") == T4_PCI[2],
      "UUID resolved to %s and kept (got %s, %s)" % (T4_PCI[2], env.get("CUDA_VISIBLE_DEVICES"), env.get("GPURUN_GPUS")))

# never widen: -1 and empty keep the variable, no GPU planned
for v in ["-1", ""]:
    r, env = run({"CUDA_VISIBLE_DEVICES": v})
    check(r.returncode == 0 and env.get("CUDA_VISIBLE_DEVICES") == v and env.get("GPURUN_GPUS") == "",
          "CUDA_VISIBLE_DEVICES=%r kept, CPU-only (got %r, GPUS %r)" % (v, env.get("CUDA_VISIBLE_DEVICES"), env.get("GPURUN_GPUS")))

# an entry naming no GPU of this node: one line, exit 2, nothing run
for v, env_extra in [("0,,1", {}), ("garbage", {}), ("8", {}), ("GPU-0123abcd", {}),
                     ("0", {"SLURM_STEP_GPUS": "9"}), ("3", {"SLURM_STEP_GPUS": "4,5"})]:
    e = {"CUDA_VISIBLE_DEVICES": v}
    e.update(env_extra)
    r, env = run(e)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and r.stdout == "" and ("CUDA_VISIBLE_DEVICES=" in lines[0] or "SLURM_STEP_GPUS=" in lines[0]),
          "CUDA_VISIBLE_DEVICES=%r %s: exit 2, one line (got %d: %r)" % (v, env_extra, r.returncode, r.stderr.strip()))

# a node's BMC display chip (an ATI ES1000, a VGA function of a GPU vendor) is no GPU: -v says so
# once, and the program is told of the real GPUs only, under their CUDA ordinals
for xml, gpus, visible in [("hwloc-24em64t-3xM2070-es1000.xml", "0000:06:00.0,0000:11:00.0,0000:14:00.0", "0,1,2"),
                           ("hwloc-96em64t-x3950m2-es1000.xml", "", None)]:
    r, env = run({"HWLOC_XMLFILE": os.path.join(topo_dir, xml)}, ["-v", "--policy", "none", "env"])
    said = [l for l in r.stderr.splitlines() if "server-management display, not a GPU" in l]
    check(r.returncode == 0 and len(said) == 1 and said[0].startswith("gpurun: ignoring PCI 0000:01:0")
          and "(ATI ES1000 1002:515e)" in said[0], "%s: -v names the ES1000 once (got %r)" % (xml, r.stderr))
    check(env.get("GPURUN_GPUS") == gpus and env.get("CUDA_VISIBLE_DEVICES") == visible
          and "ROCR_VISIBLE_DEVICES" not in env and "HIP_VISIBLE_DEVICES" not in env,
          "%s: GPUs %r, CUDA_VISIBLE_DEVICES %r, no ROCR_VISIBLE_DEVICES (got %r %r %r)"
          % (xml, gpus, visible, env.get("GPURUN_GPUS"), env.get("CUDA_VISIBLE_DEVICES"), env.get("ROCR_VISIBLE_DEVICES")))
    r, env = run({"HWLOC_XMLFILE": os.path.join(topo_dir, xml)}, ["--policy", "none", "env"])
    check("server-management" not in r.stderr, "%s: without -v nothing is said" % xml)

# an hwloc 3 export given as this machine: one line naming the variable, the format and the fix
v3 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hwloc3-cxlmem-dax.v3.xml")
r, env = run({"HWLOC_XMLFILE": v3})
lines = r.stderr.strip().splitlines()
check(r.returncode == 2 and len(lines) == 1 and "HWLOC_XMLFILE=" + v3 in lines[0]
      and "format version 3.0" in lines[0] and "lstopo --of v2xml" in lines[0],
      "HWLOC_XMLFILE of an hwloc 3 export: exit 2, one line naming version and fix (got %d: %r)" % (r.returncode, r.stderr))

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
