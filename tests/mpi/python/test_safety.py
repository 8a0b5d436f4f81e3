"""The gpurun Python package refuses what it cannot do right, and does exactly what it accepts:
arrays in the other byte order (converted for the call, written back in the caller's order),
masked arrays (refused), in-place writes into tensors autograd tracks (torch's own errors, computed
here from torch itself, and a version bump where the write is allowed), lazily negated views,
tensors gpurun cannot reach, non-integer ranks, 0-d arrays, and nested groups. Every expected
value comes from NumPy or torch. Usage: mpirun -np N gpurun python3 THIS (N >= 2)."""
import os
import sys
import tempfile

import numpy as np

import gpurun

try:
    import torch
except ImportError:  # the NumPy half still runs
    torch = None

failures = []
# the world rank as the launcher exported it: Open MPI, Hydra (MPICH), Slurm
R = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", os.environ.get("SLURM_PROCID", "0"))))


def check(cond, what):
    if not cond:
        failures.append(what)
        print("rank %d: FAIL: %s" % (R, what), flush=True)


def error_of(fn):
    """The exception fn raises, or None."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test inspects whatever comes
        return e
    return None


def raises(fn, what, words=(), exact=None, cls=gpurun.Error):
    """fn raises a gpurun.Error (GR_ERR_INVALID) of class cls whose sentence holds words, or is
    exactly `exact`; returns the error."""
    e = error_of(fn)
    ok = isinstance(e, gpurun.Error) and isinstance(e, cls) and e.status == "GR_ERR_INVALID"
    msg = str(e)
    ok = ok and all(w in msg for w in words) and (exact is None or msg == exact)
    check(ok, "%s: got %s %r, want %s %s" % (what, type(e).__name__, msg, cls.__name__,
                                             exact if exact is not None else list(words)))
    return e


w = gpurun.init()
N = w.size
check(w.rank == R and N >= 2, "run at 2 ranks or more")
right, left = (R + 1) % N, (R - 1) % N

# ---- byte order ------------------------------------------------------------------------------
# A file written big-endian, read as NumPy reads it: the values, not their bytes, are reduced.
VALS = [1.5, 2.25, 100, -3]
with tempfile.TemporaryDirectory() as d:
    f = os.path.join(d, "x.be")
    np.array(VALS, dtype=">f4").tofile(f)
    be = np.fromfile(f, ">f4")
check(be.dtype.byteorder == ">" and be.tolist() == VALS, "the file reads back big-endian")
want = np.array(VALS, np.float32) * N
y = w.allreduce(be)
check(np.array_equal(y, want) and y.dtype == np.float32 and y.dtype.isnative,
      "big-endian allreduce: %s (%s), want %s in native order" % (y, y.dtype, want))
z = be.copy()
r = w.allreduce(z, out=z)
check(r is z and z.dtype.str == ">f4" and np.array_equal(z, want),
      "big-endian allreduce in place: %s (%s)" % (z, z.dtype))
o = np.zeros(4, ">f4")
r = w.allreduce(np.array(VALS, np.float32), op="max", out=o)
check(r is o and o.dtype.str == ">f4" and o.tolist() == VALS, "native x, big-endian out=")
check(np.array_equal(be, VALS), "the input stays as it was")

xs = [np.arange(6, dtype=np.float64) * (p + 1) - p for p in range(N)]  # rank p's input
b = xs[R].astype(">f8")
check(w.broadcast(b, root=N - 1) is b and np.array_equal(b, xs[N - 1]), "big-endian broadcast")
red = w.reduce(xs[R].astype(">i8"), op="sum", root=0)
if R == 0:
    check(red.dtype == np.int64 and np.array_equal(red, np.sum(xs, axis=0)), "big-endian reduce")
g = np.zeros(6 * N, ">i4")
check(w.allgather(xs[R].astype(">i4"), out=g) is g and np.array_equal(g, np.concatenate(xs)),
      "big-endian allgather out=")
big = np.concatenate(xs)  # 6N elements
rs = w.reduce_scatter(big.astype(">f8") + R, op="sum")
allin = np.sum([big + p for p in range(N)], axis=0)
check(np.array_equal(rs, allin[R * 6:(R + 1) * 6]), "big-endian reduce_scatter")
a = w.alltoall(np.concatenate([xs[R] + 10 * p for p in range(N)]).astype(">i8"))
check(np.array_equal(a, np.concatenate([xs[p] + 10 * R for p in range(N)])), "big-endian alltoall")
# in a group the values arrive at the end: the write-back waits for it
got = np.zeros(6, ">f4")
with gpurun.group():
    w.send(xs[R].astype(">f4"), right)
    w.recv(got, left)
check(np.array_equal(got, xs[left]), "big-endian recv in a group: %s" % got)
# unaligned memory: reduced as values too
raw = bytearray(8 * 6 + 1)
un = np.frombuffer(raw, dtype=np.float64, offset=1, count=6)
un[:] = xs[R]
check(not un.flags.aligned, "an unaligned array")
check(np.array_equal(w.allreduce(un), np.sum(xs, axis=0)), "unaligned allreduce")
check(w.allreduce(un, op="max", out=un) is un and np.array_equal(un, np.max(xs, axis=0)),
      "unaligned allreduce in place")
raises(lambda: gpurun.dtype_code(np.dtype(">f4")), "dtype_code of a big-endian dtype",
       ["byte order", "float32"])
check(gpurun.dtype_code(np.dtype("=f4")) == gpurun.DTYPES["float32"], "dtype_code of =f4")

# ---- masked arrays: refused, whichever side ----------------------------------------------------
m = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])
raises(lambda: w.allreduce(m), "masked x", ["masked", "filled"], cls=TypeError)
raises(lambda: w.allreduce(m, out=m), "masked x in place", ["masked"], cls=TypeError)
raises(lambda: w.allreduce(np.ones(3), out=np.ma.masked_array(np.zeros(3))), "masked out",
       ["out is a masked array"], cls=TypeError)
raises(lambda: w.broadcast(m), "masked broadcast", ["masked"], cls=TypeError)
check(np.array_equal(w.allreduce(m.filled(0.0)), [N, 0, 3 * N]), "filled() is the way")

# ---- what was refused or copied before stays so -------------------------------------------------
ro = np.arange(4.0)
ro.flags.writeable = False
check(np.array_equal(w.allreduce(ro), ro * N), "a read-only input")
raises(lambda: w.allreduce(ro, out=ro), "a read-only array in place", ["read-only"])
raises(lambda: w.broadcast(ro), "a read-only broadcast", ["read-only"])
raises(lambda: w.allreduce(np.array([1, None], dtype=object)), "object dtype", ["object"],
       cls=TypeError)
raises(lambda: w.allreduce(np.ones(2, bool)), "bool dtype", ["bool"], cls=TypeError)
nc = np.arange(8.0)[::2]
raises(lambda: w.allreduce(nc, out=nc), "a non-contiguous array in place", ["contiguous"])
check(np.array_equal(w.allreduce(np.arange(8.0).astype(">f8")[::2]), nc * N),
      "a non-contiguous big-endian input")

# ---- ranks, colors, keys are integers; 0-d arrays; the calls stay in step -----------------------
raises(lambda: w.broadcast(np.ones(2), root=1.5), "a float root", ["root", "float"], cls=TypeError)
raises(lambda: w.reduce(np.ones(2), root="0"), "a string root", ["root", "str"], cls=TypeError)


def float_peer():
    with gpurun.group():  # the refused send first: it leaves no recv behind
        w.send(np.ones(2), peer=float(right))
        w.recv(np.ones(2), peer=left)


raises(float_peer, "a float peer", ["peer"], cls=TypeError)
raises(lambda: w.split(0.5), "a float color", ["color"], cls=TypeError)
raises(lambda: w.synchronize("0"), "a string stream", ["stream", "str"], cls=TypeError)
w.synchronize(None)
check(w.broadcast(np.full(2, R, np.int64), root=np.int64(N - 1)).tolist() == [N - 1] * 2,
      "a NumPy integer root")
self_comm = w.split(R)  # size 1: a 0-d array passes every size check but the first axis'
check(self_comm.size == 1, "a one-rank communicator")
raises(lambda: self_comm.reduce_scatter(np.array(3.0)), "0-d reduce_scatter", ["0-d"])
raises(lambda: self_comm.alltoall(np.array(3.0)), "0-d alltoall", ["0-d"])
check(self_comm.allreduce(np.array(3.0)).shape == () and w.allreduce(np.array(2.0)) == 2 * N,
      "0-d allreduce")
self_comm.free()



class Evil:
    def __str__(self):
        return "evil\n\x1b[2J\u2028"


e = raises(lambda: gpurun.dtype_code(Evil()), "a dtype whose name holds control characters",
           ["evil\\n\\x1b[2J\\u2028"], cls=TypeError)
check(str(e).isprintable(), "the sentence is one printable line: %r" % str(e))

# ---- nested groups: the inner group's buffers live until the outermost group ends --------------
src = np.arange(200, dtype=np.float64) * (R + 1)
got = np.zeros(100)
with gpurun.group():
    with gpurun.group():
        w.send(src[::2], right)  # not contiguous: sent from a copy only the group holds
    junk = [np.full(100, -7.0) for _ in range(8)]  # would reuse a freed copy's memory
    w.recv(got, left)
check(np.array_equal(got, src[::2] / (R + 1) * (left + 1)), "nested group: %s" % got[:3])
del junk

# ---- torch ----------------------------------------------------------------------------------------
if torch is not None:
    def torch_error(fn):
        e = error_of(fn)
        assert isinstance(e, RuntimeError), "torch accepted what the test expects it to refuse"
        return str(e)

    def ours(call, sentence):
        return "rank %d: %s: %s" % (R, call, sentence)

    # a leaf that requires grad, in grad mode: torch's own sentence (from the same situation)
    leaf_msg = torch_error(lambda: torch.ones(4, requires_grad=True).add_(1))
    lf = torch.ones(4, requires_grad=True)
    raises(lambda: w.allreduce(lf, out=lf), "leaf allreduce in place",
           exact=ours("allreduce", leaf_msg), cls=RuntimeError)
    raises(lambda: w.broadcast(lf), "leaf broadcast", exact=ours("broadcast", leaf_msg))

    def leaf_recv():
        with gpurun.group():  # recv first: a refused recv leaves no send behind
            w.recv(lf, left)
            w.send(torch.zeros(4), right)
    raises(leaf_recv, "leaf recv", exact=ours("recv", leaf_msg))
    check(lf.tolist() == [1.0] * 4 and lf._version == 0, "the leaf was not written")
    view_msg = torch_error(lambda: torch.ones(4, requires_grad=True)[:2].add_(1))
    vw = lf[:2]
    raises(lambda: w.allreduce(vw, out=vw), "a view of a leaf, in place",
           exact=ours("allreduce", view_msg))
    nonleaf = lf * 2
    raises(lambda: w.allreduce(nonleaf, out=nonleaf), "a non-leaf that requires grad",
           ["requires grad", "not differentiable", "no_grad"])
    # out= of a function, torch's sentence without its function name
    out_msg = torch_error(lambda: torch.add(torch.ones(4), 1, out=torch.ones(4, requires_grad=True)))
    out_msg = out_msg.split("(): ", 1)[1]
    check(out_msg == torch_error(lambda: torch.add(lf, 1, out=torch.empty(4))).split("(): ", 1)[1],
          "torch says the same for an input that requires grad")
    raises(lambda: w.allreduce(torch.ones(4), out=torch.ones(4, requires_grad=True)),
           "out= requires grad", exact=ours("allreduce", out_msg))
    raises(lambda: w.allreduce(lf, out=torch.empty(4)), "x requires grad with out=",
           exact=ours("allreduce", out_msg))
    raises(lambda: w.allgather(lf, out=torch.empty(4 * N)), "allgather x requires grad with out=",
           exact=ours("allgather", out_msg))
    # reduce: what the root refuses, every rank refuses (else the others would wait for it)
    raises(lambda: w.reduce(torch.ones(4), root=0, out=torch.ones(4, requires_grad=True)),
           "reduce out= requires grad, on every rank", exact=ours("reduce", out_msg))
    raises(lambda: w.reduce(lf, root=N - 1, out=lf), "reduce in place into a leaf, on every rank",
           exact=ours("reduce", leaf_msg))
    # a call refused for its op writes nothing and leaves the version as it was
    pl = torch.ones(2)
    raises(lambda: w.allreduce(pl, op="median", out=pl), "an unknown op", ["median"])
    check(pl._version == 0, "a refused call leaves the version (%d)" % pl._version)
    # results gpurun allocates are new tensors: allowed, and they do not require grad
    y = w.allreduce(lf)
    check(y.tolist() == [N] * 4 and not y.requires_grad, "allreduce of a leaf into a new tensor")

    # under no_grad the write is allowed, and the version counter says so
    with torch.no_grad():
        v0 = lf._version
        w.allreduce(lf, out=lf)
        check(lf.tolist() == [N] * 4 and lf._version > v0, "no_grad: leaf written, version %d"
              % lf._version)
        v0 = lf._version
        w.broadcast(lf, root=0)
        check(lf._version > v0, "no_grad: broadcast bumps the version")

    # a tensor saved for backward, written in place: backward() raises torch's own error
    def saved_case(write):
        x = torch.ones(1, requires_grad=True)
        t = torch.full((1,), 3.0)
        loss = (x * t).sum()  # mul saves t for x's gradient
        write(t)
        e = error_of(loss.backward)
        return (str(e) if isinstance(e, RuntimeError) else "backward() passed, grad %s" % x.grad)
    torch_saved = saved_case(lambda t: t.mul_(1))
    check("modified by an inplace operation" in torch_saved, "torch's saved-tensor error")
    def ring_write(t):
        with gpurun.group():
            w.recv(t, left)
            w.send(torch.full((1,), 3.0), right)

    for name, write in [("allreduce in place", lambda t: w.allreduce(t, out=t)),
                        ("allreduce in place, op=max", lambda t: w.allreduce(t, op="max", out=t)),
                        ("allreduce out=", lambda t: w.allreduce(torch.full((1,), 3.0), out=t)),
                        ("broadcast", lambda t: w.broadcast(t, root=0)),
                        ("recv", ring_write)]:
        got_msg = saved_case(write)
        check(got_msg == torch_saved, "saved for backward, %s: %s" % (name, got_msg))

    def group_write(t):
        with gpurun.group():
            w.allreduce(t, out=t)
    got_msg = saved_case(group_write)
    check(got_msg == torch_saved, "saved for backward, in a group: %s" % got_msg)

    # inference tensors outside inference mode
    with torch.inference_mode():
        inf, inf2 = torch.ones(4), torch.ones(4)
    inf_msg = torch_error(lambda: inf2.add_(1))  # (torch 1.13 writes inf2 before it refuses)
    raises(lambda: w.allreduce(inf, out=inf), "an inference tensor",
           exact=ours("allreduce", inf_msg))
    with torch.inference_mode():
        r = w.allreduce(inf, out=inf)
        check(r is inf and inf.tolist() == [N] * 4, "inference tensor in inference mode: %s"
              % inf.tolist())

    # a lazily negated view reads as its values; it cannot be written. With one element it is
    # contiguous, and its memory holds the value's negation
    for neg in (torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64).conj().imag,
                torch.tensor([1 + 2j], dtype=torch.complex64).conj().imag):
        want = [-2.0, 4.0][:neg.numel()]
        check(neg.is_neg() and neg.tolist() == want, "a negated view")
        got = w.allreduce(neg).tolist()
        check(got == [v * N for v in want], "allreduce of a negated view: %s" % got)
        raises(lambda: w.allreduce(neg, out=neg), "a negated view in place",
               ["negated" if neg.is_contiguous() else "contiguous"])

    # tensors gpurun cannot reach
    raises(lambda: w.allreduce(torch.ones(4, device="meta")), "a meta tensor", ["meta"],
           cls=TypeError)
    raises(lambda: w.allreduce(torch.ones(4).to_sparse()), "a sparse tensor", ["sparse"],
           cls=TypeError)

# reduce: an out= of the wrong size is refused on every rank, not on the root alone (which would
# leave the others waiting); last, as a refusal on the root alone would leave the ranks out of step
raises(lambda: w.reduce(np.ones(4), root=0, out=np.ones(5)), "reduce out= of another size",
       ["out holds 5"])
w.barrier()
gpurun.finalize()
print("rank %d: %d failure(s)" % (R, len(failures)), flush=True)
sys.exit(1 if failures else 0)
