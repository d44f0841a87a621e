"""Argument checks shared by Loader, digest(), verify() and seedpipe.torch:
a ValueError that names the argument and the accepted values."""
from __future__ import annotations

from typing import Any

import ctypes

import numpy as np

from . import _lib as L

U32_MAX = 0xFFFFFFFF


def default_dtype(pipeline: Any) -> str:
    """The output dtype when dtype= is not given, as the CLI's --dtype:
    "float32" when the pipeline spec parses and normalizes (uint8 would lose
    the normalization), else "uint8". A spec that does not parse gives
    "uint8": the loader then names its error."""
    if not isinstance(pipeline, str):
        return "uint8"
    p = ctypes.c_void_p()
    err = L.sp_error()
    if L.sp_pipeline_parse(pipeline.encode(), ctypes.byref(p), ctypes.byref(err)) != 0:
        return "uint8"
    try:
        return "float32" if L.sp_pipeline_has_normalize(p) else "uint8"
    finally:
        L.sp_pipeline_destroy(p)


def check_choice(name: str, value: Any, table: dict) -> int:
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        value = np.dtype(value).name
    if not isinstance(value, str) or value.lower() not in table:
        raise ValueError(f"{name} must be one of {', '.join(repr(k) for k in table)}, "
                         f"got {value!r}")
    return table[value.lower()]


def check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


def check_order(value: Any) -> tuple:
    """order= as the tool's --order reads it (sp_order_spec_parse): "global"
    (or "shuffle"), "sequential" or "block:K" -> (sp_order, K); the
    library's message ("order \"block:0\": K, the shards a block, must be at
    least 1") otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"order must be 'global', 'sequential' or 'block:K', got {value!r}")
    o, k, err = ctypes.c_int(0), ctypes.c_uint32(0), L.sp_error()
    if L.sp_order_spec_parse(value.encode(), ctypes.byref(o), ctypes.byref(k),
                             ctypes.byref(err)) != 0:
        raise ValueError(err.msg.decode(errors="replace"))
    return o.value, k.value
