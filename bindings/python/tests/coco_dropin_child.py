"""The body of test_coco_dropin.py, run under the torchvision v2 venv
(tv2_venv.py): seedpipe.torch.DataLoader over a wrapped CocoDetection
against torch's DataLoader over the same object.

    python coco_dropin_child.py FOLDER CASE

CASE: structure (types, dtypes, keys; boxes within 1e-3 px and masks equal
for deterministic transforms), workers (random ops: equal batches at 0 and
2 workers and across a resume), refusals (unsupported transforms by name).
Prints "OK <case> <details>" on success; an assertion fails otherwise.
"""
import json
import os
import sys
import warnings

import numpy as np
import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms import v2

import seedpipe.torch as st


def collate(batch):
    return tuple(zip(*batch))


def make_folder(root, seed=7):
    """A COCO-style folder: images of several sizes, polygons (boxes their
    bounding rectangles), one crowd RLE, images without annotations."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(root, "img"), exist_ok=True)
    images, anns = [], []
    sizes = [(60, 80), (45, 45), (70, 52), (33, 90), (64, 64), (50, 75), (40, 41), (81, 60),
             (55, 66), (48, 48)]
    for i, (h, w) in enumerate(sizes):
        px = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        name = f"img/{i:03d}.png"
        Image.fromarray(px).save(os.path.join(root, name))
        iid = 100 + 7 * i
        images.append({"id": iid, "file_name": name, "height": h, "width": w})
        if i in (3, 8):
            continue                        # no annotation: {"image_id": id} only
        for _ in range(int(rng.integers(1, 6))):
            cx, cy = rng.uniform(0.1 * w, 0.9 * w), rng.uniform(0.1 * h, 0.9 * h)
            k = int(rng.integers(3, 7))
            ang = np.sort(rng.uniform(0, 2 * np.pi, k))
            rad = rng.uniform(2, 0.35 * min(h, w), k)
            xs = np.clip(cx + rad * np.cos(ang), 0, w - 0.01)
            ys = np.clip(cy + rad * np.sin(ang), 0, h - 0.01)
            poly = [float(round(v, 2)) for p in zip(xs, ys) for v in p]
            x0, y0 = min(poly[0::2]), min(poly[1::2])
            x1, y1 = max(poly[0::2]), max(poly[1::2])
            anns.append({"id": len(anns) + 1, "image_id": iid, "iscrowd": 0,
                         "category_id": int(rng.integers(1, 91)),
                         "bbox": [x0, y0, round(x1 - x0, 2), round(y1 - y0, 2)],
                         "area": 1.0, "segmentation": [poly]})
        if i == 1:                          # a crowd annotation, uncompressed RLE
            m = np.zeros((h, w), np.uint8)
            m[5:20, 10:30] = 1
            flat = m.flatten(order="F")
            runs, cur, n = [], 0, 0
            for v in flat:
                if v != cur:
                    runs.append(n)
                    cur, n = v, 0
                n += 1
            runs.append(n)
            anns.append({"id": len(anns) + 1, "image_id": iid, "iscrowd": 1,
                         "category_id": 1, "bbox": [10, 5, 20, 15], "area": 300.0,
                         "segmentation": {"size": [h, w], "counts": runs}})
    ann = os.path.join(root, "instances.json")
    with open(ann, "w") as f:
        json.dump({"images": images, "annotations": anns,
                   "categories": [{"id": c, "name": str(c)} for c in range(1, 91)]}, f)
    return ann


def dataset(root, ann, tf, keys=("image_id", "boxes", "labels", "masks")):
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):   # pycocotools' "loading annotations"
        ds = CocoDetection(root, ann, transforms=tf)
    return wrap_dataset_for_transforms_v2(ds, target_keys=keys)


def annotated_only(ds):
    """The references' _coco_remove_images_without_annotations, on ids."""
    coco = ds._dataset
    coco.ids = [i for i in coco.ids if coco.coco.imgToAnns.get(i)]
    return ds


