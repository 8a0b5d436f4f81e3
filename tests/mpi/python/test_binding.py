"""The gpurun Python package under mpirun: every collective on NumPy arrays and torch tensors of
every dtype, in place and not, split communicators, groups, the plan, the torch.distributed
environment gpurun exported, and the errors. Each rank computes every rank's input itself, so the
expected answers come from NumPy, not from gpurun. Usage: mpirun -np N gpurun python3 THIS."""
import os
import sys

import numpy as np

import gpurun

try:
    if os.environ.get("GR_PY_NO_TORCH") == "1":  # 4 ranks on 2 cores: importing torch is the cost
        raise ImportError
    import torch
except ImportError:  # the NumPy half still runs
    torch = None

failures = []


def launcher_env(*names):
    """The first of these variables the launcher set: Open MPI's, Hydra's (MPICH), Slurm's."""
    for n in names:
        if n in os.environ:
            return os.environ[n]
    raise KeyError(" or ".join(names))


L_RANK = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
L_SIZE = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
L_LOCAL_RANK = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")
L_LOCAL_SIZE = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")


def check(cond, what):
    if not cond:
        failures.append(what)
        print("rank %s: FAIL: %s" % (os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "?")), what), flush=True)


def raises(fn, status, words, what):
    try:
        fn()
    except gpurun.Error as e:
        msg = str(e)
        check(e.status == status and all(w in msg for w in words) and "\n" not in msg,
              "%s: got %s '%s', want %s with %s" % (what, e.status, msg, status, words))
        return
    check(False, "%s: no gpurun.Error raised" % what)


w = gpurun.init()
check(gpurun.init() is w, "init() is idempotent and returns the world")
R, N = w.rank, w.size
check(R == int(launcher_env(*L_RANK)) and N == int(launcher_env(*L_SIZE)),
      "world rank/size match the launcher's")
check(w.backend == "mpi", "CPU-only build: MPI backend (%s)" % w.backend)

# ---- the plan and the torch.distributed contract gpurun exported ----------------------------
inf = gpurun.info()
check(inf["rank"] == R and inf["size"] == N, "info() rank/size")
check(inf["local_rank"] == int(launcher_env(*L_LOCAL_RANK)), "info() local_rank")
check(inf["from_plan"] and inf["cpus"] == os.environ["GPURUN_CPUS"], "info() cpus = GPURUN_CPUS")
check(inf["gpus"] == [] and inf["nic"] == os.environ.get("GPURUN_NIC", ""), "info() gpus, nic")
env = os.environ
check(env["RANK"] == str(R) and env["WORLD_SIZE"] == str(N), "RANK/WORLD_SIZE exported")
check(env["LOCAL_RANK"] == launcher_env(*L_LOCAL_RANK) and
      env["LOCAL_WORLD_SIZE"] == launcher_env(*L_LOCAL_SIZE), "LOCAL_* exported")
check(env["GROUP_RANK"] == "0" and env["MASTER_ADDR"] == "127.0.0.1", "one node: group 0, 127.0.0.1")
check(10000 <= int(env["MASTER_PORT"]) < 30000, "MASTER_PORT from the job id")
allports = w.allgather(np.array([int(env["MASTER_PORT"])], dtype=np.int64))
check(len(set(allports.tolist())) == 1, "every rank got the same MASTER_PORT")


# ---- every collective, every dtype -----------------------------------------------------------
def inputs(dt, n, r):
    """Rank r's input: small integers, exact in every dtype (bfloat16 holds integers to 256)."""
    return ((np.arange(n) * 3 + r * 5) % 7 + 1).astype(dt)


NP_TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]
T_TYPES = ["int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
if os.environ.get("GR_PY_QUICK") == "1":  # CI time: every dtype at 2 and 3 ranks, a few at 1 and 4
    NP_TYPES, T_TYPES = ["uint8", "int64", "float16", "float64"], ["bfloat16", "float32"]
REDUCE = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}


