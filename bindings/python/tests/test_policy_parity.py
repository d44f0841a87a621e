"""affine and the policy ops (auto_augment, rand_augment,
trivial_augment_wide) against torchvision 0.14 with the parameters forced on
both sides.

Real photos (Debian's mate-backgrounds, parity_photos.py) reduced to 320x240
PNG, so both sides start from the same pixels. seedpipe runs each op with
its own draws; the test reads every sample's drawn parameters from
`Loader.explain` (the sub-ops and their signed magnitudes; affine's angle,
translation, scale and shears), checks them against the spec's formulas
over the Python Philox reference (seedpipe._keys) and against torchvision's
own tables (_augmentation_space, _get_policies), and applies torchvision's
functional ops with the same parameters on the uint8 tensor
(autoaugment._apply_op, F.affine). Required: every value equal where no
resampling sub-op ran or with nearest interpolation; with bilinear
resampling (affine, ShearX/Y, TranslateX/Y, Rotate), at most 1e-4 of the
values differing and PSNR >= 40 dB (measured: exact, as seedpipe follows
ATen's AVX2 grid_sample, whose multiply-adds are fused). The
per-op figures of docs/pipeline.md are the lines this prints.
Skipped (visibly) without torch/torchvision or the photos, or where torch
runs its non-AVX2 CPU kernels (seedpipe follows the AVX2 ones: their fused
multiply-adds in torch.linspace and grid_sample).
"""
import re

import numpy as np
import pytest

from parity_photos import images_by_index, psnr, reduced_photos
from seedpipe import _keys

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
F = pytest.importorskip("torchvision.transforms.functional",
                        reason="torchvision (python3-torchvision) not installed")
from torchvision.transforms import InterpolationMode, autoaugment as AA  # noqa: E402

W, H = 320, 240
RESAMPLING = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}
OPS14 = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
         "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize"]


def require_avx2_torch():
    bad = linspace_mismatches()
    if bad:
        pytest.skip(f"torch.linspace{bad[0]} is not its AVX2 kernel's here: torch runs other "
                    "CPU kernels, seedpipe follows the AVX2 ones (docs/pipeline.md), so a last "
                    "bit may differ")


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    require_avx2_torch()
    return reduced_photos(tmp_path_factory, "policy_parity", W, H)


def block(seed, j, op, sample, epoch=0):
    return _keys.philox((j, op, sample, epoch), _keys.stream_key(seed, 2))


def u01(x):
    return (x >> 8) * 2.0 ** -24


def uniform_int(x, n):
    return (x * n) >> 32


def subops(text):
    """[(name, magnitude)] of op 1's line: the binary32 magnitude back from
    its %.9g text."""
    m = re.search(r"^1 \w+: \[(.*?)\]", text, re.M)
    assert m, text
    return [(n, float(np.float32(v))) for n, v in
            (s.rsplit(" ", 1) for s in m.group(1).split(", ") if s)]


def tensor(a):
    return torch.from_numpy(a.copy()).permute(2, 0, 1)


def hwc(t):
    return t.permute(1, 2, 0).numpy()


class Tally:
    """Per key: samples, values differing, largest difference, lowest PSNR."""
    def __init__(self):
        self.rows = {}

    def add(self, key, got, ref):
        d = np.abs(got.astype(np.int16) - ref.astype(np.int16))
        r = self.rows.setdefault(key, [0, 0, 0, 0, float("inf")])
        r[0] += 1
        r[1] += int(np.count_nonzero(d))
        r[2] += d.size
        r[3] = max(r[3], int(d.max()))
        r[4] = min(r[4], psnr(got, ref))

    def report(self, title):
        print(f"\n{title}")
        for k, (n, dif, tot, mx, p) in sorted(self.rows.items()):
            ps = "exact" if dif == 0 else f"{p:.2f} dB"
            print(f"  {k:28s} samples {n:3d}  differing {dif:6d} of {tot:9d}  max {mx}  {ps}")


def check(tally, exact_keys):
    for key, (n, dif, tot, mx, p) in tally.rows.items():
        if exact_keys(key):
            assert dif == 0, (key, dif)
        else:
            assert dif <= tot * 1e-4 and p >= 40, (key, dif, tot, p)


