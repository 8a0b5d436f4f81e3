"""gpurun from Python: the rank's plan and gpurun's collectives on NumPy arrays and torch tensors.

    import gpurun
    gpurun.init()                        # idempotent; finalize() also runs at interpreter exit
    w = gpurun.world()                   # Comm: .rank, .size, .backend, .split(color, key)
    y = w.allreduce(x, op="sum")         # a new array/tensor like x
    w.allreduce(x, op="max", out=x)      # in place
    r = w.allreduce(x, async_op=True)    # every collective: a Request (wait, test, get_future)

A thin ctypes layer over libgpurun (no build step, no compiler on the user's side). Host buffers
(NumPy, CPU tensors) go through the communicator's backend as in C (the MPI backend here); CUDA
tensors are passed as device pointers with the tensor's current CUDA stream, which the NCCL
backend orders the call on. Every failure raises gpurun.Error: str(e) is gr_last_error()'s
sentence, e.status the status name ("GR_ERR_TIMEOUT"), e.code its number. GPURUN_TIMEOUT and
GPURUN_CHECK are read by the C library at init(), as in C.

Arrays in the other byte order or unaligned are reduced by their values (converted for the call,
written back in the caller's order); masked arrays, tensors on devices gpurun cannot reach and
writes autograd forbids are refused, the last with torch's own sentences; every write into a
tensor bumps its version counter. python/README.md has the rules.
"""
import atexit
import ctypes
import operator
import threading
import weakref

__all__ = ["init", "finalize", "initialized", "world", "info", "group", "Comm", "Request",
           "empty", "empty_torch", "free",
           "set_progress_thread", "Error", "ArgumentTypeError", "DTYPES", "OPS"]

# ---- the library -----------------------------------------------------------------------------

from . import _loader  # where the library is looked for (GPURUN_LIB, prefixes, loader path)

__version__ = _loader.version()
_lib = _loader.load()
_c = ctypes
_vp, _sz, _int = _c.c_void_p, _c.c_size_t, _c.c_int


def _proto(name, *args, restype=_int):
    f = getattr(_lib, name)
    f.argtypes = list(args)
    f.restype = restype
    return f


_gr_init = _proto("gr_init", _vp, _vp)
_gr_finalize = _proto("gr_finalize")
_gr_initialized = _proto("gr_initialized")
_gr_world = _proto("gr_world", restype=_vp)
_gr_rank_info = _proto("gr_rank_info", _vp)
_gr_rank_info_sizeof = _proto("gr_rank_info_sizeof", restype=_c.c_size_t)
_gr_last_error = _proto("gr_last_error", restype=_c.c_char_p)
_gr_clear_error = _proto("gr_clear_error", restype=None)
_gr_status_name = _proto("gr_status_name", _int, restype=_c.c_char_p)
_gr_comm_split = _proto("gr_comm_split", _vp, _int, _int, _c.POINTER(_vp))
_gr_comm_destroy = _proto("gr_comm_destroy", _vp)
_gr_comm_rank = _proto("gr_comm_rank", _vp)
_gr_comm_size = _proto("gr_comm_size", _vp)
_gr_comm_backend = _proto("gr_comm_backend", _vp)
_gr_allreduce = _proto("gr_allreduce", _vp, _vp, _sz, _int, _int, _vp, _vp)
_gr_broadcast = _proto("gr_broadcast", _vp, _vp, _sz, _int, _int, _vp, _vp)
_gr_reduce = _proto("gr_reduce", _vp, _vp, _sz, _int, _int, _int, _vp, _vp)
_gr_allgather = _proto("gr_allgather", _vp, _vp, _sz, _int, _vp, _vp)
_gr_reduce_scatter = _proto("gr_reduce_scatter", _vp, _vp, _sz, _int, _int, _vp, _vp)
_gr_alltoall = _proto("gr_alltoall", _vp, _vp, _sz, _int, _vp, _vp)
_vpp, _szp = _c.POINTER(_vp), _c.POINTER(_sz)
_gr_allreduce_multi = _proto("gr_allreduce_multi", _vpp, _vpp, _szp, _sz, _int, _int, _vp, _vp)
_gr_send = _proto("gr_send", _vp, _sz, _int, _int, _vp, _vp)
_gr_recv = _proto("gr_recv", _vp, _sz, _int, _int, _vp, _vp)
_gr_barrier = _proto("gr_barrier", _vp)
_gr_group_start = _proto("gr_group_start")
_gr_group_end = _proto("gr_group_end")
_gr_comm_synchronize = _proto("gr_comm_synchronize", _vp, _vp)
_gr_test = _proto("gr_test", _c.POINTER(_vp), _c.POINTER(_int))
_gr_wait = _proto("gr_wait", _c.POINTER(_vp))
# gr_mem_alloc/gr_mem_free (an older libgpurun without them still loads; empty() then raises)
_gr_mem_alloc = (_proto("gr_mem_alloc", _vp, _sz, _c.POINTER(_vp))
                 if hasattr(_lib, "gr_mem_alloc") else None)
_gr_mem_free = _proto("gr_mem_free", _vp, _vp) if hasattr(_lib, "gr_mem_free") else None

