#!/usr/bin/env python3
"""gpurun-top on a terminal (a pty) whose job's files, then job directory, are removed while it
watches: the frame must say so instead of drawing an empty job; q still quits. --once on the
removed directory: exit 1 with one sentence naming it.
usage: test_top_gone.py GPURUN_TOP"""
import fcntl, os, select, shutil, struct, subprocess, sys, tempfile, termios, time

top = sys.argv[1]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


d = tempfile.mkdtemp(prefix="gr_top_gone.")
job = os.path.join(d, "job1")
os.mkdir(job, 0o700)
with open(os.path.join(job, "live.0"), "w") as f:
    f.write("gpurun-live 1\nrank 0\nsize 1\nhost fakehost\npid 999999\nstate running\n"
            "time %.3f\ninterval 0.25\ncpu_pct 50\nrss_kib 2048\n" % time.time())

master, slave = os.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
p = subprocess.Popen([top, "--interval", "0.1", job], stdin=slave, stdout=slave, stderr=slave,
                     close_fds=True, start_new_session=True)
os.close(slave)
seen = b""


def read_until(needle, timeout):
    """reads the pty until needle appears in what came after the last call; True when it did"""
    global seen
    start = len(seen)
    end = time.time() + timeout
    while time.time() < end:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
            if needle in seen[start:]:
                return True
    return False


try:
    check(read_until(b"1 rank (", 10), "the first frame shows the job's rank")
    os.unlink(os.path.join(job, "live.0"))
    check(read_until(b"no rank left: the job's files were removed", 10),
          "after the rank's file is removed, the frame says no rank is left")
    shutil.rmtree(job)
    check(read_until(b"the job directory is gone", 10),
          "after the directory is removed, the frame says it is gone")
    check(read_until(job.encode(), 5), "the frame names the directory")
    os.write(master, b"q")
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, "q quits (exit %r)" % rc)
finally:
    if p.poll() is None:
        p.kill()
        p.wait()
    os.close(master)

r = subprocess.run([top, "--once", job], capture_output=True, text=True, timeout=30)
lines = r.stderr.strip().splitlines()
check(r.returncode == 1 and len(lines) == 1 and job in lines[0] and r.stdout == "",
      "--once on the removed directory: exit 1, one line naming it (got %d: %r)" % (r.returncode, r.stderr))
shutil.rmtree(d, ignore_errors=True)
print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
