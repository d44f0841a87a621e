"""testing_lib.py - libseedpipe_testing.so (tests/testing_lib.c) for the
tests that call a library internal through ctypes: the library's objects
with those internals exported as spt_NAME (sp__NAME's wrapper), and the
public API. A test build makes it beside libseedpipe.so; where it is not
there (a wheel's library), the test module is skipped, visibly."""
import ctypes
import os

import pytest

from seedpipe import _lib


def path():
    return os.path.join(os.path.dirname(os.path.abspath(_lib.LIB_PATH)), "libseedpipe_testing.so")


def load():
    p = path()
    if not os.path.exists(p):
        pytest.skip(f"{p} not built (a test build makes it beside libseedpipe.so)",
                    allow_module_level=True)
    return ctypes.CDLL(p)


def fn(name, restype, *argtypes):
    """spt_NAME of the testing library with its types set."""
    f = getattr(load(), name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f
