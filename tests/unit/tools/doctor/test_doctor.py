#!/usr/bin/env python3
"""gpurun-doctor as an operator meets it: verdicts from the fake NVML (an ECC error is a fail and
exit 1, a throttling GPU a warn), every recorded topology offline (no crash, the GPU counts the
topology README states, JSON that parses, live-only checks skipped with their reason), this GPU-less
machine (every GPU check skips with its reason, exit 0), an MPS control daemon of another user,
every text line at most 80 columns, hostile input (garbage or unreadable topology, control
characters in the environment and in paths), usage errors, and --help against the man page.
usage: test_doctor.py DOCTOR FAKE_NVML FAKE_LIBCUDA_DIR MANPAGE TOPO_DIR..."""
import json, os, re, shutil, signal, subprocess, sys, tempfile, time

doctor, fake_nvml, fake_cuda_dir, manpage = sys.argv[1:5]
topo_dirs = sys.argv[5:]
failures = []
if "ASAN_OPTIONS" in os.environ:  # hwloc's PCI plugin leaks (see tests/unit/launcher/test_cli.py)
    os.environ["ASAN_OPTIONS"] += ":detect_leaks=0"
CLEAN = {k: v for k, v in os.environ.items()
         if not k.startswith(("GPURUN_", "GR_FAKE", "CUDA_MPS", "CUDA_VISIBLE"))}

def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)

def run(args, env=None, timeout=30):
    e = dict(CLEAN)
    e.update(env or {})
    return subprocess.run([doctor] + args, capture_output=True, text=True, env=e, timeout=timeout,
                          errors="replace")

def checks_of(out):
    return json.loads(out)["checks"]

def by_name(checks, name):
    return [c for c in checks if c["check"] == name]

def narrow(r, what):
    long = [l for l in r.stdout.splitlines() if len(l) > 80]
    check(not long, "%s: every line at most 80 columns (%s)" % (what, long[:1]))
    check("\x1b" not in r.stdout and "\x1b" not in r.stderr, "%s: no raw escape character" % what)

# The verdict a text line starts with, for each check name, in order.
def text_verdicts(out):
    rows = []
    for l in out.splitlines()[1:]:
        if l[:4] in ("ok  ", "warn", "fail", "skip"):
            rows.append((l[:5].strip(), l[6:15].strip()))
    return rows

GPU_CHECKS = ("nvml", "gpus", "cuda", "persist", "mig")

# ---- this GPU-less machine: every GPU check skips with its reason, exit 0 ----------------------
t0 = time.monotonic()
r = run([])
live_s = time.monotonic() - t0
check(r.returncode == 0, "live, no GPU: exit 0 (got %d: %s)" % (r.returncode, r.stdout + r.stderr))
narrow(r, "live text")
print("     live text run took %.2f s" % live_s)
# ompi_info may take longer than the default 1.5 s on a loaded machine: these runs allow 30 s
SLOW_OK = ["--mpi-timeout", "30"]
rj = run(["--format", "json"] + SLOW_OK)
check(rj.returncode == 0, "live json: exit 0")
doc = json.loads(rj.stdout)
c = doc["checks"]
check(doc["source"] == "live" and doc["ranks"] == 1 and doc["verdict"] in ("ok", "warn"),
      "live json: source live, 1 rank planned, verdict ok/warn (%s)" % doc["verdict"])
for name in ("nvml", "gpus", "cuda"):
    got = by_name(c, name)
    check(len(got) == 1 and got[0]["verdict"] == "skip" and len(got[0]["found"]) > 10,
          "live, no GPU: %s skips with its reason (%s)" % (name, got))
check(not [x for x in c if x["check"].startswith("gpu ")], "live, no GPU: no per-GPU line")
check(by_name(c, "peer")[0]["verdict"] == "skip", "live, no GPU: peer access skips")
for name in ("topology", "binding", "cgroup", "mpi", "net", "plan", "rank 0"):
    check(len(by_name(c, name)) == 1, "live: a %s line" % name)
# The build's MPI family decides which tool describes the MPI (ompi_info, mpichversion)
MPICH = os.environ.get("GPURUN_TEST_BUILD_FAMILY", "openmpi") == "mpich"
TOOL, NAME = ("mpichversion", "MPICH") if MPICH else ("ompi_info", "Open MPI")
check(by_name(c, "mpi")[0]["verdict"] == "ok" and by_name(c, "mpi")[0]["found"].startswith(NAME),
      "live: %s read (%s)" % (TOOL, by_name(c, "mpi")))
