"""Loader (in-process or worker pool) and attach (client of `seedpipe serve`).

Zero copy: the arrays a Loader or Client yields are numpy VIEWS on memory
owned by the C library: the in-process loader's batch buffer (workers=0) or
a slot of the shared-memory ring the worker processes write into
(workers >= 1, and attach()). A batch's arrays are valid until the next
batch is taken from the same loader (the slot is then given back and gets
overwritten), until set_epoch()/load_state_dict() repositions it, and until
close(). Keep a batch longer with copy=True (or images.copy()). Reading a
view after close() reads unmapped memory: don't.

How the C library is reached. Every batch, whichever the source, comes
from one batch stream (include/seedpipe/stream.h), one code path
(_Base._take, _EpochIter): sp_stream_next() for a view, sp_stream_release()
of the view held before taking the next (one held at a time),
sp_stream_state() for state_dict(), sp_stream_batch_digest(),
sp_stream_close(). The kinds:
  Loader(workers=0)  SP_STREAM_LOADER, opened in __init__ (it is the
                     loader: it opens the dataset and the cache);
  Loader(workers>=1) SP_STREAM_POOL, opened at the first batch (the workers
                     fork then, as before; worker_pids() is empty until);
  attach()           SP_STREAM_SERVICE, opened by name and rank.
set_epoch() / load_state_dict() move an in-process stream with
sp_stream_seek() (the same loader and cache, nothing reopened; the last
views stay readable until the next batch is taken, as on the one in-process
buffer). A pool computes ahead and cannot seek: its stream is closed and
another opened at the new position at the next batch. An in-process stream
that has failed keeps failing, so a reposition after a failure opens a new
one (the old kept until the next batch is taken; its failure log and cache
counters carried over, so failures() and cache_stats() still cover the
Loader's whole life).

What stays on an sp_loader, and why: a pool Loader creates its own loader
in __init__ (the pool's comes only with the workers) for what must work
before the first batch: errors at construction, sample dims, len(),
fingerprint, load_state_dict()'s sp_loader_state_check(), the resume state
the pool starts from (sp_loader_state_at), explain(), failures(). Once a
stream is open these use its loader (sp_stream_loader(); for in-process
always). explain(epoch, sample) and the failure log are per-sample queries,
not batches of a stream. The Client reads the service's epochs, pid and
ring depth from sp_client_info of sp_stream_client() (stream info has no
such fields).
"""
from __future__ import annotations

import ctypes
import json
import os
import warnings
import weakref
from ctypes import byref
from typing import Any, Iterator, NamedTuple, Optional, Tuple

import numpy as np

from . import _lib as L

__all__ = ["Error", "Loader", "Client", "attach", "BatchInfo", "distributed_env",
           "DistributedEnv"]

_U32_MAX = 0xFFFFFFFF
_UNBOUNDED_EPOCHS = _U32_MAX


