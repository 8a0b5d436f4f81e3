"""async_op=True in the gpurun Python package under mpirun: every collective whose non-blocking C
form this libgpurun has, exactly, on NumPy arrays and torch tensors; a request that test() alone
completes (False while a peer has not started, then True); several requests outstanding and
completed in reverse order; completion by the progress thread without wait(); a dropped request
whose buffers live until the C side is done; futures; errors; and NotImplementedError for the
calls whose C form is missing. Expected values come from NumPy. Usage: mpirun -np N gpurun
python3 THIS (N >= 2). GR_PY_NO_TORCH=1 runs it as if torch could not be imported."""
import gc
import os
import sys
import time
import weakref

import numpy as np

if os.environ.get("GR_PY_NO_TORCH") == "1":
    sys.modules["torch"] = None  # import torch now raises ImportError, in gpurun too

import gpurun

try:
    import torch
except ImportError:
    torch = None

# In check mode (GPURUN_CHECK=1) a start exchanges the call's fingerprint with every rank, so it
# returns only once all have started: the cases that hold peers back run without check mode.
CHECK = os.environ.get("GPURUN_CHECK") == "1"
failures = []
w = gpurun.init()
R, N = w.rank, w.size
side = w.split(0)  # a second communicator: signals between ranks while w has requests out


def check(cond, what):
    if not cond:
        failures.append(what)
        print("rank %d: FAIL: %s" % (R, what), flush=True)


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test inspects whatever comes
        return e
    return None


def refused(fn, cls, status, words, what):
    """fn raises cls (with status, for gpurun.Error) whose message holds every word."""
    e = error_of(fn)
    ok = isinstance(e, cls) and all(x in str(e) for x in words)
    if status is not None:
        ok = ok and getattr(e, "status", None) == status
    check(ok, "%s: got %s %r, want %s %s %s" % (what, type(e).__name__, str(e), cls.__name__,
                                                status, words))


def until(cond, seconds=20.0):
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.001)
    return True


def held_back(start):
    """Rank 0 starts a request while every other rank is held back on `side` until rank 0 has
    seen test() say False; then they start theirs. Returns (request, what test() said first on
    rank 0). In check mode every rank starts at once (first is None)."""
    if CHECK:
        return start(), None
    flag = np.zeros(1, np.int32)
    if R == 0:
        r = start()
        first = r.test()
        for p in range(1, N):
            side.send(np.ones(1, np.int32), p)
        return r, first
    side.recv(flag, 0)
    return start(), False


def inputs(n, r, dt="float64"):
    return ((np.arange(n) * 3 + r * 5) % 7 + 1).astype(dt)


AVAILABLE = [c for c, f in gpurun._IFORMS.items() if f is not None]
MISSING = [c for c, f in gpurun._IFORMS.items() if f is None]
if R == 0:
    print("rank 0: C non-blocking forms present for %s; missing for %s" % (
        ", ".join(AVAILABLE), ", ".join(MISSING) or "none"), flush=True)