cg = open("/proc/self/cgroup").read().splitlines()
v1 = [l for l in cg if not l.startswith("0::")]
check(by_name(c, "cgroup")[0]["found"].startswith("cgroup v%d " % (1 if v1 else 2)),
      "live: the cgroup version of /proc/self/cgroup (%s)" % by_name(c, "cgroup"))
check("of %d CPUs" % os.cpu_count() in by_name(c, "binding")[0]["found"],
      "live: binding counts this machine's %d CPUs" % os.cpu_count())
aff = sorted(os.sched_getaffinity(0))
check(("%d-%d" % (aff[0], aff[-1]) if len(aff) > 1 else str(aff[0])) in by_name(c, "binding")[0]["found"]
      or len(aff) != aff[-1] - aff[0] + 1, "live: binding lists this shell's CPUs")
r = run(SLOW_OK)
check(text_verdicts(r.stdout) == [(x["verdict"], x["check"][:9]) for x in c],
      "text and JSON give the same checks and verdicts in the same order")

# a narrower shell: the binding warns and the plan stays within the mask, as gpurun's does
if len(aff) > 1:
    one = aff[-1]
    e = dict(CLEAN)
    r = subprocess.run([doctor, "--format", "json"], capture_output=True, text=True, env=e,
                       timeout=30, preexec_fn=lambda: os.sched_setaffinity(0, {one}))
    c = checks_of(r.stdout)
    check(by_name(c, "binding")[0]["verdict"] == "warn" and
          by_name(c, "binding")[0]["found"].endswith("CPUs: %d" % one),
          "a shell bound to CPU %d: the binding warns (%s)" % (one, by_name(c, "binding")))
    check("1 core %d " % one in by_name(c, "rank 0")[0]["found"] and
          any("inherited CPU mask %d" % one in x["found"] for x in by_name(c, "plan")),
          "a shell bound to CPU %d: the plan stays within it (%s)" % (one, by_name(c, "rank 0")))

# ---- the fake NVML: ECC fail, throttling warn, MIG ---------------------------------------------
fake = {"GPURUN_NVML_LIBRARY": fake_nvml, "GR_FAKE_NVML": "node4",
        "LD_LIBRARY_PATH": fake_cuda_dir + ":" + os.environ.get("LD_LIBRARY_PATH", "")}
r = run([], fake)
narrow(r, "fake NVML text")
check(r.returncode == 1, "fake NVML node4: exit 1 (got %d)" % r.returncode)
c = checks_of(run(["--format", "json"], fake).stdout)
g = {x["check"]: x for x in c}
check(g.get("nvml", {}).get("verdict") == "ok" and "4 GPUs" in g["nvml"]["found"],
      "fake NVML: loaded, 4 GPUs (%s)" % g.get("nvml"))
check(g.get("gpu 0", {}).get("verdict") == "ok" and "healthy" in g["gpu 0"]["found"],
      "fake NVML: GPU 0 healthy (%s)" % g.get("gpu 0"))
check(g.get("gpu 1", {}).get("verdict") == "fail" and "ECC" in g["gpu 1"]["found"] and
      g["gpu 1"]["advice"], "fake NVML: GPU 1's ECC errors are a fail with advice (%s)" % g.get("gpu 1"))
check(g.get("gpu 2", {}).get("verdict") == "warn" and "slowdown" in g["gpu 2"]["found"] and
      "92 C" in g["gpu 2"]["found"], "fake NVML: GPU 2 throttling is a warn (%s)" % g.get("gpu 2"))
check(g.get("gpu 3", {}).get("verdict") == "ok", "fake NVML: GPU 3 (MIG) healthy")
check(g.get("mig", {}).get("verdict") == "ok" and "GPU 3" in g["mig"]["found"],
      "fake NVML: MIG on for GPU 3 (%s)" % g.get("mig"))
check(g.get("cuda", {}).get("verdict") in ("ok", "warn") and "driver supports CUDA 13.0" in g["cuda"]["found"],
      "fake driver: CUDA driver version read (%s)" % g.get("cuda"))
