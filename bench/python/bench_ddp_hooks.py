#!/usr/bin/env python3
"""DDP step time with each gradient-averaging path, on the model of examples/torch/ddp.py:
DDP's own gloo allreduce (no hook), and communication hooks that average the bucket with gloo,
gpurun (waited for inside the hook), gpurun with async_op=True (the hook returns gpurun's future,
so the allreduce overlaps the rest of the backward pass) and mpi4py. Rounds rotate the order of
the five; per round and path: ms per step, ms inside the hook and samples/s (slowest rank).
Prints medians [min-max], each path's step time over the no-hook one, and samples/s. mpi4py is
there as a control: it shows what is gpurun's and what is MPI's. --hidden/--layers make the
model wider and deeper, --bucket-mb smaller buckets (several per step, so there is something to
overlap).

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
p.add_argument("--hidden", type=int, default=64, help="width of the hidden layers")
p.add_argument("--layers", type=int, default=1, help="hidden layers")
p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
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


def overlap_hook(state, bucket):
    """gpurun's allreduce started, not waited for: DDP waits on the future at the end of the
    backward pass (the time in the hook is the start's)."""
    buf = bucket.buffer()
    t0 = time.perf_counter()
    fut = w.allreduce(buf, op="avg", out=buf, async_op=True).get_future()
    in_hook[0] += time.perf_counter() - t0
    return fut


paths = {
    "DDP default (gloo)": None,
    "hook: gloo": timed_hook(gloo_avg),
    "hook: gpurun": timed_hook(lambda b: w.allreduce(b, op="avg", out=b)),
    "hook: gpurun async": overlap_hook,
    "hook: mpi4py": timed_hook(mpi4py_avg),
}


def make_model():
    torch.manual_seed(42)
    layers, width = [nn.Linear(32, args.hidden), nn.ReLU()], args.hidden
    for _ in range(args.layers - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 4))


def run(hook):
    model = DDP(make_model(), bucket_cap_mb=args.bucket_mb)
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
    nparam = sum(q.numel() for q in make_model().parameters())
    print("DDP, %d ranks, batch %d per rank, %d parameters, bucket_cap_mb %g, %d steps x %d rounds "
          "(median [min-max], slowest rank)" % (N, args.batch, nparam, args.bucket_mb, args.steps,
                                               args.rounds))
    print("  %-20s %-22s %-22s %-18s %s" % ("path", "ms per step", "ms in hook per step",
                                             "step / default", "samples/s per rank"))
    for k, v in res.items():
        st, hk = [s for s, _ in v], [h for _, h in v]
        r = [s / b for s, b in zip(st, base)]
        sps = [args.batch / s * 1e3 for s in st]
        print("  %-20s %6.2f [%.2f-%.2f]%3s %6.2f [%.2f-%.2f]%3s %.2f [%.2f-%.2f]%3s "
              "%.0f [%.0f-%.0f]" % (
                  k, statistics.median(st), min(st), max(st), "", statistics.median(hk), min(hk),
                  max(hk), "", statistics.median(r), min(r), max(r), "", statistics.median(sps),
                  min(sps), max(sps)))
dist.destroy_process_group()
gpurun.finalize()