def run_policy(photos, spec, seeds, fill=None, pil=None):
    """Every sample of every seed against _apply_op with its explained
    sub-ops; tallied by the sub-op names (and, given a Tally `pil`, against
    the same ops on the PIL image, printed, not required)."""
    from PIL import Image
    lst, arrays = photos
    tally, texts = Tally(), []
    for seed in seeds:
        got, why = images_by_index(lst, f"center_crop size={H},{W} | {spec}", len(arrays), seed)
        for a, g, text in zip(arrays, got, why):
            mode = InterpolationMode("bilinear" if "(bilinear)" in text else "nearest")
            img = tensor(a)
            subs = subops(text)
            for name, mag in subs:
                img = AA._apply_op(img, name, mag, interpolation=mode, fill=fill)
            tally.add("+".join(n for n, _ in subs) or "(none)", g, hwc(img))
            if pil is not None:
                im = Image.fromarray(a)
                for name, mag in subs:
                    im = AA._apply_op(im, name, mag, interpolation=mode, fill=fill)
                pil.add("+".join(n for n, _ in subs) or "(none)", g, np.asarray(im))
            texts.append((seed, text))
    return tally, texts


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_trivial_augment_wide_each_sub_op(photos, mode):
    """TrivialAugmentWide draws one sub-op: the tally is per sub-op."""
    pil = Tally()
    tally, texts = run_policy(photos, f"trivial_augment_wide interpolation={mode}", range(8),
                              pil=pil)
    tally.report(f"trivial_augment_wide {mode}, per sub-op, vs _apply_op on the uint8 tensor")
    pil.report(f"trivial_augment_wide {mode}, per sub-op, vs _apply_op on the PIL image (not "
               "required: seedpipe follows the tensor path)")
    assert set(tally.rows) == set(OPS14), sorted(tally.rows)
    check(tally, lambda k: mode == "nearest" or k not in RESAMPLING)
    space = AA.TrivialAugmentWide()._augmentation_space(31)
    for seed, text in texts:
        (name, mag), = subops(text)
        b = int(re.search(r"bin (\d+) of 31", text).group(1))
        mags, signed = space[name]
        want = float(mags[b]) if mags.ndim else 0.0
        assert abs(mag) == want or (mag == want == 0), (text, want)
        assert signed or mag >= 0, text


def test_trivial_augment_wide_draws(photos):
    """op = uniform_int(c[0], 14), bin = uniform_int(c[1], 31), negated iff
    uniform_int(c[2], 2) == 1 (block 0 of op 1)."""
    lst, arrays = photos
    _, why = images_by_index(lst, f"center_crop size={H},{W} | trivial_augment_wide",
                             len(arrays), 5)
    for i, text in enumerate(why):
        c = block(5, 0, 1, i)
        (name, mag), = subops(text)
        assert name == OPS14[uniform_int(c[0], 14)], text
        assert f"bin {uniform_int(c[1], 31)} of 31" in text, text
        if name in RESAMPLING or name in ("Brightness", "Color", "Contrast", "Sharpness"):
            assert (mag < 0) == (uniform_int(c[2], 2) == 1) or mag == 0, text


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_rand_augment(photos, mode):
    tally, texts = run_policy(photos, f"rand_augment num_ops=2 magnitude=9 interpolation={mode}",
                              range(4))
    tally.report(f"rand_augment(2, 9) {mode}, per pair of sub-ops")
    check(tally, lambda k: mode == "nearest" or not RESAMPLING & set(k.split("+")))
    space = AA.RandAugment()._augmentation_space(31, (H, W))
    for seed, text in texts:
        subs = subops(text)
        assert len(subs) == 2, text
        for name, mag in subs:
            mags, _ = space[name]
            assert abs(mag) == (float(mags[9]) if mags.ndim else 0.0), (text, name)
    _, why = images_by_index(photos[0], f"center_crop size={H},{W} | rand_augment num_ops=3",
                             len(photos[1]), 2)
    for i, text in enumerate(why):   # sub-op t from block t, c[0]; sign c[1]
        names = [uniform_int(block(2, t, 1, i)[0], 14) for t in range(3)]
        assert [n for n, _ in subops(text)] == [OPS14[k] for k in names], text


@pytest.mark.parametrize("policy,mode", [("imagenet", "nearest"), ("imagenet", "bilinear"),
                                         ("cifar10", "nearest"), ("svhn", "bilinear")])
