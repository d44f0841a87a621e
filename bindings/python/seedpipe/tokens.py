"""Token corpora: write a Megatron indexed dataset (PREFIX.idx + PREFIX.bin)
through the C writer (include/seedpipe/tokens.h).

    import seedpipe.tokens
    seedpipe.tokens.write("corpus/train", (np.array(doc) for doc in docs), dtype="uint16")

The files are megatron-core's MMIDIDX format (version 1), one document a
sequence; megatron-core's IndexedDataset reads them, and seedpipe opens the
prefix (or either file) as a dataset of kind "tokens" (docs/tokens.md). The
files appear only when every document has been written (temporary files,
fsync'd and renamed); an exception on the way leaves PREFIX as it was.
"""
from __future__ import annotations

import ctypes
import os
from typing import Iterable

from . import _lib as L
from ._errors import raise_error

DTYPES = ("uint8", "int8", "int16", "uint16", "int32", "int64")

__all__ = ["write", "DTYPES"]


def _as_tokens(doc, dtype, np, k: int):
    """doc as a contiguous little-endian array of dtype; ValueError naming
    document k when it is not a 1-D array of integers within dtype's range."""
    a = np.asarray(doc)
    if a.ndim != 1:
        raise ValueError(f"seedpipe.tokens.write: document {k}: a 1-D array of tokens is "
                         f"expected, got shape {a.shape}")
    if a.size == 0:
        return np.zeros(0, dtype=dtype)
    if a.dtype.kind not in "iu":
        raise ValueError(f"seedpipe.tokens.write: document {k}: tokens must be integers, "
                         f"got dtype {a.dtype}")
    info = np.iinfo(dtype)
    lo, hi = int(a.min()), int(a.max())
    if lo < info.min or hi > info.max:
        bad = lo if lo < info.min else hi
        raise ValueError(f"seedpipe.tokens.write: document {k}: token {bad} does not fit "
                         f"{dtype} ({info.min}..{info.max})")
    return np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<"))


def write(prefix, documents: Iterable, dtype: str = "uint16") -> int:
    """Write `documents` (an iterable of 1-D integer arrays or sequences, one
    document each) as PREFIX.bin + PREFIX.idx with tokens of `dtype`
    ("uint8", "int8", "int16", "uint16", "int32", "int64", or the numpy
    type or dtype of one of them: np.uint16). Returns the
    number of documents written. ValueError for a token outside dtype's
    range or a document that is not 1-D integers; seedpipe.Error for the C
    writer's errors (an unknown dtype, a write that failed: naming the
    file)."""
    import numpy as np
    if not isinstance(dtype, str):
        try:
            dtype = np.dtype(dtype).name    # np.uint16, np.dtype("int32")
        except TypeError:
            pass
    if dtype not in DTYPES:
        raise ValueError(f"seedpipe.tokens.write: dtype {dtype!r}: expected one of "
                         f"{', '.join(DTYPES)}")
    path = os.fsencode(os.fspath(prefix))
    err = L.sp_error()
    w = L.P()
    rc = L.sp_tokens_writer_open(path, dtype.encode(), ctypes.byref(w), ctypes.byref(err))
    if rc != 0:
        raise_error(rc, err, os.fsdecode(path))
    n = 0
    try:
        for doc in documents:
            a = _as_tokens(doc, dtype, np, n)
            rc = L.sp_tokens_writer_add(w, a.ctypes.data if a.size else None, a.size,
                                        ctypes.byref(err))
            if rc != 0:
                raise_error(rc, err, os.fsdecode(path))
            n += 1
    except BaseException:
        L.sp_tokens_writer_abort(w)
        raise
    rc = L.sp_tokens_writer_close(w, ctypes.byref(err))
    if rc != 0:
        raise_error(rc, err, os.fsdecode(path))
    return n
