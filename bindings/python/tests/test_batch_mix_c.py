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
import testing_lib  # noqa: E402


class Mix(ctypes.Structure):
    _fields_ = [("op", ctypes.c_int), ("lam", ctypes.c_double), ("box", ctypes.c_int * 4)]


E = ctypes.POINTER(_lib.sp_error)
draw = testing_lib.fn("spt_batch_mix_draw", ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32,
                ctypes.c_uint64, ctypes.c_int, ctypes.c_double, ctypes.c_int, ctypes.c_int,
                ctypes.POINTER(Mix), E)
pick = testing_lib.fn("spt_batch_mix_pick", ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32,
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


digest_fn = _lib._fn("sp_batch_mix_digest", _lib.sp_digest, ctypes.POINTER(Mix), ctypes.c_int,
                     ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                     ctypes.c_void_p)


@pytest.mark.parametrize("spec,cls", [("mixup:alpha=0.7", MixUp), ("cutmix:alpha=1.3", CutMix),
                                      ("mixup:alpha=0.2,classes=9", MixUp)])
@pytest.mark.parametrize("workers", [0, 2])
def test_cli_digest_is_the_drop_ins_mix(tmp_path, spec, cls, workers):
    """`seedpipe digest --batch-mix` against seedpipe.Loader's batches mixed
    by the drop-in's MixUp/CutMix, digested here with sp_batch_mix_digest()."""
    import json
    import os
    import subprocess
    import seedpipe
    data = "fakedata:size=23,image=3x12x10,classes=5"
    pipe, seed, bs = "random_crop size=10 padding=2 | hflip p=0.5", 11, 6
    out = tmp_path / "m.jsonl"
    subprocess.run([os.environ.get("SEEDPIPE_BIN", "seedpipe"), "digest", data, "--pipeline",
                    pipe, "--dtype", "float32", "--seed", str(seed), "--batch-size", str(bs),
                    "--epochs", "2", "--workers", str(workers), "--batch-mix", spec, "--out",
                    str(out)], check=True, capture_output=True)
    lines = [json.loads(x) for x in out.read_text().splitlines()[1:]]
    k = int(spec.rsplit("=", 1)[1]) if "classes" in spec else 5
    op = cls(alpha=float(spec.split("=")[1].split(",")[0]), num_classes=k)
    ld = seedpipe.Loader(data, pipeline=pipe, seed=seed, batch_size=bs, dtype="float32",
                         epochs=2)
    got = []
    for e in range(2):
        for b, (x, y) in enumerate(ld):
            x = torch.from_numpy(np.array(x))
            y = torch.from_numpy(np.array(y).astype(np.int64))
            p = op.params(seed, e, b, tuple(x.shape[-2:]))
            mx, t = op.apply(x, y, seed=seed, epoch=e, index=b)
            m = Mix(1 if cls is MixUp else 2, p["lam"], (ctypes.c_int * 4)(*(p["box"] or
                                                                            (0, 0, 0, 0))))
            lab = y.numpy().astype(np.int32)
            mxn, tn = mx.numpy().copy(), t.numpy().copy()
            d = digest_fn(ctypes.byref(m), len(lab), k, lab.ctypes.data, mxn.ctypes.data,
                          mxn.nbytes, tn.ctypes.data)
            got.append((e, b, f"{d.hi:016x}{d.lo:016x}"))
    ld.close()
    assert len(got) == len(lines) == 8
    assert got == [(ln["epoch"], ln["batch"], ln["digest"]) for ln in lines]


CHOICES = [("choice:mixup:alpha=0.8,cutmix:alpha=1.0", [0.8, 1.0], None, None),
           ("choice:cutmix:alpha=0.4,mixup:alpha=2.5,p=3/1,classes=7", [0.4, 2.5], [3.0, 1.0],
            7)]


def _choice_op(spec, alphas, p, k):
    ops = [(MixUp if part.startswith("mixup") else CutMix)(alpha=a, num_classes=k)
           for part, a in zip(spec[7:].split(",")[:2], alphas)]
    return RandomChoice(ops, p=p)


@pytest.mark.parametrize("spec,alphas,p,k", CHOICES)
@pytest.mark.parametrize("workers", [0, 2])
def test_cli_choice_is_the_drop_ins_random_choice(tmp_path, spec, alphas, p, k, workers):
    """`seedpipe digest --batch-mix choice:...` against the drop-in's
    RandomChoice of MixUp and CutMix on seedpipe.Loader's batches: both
    ops picked over the run, every digest equal."""
    import json
    import os
    import subprocess
    import seedpipe
    data = "fakedata:size=40,image=3x12x10,classes=5"
    pipe, seed, bs, k = "random_crop size=10 padding=2 | hflip p=0.5", 5, 4, k or 5
    out = tmp_path / "m.jsonl"
    subprocess.run([os.environ.get("SEEDPIPE_BIN", "seedpipe"), "digest", data, "--pipeline",
                    pipe, "--dtype", "float32", "--seed", str(seed), "--batch-size", str(bs),
                    "--epochs", "2", "--workers", str(workers), "--batch-mix", spec, "--out",
                    str(out)], check=True, capture_output=True)
    lines = [json.loads(x) for x in out.read_text().splitlines()[1:]]
    op = _choice_op(spec, alphas, p, k)
    got, picked = [], set()
    with seedpipe.Loader(data, pipeline=pipe, seed=seed, batch_size=bs, dtype="float32",
                         epochs=2) as ld:
        for e in range(2):
            for b, (x, y) in enumerate(ld):
                x = torch.from_numpy(np.array(x))
                y = torch.from_numpy(np.array(y).astype(np.int64))
                prm = op.params(seed, e, b, tuple(x.shape[-2:]))
                picked.add(prm["op"])
                mx, t = op.apply(x, y, seed=seed, epoch=e, index=b)
                m = Mix(1 if prm["op"] == "mixup" else 2, prm["lam"],
                        (ctypes.c_int * 4)(*(prm["box"] or (0, 0, 0, 0))))
                lab = y.numpy().astype(np.int32)
                mxn, tn = mx.numpy().copy(), t.numpy().copy()
                d = digest_fn(ctypes.byref(m), len(lab), k, lab.ctypes.data, mxn.ctypes.data,
                              mxn.nbytes, tn.ctypes.data)
                got.append((e, b, f"{d.hi:016x}{d.lo:016x}"))
    assert picked == {"mixup", "cutmix"}
    assert len(got) == len(lines) == 20
    assert got == [(ln["epoch"], ln["batch"], ln["digest"]) for ln in lines]


@pytest.mark.parametrize("spec", ["choice:", "choice:mixup:alpha=1,p=1/1", "mixup:alpha=1,"
                                  "cutmix:alpha=1", "choice:mixup:alpha=1,p=0", "mixup:alpha=-1",
                                  "choice:mixup:alpha=1,p=1/x", "choice:mixup:alpha=1,"
                                  "classes=3,cutmix:alpha=2", "mixup:alpha=1,classes=0"])
def test_cli_batch_mix_refusals(spec):
    import os
    import subprocess
    r = subprocess.run([os.environ.get("SEEDPIPE_BIN", "seedpipe"), "digest",
                        "fakedata:size=8,image=3x8x8,classes=2", "--pipeline",
                        "center_crop size=8", "--dtype", "float32", "--batch-size", "4",
                        "--batch-mix", spec, "--out", "/dev/null"], capture_output=True,
                       text=True)
    assert r.returncode != 0 and f"--batch-mix {spec}: expected" in r.stderr, r.stderr