# The non-blocking forms: each takes the blocking form's arguments, then gr_request **req. A
# libgpurun without one (an older build) still loads; async_op=True of that call then raises
# NotImplementedError naming the C function.
_INAMES = {"allreduce": "gr_iallreduce", "broadcast": "gr_ibroadcast", "reduce": "gr_ireduce",
           "allgather": "gr_iallgather", "reduce_scatter": "gr_ireduce_scatter",
           "alltoall": "gr_ialltoall", "send": "gr_isend", "recv": "gr_irecv",
           "barrier": "gr_ibarrier", "allreduce_multi": "gr_iallreduce_multi"}
_IARGS = {"allreduce": (_vp, _vp, _sz, _int, _int, _vp, _vp),
          "broadcast": (_vp, _vp, _sz, _int, _int, _vp, _vp),
          "reduce": (_vp, _vp, _sz, _int, _int, _int, _vp, _vp),
          "allgather": (_vp, _vp, _sz, _int, _vp, _vp),
          "reduce_scatter": (_vp, _vp, _sz, _int, _int, _vp, _vp),
          "alltoall": (_vp, _vp, _sz, _int, _vp, _vp),
          "send": (_vp, _sz, _int, _int, _vp, _vp),
          "recv": (_vp, _sz, _int, _int, _vp, _vp),
          "barrier": (_vp,),
          "allreduce_multi": (_vpp, _vpp, _szp, _sz, _int, _int, _vp, _vp)}
_IFORMS = {call: _proto(name, *_IARGS[call], _c.POINTER(_vp)) if hasattr(_lib, name) else None
           for call, name in _INAMES.items()}
_BLOCKING = {"allreduce": _gr_allreduce, "broadcast": _gr_broadcast, "reduce": _gr_reduce,
             "allgather": _gr_allgather, "reduce_scatter": _gr_reduce_scatter,
             "alltoall": _gr_alltoall, "send": _gr_send, "recv": _gr_recv,
             "barrier": _gr_barrier, "allreduce_multi": _gr_allreduce_multi}


class Error(RuntimeError):
    """A gpurun call failed: str(e) is gr_last_error()'s sentence, e.status the code's name."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code
        self.status = _gr_status_name(code).decode()


def _check(rc):
    if rc != 0:
        raise Error(_gr_last_error().decode(errors="replace"), rc)


_RANK = None  # this process's world rank once known, for Python-side messages


from . import _requests  # noqa: E402  (async_op=True: Request and the progress thread)

_requests.configure(_gr_test, _gr_wait, _gr_last_error, Error)
Request = _requests.Request
set_progress_thread = _requests.set_progress_thread


class ArgumentTypeError(Error, TypeError):
    """A gpurun.Error (GR_ERR_INVALID) that is also a TypeError: the object passed is of a kind
    gpurun does not take (a list, a masked array, a float as a rank)."""


def _invalid(call, msg, cls=Error):
    """An argument the C API cannot even express (an unknown op name, a non-array): raised here,
    in the C library's own sentence form."""
    where = "rank %d: " % _RANK if _RANK is not None else ""
    # one line whatever the names in it hold (a dtype's or a type's name is the caller's text)
    msg = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in msg)
    return cls("%s%s: %s" % (where, call, msg), 1)  # GR_ERR_INVALID


def _index(call, what, v):
    """An integer argument (a rank, a color, a key): ints and NumPy integers, never a float or a
    string that int() would silently truncate or parse."""
    try:
        return operator.index(v)
    except TypeError:
        raise _invalid(call, "%s must be an integer, not %s" % (what, type(v).__name__),
                       ArgumentTypeError) from None


# ---- dtypes and ops (both ways) ----------------------------------------------------------------

# gr_dtype values of include/gpurun/coll.h, by the name NumPy and torch both use
DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
          "float16": 6, "bfloat16": 7, "float32": 8, "float64": 9}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}
BACKENDS = {0: "auto", 1: "nccl", 2: "mpi"}


def _np():
    import numpy
    return numpy


try:
    _ndarray = _np().ndarray
except ImportError:  # torch tensors only
    _ndarray = None


def _torch():
    import sys
    return sys.modules.get("torch")  # never import torch ourselves: it is slow and optional


_DT_CACHE = {}  # dtype object -> gr_dtype: str() of a NumPy dtype costs microseconds per call


def dtype_code(dt):
    """gr_dtype of a NumPy dtype, a torch.dtype or a name ("float16"); Error if none."""
    try:
        return _DT_CACHE[dt]
    except (KeyError, TypeError):
        pass
    code = _dtype_code(dt)
    try:
        _DT_CACHE[dt] = code
    except TypeError:
        pass
    return code


def _dtype_code(dt):
    name = str(dt)
    if name.startswith("torch."):
        name = name[6:]
    name = {"half": "float16", "float": "float32", "double": "float64", "long": "int64",
            "int": "int32"}.get(name, name)
    if name not in DTYPES:
        try:
            npdt = _np().dtype(dt)
        except Exception:  # not a NumPy dtype at all (torch.bool, "bogus")
            npdt = None
        if npdt is not None:
            if not npdt.isnative:
                # a gr_dtype is an element in this machine's byte order
                raise _invalid("dtype", "%s is not in native byte order; use %s" % (
                    npdt.str, npdt.newbyteorder("=").name))
            name = npdt.name
    if name not in DTYPES:
        raise _invalid("dtype", "%s has no gpurun dtype (%s)" % (dt, ", ".join(DTYPES)),
                       ArgumentTypeError)
    return DTYPES[name]


