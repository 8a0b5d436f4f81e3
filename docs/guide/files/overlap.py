"""Start collectives with async_op=True, work while they travel, then collect the results."""
import numpy as np
import torch

import gpurun

w = gpurun.init()
g = np.full(4, float(w.rank + 1))
req = w.allreduce(g, out=g, async_op=True)  # returns at once; g is written when it completes
work = 0
while not req.test():  # never blocks: True once the allreduce is done
    work += sum(i * i for i in range(1000))  # local work meanwhile
total = req.wait()  # the same g, now the sum over the ranks
fut = w.allgather(torch.tensor([w.rank]), async_op=True).get_future()
ranks = fut.then(lambda f: f.value().tolist()).wait()  # completed without a wait() of ours
if w.rank == 0:
    print(f"{w.size} ranks: sum {total.tolist()}, ranks {ranks}, {req!r}")
