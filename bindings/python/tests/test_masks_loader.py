"""test_masks_loader.py - instance masks through the Loader (docs/targets.md
"Masks"): a folder of photos (Debian's mate-backgrounds, reduced to a grid
of sizes) with a COCO-style JSON whose annotations carry polygons, RLE
count lists and compressed RLE strings.

- for every geometric op (and chains), each kept box's mask equals its
  segmentation rasterised at the decoded size (sp__mask_polygons /
  sp__mask_rle, checked against pycocotools in test_masks.py) and moved by
  masks_ref.py through the steps read from explain, byte for byte; masks
  follow their boxes (same kept set, same order), zero after them;
- affine and the policy ops (ShearX/Y, TranslateX/Y, Rotate): instance
  and semantic masks moved through the image's own binary32 theta by
  nearest neighbour, equal to masks_ref.py (torch's grid_sample on
  torchvision's grid);
- equal batches at 0, 1 and 3 workers and after a resume at another
  worker count;
- hostile segmentations and rules: named errors.
"""
import glob
import json

import os

import numpy as np
import pytest
from PIL import Image

import seedpipe
import masks_ref
import targets_ref
from test_masks import c_polygons, c_rle

PHOTOS = sorted(glob.glob("/usr/share/backgrounds/mate/*/*.jpg"))
FACTORS = (7, 10, 13, 17, 23, 29)


def rle_string(counts):
    """pycocotools' compressed form of a counts list (docs/targets.md)."""
    out = []
    for i, c in enumerate(counts):
        x = c - counts[i - 2] if i > 2 else c
        more = True
        while more:
            ch = x & 0x1f
            x >>= 5
            more = (x != -1) if (ch & 0x10) else (x != 0)
            if more:
                ch |= 0x20
            out.append(chr(ch + 48))
    return "".join(out)


def rle_counts(mask):
    flat = mask.T.ravel()          # column-major
    counts, prev, run = [], 0, 0
    for v in flat:
        if v != prev:
            counts.append(run)
            run, prev = 0, v
        run += 1
    counts.append(run)
    return counts