def run_suite(make, to_np, types, label):
    for dt in types:
        n = 2 * N + 3
        xs = [inputs("float64", n, r) for r in range(N)]
        x = make(xs[R], dt)
        floating = dt.startswith(("float", "bfloat"))
        for op, f in REDUCE.items():
            if op == "prod" and dt in ("int8", "uint8", "float16", "bfloat16") and N > 2:
                continue  # 7^4 leaves the exact range of these types
            want = f(np.stack(xs), axis=0)
            y = w.allreduce(x, op=op)
            check(type(y) is type(x) and y is not x and tuple(y.shape) == tuple(x.shape),
                  "%s %s allreduce returns a new %s" % (label, dt, type(x).__name__))
            check(np.array_equal(to_np(y), want), "%s %s allreduce %s" % (label, dt, op))
        if floating:
            want = np.mean(np.stack(xs), axis=0)
            tol = 1e-2 if dt in ("float16", "bfloat16") else 1e-6
            check(np.allclose(to_np(w.allreduce(x, op="avg")), want, rtol=tol),
                  "%s %s allreduce avg" % (label, dt))
        # in place
        z = make(xs[R], dt)
        r = w.allreduce(z, op="max", out=z)
        check(r is z and np.array_equal(to_np(z), np.max(np.stack(xs), axis=0)),
              "%s %s allreduce in place" % (label, dt))
        # fused: three buffers (odd sizes, one empty) in one call, new results and in place
        sizes = [n, 0, 5]
        ms = [[inputs("float64", c, r + i) for r in range(N)] for i, c in enumerate(sizes)]
        parts = [make(m[R], dt) for m in ms]
        got = w.allreduce_multi(parts, op="sum")
        check(isinstance(got, list) and len(got) == 3 and all(
            type(g) is type(x) and g is not p for g, p in zip(got, parts)),
            "%s %s allreduce_multi returns new buffers" % (label, dt))
        check(all(np.array_equal(to_np(g), np.sum(np.stack(m), axis=0)) for g, m in zip(got, ms)),
              "%s %s allreduce_multi sum" % (label, dt))
        got = w.allreduce_multi(parts, op="min", out=parts)
        check(all(g is p for g, p in zip(got, parts)) and all(
            np.array_equal(to_np(p), np.min(np.stack(m), axis=0)) for p, m in zip(parts, ms)),
            "%s %s allreduce_multi in place" % (label, dt))
        # broadcast from the last rank, in place
        b = make(xs[R], dt)
        check(w.broadcast(b, root=N - 1) is b and np.array_equal(to_np(b), xs[N - 1]),
              "%s %s broadcast" % (label, dt))
        # reduce onto the last rank
        red = w.reduce(x, op="sum", root=N - 1)
        if R == N - 1:
            check(red is not None and np.array_equal(to_np(red), np.sum(np.stack(xs), axis=0)),
                  "%s %s reduce on root" % (label, dt))
        else:
            check(red is None, "%s %s reduce returns None off root" % (label, dt))
        # allgather: size*len(x), rank order
        g = w.allgather(x)
        check(np.array_equal(to_np(g), np.concatenate(xs)), "%s %s allgather" % (label, dt))
        # reduce_scatter and alltoall on size*k elements
        k = 3
        ys = [inputs("float64", N * k, r + 1) for r in range(N)]
        rs = w.reduce_scatter(make(ys[R], dt), op="sum")
        check(np.array_equal(to_np(rs), np.sum(np.stack(ys), axis=0)[R * k:(R + 1) * k]),
              "%s %s reduce_scatter" % (label, dt))
        a = w.alltoall(make(ys[R], dt))
        check(np.array_equal(to_np(a), np.concatenate([ys[p][R * k:(R + 1) * k] for p in range(N)])),
              "%s %s alltoall" % (label, dt))
        # a ring of send/recv, as one group (so that nobody waits)
        got = make(np.zeros(n), dt)
        with gpurun.group():
            w.send(x, (R + 1) % N)
            w.recv(got, (R - 1) % N)
        check(np.array_equal(to_np(got), xs[(R - 1) % N]), "%s %s send/recv ring" % (label, dt))


run_suite(lambda a, dt: np.ascontiguousarray(a.astype(dt)), lambda y: np.asarray(y, np.float64),
          NP_TYPES, "numpy")
# 2-D arrays: allgather and reduce_scatter work along the first axis
m = np.full((2, 3), R, dtype=np.float32)
g = w.allgather(m)
check(g.shape == (2 * N, 3) and np.array_equal(g[:, 0], np.repeat(np.arange(N), 2)), "2-D allgather")
if torch is not None:
    run_suite(lambda a, dt: torch.tensor(a).to(getattr(torch, dt)),
              lambda y: y.to(torch.float64).numpy(), T_TYPES, "torch")
    check(gpurun.torch_dtype(gpurun.dtype_code(torch.bfloat16)) is torch.bfloat16, "bfloat16 both ways")