class Error(RuntimeError):
    """A seedpipe C error. str(e) is the C message ("path: reason");
    e.code is the SP_E* code (negative int), e.code_name e.g. "EIO"."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.code_name = L.ERROR_NAMES.get(code, str(code))
        self.message = message


def _raise(rc: int, err: L.sp_error, what: str = "") -> None:
    msg = err.msg.decode("utf-8", "replace")
    if not msg:
        msg = (L.sp_strerror(rc) or b"error").decode()
        if what:
            msg = f"{what}: {msg}"
    raise Error(rc, msg)


class BatchInfo:
    """Where the last batch came from: epoch, index (within the epoch),
    count, and its sample indices (a view, like the images, unless the
    loader copies), skipped samples and (failed, substitute) pairs; sources:
    (source, index in that source) per sample (a Loader's; for a mixture the
    source's number in the .mix file, otherwise always source 0)."""
    __slots__ = ("epoch", "index", "count", "_b", "_copy", "_indices", "_locate")

    def __init__(self, b: L.sp_batch, copy: bool, locate=None):
        self.epoch, self.index, self.count = b.epoch, b.index, b.count
        self._b, self._copy, self._indices, self._locate = b, copy, None, locate
        if copy:
            self._indices = _view(b.indices, (b.count,), "<u8", True)
            self._b = (self.skipped, self.substituted)

    @property
    def indices(self) -> np.ndarray:
        if self._indices is None:
            self._indices = _view(self._b.indices, (self.count,), "<u8", False)
        return self._indices

    @property
    def sources(self) -> Optional[list]:
        """[(source, index in source), ...] per sample; None for a Client
        (the service's dataset is not open here)."""
        if self._locate is None:
            return None
        return [self._locate(int(i)) for i in self.indices]

    @property
    def skipped(self) -> list:
        if isinstance(self._b, tuple):
            return self._b[0]
        b = self._b
        if not b.nskipped:
            return []
        return _view(b.skipped, (b.nskipped,), "<u8", True).tolist()

    @property
    def substituted(self) -> list:
        if isinstance(self._b, tuple):
            return self._b[1]
        b = self._b
        if not b.nsubstituted:
            return []
        return [tuple(p) for p in _view(b.substituted, (b.nsubstituted, 2), "<u8", True).tolist()]

    def __repr__(self):
        return f"BatchInfo(epoch={self.epoch}, index={self.index}, count={self.count})"


class _Mem:
    """The base object of a view: describes C memory through the array
    interface (no copy); numpy keeps it as the array's .base. `keep` is
    what owns that memory (the Loader or Client): a view keeps it alive, so
    garbage collection never frees the memory under a view (close() still
    does, and the next batch of the stream reuses it)."""
    __slots__ = ("__array_interface__", "keep")

    def __init__(self, addr: int, shape: tuple, typestr: str, keep=None):
        self.__array_interface__ = {"data": (addr, False), "shape": shape,
                                    "typestr": typestr, "version": 3}
        self.keep = keep


# bfloat16 images: numpy has no such type, so they are uint16 words (the
# top half of the float32 after rounding to nearest even), marked with this
# dtype's metadata for seedpipe.torch.
BFLOAT16 = np.dtype(np.uint16, metadata={"seedpipe_dtype": "bfloat16"})


def _view(addr: Optional[int], shape: tuple, typestr: str, copy: bool,
          keep=None) -> np.ndarray:
    """A numpy array over C memory at addr (no copy unless copy=True); a
    view keeps `keep` (the memory's owner) alive."""
    if not addr or 0 in shape:
        return np.empty(shape, np.dtype(typestr))
    a = np.asarray(_Mem(addr, shape, typestr, None if copy else keep))
    return a.copy() if copy else a


def _check_choice(name: str, value: Any, table: dict) -> int:
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        value = np.dtype(value).name
    if not isinstance(value, str) or value.lower() not in table:
        raise ValueError(f"{name} must be one of {', '.join(repr(k) for k in table)}, "
                         f"got {value!r}")
    return table[value.lower()]


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


def _state_to_dict(st: L.sp_loader_state) -> dict:
    buf = ctypes.create_string_buffer(4096)
    n = L.sp_loader_state_format(byref(st), buf, len(buf))
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        L.sp_loader_state_format(byref(st), buf, len(buf))
    return json.loads(buf.value.decode())


def _state_from(obj: Any) -> L.sp_loader_state:
    if isinstance(obj, dict):
        text = json.dumps(obj, separators=(",", ":"))
    elif isinstance(obj, (str, bytes)):
        text = obj if isinstance(obj, str) else obj.decode()
    else:
        raise ValueError(f"state must be a dict from state_dict() or its JSON text, "
                         f"got {type(obj).__name__}")
    raw = text.encode()
    st = L.sp_loader_state()
    err = L.sp_error()
    rc = L.sp_loader_state_parse(raw, len(raw), byref(st), byref(err))
    if rc != 0:
        _raise(rc, err, "state")
    return st


def _sample_list(samples) -> tuple:
    """(paths, labels[, num_classes]) -> (sp_sample_list, what it points to)."""
    if not isinstance(samples, (tuple, list)) or len(samples) not in (2, 3):
        raise ValueError("samples must be (paths, labels) or (paths, labels, num_classes)")
    paths, labels = list(samples[0]), list(samples[1])
    ncls = samples[2] if len(samples) == 3 else 0
    if not paths or len(paths) != len(labels):
        raise ValueError(f"samples: {len(paths)} paths and {len(labels)} labels (equal, "
                         "at least one)")
    bpaths = (ctypes.c_char_p * len(paths))(*[os.fsencode(p) for p in paths])
    blabels = np.ascontiguousarray(labels, dtype=np.int32)
    sl = L.sp_sample_list()
    sl.count = len(paths)
    sl.paths = ctypes.cast(bpaths, ctypes.POINTER(ctypes.c_char_p))
    sl.labels = blabels.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    sl.num_classes = _check_int("num_classes", ncls, 0, 65536)
    return sl, bpaths, blabels


# ---- rank and world from the launcher's environment -----------------------------

# (rank variable, world variable), in order of precedence.
_DIST_SOURCES = (
    ("RANK", "WORLD_SIZE"),                              # torchrun / torch.distributed.launch
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),    # OpenMPI's mpirun
    ("PMI_RANK", "PMI_SIZE"),                            # MPICH / Intel MPI (Hydra), srun --mpi=pmi2
    ("SLURM_PROCID", "SLURM_NTASKS"),                    # srun
)


class _DistributedEnv(NamedTuple):
    rank: int
    world: int
    source: str


class DistributedEnv(_DistributedEnv):
    """(rank, world, source) from distributed_env(), with .local_rank besides:
    LOCAL_RANK's value under torchrun, else None. It is information (the
    rank within one node, e.g. to pick a device), never the rank."""
    local_rank: Optional[int] = None

    def __new__(cls, rank: int, world: int, source: str, local_rank: Optional[int] = None):
        self = super().__new__(cls, rank, world, source)
        self.local_rank = local_rank
        return self

    def __repr__(self):
        extra = f", local_rank={self.local_rank}" if self.local_rank is not None else ""
        return (f"DistributedEnv(rank={self.rank}, world={self.world}, "
                f"source={self.source!r}{extra})")


def _env_uint(env, name: str) -> int:
    v = env[name]
    t = v.strip()
    if not t or not t.isascii() or not t.isdigit():
        raise ValueError(f"{name}={v!r} is not a non-negative integer")
    return int(t)


