"""Argument checks shared by Loader, digest(), verify() and seedpipe.torch:
a ValueError that names the argument and the accepted values."""
from __future__ import annotations

from typing import Any

import numpy as np

U32_MAX = 0xFFFFFFFF


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
