"""BMP, WebP and TIFF images in an ImageFolder give the pixels Pillow gives
(issue 39, item 5), and so do the same files as members of a tar shard.

Files are generated here with Pillow (and, for what Pillow does not write,
by hand: 4-bit palettes, top-down rows, 32-bit BI_BITFIELDS), all the same
odd size, in one class folder; seedpipe runs `center_crop` of the full size
(the identity: it gives the pipeline its fixed size) to uint8 NHWC, and
every sample must equal Image.open(path).convert("RGB") exactly.
"""
import io
import struct
import tarfile

import numpy as np
import pytest

import seedpipe
from parity_photos import images_by_index

Image = pytest.importorskip("PIL.Image", reason="Pillow (python3-pil) not installed")

W, H = 37, 23


def picture(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, size=(H, W, 3), dtype=np.uint8)
    a[:, : W // 2] //= 16   # flat-ish area too, so palettes and codecs see runs
    a[:, : W // 2] *= 16
    return a


def bmp_by_hand(a, bits, top_down=False, bitfields=False):
    """A BMP Pillow does not write: 4-bit palettes, top-down rows, 32-bit
    BI_BITFIELDS with the standard masks (124-byte header)."""
    h, w = a.shape[:2]
    hsize = 124 if bitfields else 40
    if bits <= 8:
        n = 1 << bits
        pal = [(int(i * 17 % 256), int((255 - i * 9) % 256), int(i * 53 % 256)) for i in range(n)]
        idx = a[..., 0].astype(np.int64) % n
        stride = ((w * bits + 31) // 32) * 4
        rows = []
        for y in range(h):
            row = bytearray(stride)
            for x in range(w):
                per = 8 // bits
                row[x // per] |= int(idx[y, x]) << (8 - bits * (x % per + 1))
            rows.append(bytes(row))
        paldata = b"".join(bytes((b, g, r, 0)) for r, g, b in pal)
    else:
        step = bits // 8
        stride = ((w * bits + 31) // 32) * 4
        rows = []
        for y in range(h):
            px = a[y][:, ::-1]   # BGR
            if step == 4:
                px = np.concatenate([px, np.full((w, 1), 200, np.uint8)], axis=1)
            rows.append(px.tobytes().ljust(stride, b"\0"))
        paldata = b""
    if not top_down:
        rows = rows[::-1]
    off = 14 + hsize + len(paldata)
    data = b"".join(rows)
    info = struct.pack("<IiiHHIIiiII", hsize, w, -h if top_down else h, 1, bits,
                       3 if bitfields else 0, len(data), 2835, 2835, 0, 0)
    if bitfields:
        info += struct.pack("<IIII", 0xFF0000, 0xFF00, 0xFF, 0xFF000000)
    info = info.ljust(hsize, b"\0")
    return b"BM" + struct.pack("<IHHI", off + len(data), 0, 0, off) + info + paldata + data


def bmp_files(d):
    """(name, bytes or PIL image) for every BMP variant."""
    out = []
    a = picture(1)
    out.append(("rgb24.bmp", Image.fromarray(a)))
    out.append(("rgba32.bmp", Image.fromarray(np.dstack([a, a[..., :1]]), "RGBA")))
    out.append(("grey8.bmp", Image.fromarray(a[..., 1])))
    out.append(("mono1.bmp", Image.fromarray(a[..., 2] > 128)))
    out.append(("pal8.bmp", Image.fromarray(a).quantize(colors=200)))
    out.append(("pal4.bmp", bmp_by_hand(picture(2), 4)))
    out.append(("pal4_topdown.bmp", bmp_by_hand(picture(3), 4, top_down=True)))
    out.append(("pal1_topdown.bmp", bmp_by_hand(picture(4), 1, top_down=True)))
    out.append(("pal8_topdown.bmp", bmp_by_hand(picture(5), 8, top_down=True)))
    out.append(("rgb24_topdown.bmp", bmp_by_hand(picture(6), 24, top_down=True)))
    out.append(("bgrx32_topdown.bmp", bmp_by_hand(picture(7), 32, top_down=True)))
    out.append(("bitfields32.bmp", bmp_by_hand(picture(8), 32, bitfields=True)))
    return out


def webp_files():
    a, b = picture(11), picture(12)
    rgba = Image.fromarray(np.dstack([b, b[..., :1] | 1]), "RGBA")
    return [
        ("lossy.webp", (Image.fromarray(a), {"quality": 80})),
        ("lossy_alpha.webp", (rgba, {"quality": 60})),
        ("lossless.webp", (Image.fromarray(b), {"lossless": True})),
        ("lossless_alpha.webp", (rgba, {"lossless": True})),
        ("grey_lossy.webp", (Image.fromarray(a[..., 0]), {"quality": 90})),
    ]


def tiff_files():
    a, b = picture(21), picture(22)
    rgba = Image.fromarray(np.dstack([b, b[..., :1]]), "RGBA")
    la = Image.fromarray(np.dstack([a[..., 0], a[..., 1]]), "LA")
    return [
        ("rgb_raw.tif", (Image.fromarray(a), {})),
        ("rgb_lzw.tiff", (Image.fromarray(b), {"compression": "tiff_lzw"})),
        ("rgb_deflate.tif", (Image.fromarray(a), {"compression": "tiff_adobe_deflate"})),
        ("rgba_lzw.tif", (rgba, {"compression": "tiff_lzw"})),
        ("rgba_raw.tif", (rgba, {})),
        ("grey_deflate.tif", (Image.fromarray(b[..., 2]), {"compression": "tiff_adobe_deflate"})),
        ("grey_raw.TIF", (Image.fromarray(a[..., 2]), {})),
        ("grey_alpha_lzw.tif", (la, {"compression": "tiff_lzw"})),
    ]


def write_folder(tmp_path, files):
    cls = tmp_path / "ds" / "a"
    cls.mkdir(parents=True)
    paths = []
    for i, (name, obj) in enumerate(files):
        p = cls / f"{i:03d}_{name}"
        if isinstance(obj, bytes):
            p.write_bytes(obj)
        elif isinstance(obj, tuple):
            obj[0].save(p, **obj[1])
        else:
            obj.save(p)
        paths.append(p)
    return str(tmp_path / "ds"), paths


def seedpipe_pixels(root, n):
    return images_by_index(root, f"center_crop size={H},{W}", n)[0]


def check_folder(tmp_path, files):
    root, paths = write_folder(tmp_path, files)
    got = seedpipe_pixels(root, len(paths))
    for p, g in zip(paths, got):
        with Image.open(p) as im:
            ref = np.asarray(im.convert("RGB"))
        assert ref.shape == (H, W, 3), p.name
        diff = int(np.count_nonzero(g != ref))
        assert diff == 0, f"{p.name}: {diff} values differ from Pillow"


def test_bmp_folder_matches_pillow(tmp_path):
    check_folder(tmp_path, bmp_files(tmp_path))


def test_webp_folder_matches_pillow(tmp_path):
    from PIL import features
    if not features.check("webp"):
        pytest.skip("Pillow without WebP support")
    check_folder(tmp_path, webp_files())


def test_tiff_folder_matches_pillow(tmp_path):
    check_folder(tmp_path, tiff_files())


def test_tar_shard_matches_pillow(tmp_path):
    """A WebDataset shard with .bmp, .webp, .tif and .tiff members."""
    files = [bmp_files(tmp_path)[0], bmp_files(tmp_path)[5], webp_files()[0],
             webp_files()[3], tiff_files()[1], tiff_files()[3]]
    blobs = []
    for name, obj in files:
        if isinstance(obj, bytes):
            blobs.append((name, obj))
            continue
        im, kw = obj if isinstance(obj, tuple) else (obj, {})
        b = io.BytesIO()
        im.save(b, format={"bmp": "BMP", "webp": "WEBP", "tif": "TIFF",
                           "tiff": "TIFF"}[name.rsplit(".", 1)[1]], **kw)
        blobs.append((name, b.getvalue()))
    shard = tmp_path / "shard-000000.tar"
    with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as tf:
        for i, (name, data) in enumerate(blobs):
            ext = name.rsplit(".", 1)[1]
            for mname, mdata in ((f"{i:04d}.{ext}", data), (f"{i:04d}.cls", b"0")):
                info = tarfile.TarInfo(mname)
                info.size = len(mdata)
                tf.addfile(info, io.BytesIO(mdata))
    got = seedpipe_pixels(str(shard), len(blobs))
    for (name, data), g in zip(blobs, got):
        with Image.open(io.BytesIO(data)) as im:
            ref = np.asarray(im.convert("RGB"))
        assert int(np.count_nonzero(g != ref)) == 0, name