# ---- exact results of every available async collective -----------------------------------
def suite(make, to_np, dt, label):
    n = 2 * N + 3
    xs = [inputs(n, r) for r in range(N)]
    x = make(xs[R], dt)
    k = 3
    ys = [inputs(N * k, r + 1) for r in range(N)]
    if "allreduce" in AVAILABLE:
        for op, f in {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}.items():
            if op == "prod" and N > 2 and dt in ("uint8", "float16"):
                continue  # 7^3 leaves their exact range
            r = w.allreduce(x, op=op, async_op=True)
            check(isinstance(r, gpurun.Request), "%s %s allreduce gives a Request" % (label, dt))
            y = r.wait()
            check(np.array_equal(to_np(y), f(np.stack(xs), axis=0)),
                  "%s %s iallreduce %s" % (label, dt, op))
            check(r.wait() is y and r.test() is True, "%s %s wait() again, test()" % (label, dt))
        if dt.startswith("float"):
            y = w.allreduce(x, op="avg", async_op=True).wait()
            check(np.allclose(to_np(y), np.mean(np.stack(xs), axis=0), rtol=1e-2),
                  "%s %s iallreduce avg" % (label, dt))
        z = make(xs[R], dt)
        check(w.allreduce(z, op="max", out=z, async_op=True).wait() is z and
              np.array_equal(to_np(z), np.max(np.stack(xs), axis=0)),
              "%s %s iallreduce in place" % (label, dt))
        o = make(np.zeros(n), dt)
        check(w.allreduce(x, out=o, async_op=True).wait() is o and
              np.array_equal(to_np(o), np.sum(np.stack(xs), axis=0)),
              "%s %s iallreduce out=" % (label, dt))
    if "allreduce_multi" in AVAILABLE:
        ms = [[inputs(c, r + i) for r in range(N)] for i, c in enumerate([n, 0, 4])]
        parts = [make(m[R], dt) for m in ms]
        r = w.allreduce_multi(parts, op="max", async_op=True)
        for p in parts:  # the sends are packed at the start: reusable at once
            p[...] = 0
        got = r.wait()
        check(len(got) == 3 and all(np.array_equal(to_np(g), np.max(np.stack(m), axis=0))
                                    for g, m in zip(got, ms)),
              "%s %s iallreduce_multi, sends reused after the start" % (label, dt))
        parts = [make(m[R], dt) for m in ms]
        got = w.allreduce_multi(parts, out=parts, async_op=True).wait()
        check(all(g is p for g, p in zip(got, parts)) and all(
            np.array_equal(to_np(p), np.sum(np.stack(m), axis=0)) for p, m in zip(parts, ms)),
            "%s %s iallreduce_multi in place" % (label, dt))
    if "broadcast" in AVAILABLE:
        b = make(xs[R], dt)
        check(w.broadcast(b, root=N - 1, async_op=True).wait() is b and
              np.array_equal(to_np(b), xs[N - 1]), "%s %s ibroadcast" % (label, dt))
    if "allgather" in AVAILABLE:
        g = w.allgather(x, async_op=True).wait()
        check(np.array_equal(to_np(g), np.concatenate(xs)), "%s %s iallgather" % (label, dt))
    if "reduce" in AVAILABLE:
        red = w.reduce(x, op="sum", root=N - 1, async_op=True).wait()
        check((red is None) if R != N - 1 else
              np.array_equal(to_np(red), np.sum(np.stack(xs), axis=0)),
              "%s %s ireduce" % (label, dt))
    if "reduce_scatter" in AVAILABLE:
        rs = w.reduce_scatter(make(ys[R], dt), async_op=True).wait()
        check(np.array_equal(to_np(rs), np.sum(np.stack(ys), axis=0)[R * k:(R + 1) * k]),
              "%s %s ireduce_scatter" % (label, dt))
    if "alltoall" in AVAILABLE:
        a = w.alltoall(make(ys[R], dt), async_op=True).wait()
        want_a = np.concatenate([ys[p][R * k:(R + 1) * k] for p in range(N)])
        check(np.array_equal(to_np(a), want_a), "%s %s ialltoall" % (label, dt))
    if "send" in AVAILABLE and "recv" in AVAILABLE:
        got = make(np.zeros(n), dt)
        rr = w.recv(got, (R - 1) % N, async_op=True)
        rq = w.send(x, (R + 1) % N, async_op=True)
        check(rq.wait() is None and rr.wait() is got and
              np.array_equal(to_np(got), xs[(R - 1) % N]), "%s %s isend/irecv ring" % (label, dt))
    if "barrier" in AVAILABLE:
        check(w.barrier(async_op=True).wait() is None, "ibarrier")


for dt in ["uint8", "int32", "int64", "float16", "float32", "float64"]:
    suite(lambda a, dt: np.ascontiguousarray(a.astype(dt)), lambda y: np.asarray(y, np.float64),
          dt, "numpy")
if torch is not None:
    for dt in ["int64", "bfloat16", "float32"]:
        suite(lambda a, dt: torch.tensor(a).to(getattr(torch, dt)),
              lambda y: y.to(torch.float64).numpy(), dt, "torch")
