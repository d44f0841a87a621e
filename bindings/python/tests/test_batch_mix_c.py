"""The C batch mixes (include/seedpipe/batchmix.h, loader/batch_mix.c)
against the Python drop-in's (seedpipe/_batchmix.py): lambda, CutMix's box
and RandomChoice's pick equal as floats for many (seed, epoch, batch,
alpha), and the mixed float32 images and targets equal byte for byte.
Skipped (visibly) without torch."""
import ctypes

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")

from seedpipe import _lib  # noqa: E402
from seedpipe._batchmix import CutMix, Draws, MixUp, RandomChoice  # noqa: E402


class Mix(ctypes.Structure):
    _fields_ = [("op", ctypes.c_int), ("lam", ctypes.c_double), ("box", ctypes.c_int * 4)]


E = ctypes.POINTER(_lib.sp_error)
draw = _lib._fn("sp_batch_mix_draw", ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32,
                ctypes.c_uint64, ctypes.c_int, ctypes.c_double, ctypes.c_int, ctypes.c_int,
                ctypes.POINTER(Mix), E)
pick = _lib._fn("sp_batch_mix_pick", ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32,
                ctypes.c_uint64, ctypes.POINTER(ctypes.c_double), ctypes.c_int)
mix_f32 = _lib._fn("sp_batch_mix_f32", ctypes.c_int, ctypes.POINTER(Mix), ctypes.c_void_p,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                   ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, E)


def c_draw(seed, epoch, b, op, alpha, h, w):
    m, err = Mix(), _lib.sp_error()
    assert draw(seed, epoch, b, op, alpha, h, w, ctypes.byref(m), ctypes.byref(err)) == 0
    return m


CASES = [(s, e, b, a) for s in (0, 42, 2**64 - 1) for e in (0, 7) for b in (0, 1, 2**33 + 5)
         for a in (0.05, 0.2, 1.0, 3.5)]


@pytest.mark.parametrize("seed,epoch,b,alpha", CASES)
def test_draws_equal_python(seed, epoch, b, alpha):
    h, w = 37, 224
    mu = MixUp(alpha=alpha, num_classes=3).params(seed, epoch, b, (h, w))
    cm = CutMix(alpha=alpha, num_classes=3).params(seed, epoch, b, (h, w))
    m1, m2 = c_draw(seed, epoch, b, 1, alpha, h, w), c_draw(seed, epoch, b, 2, alpha, h, w)
    assert m1.lam == mu["lam"] and m2.lam == cm["lam"]
    assert tuple(m2.box) == cm["box"]
    p = [0.3, 0.0, 1.7]
    rc = RandomChoice([MixUp(alpha=1.0, num_classes=3), MixUp(alpha=1.0, num_classes=3),
                       CutMix(alpha=1.0, num_classes=3)], p=p)
    arr = (ctypes.c_double * 3)(*p)
    assert pick(seed, epoch, b, arr, 3) == rc.pick(Draws(seed, epoch, b))


@pytest.mark.parametrize("op", [1, 2])
def test_mixed_batch_bytes_equal_python(op):
    rng = np.random.default_rng(3)
    n, c, h, w, k = 6, 3, 9, 11, 5
    seen, mixed = set(), 0
    for b in range(12):
        x = torch.from_numpy(rng.random((n, c, h, w), dtype=np.float32) * 3 - 1)
        y = torch.from_numpy(rng.integers(0, k, n).astype(np.int64))
        cls = MixUp if op == 1 else CutMix
        want_x, want_t = cls(alpha=0.7, num_classes=k).apply(x, y, seed=9, epoch=2, index=b)
        m = c_draw(9, 2, b, op, 0.7, h, w)
        got = x.numpy().copy()
        tg = np.zeros((n, k), dtype=np.float32)
        scratch = np.empty_like(got)
        lab = y.numpy().copy()
        err = _lib.sp_error()
        assert mix_f32(ctypes.byref(m), got.ctypes.data, n, c, h, w, lab.ctypes.data, k,
                       tg.ctypes.data, scratch.ctypes.data, ctypes.byref(err)) == 0
        assert got.tobytes() == want_x.numpy().tobytes()
        assert tg.tobytes() == want_t.numpy().tobytes()
        mixed += not np.array_equal(got, x.numpy())   # (a CutMix box may be empty)
        seen.add(float(m.lam))
    assert len(seen) > 6 and mixed > 6


def test_refusals():
    m, err = Mix(), _lib.sp_error()
    assert draw(0, 0, 0, 1, 0.0, 4, 4, ctypes.byref(m), ctypes.byref(err)) != 0
    assert b"alpha=0" in err.msg
    m = c_draw(0, 0, 0, 1, 1.0, 2, 2)
    x = np.zeros((2, 1, 2, 2), dtype=np.float32)
    lab = np.array([0, 4], dtype=np.int64)
    tg = np.zeros((2, 3), dtype=np.float32)
    assert mix_f32(ctypes.byref(m), x.ctypes.data, 2, 1, 2, 2, lab.ctypes.data, 3,
                   tg.ctypes.data, np.empty_like(x).ctypes.data, ctypes.byref(err)) != 0
    assert b"num_classes=3" in err.msg and b"label 4" in err.msg
