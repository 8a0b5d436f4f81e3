#!/usr/bin/env python3
"""Data-parallel training of a small network on a synthetic data set, started by any launcher
through gpurun (which exports RANK, WORLD_SIZE, MASTER_ADDR, ... as torchrun would):

    mpirun -np 2 gpurun python3 examples/torch/ddp.py [--variant all]
    srun -n 2 gpurun python3 examples/torch/ddp.py

Three variants from the same initial weights and the same batches ((a) and (b) by default,
all three with --variant all):
  (a) plain DistributedDataParallel over init_method="env://" (gloo on CPU, nccl on GPU);
  (b) the same with gpurun's allreduce (op="avg") as DDP's communication hook, waited for
      inside the hook;
  (c) the same hook started with async_op=True: it returns gpurun's future at once, so the
      bucket's allreduce overlaps the rest of the backward pass, and DDP waits on the future.
Self-checks (exit 1 when one fails): the loss falls to below half its start in each variant,
every rank holds bitwise identical weights, (b) and (c) are bitwise identical (the same
allreduce), and (a) agrees with (b) and (c) within --tol (relative to the weights' size: they
sum the gradients in different orders, so float32 rounding differs). Each rank prints its
samples/s per variant.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--variant", choices=["a", "b", "c", "both", "all"], default="both",
               help="both: (a) and (b); all: (a), (b) and (c)")
p.add_argument("--steps", type=int, default=40)
p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
p.add_argument("--tol", type=float, default=1e-4, help="max |a-b| / (1 + max |a|) allowed")
p.add_argument("--warmup", type=int, default=3, help="steps left out of samples/s")
p.add_argument("--rounds", type=int, default=1,
               help="benchmark: train the variants this many times, rotating their order, and "
                    "print each one's samples/s over (a)'s as median [min-max] (checks use the "
                    "last round)")
args = p.parse_args()

cuda = torch.cuda.is_available()
dist.init_process_group("nccl" if cuda else "gloo", init_method="env://")
rank, size = dist.get_rank(), dist.get_world_size()
if rank == 0:
    print("rank 0: torch.distributed from env://: WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s "
          "LOCAL_WORLD_SIZE=%s" % tuple(os.environ.get(k, "-") for k in (
              "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE")), flush=True)
# under gpurun each rank sees only its own GPU(s): cuda:0 is this rank's
device = torch.device("cuda:0" if cuda else "cpu")
if cuda:
    torch.cuda.set_device(device)

# ---- data and model: the same on every rank and in both variants ----------------------------
g = torch.Generator().manual_seed(1234)
FEAT, HID, CLASSES = 32, 64, 4
W_TRUE = torch.randn(FEAT, CLASSES, generator=g)


def batch(step):
    """This rank's share of the global batch of `step` (a different slice on each rank)."""
    gs = torch.Generator().manual_seed(10_000 + step)
    x = torch.randn(size * args.batch, FEAT, generator=gs)
    y = (x @ W_TRUE).argmax(dim=1)
    lo = rank * args.batch
    return x[lo:lo + args.batch].to(device), y[lo:lo + args.batch].to(device)


def make_model():
    torch.manual_seed(42)
    return nn.Sequential(nn.Linear(FEAT, HID), nn.ReLU(), nn.Linear(HID, CLASSES)).to(device)


def gpurun_hook(state, bucket):
    """DDP communication hook: average the bucket's gradients with gpurun's allreduce, in place
    (on a CUDA tensor, on its current stream through NCCL), waiting for it inside the hook."""
    buf = bucket.buffer()
    state.allreduce(buf, op="avg", out=buf)
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


def gpurun_overlap_hook(state, bucket):
    """DDP communication hook that does not wait: start the in-place average and return
    gpurun's future of it (completed with the bucket by gpurun's progress thread); DDP waits
    on it at the end of the backward pass, while later buckets' gradients are computed."""
    buf = bucket.buffer()
    return state.allreduce(buf, op="avg", out=buf, async_op=True).get_future()


