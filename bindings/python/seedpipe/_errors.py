"""seedpipe.Error and the library's status codes.

The codes and their names come from the C library at import
(sp_status_at(), include/seedpipe/common.h), never from a copy here:
STATUS maps each name ("OK", "EINVAL", ..., "END") to its code, NAMES maps
each code back, and the module constants (EINVAL, EIO, ..., END) are looked
up in it, so a code the library renames or drops fails the import instead
of drifting. str(Error) is the C message ("path: reason").
"""
from __future__ import annotations

import ctypes

from . import _lib as L

__all__ = ["Error"]


def _status_table() -> dict:
    """{name: code} for every sp_status the library has, in its order."""
    table, i, code = {}, 0, ctypes.c_int()
    while True:
        name = L.sp_status_at(i, ctypes.byref(code))
        if name is None:
            return table
        table[name.decode()] = code.value
        i += 1


STATUS = _status_table()
NAMES = {code: name for name, code in STATUS.items()}

# The codes this package raises or compares with (KeyError at import if the
# library has no such code).
EINVAL, EIO, ERANGE, EUNSUPP = (STATUS[n] for n in ("EINVAL", "EIO", "ERANGE", "EUNSUPP"))
END = STATUS["END"]   # sp_stream_next(): the stream has ended (not an error)


class Error(RuntimeError):
    """A seedpipe C error. str(e) is the C message ("path: reason");
    e.code is the SP_E* code (negative int), e.code_name e.g. "EIO"."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.code_name = NAMES.get(code, str(code))
        self.message = message


def raise_error(rc: int, err: L.sp_error, what: str = "") -> None:
    """Raise Error(rc) with the C message in err, or, when the library left
    none, sp_strerror(rc) prefixed with `what`."""
    msg = err.msg.decode("utf-8", "replace")
    if not msg:
        msg = (L.sp_strerror(rc) or b"error").decode()
        if what:
            msg = f"{what}: {msg}"
    raise Error(rc, msg)
