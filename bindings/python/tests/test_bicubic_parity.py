"""Bicubic resizing (resize / random_resized_crop interpolation=bicubic)
against torchvision 0.14 with the parameters forced on both sides.

Real photos (Debian's mate-backgrounds), each decoded once by PIL, reduced
to 320x240 and written as PNG, so that seedpipe and torchvision start from
the same pixels (parity_photos.py). resize: the sizes are the parameters
(down on both axes, up on both, mixed, torchvision's shorter-side int).
random_resized_crop: seedpipe draws the box; the test reads it from
`Loader.explain` and hands it to F.resized_crop. Each output is compared
with torchvision's on the PIL image (PIL's ImagingResample, bicubic,
antialiased by construction) and on the uint8 tensor with antialias=True
(torch's separable AA kernel in float, one rounding at the end):
PSNR >= 40 dB on every photo (measured: about 53-56 dB, both paths).
seedpipe is not bit-exact against PIL: its weights are Q14 (PIL's are
22-bit), its vertical pass runs first (PIL's horizontal one), and it
rounds the intermediate to 8 bits where the tensor path keeps floats;
the values differ by at most 3 (measured), and the test states the
largest difference and the fraction of equal values per op.
The drop-in: torchvision's Resize / RandomResizedCrop with BICUBIC (the
enum, its string and PIL's int 3) convert to interpolation=bicubic, and
bilinear specs keep their text. Skipped (visibly) without
torch/torchvision or the photos.
"""
import re

import numpy as np
import pytest

from parity_photos import images_by_index, psnr, reduced_photos
from seedpipe import transforms as ST

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
F = pytest.importorskip("torchvision.transforms.functional",
                        reason="torchvision (python3-torchvision) not installed")
TV = pytest.importorskip("torchvision.transforms")
from PIL import Image  # noqa: E402  (torchvision brings Pillow)

W, H = 320, 240
BICUBIC = TV.InterpolationMode.BICUBIC


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    return reduced_photos(tmp_path_factory, "bicubic_parity", W, H)


def compare(name, ours, refs_pil, refs_tensor):
    """PSNR >= 40 dB against both torchvision paths, per photo; prints the
    figures (the fidelity table of docs/pipeline.md)."""
    p_pil = [psnr(a, b) for a, b in zip(ours, refs_pil)]
    p_ten = [psnr(a, b) for a, b in zip(ours, refs_tensor)]
    diff = max(int(np.abs(a.astype(int) - b.astype(int)).max()) for a, b in zip(ours, refs_pil))
    equal = np.mean([np.mean(a == b) for a, b in zip(ours, refs_pil)])
    print(f"{name}: PSNR vs PIL min {min(p_pil):.2f} dB, vs tensor (antialias=True) min "
          f"{min(p_ten):.2f} dB; vs PIL max |diff| {diff}, {100 * equal:.1f}% equal")
    for i, (a, b) in enumerate(zip(p_pil, p_ten)):
        assert a >= 40 and b >= 40, f"{name}: photo {i}: {a:.2f} dB (PIL), {b:.2f} dB (tensor)"


def tensor(a):
    return torch.from_numpy(np.array(a)).permute(2, 0, 1).contiguous()


def hwc(t):
    return t.permute(1, 2, 0).numpy()


@pytest.mark.parametrize("size", [(224, 224), (480, 640), (100, 500), 200])
def test_resize_bicubic(photos, size):
    lst, arrays = photos
    s = f"{size[0]},{size[1]}" if isinstance(size, tuple) else str(size)
    # shorter side S: 320x240 -> (S * 4 // 3) x S, the whole of it kept
    keep = "" if isinstance(size, tuple) else f" | center_crop size={size},{size * W // H}"
    ours, _ = images_by_index(lst, f"resize size={s} interpolation=bicubic{keep}", len(arrays))
    tsize = list(size) if isinstance(size, tuple) else size
    pil = [np.asarray(F.resize(Image.fromarray(a), tsize, BICUBIC)) for a in arrays]
    ten = [hwc(F.resize(tensor(a), tsize, BICUBIC, antialias=True)) for a in arrays]
    assert all(o.shape == p.shape for o, p in zip(ours, pil))
    compare(f"resize {s} bicubic", ours, pil, ten)


