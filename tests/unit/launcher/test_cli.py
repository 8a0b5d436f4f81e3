#!/usr/bin/env python3
"""gpurun's command line as a user meets it: exit codes (2 usage/config, 127/126 program), one-line
messages, precedence of --config/GPURUN_*/argv, and --help vs the man page.
usage: test_cli.py GPURUN PRINT_ENV TOPO_DIR MANPAGE"""
import json, os, re, stat, subprocess, sys, tempfile

gpurun, print_env, topo_dir, manpage = sys.argv[1:5]
failures = []
# Under AddressSanitizer: hwloc's PCI plugin leaks (libpciaccess; a 3-line hwloc-only program
# shows the same), and after dlclose its frames cannot be matched by a suppression. gpurun's own
# code is leak-checked by the unit tests, which load XML and no PCI plugin.
if "ASAN_OPTIONS" in os.environ:
    os.environ["ASAN_OPTIONS"] += ":detect_leaks=0"
CLEAN = {k: v for k, v in os.environ.items()
         if not k.startswith(("OMPI_", "PMIX_", "SLURM_", "GPURUN_", "FLUX_", "PALS_", "MV2_", "MPI_LOCAL"))}

def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)

def run(args, env=None, timeout=30):
    e = dict(CLEAN)
    e.update(env or {})
    return subprocess.run([gpurun] + args, capture_output=True, text=True, env=e, timeout=timeout)

def usage_error(args, needle, env=None):
    r = run(args, env)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and needle in r.stderr and r.stdout == "",
          "exit 2, one line with %r for %s %s (got %d: %r)" % (needle, args, env or "", r.returncode, r.stderr.strip()))

