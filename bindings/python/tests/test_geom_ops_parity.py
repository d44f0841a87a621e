"""The geometric ops of issue 39 against torchvision with the parameters
forced on both sides.

Real photos (Debian's mate-backgrounds), each decoded once by PIL, reduced
to 320x240 and written as PNG, so that seedpipe and torchvision start from
the same pixels. seedpipe runs the op with its own draws; the test reads
each sample's drawn parameters twice, from `Loader.explain` and from the
spec's formula over the Python Philox reference (seedpipe._keys: block 0
of op 0, c[0] for y, c[1] for x), requires them to agree, and gives
torchvision.transforms.functional the same parameters. random_crop is pure
indexing: every value must be equal (F.pad + F.crop on the uint8 tensor;
on the PIL image for an RGB fill, which the tensor path does not take).
gaussian_blur (forced sigma, `sigma=s,s`) against F.gaussian_blur on the
uint8 tensor: torchvision accumulates in binary32 in oneDNN's order and
seedpipe in double, so a value may differ by one where the blur lies
within about 1e-5 of a half-integer; required: at most 1 apart, at most
1e-4 of the values differing, PSNR >= 40 dB (measured: above 90 dB).
random_erasing runs on the output values: seedpipe's float32 output after
normalize against torchvision's F.normalize(F.to_tensor(img)) and F.erase
with the box seedpipe drew (read from explain, checked against the
get_params formula over the Python Philox reference): exact for a constant
value; for value=random the values outside the box are exact and those
inside are standard normal.
rotate (forced angle, `degrees=a,a`) against F.rotate on the uint8 tensor
with RandomRotation's list fill: nearest exact; bilinear at most 1 apart,
at most 1e-4 of the values differing, PSNR >= 40 dB (torch's grid comes
from a BLAS matrix product, and torch's kernels depend on the CPU; measured
exact since seedpipe follows the AVX2 grid_sample's fused multiply-adds).
Skipped (visibly) without torch/torchvision or the photos.
"""
import math
import re

import numpy as np
import pytest

import seedpipe
from parity_photos import images_by_index, psnr, reduced_photos
from seedpipe import _keys

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
F = pytest.importorskip("torchvision.transforms.functional",
                        reason="torchvision (python3-torchvision) not installed")
from PIL import Image  # noqa: E402  (torchvision brings Pillow)

W, H = 320, 240
SEED = 17


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    return reduced_photos(tmp_path_factory, "geom_parity", W, H)


def seedpipe_run(lst, n, spec):
    """Every sample's output (HWC uint8) and its explain text."""
    return images_by_index(lst, spec, n, seed=SEED)


def draw_block0(op, sample, epoch=0):
    return _keys.philox((0, op, sample, epoch), _keys.stream_key(SEED, 2))


# (spec, size (h, w), torchvision padding, padding_mode, fill, pad_if_needed)
CROPS = [
    ("random_crop size=224,300 padding=4", (224, 300), [4], "constant", 0, False),
    ("random_crop size=240,320 padding=4", (240, 320), [4], "constant", 0, False),
    ("random_crop size=200,310 padding=10,20 pad_mode=reflect", (200, 310), [10, 20], "reflect",
     0, False),
    ("random_crop size=250,300 padding=3,5,7,9 pad_mode=edge", (250, 300), [3, 5, 7, 9], "edge",
     0, False),
    ("random_crop size=300,400 padding=8 pad_mode=reflect pad_if_needed=1", (300, 400), [8],
     "reflect", 0, True),
    ("random_crop size=260,350 pad_mode=constant fill=77 pad_if_needed=1", (260, 350), None,
     "constant", 77, True),
    ("random_crop size=230,330 padding=12 fill=9,200,31", (230, 330), [12], "constant",
     (9, 200, 31), False),
    ("random_crop size=32 padding=4", (32, 32), [4], "constant", 0, False),
]


def tv_random_crop(a, size, padding, mode, fill, pad_if_needed, y, x):
    """RandomCrop.forward with the offset given: pad, pad_if_needed, crop."""
    pil = isinstance(fill, tuple)   # the tensor path takes a number only
    img = Image.fromarray(a) if pil else torch.from_numpy(a.copy()).permute(2, 0, 1)
    if padding is not None:
        img = F.pad(img, padding, fill, mode)
    _, h, w = F.get_dimensions(img)
    if pad_if_needed and w < size[1]:
        img = F.pad(img, [size[1] - w, 0], fill, mode)
    if pad_if_needed and h < size[0]:
        img = F.pad(img, [0, size[0] - h], fill, mode)
    _, h, w = F.get_dimensions(img)
    assert h >= size[0] and w >= size[1]
    img = F.crop(img, y, x, size[0], size[1])
    return np.asarray(img) if pil else img.permute(1, 2, 0).numpy()


