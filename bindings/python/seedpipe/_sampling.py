"""The C path's samplers (include/seedpipe/loader.h "Samplers",
docs/determinism.md section 13): Loader(indices=, num_samples=,
replacement=, weights=, repeat=) checked and set on an sp_loader_config.

    indices      the loader's samples are these dataset indices, in this
                 order (each once): SubsetRandomSampler with the shuffled
                 order, a list of indices with order="sequential"
    num_samples  positions an epoch (default: the samples, times repeat)
    replacement  each position drawn with replacement: uniformly
                 (RandomSampler(replacement=True)) or by weights
    weights      one weight per sample (WeightedRandomSampler), finite and
                 >= 0; without replacement each sample at most once an epoch
    repeat       r >= 2: each sample r times in a row, each copy augmented
                 as its own, the copies dealt over the ranks (RASampler)

The arrays are copied into ctypes buffers kept by the caller (the C
library copies them again at create, but the config is given to every
loader the stream opens).
"""
from __future__ import annotations

import ctypes

import numpy as np

from ._args import U32_MAX, check_int


def sampler_fields(cfg, indices, num_samples, replacement, weights, repeat):
    """Set cfg's sampler fields; returns what must outlive cfg (or None)."""
    keep = []
    if indices is not None:
        arr = np.asarray(indices)
        if arr.ndim != 1 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
            raise ValueError(f"indices must be a 1-d sequence of integers, got {arr.dtype} "
                             f"of shape {arr.shape}")
        if arr.size and int(arr.min()) < 0:
            raise ValueError(f"indices: {int(arr.min())} is negative (dataset indices are "
                             ">= 0)")
        buf = np.ascontiguousarray(arr, dtype=np.uint64)
        keep.append(buf)
        cfg.indices = buf.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64))
        cfg.nindices = buf.size
    if num_samples is not None:
        cfg.num_samples = check_int("num_samples", num_samples, 1, 1 << 32)
    if not isinstance(replacement, bool):
        raise ValueError(f"replacement must be a bool, got {replacement!r}")
    cfg.replacement = int(replacement)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"weights must be a 1-d sequence of numbers, got shape {w.shape}")
        buf = np.ascontiguousarray(w)
        keep.append(buf)
        cfg.weights = buf.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        cfg.nweights = buf.size
    cfg.repeat = check_int("repeat", repeat, 1, U32_MAX)
    return keep or None