def numpy_dtype(code_or_name):
    """The NumPy dtype of a gr_dtype (bfloat16 has none in NumPy: Error)."""
    name = DTYPE_NAMES.get(code_or_name, code_or_name)
    if name == "bfloat16":
        raise _invalid("numpy_dtype", "NumPy has no bfloat16; use a torch tensor")
    return _np().dtype(name)


def torch_dtype(code_or_name):
    """The torch.dtype of a gr_dtype (torch 1.13 has no uint32/uint64: Error)."""
    import torch
    name = DTYPE_NAMES.get(code_or_name, code_or_name)
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise _invalid("torch_dtype", "torch %s has no %s" % (torch.__version__, name))
    return dt


# torch's own sentences for the writes autograd forbids (torch/csrc/autograd: check_inplace,
# throw_error_out_requires_grad), so that a gpurun call fails as the torch operation would
_T_LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
_T_VIEW = "a view of a leaf Variable that requires grad is being used in an in-place operation."
_T_OUT = ("functions with out=... arguments don't support automatic differentiation, but one "
          "of the arguments requires grad.")
_T_INFER = ("Inplace update to inference tensor outside InferenceMode is not allowed.You can make "
            "a clone to get a normal tensor before doing inplace update.See "
            "https://github.com/pytorch/rfcs/pull/17 for more details.")


_increment_version = None  # torch.autograd.graph.increment_version where torch has it


def _bump_version(t, x):
    """Tell autograd that x was written in place: its version counter (shared with its views and
    detached aliases) goes up, so a backward() that saved x raises torch's own error instead of
    using the new values. Where torch has no increment_version, x.set_(x) does it: an in-place
    operation that leaves storage, shape and strides as they are (about 1 us)."""
    global _increment_version
    if _increment_version is None:
        graph = getattr(t.autograd, "graph", None)
        _increment_version = getattr(graph, "increment_version", None) or (lambda x: x.set_(x))
    if not x.is_inference():  # inference tensors have no version counter
        _increment_version(x)


def _torch_write(t, call, dst, srcs, inplace, bump=True):
    """The checks torch makes before it writes into dst (in place when inplace, else as an out=
    argument of a function reading srcs), then the version bump. gpurun's collectives are not
    differentiable: under grad mode no tensor that autograd tracks may be written."""
    if dst.is_inference() and not t.is_inference_mode_enabled():
        raise _invalid(call, _T_INFER)
    if t.is_grad_enabled():
        if inplace and dst.requires_grad:
            base = dst._base
            if base is not None and base.is_leaf:
                raise _invalid(call, _T_VIEW)
            if dst.is_leaf:
                raise _invalid(call, _T_LEAF)
            raise _invalid(call, "%s requires grad and gpurun's collectives are not "
                           "differentiable: call it under torch.no_grad() or on a detached "
                           "tensor" % ("x" if dst is srcs[0] else "out"))
        if not inplace and (dst.requires_grad or any(
                isinstance(s, t.Tensor) and s.requires_grad for s in srcs)):
            raise _invalid(call, _T_OUT)
    if bump:
        _bump_version(t, dst)


class _Buf:
    """A contiguous, aligned, native-order buffer view of an array or tensor: pointer, element
    count, dtype, stream. An input that is not one is copied into one. A written buffer (writable)
    must be contiguous; a NumPy one in another byte order or unaligned is staged: the call works
    on a native copy (obj) and finish() writes the values back into the caller's array (back)."""
    __slots__ = ("obj", "ptr", "count", "dtype", "stream", "is_torch", "back")

    def __init__(self, x, call, what, writable=False):
        t = _torch()
        self.back = None
        if t is not None and isinstance(x, t.Tensor):
            if x.layout != t.strided:
                raise _invalid(call, "%s is a %s tensor; gpurun takes dense (strided) tensors"
                               % (what, str(x.layout).replace("torch.", "")), ArgumentTypeError)
            if x.device.type not in ("cpu", "cuda"):
                raise _invalid(call, "%s is on device %s, which gpurun cannot reach (cpu and cuda "
                               "tensors only)" % (what, x.device), ArgumentTypeError)
            code = dtype_code(x.dtype)
            if not x.is_contiguous() or x.is_neg() or x.is_conj():
                if writable and not x.is_contiguous():
                    raise _invalid(call, "%s is not contiguous (it is written in place)" % what)
                if writable:
                    raise _invalid(call, "%s is a negated or conjugated view (it is written in "
                                   "place): its memory holds other values than it reads" % what)
                # the values, materialised: a negated or conjugated view's memory holds others
                x = x.resolve_neg().resolve_conj().contiguous()
            self.is_torch = True
            self.ptr = x.data_ptr()
            self.count = x.numel()
            self.dtype = code
            # CUDA tensors: the call is ordered on the tensor's current stream (NCCL backend)
            self.stream = t.cuda.current_stream(x.device).cuda_stream if x.is_cuda else None
        else:
            np = _np()
            if not isinstance(x, np.ndarray):
                raise _invalid(call, "%s is a %s, not a NumPy array or torch tensor"
                               % (what, type(x).__name__), ArgumentTypeError)
            if isinstance(x, np.ma.MaskedArray):
                # which elements a cross-rank reduction should skip, and what mask the result
                # gets, has no one answer: the caller says it with filled() or the data
                raise _invalid(call, "%s is a masked array; gpurun does not apply masks: pass "
                               "%s.filled(value) (masked elements replaced by value) or %s.data"
                               % (what, what, what), ArgumentTypeError)
            if writable and not x.flags.writeable:
                raise _invalid(call, "%s is read-only" % what)
            if writable and not x.flags.c_contiguous:
                raise _invalid(call, "%s is not C-contiguous (it is written in place)" % what)
            dt = x.dtype
            if not dt.isnative:
                dt = dt.newbyteorder("=")
            code = dtype_code(dt)
            if dt is not x.dtype or not x.flags.aligned or not x.flags.c_contiguous:
                # the values in this machine's order, aligned and contiguous; written buffers go
                # back to the caller's array, in its own byte order, when the call has run
                if writable:
                    self.back = x
                x = np.asarray(x, dtype=dt, order="C")
                if not x.flags.aligned or x is self.back:
                    x = x.copy()
            self.is_torch = False
            self.ptr = x.__array_interface__["data"][0]
            self.count = x.size
            self.dtype = code
            self.stream = None
        self.obj = x