@pytest.mark.parametrize("case", CROPS, ids=[c[0] for c in CROPS])
def test_random_crop_matches_torchvision(photos, case):
    spec, size, padding, mode, fill, pin = case
    lst, arrays = photos
    got, why = seedpipe_run(lst, len(arrays), spec)
    differing, offsets = 0, set()
    for i, (a, g, text) in enumerate(zip(arrays, got, why)):
        m = re.search(r"0 random_crop: offset x=(\d+) y=(\d+) of (\d+)x(\d+)", text)
        assert m, text
        x, y, pw, ph = (int(v) for v in m.groups())
        c = draw_block0(0, i)
        assert y == (c[0] * (ph - size[0] + 1)) >> 32 and x == (c[1] * (pw - size[1] + 1)) >> 32
        offsets.add((x, y))
        ref = tv_random_crop(a, size, padding, mode, fill, pin, y, x)
        assert g.shape == ref.shape
        differing += int(np.count_nonzero(g != ref))
    print(f"\n{spec}: {len(arrays)} photos, {len(offsets)} distinct offsets, values differing "
          f"from torchvision {differing}")
    assert differing == 0
    assert len(offsets) > 1 or (size == (240, 320) and padding is None)


def test_random_crop_too_small_is_an_error(photos):
    lst, arrays = photos
    with pytest.raises(Exception, match="random_crop"):
        seedpipe_run(lst, len(arrays), "random_crop size=241,320")


# (kernel (kx, ky), sigma): the sigma forced (lo = hi), F.gaussian_blur with
# the same binary32 sigma
BLURS = [((3, 3), 0.1), ((3, 3), 1.0), ((5, 5), 1.3), ((9, 9), 2.0), ((23, 23), 1.7),
         ((5, 9), 0.7), ((23, 23), 0.1), ((1, 7), 3.0)]


@pytest.mark.parametrize("kernel,sigma", BLURS, ids=[f"{k[0]}x{k[1]}-{s}" for k, s in BLURS])
def test_gaussian_blur_matches_torchvision(photos, kernel, sigma):
    lst, arrays = photos
    spec = (f"center_crop size={H},{W} | gaussian_blur kernel={kernel[0]},{kernel[1]} "
            f"sigma={sigma},{sigma}")
    got, why = seedpipe_run(lst, len(arrays), spec)
    s32 = float(np.float32(sigma))
    differing, worst, total = 0, 99.0, 0
    for a, g, text in zip(arrays, got, why):
        assert f"1 gaussian_blur: kernel {kernel[0]}x{kernel[1]} sigma " in text, text
        t = torch.from_numpy(a.copy()).permute(2, 0, 1)
        ref = F.gaussian_blur(t, list(kernel), [s32, s32]).permute(1, 2, 0).numpy()
        diff = np.abs(g.astype(np.int16) - ref.astype(np.int16))
        assert diff.max() <= 1
        differing += int(np.count_nonzero(diff))
        total += diff.size
        worst = min(worst, psnr(g, ref) if diff.any() else 99.0)
    print(f"\n{spec}: {len(arrays)} photos, values differing from the tensor path {differing} "
          f"of {total}, min PSNR {worst:.2f} dB")
    assert differing <= total * 1e-4 and worst >= 40


def test_gaussian_blur_sigma_draw(photos):
    """The sigma of each sample is (float)(lo + (hi - lo) * u01(block 0 c[0]))."""
    lst, arrays = photos
    _, why = seedpipe_run(lst, len(arrays), f"center_crop size={H},{W} | gaussian_blur kernel=3 "
                          "sigma=0.1,2")
    for i, text in enumerate(why):
        m = re.search(r"1 gaussian_blur: kernel 3x3 sigma (\S+)", text)
        u = (draw_block0(1, i)[0] >> 8) * 2.0 ** -24
        assert np.float32(m.group(1)) == np.float32(0.1 + (2 - 0.1) * u), text


MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
NORM = f"normalize mean={','.join(map(str, MEAN))} std={','.join(map(str, STD))}"


def seedpipe_float(lst, n, spec):
    out, why = {}, {}
    with seedpipe.Loader(lst, pipeline=spec, batch_size=4, dtype="float32", layout="nchw",
                         epochs=1, seed=SEED) as ld:
        for images, _ in ld:
            for k, i in enumerate(ld.batch_info.indices):
                out[int(i)] = np.array(images[k])
                why[int(i)] = ld.explain(0, int(i))
    return [out[i] for i in range(n)], [why[i] for i in range(n)]


