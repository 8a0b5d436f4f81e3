#!/usr/bin/env python3
"""The placement receipt live: mpirun -np 2 gpurun receipt_prog, where the program first undoes
gpurun's CPU binding (as an MPI library that rebinds at MPI_Init would). gr_init must notice: one
warning line naming planned and actual, the receipt in gr_rank_info; with GPURUN_VERIFY=strict
gr_init returns GR_ERR_MISMATCH; without the rebinding the receipt is clean. The expected cpus
come from the kernel (os.sched_getaffinity), not from gpurun.
The receipt reaches the counters JSON and gpurun-report lists the ranks whose receipt differed.
usage: test_receipt.py GPURUN RECEIPT_PROG MPIRUN GPURUN_REPORT"""
import glob, json, os, re, subprocess, sys, tempfile

gpurun, prog, mpirun, report = sys.argv[1:5]
failures = []
if "ASAN_OPTIONS" in os.environ:
    os.environ["ASAN_OPTIONS"] += ":detect_leaks=0"
ncpu = len(os.sched_getaffinity(0))


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPURUN_", "OMP_", "UCX_"))}
    e.update(env or {})
    r = subprocess.run([mpirun, "-np", "2", "--oversubscribe", "--bind-to", "none", gpurun, prog] + args,
                       capture_output=True, text=True, env=e, timeout=120)
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"RECEIPT rank=(\d+) status=(\S+) differs=(-?\d+) receipt=(.*) error=(.*)$", line)
        if m:
            rows[int(m.group(1))] = (m.group(2), int(m.group(3)), m.group(4), m.group(5))
    return r, rows


if ncpu < 2:
    print("SKIP: one CPU: gpurun's binding of 2 ranks equals the whole machine")
    sys.exit(77)

r, rows = run([])
check(sorted(rows) == [0, 1] and all(v[0] == "GR_OK" and v[1] == 0 for v in rows.values()),
      "as bound by gpurun: receipt clean on both ranks (got %s; %s)" % (rows, r.stderr[-300:]))

r, rows = run(["rebind"])
check(sorted(rows) == [0, 1] and all(v[0] == "GR_OK" and v[1] >= 1 and "cpus planned" in v[2] for v in rows.values()),
      "rebound to every CPU: gr_init warns and the receipt says cpus differ (got %s)" % rows)
allcpus = "0-%d" % (os.cpu_count() - 1)
warn = [l for l in r.stderr.splitlines() if "placement differs from gpurun's plan" in l]
check(len(warn) == 2 and all(("got " + allcpus) in l for l in warn),
      "one warning line per rank naming the actual cpus %s (got %s)" % (allcpus, warn))

r, rows = run(["rebind"], {"GPURUN_VERIFY": "strict"})
check(sorted(rows) == [0, 1] and all(v[0] == "GR_ERR_MISMATCH" and "cpus planned" in v[3] for v in rows.values()),
      "GPURUN_VERIFY=strict: gr_init returns GR_ERR_MISMATCH naming planned and actual (got %s)" % rows)

r, rows = run(["rebind"], {"GPURUN_VERIFY": "off"})
check(sorted(rows) == [0, 1] and all(v[0] == "GR_OK" and v[1] == -1 for v in rows.values()),
      "GPURUN_VERIFY=off: not checked (got %s)" % rows)

with tempfile.TemporaryDirectory() as d:
    r, rows = run(["rebind"], {"GPURUN_MONITOR_DIR": d, "GPURUN_JOB_ID": "receipt"})
    docs = [json.load(open(f)) for f in glob.glob(os.path.join(d, "**", "*.counters.json"), recursive=True)]
    check(len(docs) == 2 and all("cpus planned" in (x.get("receipt") or "") for x in docs),
          "counters JSON carries each rank's receipt (got %s)" % [x.get("receipt") for x in docs])
    jobdirs = [p for p in glob.glob(os.path.join(d, "*")) if os.path.isdir(p)]
    out = subprocess.run([report] + jobdirs[:1], capture_output=True, text=True, timeout=60).stdout
    lines = [l for l in out.splitlines() if l.startswith("placement differed: rank ")]
    check(len(lines) == 2 and all("cpus planned" in l for l in lines),
          "gpurun-report lists both ranks whose placement differed (got %s)" % lines)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
