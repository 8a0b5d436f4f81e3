#!/usr/bin/env python3
"""gpurun's Python allreduce against torch.distributed (gloo) and mpi4py, on the same float32
tensor (in place, sum), 1 KiB to 64 MiB, in one run: rounds alternate the three (rotating which
goes first), each timing block is fenced by a barrier, and a block's time is the slowest rank's.
Prints per size the median µs per call of each and the ratios gpurun/gloo and gpurun/mpi4py as
median [min-max] over the rounds. Then the per-call cost at one element on one-rank communicators
(so that no rank waits for another): the Python call, the bare ctypes call of gr_allreduce with
prepared arguments, mpi4py and gloo.

    mpirun -np 2 gpurun python3 bench/python/bench_allreduce.py [--rounds 7] [--max 64M]
"""
import argparse
import ctypes
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

import gpurun

p = argparse.ArgumentParser()
p.add_argument("--rounds", type=int, default=7)
p.add_argument("--min", default="1K")
p.add_argument("--max", default="64M")
p.add_argument("--budget", type=float, default=0.02, help="seconds per timed block (about)")
args = p.parse_args()


def size_of(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


w = gpurun.init()  # MPI first (MPI_THREAD_MULTIPLE); mpi4py then finds it initialised
from mpi4py import MPI  # noqa: E402

dist.init_process_group("gloo", init_method="env://")
comm = MPI.COMM_WORLD
R, N = w.rank, w.size
assert dist.get_world_size() == N == comm.Get_size()


def timed(fn, iters):
    w.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    dt = (time.perf_counter() - t0) / iters
    return comm.allreduce(dt, op=MPI.MAX)  # the slowest rank's time


def ratio_line(a, b):
    r = [x / y for x, y in zip(a, b)]
    return "%5.2f [%4.2f-%4.2f]" % (statistics.median(r), min(r), max(r))


def fmt_size(n):
    return "%d KiB" % (n >> 10) if n < 1 << 20 else "%d MiB" % (n >> 20)


sizes = []
n = size_of(args.min)
while n <= size_of(args.max):
    sizes.append(n)
    n *= 4

if R == 0:
    print("allreduce float32 sum in place, %d ranks, %d rounds (median us per call; ratio median "
          "[min-max] over rounds)" % (N, args.rounds))
    print("%8s %11s %11s %11s  %-18s %-18s" % ("size", "gpurun us", "gloo us", "mpi4py us",
                                              "gpurun/gloo", "gpurun/mpi4py"))
for nbytes in sizes:
    t = torch.zeros(nbytes // 4)
    a = t.numpy()  # the same memory for mpi4py
    impl = {
        "gpurun": lambda: w.allreduce(t, out=t),
        "gloo": lambda: dist.all_reduce(t),
        "mpi4py": lambda: comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM),
    }
    # iterations from one warm-up call of the slowest, so that a block takes about --budget s
    warm = max(timed(f, 1) for f in impl.values())
    iters = max(2, min(2000, int(args.budget / max(warm, 1e-7))))
    res = {k: [] for k in impl}
    names = list(impl)
    for rnd in range(args.rounds):
        order = names[rnd % 3:] + names[:rnd % 3]
        for k in order:
            res[k].append(timed(impl[k], iters))
    if R == 0:
        med = {k: statistics.median(v) * 1e6 for k, v in res.items()}
        print("%8s %11.1f %11.1f %11.1f  %-18s %-18s" % (
            fmt_size(nbytes), med["gpurun"], med["gloo"], med["mpi4py"],
            ratio_line(res["gpurun"], res["gloo"]), ratio_line(res["gpurun"], res["mpi4py"])),
            flush=True)

# ---- per-call overhead at one element, on one-rank communicators (no waiting for a peer) ----
selfc = w.split(R)
groups = [dist.new_group([r]) for r in range(N)]  # every rank creates every group
mine = groups[R]
x = np.zeros(1, np.float32)
tt = torch.zeros(1)
c = gpurun._lib.gr_allreduce
ptr, h = x.__array_interface__["data"][0], selfc._h
impl = {
    "gpurun.allreduce(numpy)": lambda: selfc.allreduce(x, out=x),
    "gpurun.allreduce(torch)": lambda: selfc.allreduce(tt, out=tt),
    "ctypes gr_allreduce": lambda: c(ptr, ptr, 1, 8, 0, h, None),
    "mpi4py Allreduce": lambda: MPI.COMM_SELF.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM),
    "gloo all_reduce": lambda: dist.all_reduce(tt, group=mine),
}
res = {k: [] for k in impl}
names = list(impl)
for rnd in range(args.rounds):
    for k in names[rnd % len(names):] + names[:rnd % len(names)]:
        res[k].append(timed(impl[k], 5000 if "gloo" not in k else 500))
if R == 0:
    print("\nper call, 1 element float32, on a 1-rank communicator (median [min-max] us over %d "
          "rounds, slowest of %d ranks)" % (args.rounds, N))
    for k, v in res.items():
        v = [s * 1e6 for s in v]
        print("  %-26s %8.2f [%.2f-%.2f]" % (k, statistics.median(v), min(v), max(v)))
    d = [a - b for a, b in zip(res["gpurun.allreduce(torch)"], res["ctypes gr_allreduce"])]
    print("  Python layer (torch, in place) over the bare ctypes call: %.2f us [%.2f-%.2f]"
          % (statistics.median(d) * 1e6, min(d) * 1e6, max(d) * 1e6))
selfc.free()
dist.destroy_process_group()
gpurun.finalize()
