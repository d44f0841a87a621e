"""seedpipe.Loader: deterministic batches of a dataset, in this process or
from a pool of worker processes, as numpy views (see _stream.py).

What stays on an sp_loader, and why: a pool Loader creates its own loader
in __init__ (the pool's comes only with the workers) for what must work
before the first batch: errors at construction, sample dims, len(),
fingerprint, load_state_dict()'s sp_loader_state_check(), the resume state
the pool starts from (sp_loader_state_at), explain(), failures(). Once a
stream is open these use its loader (sp_stream_loader(); for in-process
always). explain(epoch, sample) and the failure log are per-sample queries,
not batches of a stream.

Repositioning. set_epoch() / load_state_dict() move an in-process stream
with sp_stream_seek() (the same loader and cache, nothing reopened; the
last views stay readable until the next batch is taken, as on the one
in-process buffer). A pool computes ahead and cannot seek: its stream is
closed and another opened at the new position at the next batch. An
in-process stream that has failed keeps failing, so a reposition after a
failure opens a new one (the old kept until the next batch is taken; its
failure log and cache counters carried over, so failures() and
cache_stats() still cover the Loader's whole life).

Every option but the dataset is keyword-only: Loader(data, batch_size=64),
never Loader(data, "pipeline", 0, 64).
"""
from __future__ import annotations

import ctypes
import os
import warnings
import weakref
from ctypes import byref
from typing import Iterator, Optional, Tuple

import numpy as np

from . import _lib as L
from . import _targets, _tokbatch
from ._args import U32_MAX, check_choice, check_int, check_order, default_dtype
from ._errors import ERANGE, EUNSUPP, Error, raise_error
from ._launch import resolve_rank_world
from ._sampling import sampler_fields
from ._state import state_from, state_to_dict
from ._stream import EpochIter, Resources, StreamSource, need_streams

__all__ = ["Loader"]

_UNBOUNDED_EPOCHS = U32_MAX   # sp_stream_config.epochs: no end


def cache_warning(ud, msg) -> None:
    """The epoch cache's warning callback (sp_cache_opts.warn): a
    RuntimeWarning, never an error (the batch is computed instead)."""
    warnings.warn("seedpipe cache: " + msg.decode("utf-8", "replace"), RuntimeWarning,
                  stacklevel=2)


def sample_list(samples) -> tuple:
    """(paths, labels[, num_classes]) -> (sp_sample_list, what it points to)."""
    if not isinstance(samples, (tuple, list)) or len(samples) not in (2, 3):
        raise ValueError("samples must be (paths, labels) or (paths, labels, num_classes)")
    paths, labels = list(samples[0]), samples[1]
    ncls = samples[2] if len(samples) == 3 else 0
    if not paths or len(paths) != len(labels):
        raise ValueError(f"samples: {len(paths)} paths and {len(labels)} labels (equal, "
                         "at least one)")
    # Each distinct path encoded once; the C array points into those bytes
    # (kept alive with the list), so a million repeats cost a pointer each.
    enc = {p: os.fsencode(p) for p in dict.fromkeys(paths)}
    addr = {p: ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value for p, b in enc.items()}
    bpaths = (np.fromiter((addr[p] for p in paths), dtype=np.uintp, count=len(paths)), enc)
    blabels = np.ascontiguousarray(labels, dtype=np.int32)
    sl = L.sp_sample_list()
    sl.count = len(paths)
    sl.paths = bpaths[0].ctypes.data_as(ctypes.POINTER(ctypes.c_char_p))
    sl.labels = blabels.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    sl.num_classes = check_int("num_classes", ncls, 0, 65536)
    return sl, bpaths, blabels


