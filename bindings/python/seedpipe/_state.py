"""Loader state (include/seedpipe/state.h) to and from Python: the C
library formats and parses the JSON (sp_loader_state_format/_parse), so a
state_dict() is exactly what `seedpipe digest --save-state` writes and
`--resume` reads."""
from __future__ import annotations

import ctypes
import json
from ctypes import byref
from typing import Any

from . import _lib as L
from ._errors import raise_error


def state_to_dict(st: L.sp_loader_state) -> dict:
    buf = ctypes.create_string_buffer(4096)
    n = L.sp_loader_state_format(byref(st), buf, len(buf))
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        L.sp_loader_state_format(byref(st), buf, len(buf))
    return json.loads(buf.value.decode())


def state_from(obj: Any) -> L.sp_loader_state:
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
        raise_error(rc, err, "state")
    return st