fails = [x["check"] for x in c if x["verdict"] == "fail"]
check(fails == ["gpu 1"], "fake NVML: the ECC GPU is the only fail (%s)" % fails)
# without the driver the same GPUs are a CUDA fail: NVML sees GPUs that CUDA cannot use
nodrv = dict(fake)
del nodrv["LD_LIBRARY_PATH"]
c = checks_of(run(["--format", "json"], nodrv).stdout)
check(by_name(c, "cuda")[0]["verdict"] == "fail" and "libcuda.so.1" in by_name(c, "cuda")[0]["found"],
      "fake NVML without a driver: cuda fails naming libcuda.so.1 (%s)" % by_name(c, "cuda"))
# a missing NVML library is named
c = checks_of(run(["--format", "json"], {"GPURUN_NVML_LIBRARY": "/nonexistent/libnvml.so"}).stdout)
check("/nonexistent/libnvml.so" in by_name(c, "nvml")[0]["found"], "a missing NVML is named")

# ---- MPI: a CUDA-aware Open MPI, one that hangs (killed at the deadline), none at all -----------
tmp = tempfile.mkdtemp(prefix="doctor-")
os.chmod(tmp, 0o755)
def fake_tool(folder, name, body):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
if MPICH:
    fake_tool(os.path.join(tmp, "cuda-mpi"), "mpichversion",
              "printf 'MPICH Version:\\t9.9.9\\nMPICH Device:\\tch4:ofi\\n"
              "MPICH configure:\\t--prefix=/x --with-cuda=/usr/local/cuda\\n'\n")
    want = "MPICH 9.9.9, device ch4:ofi"
else:
    fake_tool(os.path.join(tmp, "cuda-mpi"), "ompi_info",
              "echo ompi:version:full:9.9.9\necho 'mca:btl:smcuda:version:\"mca:2.1.0\"'\n"
              "echo 'mca:pml:ob1:version:\"mca:2.1.0\"'\n")
    want = "Open MPI 9.9.9, pml ob1, btl smcuda"
m = by_name(checks_of(run(["--format", "json"], {"PATH": os.path.join(tmp, "cuda-mpi")}).stdout), "mpi")[0]
check(m["verdict"] == "ok" and want in m["found"] and
      "CUDA-aware yes" in m["found"] and not m["advice"], "a CUDA-aware %s is read as such (%s)" % (NAME, m))
# the other family's tool alone on PATH: a warning that names it
other = "ompi_info" if MPICH else "mpichversion"
fake_tool(os.path.join(tmp, "other-mpi"), other, "exit 0\n")
m = by_name(checks_of(run(["--format", "json"], {"PATH": os.path.join(tmp, "other-mpi")}).stdout), "mpi")[0]
check(m["verdict"] == "warn" and "this gpurun is built for %s, but the MPI on PATH is" % NAME in m["found"],
      "the other MPI family on PATH: a warn naming both (%s)" % m)
pidfile = os.path.join(tmp, "hung.pid")
fake_tool(os.path.join(tmp, "hung-mpi"), TOOL, "echo $$ > %s\nexec sleep 30\n" % pidfile)
t0 = time.monotonic()
r = run(["--format", "json", "--mpi-timeout", "0.3"], {"PATH": os.path.join(tmp, "hung-mpi") + ":/usr/bin:/bin"})
dt = time.monotonic() - t0
m = by_name(checks_of(r.stdout), "mpi")[0]
check(m["verdict"] == "warn" and "did not finish within 0.3 s" in m["found"] and dt < 5,
      "a hung %s: a warn after 0.3 s (%.2f s: %s)" % (TOOL, dt, m))
hung = int(open(pidfile).read()) if os.path.exists(pidfile) else -1
try:
    os.kill(hung, 0)
    gone = False
except (ProcessLookupError, OverflowError, ValueError):
    gone = hung > 0
check(gone, "the hung %s (pid %d) is killed, not left behind" % (TOOL, hung))
m = by_name(checks_of(run(["--format", "json"], {"PATH": os.path.join(tmp, "empty-path")}).stdout), "mpi")[0]
check(m["verdict"] == "warn" and "no MPI on PATH" in m["found"], "no MPI on PATH: a warn (%s)" % m)

# ---- MPS: a control daemon of another user ------------------------------------------------------
mps = os.path.join(tmp, "nvidia-cuda-mps-control")
shutil.copy("/bin/sleep", mps)
os.chmod(mps, 0o755)
def as_nobody():
    os.setgid(65534)
    os.setuid(65534)
