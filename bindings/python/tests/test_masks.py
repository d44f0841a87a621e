"""test_masks.py - instance masks: COCO segmentations rasterised as
pycocotools does, and masks moved through a geometry log as
docs/pipeline.md "Moving a mask" states (include/seedpipe/masks.h).

- sp__mask_warp over a grid of sizes and parameters of every logged op
  (crop, pad, resize, resized crop, flips, rotation, chains) equals
  masks_ref.py (written from the docs) byte for byte;
- an affine step (theta) equals torchvision 0.14's F.affine(NEAREST, fill)
  on the mask, byte for byte;
- resize and resized-crop steps equal torch 1.13's
  F.interpolate(mode="nearest") on the same crop, byte for byte;
- polygons (single, several, concave, degenerate edges, outside the image)
  and RLE (counts lists and compressed strings) equal pycocotools'
  annToMask, installed from PyPI into a venv this test makes (skipped,
  with the reason, where that cannot be done);
- hostile segmentations: named errors.
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from ctypes import POINTER, Structure, c_char_p, c_double, c_int, c_size_t, c_uint8, c_uint32

import numpy as np
import pytest

from seedpipe._lib import sp_error
import testing_lib
import masks_ref

lib = testing_lib.load()   # sp__mask_* as spt_mask_*


class Step(Structure):
    _fields_ = [("kind", c_int), ("op", c_int), ("in_w", c_int), ("in_h", c_int),
                ("out_w", c_int), ("out_h", c_int), ("x0", c_double), ("y0", c_double),
                ("sx", c_double), ("sy", c_double), ("c", c_double), ("s", c_double),
                ("m", c_double * 6), ("th", ctypes.c_float * 6)]


class Log(Structure):   # include/seedpipe/targets.h's sp_geom_log
    _fields_ = [("targets", ctypes.c_void_p), ("n", c_int), ("src_w", c_int), ("src_h", c_int),
                ("step", Step * 128)]


U8P = POINTER(c_uint8)
lib.spt_mask_warp.argtypes = [POINTER(Log), U8P, c_uint8, U8P, POINTER(sp_error)]
lib.spt_mask_polygons.argtypes = [POINTER(c_double), POINTER(c_uint32), c_uint32, c_int, c_int,
                                 U8P, c_char_p, POINTER(sp_error)]
lib.spt_mask_rle.argtypes = [POINTER(c_uint32), c_size_t, c_int, c_int, U8P, c_char_p,
                            POINTER(sp_error)]
lib.spt_mask_rle_string.argtypes = [c_char_p, c_size_t, POINTER(c_uint32), c_size_t,
                                   POINTER(c_size_t), c_char_p, POINTER(sp_error)]
KINDS = {"axis": 0, "hflip": 1, "vflip": 2, "rotate": 3, "affine": 4}


def _u8(a):
    return a.ctypes.data_as(U8P)


def c_warp(mask, steps, fill=0):
    log = Log()
    log.n = len(steps)
    log.src_h, log.src_w = mask.shape
    for i, g in enumerate(steps):
        st = log.step[i]
        st.kind = KINDS[g["kind"]]
        for k in ("in_w", "in_h", "out_w", "out_h"):
            setattr(st, k, g.get(k, g["in_" + k[4:]] if k.startswith("out") else 0))
        for k in ("x0", "y0", "c", "s"):
            setattr(st, k, g.get(k, 0.0))
        st.sx, st.sy = g.get("sx", 1.0), g.get("sy", 1.0)
        for j, v in enumerate(g.get("th", [0.0] * 6)):
            st.th[j] = v
    oh = steps[-1].get("out_h", steps[-1]["in_h"]) if steps else mask.shape[0]
    ow = steps[-1].get("out_w", steps[-1]["in_w"]) if steps else mask.shape[1]
    out = np.zeros((oh, ow), np.uint8)
    src = np.ascontiguousarray(mask, np.uint8)
    err = sp_error()
    rc = lib.spt_mask_warp(ctypes.byref(log), _u8(src), fill, _u8(out), ctypes.byref(err))
    assert rc == 0, err.msg
    return out


def _mask(rng, h, w):
    m = (rng.random((h, w)) < 0.3).astype(np.uint8) * rng.integers(1, 255)
    m[h // 4: h // 2, w // 3: w // 2] = 7
    return m


def axis(in_w, in_h, out_w, out_h, x0=0, y0=0, sx=1.0, sy=1.0):
    return dict(kind="axis", in_w=in_w, in_h=in_h, out_w=out_w, out_h=out_h, x0=float(x0),
                y0=float(y0), sx=sx, sy=sy)


def _steps_grid(rng, w, h):
    """Steps as the runner logs them (docs/pipeline.md geometry log)."""
    out = []
    for ow, oh in ((w // 2, h // 3), (2 * w, 2 * h), (w + 3, h - 1), (7, 5), (w, h),
                   (3 * w // 2 + 1, h // 2 + 1)):
        if ow < 1 or oh < 1:
            continue
        out.append([axis(w, h, ow, oh, sx=ow / w, sy=oh / h)])                  # resize
        bw, bh = int(rng.integers(1, w + 1)), int(rng.integers(1, h + 1))
        bx, by = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
        out.append([axis(w, h, ow, oh, bx, by, ow / bw, oh / bh)])              # resized crop
    for cw, ch in ((w // 2 + 1, h // 2 + 1), (w + 6, h + 3), (w, h + 5)):
        out.append([axis(w, h, cw, ch, (w - cw) // 2 if cw <= w else -((cw - w) // 2),
                         (h - ch) // 2 if ch <= h else -((ch - h) // 2))])       # center crop/pad
        out.append([axis(w, h, cw, ch, int(rng.integers(-4, 5)), int(rng.integers(-4, 5)))])
    out.append([dict(kind="hflip", in_w=w, in_h=h)])
    out.append([dict(kind="vflip", in_w=w, in_h=h)])
    chain = [axis(w, h, 40, 30, 1, 2, 40 / max(w - 3, 1), 30 / max(h - 4, 1)),
             dict(kind="hflip", in_w=40, in_h=30), axis(40, 30, 32, 32, 4, -1),
             dict(kind="vflip", in_w=32, in_h=32), axis(32, 32, 17, 45, sx=17 / 32, sy=45 / 32)]
    out.append(chain)
    return out


SIZES = ((1, 1), (2, 3), (5, 8), (17, 11), (31, 64), (64, 48), (97, 53))


@pytest.mark.parametrize("w,h", SIZES)
def test_warp_equals_reference(w, h):
    rng = np.random.default_rng(w * 1000 + h)
    m = _mask(rng, h, w)
    for steps in _steps_grid(rng, w, h):
        for fill in (0, 255):
            want = masks_ref.warp(m, steps, fill)
            got = c_warp(m, steps, fill)
            assert got.shape == want.shape
            assert np.array_equal(got, want), (w, h, steps, fill)


def _theta(angle):
    r = np.radians(-angle)
    return float(np.float32(np.cos(r))), float(np.float32(np.sin(r)))


@pytest.mark.parametrize("w,h", ((17, 11), (31, 64), (64, 48), (97, 53)))
def test_rotate_equals_torch_grid(w, h):
    rng = np.random.default_rng(w + h)
    m = _mask(rng, h, w)
    for angle in (0.0, 13.0, -37.5, 90.0, 180.0, 271.25):
        c, s = _theta(angle)
        steps = [dict(kind="rotate", in_w=w, in_h=h, c=c, s=s)]
        for fill in (0, 255):
            assert np.array_equal(c_warp(m, steps, fill), masks_ref.warp(m, steps, fill)), angle


@pytest.mark.parametrize("w,h", ((17, 11), (31, 64), (64, 48), (97, 53)))
def test_affine_equals_torchvision(w, h):
    """An affine step through theta (torchvision's own matrix for the
    parameters, rounded to binary32 as F.affine does) equals torchvision
    0.14's F.affine(mask, NEAREST, fill) on the uint8 mask, byte for byte,
    and masks_ref.warp (grid_sample on _gen_affine_grid)."""
    torch = pytest.importorskip("torch")
    tvf = pytest.importorskip("torchvision.transforms.functional")
    from torchvision.transforms import InterpolationMode
    rng = np.random.default_rng(3 * w + h)
    m = _mask(rng, h, w)
    cases = [(0.0, [0, 0], 1.0, [0.0, 0.0]), (17.5, [3, -2], 0.8, [10.0, -5.0]),
             (-45.0, [0, 0], 1.3, [0.0, 20.0]), (90.0, [-5, 7], 1.0, [0.0, 0.0]),
             (0.0, [0, 0], 1.0, [float(np.degrees(np.arctan(0.3))), 0.0])]
    for _ in range(6):
        cases.append((float(rng.uniform(-180, 180)), [int(rng.integers(-9, 10)),
                      int(rng.integers(-9, 10))], float(rng.uniform(0.5, 1.6)),
                      [float(rng.uniform(-30, 30)), float(rng.uniform(-30, 30))]))
    for angle, tr, sc, sh in cases:
        mat = tvf._get_inverse_affine_matrix([0.0, 0.0], angle, [float(t) for t in tr], sc, sh)
        th = [float(np.float32(v)) for v in mat]
        steps = [dict(kind="affine", in_w=w, in_h=h, th=th)]
        for fill in (0, 255):
            want = tvf.affine(torch.from_numpy(m)[None], angle, tr, sc, sh,
                              interpolation=InterpolationMode.NEAREST, fill=[fill])[0].numpy()
            got = c_warp(m, steps, fill)
            assert np.array_equal(got, want), (angle, tr, sc, sh, fill)
            assert np.array_equal(got, masks_ref.warp(m, steps, fill))


@pytest.mark.parametrize("w,h", SIZES)
def test_resize_equals_torch_nearest(w, h):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(7 * w + h)
    m = _mask(rng, h, w)
    for ow, oh in ((w // 2 + 1, h // 3 + 1), (2 * w, 2 * h), (w + 3, h + 1), (7, 5), (3 * w, h),
                   (1, 1)):
        bw, bh = int(rng.integers(1, w + 1)), int(rng.integers(1, h + 1))
        bx, by = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
        for (x, y, cw, ch) in ((0, 0, w, h), (bx, by, bw, bh)):
            crop = torch.from_numpy(m[y:y + ch, x:x + cw].copy())[None, None]
            want = F.interpolate(crop, size=(oh, ow), mode="nearest")[0, 0].numpy()
            got = c_warp(m, [axis(w, h, ow, oh, x, y, ow / cw, oh / ch)])
            assert np.array_equal(got, want), (w, h, ow, oh, x, y, cw, ch)


# ---- rasterising ----------------------------------------------------------

def c_polygons(polys, h, w):
    xy = np.ascontiguousarray(np.concatenate([np.asarray(p, np.float64) for p in polys]))
    npts = np.array([len(p) // 2 for p in polys], np.uint32)
    out = np.zeros((h, w), np.uint8)
    err = sp_error()
    rc = lib.spt_mask_polygons(xy.ctypes.data_as(POINTER(c_double)),
                              npts.ctypes.data_as(POINTER(c_uint32)), len(polys), h, w, _u8(out),
                              b"annotation 0", ctypes.byref(err))
    return rc, out, err.msg.decode()


def c_rle(counts, h, w):
    if isinstance(counts, str):
        buf = (c_uint32 * (len(counts) + 1))()
        m = c_size_t()
        err = sp_error()
        rc = lib.spt_mask_rle_string(counts.encode(), len(counts), buf, len(counts) + 1,
                                    ctypes.byref(m), b"annotation 0", ctypes.byref(err))
        if rc:
            return rc, None, err.msg.decode()
        counts = list(buf[:m.value])
    arr = np.array(counts, np.uint32)
    out = np.zeros((h, w), np.uint8)
    err = sp_error()
    rc = lib.spt_mask_rle(arr.ctypes.data_as(POINTER(c_uint32)), len(arr), h, w, _u8(out),
                         b"annotation 0", ctypes.byref(err))
    return rc, out, err.msg.decode()


PYCOCO_SCRIPT = r"""
import json, sys, numpy as np
from pycocotools import mask as mu
cases = json.load(open(sys.argv[1]))
out = {}
for i, c in enumerate(cases):
    h, w, seg = c["h"], c["w"], c["seg"]
    if isinstance(seg, list):
        m = mu.decode(mu.merge(mu.frPyObjects(seg, h, w)))
    elif isinstance(seg["counts"], list):
        m = mu.decode(mu.frPyObjects(seg, h, w))
    else:
        m = mu.decode({"size": seg["size"], "counts": seg["counts"].encode()})
    out[str(i)] = m
    # also the compressed form of this mask, for the string decoder
    c["rle"] = mu.encode(np.asfortranarray(m))["counts"].decode()