BOX = re.compile(r"random_resized_crop: box x=(\d+) y=(\d+) w=(\d+) h=(\d+) .*, bicubic")


@pytest.mark.parametrize("size,scale", [((224, 224), "0.08,1"), ((176, 176), "0.5,1"),
                                        ((300, 400), "0.2,1")])
def test_random_resized_crop_bicubic(photos, size, scale):
    lst, arrays = photos
    spec = (f"random_resized_crop size={size[0]},{size[1]} scale={scale} "
            "interpolation=bicubic")
    ours, why = images_by_index(lst, spec, len(arrays), seed=23)
    pil, ten = [], []
    for a, text in zip(arrays, why):
        m = BOX.search(text)
        assert m, text
        x, y, w, h = map(int, m.groups())
        pil.append(np.asarray(F.resized_crop(Image.fromarray(a), y, x, h, w, list(size),
                                             BICUBIC)))
        ten.append(hwc(F.resized_crop(tensor(a), y, x, h, w, list(size), BICUBIC,
                                      antialias=True)))
    compare(f"random_resized_crop {size[0]}x{size[1]} scale={scale} bicubic", ours, pil, ten)


def test_bilinear_spec_text_unchanged_and_bicubic_mapped():
    assert ST.Resize(256).spec() == "resize size=256"
    assert ST.Resize(256, interpolation=TV.InterpolationMode.BILINEAR).spec() == "resize size=256"
    for interp in (BICUBIC, "bicubic", Image.BICUBIC, 3):
        assert ST.Resize(256, interpolation=interp).spec() == "resize size=256 interpolation=bicubic"
        rrc = ST.RandomResizedCrop(224, interpolation=interp).spec()
        assert rrc.endswith(" interpolation=bicubic"), rrc
    tv = TV.Compose([TV.RandomResizedCrop(176, interpolation=BICUBIC), TV.RandomHorizontalFlip(),
                     TV.Resize(160, interpolation=BICUBIC, antialias=True), TV.ToTensor()])
    spec = ST.from_torchvision(tv).spec()
    assert spec.count("interpolation=bicubic") == 2, spec
    assert "interpolation" not in ST.from_torchvision(TV.Resize(256)).spec()
    for bad in (TV.InterpolationMode.NEAREST, TV.InterpolationMode.LANCZOS, Image.NEAREST):
        with pytest.raises(ValueError, match="interpolation"):
            ST.Resize(32, interpolation=bad)
    with pytest.raises(ValueError, match="antialias"):
        ST.Resize(32, interpolation=BICUBIC, antialias=False)


def test_dropin_runs_bicubic(photos, tmp_path):
    """seedpipe.torch.DataLoader over a torchvision ImageFolder whose
    transform resizes bicubically: not refused, and its batches are the
    spec's bytes (the transform converted, not approximated)."""
    import torchvision
    import seedpipe.torch as sptorch
    _, arrays = photos
    root = tmp_path / "folder"
    (root / "a").mkdir(parents=True)
    for i, a in enumerate(arrays[:8]):
        Image.fromarray(a).save(root / "a" / f"{i:02d}.png")
    tf = TV.Compose([TV.Resize((96, 128), interpolation=BICUBIC), TV.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(str(root), transform=tf)
    dl = sptorch.DataLoader(ds, batch_size=4, shuffle=False)
    got = torch.cat([x for x, _ in dl]).numpy()
    want = [np.asarray(F.resize(Image.fromarray(a), [96, 128], BICUBIC)) for a in arrays[:8]]
    assert got.shape == (8, 3, 96, 128)
    for g, w in zip(got, want):
        assert psnr(g.transpose(1, 2, 0), w) >= 40
    direct, _ = images_by_index(str(root), "resize size=96,128 interpolation=bicubic", 8)
    assert np.array_equal(np.stack(direct).transpose(0, 3, 1, 2), got)
