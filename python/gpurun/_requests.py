"""Requests of the collectives started with async_op=True, and the thread that completes them.

A Request wraps one gr_request. It keeps the call's buffers (and any staging copy) alive until
the C library has finished with them, and it is completed exactly once, by whichever comes
first: the caller's wait() or test(), or the progress thread.

Lifetime: every started request sits in a registry (the engine's table) until it is complete, so
a Request the caller drops unwaited keeps its buffers, and the progress thread still completes
it. Waiting in __del__ instead would block wherever the garbage collector happens to run (inside
another gpurun call holding the communicator's lock, or at interpreter exit on one rank only)
and could deadlock; the registry never blocks and needs no help from the caller. A dropped
request that fails prints its sentence to stderr, since nobody is left to raise it to.

Progress: one daemon thread for the whole process, started with the first request, tests every
outstanding request and sleeps when none finished (50 us, doubling to 1 ms, woken early by a new
request; it blocks on a condition when nothing is outstanding). So a request, and the torch
future of it, completes while the caller computes, and DDP can wait on gpurun's future. The cost
is one thread that wakes at most every millisecond while requests are outstanding, and a
completion latency of up to that nap; wait() does not pay it, as it calls gr_wait itself.
set_progress_thread(False) turns the thread off: requests then complete only in wait() and
test(), and so do their futures.

Locking: gr_test moves the communicator's other calls along and writes its state, and coll.h
says a communicator is used by one thread at a time. So every call the package makes into the C
library on a communicator holds that communicator's lock, and the progress thread only takes it
without blocking (a communicator busy in a blocking call is moved along by that call). Futures
are completed, and their callbacks run, after the lock is released.
"""
import ctypes
import sys
import threading

_NAP_MIN, _NAP_MAX = 50e-6, 1e-3

# set by configure(): the C functions and the package's Error class
_gr_test = _gr_wait = _last_error = _Error = None


def configure(gr_test, gr_wait, last_error, error_cls):
    global _gr_test, _gr_wait, _last_error, _Error
    _gr_test, _gr_wait, _last_error, _Error = gr_test, gr_wait, last_error, error_cls


class _Engine:
    """The registry of outstanding requests and the progress thread that tests them."""

    def __init__(self):
        self.cv = threading.Condition(threading.Lock())  # guards ops, futures, done flags
        self.ops = {}  # id -> Request, in start order
        self.thread = None
        self.stop = False
        self.use_thread = True

    def add(self, req):
        with self.cv:
            self.ops[id(req)] = req
            self._start_locked()
            self.cv.notify()

    def _start_locked(self):
        if self.use_thread and self.thread is None and self.ops:
            self.stop = False
            self.thread = threading.Thread(target=self._loop, name="gpurun-progress", daemon=True)
            self.thread.start()

    def outstanding(self, comm=None):
        with self.cv:
            return [r for r in self.ops.values() if comm is None or r._comm is comm]

    def halt(self):
        """Stop the progress thread (finalize, or set_progress_thread(False))."""
        with self.cv:
            t, self.thread = self.thread, None
            self.stop = True
            self.cv.notify_all()
        if t is not None and t is not threading.current_thread():
            t.join()

    @staticmethod
    def _sweep(ops):
        finished = 0
        for r in ops:
            try:
                finished += r._poll()
            except Exception as e:  # noqa: BLE001 - the thread must outlive any one request
                print("gpurun: the progress thread: %s" % e, file=sys.stderr, flush=True)
        return finished

    def _loop(self):
        nap = _NAP_MIN
        while True:
            with self.cv:
                while not self.ops and not self.stop:
                    self.cv.wait()
                if self.stop:
                    return
                ops = list(self.ops.values())
            finished = self._sweep(ops)
            del ops  # a finished request is freed once its caller drops it
            if finished:
                nap = _NAP_MIN
                continue
            with self.cv:
                if self.stop:
                    return
                if self.ops:
                    self.cv.wait(nap)  # a new request (notify) ends the nap early
            nap = min(2 * nap, _NAP_MAX)


_engine = _Engine()


def set_progress_thread(enabled):
    """Whether a background thread completes requests (default True); off, they complete only
    in wait() and test()."""
    if enabled is not True and enabled is not False:
        raise TypeError("set_progress_thread: enabled must be True or False, not %r" % (enabled,))
    _engine.use_thread = enabled
    if not enabled:
        _engine.halt()
    else:
        with _engine.cv:
            _engine._start_locked()  # for what is outstanding already


def drain(comm=None):
    """Complete every outstanding request (of comm, or of all communicators) before the
    communicator goes; each outcome stays with its request (raised by its wait(), or printed
    when the request is dropped unseen)."""
    for r in _engine.outstanding(comm):
        r._settle()


