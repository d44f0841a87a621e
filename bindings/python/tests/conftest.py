"""Shared fixtures: the seedpipe tool, a small shapes dataset, an independent
XXH3-128 (libxxhash through ctypes) to re-hash the arrays Python received,
and a session-wide check that nothing leaked (child processes, /dev/shm)."""
import ctypes
import ctypes.util
import gc
import os
import struct
import subprocess
import time

import numpy as np
import pytest

import seedpipe

PREFIX = f".sp-py-{os.getpid()}"     # leading dot: service region names of this session

# The persistent indexes of the datasets the tests make go to a folder of
# this session's own (set before any open; the CLI runs inherit it), never
# into the user's ~/.cache.
if not os.environ.get("SEEDPIPE_CACHE"):
    import atexit
    import shutil
    import tempfile
    os.environ["SEEDPIPE_CACHE"] = tempfile.mkdtemp(prefix="sp-py-index-cache.")
    atexit.register(shutil.rmtree, os.environ["SEEDPIPE_CACHE"], True)


class _XXH128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


def _load_xxhash():
    for name in ("libxxhash.so.0", ctypes.util.find_library("xxhash") or "", "libxxhash.so"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.XXH3_128bits.restype = _XXH128
        lib.XXH3_128bits.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        return lib
    return None


_XXH = _load_xxhash()


def xxh3_128(data: bytes) -> str:
    if _XXH is None:
        pytest.skip("libxxhash not loadable (needed for the independent digest)")
    h = _XXH.XXH3_128bits(data, len(data))
    return f"{h.high64:016x}{h.low64:016x}"


def array_digest(images: np.ndarray, labels: np.ndarray, indices, chw, dtype_code) -> str:
    """sp_batch_digest() (loader.c) recomputed from the numpy arrays alone:
    XXH3-128 of u64 LE (count, c, h, w, dtype, indices..., labels...) + image bytes."""
    n = images.shape[0]
    head = struct.pack("<5Q", n, *chw, dtype_code)
    idx = np.asarray(indices, dtype="<u8").tobytes()
    lab = labels.astype("<i4").view("<u4").astype("<u8").tobytes()
    return xxh3_128(head + idx + lab + np.ascontiguousarray(images).tobytes())


def stream_digest(digests) -> str:
    """`seedpipe digest`'s stream digest: XXH3-128 over the batch digests (hi, lo big-endian)."""
    return xxh3_128(b"".join(bytes.fromhex(d) for d in digests))


def children():
    me = str(os.getpid())
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        fields = s[s.rindex(")") + 2:].split()
        if fields[1] == me and fields[0] not in "ZX":
            out.append(int(pid))
    return out


def wait_no_children(timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        gc.collect()
        left = children()
        if not left:
            return []
        time.sleep(0.02)
    return children()


def our_regions():
    try:
        return sorted(n for n in os.listdir("/dev/shm") if n.startswith(PREFIX))
    except FileNotFoundError:
        return []


@pytest.fixture(scope="session", autouse=True)
def no_leaks_after_session():
    before = set(children())
    yield
    left = set(wait_no_children()) - before
    assert not left, f"child processes left after the session: {sorted(left)}"
    assert not our_regions(), f"shared-memory regions left: {our_regions()}"


@pytest.fixture(scope="session")
def binary():
    return seedpipe.find_binary()


@pytest.fixture(scope="session")
def shapes(tmp_path_factory, binary):
    d = tmp_path_factory.mktemp("sp-py") / "shapes"
    subprocess.run([binary, "make-shapes", str(d), "--count", "60", "--size", "32", "--seed",
                    "5"], check=True, capture_output=True)
    return str(d)


_names = [0]


@pytest.fixture
def region_name():
    _names[0] += 1
    return f"{PREFIX}-{_names[0]}"
