"""docs/guide/library.md: gpurun's collectives on NumPy arrays and torch tensors.
Run: PYTHONPATH=build/python mpirun -np 2 gpurun /usr/bin/python3 allreduce.py"""
import numpy as np
import torch

import gpurun

gpurun.init()
w = gpurun.world()
info = gpurun.info()
x = np.arange(4, dtype=np.float64) + w.rank
s = w.allreduce(x, op="sum")                       # a new array
t = torch.full((3,), float(w.rank + 1))
w.allreduce(t, op="max", out=t)                    # in place, on a tensor
cpus = w.allgather(np.array([len(info["cpus"])], dtype=np.int64))  # one entry per rank
if w.rank == 0:  # one rank prints: lines of several ranks can interleave in mpirun's output
    print(f"{w.size} ranks, backend {w.backend}: sum {s.tolist()} max {t.tolist()}")
    print(f"rank 0 on {info['node']}, cpus {info['cpus']}; cpu-list lengths {cpus.tolist()}")