def distributed_env(environ=None) -> DistributedEnv:
    """(rank, world, source) of this process as its launcher set them.

    The first complete pair of these environment variables wins:
        RANK / WORLD_SIZE                             torchrun (torch.distributed.run)
        OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE   OpenMPI's mpirun
        PMI_RANK / PMI_SIZE                           MPICH, Intel MPI (Hydra)
        SLURM_PROCID / SLURM_NTASKS                   srun
    and source names it ("RANK/WORLD_SIZE", ...); with none of them set it
    is (0, 1, "default"). LOCAL_RANK is never the rank (it is the rank
    within one node); under torchrun its value is given as .local_rank.

    Raises ValueError naming the variable and its value when a value is not
    a non-negative integer (LOCAL_RANK included, when RANK/WORLD_SIZE are
    used), when world is 0 or rank >= world, or when only
    one variable of a pair is set (a launcher sets both; half a pair is a
    mistake, not a reason to try the next launcher). Pairs after the one
    used are not looked at. Note that inside an sbatch script, outside srun,
    SLURM_PROCID=0 and SLURM_NTASKS=N are set for the one batch process.
    `environ` defaults to os.environ.
    """
    env = os.environ if environ is None else environ
    for rname, wname in _DIST_SOURCES:
        have_r, have_w = rname in env, wname in env
        if not have_r and not have_w:
            continue
        if have_r != have_w:
            set_, unset = (rname, wname) if have_r else (wname, rname)
            raise ValueError(f"{set_}={env[set_]!r} is set but {unset} is not "
                             f"(a launcher sets both)")
        rank, world = _env_uint(env, rname), _env_uint(env, wname)
        if world < 1:
            raise ValueError(f"{wname}={env[wname]!r} must be at least 1")
        if rank >= world:
            raise ValueError(f"{rname}={env[rname]!r} must be less than "
                             f"{wname}={env[wname]!r}")
        local = None
        if rname == "RANK" and "LOCAL_RANK" in env:
            local = _env_uint(env, "LOCAL_RANK")
        return DistributedEnv(rank, world, f"{rname}/{wname}", local)
    return DistributedEnv(0, 1, "default")


def _resolve_rank_world(rank: Any, world: Any) -> Tuple[int, int]:
    """Loader's rank/world: ints as given; "auto" from distributed_env(). One
    "auto" with one int must agree with the environment."""
    auto_r = isinstance(rank, str) and rank == "auto"
    auto_w = isinstance(world, str) and world == "auto"
    for name, v, auto in (("rank", rank, auto_r), ("world", world, auto_w)):
        if isinstance(v, str) and not auto:
            raise ValueError(f"{name} must be an integer or 'auto', got {v!r}")
    if not auto_r and not auto_w:
        return rank, world
    de = distributed_env()
    if auto_r and auto_w:
        return de.rank, de.world
    if auto_r:
        world = _check_int("world", world, 1, 1 << 16)
        if world != de.world:
            raise ValueError(f"rank='auto' with world={world}, but the environment says world "
                             f"{de.world} ({de.source}); pass world='auto' too, or both as "
                             "integers")
        return de.rank, world
    rank = _check_int("rank", rank, 0, 1 << 16)
    if rank != de.rank:
        raise ValueError(f"world='auto' with rank={rank}, but the environment says rank "
                         f"{de.rank} ({de.source}); pass rank='auto' too, or both as integers")
    return rank, de.world


# ---- resources (owned by a finalizer, never by the Python object itself) -------

def _cache_warning(ud, msg) -> None:
    warnings.warn("seedpipe cache: " + msg.decode("utf-8", "replace"), RuntimeWarning,
                  stacklevel=2)


def _need_streams() -> None:
    if not L.HAS_STREAM:
        raise Error(-9, f"stream: {L.LIB_PATH} has no batch streams (stream.h; a newer "
                        "libseedpipe is needed)")


class _Res:
    """C handles of one Loader or Client. Freed by free(), which a
    weakref.finalize calls on close(), on garbage collection, or at
    interpreter exit."""

    def __init__(self):
        self.stream = None    # sp_stream * (stream.h): where every batch comes from
        self.held = None      # the view taken from it and not yet given back (sp_batch)
        self.retired = None   # in-process: the stream before a reposition, kept until the
                              # next batch is taken (its buffer backs the last views)
        self.loader = None    # sp_loader *: a pool Loader's own (see the module comment)
        self.keep = None      # the cache's warning callback and options (C may call them)
        self.keep_open = None  # what the open stream's configuration points to
        self.trace = False    # this Loader started the process's trace (trace.h)

    def close_retired(self):
        if self.retired:
            L.sp_stream_close(self.retired)
            self.retired = None

    def close_stream(self):
        """Pool: SIGKILLs and reaps the workers, unmaps the ring; in-process:
        frees the loader and its batch buffer; service: detaches. A cache is
        flushed (a complete entry committed, a partial one aborted) and closed."""
        if self.stream:
            L.sp_stream_close(self.stream)
            self.stream = None
        self.held = None

    def free(self):
        self.close_retired()
        self.close_stream()
        if self.loader:
            L.sp_loader_destroy(self.loader)
            self.loader = None
        if self.trace:   # after the pool is gone: every worker's spans are in
            self.trace = False
            err = L.sp_error()
            if L.sp_trace_stop(byref(err)) != 0:
                warnings.warn(f"seedpipe: trace: {err.msg.decode(errors='replace')}",
                              RuntimeWarning)