def _seg(rng, w, h, x, y, bw, bh, kind):
    if kind == 0:   # polygons inside (and across) the box
        polys = []
        for _ in range(int(rng.integers(1, 3))):
            n = int(rng.integers(3, 9))
            pts = np.stack([rng.uniform(x, x + bw, n), rng.uniform(y, y + bh, n)], 1)
            polys.append([float(v) for v in pts.ravel()])
        return polys
    m = np.zeros((h, w), np.uint8)
    x0, y0 = max(int(x), 0), max(int(y), 0)
    m[y0:max(int(y + bh), y0 + 1), x0:max(int(x + bw), x0 + 1)] = 1
    m &= (rng.random((h, w)) < 0.8).astype(np.uint8)
    counts = rle_counts(m)
    return {"size": [h, w], "counts": counts if kind == 1 else rle_string(counts)}


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    if not PHOTOS:
        pytest.skip("no /usr/share/backgrounds/mate/*/*.jpg (Debian's mate-backgrounds)")
    d = tmp_path_factory.mktemp("cocomasks")
    (d / "photos").mkdir()
    rng = np.random.default_rng(43)
    images, anns = [], []
    for i, p in enumerate(PHOTOS[:8]):
        with Image.open(p) as im:
            W, H = im.size
            f = FACTORS[i % len(FACTORS)]
            w, h = max(W // f // 2, 8), max(H // (f + i % 3) // 2, 8)
            im.draft("RGB", (w * 2, h * 2))
            im.convert("RGB").resize((w, h), Image.BILINEAR).save(d / "photos" / f"{i:03d}.png")
        images.append({"id": 100 + i, "file_name": f"photos/{i:03d}.png", "width": w,
                       "height": h})
        for j in range(int(rng.integers(1, 6)) if i != 3 else 0):
            bw, bh = rng.uniform(2, w * 0.6), rng.uniform(2, h * 0.6)
            x, y = rng.uniform(-w * 0.1, w - bw / 2), rng.uniform(-h * 0.1, h - bh / 2)
            anns.append({"id": 1000 * i + j, "image_id": 100 + i,
                         "category_id": int(rng.integers(1, 91)), "iscrowd": 0,
                         "bbox": [float(x), float(y), float(bw), float(bh)],
                         "segmentation": _seg(rng, w, h, x, y, bw, bh, (i + j) % 3)})
    doc = {"images": images, "annotations": anns}
    path = d / "instances.json"
    path.write_text(json.dumps(doc))
    return str(d), str(path), doc


def _src_masks(doc, i):
    im = doc["images"][i]
    w, h = im["width"], im["height"]
    out, boxes, labels = [], [], []
    for a in doc["annotations"]:
        if a["image_id"] != 100 + i:
            continue
        seg = a["segmentation"]
        rc, m, msg = c_polygons(seg, h, w) if isinstance(seg, list) else \
            c_rle(seg["counts"], h, w)
        assert rc == 0, msg
        out.append(m)
        x, y, bw, bh = a["bbox"]
        boxes.append([x, y, x + bw, y + bh])
        labels.append(a["category_id"])
    return out, boxes, labels


def _mask_steps(steps):
    out = []
    for kind, par, iw, ih, ow, oh in steps:
        g = dict(kind=kind, in_w=iw, in_h=ih, out_w=ow, out_h=oh)
        if kind == "axis":
            g.update(x0=float(par[0]), y0=float(par[1]), sx=par[2], sy=par[3])
        elif kind == "rotate":
            g.update(c=par[0], s=par[1])
        elif kind == "affine":
            g.update(th=par[6:12])
        out.append(g)
    return out


TGT = "targets max_boxes=6 masks=instance"
SPECS = [
    "random_resized_crop size=40,48 scale=0.1,1 | " + TGT,
    "resize size=30 | center_crop size=28 | " + TGT,
    "center_crop size=90,120 | " + TGT + " mask_fill=0",
    "random_crop size=40,50 padding=4,2,6,8 pad_if_needed=1 | " + TGT,
    "random_resized_crop size=32 | hflip p=0.5 | vflip p=0.5 | " + TGT,
    "resize size=40,40 | rotate degrees=45 | " + TGT,
    "random_resized_crop size=36 | hflip p=1 | rotate degrees=30 | center_crop size=30 | "
    "targets max_boxes=6 min_area=4 min_visibility=0.3 masks=instance",
]


@pytest.mark.parametrize("spec", SPECS)
def test_masks_equal_the_reference(coco, spec):
    data, ann, doc = coco
    sizes = {i: (im["width"], im["height"]) for i, im in enumerate(doc["images"])}
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, epochs=2,
                         seed=3) as ld:
        assert "masks=instance mask_fill=0" in ld.spec
        m = __import__("re").search(r"min_area=(\S+) min_visibility=(\S+)", ld.spec)
        rules = {"max_boxes": 6, "clip": 1, "min_area": float(m.group(1)),
                 "min_visibility": float(m.group(2)), "keypoints": 0}
        n = nonempty = 0
        for b in ld.stream():
            H, W = b["image"].shape[2:]
            assert b["masks"].shape == (len(b["image"]), 6, H, W)
            assert b["masks"].dtype == np.uint8
            for row, i in enumerate(ld.batch_info.indices):
                i = int(i)
                text = ld.explain(ld.batch_info.epoch, i)
                steps = targets_ref.steps_from_explain(text, *sizes[i])
                src, boxes, labels = _src_masks(doc, i)
                *_, counts, fates = targets_ref.apply(steps, *sizes[i], boxes, labels, None,
                                                      rules)
                kept = [j for j, f in enumerate(fates) if f[0] == 0]
                assert int(b["num_boxes"][row]) == len(kept)
                want = np.zeros((6, H, W), np.uint8)
                for q, j in enumerate(kept):
                    want[q] = masks_ref.warp(src[j], _mask_steps(steps), 0)
                assert b["masks"][row].tobytes() == want.tobytes(), (i, text)
                nonempty += int(want.any())
                n += 1
        assert n == 16 and nonempty >= 4