# dtypes both ways
for name, code in gpurun.DTYPES.items():
    check(gpurun.dtype_code(name) == code, "dtype_code(%s)" % name)
    if name != "bfloat16":
        check(gpurun.numpy_dtype(code) == np.dtype(name), "numpy_dtype(%d)" % code)
        check(gpurun.dtype_code(np.dtype(name)) == code, "dtype_code(np %s)" % name)

# ---- split ------------------------------------------------------------------------------------
sub = w.split(R % 2, key=-R)  # reversed order inside each color
members = [r for r in range(N) if r % 2 == R % 2]
check(sub.size == len(members) and sub.rank == sorted(members, reverse=True).index(R),
      "split: size and key order (%d of %d)" % (sub.rank, sub.size))
s = sub.allreduce(np.array([R + 1.0]))
check(s[0] == sum(r + 1.0 for r in members), "split: allreduce over the members")
check(w.split(-1) is None, "split with a negative color gives None")
sub.free()
raises(lambda: sub.barrier(), "GR_ERR_STATE", ["freed"], "a freed communicator")

# ---- errors -------------------------------------------------------------------------------------
x = np.ones(4, np.float32)
raises(lambda: w.allreduce(x, op="median"), "GR_ERR_INVALID", ["allreduce", "median"], "unknown op")
raises(lambda: w.allreduce(np.ones(4, np.int32), op="avg"), "GR_ERR_INVALID",
       ["rank %d" % R, "gr_allreduce", "avg"], "avg on an integer type (the C library's sentence)")
raises(lambda: w.broadcast(x, root=N), "GR_ERR_INVALID", ["gr_broadcast", "root"], "root out of range")
raises(lambda: w.allreduce(x, out=np.ones(8, np.float32)[::2]), "GR_ERR_INVALID",
       ["contiguous"], "a non-contiguous out")
raises(lambda: w.allreduce(x, out=np.ones(5, np.float32)), "GR_ERR_INVALID", ["out"], "out of another size")
raises(lambda: w.allreduce([1.0, 2.0]), "GR_ERR_INVALID", ["list"], "a list is not an array")
raises(lambda: w.allreduce(np.ones(2, np.complex64)), "GR_ERR_INVALID", ["complex64"], "complex dtype")
raises(lambda: w.allreduce_multi([np.ones(2, np.float32), np.ones(2, np.int32)]), "GR_ERR_INVALID",
       ["xs[1]", "int32", "one dtype"], "allreduce_multi of two dtypes")
raises(lambda: w.allreduce_multi(np.ones(4, np.float32)), "GR_ERR_INVALID", ["list or tuple"],
       "allreduce_multi of one array")
raises(lambda: w.allreduce_multi([x, x], out=[x]), "GR_ERR_INVALID", ["out holds 1", "xs 2"],
       "allreduce_multi with fewer outs")
ro = np.ones(4, np.float32)
ro.flags.writeable = False
keep = np.zeros(4, np.float32)
raises(lambda: w.allreduce_multi([x, ro], out=[keep, ro]), "GR_ERR_INVALID", ["out[1]", "read-only"],
       "allreduce_multi into a read-only out")
check(not keep.any(), "a refused allreduce_multi writes nothing")
check(w.allreduce_multi([]) == [], "allreduce_multi of no buffers")
if N > 1:
    raises(lambda: w.reduce_scatter(np.ones(N + 1, np.float32)), "GR_ERR_INVALID", ["multiple"],
           "reduce_scatter of an uneven length")
if N > 1 and os.environ.get("GPURUN_CHECK") == "1":
    # check mode: a count that differs between ranks fails on every rank...
    raises(lambda: w.allreduce(np.ones(4 + R, np.float32)), "GR_ERR_MISMATCH", ["allreduce"],
           "counts that differ across ranks")
    # ...and the communicator stays usable
    check(w.allreduce(np.ones(2))[0] == N, "usable after a mismatch")
if torch is not None:
    raises(lambda: w.allreduce(torch.ones(2, dtype=torch.bool)), "GR_ERR_INVALID", ["bool"], "torch.bool")
    tt = torch.ones(4, 2).t()
    check(np.array_equal(w.allreduce(tt).numpy(), np.full((2, 4), N)), "a non-contiguous input is copied")

w.barrier()
gpurun.finalize()
gpurun.finalize()  # idempotent
raises(lambda: gpurun.world(), "GR_ERR_STATE", ["init"], "world() after finalize")
print("rank %d: %d failure(s)" % (R, len(failures)), flush=True)
sys.exit(1 if failures else 0)
