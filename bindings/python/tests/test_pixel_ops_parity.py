"""The pixel-value ops against torchvision with the parameters forced on
both sides (issue 39, item 2).

Real photos (Debian's mate-backgrounds), each decoded once by PIL, reduced
to 320x240 and written as PNG, so that seedpipe and torchvision start from
the same pixels; seedpipe runs `center_crop size=240,320 | <op> p=1 ...`
(the crop is the identity: it gives the pipeline its fixed size) and
torchvision.transforms.functional runs the op on the uint8 tensor of the
same pixels. Exact (every value equal) is required for invert, posterize,
solarize, autocontrast, equalize, sharpness and hue: seedpipe computes them
as torchvision's tensor code does (docs/pipeline.md, section 3 and the
fidelity table in section 8). The same ops on the PIL image (what
torchvision runs when a dataset yields PIL images) are measured and printed
with their PSNR, not required. Skipped (visibly) without torch/torchvision
or the photos.
"""
import os

import numpy as np
import pytest

import seedpipe
from parity_photos import images_by_index, psnr, reduced_photos

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
F = pytest.importorskip("torchvision.transforms.functional",
                        reason="torchvision (python3-torchvision) not installed")
from PIL import Image  # noqa: E402  (torchvision brings Pillow)

W, H = 320, 240

# (seedpipe op, torchvision function of a CHW uint8 tensor or a PIL image)
CASES = [
    ("invert p=1", F.invert),
    ("posterize bits=1 p=1", lambda t: F.posterize(t, 1)),
    ("posterize bits=3 p=1", lambda t: F.posterize(t, 3)),
    ("posterize bits=8 p=1", lambda t: F.posterize(t, 8)),
    ("solarize threshold=128 p=1", lambda t: F.solarize(t, 128)),
    ("solarize threshold=100.5 p=1", lambda t: F.solarize(t, 100.5)),
    ("solarize threshold=0 p=1", lambda t: F.solarize(t, 0)),
    ("autocontrast p=1", F.autocontrast),
    ("equalize p=1", F.equalize),
    ("sharpness factor=0 p=1", lambda t: F.adjust_sharpness(t, 0.0)),
    ("sharpness factor=0.3 p=1", lambda t: F.adjust_sharpness(t, 0.3)),
    ("sharpness factor=1.7 p=1", lambda t: F.adjust_sharpness(t, 1.7)),
    ("sharpness factor=2 p=1", lambda t: F.adjust_sharpness(t, 2.0)),
    ("color_jitter hue=0.1,0.1", lambda t: F.adjust_hue(t, 0.1)),
    ("color_jitter hue=-0.37,-0.37", lambda t: F.adjust_hue(t, -0.37)),
    ("color_jitter hue=0.5,0.5", lambda t: F.adjust_hue(t, 0.5)),
    ("color_jitter hue=-0.0123,-0.0123", lambda t: F.adjust_hue(t, -0.0123)),
]


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    return reduced_photos(tmp_path_factory, "pixel_parity", W, H)


def seedpipe_run(lst, n, op):
    return images_by_index(lst, f"center_crop size={H},{W} | {op}", n)[0]


@pytest.mark.parametrize("op,fn", CASES, ids=[c[0] for c in CASES])
def test_forced_parameters_match_torchvision(photos, op, fn):
    lst, arrays = photos
    got = seedpipe_run(lst, len(arrays), op)
    rows = []
    for a, g in zip(arrays, got):
        ref = fn(torch.from_numpy(a.copy()).permute(2, 0, 1)).permute(1, 2, 0).numpy()
        pil = np.asarray(fn(Image.fromarray(a)).convert("RGB"))
        rows.append((int(np.count_nonzero(g != ref)), psnr(g, ref), psnr(g, pil)))
    print(f"\n{op}: {len(rows)} photos, values differing from the tensor path "
          f"{sum(r[0] for r in rows)}, min PSNR vs tensor {min(r[1] for r in rows):.2f} dB, "
          f"vs PIL {min(r[2] for r in rows):.2f} dB")
    assert all(r[0] == 0 for r in rows), rows
