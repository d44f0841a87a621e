"""Semantic label maps in the forms datasets ship them (docs/targets.md,
"Semantic masks"): a palette PNG (Pascal VOC's SegmentationClass), 1/2/4-bit
grey and palette maps. Their stored values are the labels, so each must give
exactly the masks of an 8-bit grey map of the same values, through a random
geometry, whatever the form; forms that cannot hold the labels are named
errors."""
import os

import numpy as np
import pytest

import seedpipe

Image = pytest.importorskip("PIL.Image")

SPEC = ("random_resized_crop size=20,24 | hflip p=0.5 | rotate degrees=15 | "
        "targets masks=semantic mask_fill=255")


def _voc_palette():
    """Pascal VOC's colour map (bitwise construction of its devkit)."""
    pal = []
    for i in range(256):
        r = g = b = 0
        c = i
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        pal += [r, g, b]
    return pal


def _folder(root, labels, save):
    """root/imgs/a/NNN.png images and root/imgs_masks/a/NNN.png maps saved
    by save(array, path)."""
    os.makedirs(os.path.join(root, "imgs", "a"), exist_ok=True)
    os.makedirs(os.path.join(root, "imgs_masks", "a"), exist_ok=True)
    rng = np.random.default_rng(5)
    for i, lab in enumerate(labels):
        h, w = lab.shape
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        Image.fromarray(img, "RGB").save(os.path.join(root, "imgs", "a", f"{i:03d}.png"))
        save(lab, os.path.join(root, "imgs_masks", "a", f"{i:03d}.png"))
    return os.path.join(root, "imgs")


def _grey8(lab, path):
    Image.fromarray(lab, "L").save(path)


def _palette(bits):
    def save(lab, path):
        im = Image.fromarray(lab, "P")
        im.putpalette(_voc_palette())
        im.save(path, bits=bits) if bits < 8 else im.save(path)
        with Image.open(path) as chk:       # the file is what the test says it is
            assert chk.mode == "P"
    return save


def _raw_png(lab, path, bits, color, plte=None):
    """A PNG written by hand (PIL writes grey below 8 bits only as mode "1"
    and shrinks palettes to the indices used): IHDR, PLTE, one IDAT."""
    import struct
    import zlib
    h, w = lab.shape
    per = 8 // bits
    raw = b""
    for y in range(h):
        row = bytearray((w + per - 1) // per)
        for x in range(w):
            row[x // per] |= int(lab[y, x]) << (8 - bits * (x % per + 1))
        raw += b"\0" + bytes(row)

    def chunk(t, d):
        c = struct.pack(">I", len(d)) + t + d
        return c + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    ihdr = struct.pack(">IIBBBBB", w, h, bits, color, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
                (chunk(b"PLTE", bytes(plte)) if plte else b"") +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _grey_low(bits):
    return lambda lab, path: _raw_png(lab, path, bits, 0)


def _semantic(data, workers=0):
    with seedpipe.Loader(data, pipeline=SPEC, batch_size=2, epochs=2, seed=9,
                         workers=workers) as ld:
        return [np.array(b["semantic"]) for b in ld.stream()]


def _labels(top):
    rng = np.random.default_rng(17)
    out = []
    for (h, w) in ((30, 41), (37, 29), (33, 33), (45, 52)):
        out.append(rng.integers(0, top + 1, (h, w)).astype(np.uint8))
    return out


@pytest.mark.parametrize("form,top", [("palette8", 20), ("palette4", 15), ("palette2", 3),
                                      ("palette1", 1), ("grey4", 15), ("grey2", 3),
                                      ("grey1", 1)])
def test_forms_give_the_grey_maps_masks(tmp_path, form, top):
    labels = _labels(top)
    ref = _semantic(_folder(str(tmp_path / "ref"), labels, _grey8))
    kind, bits = form[:-1], int(form[-1])
    save = _palette(bits) if kind == "palette" else _grey_low(bits)
    data = _folder(str(tmp_path / form), labels, save)
    got = _semantic(data)
    assert len(got) == len(ref) == 4
    assert [g.tobytes() for g in got] == [r.tobytes() for r in ref]
    # the masks hold labels, not colours or scaled values: every label seen
    # is one of the map's, and the fill where the rotation leaves the map
    seen = set(np.unique(np.concatenate([g.ravel() for g in got])).tolist())
    assert seen <= set(range(top + 1)) | {255}, seen
    assert len(seen - {255}) > 1
    if form == "palette8":
        assert [g.tobytes() for g in _semantic(data, workers=2)] == [r.tobytes() for r in ref]


def test_forms_that_cannot_hold_labels_are_named(tmp_path):
    labels = _labels(3)
    data = _folder(str(tmp_path / "d"), labels, _grey8)
    m = os.path.join(str(tmp_path / "d"), "imgs_masks", "a", "002.png")
    bad = [(lambda: Image.fromarray(labels[2], "L").convert("LA").save(m), "colour type 4"),
           (lambda: Image.fromarray(labels[2], "L").convert("RGB").save(m), "colour type 2"),
           (lambda: Image.fromarray(labels[2].astype(np.uint16), "I;16").save(m),
            "bit depth 16"),
           (lambda: Image.fromarray(labels[2], "L").save(m, format="JPEG"), "must be a PNG")]
    for make, msg in bad:
        os.unlink(m)
        make()
        with pytest.raises(seedpipe.Error, match=msg) as e:
            _semantic(data)
        assert "imgs_masks/a/002.png" in str(e.value)
    # a palette index past the PLTE is an error naming the map
    lab = labels[2].copy()
    lab[3, 4] = 9
    os.unlink(m)
    _raw_png(lab, m, 8, 3, plte=_voc_palette()[:3 * 9])
    with pytest.raises(seedpipe.Error, match="palette index 9 at row 3, column 4 is past the "
                                             "end of the 9-entry PLTE") as e:
        _semantic(data)
    assert "imgs_masks/a/002.png" in str(e.value)