def erasing_box(sample, op, s, r, H, W):
    """torchvision's get_params with the spec's draws (blocks 1..10)."""
    key = _keys.stream_key(SEED, 2)
    u = lambda x: (x >> 8) * 2.0 ** -24
    lr0, lr1 = math.log(r[0]), math.log(r[1])
    for t in range(10):
        c = _keys.philox((1 + t, op, sample, 0), key)
        area = H * W * (s[0] + (s[1] - s[0]) * u(c[0]))
        ar = math.exp(lr0 + (lr1 - lr0) * u(c[1]))
        h, w = round(math.sqrt(area * ar)), round(math.sqrt(area / ar))
        if h < H and w < W:
            return (c[3] * (W - w + 1)) >> 32, (c[2] * (H - h + 1)) >> 32, w, h
    return None


ERASINGS = [("value=0", 0.0), ("value=0.5,-1,2.25", (0.5, -1.0, 2.25)),
            ("scale=0.2,0.6 ratio=0.5,2 value=-0.3", -0.3), ("value=random", None)]


@pytest.mark.parametrize("extra,value", ERASINGS, ids=[e[0] for e in ERASINGS])
def test_random_erasing_matches_torchvision(photos, extra, value):
    lst, arrays = photos
    spec = f"center_crop size={H},{W} | {NORM} | random_erasing p=1 {extra}"
    sm = re.search(r"scale=([\d.]+),([\d.]+)", extra)
    rm = re.search(r"ratio=([\d.]+),([\d.]+)", extra)
    s = (float(sm.group(1)), float(sm.group(2))) if sm else (0.02, 0.33)
    r = (float(rm.group(1)), float(rm.group(2))) if rm else (0.3, 3.3)
    got, why = seedpipe_float(lst, len(arrays), spec)
    inside = []
    for i, (a, g, text) in enumerate(zip(arrays, got, why)):
        m = re.search(r"2 random_erasing: box x=(\d+) y=(\d+) w=(\d+) h=(\d+)", text)
        assert m, text
        x, y, w, h = (int(v) for v in m.groups())
        assert erasing_box(i, 2, s, r, H, W) == (x, y, w, h)
        t = F.normalize(F.to_tensor(Image.fromarray(a)), MEAN, STD)
        v = torch.zeros(3, h, w) if value is None else \
            torch.tensor(value if isinstance(value, tuple) else (value,))[:, None, None]
        ref = F.erase(t, y, x, h, w, v).numpy()
        if value is None:
            inside.append(g[:, y:y + h, x:x + w].ravel().copy())
            g[:, y:y + h, x:x + w] = 0
        assert np.array_equal(g, ref), (i, int(np.count_nonzero(g != ref)))
    if value is None:
        z = np.concatenate(inside)
        assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02, (z.mean(), z.std())
    print(f"\n{spec}: {len(arrays)} photos, exact against F.erase (box from the draws)")


ROTATIONS = [(a, m, f) for a in (10.0, -33.3, 45.0, 90.0, 271.5, 0.7)
             for m in ("nearest", "bilinear") for f in ((0, 0, 0), (10, 200, 77))]


@pytest.mark.parametrize("angle,mode,fill", ROTATIONS,
                         ids=[f"{a}-{m}-{f[1]}" for a, m, f in ROTATIONS])
def test_rotate_matches_torchvision(photos, angle, mode, fill):
    from torchvision.transforms import InterpolationMode
    lst, arrays = photos
    spec = (f"center_crop size={H},{W} | rotate degrees={angle},{angle} interpolation={mode} "
            f"fill={fill[0]},{fill[1]},{fill[2]}")
    got, why = seedpipe_run(lst, len(arrays), spec)
    a32 = float(np.float32(angle))
    differing, worst, total = 0, 99.0, 0
    for a, g, text in zip(arrays, got, why):
        assert f"1 rotate: angle {np.float32(angle):.9g}"[:18] in text, text
        t = torch.from_numpy(a.copy()).permute(2, 0, 1)
        ref = F.rotate(t, a32, InterpolationMode(mode), fill=[float(v) for v in fill])
        diff = np.abs(g.astype(np.int16) - ref.permute(1, 2, 0).numpy().astype(np.int16))
        differing += int(np.count_nonzero(diff))
        total += diff.size
        assert diff.max() <= (0 if mode == "nearest" else 1)
        if diff.any():
            worst = min(worst, psnr(g, ref.permute(1, 2, 0).numpy()))
    print(f"\n{spec}: {len(arrays)} photos, values differing from the tensor path {differing} "
          f"of {total}, min PSNR {worst:.2f} dB")
    assert differing <= total * 1e-4 and worst >= 40


def test_rotate_angle_draw(photos):
    """The angle of each sample is (float)(lo + (hi - lo) * u01(block 0 c[0]))."""
    lst, arrays = photos
    _, why = seedpipe_run(lst, len(arrays), f"center_crop size={H},{W} | rotate degrees=30")
    for i, text in enumerate(why):
        m = re.search(r"1 rotate: angle (\S+) \(nearest\)", text)
        u = (draw_block0(1, i)[0] >> 8) * 2.0 ** -24
        assert np.float32(m.group(1)) == np.float32(-30 + 60 * u), text
