#!/usr/bin/env python3
"""Data-parallel training of a small network on a synthetic data set, started by any launcher
through gpurun (which exports RANK, WORLD_SIZE, MASTER_ADDR, ... as torchrun would):

    mpirun -np 2 gpurun python3 examples/torch/ddp.py
    srun -n 2 gpurun python3 examples/torch/ddp.py

Two variants from the same initial weights and the same batches:
  (a) plain DistributedDataParallel over init_method="env://" (gloo on CPU, nccl on GPU);
  (b) the same with gpurun's allreduce (op="avg") as DDP's communication hook.
Self-checks (exit 1 when one fails): the loss falls to below half its start in each variant,
every rank holds bitwise identical weights, and (a) and (b) agree within --tol (relative to the
weights' size: the two sum the gradients in different orders, so float32 rounding differs).
Each rank prints its samples/s per variant.
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
p.add_argument("--variant", choices=["a", "b", "both"], default="both")
p.add_argument("--steps", type=int, default=40)
p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
p.add_argument("--tol", type=float, default=1e-4, help="max |a-b| / (1 + max |a|) allowed")
p.add_argument("--warmup", type=int, default=3, help="steps left out of samples/s")
p.add_argument("--rounds", type=int, default=1,
               help="benchmark: train the variants this many times, alternating, and print the "
                    "samples/s ratio (b)/(a) as median [min-max] (checks use the first round)")
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
    (on a CUDA tensor, on its current stream through NCCL)."""
    buf = bucket.buffer()
    state.allreduce(buf, op="avg", out=buf)
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


def train(variant):
    model = DDP(make_model())
    if variant == "b":
        import gpurun
        model.register_comm_hook(gpurun.init(), gpurun_hook)
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
variants = ["a", "b"] if args.variant == "both" else [args.variant]
for rnd in range(1, args.rounds):  # extra rounds first, alternating which variant goes first
    for v in (variants if rnd % 2 else variants[::-1]):
        rates.setdefault(v, []).append(train(v)[2])
for v in variants:
    losses, flat, rate = train(v)
    rates.setdefault(v, []).append(rate)
    results[v] = flat
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    print("rank %d: variant %s (%s): loss %.4f -> %.4f, %.0f samples/s" % (
        rank, v, "DDP gloo" if v == "a" and not cuda else "DDP nccl" if v == "a" else
        "DDP + gpurun allreduce hook", first, last, rate), flush=True)
    check(last < 0.5 * first, "variant %s: the loss falls below half (%.4f -> %.4f)" % (v, first, last))
    # identical weights on every rank: gather everyone's and compare bit for bit
    every = [torch.empty_like(flat) for _ in range(size)]
    dist.all_gather(every, flat)
    check(all(torch.equal(every[0], e) for e in every),
          "variant %s: all %d ranks hold identical weights" % (v, size))

if len(results) == 2:
    a, b = results["a"], results["b"]
    diff = (a - b).abs().max().item() / (1 + a.abs().max().item())
    check(diff <= args.tol, "(a) and (b) agree: max |a-b|/(1+max|a|) = %.2e <= %.0e" % (diff, args.tol))

if args.rounds > 1 and len(rates) == 2:
    # samples/s of the slowest rank in each round, then the ratio per round
    slow = {v: [] for v in rates}
    for v, rs in rates.items():
        for r in rs:
            t = torch.tensor([r])
            dist.all_reduce(t, op=dist.ReduceOp.MIN)
            slow[v].append(t.item())
    ratio = sorted(b / a for a, b in zip(slow["a"], slow["b"]))
    if rank == 0:
        print("rounds %d, %d ranks: samples/s per rank (slowest rank) (a) median %.0f, (b) median "
              "%.0f; (b)/(a) %.2f [%.2f-%.2f]" % (
                  args.rounds, size, sorted(slow["a"])[len(ratio) // 2],
                  sorted(slow["b"])[len(ratio) // 2], ratio[len(ratio) // 2], ratio[0],
                  ratio[-1]), flush=True)

dist.destroy_process_group()
if "b" in results:
    import gpurun
    gpurun.finalize()
sys.exit(1 if failures else 0)