def test_auto_augment(photos, policy, mode):
    tally, texts = run_policy(photos, f"auto_augment policy={policy} interpolation={mode}",
                              range(6))
    tally.report(f"auto_augment {policy} {mode}, per applied sub-ops")
    check(tally, lambda k: mode == "nearest" or not RESAMPLING & set(k.split("+")))
    tv = AA.AutoAugment(AA.AutoAugmentPolicy(policy))
    space = tv._augmentation_space(10, (H, W))
    for seed, text in texts:
        pol = tv.policies[int(re.search(r"policy \w+ #(\d+)", text).group(1))]
        m = re.findall(r"(\w+) p=([\d.]+) u=(\S+) (applied|skipped)", text)
        assert [(n, float(p)) for n, p, _, _ in m] == [(n, p) for n, p, _ in pol], text
        for (n, p, u, did) in m:   # torchvision: applied iff probs[i] <= p (binary32)
            assert (did == "applied") == (np.float32(u) <= np.float32(float(p))), text
        applied = [(n, b) for (n, _, b), (_, _, _, did) in zip(pol, m) if did == "applied"]
        for (name, mag), (n, b) in zip(subops(text), applied):
            mags, _ = space[name]
            assert name == n and abs(mag) == (float(mags[b]) if b is not None else 0.0), text
    lst, arrays = photos
    _, why = images_by_index(lst, f"center_crop size={H},{W} | auto_augment policy={policy}",
                             len(arrays), 3)
    for i, text in enumerate(why):   # block 0: c[0] the sub-policy, c[1], c[2] the u's
        c = block(3, 0, 1, i)
        assert f"policy {policy} #{uniform_int(c[0], 25)}" in text, text
        us = [float(np.float32(u)) for u in re.findall(r"u=(\S+)", text)]
        assert us == [u01(c[1]), u01(c[2])], text


def test_invert_and_fill(photos):
    """A fill (torchvision's mask blend) on both sides; SVHN's policy has
    Invert in most of its sub-policies."""
    fill = [128.0, 64.0, 32.0]
    for spec in ("auto_augment policy=svhn fill=128,64,32", "trivial_augment_wide "
                 "interpolation=bilinear fill=128,64,32"):
        tally, _ = run_policy(photos, spec, range(3), fill=fill)
        tally.report(f"{spec}, vs _apply_op(fill={fill})")
        bil = "bilinear" in spec
        check(tally, lambda k: not bil or not RESAMPLING & set(k.split("+")))
        assert any("Invert" in k for k in tally.rows) or "trivial" in spec


def affine_explained(text):
    m = re.search(r"1 affine: angle (\S+) translate (-?\d+),(-?\d+) scale (\S+) shear (\S+),(\S+) "
                  r"\((\w+)\)", text)
    assert m, text
    a, tx, ty, s, sx, sy, mode = m.groups()
    f = lambda v: float(np.float32(v))
    return f(a), [int(tx), int(ty)], f(s), [f(sx), f(sy)], mode