class Request:
    """A collective started with async_op=True. wait() returns what the blocking form returns
    (or raises its error); test() never blocks and is True once the call is done; get_future()
    gives a torch.futures.Future completed with the same value."""

    __slots__ = ("_comm", "_call", "_h", "_keep", "_staged", "_value", "_rc", "_msg", "_done",
                 "_fut", "_fut_set", "_seen", "__weakref__")

    def __init__(self, comm, call, handle, keep, staged, value):
        self._comm = comm  # its _lock serialises the C calls on the communicator
        self._call = call
        self._h = handle  # ctypes.c_void_p holding the gr_request *
        self._keep = keep  # every buffer the C side reads or writes, until it is done
        self._staged = staged  # _Buf whose values go back into the caller's array when done
        self._value = value
        self._rc, self._msg = 0, None
        self._done = False
        self._fut = None
        self._fut_set = False
        self._seen = False  # the outcome reached the caller (wait, test or a future)

    def __repr__(self):
        return "<gpurun.Request %s, %s>" % (self._call, (
            "pending" if not self._done else "done" if not self._rc else "failed"))

    # ---- completion (under the communicator's lock) --------------------------------------

    def _finish_locked(self, rc, done):
        """After gr_test/gr_wait: the outcome, the write-backs, the registry."""
        if not done and rc == 0:
            return False
        self._rc = rc
        if rc:
            self._msg = _last_error().decode(errors="replace")  # this thread's sentence
        else:
            for b in self._staged:
                b.back[...] = b.obj
        self._keep = self._staged = None
        with _engine.cv:
            self._done = True
            _engine.ops.pop(id(self), None)
            fut = self._fut if self._fut is not None and not self._fut_set else None
            self._fut_set = self._fut_set or fut is not None
        return fut if fut is not None else True

    def _poll(self):
        """The progress thread's test: 1 when this call finished now."""
        lock = self._comm._lock
        if self._done or not lock.acquire(False):
            return 0
        try:
            if self._done:
                return 0
            d = ctypes.c_int(0)
            fin = self._finish_locked(_gr_test(ctypes.byref(self._h), ctypes.byref(d)), d.value)
        finally:
            lock.release()
        if fin is False:
            return 0
        self._deliver(fin)
        return 1

    def _deliver(self, fin):
        """Outside the lock: the future's value or exception (its callbacks run here)."""
        if fin is not True:
            self._seen = True
            if self._rc:
                fin.set_exception(self._error())
            else:
                fin.set_result(self._value)

    def _error(self):
        return _Error(self._msg, self._rc)

    def _outcome(self):
        self._seen = True
        if self._rc:
            raise self._error()
        return self._value

    # ---- the caller's side ---------------------------------------------------------------

    def wait(self):
        """Block until the call is done; its result (as the blocking form returns it)."""
        self._settle()
        return self._outcome()

    def _settle(self):
        if not self._done:
            with self._comm._lock:
                fin = None
                if not self._done:
                    fin = self._finish_locked(_gr_wait(ctypes.byref(self._h)), 1)
            if fin is not None:
                self._deliver(fin)

    def test(self):
        """True when the call is done (then wait() returns at once), False while it runs; never
        blocks (False also while another thread is moving this communicator). Raises the call's
        error once it has failed."""
        if not self._done:
            lock = self._comm._lock
            if not lock.acquire(False):
                return False
            try:
                fin = False
                if not self._done:
                    d = ctypes.c_int(0)
                    fin = self._finish_locked(_gr_test(ctypes.byref(self._h), ctypes.byref(d)),
                                              d.value)
            finally:
                lock.release()
            if fin is False and not self._done:
                return False
            if fin is not False:
                self._deliver(fin)
        self._outcome()
        return True

    def is_completed(self):
        """True once the call is done, without moving it (torch's Work.is_completed)."""
        return self._done

    def get_future(self):
        """A torch.futures.Future that completes with wait()'s value (or its error). Needs
        torch; the same future on every call."""
        try:
            import torch.futures
        except ImportError as e:
            raise ImportError("gpurun: Request.get_future() returns a torch.futures.Future, but "
                              "torch cannot be imported here (%s); use wait() or test()" % e
                              ) from None
        with _engine.cv:
            if self._fut is None:
                self._fut = torch.futures.Future()
            fut = self._fut
            now = self._done and not self._fut_set
            self._fut_set = self._fut_set or now
        if now:
            self._deliver(fut)
        return fut

    def __del__(self):
        # never blocks: an outstanding request is still in the registry, so this runs only once
        # it is complete; a failure nobody saw is printed
        try:
            if self._rc and not self._seen:
                print("gpurun: a request dropped without wait(): %s" % self._msg,
                      file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