def _finish(*bufs):
    """After a call: write staged buffers back into the caller's arrays. Inside a group the
    calls run at the end of the outermost group, so the write-back waits for it."""
    bufs = [b for b in bufs if b is not None and b.back is not None]
    if not bufs:
        return
    stack = getattr(_tls, "post", None)
    if stack:
        stack[-1].extend(bufs)
    else:
        for b in bufs:
            b.back[...] = b.obj


def _staged(b):
    """(b,) when b's values go back into the caller's array after the call, else ()."""
    return (b,) if b is not None and b.back is not None else ()


def _result(b):
    """What a call returns for a written buffer: the caller's own array when it was staged."""
    return b.back if b.back is not None else b.obj


_strided = None  # torch.strided once torch is seen


def _fast_view(x):
    """(pointer, count, gr_dtype, stream) of a writable contiguous NumPy array or torch tensor
    whose dtype has been seen before, which nothing stops from being written; None otherwise
    (then _Buf and _torch_write do the full checks). A tensor's version is bumped here."""
    if type(x) is _ndarray:
        fl = x.flags
        code = _DT_CACHE.get(x.dtype)  # only native dtypes are ever cached
        if fl.c_contiguous and fl.writeable and fl.aligned and code is not None:
            return x.ctypes.data, x.size, code, None
        return None
    t = _torch()
    if (t is not None and type(x) is t.Tensor and x.layout is t.strided and
            (x.is_cpu or x.is_cuda) and not x.requires_grad and not x.is_inference() and
            not x.is_neg() and x.is_contiguous()):
        code = _DT_CACHE.get(x.dtype)
        if code is not None:
            stream = t.cuda.current_stream(x.device).cuda_stream if x.is_cuda else None
            _bump_version(t, x)
            return x.data_ptr(), x.numel(), code, stream
    return None


def _new_like(x, shape):
    t = _torch()
    if t is not None and isinstance(x, t.Tensor):
        return t.empty(shape, dtype=x.dtype, device=x.device)
    return _np().empty(shape, dtype=x.dtype)


def _op(call, op):
    try:
        return OPS[op]
    except (KeyError, TypeError):
        raise _invalid(call, "op %r is not one of %s" % (op, ", ".join(OPS))) from None


# ---- groups ------------------------------------------------------------------------------------

_tls = threading.local()
_groups_open = 0  # groups open in any thread: the fast paths then step aside


def _keep(*objs):
    """Inside a group the calls run at its end: keep their buffers alive until then."""
    stack = getattr(_tls, "keep", None)
    if stack:
        stack[-1].extend(objs)


class group:
    """with gpurun.group(): ... -- the calls inside are one group (gr_group_start/end), started
    together at the end of the outermost group, as in NCCL."""

    def __enter__(self):
        global _groups_open
        _check(_gr_group_start())
        _groups_open += 1
        if not hasattr(_tls, "keep"):
            _tls.keep = []
            _tls.post = []
        _tls.keep.append([])
        _tls.post.append([])
        return self

    def __exit__(self, exc_type, exc, tb):
        global _groups_open
        _groups_open -= 1
        kept = _tls.keep.pop()
        post = _tls.post.pop()
        # the outermost end runs the queued calls: hold the lock of every communicator in them
        locks = [] if _tls.keep else sorted({id(k): k._lock for k in kept
                                             if isinstance(k, Comm)}.items())
        for _, lk in locks:
            lk.acquire()
        try:
            rc = _gr_group_end()
        finally:
            for _, lk in locks:
                lk.release()
        if _tls.keep:
            # an inner group: its calls run at the outermost group's end, and need their
            # buffers and write-backs until then
            _tls.keep[-1].extend(kept)
            _tls.post[-1].extend(post)
            post = []
        del kept
        if exc_type is None:
            _check(rc)
            for b in post:
                b.back[...] = b.obj
        return False


# ---- communicators -----------------------------------------------------------------------------


