#!/usr/bin/python3
"""Run every command block of one docs/guide page and compare the output it shows.

usage: run_guide.py SOURCE_DIR BUILD_DIR PAGE.md [--print]

Conventions (docs/guide/README.md, "How the guide is tested", says the same to writers):

* A fenced block whose info string starts with ``sh`` is a command block. It runs, in page order,
  in one bash process per page (so a block sees the variables and the current directory the blocks
  before it left), with `set -e -o pipefail`: the block passes when every command in it succeeds.
  A command meant to fail is written `cmd || echo "exit $?"`, which also shows its status.
* ``sh skip="REASON"`` blocks are not run; the runner reports them as skipped with the reason.
* A ``text`` block that follows a command block (nothing but blank lines between) is the output
  the command printed (stdout and stderr together). The runner compares it with the real output
  by shape: in both, this machine's host name and the recorded one (`host="NAME"` on the text
  block, default `vm`) become HOST, paths under /tmp become TMP, hexadecimal runs of 8 or more
  digits HEX, every number #, runs of blanks one blank. A line `...` stands for any number of
  lines. ``text order=any`` compares the lines as sets, for output of several ranks that
  interleaves. Text blocks marked ``text alt`` right after it are other shapes the output may
  take (a race the page explains); the output must match one of them. The test fails when the
  shape differs.
* ``c``, ``python``, ``yaml`` and other blocks are not run here; the pages run them through a
  command block (files under docs/guide/files/).
* A page may start with `<!-- guide: fixture=slurm -->`: before its blocks the runner starts the
  private localhost Slurm cluster of tests/slurm/lib/slurm-cluster.sh (4 GPUs, 8 CPUs) and stops
  it after, so `sbatch`, `srun` and `squeue` in the page reach a real Slurm.

The blocks run in a scratch directory that looks like the repository root: symbolic links to the
top-level folders the pages read (SCRATCH_LINKS: configs, docs, examples, ...) and `build`
pointing at BUILD_DIR, so `build/examples/sim/sim` and `configs/...` work, and files the blocks
write (job directories, outputs) stay out of the checkout. Nothing is put on PATH:
the pages put `build/launcher`, `build/tools/report` and `build/tools/top` on PATH
themselves, as a reader does (docs/guide/start.md). The runner removes the Open MPI root
variables (OMPI_ALLOW_RUN_AS_ROOT*) and the oversubscription default from the environment that
ctest gives the tests, so a page that runs mpirun as root must set them as a reader would.
"""
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(\s*)(`{3,})(.*)$")
RECORDED_HOST = "vm"
PAGE_TIMEOUT_S = 170


def parse_info(info):
    """'sh skip="needs a GPU" x=1' -> ('sh', {'skip': 'needs a GPU', 'x': '1'})."""
    try:
        words = shlex.split(info)
    except ValueError as e:
        raise SystemExit(f"run_guide: bad fence info '{info}': {e}")
    if not words:
        return "", {}
    attrs = {}
    for w in words[1:]:
        k, _, v = w.partition("=")
        attrs[k] = v
    return words[0], attrs


def blocks_of(path):
    """The fenced blocks of a page: (line, lang, attrs, text) in order."""
    out = []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, info = m.groups()
        lang, attrs = parse_info(info.strip())
        start = i + 1
        body = []
        i += 1
        while i < len(lines):
            m2 = FENCE.match(lines[i])
            if m2 and m2.group(2) == ticks and not m2.group(3).strip():
                break
            ln = lines[i]
            body.append(ln[len(indent):] if ln.startswith(indent) else ln.lstrip())
            i += 1
        if i >= len(lines):
            raise SystemExit(f"run_guide: {path}:{start}: fence never closed")
        out.append({"line": start, "lang": lang, "attrs": attrs, "text": "\n".join(body),
                    "end": i})
        i += 1
    # Pair each command block with a text block right after it.
    for k, b in enumerate(out):
        b["expect"] = None
        if b["lang"] != "sh" or k + 1 >= len(out):
            continue
        nxt = out[k + 1]
        between = lines[b["end"] + 1:nxt["line"] - 1]
        if nxt["lang"] == "text" and all(not s.strip() for s in between):
            b["expect"] = nxt
            # Further text blocks marked alt, each right after the previous one: other shapes
            # the output may take (a race the page explains).
            b["alts"] = []
            j = k + 2
            while (j < len(out) and out[j]["lang"] == "text" and "alt" in out[j]["attrs"]
                   and all(not s.strip() for s in lines[out[j - 1]["end"] + 1:out[j]["line"] - 1])):
                b["alts"].append(out[j])
                j += 1
    return out


def normalise(text, hosts):
    res = []
    for ln in text.split("\n"):
        for h in hosts:
            if h:
                ln = re.sub(r"(?<![A-Za-z0-9_.-])" + re.escape(h) + r"(?![A-Za-z0-9_-])", "HOST", ln)
        ln = re.sub(r"/tmp/[^\s'\",:)]*", "TMP", ln)
        ln = re.sub(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", "HEX", ln)
        ln = re.sub(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", "#", ln)
        ln = re.sub(r"#([,-]#)+", "#", ln)  # lists and ranges of cores, GPUs, ranks
        ln = re.sub(r"\s+", " ", ln).strip()
        res.append(ln)
    while res and not res[-1]:
        res.pop()
    while res and not res[0]:
        res.pop(0)
    return res


def match_lines(want, got):
    """want may hold '...' lines (any number of lines); True when got fits."""
    memo = {}

    def m(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(want):
            r = j == len(got)
        elif want[i] == "...":
            r = any(m(i + 1, k) for k in range(j, len(got) + 1))
        else:
            r = j < len(got) and want[i] == got[j] and m(i + 1, j + 1)
        memo[key] = r
        return r

    return m(0, 0)


# What the pages read from the checkout; other top-level names (monitor/, the default
# gpurun-monitor/ ...) stay free, so that files the blocks write never land in the source tree.
SCRATCH_LINKS = ("README.md", "bench", "configs", "docs", "examples", "include", "launcher",
                 "python", "scripts", "tests")


def make_scratch(src, build):
    d = tempfile.mkdtemp(prefix="gr-guide.")
    for name in SCRATCH_LINKS:
        if os.path.exists(os.path.join(src, name)):
            os.symlink(os.path.join(src, name), os.path.join(d, name))
    os.symlink(build, os.path.join(d, "build"))
    return d


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show = "--print" in sys.argv
    if len(args) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    src, build, page = (os.path.abspath(a) for a in args)
    text = open(page, encoding="utf-8").read()
    fixture = None
    m = re.match(r"\s*<!--\s*guide:\s*fixture=(\w+)\s*-->", text)
    if m:
        fixture = m.group(1)
        if fixture != "slurm":
            print(f"run_guide: {page}: unknown fixture '{fixture}'", file=sys.stderr)
            return 2
    blocks = blocks_of(page)
    cmds = [b for b in blocks if b["lang"] == "sh"]
    if not cmds:
        print(f"run_guide: {page}: no sh block", file=sys.stderr)
        return 1
    scratch = make_scratch(src, build)
    work = tempfile.mkdtemp(prefix="gr-guide-work.")
    try:
        return run_page(src, page, cmds, fixture, scratch, work, show)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def run_page(src, page, cmds, fixture, scratch, work, show):
    rel = os.path.relpath(page, src)
    script = ["set -e -o pipefail", f"cd {shlex.quote(scratch)}"]
    if fixture == "slurm":
        lib = os.path.join(src, "tests/slurm/lib/slurm-cluster.sh")
        script += [f". {shlex.quote(lib)}",
                   f"slurm_cluster_start 4 8 > {shlex.quote(work)}/fixture.log 2>&1 || "
                   f"{{ rc=$?; cat {shlex.quote(work)}/fixture.log; exit $rc; }}"]
    run = []
    for n, b in enumerate(cmds):
        if "skip" in b["attrs"]:
            continue
        run.append(n)
        f = os.path.join(work, f"block{n}.sh")
        with open(f, "w", encoding="utf-8") as fh:
            fh.write(b["text"] + "\n")
        out = shlex.quote(os.path.join(work, f"out{n}"))
        script.append(f"echo {n} > {shlex.quote(work)}/current")
        script.append(f". {shlex.quote(f)} > {out} 2>&1 < /dev/null")
    script.append(f"echo done > {shlex.quote(work)}/current")
    env = dict(os.environ)
    for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
              "OMPI_MCA_rmaps_base_oversubscribe"):
        env.pop(k, None)
    env["HOME"] = work
    # The page's shell leads a process group of its own: whatever its blocks leave running (a
    # job in the background, a timed-out block) is killed with the group when the page ends.
    p = subprocess.Popen(["bash", "-c", "\n".join(script)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        driver_out = p.communicate(timeout=PAGE_TIMEOUT_S)[0].decode(errors="replace")
        rc, timed_out = p.returncode, False
    except subprocess.TimeoutExpired:
        rc, timed_out = -1, True
        os.killpg(p.pid, signal.SIGTERM)
        driver_out = p.communicate()[0].decode(errors="replace")
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    cur = open(os.path.join(work, "current")).read().strip() if os.path.exists(
        os.path.join(work, "current")) else None
    hosts = [socket.gethostname()]
    failed = 0
    for n, b in enumerate(cmds):
        where = f"{rel}:{b['line']}"
        if "skip" in b["attrs"]:
            print(f"SKIP {where}: {b['attrs']['skip'] or 'no reason given'}")
            continue
        outf = os.path.join(work, f"out{n}")
        got = open(outf, encoding="utf-8", errors="replace").read() if os.path.exists(outf) else None
        if got is None:
            print(f"NOT RUN {where}: an earlier block failed")
            failed += 1
            continue
        if show:
            print(f"---- {where}\n{got}----")
        if cur == str(n):
            why = f"timed out after {PAGE_TIMEOUT_S} s" if timed_out else f"exit {rc}"
            print(f"FAIL {where}: the block failed ({why}); its output:\n{got}")
            failed += 1
            continue
        e = b["expect"]
        if e is not None:
            have = normalise(got, hosts + [RECORDED_HOST])
            ok = False
            for shown in [e] + b.get("alts", []):
                want = normalise(shown["text"], [shown["attrs"].get("host", RECORDED_HOST)])
                if shown["attrs"].get("order") == "any":
                    ok = ok or sorted(want) == sorted(have)
                else:
                    ok = ok or match_lines(want, have)
            want = normalise(e["text"], [e["attrs"].get("host", RECORDED_HOST)])
            if not ok:
                print(f"FAIL {where}: output differs in shape from the text block at line "
                      f"{e['line']}\n  shown (normalised):\n    " + "\n    ".join(want) +
                      "\n  printed (normalised):\n    " + "\n    ".join(have) +
                      "\n  printed:\n" + got)
                failed += 1
                continue
        print(f"ok   {where}" + (" (output compared)" if e is not None else ""))
    if cur != "done" and cur is None:
        print(f"FAIL {rel}: the page did not start (exit {rc}):\n{driver_out}")
        failed += 1
    elif driver_out.strip():
        print(f"---- driver output\n{driver_out}")
    if rc != 0 and not failed:
        print(f"FAIL {rel}: the page's shell exited {rc} after its last block:\n{driver_out}")
        failed += 1
    print(f"{rel}: {len(run)} blocks run, {len(cmds) - len(run)} skipped, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