# a big-endian array in place: staged, and written back in its own order when the request ends
be = inputs(5, R).astype(">f4")
if "allreduce" in AVAILABLE:
    r = w.allreduce(be, out=be, async_op=True)
    check(r.wait() is be and be.dtype.str == ">f4" and
          np.array_equal(be, np.sum([inputs(5, p) for p in range(N)], axis=0)),
          "big-endian iallreduce in place, written back at completion")

# ---- missing C forms: NotImplementedError naming the C function, nothing run ---------------
for call in MISSING:
    x = np.ones(6 * N, np.float32)
    args = {"allreduce": (x,), "broadcast": (x,), "reduce": (x,), "allgather": (x,),
            "reduce_scatter": (x,), "alltoall": (x,), "send": (x, (R + 1) % N),
            "recv": (x, (R - 1) % N), "barrier": (), "allreduce_multi": ([x],)}[call]
    refused(lambda: getattr(w, call)(*args, async_op=True), NotImplementedError, None,
            [gpurun._INAMES[call], call + "(async_op=True)"], "%s without its C form" % call)
    check(np.all(x == 1), "%s(async_op=True) wrote nothing" % call)
# the world is still in step: no rank ran a missing form blocking
check(w.allreduce(np.array([R + 1.0]))[0] == N * (N + 1) / 2, "in step after the refusals")

# ---- test() alone completes a request ------------------------------------------------------
gpurun.set_progress_thread(False)
want = np.sum([inputs(8, p) for p in range(N)], axis=0)
r, first = held_back(lambda: w.allreduce(inputs(8, R), async_op=True))
if R == 0 and not CHECK:
    check(first is False, "test() is False while the peers have not started (got %r)" % first)
tests = [0]


def tested():
    tests[0] += 1
    return r.test()


check(until(tested) and r.is_completed(), "test() alone completes the request")
check(np.array_equal(r.wait(), want), "the request test() completed holds the sum")

# ---- several outstanding, completed in reverse order (thread off, then on) ----------------
for thread in (False, True):
    gpurun.set_progress_thread(thread)
    kinds = [c for c in ("allreduce", "broadcast", "allgather", "allreduce") if c in AVAILABLE]
    reqs, wants = [], []
    for i, kind in enumerate(kinds):
        xs = [inputs(4 + i, p) for p in range(N)]
        if kind == "allreduce":
            reqs.append(w.allreduce(xs[R], op="max", async_op=True))
            wants.append(np.max(np.stack(xs), axis=0))
        elif kind == "broadcast":
            reqs.append(w.broadcast(xs[R].copy(), root=i % N, async_op=True))
            wants.append(xs[i % N])
        else:
            reqs.append(w.allgather(xs[R], async_op=True))
            wants.append(np.concatenate(xs))
    got = [None] * len(reqs)
    for i in reversed(range(len(reqs))):
        got[i] = reqs[i].wait()
    check(all(np.array_equal(g, v) for g, v in zip(got, wants)),
          "%d requests of %s completed in reverse order (progress thread %s)"
          % (len(reqs), "/".join(kinds), "on" if thread else "off"))

# ---- the progress thread completes a request nobody waits for; a dropped one's buffers live --
r, _ = held_back(lambda: w.allreduce(inputs(8, R), async_op=True))
check(until(r.is_completed), "the progress thread completes a request without wait() or test()")
check(np.array_equal(r.wait(), want), "... with the sum")
if torch is not None:
    out = torch.zeros(8, dtype=torch.float64)
    r, _ = held_back(lambda: w.allreduce(torch.tensor(inputs(8, R)), out=out, async_op=True))
    alive = weakref.ref(r)
    del r
    gc.collect()
    check(until(lambda: torch.equal(out, torch.tensor(want))),
          "a dropped request still completes into out")
    check(until(lambda: alive() is None), "a completed dropped request is freed")
