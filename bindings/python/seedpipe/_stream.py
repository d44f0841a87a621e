"""One batch stream (include/seedpipe/stream.h) under a Loader or Client:
the C handles and who frees them (Resources), taking batches and making
views of them (StreamSource), and iteration over one epoch (EpochIter).

Zero copy: the arrays a Loader or Client yields are numpy VIEWS on memory
owned by the C library: the in-process loader's batch buffer (workers=0) or
a slot of the shared-memory ring the worker processes write into
(workers >= 1, and attach()). A batch's arrays are valid until the next
batch is taken from the same loader (the slot is then given back and gets
overwritten), until set_epoch()/load_state_dict() repositions it, and until
close(). Keep a batch longer with copy=True (or images.copy()). Reading a
view after close() reads unmapped memory: don't.

How the C library is reached. Every batch, whichever the source, comes
from one batch stream, one code path (StreamSource._take, EpochIter):
sp_stream_next() for a view, sp_stream_release() of the view held before
taking the next (one held at a time), sp_stream_state() for state_dict(),
sp_stream_batch_digest(), sp_stream_close(). The kinds:
  Loader(workers=0)  SP_STREAM_LOADER, opened in __init__ (it is the
                     loader: it opens the dataset and the cache);
  Loader(workers>=1) SP_STREAM_POOL, opened at the first batch (the workers
                     fork then; worker_pids() is empty until);
  attach()           SP_STREAM_SERVICE, opened by name and rank.
How a Loader repositions its stream is _loader.py's business; a Client
follows the service's.
"""
from __future__ import annotations

import warnings
from ctypes import byref
from typing import Iterator, Optional, Tuple

import numpy as np

from . import _lib as L
from . import _targets, _tokbatch
from ._errors import END, EUNSUPP, Error, raise_error
from ._views import BFLOAT16, BatchInfo, as_array


def need_streams() -> None:
    if not L.HAS_STREAM:
        raise Error(EUNSUPP, f"stream: {L.LIB_PATH} has no batch streams (stream.h; a "
                             "newer libseedpipe is needed)")


class Resources:
    """C handles of one Loader or Client. Freed by free(), which a
    weakref.finalize calls on close(), on garbage collection, or at
    interpreter exit."""

    def __init__(self):
        self.stream = None    # sp_stream * (stream.h): where every batch comes from
        self.held = None      # the view taken from it and not yet given back (sp_batch)
        self.retired = None   # in-process: the stream before a reposition, kept until the
                              # next batch is taken (its buffer backs the last views)
        self.loader = None    # sp_loader *: a pool Loader's own (see _loader.py's opening comment)
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


class StreamSource:
    """Shared machinery: batches taken from one sp_stream, and the
    images/labels views of each."""

    _res: Resources
    copy: bool

    def _take(self) -> Optional[L.sp_batch]:
        """Give back the view held and take the next one from the stream
        (None at its end). The view stays valid until the next _take()."""
        res, err = self._res, self._err
        res.close_retired()
        if res.held is not None:
            held, res.held = res.held, None
            rc = L.sp_stream_release(res.stream, byref(held), byref(err))
            if rc != 0:
                raise_error(rc, err)
        view = L.sp_batch()
        rc = L.sp_stream_next(res.stream, byref(view), byref(err))
        if rc == END:
            return None
        if rc != 0:
            self._failed = True
            raise_error(rc, err)
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
        images = as_array(b.images, (n,) + self._sshape, self._typestr, self.copy, self)
        tok = getattr(self, "_tokens", None)
        if tok:   # a token corpus: a dict of named views (_tokbatch.py)
            return _tokbatch.fields(images, *tok)
        tg = getattr(self, "_targets", None)
        if tg:    # boxes and keypoints after each image (_targets.py)
            return self._target_fields(b, tg)
        if self._dtype == 2:   # bfloat16: numpy has none; uint16 words, marked
            images = images.view(BFLOAT16)
        return images, as_array(b.labels, (n,), "<i4", self.copy, self)

    def _target_fields(self, b: L.sp_batch, tg) -> dict:
        n = b.count
        c, h, w = self._chw
        isz = np.dtype(self._typestr).itemsize
        _, rec = _targets.record_bytes(c * h * w * isz, *tg, hw=(h, w))
        raw = as_array(b.images, (n, rec), "|u1", self.copy, self)
        out = _targets.fields(raw, c * h * w * isz, self._sshape, self._typestr, *tg, hw=(h, w))
        if self._dtype == 2:
            out["image"] = out["image"].view(BFLOAT16)
        out["label"] = as_array(b.labels, (n,), "<i4", self.copy, self)
        return out

    def _geometry(self, chw, dtype, layout):
        self._chw, self._dtype, self._layout = chw, dtype, layout
        c, h, w = chw
        self._sshape = (c, h, w) if layout == 0 else (h, w, c)
        self._typestr = {0: "|u1", 1: "<f4", 2: "<u2", 3: "<f2", 4: "<i4", 5: "<i8"}[dtype]

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
                3: np.dtype(np.float16), 4: np.dtype(np.int32),
                5: np.dtype(np.int64)}[self._dtype]

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


class EpochIter:
    """Iterator over the rest of one epoch of a Loader or Client: the epoch
    is the source's when the iterator is made (epoch=None: when its first
    batch is taken); it ends after that epoch's last batch, when the
    source is positioned elsewhere, at the end of the stream, or on close."""

    def __init__(self, src: "StreamSource", epoch: Optional[int]):
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