def both(root, ann, tf, only_annotated=False, subset=False, dup=0, **kw):
    ds = dataset(root, ann, tf)
    if only_annotated:
        annotated_only(ds)
    if subset:
        # the references' way: a Subset of the annotated images (here in
        # reverse order)
        coco = ds._dataset
        keep = [k for k, i in enumerate(coco.ids) if coco.coco.imgToAnns.get(i)][::-1]
        ds = torch.utils.data.Subset(ds, keep + keep[:dup])
    theirs = list(torch.utils.data.DataLoader(ds, batch_size=3, collate_fn=collate))
    dl = st.DataLoader(ds, batch_size=3, collate_fn=collate, backend="c", **kw)
    mine = list(dl)
    dl.close()
    return theirs, mine


def check_structure(root, ann):
    """Deterministic transforms: the same structure as torchvision, boxes
    within 1e-3 px, masks and labels equal; with and without
    SanitizeBoundingBoxes (torchvision's raises on an image without
    annotations, so that run leaves them out of ids, as its references do)."""
    plain = v2.Compose([v2.ToImage(), v2.Resize((48, 64)), v2.RandomHorizontalFlip(p=1),
                        v2.ClampBoundingBoxes(), v2.ToDtype(torch.float32, scale=True)])
    n0, empty = compare(*both(root, ann, plain), expect=4)
    assert empty == 2, empty
    tf = v2.Compose([v2.ToImage(), v2.Resize((48, 64)), v2.RandomHorizontalFlip(p=1),
                     v2.SanitizeBoundingBoxes(min_size=10), v2.ClampBoundingBoxes(),
                     v2.ToDtype(torch.float32, scale=True)])
    n1, _ = compare(*both(root, ann, tf, only_annotated=True), expect=3)
    # the rule did something: SanitizeBoundingBoxes(min_size=6) removed boxes
    assert 10 < n1 < n0, (n0, n1)
    refused(lambda: st.DataLoader(dataset(root, ann, tf), batch_size=2, collate_fn=collate,
                                  backend="c"), "SanitizeBoundingBoxes", "no annotation")
    # a crop that cuts boxes (clipped, the ones left outside removed by
    # Sanitize), uint8 images and ToPureTensor's plain tensors
    crop = v2.Compose([v2.ToImage(), v2.Resize((64, 64)), v2.CenterCrop((40, 36)),
                       v2.RandomVerticalFlip(p=1), v2.SanitizeBoundingBoxes(min_size=1),
                       v2.ToPureTensor()])
    n2, _ = compare(*both(root, ann, crop, subset=True), expect=3, pure=True,
                    size=(40, 36))
    assert 5 < n2 < n0, (n0, n2)
    # a Subset listing images twice: every copy has its image's targets
    theirs, mine = both(root, ann, crop, subset=True, dup=3)
    compare(theirs, mine, expect=len(theirs), pure=True, size=(40, 36))
    print(f"OK structure boxes={n0} after_sanitize={n1} after_crop={n2}")


def compare(theirs, mine, expect, pure=False, size=(48, 64)):
    img_t, box_t, mask_t = (torch.Tensor,) * 3 if pure else \
        (tv_tensors.Image, tv_tensors.BoundingBoxes, tv_tensors.Mask)
    img_dt = torch.uint8 if pure else torch.float32
    assert len(theirs) == len(mine) == expect, (len(theirs), len(mine))
    empty = 0
    nbox = nmask = worst = 0
    pixel = 0.0
    for (ti, tt), (mi, mt) in zip(theirs, mine):
        assert type(ti) is type(mi) is tuple and type(tt) is type(mt) is tuple
        for a, b in zip(ti, mi):
            assert type(a) is type(b) is img_t, (type(a), type(b))
            assert a.dtype == b.dtype == img_dt and a.shape == b.shape, (a.shape, b.shape)
            pixel = max(pixel, float((a.double() - b.double()).abs().max()))
        for a, b in zip(tt, mt):
            assert list(a) == list(b), (list(a), list(b))      # keys, in the wrapper's order
            assert a["image_id"] == b["image_id"] and type(a["image_id"]) is type(b["image_id"])
            if "boxes" not in a:
                empty += 1
                continue
            ba, bb = a["boxes"], b["boxes"]
            assert type(ba) is type(bb) is box_t
            if not pure:
                assert ba.format == bb.format == tv_tensors.BoundingBoxFormat.XYXY
                assert tuple(ba.canvas_size) == tuple(bb.canvas_size) == size
            assert ba.dtype == bb.dtype == torch.float32 and ba.shape == bb.shape, \
                (a["image_id"], ba, bb)
            d = float((ba.double() - bb.double()).abs().max()) if len(ba) else 0.0
            assert d <= 1e-3, (a["image_id"], d, ba, bb)
            worst = max(worst, d)
            assert a["labels"].dtype == b["labels"].dtype == torch.int64
            assert torch.equal(a["labels"], b["labels"])
            ma, mb = a["masks"], b["masks"]
            assert type(ma) is type(mb) is mask_t and ma.dtype == mb.dtype == torch.uint8
            assert ma.shape == mb.shape and torch.equal(ma, mb), (a["image_id"], ma.shape,
                                                                  (ma != mb).sum())
            nbox += len(ba)
            nmask += int(ma.sum())
    assert nbox > 10 and nmask > 0, (nbox, nmask)
    print(f"compared boxes={nbox} max_box_diff={worst:.2e} mask_pixels={nmask} "
          f"max_pixel_diff={pixel:.3f}")
    return nbox, empty