SPEC_W = "random_resized_crop size=24 | hflip p=0.5 | rotate degrees=20 | " + TGT


def _batches(data, ann, **kw):
    out = []
    with seedpipe.Loader(data, pipeline=SPEC_W, annotations=ann, batch_size=3, seed=5, epochs=2,
                         **kw) as ld:
        for b in ld.stream():
            out.append(({k: np.array(v) for k, v in b.items()}, ld.batch_digest()))
    return out


def test_workers_and_resume(coco):
    data, ann, _ = coco
    ref = _batches(data, ann)
    assert any(b["masks"].any() for b, _ in ref)
    for w in (1, 3):
        got = _batches(data, ann, workers=w)
        assert [d for _, d in got] == [d for _, d in ref]
        for (x, _), (y, _) in zip(ref, got):
            assert x["masks"].tobytes() == y["masks"].tobytes()
    with seedpipe.Loader(data, pipeline=SPEC_W, annotations=ann, batch_size=3, seed=5, epochs=2,
                         workers=3) as ld:
        it = ld.stream()
        for _ in range(2):
            next(it)
        state = ld.state_dict()
    with seedpipe.Loader(data, pipeline=SPEC_W, annotations=ann, batch_size=3, seed=5, epochs=2,
                         workers=1) as ld:
        ld.load_state_dict(state)
        rest = [(np.array(b["masks"]), ld.batch_digest()) for b in ld.stream()]
    assert [d for _, d in rest] == [d for _, d in ref[2:]]
    for (m, _), (x, _) in zip(rest, ref[2:]):
        assert m.tobytes() == x["masks"].tobytes()


def _err(coco, tmp_path, anns, spec=SPEC_W):
    data, _, doc = coco
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"images": doc["images"], "annotations": anns}))
    with pytest.raises(seedpipe.Error) as e:
        with seedpipe.Loader(data, pipeline=spec, annotations=str(p), batch_size=3) as ld:
            for _ in ld.stream():
                pass
    return str(e.value)


def _a(seg, **kw):
    a = {"id": 1, "image_id": 100, "category_id": 1, "bbox": [1, 1, 4, 4], "segmentation": seg}
    a.update(kw)
    return a


def test_hostile_segmentations_are_named_errors(coco, tmp_path):
    w, h = coco[2]["images"][0]["width"], coco[2]["images"][0]["height"]
    cases = [
        (_a([[1, 1, 2, 2]]), "annotation 0: \"segmentation\" has a polygon that is not 3"),
        (_a([[1, 1, 2, 2, 3, "x"]]), "polygon coordinate"),
        (_a([[1, 1, 2, 2, 3, 1e30]]), "within 2\\^24"),
        (_a([]), "0 or more than 1024 polygons"),
        (_a([[1, 1, 2, 2, 3, 3]] * 1025), "more than 1024"),
        (_a("x"), "neither a list of polygons nor an RLE"),
        (_a({"size": [h, w]}), "\"counts\" is not a list or a string"),
        (_a({"size": [h], "counts": [1]}), "\"size\" is not"),
        (_a({"size": [h, w], "counts": [-1]}), "a count is not an integer"),
        (_a({"size": [h, w], "counts": "\x7f"}), "annotation 0: RLE string byte 0"),
        (_a({"size": [h, w], "counts": "oooooooo"}), "longer than 7"),
        (_a({"size": [h, w], "counts": [h * w - 1]}), "add up to"),
        (_a({"size": [h + 1, w], "counts": [(h + 1) * w]}), "is not the decoded image's"),
        ({"id": 1, "image_id": 100, "category_id": 1, "bbox": [1, 1, 4, 4]},
         "annotation 0 has no \"segmentation\""),
    ]
    for a, msg in cases:
        text = _err(coco, tmp_path, [a])
        assert pytest.__name__ and __import__("re").search(msg, text), (msg, text)
        assert "bad.json" in text or "photos/000.png" in text, text


