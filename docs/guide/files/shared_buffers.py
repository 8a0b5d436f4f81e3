"""Arrays the collectives reach directly: gpurun.empty (gr_mem_alloc(3) underneath)."""
import numpy as np

import gpurun

w = gpurun.init()
g = gpurun.empty(1 << 20, "float32")  # 4 MiB per rank, in memory every rank of the node maps
g[:] = w.rank + 1
w.allreduce(g, out=g)  # direct: each rank sums its share of every rank's g into every g
mine = np.full(1 << 20, float(w.rank + 1), dtype=np.float32)
w.allreduce(mine, out=mine)  # an ordinary array: the same result, through a copy
if w.rank == 0:
    print(f"{w.size} ranks: g[0] = {g[0]}, g[-1] = {g[-1]}, same as ordinary memory: "
          f"{bool((g == mine).all())}")
gpurun.free(g)  # collective, like the allocation
