"""Default decode = torchvision's pixels (issue: faithful by default).

On the real JPEGs of Debian's mate-backgrounds (1280x1024 to 5640x3172;
4:4:4, 4:2:2 and 4:2:0), `resize size=256 | center_crop size=224` in uint8,
seedpipe's default (dct=off) against torchvision's Resize(256) +
CenterCrop(224) on the PIL image: PSNR >= 50 dB on every file. The
DCT-domain variant (`decode dct=auto`, the -fast presets) is measured and
printed, not required. Skipped (visibly) without torch/torchvision or the
photos (scripts/setup.sh installs python3-torchvision and mate-backgrounds).
"""
import glob
import os

import numpy as np
import pytest

import seedpipe

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
T = pytest.importorskip("torchvision.transforms",
                        reason="torchvision (python3-torchvision) not installed")
from PIL import Image  # noqa: E402  (torchvision brings Pillow)

PHOTOS = sorted(glob.glob("/usr/share/backgrounds/mate/*/*.jpg"))


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def seedpipe_crops(listfile, n, pipeline):
    out = {}
    with seedpipe.Loader(listfile, pipeline=pipeline, batch_size=4, dtype="uint8",
                         layout="nhwc", epochs=1) as ld:
        for images, _ in ld:
            for k, i in enumerate(ld.batch_info.indices):
                out[int(i)] = np.array(images[k])
    assert sorted(out) == list(range(n))
    return out


@pytest.mark.skipif(not PHOTOS, reason="no /usr/share/backgrounds/mate/*/*.jpg "
                                       "(Debian's mate-backgrounds)")
def test_default_decode_is_torchvisions(tmp_path):
    lst = tmp_path / "photos.txt"
    lst.write_text("".join(f"{p}\t0\n" for p in PHOTOS))
    paths = sorted(PHOTOS)   # the list's canonical (byte-wise) order
    faithful = seedpipe_crops(str(lst), len(paths), "resize size=256 | center_crop size=224")
    fast = seedpipe_crops(str(lst), len(paths),
                          "decode dct=auto | resize size=256 | center_crop size=224")
    tv = T.Compose([T.Resize(256), T.CenterCrop(224)])
    rows = []
    for i, p in enumerate(paths):
        with Image.open(p) as im:
            sub = [l[1:3] for l in im.layer]
            ref = np.asarray(tv(im.convert("RGB")))
        rows.append((os.path.basename(p), im.size, sub, psnr(faithful[i], ref),
                     psnr(fast[i], ref)))
    for name, size, sub, a, b in rows:
        print(f"{name:28s} {size[0]}x{size[1]} {sub[0]} default {a:6.2f} dB  dct=auto {b:6.2f} dB")
    worst = min(r[3] for r in rows)
    print(f"worst default {worst:.2f} dB (median {float(np.median([r[3] for r in rows])):.2f}), "
          f"worst dct=auto {min(r[4] for r in rows):.2f} dB over {len(rows)} JPEGs")
    assert worst >= 50.0, [r for r in rows if r[3] < 50.0]