def test_rules_errors_and_fields(coco, tmp_path):
    data, ann, _ = coco
    for spec, msg in (("resize size=8 | targets masks=polygon", "masks"),
                      ("resize size=8 | targets masks=instance mask_fill=256", "mask_fill"),
                      ("resize size=8,8 | targets max_boxes=4096 masks=instance", None)):
        if msg:
            with pytest.raises(seedpipe.Error, match=msg):
                seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=2)
    with pytest.raises(seedpipe.Error, match="fixed output size"):
        seedpipe.Loader(data, pipeline="hflip p=0.5 | targets masks=instance", annotations=ann,
                        batch_size=2)
    with pytest.raises(seedpipe.Error, match="2\\^28"):
        seedpipe.Loader(data, pipeline="resize size=300,300 | targets max_boxes=4000 "
                        "masks=instance", annotations=ann, batch_size=2)
    with seedpipe.Loader(data, pipeline="resize size=8,8 | targets", annotations=ann,
                         batch_size=2) as ld:
        assert "masks" not in ld.spec and "masks" not in next(iter(ld))


# ---- semantic masks: label maps beside an image folder -----------------------

@pytest.fixture(scope="module")
def seg(tmp_path_factory):
    """An image folder root/imgs (one class folder) and its label maps
    root/imgs_masks/a/NNN.png (8-bit grayscale, labels 0..20)."""
    if not PHOTOS:
        pytest.skip("no /usr/share/backgrounds/mate/*/*.jpg (Debian's mate-backgrounds)")
    d = tmp_path_factory.mktemp("seg")
    (d / "imgs" / "a").mkdir(parents=True)
    (d / "imgs_masks" / "a").mkdir(parents=True)
    rng = np.random.default_rng(44)
    labels = {}
    for i, p in enumerate(PHOTOS[:7]):
        with Image.open(p) as im:
            W, H = im.size
            w, h = max(W // (20 + 3 * i), 8), max(H // (17 + 5 * i), 8)
            im.draft("RGB", (w * 2, h * 2))
            im.convert("RGB").resize((w, h), Image.BILINEAR).save(d / "imgs" / "a" / f"{i:03d}.jpg")
        lab = rng.integers(0, 21, (h // 4 + 1, w // 4 + 1)).repeat(4, 0).repeat(4, 1)[:h, :w]
        lab = lab.astype(np.uint8)
        Image.fromarray(lab, "L").save(d / "imgs_masks" / "a" / f"{i:03d}.png")
        labels[f"a/{i:03d}.jpg"] = lab
    return str(d / "imgs"), labels


SEM = ["random_resized_crop size=24,28 | hflip p=0.5 | rotate degrees=20 | "
       "targets masks=semantic mask_fill=255",
       "center_crop size=40,90 | vflip p=0.5 | targets masks=semantic mask_fill=255",
       "random_crop size=30 padding=3 pad_if_needed=1 | targets masks=semantic"]


@pytest.mark.parametrize("spec", SEM)
def test_semantic_equals_the_reference(seg, spec):
    data, labels = seg
    fill = 255 if "mask_fill=255" in spec else 0
    with seedpipe.Loader(data, pipeline=spec, batch_size=3, epochs=2, seed=1) as ld:
        paths = ld.paths if hasattr(ld, "paths") else None
        n = 0
        for b in ld.stream():
            H, W = b["image"].shape[2:]
            assert b["semantic"].shape == (len(b["image"]), H, W) and "masks" not in b
            assert int(b["num_boxes"].sum()) == 0
            for row, i in enumerate(ld.batch_info.indices):
                i = int(i)
                rel = f"a/{i:03d}.jpg" if paths is None else paths[i]
                lab = labels[rel]
                text = ld.explain(ld.batch_info.epoch, i)
                steps = targets_ref.steps_from_explain(text, lab.shape[1], lab.shape[0])
                want = masks_ref.warp(lab, _mask_steps(steps), fill)
                assert b["semantic"][row].tobytes() == want.tobytes(), (i, text)
                n += 1
        assert n == 14


def test_semantic_workers_and_errors(seg, tmp_path):
    data, labels = seg
    spec = SEM[0]

    def run(d=data, **kw):
        with seedpipe.Loader(d, pipeline=spec, batch_size=3, epochs=2, seed=2, **kw) as ld:
            return [(np.array(b["semantic"]), ld.batch_digest()) for b in ld.stream()]
    ref = run()
    for w in (1, 3):
        got = run(workers=w)
        assert [x.tobytes() for x, _ in got] == [x.tobytes() for x, _ in ref]
        assert [d for _, d in got] == [d for _, d in ref]
    import shutil
    bad = tmp_path / "imgs"
    shutil.copytree(data, bad)
    shutil.copytree(data + "_masks", str(bad) + "_masks")
    m = bad.parent / "imgs_masks" / "a" / "001.png"
    # A changed label map changes the fingerprint: the old state is refused.
    with seedpipe.Loader(str(bad), pipeline=spec, batch_size=3, epochs=2, seed=2) as ld:
        next(iter(ld.stream()))
        state, fp = ld.state_dict(), ld.fingerprint
    lab = np.array(Image.open(m))
    Image.fromarray((lab + 1).astype(np.uint8), "L").save(m)
    st = os.stat(m)
    os.utime(m, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with seedpipe.Loader(str(bad), pipeline=spec, batch_size=3, epochs=2, seed=2) as ld:
        assert ld.fingerprint != fp
        with pytest.raises(seedpipe.Error, match="fingerprint"):
            ld.load_state_dict(state)
    for make, msg in ((lambda: None, "imgs_masks/a/001.png"),
                      (lambda: Image.new("RGB", (9, 9)).save(m), "grayscale or palette PNG"),
                      (lambda: Image.new("L", (9, 9)).save(m), "label map of 9x9"),
                      (lambda: Image.new("I;16", (9, 9)).save(m), "grayscale or palette PNG")):
        if m.exists():
            m.unlink()
        make()
        with pytest.raises(seedpipe.Error, match=msg):
            run(d=str(bad))


AFF = ["resize size=40,40 | affine degrees=20 translate=0.1,0.1 scale=0.8,1.2 shear=10 | " + TGT,
       "resize size=36,44 | trivial_augment_wide | hflip p=0.5 | " + TGT,
       "random_resized_crop size=40 | rand_augment num_ops=3 magnitude=15 | " + TGT]
AFF_SEM = ["affine degrees=30 translate=0.2,0.1 shear=-10,10,-5,5 | resize size=30,30 | "
           "targets masks=semantic mask_fill=255",
           "resize size=32,30 | auto_augment policy=imagenet | targets masks=semantic"]


@pytest.mark.parametrize("spec", AFF)
def test_masks_through_affine_steps(coco, spec):
    """affine and the policy ops' ShearX/Y, TranslateX/Y move masks by
    nearest neighbour through the image's own theta: equal to
    masks_ref.warp (torch's grid_sample nearest on torchvision's grid)."""
    test_masks_equal_the_reference(coco, spec)
    data, ann, doc = coco
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, epochs=2,
                         seed=3) as ld:
        sizes = {i: (im["width"], im["height"]) for i, im in enumerate(doc["images"])}
        affine = sum(st[0] == "affine" for _ in ld.stream() for i in ld.batch_info.indices
                     for st in targets_ref.steps_from_explain(
                         ld.explain(ld.batch_info.epoch, int(i)), *sizes[int(i)]))
    assert affine >= 3, affine   # the affine steps were exercised


@pytest.mark.parametrize("spec", AFF_SEM)
def test_semantic_through_affine_steps(seg, spec):
    test_semantic_equals_the_reference(seg, spec)
