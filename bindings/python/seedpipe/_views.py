"""Numpy views on C memory: the arrays a Loader or Client yields, and
BatchInfo (where the last batch came from).

A view is a numpy array whose base (_Mem) describes the C library's memory
through the array interface, with no copy: the in-process loader's batch
buffer or a shared-memory ring slot. The view keeps the Loader or Client
that owns the memory alive (garbage collection never frees memory under a
view), but the memory is reused by the next batch of the same stream and
freed by close(): copy=True (or .copy()) keeps a batch longer.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import _lib as L

__all__ = ["BatchInfo", "BFLOAT16"]


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
            self._indices = as_array(b.indices, (b.count,), "<u8", True)
            self._b = (self.skipped, self.substituted)

    @property
    def indices(self) -> np.ndarray:
        if self._indices is None:
            self._indices = as_array(self._b.indices, (self.count,), "<u8", False)
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
        return as_array(b.skipped, (b.nskipped,), "<u8", True).tolist()

    @property
    def substituted(self) -> list:
        if isinstance(self._b, tuple):
            return self._b[1]
        b = self._b
        if not b.nsubstituted:
            return []
        return [tuple(p) for p in as_array(b.substituted, (b.nsubstituted, 2), "<u8", True).tolist()]

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


def as_array(addr: Optional[int], shape: tuple, typestr: str, copy: bool,
          keep=None) -> np.ndarray:
    """A numpy array over C memory at addr (no copy unless copy=True); a
    view keeps `keep` (the memory's owner) alive."""
    if not addr or 0 in shape:
        return np.empty(shape, np.dtype(typestr))
    a = np.asarray(_Mem(addr, shape, typestr, None if copy else keep))
    return a.copy() if copy else a