def flat(batches):
    out = []
    for imgs, tgts in batches:
        for img, t in zip(imgs, tgts):
            out.append((img.clone(), {k: (v.clone() if torch.is_tensor(v) else v)
                                      for k, v in t.items()}))
    return out


def same(xs, ys):
    assert len(xs) == len(ys), (len(xs), len(ys))
    for (a, ta), (b, tb) in zip(xs, ys):
        assert torch.equal(a, b)
        assert list(ta) == list(tb)
        for k in ta:
            if torch.is_tensor(ta[k]):
                assert torch.equal(ta[k], tb[k]), k
            else:
                assert ta[k] == tb[k], k


def check_workers(root, ann):
    """Random ops (SSD-style): equal batches at 0 and 2 workers, and across
    a resume from state_dict()."""
    tf = v2.Compose([v2.ToImage(), v2.RandomZoomOut(fill=114, side_range=(1.0, 2.5), p=0.7),
                     v2.RandomIoUCrop(), v2.RandomHorizontalFlip(), v2.Resize((40, 40)),
                     v2.SanitizeBoundingBoxes(), v2.ToDtype(torch.float32, scale=True),
                     v2.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])])
    ds = annotated_only(dataset(root, ann, tf))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # RandomIoUCrop's stated difference
        runs = {}
        for w in (0, 2):
            dl = st.DataLoader(ds, batch_size=4, shuffle=True, seed=11, num_workers=w,
                               collate_fn=collate)
            assert dl.backend == "c"
            runs[w] = flat(dl)
            dl.close()
        same(runs[0], runs[2])
        e1 = st.DataLoader(ds, batch_size=4, shuffle=True, seed=11, collate_fn=collate)
        it = iter(e1)
        head = flat([next(it)])
        state = e1.state_dict()
        e1.close()
        e2 = st.DataLoader(ds, batch_size=4, shuffle=True, seed=11, num_workers=2,
                           collate_fn=collate)
        e2.load_state_dict(state)
        rest = flat(e2)
        e2.close()
        same(head + rest, runs[0])
        # world 2: each global batch of 4 is rank 0's 2 then rank 1's 2
        ranks = []
        for r in (0, 1):
            dl = st.DataLoader(ds, batch_size=2, shuffle=True, seed=11, rank=r, world=2,
                               collate_fn=collate)
            ranks.append(flat(dl))
            dl.close()
        n = len(runs[0])
        assert len(ranks[0]) == len(ranks[1]) == (n + 3) // 4 * 2, (n, len(ranks[0]))
        glued = [x for k in range(0, len(ranks[0]), 2) for x in ranks[0][k:k + 2] +
                 ranks[1][k:k + 2]]
        same(glued[:n], runs[0])
        # another seed draws other crops: the comparison above could fail
        dl = st.DataLoader(ds, batch_size=4, shuffle=True, seed=12, collate_fn=collate)
        other = flat(dl)
        dl.close()
    differs = any(not torch.equal(a, b) for (a, _), (b, _) in zip(runs[0], other))
    assert differs
    nb = sum(len(t.get("boxes", ())) for _, t in runs[0])
    # RandomZoomOut's fill per type: the image's 114, the masks' 7 (the
    # targets op's mask_fill); a canvas twice the size always has a corner
    # of padding only, which a resize keeps constant
    zoom = v2.Compose([v2.ToImage(), v2.RandomZoomOut(fill={tv_tensors.Image: 114,
                                                            tv_tensors.Mask: 7},
                                                      side_range=(2.0, 2.0), p=1.0),
                       v2.Resize((40, 40))])
    dl = st.DataLoader(dataset(root, ann, zoom), batch_size=4, collate_fn=collate)
    corners = 0
    for imgs, tgts in dl:
        for img, t in zip(imgs, tgts):
            assert img.dtype == torch.uint8
            for y, x in ((0, 0), (0, -1), (-1, 0), (-1, -1)):
                if bool((img[:, y, x] == 114).all()) and "masks" in t and len(t["masks"]):
                    if bool((t["masks"][:, y, x] == 7).all()):
                        corners += 1
                        break
            if "masks" in t:
                assert set(torch.unique(t["masks"]).tolist()) <= {0, 1, 7}
    dl.close()
    assert corners >= 6, corners
    print(f"OK workers samples={len(runs[0])} boxes={nb} fill_corners={corners}")