class Loader(StreamSource):
    """Deterministic batches of a dataset as numpy arrays.

    Loader(data, *, pipeline="shapes-train", seed=0, batch_size=32, workers=0,
           epochs=None, drop_last=False, dtype=None, layout="nchw",
           rank=0, world=1, on_error="fail", copy=False, threads=1,
           ring=0, rng_mode="per-sample", split=None, subset=None, split_seed=0,
           cache=None)

    The batch bytes are a pure function of (dataset, pipeline, seed, epoch,
    batch index, dtype, layout, batch_size, drop_last, rank, world): the
    worker count, threads and ring depth never change a byte.

    dtype=None (the default) follows the pipeline: a Compose's own dtype,
    else "float32" when the pipeline normalizes (a preset such as
    "imagenet-train" does; uint8 would lose it) and "uint8" when it does
    not, as the CLI's --dtype. An explicit dtype="uint8" with a normalizing
    pipeline is an error.

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

    order="global" (default; also spelt "shuffle") is seedpipe's keyed
    permutation of each epoch, each rank a contiguous slice of the global
    batch; order="block:K" (WebDataset shards, local or remote; any other
    dataset is refused) permutes the shards, then the samples within each
    block of K consecutive shards, so the stream reads K shards at a time,
    with contiguous rank slices as the global order (docs/determinism.md
    6a); order="sequential" is
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

    indices=, num_samples=, replacement=, weights=, repeat= are the samplers
    (seedpipe/_sampling.py, loader.h "Samplers", docs/determinism.md 13):
    a list of dataset indices, the positions an epoch, draws with
    replacement (uniform, or by weights), each sample repeat times with its
    own augmentations, the copies on different ranks. In the fingerprint.

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

    annotations=FILE (a COCO-style instances JSON beside the image dataset;
    "@json": each WebDataset sample's KEY.json member)
    with a pipeline that ends with a `targets` op makes boxes and keypoints
    ride the augmentation (docs/targets.md): batches are dicts of views,
    image, boxes (B, N, 4), labels (B, N), num_boxes (B,), dropped (B, 3),
    keypoints (B, N, K, 3) when K > 0, and label (the class label).
    """

    def __new__(cls, data=None, *args, **kw):
        """A Python map-style dataset object (__len__ and __getitem__, not a
        path or a Mixture) gets the Python backend (_pyloader.DatasetLoader:
        its __getitem__ in seedpipe's workers, every sample seeded)."""
        if cls is Loader and not isinstance(data, (str, bytes, os.PathLike)) and \
                hasattr(data, "__getitem__") and hasattr(data, "__len__"):
            from ._pyloader import DatasetLoader
            return DatasetLoader(data, *args, **kw)
        return super().__new__(cls)

    def __init__(self, data, *, pipeline: str = "shapes-train", seed: int = 0,
                 batch_size: int = 32, workers: int = 0, epochs: Optional[int] = None,
                 drop_last: bool = False, dtype=None, layout: str = "nchw", rank=0,
                 world=1, on_error: str = "fail", copy: bool = False, threads: int = 1,
                 ring: int = 0, rng_mode: str = "per-sample", split: Optional[str] = None,
                 subset: Optional[str] = None, split_seed: int = 0, cache=None,
                 order: str = "global", pad_tail: bool = False, samples=None,
                 trace=None, seq_len=None, packing: str = "concat", eod=None, pad: int = 0,
                 annotations=None, indices=None, num_samples=None, replacement: bool = False,
                 weights=None, repeat: int = 1):
        self._res = Resources()
        self._finalizer = weakref.finalize(self, Resources.free, self._res)
        if trace is not None:
            # first, so that opening the dataset is on the timeline too
            if not L.HAS_TRACE:
                raise Error(EUNSUPP, f"trace: {L.LIB_PATH} has no trace (trace.h; a newer "
                                "libseedpipe is needed)")
            err = L.sp_error()
            rc = L.sp_trace_start(os.fsencode(trace), byref(err))
            if rc != 0:
                raise_error(rc, err, os.fsdecode(trace))
            self._res.trace = True
        self._info = self._last = None
        slist = None
        if samples is not None:
            # an explicit sample list (dataset.h sp_dataset_open_list); `data`
            # is then the folder relative paths are under, or None
            slist = sample_list(samples)
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
        if seq_len is not None:
            # a token corpus: the spec in place of a pipeline (_tokbatch.py)
            pipeline = _tokbatch.spec(seq_len, packing, eod, pad)
        if dtype is None and seq_len is not None:
            dtype = "int32"
        if not isinstance(pipeline, str) or not pipeline.strip():
            raise ValueError(f"pipeline must be a non-empty spec string or a "
                             f"seedpipe.transforms.Compose, got {pipeline!r}")
        if dtype is None:   # follows the pipeline: float32 when it normalizes
            dtype = default_dtype(pipeline)
        seed = check_int("seed", seed, 0, 2**64 - 1)
        batch_size = check_int("batch_size", batch_size, 1, U32_MAX)
        self.workers = check_int("workers", workers, 0, 64)
        if epochs is not None:
            epochs = check_int("epochs", epochs, 1, U32_MAX - 1)
        rank, world = resolve_rank_world(rank, world)
        world = check_int("world", world, 1, 1 << 16)
        rank = check_int("rank", rank, 0, world - 1)
        if batch_size % world:
            raise ValueError(f"batch_size ({batch_size}) must be a multiple of world ({world})")
        self._dtype = check_choice("dtype", dtype, L.DTYPES)
        self._layout = check_choice("layout", layout, L.LAYOUTS)
        on_err = check_choice("on_error", on_error, L.ON_ERROR)
        rng = check_choice("rng_mode", rng_mode, L.RNG_MODES)
        threads = check_int("threads", threads, 1, 1024)
        split_seed = check_int("split_seed", split_seed, 0, 2**64 - 1)
        if (split is None) != (subset is None):
            raise ValueError("split and subset must be given together (e.g. "
                             "split='train=0.9,val=0.1', subset='train')")
        for nm, v in (("split", split), ("subset", subset)):
            if v is not None and (not isinstance(v, str) or not v):
                raise ValueError(f"{nm} must be a non-empty string, got {v!r}")
        if split is not None and not L.HAS_SPLIT:
            raise Error(EUNSUPP, f"split: {L.LIB_PATH} has no dataset splits (a newer "
                            "libseedpipe is needed)")
        self.ring = check_int("ring", ring, 0, 1024)
        if cache is not None:
            if not isinstance(cache, (str, bytes, os.PathLike)):
                raise ValueError(f"cache must be a directory path, got {type(cache).__name__}")
            cache = os.fsdecode(cache)
            if self.workers and not L.HAS_POOL_CACHE:
                raise Error(EUNSUPP, f"cache: {L.LIB_PATH} has no pool cache (a newer libseedpipe "
                                "is needed)")
        self.cache = cache
        self.copy = bool(copy)
        self.epochs = epochs
        self.data, self.pipeline, self.seed = data, pipeline, seed
        self.batch_size, self.drop_last, self.rank, self.world = (batch_size, bool(drop_last),
                                                                  rank, world)
        self.on_error, self.rng_mode = on_error, rng_mode
        self.order = order
        self._order, self._block_shards = check_order(order)
        self.pad_tail = bool(pad_tail)

        self._bdata = data.encode() if data is not None else None
        self._bpipe = pipeline.encode()
        cfg = L.sp_loader_config()
        L.sp_loader_config_default(byref(cfg))
        cfg.dataset, cfg.pipeline, cfg.seed = self._bdata, self._bpipe, seed
        cfg.order, cfg.pad_tail = self._order, int(self.pad_tail)
        cfg.block_shards = self._block_shards
        if annotations is not None:   # docs/targets.md: boxes and keypoints ride the pipeline
            if not isinstance(annotations, (str, bytes, os.PathLike)):
                raise ValueError(f"annotations must be a path to a COCO-style JSON file, got "
                                 f"{type(annotations).__name__}")
            self._bann = os.fsencode(annotations)
            cfg.annotations = self._bann
        self.annotations = annotations
        self._sampler = sampler_fields(cfg, indices, num_samples, replacement, weights, repeat)
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
        need_streams()
        self._err, self._failed = L.sp_error(), False
        self._fail_past, self._cache_past = [], None   # in-process: see _carry_over()
        if cache is not None:
            # The callback and the options must outlive every C call that may warn.
            self._bcache = cache.encode()
            self._cache_warn = L.CACHE_WARN(cache_warning)
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
                raise_error(rc, err, data or "samples")
            self._res.loader = ld.value
        info = L.loader_info(self._ld())
        self.spec = info.spec.decode()
        self._tokens = _tokbatch.parse(self.spec)   # (seq_len, packing) of a token corpus
        self._targets = _targets.parse(self.spec)   # None without a targets op
        if self._tokens and self._dtype == L.DTYPES["uint8"]:
            self._dtype = L.DTYPES["int32"]          # the library's default for a corpus
        self._geometry((info.c, info.h, info.w), self._dtype, self._layout)
        self._nb = int(info.batches_per_epoch)
        self.fingerprint = info.fingerprint.hex()
        # stream position: the next batch to deliver
        self._epoch, self._batch = 0, 0

    def _locator(self):
        loc = self.__dict__.get("_loc")
        if loc is None:   # the sources' sizes, once (a mixture's; else one source)
            ds = L.loader_info(self._ld()).dataset
            nsrc = int(L.dataset_info(ds).mix_sources)
            sizes = [int(L.dataset_info(L.mix_source(ds, s).dataset).size)
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
        if self.epochs is None and self.workers:
            # a pool's stream holds fewer than 2^40 batches (pool.h): "no
            # end" is as many epochs as that allows from here, which no run
            # reaches (a million epochs of a million batches)
            nb = int(L.loader_info(self._ld()).batches_per_epoch)
            sc.epochs = min(_UNBOUNDED_EPOCHS, ((1 << 40) - 1 + epoch * nb + batch) // nb)
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
            raise_error(rc, err, "pool" if self.workers else (self.data or "samples"))
        return s.value, (sc, st)

    # ---- geometry ----
    def __len__(self) -> int:
        """Batches per epoch."""
        return self._nb

    @property
    def num_samples(self) -> int:
        """Positions of an epoch before padding: the samples the loader draws
        from (the subset's with a split or indices=), or with a sampler its
        num_samples (repeat: repeat times the samples)."""
        return int(L.loader_info(self._ld()).size)

    @property
    def padded_samples(self) -> int:
        """Positions of an epoch: num_samples, or with pad_tail the next
        multiple of world."""
        return int(L.loader_info(self._ld()).padded_size)

    def dataset_samples(self) -> Tuple[list, list]:
        """(relative paths, labels) of the dataset's samples in canonical
        order (sp_dataset_path, sp_dataset_label; before any split)."""
        self._check_open()
        ds = L.loader_info(self._ld()).dataset
        n = int(L.dataset_info(ds).size)
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
        epoch = check_int("epoch", epoch, 0, U32_MAX - 1)
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
                raise_error(rc, err, self.data or "samples")
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
        return state_to_dict(self._state())

    def load_state_dict(self, state) -> None:
        """Resume from state_dict() (dict or its JSON text). Raises
        seedpipe.Error with the C message if the state belongs to another
        stream (fingerprint mismatch: it lists what differs). A blend's
        state resumes with the blend's weights as they are now: where they
        differ from the state's, they switch at the state's position
        (docs/tokens.md "Changing a blend's weights")."""
        self._check_open()
        st = state_from(state)
        err = L.sp_error()
        rc = L.sp_loader_resume(self._ld(), byref(st), byref(err))
        if rc != 0:
            raise_error(rc, err, "state")
        self._reposition(int(st.epoch), int(st.batch))

    # ---- iteration ----
    def _take(self) -> L.sp_batch:
        if self._res.stream is None:        # a pool: fork the workers now
            self._res.stream, self._res.keep_open = self._open(self._epoch, self._batch)
        b = super()._take()
        if b is None:                       # not before `epochs` (_at_end() is checked first)
            kind = "pool" if self.workers else "loader"
            raise Error(ERANGE, f"{kind}: the stream ended before the epoch did")
        self._batch += 1
        if self._batch >= self._nb:
            self._epoch, self._batch = self._epoch + 1, 0
        return b

    def __iter__(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        self._check_open()
        return EpochIter(self, self._epoch)

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
        epoch = check_int("epoch", epoch, 0, 2**32 - 1)
        sample = check_int("sample", sample, 0, 2**64 - 1)
        buf = ctypes.create_string_buffer(1 << 19 if self._targets else 8192)
        err = L.sp_error()
        rc = L.sp_loader_explain(self._ld(), epoch, sample, buf, len(buf), byref(err))
        if rc != 0:
            raise_error(rc, err, "explain")
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
