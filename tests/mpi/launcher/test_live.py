#!/usr/bin/env python3
"""Live launcher tests under mpirun on this machine. Expected values come from the kernel
(/proc/self/status of this script and of each child), not from gpurun's own output.
usage: test_live.py GPURUN PRINT_ENV MPIRUN TOPO_DIR"""
import glob, json, os, subprocess, sys, tempfile

gpurun, print_env, mpirun, topo_dir = sys.argv[1:5]
failures = []
# Under AddressSanitizer: hwloc's PCI plugin leaks (libpciaccess; a 3-line hwloc-only program
# shows the same), and after dlclose its frames cannot be matched by a suppression. gpurun's own
# code is leak-checked by the unit tests, which load XML and no PCI plugin.
if "ASAN_OPTIONS" in os.environ:
    os.environ["ASAN_OPTIONS"] += ":detect_leaks=0"

def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)

def parse_list(s):
    out = set()
    for part in s.split(","):
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return out

def my_allowed():
    for line in open("/proc/self/status"):
        if line.startswith("Cpus_allowed_list:"):
            return parse_list(line.split(":", 1)[1].strip())
    return set()

ALLOWED = my_allowed()
# cores: PUs grouped by their core id (sysfs via the kernel, independent of hwloc)
def core_of(pu):
    try:
        base = "/sys/devices/system/cpu/cpu%d/topology/" % pu
        return (open(base + "physical_package_id").read().strip(), open(base + "core_id").read().strip())
    except OSError:
        return ("?", pu)
NCORES = len({core_of(p) for p in ALLOWED})

def mpi(np, args, timeout=60):
    cmd = [mpirun, "-np", str(np), "--oversubscribe", "--bind-to", "none"] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

def mpi_json(np, args):
    """Runs np ranks with per-rank output files (mpirun interleaves stdout lines)."""
    with tempfile.TemporaryDirectory() as d:
        r = mpi(np, ["--output-filename", d] + args)
        docs = []
        for f in sorted(glob.glob(os.path.join(d, "*", "rank.*", "stdout"))):
            txt = open(f).read().strip()
            try:
                docs.append(json.loads(txt))
            except ValueError as e:
                check(False, "rank output is JSON (%s): %r" % (e, txt[:200]))
        return r, docs

# 1. mpirun -np 2 gpurun --dry-run --format json: each rank prints its own row
r, docs = mpi_json(2, [gpurun, "--dry-run", "--format", "json"])
check(r.returncode == 0, "dry-run json exits 0 (%d: %s)" % (r.returncode, r.stderr.strip()[:200]))
check(len(docs) == 2, "two JSON documents")
rows = sorted((d["ranks"][0] for d in docs), key=lambda x: x["local_rank"])
check([x["local_rank"] for x in rows] == [0, 1], "local ranks 0 and 1")
check(all(d["local_size"] == 2 and d["policy"] == "closest" for d in docs), "local_size 2, policy closest")
sets = [parse_list(x["cpus"]) for x in rows]
check(all(s and s <= ALLOWED for s in sets), "cpus within this process's allowed CPUs")
if NCORES >= 2:
    check(not (sets[0] & sets[1]), "no shared CPUs between the two ranks")
for x in rows:
    check(set(["local_rank", "gpus", "cpus", "numa", "nic", "env"]) <= set(x), "rank %d has every field" % x["local_rank"])
    check(x["env"].get("GPURUN_CPUS") == x["cpus"], "env GPURUN_CPUS matches cpus")
check(all("warnings" in d for d in docs), "warnings list present")

# 2. --dry-run --all: the whole node, identical on both ranks
r, docs = mpi_json(2, [gpurun, "--dry-run", "--all", "--format", "json"])
check(len(docs) == 2 and docs[0]["ranks"] == docs[1]["ranks"] and len(docs[0]["ranks"]) == 2,
      "--all: both ranks print the same node-wide plan")

# 3. real binding, checked by the child in /proc/self/status
def run_print(np, extra=()):
    r = mpi(np, [gpurun] + list(extra) + ["--", print_env])
    lines = [l for l in r.stdout.splitlines() if l.startswith("PRINTENV")]
    kv = [dict(f.split("=", 1) for f in l.split()[1:]) for l in lines]
    return r, sorted(kv, key=lambda x: int(x["local_rank"]))

r, kv = run_print(2)
check(r.returncode == 0 and len(kv) == 2, "np 2 gpurun print-env runs (%d)" % r.returncode)
for x in kv:
    check(parse_list(x["allowed"]) == parse_list(x["cpus"]),
          "rank %s bound to its plan: allowed %s == GPURUN_CPUS %s" % (x["local_rank"], x["allowed"], x["cpus"]))
    check(x["plan"] == "1" and x["local_size"] == "2", "plan version and local size exported")
if NCORES >= 2 and len(kv) == 2:
    check(not (parse_list(kv[0]["allowed"]) & parse_list(kv[1]["allowed"])), "the two ranks run on different CPUs")

# 4. np 4 --oversubscribe end to end: more ranks than cores here, shared evenly
r, kv = run_print(4)
check(r.returncode == 0 and [x["local_rank"] for x in kv] == ["0", "1", "2", "3"], "np 4 end to end: ranks 0-3")
check(all(x["local_size"] == "4" for x in kv), "local size 4")
load = {}
for x in kv:
    a = parse_list(x["allowed"])
    check(a == parse_list(x["cpus"]) and a <= ALLOWED, "rank %s bound to %s" % (x["local_rank"], x["cpus"]))
    for c in {core_of(p) for p in a}:
        load[c] = load.get(c, 0) + 1
if NCORES < 4:
    check(max(load.values()) <= -(-4 // NCORES), "cores shared evenly: %s" % load)
    check("share cores" in r.stderr, "sharing warned about")
else:
    check(max(load.values()) == 1, "no shared cores")

# 5. policy none: exported, not bound
r, kv = run_print(2, ["--policy", "none"])
check(all(parse_list(x["allowed"]) == ALLOWED for x in kv) and len(kv) == 2, "--policy none binds nothing")

# 6. a recorded topology from another machine: planned, exported, not bound
r, kv = run_print(2, ["--topology", os.path.join(topo_dir, "mpibind-lassen-p9-4xV100.xml")])
check(len(kv) == 2 and all(parse_list(x["allowed"]) == ALLOWED for x in kv), "foreign topology: not bound")
check(len(kv) == 2 and kv[0]["nic"] in ("mlx5_0", "mlx5_1") and kv[1]["gpus"] == "0035:03:00.0,0035:04:00.0", "foreign topology: its plan exported")
check("not bound" in r.stderr, "foreign topology: notice printed")

# 7. -v line
r = mpi(2, [gpurun, "-v", "--", "true"])
vl = [l for l in r.stderr.splitlines() if l.startswith("gpurun: rank ")]
check(r.returncode == 0 and len(vl) == 2 and all("/2 on " in l for l in vl), "-v prints one line per rank")

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