def refused(make, *names):
    try:
        make()
    except ValueError as e:
        msg = str(e)
        assert all(n in msg for n in names), (names, msg)
        return msg
    raise AssertionError(f"not refused: {names}")


def check_refusals(root, ann):
    def dl(tf, backend="c", keys=("image_id", "boxes", "labels", "masks"), **kw):
        kw.setdefault("collate_fn", collate)
        return st.DataLoader(dataset(root, ann, tf, keys), batch_size=2, backend=backend, **kw)
    base = [v2.ToImage(), v2.Resize((32, 32))]
    refused(lambda: dl(v2.Compose([v2.RandomPhotometricDistort()] + base)),
            "RandomPhotometricDistort")
    refused(lambda: dl(v2.Compose(base + [v2.RandomRotation(10)])), "RandomRotation")
    refused(lambda: dl(v2.Compose(base + [v2.SanitizeBoundingBoxes(labels_getter=None)])),
            "labels_getter=None")
    refused(lambda: dl(v2.Compose([v2.ToImage(), v2.SanitizeBoundingBoxes(),
                                   v2.Resize((32, 32))])), "SanitizeBoundingBoxes before Resize")
    refused(lambda: dl(v2.Compose(base + [v2.ToDtype(torch.float32)])), "ToDtype")
    refused(lambda: dl(v2.Compose([v2.Resize((32, 32))])), "ToImage()")
    refused(lambda: dl(v2.Compose(base), collate_fn=None), "collate_fn")
    refused(lambda: dl(v2.Compose([v2.ToImage(), v2.Resize(32)])), "transforms",
            "Resize((H, W))")
    refused(lambda: dl(v2.Compose(base), layout="nhwc"), "layout='nhwc'")
    refused(lambda: dl(v2.Compose(base), keys=("boxes", "area")), "target_keys", "area")
    refused(lambda: dl(v2.Compose(base), collate_fn=lambda b: b), "collate_fn")
    # an annotation without the segmentation masks need: named, with its id
    with open(ann) as f:
        d = json.load(f)
    del d["annotations"][2]["segmentation"]
    bad = os.path.join(root, "no_segmentation.json")
    with open(bad, "w") as f:
        json.dump(d, f)
    refused(lambda: st.DataLoader(dataset(root, bad, v2.Compose(base)), batch_size=2,
                                  collate_fn=collate, backend="c"),
            f"annotation {d['annotations'][2]['id']}", "'segmentation'")
    # the automatic choice: the Python backend, with the reason named
    auto = dl(v2.Compose([v2.RandomPhotometricDistort()] + base), backend=None)
    assert auto.backend == "python" and "RandomPhotometricDistort" in auto.backend_reason, \
        auto.backend_reason
    ok = dl(v2.Compose(base), backend=None)
    assert ok.backend == "c"
    ok.close()
    print("OK refusals")


if __name__ == "__main__":
    root, case = sys.argv[1], sys.argv[2]
    ann = make_folder(root)
    {"structure": check_structure, "workers": check_workers,
     "refusals": check_refusals}[case](root, ann)