p = subprocess.Popen([mps, "60"], preexec_fn=as_nobody if os.getuid() == 0 else None)
try:
    time.sleep(0.1)
    c = checks_of(run(["--format", "json"]).stdout)
    m = by_name(c, "mps")[0]
    if os.getuid() == 0:
        check(m["verdict"] == "warn" and "pid %d" % p.pid in m["found"] and "nobody" in m["found"],
              "MPS daemon of user nobody: a warn naming its pid and user (%s)" % m)
    else:
        check("pid %d" % p.pid in m["found"], "MPS daemon: named by pid (%s)" % m)
finally:
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
c = checks_of(run(["--format", "json"] + SLOW_OK, {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/x\x1b[31mred"}).stdout)
m = by_name(c, "mps")[0]
check(m["verdict"] == "warn" and "\x1b[31mred" in m["found"],
      "no daemon but CUDA_MPS_PIPE_DIRECTORY set: a warn quoting it (JSON carries it escaped)")
r = run([], {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/x\x1b[31mred"})
narrow(r, "hostile CUDA_MPS_PIPE_DIRECTORY")
check("\\x1b[31mred" in r.stdout, "the terminal sees the escape character as \\x1b")

# ---- every recorded topology offline ------------------------------------------------------------
# GPU counts as configs/topologies/README.md gives them
EXPECT = {"hwloc-nvidia-dgx2.xml": 16, "hwloc-power8-minsky-4xP100.xml": 4,
          "mpibind-lassen-p9-4xV100.xml": 4, "mpibind-aws-g4dn-metal-8xT4.xml": 8,
          "mpibind-pascal-2xP100.xml": 2, "flux-tuolumne-4xMI300A-SPX.xml": 4}
LIVE_ONLY = ("nvml", "cuda", "nccl", "gpus", "mps", "links", "mpi", "binding", "cgroup")
seen = 0
for d in topo_dirs:
    if not os.path.isdir(d):
        continue
    for f in sorted(os.listdir(d)):
        if not f.endswith(".xml"):
            continue
        path = os.path.join(d, f)
        seen += 1
        t0 = time.monotonic()
        r = run(["--topology", path])
        dt = time.monotonic() - t0
        check(r.returncode in (0, 1) and r.stderr == "",
              "%s: ran (exit %d, %.2f s) %s" % (f, r.returncode, dt, r.stderr.strip()))
        narrow(r, f)
        rj = run(["--topology", path, "--format", "json"])
        try:
            doc = json.loads(rj.stdout)
        except ValueError as e:
            check(False, "%s: JSON parses (%s)" % (f, e))
            continue
        jt = subprocess.run([sys.executable, "-m", "json.tool"], input=rj.stdout, text=True,
                            capture_output=True)
        check(jt.returncode == 0, "%s: python3 -m json.tool accepts it" % f)
        c = doc["checks"]
        topo = by_name(c, "topology")[0]["found"]
        ngpu = int(topo.split(" GPUs")[0].rsplit(" ", 1)[1])
        if f in EXPECT:
            check(ngpu == EXPECT[f], "%s: %d GPUs (README: %d)" % (f, ngpu, EXPECT[f]))
        else:
            check(0 <= ngpu <= 1024, "%s: a sane GPU count (%d)" % (f, ngpu))
        check(doc["ranks"] == max(ngpu, 1) and len(by_name(c, "rank %d" % (min(ngpu, 16) - 1))) == 1
              if ngpu else doc["ranks"] == 1,
              "%s: the plan covers %d ranks by default" % (f, max(ngpu, 1)))
        skipped = [x for x in c if x["check"] in LIVE_ONLY]
        check(len(skipped) == len(LIVE_ONLY) and
              all(x["verdict"] == "skip" and "live-only" in x["found"] for x in skipped),
              "%s: every live-only check skips with its reason" % f)
        check(doc["source"] == path, "%s: source names the file" % f)
        if ngpu >= 2:
            peer = by_name(c, "peer")[0]
            pairs = int(peer["found"].split(" GPU pairs")[0])
            check(peer["verdict"] == "ok" and pairs == ngpu * (ngpu - 1) // 2,
                  "%s: peer access over all %d pairs" % (f, ngpu * (ngpu - 1) // 2))
check(seen >= 6, "ran every recorded topology (%d)" % seen)
# something the offline checks must find: the DGX-2's NVLink, Lassen's four NICs near their GPUs
d0 = topo_dirs[0]
c = checks_of(run(["--topology", os.path.join(d0, "hwloc-nvidia-dgx2.xml"), "--format", "json"]).stdout)
check(": 56 NVLink" in by_name(c, "peer")[0]["found"],
      "DGX-2: the 2 x 28 pairs on each board over NVLink (the recording has no switch-switch links) (%s)"
      % by_name(c, "peer"))
c = checks_of(run(["--topology", os.path.join(d0, "mpibind-lassen-p9-4xV100.xml"), "--format", "json"]).stdout)
check(by_name(c, "nics")[0]["found"].startswith("4 high-speed NICs"), "Lassen: 4 NICs")
check(by_name(c, "gpu-nic")[0]["verdict"] == "ok", "Lassen: every GPU has a near NIC (%s)" % by_name(c, "gpu-nic"))
# the near NICs the doctor lists are the ones the plan picks from: each rank's NIC is among its GPU's
near = {}
for item in by_name(c, "gpu-nic")[0]["found"].split(": ", 1)[1].split():
    g, nics = item.split(":")
    near[g] = nics.replace("(switch)", "").split(",")
for k in range(4):
    m = re.match(r"GPU (\d+), .* NIC (\S+)", by_name(c, "rank %d" % k)[0]["found"])
    check(m is not None and m.group(2) in near.get(m.group(1), []),
          "Lassen: rank %d's NIC is one the doctor lists near its GPU (%s; near %s)"
          % (k, by_name(c, "rank %d" % k), near))
r = run(["--topology", os.path.join(d0, "mpibind-aws-g4dn-metal-8xT4.xml"), "-n", "40"])
check(r.returncode in (0, 1) and "rank 15" in r.stdout and "rank 16 " not in r.stdout and "ranks 16-39" in r.stdout,
      "-n 40: 16 rank lines and a summary")
narrow(r, "-n 40")

# ---- hostile input and usage --------------------------------------------------------------------
def refused(args, needle, what, code=2):
    r = run(args)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == code and len(lines) == 1 and needle in r.stderr and r.stdout == "",
          "%s: exit %d, one sentence with %r (got %d: %r)" % (what, code, needle, r.returncode, r.stderr))
    check("\x1b" not in r.stderr, "%s: no raw escape character" % what)
garbage = os.path.join(tmp, "garbage.xml")
with open(garbage, "wb") as fh:
    fh.write(b"<?xml version='1.0'?>\n<topology><object type=\"Machine\"><<<\x00\xff garbage")
refused(["--topology", garbage], "is not XML", "garbage topology")
empty = os.path.join(tmp, "empty.xml")
open(empty, "w").close()
refused(["--topology", empty], "is empty", "empty topology")
refused(["--topology", os.path.join(tmp, "missing.xml")], "missing.xml", "missing topology")
refused(["--topology", tmp], "not a regular file", "a directory as topology")
fifo = os.path.join(tmp, "fifo.xml")
os.mkfifo(fifo)
refused(["--topology", fifo], "not a regular file", "a FIFO as topology (not waited on)")
evil = os.path.join(tmp, "e\x1b[2Jvil.xml")
open(evil, "w").write("not xml")
refused(["--topology", evil], "vil.xml", "a topology name with an escape sequence")
refused(["--bogus"], "unknown option", "unknown option")
refused(["-n", "0"], "rank count", "-n 0")
refused(["-n", "12x"], "rank count", "-n 12x")
refused(["-n"], "needs a value", "-n without a value")
refused(["--format", "xml"], "neither text nor json", "--format xml")
refused(["--topology="], "needs a file", "--topology=")
refused(["--mpi-timeout", "0"], "number of seconds", "--mpi-timeout 0")
refused(["--mpi-timeout=nan"], "number of seconds", "--mpi-timeout=nan")
r = run(["--help"])
check(r.returncode == 0 and "usage: gpurun-doctor" in r.stdout, "--help: usage, exit 0")
man = open(manpage).read()
for opt in ("--format", "--topology", "-n", "--mpi-timeout", "--help"):
    check(opt in r.stdout and opt.replace("-", "\\-") in man, "%s in --help and the man page" % opt)
shutil.rmtree(tmp)

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("all passed")