AFFINES = ["degrees=30 translate=0.1,0.2 scale=0.8,1.2 shear=10,20",
           "degrees=30 translate=0.1,0.2 scale=0.8,1.2 shear=-10,20,-5,5 fill=10,200,77",
           "degrees=0", "degrees=180 shear=45", "degrees=-90,-90 scale=0.5,2",
           "degrees=10 translate=0.3,0 shear=0,0,-30,30 fill=255"]


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("args", AFFINES)
def test_affine_matches_torchvision(photos, args, mode):
    lst, arrays = photos
    spec = f"affine {args} interpolation={mode}"
    fm = re.search(r"fill=([\d,]+)", args)
    fill = [float(v) for v in fm.group(1).split(",")] if fm else [0.0]
    tally = Tally()
    for seed in range(2):
        got, why = images_by_index(lst, f"center_crop size={H},{W} | {spec}", len(arrays), seed)
        for a, g, text in zip(arrays, got, why):
            ang, t, s, sh, m = affine_explained(text)
            assert m == mode
            ref = F.affine(tensor(a), ang, t, s, sh, InterpolationMode(mode),
                           fill=fill * (3 // len(fill)))
            tally.add("affine", g, hwc(ref))
    tally.report(f"{spec}, vs F.affine on the uint8 tensor with the drawn parameters")
    check(tally, lambda k: mode == "nearest")


def test_affine_draws(photos):
    """block 0: c[0] angle, c[1] tx, c[2] ty, c[3] scale; block 1: c[0], c[1]
    the shears; (float)(lo + (hi - lo) * u01), translations round_even of
    that binary32 value (torchvision's get_params)."""
    lst, arrays = photos
    spec = "affine degrees=-20,40 translate=0.25,0.1 scale=0.7,1.3 shear=-5,10,-20,3"
    _, why = images_by_index(lst, f"center_crop size={H},{W} | {spec}", len(arrays), 9)
    f = lambda lo, hi, w: float(np.float32(lo + (hi - lo) * u01(w)))
    for i, text in enumerate(why):
        c, e = block(9, 0, 1, i), block(9, 1, 1, i)
        ang, (tx, ty), s, (sx, sy), _ = affine_explained(text)
        mx, my = 0.25 * W, 0.1 * H
        assert (ang, s, sx, sy) == (f(-20, 40, c[0]), f(0.7, 1.3, c[3]), f(-5, 10, e[0]),
                                    f(-20, 3, e[1])), text
        assert (tx, ty) == (round(f(-mx, mx, c[1])), round(f(-my, my, c[2]))), text


def linspace_avx2(start, end, steps):
    """torch.linspace's binary32 values as its AVX2 kernel computes them
    (augment/ops_internal.h sp__linspace_f32), with exact fused multiply-adds."""
    from fractions import Fraction
    f32 = np.float32

    def fma(a, b, c):
        x = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        r = f32(float(x))   # then correct a double rounding, if any
        for v in (np.nextafter(r, f32(-np.inf)), np.nextafter(r, f32(np.inf))):
            if abs(Fraction(float(v)) - x) < abs(Fraction(float(r)) - x):
                r = v
        return f32(r)
    s, e = f32(start), f32(end)
    step = f32(e - s) / f32(steps - 1)
    out = []
    for i in range(steps):
        i0, j = (i - i % 8, i % 8) if i < steps // 16 * 16 else (i, 0)
        base = fma(step, f32(i0), s) if i0 < steps // 2 else fma(-step, f32(steps - i0 - 1), e)
        out.append(base if j == 0 else f32(base + f32(f32(j) * step)))
    return np.array(out, dtype=np.float32)


def linspace_mismatches():
    bad = []
    for steps in (2, 10, 11, 16, 17, 31, 32, 33, 47, 64, 100):
        for lo, hi in ((0.0, 0.3), (0.0, 0.99), (0.0, 32.0), (0.0, 135.0), (255.0, 0.0),
                       (0.0, 150.0 / 331.0 * W)):
            if not np.array_equal(torch.linspace(lo, hi, steps).numpy(),
                                  linspace_avx2(lo, hi, steps)):
                bad.append((steps, lo, hi))
    return bad


def test_linspace_model_is_torchs():
    """The magnitude tables: torch.linspace here equals the AVX2 model that
    seedpipe implements (augment/ops_internal.h sp__linspace_f32; the other tests of this file
    compare seedpipe's magnitudes with torchvision's own tables)."""
    require_avx2_torch()
    assert not linspace_mismatches()


def test_gray_images(photos):
    """1-channel images (decode mode=gray): the same sub-ops on a 1 x H x W
    tensor (Color is the identity there, as torchvision's)."""
    lst, arrays = photos
    base = [g[..., 0] for g in images_by_index(
        lst, f"decode mode=gray | center_crop size={H},{W}", len(arrays))[0]]
    tally = Tally()
    for spec, fill in (("trivial_augment_wide interpolation=bilinear", None),
                       ("auto_augment policy=svhn fill=77", [77.0])):
        for seed in range(3):
            got, why = images_by_index(lst, f"decode mode=gray | center_crop size={H},{W} | "
                                       f"{spec}", len(arrays), seed)
            for b, g, text in zip(base, got, why):
                m = re.search(r"^2 \w+: \[(.*?)\]", text, re.M)
                mode = InterpolationMode("bilinear" if "(bilinear)" in text else "nearest")
                img = torch.from_numpy(b.copy())[None]
                subs = [(n, float(np.float32(v))) for n, v in
                        (s.rsplit(" ", 1) for s in m.group(1).split(", ") if s)]
                for name, mag in subs:
                    img = AA._apply_op(img, name, mag, interpolation=mode, fill=fill)
                tally.add(spec.split()[0] + " " + "+".join(n for n, _ in subs), g[..., 0],
                          img[0].numpy())
    tally.report("gray (1 channel), vs _apply_op on the 1 x H x W uint8 tensor")
    check(tally, lambda k: k.startswith("auto") or not RESAMPLING & set(k.split()[1].split("+")))
