"""GPURUN_TIMEOUT for a request nobody waits for: rank 1 never starts an allreduce that rank 0
started with async_op=True. The progress thread finishes rank 0's request with GR_ERR_TIMEOUT
(counted from its start), its future carries the same gpurun.Error, and later calls on the
aborted world raise GR_ERR_ABORTED. Run with GPURUN_TIMEOUT=2 under mpirun -np 2 gpurun
python3 THIS."""
import os
import sys
import time

import numpy as np

import gpurun

try:
    import torch
except ImportError:
    torch = None

timeout = float(os.environ["GPURUN_TIMEOUT"])
w = gpurun.init()
fail = []


def check(ok, what):
    if not ok:
        fail.append(what)
        print("rank %d: FAIL: %s" % (w.rank, what), flush=True)


if w.rank == 0:
    t0 = time.monotonic()
    r = w.allreduce(np.ones(1000, np.float32), async_op=True)
    fut = r.get_future() if torch is not None else None
    while not r.is_completed() and time.monotonic() - t0 < 10 * timeout:
        time.sleep(0.01)  # no wait(), no test(): the progress thread alone
    took = time.monotonic() - t0
    check(r.is_completed() and took >= 0.9 * timeout,
          "the request finished on its own after the timeout (%.1f s)" % took)
    try:
        r.wait()
        check(False, "wait() raised nothing")
    except gpurun.Error as e:
        print("rank 0: %s after %.1f s: %s" % (e.status, took, e), flush=True)
        check(e.status == "GR_ERR_TIMEOUT" and "allreduce" in str(e), "GR_ERR_TIMEOUT, named")
    if fut is not None:
        try:
            fut.wait()
            check(False, "the future raised nothing")
        except gpurun.Error as e:
            check(e.status == "GR_ERR_TIMEOUT", "the future's error is the same gpurun.Error")
    try:
        w.barrier()
        check(False, "the aborted world still works")
    except gpurun.Error as e:
        check(e.status == "GR_ERR_ABORTED", "then GR_ERR_ABORTED (%s)" % e.status)
else:
    time.sleep(timeout + 1)  # never starts the allreduce
gpurun.finalize()  # destroying the aborted world and MPI_Finalize must not hang
print("rank %d: %d failure(s)" % (w.rank, len(fail)), flush=True)
sys.exit(1 if fail else 0)