class Comm:
    """A gpurun communicator. Collective calls follow coll.h: every rank makes the same calls in
    the same order with the same count, dtype, op and root."""

    def __init__(self, handle, owned):
        self._h = _vp(handle)
        self._owned = owned
        self._lock = threading.Lock()  # held by every C call on it (see _requests)
        self._mem = {}  # address -> ctypes array: gr_mem_alloc memory not freed yet
        self.rank = _gr_comm_rank(self._h)
        self.size = _gr_comm_size(self._h)
        self.backend = BACKENDS.get(_gr_comm_backend(self._h), "?")
        if owned:
            _comms.add(self)

    def __repr__(self):
        return "<gpurun.Comm rank %d of %d, %s>" % (self.rank, self.size, self.backend)

    def _handle(self, call):
        if self._h is None or _world is None:  # freed, or gpurun finalized
            raise Error("%s: the communicator is freed or gpurun is finalized" % call, 10)
        return self._h

    def free(self):
        """Destroy a communicator made by split() (local). The world is freed by finalize()."""
        if self._owned and self._h is not None:
            _requests.drain(self)  # gr_comm_destroy refuses while requests are outstanding
            with self._lock:
                h, self._h = self._h, None
                _comms.discard(self)
                self._mem.clear()  # gr_comm_destroy unmaps it
                rc = _gr_comm_destroy(h) if _gr_initialized() else 0
            _check(rc)

    def _mem_alloc(self, nbytes):
        """gr_mem_alloc on this communicator (collective): a writable ctypes byte array over it,
        kept until _mem_free or free()."""
        if _gr_mem_alloc is None:
            raise NotImplementedError("gpurun: empty() needs gr_mem_alloc, which this libgpurun "
                                      "does not have")
        h = self._handle("empty")
        p = _vp()
        with self._lock:
            rc = _gr_mem_alloc(h, max(int(nbytes), 1), _c.byref(p))
        _check(rc)
        buf = (_c.c_ubyte * max(int(nbytes), 1)).from_address(p.value)
        self._mem[p.value] = buf
        return buf

    def _mem_free(self, addr):
        h = self._handle("free_memory")
        if addr is not None and addr not in self._mem:
            addr = 1  # not ours: gr_mem_free refuses it on every rank with the same sentence
        _requests.drain(self)  # gr_mem_free refuses while requests are outstanding
        with self._lock:
            rc = _gr_mem_free(h, addr)
        _check(rc)
        self._mem.pop(addr, None)

    def split(self, color, key=0):
        """Like MPI_Comm_split; a negative color takes no part and gets None."""
        out = _vp()
        h = self._handle("split")
        color, key = _index("split", "color", color), _index("split", "key", key)
        with self._lock:
            rc = _gr_comm_split(h, color, key, _c.byref(out))
        _check(rc)
        return Comm(out.value, True) if out.value else None

    @staticmethod
    def _written(call, o, srcs, inplace):
        """A tensor of the caller's that the call writes (x in place, or out=): torch's checks
        and version bump (see _torch_write). Results gpurun allocates need neither."""
        if o is not None and o.is_torch:
            _torch_write(_torch(), call, o.obj, srcs, inplace)

    def _run(self, call, async_op, fn, args, keep, staged, value):
        """One call into the C library under the communicator's lock: blocking (fn(*args), the
        write-backs, value), or started (the i-form, a Request that keeps the buffers)."""
        if async_op:
            h = _vp()
            with self._lock:
                rc = fn(*args, _c.byref(h))
            _check(rc)
            r = _requests.Request(self, call, h, keep, staged, value)
            _requests._engine.add(r)
            return r
        _keep(self, *keep)
        with self._lock:
            rc = fn(*args)
        _check(rc)
        _finish(*staged)
        return value

    def _form(self, call, async_op):
        """The C function of call: the blocking one, or its non-blocking form (NotImplementedError
        when this libgpurun has none: the call is never silently run blocking)."""
        if async_op is False:
            return _BLOCKING[call]
        if async_op is not True:
            raise _invalid(call, "async_op must be True or False, not %r" % (async_op,),
                           ArgumentTypeError)
        f = _IFORMS[call]
        if f is None:
            raise NotImplementedError(
                "gpurun: %s(async_op=True) needs %s, which this libgpurun does not have; "
                "call it with async_op=False" % (call, _INAMES[call]))
        return f

    def allreduce(self, x, op="sum", out=None, async_op=False):
        """A new array/tensor like x with the reduction over all ranks; out=x for in place.
        async_op=True: a Request whose wait() returns it."""
        fn = self._form("allreduce", async_op)  # first: a refused form writes and bumps nothing
        if out is x and not _groups_open:
            # the hot path (DDP's gradient hook): in place on a contiguous buffer, no group
            code = OPS.get(op) if type(op) is str else None
            v = _fast_view(x) if code is not None and self._h is not None else None
            if v is not None and _world is not None:
                args = (v[0], v[0], v[1], v[2], code, self._h, v[3])
                if async_op:
                    return self._run("allreduce", True, fn, args, (x,), (), x)
                with self._lock:
                    rc = fn(*args)
                if rc:
                    _check(rc)
                return x
        h = self._handle("allreduce")
        opc = _op("allreduce", op)  # before anything is written or bumped
        if out is x:  # in place: one view, which must be writable as it is
            b = o = _Buf(x, "allreduce", "x", True)
            self._written("allreduce", o, (x,), True)
        else:
            b = _Buf(x, "allreduce", "x")
            o = _Buf(_new_like(b.obj, tuple(x.shape)) if out is None else out, "allreduce", "out",
                     True)
            self._same(b, o, "allreduce")
            if out is not None:
                self._written("allreduce", o, (x,), False)
        return self._run("allreduce", async_op, fn,
                         (b.ptr, o.ptr, b.count, b.dtype, opc, h, b.stream), (b.obj, o.obj),
                         _staged(o), _result(o))

    def allreduce_multi(self, xs, op="sum", out=None, async_op=False):
        """The fused allreduce of the arrays/tensors in xs, all of one dtype (gr_allreduce_multi:
        one reduction on the MPI backend): a list of new arrays/tensors like them; out=xs for in
        place, or out= a list of as many of the same sizes. async_op=True: a Request whose
        wait() returns that list."""
        call = "allreduce_multi"
        fn = self._form(call, async_op)  # first: a refused form writes and bumps nothing
        h = self._handle(call)
        opc = _op(call, op)  # before anything is written or bumped
        inplace = out is xs
        xs = self._seq(call, "xs", xs)
        outs = None if out is None else xs if inplace else self._seq(call, "out", out)
        if outs is not None and len(outs) != len(xs):
            raise _invalid(call, "out holds %d buffers, xs %d" % (len(outs), len(xs)))
        bufs, obufs = [], []
        for i, x in enumerate(xs):
            if inplace:
                b = o = _Buf(x, call, "xs[%d]" % i, True)
            else:
                b = _Buf(x, call, "xs[%d]" % i)
                o = _Buf(_new_like(b.obj, tuple(x.shape)) if outs is None else outs[i], call,
                         "out[%d]" % i, True)
                self._same(b, o, call)
            if bufs and b.dtype != bufs[0].dtype:
                raise _invalid(call, "xs[%d] is %s and xs[0] %s; one call takes one dtype" % (
                    i, DTYPE_NAMES[b.dtype], DTYPE_NAMES[bufs[0].dtype]))
            bufs.append(b)
            obufs.append(o)
        for i, o in enumerate(obufs):  # only once every buffer passed: a refusal writes nothing
            if outs is not None:
                self._written(call, o, (xs[i],), inplace)
        n = len(bufs)
        send = (_vp * n)(*[b.ptr for b in bufs])
        recv = (_vp * n)(*[o.ptr for o in obufs])
        counts = (_sz * n)(*[b.count for b in bufs])
        dtype = bufs[0].dtype if bufs else DTYPES["float32"]
        stream = bufs[0].stream if bufs else None
        keep = tuple(b.obj for b in bufs) + tuple(o.obj for o in obufs) + (send, recv, counts)
        staged = tuple(o for o in obufs if o.back is not None)
        return self._run(call, async_op, fn, (send, recv, counts, n, dtype, opc, h, stream), keep,
                         staged, [_result(o) for o in obufs])

    @staticmethod
    def _seq(call, what, xs):
        """xs as a list of buffers: a list or tuple of arrays/tensors (one array is refused, so
        its rows are never taken for buffers)."""
        if not isinstance(xs, (list, tuple)):
            raise _invalid(call, "%s is a %s; %s takes a list or tuple of arrays/tensors"
                           % (what, type(xs).__name__, call), ArgumentTypeError)
        return list(xs)

    def broadcast(self, x, root=0, async_op=False):
        """Root's x into every rank's x (in place); returns x."""
        fn = self._form("broadcast", async_op)
        root = _index("broadcast", "root", root)
        b = _Buf(x, "broadcast", "x", True)
        self._written("broadcast", b, (x,), True)
        return self._run("broadcast", async_op, fn,
                         (b.ptr, b.ptr, b.count, b.dtype, root, self._handle("broadcast"),
                          b.stream), (b.obj,), _staged(b), _result(b))

    def reduce(self, x, op="sum", root=0, out=None, async_op=False):
        """The reduction onto root: a new array/tensor (or out) there, None on the other ranks.
        An out given on the other ranks is checked there too, and not written."""
        fn = self._form("reduce", async_op)
        h = self._handle("reduce")
        opc = _op("reduce", op)  # before anything is written or bumped
        root = _index("reduce", "root", root)
        b = _Buf(x, "reduce", "x")
        o = None
        if self.rank == root or out is not None:
            # out is checked on every rank, though only the root's is written: a refusal on the
            # root alone would leave the others waiting in the collective
            o = _Buf(_new_like(b.obj, tuple(x.shape)) if out is None else out, "reduce", "out",
                     True)
            self._same(b, o, "reduce")
            t = _torch()
            if out is not None and o.is_torch:
                _torch_write(t, "reduce", o.obj, (x,), out is x, bump=self.rank == root)
            if self.rank != root:
                o = None
        return self._run("reduce", async_op, fn,
                         (b.ptr, o.ptr if o else None, b.count, b.dtype, opc, root, h, b.stream),
                         (b.obj, o.obj if o else None), _staged(o), _result(o) if o else None)

    def allgather(self, x, out=None, async_op=False):
        """size * len(x) elements, rank r's x at r * len(x) (along the first axis)."""
        fn = self._form("allgather", async_op)
        h = self._handle("allgather")
        b = _Buf(x, "allgather", "x")
        shape = tuple(x.shape)
        shape = (self.size * shape[0],) + shape[1:] if shape else (self.size,)
        o = _Buf(_new_like(b.obj, shape) if out is None else out, "allgather", "out", True)
        if o.count != b.count * self.size or o.dtype != b.dtype:
            raise _invalid("allgather", "out holds %d elements of %s, expected %d of %s"
                           % (o.count, DTYPE_NAMES[o.dtype], b.count * self.size,
                              DTYPE_NAMES[b.dtype]))
        if out is not None:
            self._written("allgather", o, (x,), out is x)
        return self._run("allgather", async_op, fn, (b.ptr, o.ptr, b.count, b.dtype, h, b.stream),
                         (b.obj, o.obj), _staged(o), _result(o))

    def reduce_scatter(self, x, op="sum", out=None, async_op=False):
        """Block r (len(x) // size elements along the first axis) of the reduction, on rank r."""
        fn = self._form("reduce_scatter", async_op)
        h = self._handle("reduce_scatter")
        opc = _op("reduce_scatter", op)  # before anything is written or bumped
        b = _Buf(x, "reduce_scatter", "x")
        n = self._blocks(x, b, "reduce_scatter")
        shape = (tuple(x.shape)[0] // self.size,) + tuple(x.shape)[1:]
        o = _Buf(_new_like(b.obj, shape) if out is None else out, "reduce_scatter", "out", True)
        if o.count != n or o.dtype != b.dtype:
            raise _invalid("reduce_scatter", "out holds %d elements, expected %d" % (o.count, n))
        if out is not None:
            self._written("reduce_scatter", o, (x,), out is x)
        return self._run("reduce_scatter", async_op, fn,
                         (b.ptr, o.ptr, n, b.dtype, opc, h, b.stream), (b.obj, o.obj),
                         _staged(o), _result(o))

    def alltoall(self, x, out=None, async_op=False):
        """Block p of x (len(x) // size along the first axis) to rank p; block p of the result
        from rank p."""
        fn = self._form("alltoall", async_op)
        h = self._handle("alltoall")
        b = _Buf(x, "alltoall", "x")
        n = self._blocks(x, b, "alltoall")
        o = _Buf(_new_like(b.obj, tuple(x.shape)) if out is None else out, "alltoall", "out", True)
        self._same(b, o, "alltoall")
        if out is not None:
            self._written("alltoall", o, (x,), out is x)
        return self._run("alltoall", async_op, fn, (b.ptr, o.ptr, n, b.dtype, h, b.stream),
                         (b.obj, o.obj), _staged(o), _result(o))

    def send(self, x, peer, async_op=False):
        """x to rank peer (pairs with its recv of the same count and dtype)."""
        fn = self._form("send", async_op)
        peer = _index("send", "peer", peer)
        b = _Buf(x, "send", "x")
        return self._run("send", async_op, fn,
                         (b.ptr, b.count, b.dtype, peer, self._handle("send"), b.stream), (b.obj,),
                         (), None)

    def recv(self, x, peer, async_op=False):
        """Into x (in place) from rank peer; returns x."""
        fn = self._form("recv", async_op)
        peer = _index("recv", "peer", peer)
        b = _Buf(x, "recv", "x", True)
        self._written("recv", b, (x,), True)
        return self._run("recv", async_op, fn,
                         (b.ptr, b.count, b.dtype, peer, self._handle("recv"), b.stream), (b.obj,),
                         _staged(b), _result(b))

    def barrier(self, async_op=False):
        fn = self._form("barrier", async_op)
        return self._run("barrier", async_op, fn, (self._handle("barrier"),), (), (), None)

    def synchronize(self, stream=None):
        """Wait for the calls enqueued on stream (NCCL); a no-op on the MPI backend. stream is a
        torch.cuda.Stream, a cudaStream_t as an integer, or None (the default stream)."""
        stream = getattr(stream, "cuda_stream", stream)
        if stream is not None:
            stream = _index("synchronize", "stream", stream)
        h = self._handle("synchronize")
        with self._lock:
            rc = _gr_comm_synchronize(h, stream)
        _check(rc)

    def _same(self, b, o, call):
        if o.count != b.count or o.dtype != b.dtype:
            raise _invalid(call, "out holds %d elements of %s, x %d of %s" % (
                o.count, DTYPE_NAMES[o.dtype], b.count, DTYPE_NAMES[b.dtype]))

    def _blocks(self, x, b, call):
        if not tuple(x.shape):
            raise _invalid(call, "x is 0-d; %s splits it along its first axis" % call)
        first = tuple(x.shape)[0]
        if first % self.size:
            raise _invalid(call, "len(x) %d is not a multiple of the communicator size %d"
                           % (first, self.size))
        return b.count // self.size


# ---- lifecycle ---------------------------------------------------------------------------------

_comms = weakref.WeakSet()
_world = None
_atexit = False


def initialized():
    return bool(_gr_initialized())


def init():
    """Initialise gpurun (and MPI, unless the program already did); idempotent."""
    global _world, _atexit, _RANK
    if not _gr_initialized():
        _check(_gr_init(None, None))
        if not _atexit:
            atexit.register(finalize)
            _atexit = True
    if _world is None:
        _world = Comm(_gr_world(), False)
        _RANK = _world.rank
    return _world


def finalize():
    """Free the communicators split off, then gr_finalize (MPI too, if gpurun started it).
    Idempotent; registered with atexit by init()."""
    global _world
    if not _gr_initialized():
        return
    try:
        _requests.drain()  # every outstanding request completes first (their errors stand)
    finally:
        _requests._engine.halt()
    for c in list(_comms):
        try:
            c.free()
        except Error:
            pass
    _world = None
    _check(_gr_finalize())


def _data_address(x):
    """Where x's data starts; 1 (no allocation's address) for an object that is neither an array
    nor a tensor, so that free() still takes part in the collective and every rank gets the error."""
    if hasattr(x, "data_ptr"):
        return x.data_ptr()
    if hasattr(x, "__array_interface__"):
        return x.__array_interface__["data"][0]
    return 1


def _shape(call, shape):
    """shape as a tuple of ints (an int is one dimension) and its number of elements."""
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    n = 1
    for d in shape:
        if d < 0:
            raise _invalid(call, "shape %r has a negative dimension" % (shape,))
        n *= d
    return shape, n


def empty(shape, dtype="float32", comm=None):
    """A new numpy array in gr_mem_alloc memory of comm (the world by default), which collectives
    on comm reach directly: an allreduce, reduce-scatter, allgather or broadcast whose buffers on
    every rank lie in such memory runs without copies through a staging segment (gr_mem_alloc(3)).
    Collective over comm, with the same shape and dtype on every rank; the contents are zero.
    Release it with gpurun.free(a, comm) (collective), or with comm.free()/finalize(); the array
    must not be used afterwards."""
    np = _np()
    c = comm if comm is not None else world()
    dt = np.dtype(dtype)
    shape, n = _shape("empty", shape)
    buf = c._mem_alloc(n * dt.itemsize)
    return np.frombuffer(buf, dtype=dt, count=n).reshape(shape)


def empty_torch(shape, dtype=None, comm=None):
    """The torch counterpart of empty(): a CPU tensor (torch.float32 by default) in gr_mem_alloc
    memory of comm. Release it with gpurun.free(t, comm)."""
    torch = _torch()
    dtype = dtype or torch.float32
    c = comm if comm is not None else world()
    shape, n = _shape("empty_torch", shape)
    size = torch.empty((), dtype=dtype).element_size()
    buf = c._mem_alloc(n * size)
    import warnings
    with warnings.catch_warnings():  # frombuffer warns about writable buffers: this one is meant to be
        warnings.simplefilter("ignore")
        raw = torch.frombuffer(buf, dtype=torch.uint8)
    return raw[:n * size].view(dtype).reshape(shape)


def free(x, comm=None):
    """Release memory from empty()/empty_torch() (collective over comm, the world by default):
    every rank passes its array of the same allocation; x None on every rank does nothing."""
    c = comm if comm is not None else world()
    c._mem_free(None if x is None else _data_address(x))


def world():
    """The world communicator (init() first)."""
    if _world is None or not _gr_initialized():
        raise Error("world: gpurun is not initialised (call gpurun.init() first)", 10)
    return _world


_MAX_RANK_GPUS = 128  # GR_MAX_RANK_GPUS of include/gpurun/limits.h


class _RankInfo(_c.Structure):
    # gr_rank_info_t of include/gpurun/runtime.h; info() checks the size against the library's
    _fields_ = [("rank", _int), ("size", _int), ("local_rank", _int), ("local_size", _int),
                ("node", _c.c_char * 256), ("ngpus", _int),
                ("gpus", (_c.c_char * 16) * _MAX_RANK_GPUS),
                ("cpus", _c.c_char * 256), ("numa", _int), ("nic", _c.c_char * 64),
                ("backend", _int), ("from_plan", _int), ("receipt_differs", _int),
                ("receipt", _c.c_char * 256)]


def info():
    """This rank's plan: rank, size, local_rank, local_size, node, gpus (PCI ids), cpus (hwloc
    list), numa, nic, backend, from_plan (False when not started by gpurun)."""
    if _gr_rank_info_sizeof() != _c.sizeof(_RankInfo):
        # a library of another version: writing its struct into ours would corrupt memory
        raise Error("info: libgpurun's gr_rank_info_t is %d bytes, this package expects %d"
                    % (_gr_rank_info_sizeof(), _c.sizeof(_RankInfo)), 11)
    r = _RankInfo()
    _check(_gr_rank_info(_c.byref(r)))
    return {"rank": r.rank, "size": r.size, "local_rank": r.local_rank,
            "local_size": r.local_size, "node": r.node.decode(errors="replace"),
            "gpus": [r.gpus[i].value.decode() for i in range(min(r.ngpus, _MAX_RANK_GPUS))],
            "cpus": r.cpus.decode(errors="replace"), "numa": r.numa,
            "nic": r.nic.decode(errors="replace"), "backend": BACKENDS.get(r.backend, "?"),
            "from_plan": bool(r.from_plan), "receipt_differs": r.receipt_differs,
            "receipt": r.receipt.decode(errors="replace")}
