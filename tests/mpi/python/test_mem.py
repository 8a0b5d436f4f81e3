"""gpurun.empty / gpurun.empty_torch / gpurun.free under mpirun: arrays in gr_mem_alloc memory, zeroed,
of the shape and dtype asked; collectives on them are exact (allreduce in and out of place,
allgather, reduce_scatter, broadcast; NumPy and torch, asynchronous too); misuse is one error on
every rank (shapes that differ, an array that is not gpurun memory, freed twice); and the memory of
a communicator freed with arrays left goes with it. Usage: mpirun -np N gpurun python3 THIS."""
import sys

import numpy as np

import gpurun

try:
    import torch
except ImportError:
    torch = None

failures = []
w = gpurun.init()
R, N = w.rank, w.size


def check(cond, what):
    if not cond:
        failures.append(what)
        print("rank %d: FAIL: %s" % (R, what), flush=True)


def raises(fn, code, text, what):
    try:
        fn()
    except gpurun.Error as e:
        check(e.code == code and text in str(e), "%s: %s (code %d)" % (what, e, e.code))
        return
    check(False, "%s: no error" % what)


tri = N * (N + 1) // 2
n = 5003
a = gpurun.empty(n, "float32")
b = gpurun.empty((N, n), np.float64)
check(a.shape == (n,) and a.dtype == np.float32 and not a.any(), "empty: shape, dtype, zeros")
check(b.shape == (N, n) and b.dtype == np.float64, "empty 2-d")
a[:] = (R + 1) * (np.arange(n) % 7)
want = tri * (np.arange(n) % 7)
y = w.allreduce(a)  # out of place, into a new array
check(np.array_equal(y, want), "allreduce out of place")
w.allreduce(a, out=a)  # in place, in the window
check(np.array_equal(a, want), "allreduce in place")
a[:] = R + 1
# allgather into window memory: each rank's block of a into b
blk = gpurun.empty(n, np.float64)
blk[:] = R + 0.5
w.allgather(blk, out=b)
check(all(np.array_equal(b[q], np.full(n, q + 0.5)) for q in range(N)), "allgather into memory")
rs = gpurun.empty(n, np.float64)
w.reduce_scatter(b, out=rs)
check(np.array_equal(rs, np.full(n, N * (R + 0.5))), "reduce_scatter (block R)")
w.broadcast(blk, root=0)
check(np.array_equal(blk, np.full(n, 0.5)), "broadcast in place")
req = w.allreduce(a, out=a, async_op=True)
req.wait()
check(np.array_equal(a, np.full(n, float(tri))), "async allreduce in place")

if torch is not None:
    t = gpurun.empty_torch((2, 3000))
    check(t.dtype == torch.float32 and tuple(t.shape) == (2, 3000), "empty_torch")
    t.fill_(R + 1)
    w.allreduce(t, out=t)
    check(bool((t == tri).all()), "torch allreduce in place on gpurun memory")
    gpurun.free(t)

# misuse: one error on every rank, naming the rank
raises(lambda: gpurun.empty(100 if R == 0 else 200, "float32"), 9,
       "rank 0 asks for 400 bytes, rank 1 asks for 800 bytes", "shapes that differ")
raises(lambda: gpurun.free(np.zeros(4) if R == N - 1 else a), 1,
       "rank %d: the pointer is not memory gr_mem_alloc gave" % (N - 1), "not gpurun memory")
raises(lambda: gpurun.free(bytearray(8) if R == 0 else a), 1,
       "rank 0: the pointer is not memory gr_mem_alloc gave", "not an array at all")
gpurun.free(rs)
raises(lambda: gpurun.free(rs), 1, "rank 0: the pointer is not memory", "freed twice")
gpurun.free(None)

# a split communicator's memory, left for its free()
s = w.split(0)
m = gpurun.empty(8192, "int32", comm=s)
m[:] = 1
s.allreduce(m, out=m)
check(int(m[0]) == N and int(m[-1]) == N, "allreduce on a split communicator's memory")
s.free()
for arr in (a, b, blk):
    gpurun.free(arr)
gpurun.finalize()
if R == 0:
    print("gpurun.empty at %d ranks: %d failures" % (N, len(failures)), flush=True)
sys.exit(1 if failures else 0)