np.savez(sys.argv[2], **out)
json.dump(cases, open(sys.argv[1], "w"))
"""


def _pycoco_python():
    """A venv with pycocotools from PyPI (cached beside the build); None and
    a reason when it cannot be made."""
    root = os.environ.get("SEEDPIPE_PYCOCO_VENV",
                          os.path.join(tempfile.gettempdir(), "seedpipe-pycocotools-venv"))
    py = os.path.join(root, "bin", "python")
    if os.path.exists(py):
        ok = subprocess.run([py, "-c", "import pycocotools.mask"], capture_output=True)
        if ok.returncode == 0:
            return py, None
    try:
        subprocess.run([sys.executable, "-m", "venv", root], check=True, capture_output=True,
                       timeout=300)
        r = subprocess.run([py, "-m", "pip", "install", "-q", "pycocotools"],
                           capture_output=True, timeout=600)
    except (subprocess.SubprocessError, OSError) as e:
        return None, f"cannot make a venv with pycocotools: {e}"
    if r.returncode != 0:
        return None, "pip install pycocotools failed: " + r.stderr.decode()[-300:]
    return py, None


def _cases(rng):
    cases = []
    for (h, w) in ((1, 1), (7, 5), (33, 47), (64, 64), (120, 77)):
        for _ in range(6):
            polys = []
            for _ in range(int(rng.integers(1, 4))):
                n = int(rng.integers(3, 12))
                cx, cy = rng.uniform(-0.2 * w, 1.2 * w), rng.uniform(-0.2 * h, 1.2 * h)
                ang = np.sort(rng.uniform(0, 2 * np.pi, n))
                if rng.random() < 0.3:
                    rng.shuffle(ang)                       # self-intersecting
                rad = rng.uniform(0.5, max(w, h) * 0.6, n)
                pts = np.stack([cx + rad * np.cos(ang), cy + rad * np.sin(ang)], 1)
                if rng.random() < 0.3:
                    pts = np.round(pts * 2) / 2            # on half pixels: the rounding ties
                if rng.random() < 0.2:
                    pts = np.concatenate([pts, pts[-1:]])  # a repeated point
                polys.append([float(v) for v in pts.ravel()])
            cases.append({"h": h, "w": w, "seg": polys})
        runs, left = [], h * w
        while left > 0:
            r = int(rng.integers(0, max(2, left // 3) + 1))
            r = min(r, left)
            runs.append(r)
            left -= r
        cases.append({"h": h, "w": w, "seg": {"size": [h, w], "counts": runs}})
    cases.append({"h": 10, "w": 10, "seg": [[1, 1, 8, 1, 8, 8, 1, 8], [3, 3, 5, 3, 5, 5]]})
    cases.append({"h": 10, "w": 12, "seg": [[0, 0, 12, 0, 12, 10, 0, 10]]})
    cases.append({"h": 9, "w": 9, "seg": [[-3.7, -2.2, 4.4, -1.9, 2.5, 12.5]]})
    return cases


def test_polygons_and_rle_equal_pycocotools():
    py, why = _pycoco_python()
    if py is None:
        pytest.skip(why)
    rng = np.random.default_rng(41)
    cases = _cases(rng)
    with tempfile.TemporaryDirectory() as d:
        cj, npz = os.path.join(d, "cases.json"), os.path.join(d, "masks.npz")
        with open(cj, "w") as f:
            json.dump(cases, f)
        with open(os.path.join(d, "p.py"), "w") as f:
            f.write(PYCOCO_SCRIPT)
        subprocess.run([py, os.path.join(d, "p.py"), cj, npz], check=True, timeout=300)
        want = np.load(npz)
        with open(cj) as f:
            cases = json.load(f)
    nonempty = 0
    for i, c in enumerate(cases):
        h, w, seg = c["h"], c["w"], c["seg"]
        if isinstance(seg, list):
            rc, got, msg = c_polygons(seg, h, w)
        else:
            rc, got, msg = c_rle(seg["counts"], h, w)
        assert rc == 0, msg
        assert np.array_equal(got, want[str(i)]), (i, c)
        rc, got2, msg = c_rle(c["rle"], h, w)          # the compressed string of the same mask
        assert rc == 0, msg
        assert np.array_equal(got2, want[str(i)]), (i, c["rle"])
        nonempty += int(got.any())
    assert nonempty > len(cases) // 2


def test_hostile_segmentations_are_named_errors():
    rc, _, msg = c_polygons([[1, 1, 2, 2]], 8, 8)
    assert rc != 0 and "annotation 0" in msg and "points" in msg
    rc, _, msg = c_polygons([[1, 1, 2, float("nan"), 3, 3]], 8, 8)
    assert rc != 0 and "finite" in msg
    rc, _, msg = c_polygons([[1, 1, 2, 1e30, 3, 3]], 8, 8)
    assert rc != 0 and "2^24" in msg
    rc, _, msg = c_polygons([[0, 0, 1.6e7, 0, 1.6e7, 1.6e7, 0, 1.6e7]] * 3, 8, 8)
    assert rc != 0 and "boundary" in msg
    rc, _, msg = c_polygons([[1, 1, 5, 1, 5, 5]], 1 << 15, 1 << 14)
    assert rc != 0 and "2^28" in msg
    rc, _, msg = c_rle([3, 4], 3, 3)
    assert rc != 0 and "add up to 7" in msg
    rc, _, msg = c_rle([4294967295, 4294967295, 10], 3, 3)
    assert rc != 0 and "add up to" in msg
    for bad in ("\x7f0", "0000000000", "3" + "p", "a"):
        rc, _, msg = c_rle(bad, 3, 3)
        assert rc != 0 and "annotation 0" in msg and "RLE" in msg, bad


def test_bad_logs_are_refused():
    src = np.zeros((4, 4), np.uint8)
    out = np.zeros((64, 64), np.uint8)
    for kind, ow, oh, iw, sx in ((1, 2, 4, 4, 1.0), (3, 4, 5, 4, 1.0), (4, 5, 4, 4, 1.0),
                                 (7, 4, 4, 4, 1.0),
                                 (0, 4, 4, 5, 1.0), (0, 4, 4, 4, 0.0)):
        log = Log()
        log.n, log.src_w, log.src_h = 1, 4, 4
        st = log.step[0]
        st.kind, st.in_w, st.in_h, st.out_w, st.out_h = kind, iw, 4, ow, oh
        st.sx, st.sy = sx, 1.0
        err = sp_error()
        rc = lib.spt_mask_warp(ctypes.byref(log), _u8(src), 0, _u8(out), ctypes.byref(err))
        assert rc != 0 and b"geometry step 0" in err.msg, (kind, ow, oh, iw, sx)