dgx2 = os.path.join(topo_dir, "hwloc-nvidia-dgx2.xml")
aws = os.path.join(topo_dir, "mpibind-aws-g4dn-metal-8xT4.xml")
usage_error(["--bogus", "true"], "unknown option")
usage_error(["--policy", "fastest", "true"], "unknown policy")
usage_error(["true"], "OMPI_COMM_WORLD_LOCAL_RANK=abc", {"OMPI_COMM_WORLD_LOCAL_RANK": "abc", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
usage_error(["true"], "not below", {"OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
usage_error(["true"], "SLURM_STEP_TASKS_PER_NODE", {"SLURM_LOCALID": "0", "SLURM_STEP_TASKS_PER_NODE": "2(x"})
usage_error(["--local-rank", "3", "--local-size", "2", "true"], "not below")
usage_error(["--topology", "/nonexistent/node.xml", "true"], "/nonexistent/node.xml")
with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
    f.write("<?xml version='1.0'?><topology><object type='Machine'")
bad_xml = f.name
usage_error(["--topology", bad_xml, "true"], "does not load")
# an hwloc 3 export (from hwloc's own tests) and files that are no export: one line saying why
usage_error(["--topology", os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                                        "hwloc3-cxlmem-dax.v3.xml"), "true"],
            "is hwloc XML format version 3.0, which hwloc ")
for text, needle in [("", "is empty"), ("not xml at all\n", "is not XML"),
                     ("<?xml version='1.0'?><svg/>", "without a <topology> element")]:
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(text)
    usage_error(["--topology", f.name, "true"], needle)
    os.unlink(f.name)
usage_error(["--topology", dgx2, "--gpus-per-rank", "17", "true"], "--gpus-per-rank 17 is larger than the 16 GPUs")
usage_error(["--topology", aws, "--local-rank", "0", "--local-size", "9", "--ranks-per-gpu", "1", "true"], "needs 9 GPUs, 8 here")
usage_error(["--gpus-per-rank", "2", "--ranks-per-gpu", "2", "true"], "conflict")
usage_error(["-v"], "no program")
usage_error(["true"], "GPURUN_POLICY", {"GPURUN_POLICY": "x"})
with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
    f.write("policy = spread\nnot-a-key = 1\n")
usage_error(["--config", f.name, "true"], ":2: unknown key 'not-a-key'")
os.unlink(f.name)

# the program: missing, not executable, and its exit status passed through (exec, no shell)
r = run(["--", "/nonexistent/prog"])
check(r.returncode == 127 and "cannot execute /nonexistent/prog" in r.stderr, "missing program: 127")
r = run(["--", "no-such-program-anywhere"])
check(r.returncode == 127, "program not on PATH: 127")
with tempfile.NamedTemporaryFile("w", delete=False) as f:
    f.write("#!/bin/sh\nexit 0\n")
os.chmod(f.name, stat.S_IRUSR | stat.S_IWUSR)
r = run(["--", f.name])
check(r.returncode == 126 and "Permission denied" in r.stderr, "non-executable program: 126 (%d)" % r.returncode)
os.unlink(f.name)
r = run(["--", "sh", "-c", "exit 7"])
check(r.returncode == 7, "program's exit status passed through")
r = run(["sh", "-c", 'test "$PPID" = "$GPURUN_TEST_PPID"'], {"GPURUN_TEST_PPID": str(os.getpid())})
check(r.returncode == 0, "gpurun execs: the program's parent is gpurun's parent")

# --time-limit and --monitor start the supervisor beside the program (monitor/supervise.c); the
# program still replaces gpurun, so its status is its own: sleep killed by the limit's SIGTERM
# (it was 124 while the supervisor was the program's parent)
r = run(["--time-limit", "1", "--", "sleep", "30"], timeout=25)
check(r.returncode == -15 and "ended by the time limit" in r.stderr, "--time-limit 1 ends sleep 30 with SIGTERM (%d)" % r.returncode)
with tempfile.TemporaryDirectory() as mdir:
    r = run(["--monitor=0.1", "--", "sh", "-c", 'test "$PPID" = "$GPURUN_TEST_PPID"'],
            {"GPURUN_TEST_PPID": str(os.getpid()), "GPURUN_MONITOR_DIR": mdir})
    check(r.returncode == 0, "--monitor: the program's parent is still gpurun's parent")
with tempfile.TemporaryDirectory() as mdir:
    r = run(["--monitor=0.1", "--", "sh", "-c", "sleep 0.4; exit 3"], {"GPURUN_MONITOR_DIR": mdir})
    csvs = [os.path.join(dp, f) for dp, _, fs in os.walk(mdir) for f in fs if f.endswith(".csv")]
    check(r.returncode == 3 and len(csvs) == 1, "--monitor: exit status passed through, one CSV (%d, %s)" % (r.returncode, csvs))
    rows = open(csvs[0]).read().splitlines() if csvs else []
    check(len(rows) >= 3, "--monitor=0.1 for 0.4 s samples at least twice (%d rows)" % (len(rows) - 1))
usage_error(["--time-limit", "soon", "true"], "--time-limit: expected seconds")
usage_error(["--monitor=-1", "true"], "expected an interval")

# dry runs on a recorded node, options from all three sources
r = run(["--topology", aws, "--local-rank", "1", "--local-size", "8", "--dry-run", "--format", "json"])
d = json.loads(r.stdout)
check(r.returncode == 0 and d["local_size"] == 8 and len(d["ranks"]) == 1 and d["ranks"][0]["local_rank"] == 1,
      "--dry-run prints this rank only")
check(d["ranks"][0]["gpus"][0]["pci"] == "0000:19:00.0" and d["ranks"][0]["nic"] == "rdmap197s0",
      "g4dn rank 1: second T4 (0000:19:00.0), EFA NIC")
check(d["ranks"][0]["env"]["UCX_NET_DEVICES"] == "rdmap197s0:1", "UCX_NET_DEVICES device:port")
with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
    f.write("# test\npolicy = spread\nsmt = yes\ngpus-per-rank = 2\n")
r = run(["--config", f.name, "--smt=no", "--local-rank", "0", "--local-size", "4", "--dry-run", "--format", "json"],
        {"GPURUN_TOPOLOGY": aws, "GPURUN_GPUS_PER_RANK": "4"})
d = json.loads(r.stdout)
check(r.returncode == 0 and d["policy"] == "spread" and d["smt"] is False and len(d["ranks"][0]["gpus"]) == 4
      and d["topology"] == aws, "config < GPURUN_* < argv, GPURUN_TOPOLOGY")
os.unlink(f.name)
r = run(["--topology", aws, "--local-rank", "0", "--local-size", "8", "--ranks-per-gpu", "4", "-v", "--", "true"])
check(r.returncode == 0 and "MPS 25%" in r.stderr and "0000:18:00.0" in r.stderr, "-v shows the MPS share")
r = run(["--topology", dgx2, "--all", "--topo", "--local-rank", "0", "--local-size", "4"])
check(r.returncode == 0 and sum(l.startswith("  GPU ") for l in r.stdout.splitlines()) == 16 and "rank 3" in r.stdout, "--topo draws every GPU and rank")

# --help and the man page document the same options
r = run(["--help"])
opts = sorted(set(re.findall(r"--([a-z][a-z-]+)", r.stdout)))
man = open(manpage).read().replace("\\-", "-")
check(r.returncode == 0 and len(opts) >= 15, "--help lists the options (%d)" % len(opts))
missing = [o for o in opts if "--" + o not in man]
check(not missing, "man page documents every option (missing: %s)" % missing)
for v in ["GPURUN_LOCAL_RANK", "GPURUN_LOCAL_SIZE", "GPURUN_GPUS", "GPURUN_CPUS", "GPURUN_NUMA", "GPURUN_NIC",
          "GPURUN_PLAN_VERSION"]:
    check(v in man, "man page documents " + v)
r = run(["--version"])
check(r.returncode == 0 and r.stdout.startswith("gpurun "), "--version")
os.unlink(bad_xml)
print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
