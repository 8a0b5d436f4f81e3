#!/usr/bin/env python3
"""Golden plans: the whole-node plan (gpurun --dry-run --all --format json) of every recorded
topology at local sizes 1, GPUs/2, GPUs and 2xGPUs, kept as files in golden/ and diffed here, so
that any change of placement shows in review as a diff of those files.
  test_golden.py GPURUN TOPO_DIR GOLDEN_DIR            compare (exit 1 with a diff on change)
  test_golden.py GPURUN TOPO_DIR GOLDEN_DIR --update   rewrite the files (golden/regen.sh)
The host name and the topology path are normalised; the environment is cleared of everything that
could change a plan (GPURUN_*, launcher, GPU and OMP variables)."""
import difflib, json, os, re, subprocess, sys

gpurun, topo_dir, golden_dir = sys.argv[1:4]
update = "--update" in sys.argv[4:]
if "ASAN_OPTIONS" in os.environ:
    os.environ["ASAN_OPTIONS"] += ":detect_leaks=0"
ENV = {k: v for k, v in os.environ.items()
       if not re.match(r"(GPURUN_|OMPI_|PMIX_|SLURM_|FLUX_|PALS_|MV2_|MPI_LOCAL|CUDA_|ROCR_|HIP_|GPU_DEVICE|OMP_|HWLOC_)", k)}
# GPUs per recorded node (configs/topologies/README.md)
NODES = {"hwloc-nvidia-dgx2.xml": 16, "hwloc-power8-minsky-4xP100.xml": 4,
         "mpibind-lassen-p9-4xV100.xml": 4, "mpibind-aws-g4dn-metal-8xT4.xml": 8,
         "mpibind-pascal-2xP100.xml": 2, "flux-tuolumne-4xMI300A-SPX.xml": 4,
         "hwloc-24em64t-3xM2070-es1000.xml": 3, "hwloc-96em64t-x3950m2-es1000.xml": 0,
         "hwloc-8em64t-nonodesets-es1000.xml": 0}


def plan(xml, n):
    r = subprocess.run([gpurun, "--topology", os.path.join(topo_dir, xml), "--local-rank", "0",
                        "--local-size", str(n), "--dry-run", "--all", "--format", "json"],
                       capture_output=True, text=True, env=ENV, timeout=60)
    if r.returncode != 0:
        raise SystemExit("gpurun failed for %s N=%d: %s" % (xml, n, r.stderr.strip()))
    doc = json.loads(r.stdout)
    doc["node"] = "golden"
    doc["topology"] = xml
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


failures = 0
seen = set()
for xml, g in sorted(NODES.items()):
    # a node without GPUs: one rank, and four (one per NUMA node where there are four)
    for n in sorted({1, max(1, g // 2), g, 2 * g}) if g else [1, 4]:
        name = "%s-N%d.json" % (xml[:-4], n)
        seen.add(name)
        path = os.path.join(golden_dir, name)
        got = plan(xml, n)
        if update:
            with open(path, "w") as f:
                f.write(got)
            print("wrote " + name)
            continue
        try:
            want = open(path).read()
        except OSError:
            want = ""
        if got == want:
            print("ok   " + name)
        else:
            failures += 1
            print("FAIL %s: the plan changed (if intended: tests/unit/launcher/golden/regen.sh)" % name)
            sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                       "golden/" + name, "now", n=2))
if not update:
    stale = sorted(set(f for f in os.listdir(golden_dir) if f.endswith(".json")) - seen)
    for f in stale:
        failures += 1
        print("FAIL golden/%s belongs to no case (regen.sh removes it)" % f)
else:
    for f in os.listdir(golden_dir):
        if f.endswith(".json") and f not in seen:
            os.unlink(os.path.join(golden_dir, f))
print("%d failure(s)" % failures)
sys.exit(1 if failures else 0)