HOOKS = {"b": gpurun_hook, "c": gpurun_overlap_hook}
NAMES = {"b": "DDP + gpurun allreduce hook", "c": "DDP + gpurun async allreduce hook (overlap)"}


def train(variant):
    model = DDP(make_model())
    if variant in HOOKS:
        import gpurun
        model.register_comm_hook(gpurun.init(), HOOKS[variant])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    losses = []
    t0 = None
    for step in range(args.steps):
        if step == args.warmup:
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        x, y = batch(step)
        opt.zero_grad()
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if cuda:
        torch.cuda.synchronize()
    rate = (args.steps - args.warmup) * args.batch / (time.perf_counter() - t0)
    flat = torch.cat([q.detach().reshape(-1) for q in model.module.parameters()]).cpu()
    return losses, flat, rate


failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    if rank == 0 or not ok:
        print("rank %d: %s: %s" % (rank, "ok" if ok else "FAIL", what), flush=True)


results, rates = {}, {}
variants = {"both": ["a", "b"], "all": ["a", "b", "c"]}.get(args.variant, [args.variant])
for rnd in range(1, args.rounds):  # extra rounds first, rotating which variant goes first
    for v in variants[rnd % len(variants):] + variants[:rnd % len(variants)]:
        rates.setdefault(v, []).append(train(v)[2])
for v in variants:
    losses, flat, rate = train(v)
    rates.setdefault(v, []).append(rate)
    results[v] = flat
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    print("rank %d: variant %s (%s): loss %.4f -> %.4f, %.0f samples/s" % (
        rank, v, "DDP gloo" if v == "a" and not cuda else "DDP nccl" if v == "a" else
        NAMES[v], first, last, rate), flush=True)
    check(last < 0.5 * first, "variant %s: the loss falls below half (%.4f -> %.4f)" % (v, first, last))
    # identical weights on every rank: gather everyone's and compare bit for bit
    every = [torch.empty_like(flat) for _ in range(size)]
    dist.all_gather(every, flat)
    check(all(torch.equal(every[0], e) for e in every),
          "variant %s: all %d ranks hold identical weights" % (v, size))

for v in ("b", "c"):
    if "a" in results and v in results:
        a, b = results["a"], results[v]
        diff = (a - b).abs().max().item() / (1 + a.abs().max().item())
        check(diff <= args.tol, "(a) and (%s) agree: max |a-%s|/(1+max|a|) = %.2e <= %.0e"
              % (v, v, diff, args.tol))
if "b" in results and "c" in results:
    check(torch.equal(results["b"], results["c"]),
          "(b) and (c) hold bitwise identical weights (the same allreduce, waited or not)")

if args.rounds > 1 and "a" in rates and len(rates) > 1:
    # samples/s of the slowest rank in each round, then each variant over (a) per round
    slow = {v: [] for v in rates}
    for v, rs in rates.items():
        for r in rs:
            t = torch.tensor([r])
            dist.all_reduce(t, op=dist.ReduceOp.MIN)
            slow[v].append(t.item())
    if rank == 0:
        parts = []
        for v in variants:
            med = sorted(slow[v])[len(slow[v]) // 2]
            part = "(%s) median %.0f" % (v, med)
            if v != "a":
                ratio = sorted(x / y for y, x in zip(slow["a"], slow[v]))
                part += ", (%s)/(a) %.2f [%.2f-%.2f]" % (v, ratio[len(ratio) // 2], ratio[0],
                                                         ratio[-1])
            parts.append(part)
        print("rounds %d, %d ranks: samples/s per rank (slowest rank): %s" % (
            args.rounds, size, "; ".join(parts)), flush=True)

dist.destroy_process_group()
if "b" in results or "c" in results:
    import gpurun
    gpurun.finalize()
sys.exit(1 if failures else 0)
