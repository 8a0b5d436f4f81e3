#!/usr/bin/env python3
"""The GPU count gpurun plans with on every hwloc XML in a directory, for one gpurun or two (old,
new): one line per file (tab-separated: file, count or the refusal, the GPUs' PCI bus ids), then
a summary; with two builds only the files whose count differs, and how many do.
  gpu_census.py GPURUN DIR
  gpu_census.py OLD_GPURUN NEW_GPURUN DIR
Files that are not hwloc XML are listed with gpurun's refusal. The environment is cleared of
everything that changes the GPUs gpurun sees (GPURUN_*, CUDA_*, ROCR_*, HWLOC_*)."""
import json, os, subprocess, sys

*builds, d = sys.argv[1:]
if len(builds) not in (1, 2):
    sys.exit(__doc__)
env = {k: v for k, v in os.environ.items() if not k.startswith(("GPURUN_", "CUDA_", "ROCR_", "HWLOC_"))}


def census(gpurun, path):
    r = subprocess.run([gpurun, "--topology", path, "--local-rank", "0", "--local-size", "1",
                        "--dry-run", "--format", "json"], capture_output=True, text=True, env=env,
                       timeout=120)
    if r.returncode != 0:
        return "refused", r.stderr.strip()
    doc = json.loads(r.stdout)
    return doc["node_gpus"], ",".join(g["pci"] for g in doc["ranks"][0]["gpus"])


files = sorted(f for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))
loaded = differ = 0
for f in files:
    got = [census(g, os.path.join(d, f)) for g in builds]
    loaded += got[-1][0] != "refused"
    if len(builds) == 1:
        print("%s\t%s\t%s" % (f, got[0][0], got[0][1]))
    elif got[0] != got[1]:
        differ += 1
        print("%s\t%s -> %s\t%s -> %s" % (f, got[0][0], got[1][0], got[0][1], got[1][1]))
print("%d files, %d load%s" % (len(files), loaded, "" if len(builds) == 1 else
                                ", %d differ between the two builds" % differ))
