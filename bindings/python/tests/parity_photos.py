"""parity_photos.py - the photos the forced-parameter parity tests feed to
seedpipe and to torchvision alike (test_pixel_ops_parity.py,
test_geom_ops_parity.py): Debian's mate-backgrounds, each decoded once by
PIL, reduced to W x H and written as PNG, so both sides start from the same
pixels; a list file naming them; and every sample's seedpipe output by
dataset index (images_by_index, also test_decode_formats.py's). Not a test
itself."""
import glob

import numpy as np
import pytest
from PIL import Image

PHOTOS = sorted(glob.glob("/usr/share/backgrounds/mate/*/*.jpg"))


def reduced_photos(tmp_path_factory, name, W, H):
    """(list file, [H x W x 3 uint8 arrays]); skips (visibly) without the
    photos."""
    if not PHOTOS:
        pytest.skip("no /usr/share/backgrounds/mate/*/*.jpg (Debian's mate-backgrounds)")
    d = tmp_path_factory.mktemp(name)
    arrays = []
    for i, p in enumerate(PHOTOS):
        with Image.open(p) as im:
            im.draft("RGB", (W * 2, H * 2))   # decode once, reduced: the test needs pixels
            small = im.convert("RGB").resize((W, H), Image.BILINEAR)
        small.save(d / f"{i:03d}.png")
        arrays.append(np.asarray(small))
    lst = d / "photos.txt"
    lst.write_text("".join(f"{d / f'{i:03d}.png'}\t0\n" for i in range(len(arrays))))
    return str(lst), arrays


def psnr(a, b):
    """PSNR in dB of two uint8 arrays, in float64 (inf when equal)."""
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def images_by_index(data, spec, n, seed=0):
    """Every sample's output of `spec` over `data` (HWC uint8, by dataset
    index, one epoch in process), and each one's explain text."""
    import seedpipe
    out, why = {}, {}
    with seedpipe.Loader(data, pipeline=spec, batch_size=4, dtype="uint8", layout="nhwc",
                         epochs=1, seed=seed) as ld:
        for images, _ in ld:
            for k, i in enumerate(ld.batch_info.indices):
                out[int(i)] = np.array(images[k])
                why[int(i)] = ld.explain(0, int(i))
    assert sorted(out) == list(range(n))
    return [out[i] for i in range(n)], [why[i] for i in range(n)]
