"""GPURUN_TIMEOUT from Python: rank 1 skips an allreduce; rank 0's call raises gpurun.Error with
status GR_ERR_TIMEOUT and the C library's sentence, and later calls on the aborted world raise
GR_ERR_ABORTED. Run with GPURUN_TIMEOUT=2 under mpirun -np 2 gpurun python3 THIS."""
import os
import sys
import time

import numpy as np

import gpurun

timeout = float(os.environ["GPURUN_TIMEOUT"])
w = gpurun.init()
fail = 0
if w.rank == 0:
    t0 = time.monotonic()
    try:
        w.allreduce(np.ones(1000, np.float32))
        print("FAIL: no timeout")
        fail = 1
    except gpurun.Error as e:
        took = time.monotonic() - t0
        print("rank 0: %s after %.1f s: %s" % (e.status, took, e), flush=True)
        if e.status != "GR_ERR_TIMEOUT" or "allreduce" not in str(e) or took < timeout * 0.9:
            print("FAIL: wrong error or too early")
            fail = 1
    try:
        w.barrier()
        print("FAIL: the aborted world still works")
        fail = 1
    except gpurun.Error as e:
        print("rank 0: then %s: %s" % (e.status, e), flush=True)
        fail |= e.status != "GR_ERR_ABORTED"
else:
    time.sleep(timeout + 1)  # never calls the allreduce
gpurun.finalize()  # destroying the aborted world and MPI_Finalize must not hang
sys.exit(fail)
