#!/usr/bin/env python3
"""DDP step time with each gradient-averaging path, on the model of examples/torch/ddp.py:
DDP's own gloo allreduce (no hook), and communication hooks that average the bucket with gloo,
gpurun and mpi4py. Rounds alternate the four (rotating the order); per round and path: ms per
step and ms inside the hook (slowest rank). Prints medians [min-max] and each path's step time
over the no-hook one. mpi4py is there as a control: it shows what is gpurun's and what is MPI's.

    mpirun -np 2 gpurun python3 bench/python/bench_ddp_hooks.py [--rounds 5] [--steps 60]
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import gpurun

p = argparse.ArgumentParser()
p.add_argument("--rounds", type=int, default=5)
p.add_argument("--steps", type=int, default=60)
p.add_argument("--batch", type=int, default=64)
args = p.parse_args()

w = gpurun.init()
from mpi4py import MPI  # noqa: E402  (after gpurun: MPI is initialised with THREAD_MULTIPLE)

dist.init_process_group("gloo", init_method="env://")
R, N = dist.get_rank(), dist.get_world_size()
in_hook = [0.0]


def timed_hook(allreduce):
    def hook(state, bucket):
        buf = bucket.buffer()
        t0 = time.perf_counter()
        allreduce(buf)
        in_hook[0] += time.perf_counter() - t0
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut
    return hook


def gloo_avg(buf):
    dist.all_reduce(buf)
    buf /= N


def mpi4py_avg(buf):
    MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, buf.numpy(), op=MPI.SUM)
    buf /= N


paths = {
    "DDP default (gloo)": None,
    "hook: gloo": timed_hook(gloo_avg),
    "hook: gpurun": timed_hook(lambda b: w.allreduce(b, op="avg", out=b)),
    "hook: mpi4py": timed_hook(mpi4py_avg),
}


def run(hook):
    torch.manual_seed(42)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    if hook:
        model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(args.batch, 32)
    y = torch.randint(0, 4, (args.batch,))
    lossf = nn.CrossEntropyLoss()
    for i in range(args.steps + 5):
        if i == 5:
            w.barrier()
            in_hook[0] = 0.0
            t0 = time.perf_counter()
        opt.zero_grad()
        lossf(model(x), y).backward()
        opt.step()
    step = (time.perf_counter() - t0) / args.steps
    return (MPI.COMM_WORLD.allreduce(step, op=MPI.MAX) * 1e3,
            MPI.COMM_WORLD.allreduce(in_hook[0] / args.steps, op=MPI.MAX) * 1e3)


res = {k: [] for k in paths}
names = list(paths)
for rnd in range(args.rounds):
    for k in names[rnd % len(names):] + names[:rnd % len(names)]:
        res[k].append(run(paths[k]))
if R == 0:
    base = [s for s, _ in res[names[0]]]
    print("DDP, %d ranks, batch %d per rank, %d steps x %d rounds (median [min-max], slowest rank)"
          % (N, args.batch, args.steps, args.rounds))
    print("  %-20s %-24s %-24s %s" % ("path", "ms per step", "ms in hook per step",
                                       "step / default"))
    for k, v in res.items():
        st, hk = [s for s, _ in v], [h for _, h in v]
        r = [s / b for s, b in zip(st, base)]
        print("  %-20s %7.2f [%.2f-%.2f]%5s %7.2f [%.2f-%.2f]%5s %.2f [%.2f-%.2f]" % (
            k, statistics.median(st), min(st), max(st), "", statistics.median(hk), min(hk),
            max(hk), "", statistics.median(r), min(r), max(r)))
    print("  samples/s per rank: %s" % ", ".join(
        "%s %.0f" % (k, args.batch / statistics.median([s for s, _ in v]) * 1e3)
        for k, v in res.items()))
dist.destroy_process_group()
gpurun.finalize()
