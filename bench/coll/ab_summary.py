#!/usr/bin/env python3
"""Summary of bench/coll/ab_small.sh's runs: per op, size and build, the median over the runs of
gpurun's and raw MPI's median round, and the median (min-max) of the runs' gpurun/raw ratios.
   bench/coll/ab_summary.py OUT"""
import glob
import re
import statistics
import sys


def main(d):
    lat = {}
    for f in glob.glob(d + "/line.rep*"):
        lat[int(f.rsplit("rep", 1)[1])] = open(f).read().split()
    print("cache line one way per repeat, before/after (ns):",
          " ".join(f"{r}:{'/'.join(lat[r])}" for r in sorted(lat)))
    res = {}
    for f in glob.glob(d + "/*.rep*.txt"):
        m = re.match(r".*/(\w+)\.(old|new)\.rep\d+\.txt$", f)
        if not m:
            continue
        for line in open(f):
            x = line.split()
            if line.startswith("#") or len(x) < 18:
                continue
            res.setdefault((m.group(1), int(x[0]), m.group(2)), []).append(
                (float(x[5]), float(x[16]), float(x[17])))
    for op, size in sorted({(k[0], k[1]) for k in res}):
        for b in ("old", "new"):
            v = res.get((op, size, b))
            if not v:
                continue
            ratio = [t[2] for t in v]
            print(f"{op:14s} {size:5d} {b}  gpurun {statistics.median(t[0] for t in v):.2f} us"
                  f"  raw {statistics.median(t[1] for t in v):.2f} us"
                  f"  ratio {statistics.median(ratio):.3f} ({min(ratio):.3f}-{max(ratio):.3f})"
                  f"  runs {len(v)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