# a dropped request's input, which only the request holds, lives until the C side is done
src = np.ascontiguousarray(inputs(1 << 16, R))
keep = weakref.ref(src)
if R == 0 and not CHECK:
    r = w.allreduce(src, async_op=True)
    del src, r
    gc.collect()
    check(keep() is not None, "the input of an outstanding dropped request is kept alive")
    for p in range(1, N):
        side.send(np.ones(1, np.int32), p)
else:
    if not CHECK:
        side.recv(np.zeros(1, np.int32), 0)
    r = w.allreduce(src, async_op=True)
    del src, r
check(until(lambda: keep() is None), "... and released once the request is done")

# ---- futures -------------------------------------------------------------------------------
if torch is not None:
    t = torch.tensor(inputs(8, R))
    r = w.allreduce(t, op="sum", out=t, async_op=True)
    f = r.get_future()
    check(isinstance(f, torch.futures.Future) and r.get_future() is f, "get_future(): one Future")
    half = f.then(lambda fut: fut.value() / N)
    check(f.wait() is t and torch.equal(t, torch.tensor(want)), "the future's value is the tensor")
    check(torch.allclose(half.wait(), torch.tensor(want) / N), "then() runs on the value")
    r2 = w.allgather(np.array([R], np.int64), async_op=True)
    r2.wait()
    v = r2.get_future().wait()  # asked for after completion
    check(np.array_equal(v, np.arange(N)), "a future asked for after completion has the value")
    gpurun.set_progress_thread(True)
    r3 = w.allreduce(torch.ones(3), async_op=True)
    check(torch.equal(r3.get_future().wait(), torch.full((3,), float(N))),
          "a future completes without wait() (progress thread)")
else:
    r = w.allreduce(np.ones(2), async_op=True)
    refused(r.get_future, ImportError, None, ["torch", "get_future", "wait()"],
            "get_future without torch")
    r.wait()

# ---- errors --------------------------------------------------------------------------------
def start_then_wait(fn):
    return lambda: fn().wait()


refused(start_then_wait(lambda: w.allreduce(np.ones(4, np.int32), op="avg", async_op=True)),
        gpurun.Error, "GR_ERR_INVALID", ["rank", "gr_iallreduce", "avg"],
        "a refused iallreduce (avg on int32) raises the C sentence")
refused(start_then_wait(lambda: w.broadcast(np.ones(4), root=N, async_op=True)), gpurun.Error,
        "GR_ERR_INVALID", ["gr_ibroadcast", "root"], "a refused ibroadcast (root out of range)")
refused(lambda: w.allreduce(np.ones(4), op="median", async_op=True), gpurun.Error,
        "GR_ERR_INVALID", ["allreduce", "median"], "an unknown op, as in the blocking form")
refused(lambda: w.allreduce(np.ones(4), async_op="yes"), gpurun.ArgumentTypeError,
        "GR_ERR_INVALID", ["async_op"], "async_op that is not a bool")
if CHECK:
    refused(start_then_wait(lambda: w.allreduce(np.ones(4 + R), async_op=True)), gpurun.Error,
            "GR_ERR_MISMATCH", ["allreduce"], "counts that differ across ranks")
with gpurun.group():
    refused(lambda: w.allreduce(np.ones(2), async_op=True), gpurun.Error, "GR_ERR_STATE",
            ["group"], "async_op=True inside a group")
check(w.allreduce(np.ones(2), async_op=True).wait()[0] == N, "usable after the errors")

# ---- the blocking forms still work beside outstanding requests; finalize completes them ----
r = w.allreduce(np.full(3, 2.0), async_op=True)
check(w.allreduce(np.ones(3))[0] == N, "a blocking call while a request is outstanding")
check(r.wait()[0] == 2.0 * N, "... and the request")
side.free()
last = w.allreduce(np.ones(2), async_op=True)  # left for finalize to complete
gpurun.finalize()
check(last.is_completed() and last.wait()[0] == N, "finalize completes outstanding requests")
print("rank %d: %d failure(s)" % (R, len(failures)), flush=True)
sys.exit(1 if failures else 0)