class _Base:
    """Shared machinery: batches taken from one sp_stream, and the
    images/labels views of each."""

    _res: _Res
    copy: bool

    def _take(self) -> Optional[L.sp_batch]:
        """Give back the view held and take the next one from the stream
        (None at its end). The view stays valid until the next _take()."""
        res, err = self._res, self._err
        res.close_retired()
        if res.held is not None:
            res.held = None
            rc = L.sp_stream_release(res.stream, None, byref(err))   # the oldest (only) one
            if rc != 0:
                _raise(rc, err)
        view = L.sp_batch()
        rc = L.sp_stream_next(res.stream, byref(view), byref(err))
        if rc == L.SP_STREAM_END:
            return None
        if rc != 0:
            self._failed = True
            _raise(rc, err)
        res.held = self._last = view
        return view

    def _locator(self):
        """A function mixture index -> (source, index there), or None."""
        return None

    def _stream_state(self) -> L.sp_loader_state:
        st = L.sp_loader_state()
        L.sp_stream_state(self._res.stream, byref(st))
        return st

    def batch_digest(self) -> str:
        """sp_batch_digest() of the last batch (the digest `seedpipe digest`
        writes in its manifest), computed by the C library."""
        self._check_open()
        if self._last is None:
            raise ValueError("batch_digest: no batch taken yet")
        return L.sp_stream_batch_digest(self._res.stream, byref(self._last)).hex()

    def _arrays(self, b: L.sp_batch) -> Tuple[np.ndarray, np.ndarray]:
        n = b.count
        self._info = BatchInfo(b, self.copy, self._locator())
        images = _view(b.images, (n,) + self._sshape, self._typestr, self.copy, self)
        if self._dtype == 2:   # bfloat16: numpy has none; uint16 words, marked
            images = images.view(BFLOAT16)
        return images, _view(b.labels, (n,), "<i4", self.copy, self)

    def _geometry(self, chw, dtype, layout):
        self._chw, self._dtype, self._layout = chw, dtype, layout
        c, h, w = chw
        self._sshape = (c, h, w) if layout == 0 else (h, w, c)
        self._typestr = {0: "|u1", 1: "<f4", 2: "<u2", 3: "<f2"}[dtype]

    @property
    def batch_info(self) -> Optional[BatchInfo]:
        """Epoch, index, sample indices, skipped/substituted of the last batch."""
        return self._info

    @property
    def sample_shape(self) -> Tuple[int, int, int]:
        c, h, w = self._chw
        return (c, h, w) if self._layout == 0 else (h, w, c)

    @property
    def dtype(self) -> np.dtype:
        """numpy dtype of the images: uint8, float32, float16, or for bfloat16
        uint16 words carrying the bits (BFLOAT16; seedpipe.torch.to_tensors
        makes torch.bfloat16 tensors of them without a copy)."""
        return {0: np.dtype(np.uint8), 1: np.dtype(np.float32), 2: BFLOAT16,
                3: np.dtype(np.float16)}[self._dtype]

    @property
    def layout(self) -> str:
        return "nchw" if self._layout == 0 else "nhwc"

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Free everything now: workers SIGKILLed and reaped, shared memory
        unmapped, client detached. Views handed out become invalid."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _check_open(self):
        if self.closed:
            raise ValueError(f"{type(self).__name__} is closed")

    def stream(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        """Every remaining batch of every remaining epoch (to `epochs`)."""
        while not self._at_end():
            yield from iter(self)


class _EpochIter:
    """Iterator over the rest of one epoch of a Loader or Client: the epoch
    is the source's when the iterator is made (epoch=None: when its first
    batch is taken); it ends after that epoch's last batch, when the
    source is positioned elsewhere, at the end of the stream, or on close."""

    def __init__(self, src: "_Base", epoch: Optional[int]):
        self.src, self.epoch, self.done = src, epoch, False

    def __iter__(self):
        return self

    def __next__(self):
        src = self.src
        if self.done or src.closed or src._at_end():
            raise StopIteration
        e = src._next_epoch()
        if self.epoch is None:
            self.epoch = e
        elif e != self.epoch:
            self.done = True
            raise StopIteration
        b = src._take()
        if b is None:
            self.done = True
            raise StopIteration
        out = src._arrays(b)
        if b.index + 1 >= src._nb:
            self.done = True                # this iterator is finished after this batch
        return out


class Loader(_Base):
    """Deterministic batches of a dataset as numpy arrays.

    Loader(data, pipeline="shapes-train", seed=0, batch_size=32, workers=0,
           epochs=None, drop_last=False, dtype="uint8", layout="nchw",
           rank=0, world=1, on_error="fail", copy=False, threads=1,
           ring=0, rng_mode="per-sample", split=None, subset=None, split_seed=0,
           cache=None)

    The batch bytes are a pure function of (dataset, pipeline, seed, epoch,
    batch index, dtype, layout, batch_size, drop_last, rank, world): the
    worker count, threads and ring depth never change a byte.

    Iteration is per epoch, like torch's DataLoader: `for images, labels in
    loader` yields the remaining batches of the current epoch, and the next
    `for` continues with the following epoch (or call set_epoch(e)).
    `stream()` yields every remaining batch up to `epochs`. epochs=None
    means no end; with epochs=E an iteration past epoch E-1 yields nothing.

    rank/world: this process's slice of each global batch of batch_size
    samples (world must divide batch_size); the union of the world slices is
    the same global batch, byte for byte, for any world. rank="auto",
    world="auto" take them from the launcher's environment through
    seedpipe.distributed_env(): RANK/WORLD_SIZE (torchrun), else
    OMPI_COMM_WORLD_RANK/_SIZE (OpenMPI), PMI_RANK/PMI_SIZE (MPICH, Intel
    MPI), SLURM_PROCID/SLURM_NTASKS (srun), else rank 0 of 1; a malformed or
    half-set pair is a ValueError naming the variable. "auto" for one and an
    integer for the other is accepted only when the integer equals what the
    environment says (e.g. world=4 checks the launcher agrees); otherwise
    ValueError. The resolved integers are .rank and .world.

    images: (n, C, H, W) for nchw or (n, H, W, C) for nhwc, uint8 or float32;
    labels: (n,) int32; n = batch_size / world (the last batch may be short
    unless drop_last). They are VIEWS (no copy) on the loader's batch buffer
    (workers=0) or on the shared-memory slot the workers wrote (workers>=1),
    valid until the next batch, set_epoch(), load_state_dict() or close().
    copy=True yields private copies instead.

    workers=0 computes batches in this process (`threads` threads per
    batch); workers>=1 forks a pool of worker processes (pool.h) with `ring`
    prefetched batches (0: 2 * workers). split/subset/split_seed select a
    deterministic subset of the dataset (loader.h "Splits"; needs a library
    with splits), e.g. split="train=0.9,val=0.1", subset="val". Create, iterate and close a pool
    loader on one thread (the workers are tied to the forking thread).

    order="shuffle" (default) is seedpipe's keyed permutation of each epoch,
    each rank a contiguous slice of the global batch; order="sequential" is
    the dataset's canonical order (an ImageFolder's is torchvision's index
    order), the same every epoch, rank r taking positions b*B + r + world*j
    of global batch b: exactly DistributedSampler(shuffle=False)'s indices
    with a torch DataLoader of batch_size B/world. pad_tail=True pads the
    epoch to a multiple of world by wrapping around its own order (as
    DistributedSampler does), so every rank gets the same number of samples
    in every batch and none an empty one. Both are in the fingerprint and
    the state.

    samples=(paths, labels[, num_classes]) opens an explicit list of image
    files instead of a dataset path, in the given order, duplicates allowed
    (a torch Subset or ConcatDataset); `data` is then the folder relative
    paths are under, or None. Every file is hashed at open (no persistent
    index).

    trace=FILE.json records a timeline of this process and its pool workers
    (trace.h, docs/tracing.md: Chrome trace-event JSON for Perfetto) from
    here until close(), which writes it; one trace per process at a time
    (a second Loader asking for one gets an Error). It never changes a byte.

    cache=DIR reads and writes the epoch cache (cache.h, docs/cache.md): an
    epoch that is in it is read (and checked) instead of computed; one that
    is not is stored as it streams from its first batch. The bytes are the
    same either way; a cache problem (a damaged file, a full disk) is a
    RuntimeWarning (warnings.warn) and the batch is computed instead.
    cache_stats() gives the counters.
    """

    def __init__(self, data, pipeline: str = "shapes-train", seed: int = 0,
                 batch_size: int = 32, workers: int = 0, epochs: Optional[int] = None,
                 drop_last: bool = False, dtype=None, layout: str = "nchw", rank=0,
                 world=1, on_error: str = "fail", copy: bool = False, threads: int = 1,
                 ring: int = 0, rng_mode: str = "per-sample", split: Optional[str] = None,
                 subset: Optional[str] = None, split_seed: int = 0, cache=None,
                 order: str = "shuffle", pad_tail: bool = False, samples=None,
                 trace=None):
        self._res = _Res()
        self._finalizer = weakref.finalize(self, _Res.free, self._res)
        if trace is not None:
            # first, so that opening the dataset is on the timeline too
            if not L.HAS_TRACE:
                raise Error(-9, f"trace: {L.LIB_PATH} has no trace (trace.h; a newer "
                                "libseedpipe is needed)")
            err = L.sp_error()
            rc = L.sp_trace_start(os.fsencode(trace), byref(err))
            if rc != 0:
                _raise(rc, err, os.fsdecode(trace))
            self._res.trace = True
        self._info = self._last = None
        slist = None
        if samples is not None:
            # an explicit sample list (dataset.h sp_dataset_open_list); `data`
            # is then the folder relative paths are under, or None
            slist = _sample_list(samples)
            if data is not None and not isinstance(data, (str, bytes, os.PathLike)):
                raise ValueError(f"with samples=, data must be the folder relative paths are "
                                 f"under, or None, got {type(data).__name__}")
        elif not isinstance(data, (str, bytes, os.PathLike)):
            raise ValueError(f"data must be a dataset path, got {type(data).__name__} (a "
                             "torchvision dataset object: use seedpipe.torch.DataLoader; "
                             "explicit files: samples=(paths, labels))")
        self._data_obj = data   # a seedpipe.Mixture's file lives as long as it does
        data = os.fsdecode(data) if data is not None else None
        if hasattr(pipeline, "spec") and hasattr(pipeline, "dtype"):
            # seedpipe.transforms.Compose (or one transform): its spec string,
            # and the dtype it implies unless dtype= says otherwise
            from . import transforms as _T
            if isinstance(pipeline, _T._Op):   # one transform: ToTensor() alone has no op
                pipeline = _T.Compose([pipeline])
            if dtype is None:
                dtype = pipeline.dtype or "uint8"
            pipeline = pipeline.spec()
        if dtype is None:
            dtype = "uint8"
        if not isinstance(pipeline, str) or not pipeline.strip():
            raise ValueError(f"pipeline must be a non-empty spec string or a "
                             f"seedpipe.transforms.Compose, got {pipeline!r}")
        seed = _check_int("seed", seed, 0, 2**64 - 1)
        batch_size = _check_int("batch_size", batch_size, 1, _U32_MAX)
        self.workers = _check_int("workers", workers, 0, 64)
        if epochs is not None:
            epochs = _check_int("epochs", epochs, 1, _U32_MAX - 1)
        rank, world = _resolve_rank_world(rank, world)
        world = _check_int("world", world, 1, 1 << 16)
        rank = _check_int("rank", rank, 0, world - 1)
        if batch_size % world:
            raise ValueError(f"batch_size ({batch_size}) must be a multiple of world ({world})")
        self._dtype = _check_choice("dtype", dtype, L.DTYPES)
        self._layout = _check_choice("layout", layout, L.LAYOUTS)
        on_err = _check_choice("on_error", on_error, L.ON_ERROR)
        rng = _check_choice("rng_mode", rng_mode, L.RNG_MODES)
        threads = _check_int("threads", threads, 1, 1024)
        split_seed = _check_int("split_seed", split_seed, 0, 2**64 - 1)
        if (split is None) != (subset is None):
            raise ValueError("split and subset must be given together (e.g. "
                             "split='train=0.9,val=0.1', subset='train')")
        for nm, v in (("split", split), ("subset", subset)):
            if v is not None and (not isinstance(v, str) or not v):
                raise ValueError(f"{nm} must be a non-empty string, got {v!r}")
        if split is not None and not L.HAS_SPLIT:
            raise Error(-9, f"split: {L.LIB_PATH} has no dataset splits (a newer "
                            "libseedpipe is needed)")
        self.ring = _check_int("ring", ring, 0, 1024)
        if cache is not None:
            if not isinstance(cache, (str, bytes, os.PathLike)):
                raise ValueError(f"cache must be a directory path, got {type(cache).__name__}")
            cache = os.fsdecode(cache)
            if self.workers and not L.HAS_POOL_CACHE:
                raise Error(-9, f"cache: {L.LIB_PATH} has no pool cache (a newer libseedpipe "
                                "is needed)")
        self.cache = cache
        self.copy = bool(copy)
        self.epochs = epochs
        self.data, self.pipeline, self.seed = data, pipeline, seed
        self.batch_size, self.drop_last, self.rank, self.world = (batch_size, bool(drop_last),
                                                                  rank, world)
        self.on_error, self.rng_mode = on_error, rng_mode
        self.order = order
        self._order = _check_choice("order", order, L.ORDERS)
        self.pad_tail = bool(pad_tail)

        self._bdata = data.encode() if data is not None else None
        self._bpipe = pipeline.encode()
        cfg = L.sp_loader_config()
        L.sp_loader_config_default(byref(cfg))
        cfg.dataset, cfg.pipeline, cfg.seed = self._bdata, self._bpipe, seed
        cfg.order, cfg.pad_tail = self._order, int(self.pad_tail)
        if slist is not None:
            self._slist = slist            # copied by sp_loader_create; kept for pool opens
            cfg.samples = ctypes.pointer(slist[0])
        cfg.batch_size, cfg.drop_last, cfg.rank, cfg.world = (batch_size, int(bool(drop_last)),
                                                              rank, world)
        cfg.dtype, cfg.layout, cfg.threads = self._dtype, self._layout, threads
        cfg.on_error, cfg.rng_mode = on_err, rng
        if split is not None:
            self._bsplit, self._bsubset = split.encode(), subset.encode()
            cfg.split, cfg.subset, cfg.split_seed = self._bsplit, self._bsubset, split_seed
        self._cfg = cfg
        _need_streams()
        self._err, self._failed = L.sp_error(), False
        self._fail_past, self._cache_past = [], None   # in-process: see _carry_over()
        if cache is not None:
            # The callback and the options must outlive every C call that may warn.
            self._bcache = cache.encode()
            self._cache_warn = L.CACHE_WARN(_cache_warning)
            self._copts = L.sp_cache_opts()
            L.sp_cache_opts_default(byref(self._copts))
            self._copts.warn = self._cache_warn
            # free() (a finalizer) may still warn: the resources keep them alive.
            self._res.keep = (self._cache_warn, self._copts)
        if self.workers == 0:
            # In-process: the stream is the loader (and opens the cache).
            self._res.stream, self._res.keep_open = self._open(0, 0)
        else:
            # Pool: the workers are forked at the first batch (_take); until
            # then this loader answers (errors now, geometry, explain, state).
            err = L.sp_error()
            ld = ctypes.c_void_p()
            rc = L.sp_loader_create(byref(cfg), byref(ld), byref(err))
            if rc != 0:
                _raise(rc, err, data or "samples")
            self._res.loader = ld.value
        ld = self._ld()
        c, h, w = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        L.sp_loader_sample_dims(ld, byref(c), byref(h), byref(w))
        self._geometry((c.value, h.value, w.value), self._dtype, self._layout)
        self._nb = int(L.sp_loader_batches_per_epoch(ld))
        self.fingerprint = L.sp_loader_fingerprint(ld).hex()
        # stream position: the next batch to deliver
        self._epoch, self._batch = 0, 0

    def _locator(self):
        loc = self.__dict__.get("_loc")
        if loc is None:   # the sources' sizes, once (a mixture's; else one source)
            ds = L.sp_loader_dataset(self._ld())
            nsrc = int(L.sp_dataset_mix_sources(ds))
            sizes = [int(L.sp_dataset_size(L.sp_dataset_mix_source(ds, s)))
                     for s in range(nsrc)]

            def loc(i, sizes=sizes):
                for s, n in enumerate(sizes):
                    if i < n:
                        return (s, i)
                    i -= n
                return (0, i)   # not a mixture: source 0, the index itself
            self._loc = loc
        return loc

    def _ld(self):
        """The sp_loader that computes (or, before a pool runs, would
        compute) this stream: the stream's own when one is open."""
        s = self._res.stream
        return L.sp_stream_loader(s) if s else self._res.loader

    def _open(self, epoch: int, batch: int):
        """Open this Loader's stream (in-process or pool) at (epoch, batch),
        running to the end of epoch `epochs` - 1 (no end without epochs).
        Returns (sp_stream *, what its configuration points to)."""
        sc = L.sp_stream_config()
        L.sp_stream_config_default(byref(sc))
        sc.kind = L.STREAM_KINDS["pool" if self.workers else "loader"]
        sc.workers, sc.ring_slots = self.workers, self.ring
        sc.epochs = self.epochs if self.epochs is not None else _UNBOUNDED_EPOCHS
        st = None
        if (epoch, batch) != (0, 0):
            st = L.sp_loader_state()
            L.sp_loader_state_at(self._ld(), epoch, batch, byref(st))
            sc.resume = ctypes.pointer(st)
        if self.cache is not None:
            sc.cache_dir = self._bcache
            sc.cache_opts = ctypes.pointer(self._copts)
        s = ctypes.c_void_p()
        err = L.sp_error()
        rc = L.sp_stream_open(byref(self._cfg), byref(sc), byref(s), byref(err))
        if rc != 0:
            _raise(rc, err, "pool" if self.workers else (self.data or "samples"))
        return s.value, (sc, st)

    # ---- geometry ----
    def __len__(self) -> int:
        """Batches per epoch."""
        return self._nb

    @property
    def num_samples(self) -> int:
        """Samples the loader draws from (the subset's with a split)."""
        return int(L.sp_loader_size(self._ld()))

    @property
    def padded_samples(self) -> int:
        """Positions of an epoch: num_samples, or with pad_tail the next
        multiple of world."""
        return int(L.sp_loader_padded_size(self._ld()))

    def dataset_samples(self) -> Tuple[list, list]:
        """(relative paths, labels) of the dataset's samples in canonical
        order (sp_dataset_path, sp_dataset_label; before any split)."""
        self._check_open()
        ds = L.sp_loader_dataset(self._ld())
        n = int(L.sp_dataset_size(ds))
        paths = [os.fsdecode(L.sp_dataset_path(ds, i)) for i in range(n)]
        labels = [int(L.sp_dataset_label(ds, i)) for i in range(n)]
        return paths, labels

    @property
    def epoch(self) -> int:
        """The epoch the next batch belongs to."""
        return self._epoch

    def _next_epoch(self) -> int:
        return self._epoch

    def _at_end(self) -> bool:
        return self.epochs is not None and self._epoch >= self.epochs

    # ---- positioning ----
    def set_epoch(self, epoch: int) -> None:
        """Position at batch 0 of `epoch` (like DistributedSampler.set_epoch).
        Invalidates the views of the last batch."""
        self._check_open()
        epoch = _check_int("epoch", epoch, 0, _U32_MAX - 1)
        if (epoch, 0) != (self._epoch, self._batch):
            self._reposition(epoch, 0)

    def _reposition(self, epoch: int, batch: int) -> None:
        res = self._res
        if self.workers:
            res.close_stream()              # the pool restarts from here at the next batch
        elif not self._failed:
            # In-process the stream seeks (same loader, same cache, nothing
            # reopened); the last views stay readable until the next batch.
            st = L.sp_loader_state()
            L.sp_loader_state_at(self._ld(), epoch, batch, byref(st))
            err = L.sp_error()
            rc = L.sp_stream_seek(res.stream, byref(st), byref(err))
            if rc != 0:
                _raise(rc, err, self.data or "samples")
        else:
            # A failed stream keeps failing: open one at the new position (if
            # that fails, nothing has changed). The old one is kept until the
            # next batch is taken, so the last views stay readable as long
            # as they did on the one in-process buffer.
            new, keep = self._open(epoch, batch)
            self._carry_over(res.stream)
            res.close_retired()
            res.retired, res.stream, res.held, res.keep_open = res.stream, new, None, keep
            self._failed = False
        self._epoch, self._batch = epoch, batch
        self._info = self._last = None

    def _carry_over(self, s) -> None:
        """In-process, the failure log and the cache counters are the
        Loader's whole life (one loader's and one cache's, until a
        reposition after a failure reopens the stream): keep those of a
        stream left."""
        self._fail_past = self._failures(L.sp_stream_loader(s))
        c = L.sp_stream_cache(s)
        if c:
            L.sp_cache_flush(c)             # what closing it would commit or abort
            self._cache_past = _cache_counters(c, self._cache_past)

    def _state(self) -> L.sp_loader_state:
        if self._res.stream:
            return self._stream_state()
        st = L.sp_loader_state()
        L.sp_loader_state_at(self._res.loader, self._epoch, self._batch, byref(st))
        return st

    def state_dict(self) -> dict:
        """The C loader state (state.h) of the position after the last batch
        taken, as a JSON-able dict; load_state_dict() of a loader with the
        same configuration (any worker count) resumes exactly there."""
        self._check_open()
        return _state_to_dict(self._state())

    def load_state_dict(self, state) -> None:
        """Resume from state_dict() (dict or its JSON text). Raises
        seedpipe.Error with the C message if the state belongs to another
        stream (fingerprint mismatch: it lists what differs)."""
        self._check_open()
        st = _state_from(state)
        err = L.sp_error()
        rc = L.sp_loader_state_check(self._ld(), byref(st), byref(err))
        if rc != 0:
            _raise(rc, err, "state")
        self._reposition(int(st.epoch), int(st.batch))

    # ---- iteration ----
    def _take(self) -> L.sp_batch:
        if self._res.stream is None:        # a pool: fork the workers now
            self._res.stream, self._res.keep_open = self._open(self._epoch, self._batch)
        b = super()._take()
        if b is None:                       # not before `epochs` (_at_end() is checked first)
            kind = "pool" if self.workers else "loader"
            raise Error(-8, f"{kind}: the stream ended before the epoch did")
        self._batch += 1
        if self._batch >= self._nb:
            self._epoch, self._batch = self._epoch + 1, 0
        return b

    def __iter__(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        self._check_open()
        return _EpochIter(self, self._epoch)

    # ---- extras ----
    def cache_stats(self) -> Optional[dict]:
        """The cache's counters (sp_cache_stats: hits, misses, batches_read,
        batches_computed, batches_written, corrupt, write_failures, committed,
        lost_races, bytes_read, bytes_written, raw_read, raw_written), or
        None without a cache. A pool's cache lives with the pool: its
        counters start again when the pool is restarted (set_epoch,
        load_state_dict)."""
        self._check_open()
        s = self._res.stream
        c = L.sp_stream_cache(s) if s else None
        if self.cache is None or not c:
            return None
        return _cache_counters(c, None if self.workers else self._cache_past)

    def explain(self, epoch: int, sample: int) -> str:
        """What the pipeline draws for dataset sample `sample` in `epoch`: one
        line per op (crop box in source pixels, flips, jitter factors and
        order), as `seedpipe explain` prints it (sp_loader_explain). For a
        seedpipe.Mixture `sample` is a slot of the epoch (0..len-1)."""
        self._check_open()
        epoch = _check_int("epoch", epoch, 0, 2**32 - 1)
        sample = _check_int("sample", sample, 0, 2**64 - 1)
        buf = ctypes.create_string_buffer(8192)
        err = L.sp_error()
        rc = L.sp_loader_explain(self._ld(), epoch, sample, buf, len(buf), byref(err))
        if rc != 0:
            _raise(rc, err, "explain")
        return buf.value.decode("utf-8", "replace")

    def _failures(self, ld) -> list:
        """self._fail_past, then ld's log entries for samples not in it (a
        loader logs each sample once)."""
        out = list(self._fail_past)
        seen = {s for s, _ in out}
        f = L.sp_failure()
        for i in range(L.sp_loader_failure_count(ld)):
            if L.sp_loader_failure_get(ld, i, byref(f)) == 0 and int(f.sample) not in seen:
                out.append((int(f.sample), f.msg.decode("utf-8", "replace")))
        return out

    def failures(self) -> list:
        """The failure log (on_error skip/substitute): [(sample, message)]."""
        self._check_open()
        return self._failures(self._ld())

    def worker_pids(self) -> list:
        """PIDs of the live worker processes (empty before iteration / workers=0)."""
        pool = L.sp_stream_pool(self._res.stream) if self._res.stream else None
        if not pool:
            return []
        return [p for p in (L.sp_pool_worker_pid(pool, w) for w in range(self.workers))
                if p > 0]

    def __repr__(self):
        return (f"seedpipe.Loader({self.data!r}, pipeline={self.pipeline!r}, seed={self.seed}, "
                f"batch_size={self.batch_size}, workers={self.workers}, epochs={self.epochs}, "
                f"epoch={self._epoch}, batch={self._batch}{', closed' if self.closed else ''})")


def _cache_counters(c, past: Optional[dict]) -> dict:
    """sp_cache_stats of cache c as a dict, plus the counters in `past`."""
    st = L.sp_cache_stats()
    L.sp_cache_stats_get(c, byref(st))
    out = {name: int(getattr(st, name)) for name, _ in L.sp_cache_stats._fields_
           if name != "_reserved"}
    if past:
        out = {k: v + past.get(k, 0) for k, v in out.items()}
    return out


class Client(_Base):
    """Batches of a running `seedpipe serve` (attach(name, rank)), as views
    on the service's shared memory. Same iteration interface as Loader:
    each `for` yields the rest of the current epoch; stream() yields all."""

    def __init__(self, name: str, rank: int = 0, copy: bool = False):
        self._res = _Res()
        self._finalizer = weakref.finalize(self, _Res.free, self._res)
        self._info = self._last = None
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty region name, got {name!r}")
        rank = _check_int("rank", rank, 0, 63)
        self.name, self.rank, self.copy = name, rank, bool(copy)
        _need_streams()
        self._err, self._failed = L.sp_error(), False
        sc = L.sp_stream_config()
        L.sp_stream_config_default(byref(sc))
        sc.kind = L.STREAM_KINDS["service"]
        self._bname = name.encode()
        sc.service_name, sc.rank = self._bname, rank
        s = ctypes.c_void_p()
        err = L.sp_error()
        rc = L.sp_stream_open(None, byref(sc), byref(s), byref(err))
        if rc != 0:
            _raise(rc, err, f"region {name}")
        self._res.stream = s.value
        # What only a service has (epochs, its pid, ring slots): the client's info.
        info = L.sp_client_info()
        L.sp_client_info_get(L.sp_stream_client(self._res.stream), byref(info))
        self.info = info
        self._geometry((info.c, info.h, info.w), info.dtype, info.layout)
        self._nb = int(info.batches_per_epoch)
        self.world, self.epochs, self.seed = int(info.world), int(info.epochs), int(info.seed)
        self.batch_size = int(info.batch_size)
        self.fingerprint = info.fingerprint.hex()
        self.service_pid = int(info.service_pid)
        self._ended = False

    def __len__(self) -> int:
        return self._nb

    def _pos(self) -> Tuple[int, int]:
        st = self._stream_state()
        return int(st.epoch), int(st.batch)

    @property
    def epoch(self) -> int:
        return self._pos()[0]

    def _next_epoch(self) -> int:
        return self._pos()[0]

    def _at_end(self) -> bool:
        return self._ended or self.closed

    def state_dict(self) -> dict:
        """Loader state after the last batch taken (for `serve --resume`,
        or Loader.load_state_dict: it resumes with any rank count)."""
        self._check_open()
        return _state_to_dict(self._stream_state())

    def set_epoch(self, epoch: int) -> None:
        raise ValueError("set_epoch: a service client follows the service's stream; "
                         "start the service at another position with serve --resume")

    def load_state_dict(self, state) -> None:
        raise ValueError("load_state_dict: a service client follows the service's stream; "
                         "start the service with serve --resume STATE")

    def _take(self) -> Optional[L.sp_batch]:
        b = super()._take()
        if b is None:
            self._ended = True
        return b

    def __iter__(self):
        self._check_open()
        return _EpochIter(self, None)

    def __repr__(self):
        return f"seedpipe.Client({self.name!r}, rank={self.rank}, world={self.world})"


def attach(name: str, rank: int = 0, copy: bool = False) -> Client:
    """Attach to the running service NAME (`seedpipe serve --name NAME`) as
    `rank`; raises seedpipe.Error with the C message ("region NAME: ...")."""
    return Client(name, rank, copy)
