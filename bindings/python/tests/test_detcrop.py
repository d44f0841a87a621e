"""test_detcrop.py - random_zoom_out and random_iou_crop, the detection
ops whose geometry the boxes ride (random_iou_crop's depends on them):
docs/pipeline.md, docs/targets.md.

On test_targets.py's COCO-style set (seeded boxes inside, across the
border, tiny, a crowd one; a sample without annotations):
- the draws: explain's zoom canvas and random_iou_crop's decision (each
  attempt's option, the accepted trial's crop, the keep option, the
  fallback after `attempts`) equal a plain Python reading of
  docs/pipeline.md over seedpipe's Philox (seedpipe._keys), with the boxes
  as they are at that point (targets_ref.visible_at);
- the crop satisfies the IoU constraint it claims (a box centred in it
  reaches the drawn option), inside the scale and aspect bounds;
- boxes, labels, keypoints and counts equal targets_ref.apply byte for byte;
- the pixels are the source's, padded with the fill and cropped, as
  explain states them;
- every box is kept or dropped by a stated rule (a property test);
- equal batches at 0, 1 and 3 workers and after a resume;
- named refusals.
"""
import re

import numpy as np
import pytest
from PIL import Image

import seedpipe
from seedpipe import _keys
import targets_ref
from test_targets import (coco, _sample_targets, _rules,  # noqa: F401 (coco: a fixture)
                          _rules_property, _workers_and_resume, _check_row)

TGT = "targets max_boxes=12 keypoints=3"
SPECS = [
    ("random_zoom_out side_range=1,3 p=0.7 | random_iou_crop | resize size=64,64 | " + TGT,
     {"crop"}),
    ("random_iou_crop min_scale=0.5 sampler_options=0.3,0.5,0.7 trials=10 attempts=5 | "
     "resize size=48,64 | " + TGT, {"crop"}),
    ("resize size=80,100 | hflip p=0.5 | random_zoom_out fill=0,128,255 side_range=1.5,2 p=1 | "
     "random_iou_crop min_aspect_ratio=0.8 max_aspect_ratio=1.25 | center_crop size=60 | "
     "targets max_boxes=12 clip=0 min_area=2 min_visibility=0.3 keypoints=3", {"crop"}),
    ("random_iou_crop sampler_options=0.97 trials=3 attempts=2 | resize size=40,40 | " + TGT,
     {"fallback"}),
    ("rotate degrees=20 | random_iou_crop sampler_options=0.5,1 | random_resized_crop size=48 | "
     "hflip p=0.5 | " + TGT, {"crop", "keep"}),
    ("affine degrees=10 shear=5 | random_zoom_out p=1 | random_iou_crop min_scale=0.1 "
     "max_scale=0.6 | resize size=56,56 | " + TGT, {"crop"}),
]


def _params(spec):
    m = re.search(r"random_iou_crop min_scale=(\S+) max_scale=(\S+) min_aspect_ratio=(\S+) "
                  r"max_aspect_ratio=(\S+) sampler_options=(\S+) trials=(\d+) attempts=(\d+)",
                  spec)
    return {"min_scale": float(m.group(1)), "max_scale": float(m.group(2)),
            "min_aspect_ratio": float(m.group(3)), "max_aspect_ratio": float(m.group(4)),
            "sampler_options": [float(v) for v in m.group(5).split(",")],
            "trials": int(m.group(6)), "attempts": int(m.group(7))}


def _zoom_params(spec):
    m = re.search(r"random_zoom_out fill=\S+ side_range=(\S+),(\S+) p=(\S+)", spec)
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def _op_index(spec, name):
    return [s.strip().split(" ")[0] for s in spec.split("|")].index(name)


def _check_sample(spec, seed, epoch, i, text, size, doc):
    """Check one sample's explain against the documented draws; returns
    (the decision's kind, the reference steps)."""
    W, H = size
    steps = targets_ref.steps_from_explain(text, W, H)
    boxes, _, _ = _sample_targets(doc, i)
    key = _keys.stream_key(seed, 2)
    k = _op_index(spec, "random_iou_crop")
    lines = text.splitlines()
    iou_at = next(j for j, ln in enumerate(lines) if re.match(r"%d random_iou_crop:" % k, ln))
    # the steps before random_iou_crop: those of the lines before its line
    before = targets_ref.steps_from_explain("\n".join(lines[:iou_at]), W, H)
    cw, ch = (before[-1][4], before[-1][5]) if before else (W, H)
    if "random_zoom_out" in spec:
        z = _op_index(spec, "random_zoom_out")
        lo, hi, p = _zoom_params(spec)
        m = re.search(r"^%d random_zoom_out: (canvas (\d+)x(\d+), image at x=(\d+) y=(\d+) of "
                      r"(\d+)x(\d+)|not applied)" % z, text, re.M)
        assert m, text
        zw, zh = (int(m.group(6)), int(m.group(7))) if m.group(2) else (None, None)
        if zw is not None:
            on, zcw, zch, left, top = targets_ref.zoom_draw(
                _keys.philox((0, z, i, epoch), key), zw, zh, lo, hi, p)
            assert on and (zcw, zch, left, top) == tuple(int(m.group(g)) for g in range(2, 6))
    prm = _params(spec)
    vis = targets_ref.visible_at(before, W, H, boxes)
    assert re.match(r"%d random_iou_crop: %d boxes at this point, %dx%d" % (k, len(boxes), cw, ch),
                    lines[iou_at]), (lines[iou_at], cw, ch)
    kind, a, thr, det = targets_ref.iou_decide(
        lambda j: _keys.philox((j, k, i, epoch), key), cw, ch, vis, prm)
    tail = "\n".join(lines[iou_at + 1:])
    fails = re.findall(r"^    attempt (\d+) option (\S+): (\d+) trials rejected", tail, re.M)
    assert [int(f[0]) for f in fails] == list(range(len(fails)))
    assert all(int(f[2]) == prm["trials"] for f in fails)
    if kind == "crop":
        x, y, w, h, centred, best, t = det
        m = re.search(r"^    attempt (\d+) option (\S+): trial (\d+): crop x=(\d+) y=(\d+) w=(\d+) "
                      r"h=(\d+) of (\d+)x(\d+); (\d+) boxes centred, best IoU (\S+)", tail, re.M)
        assert m, text
        assert [int(v) for v in m.group(1, 3, 4, 5, 6, 7, 8, 9, 10)] == [a, t, x, y, w, h, cw, ch,
                                                                        centred]
        assert float(m.group(2)) == thr and len(fails) == a
        # the constraint it claims: a box centred in the crop reaches the option
        assert best >= thr and abs(float(m.group(11)) - best) < 1e-6
        assert 0 <= x and x + w <= cw and 0 <= y and y + h <= ch
        assert prm["min_aspect_ratio"] <= w / h <= prm["max_aspect_ratio"]
        assert int(cw * prm["min_scale"]) - 1 <= w <= cw and int(ch * prm["min_scale"]) - 1 <= h
    elif kind == "keep":
        assert re.search(r"^    attempt %d option \S+: no crop \(the option that keeps" % a, tail,
                         re.M), text
        assert thr >= 1.0 and len(fails) == a
    else:
        assert re.search(r"^    fallback: no crop after %d attempts" % prm["attempts"], tail,
                         re.M), text
        assert len(fails) == prm["attempts"]
    return kind, steps


@pytest.mark.parametrize("spec,expect", SPECS)
@pytest.mark.parametrize("seed", [0, 5])
def test_detcrop_equal_the_reference(coco, spec, expect, seed):  # noqa: F811
    data, ann, doc = coco
    sizes = {i: (im["width"], im["height"]) for i, im in enumerate(doc["images"][:12])}
    kinds = set()
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, epochs=2,
                         seed=seed) as ld:
        rules = _rules(ld.spec)
        full = ld.spec
        n = 0
        for b in ld.stream():
            epoch = ld.batch_info.epoch
            for row, i in enumerate(ld.batch_info.indices):
                i = int(i)
                text = ld.explain(epoch, i)
                kind, steps = _check_sample(full, seed, epoch, i, text, sizes[i], doc)
                kinds.add(kind)
                _check_row(b, row, doc, i, steps, sizes[i], rules, text)
                n += 1
        assert n == 24
    assert expect <= kinds, kinds


def test_pixels_are_padded_and_cropped_as_explained(coco):  # noqa: F811
    """zoom out, IoU crop and a center_crop are pure indexing: the image is
    the source PNG padded with the fill and cropped where explain says."""
    data, ann, doc = coco
    spec = ("random_zoom_out fill=7,8,9 side_range=1,2.5 p=0.8 | random_iou_crop | "
            "center_crop size=50,70 | targets max_boxes=12")
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, seed=3, epochs=1,
                         layout="NHWC") as ld:
        for b in ld.stream():
            for row, i in enumerate(ld.batch_info.indices):
                text = ld.explain(ld.batch_info.epoch, int(i))
                img = np.asarray(Image.open(f"{data}/photos/{int(i):03d}.png").convert("RGB"))
                m = re.search(r"canvas (\d+)x(\d+), image at x=(\d+) y=(\d+)", text)
                if m:
                    cw, ch, left, top = map(int, m.groups())
                    canvas = np.empty((ch, cw, 3), np.uint8)
                    canvas[:] = (7, 8, 9)
                    canvas[top:top + img.shape[0], left:left + img.shape[1]] = img
                    img = canvas
                m = re.search(r"crop x=(\d+) y=(\d+) w=(\d+) h=(\d+)", text)
                if m:
                    x, y, w, h = map(int, m.groups())
                    img = img[y:y + h, x:x + w]
                m = re.search(r"center_crop: (?:offset x=(-?\d+)|pad x=(\d+),\d+) "
                              r"(?:offset y=(-?\d+)|pad y=(\d+),\d+)", text)
                ox = int(m.group(1)) if m.group(1) is not None else -int(m.group(2))
                oy = int(m.group(3)) if m.group(3) is not None else -int(m.group(4))
                out = np.zeros((50, 70, 3), np.uint8)
                for yy in range(50):
                    for xx in range(70):
                        sy, sx = yy + oy, xx + ox
                        if 0 <= sy < img.shape[0] and 0 <= sx < img.shape[1]:
                            out[yy, xx] = img[sy, sx]
                assert b["image"][row].tobytes() == out.tobytes(), text


def test_rules_property_with_detcrop(coco):  # noqa: F811
    """Zoom out, IoU crop, affine, random crops: each box is kept (inside the
    image) or dropped by the rule that holds, and the batch counts it."""
    _rules_property(coco, "random_zoom_out p=0.5 | random_iou_crop | affine degrees=15 "
                    "shear=10 | random_resized_crop size=40,56 scale=0.2,1 | hflip p=0.5 | "
                    "targets max_boxes=12 min_area=9 min_visibility=0.25 keypoints=3", 11)


SPEC_W = ("random_zoom_out p=0.6 | random_iou_crop | resize size=48,48 | hflip p=0.5 | "
          "targets max_boxes=12 min_visibility=0.2 keypoints=3")


def test_workers_and_resume(coco):  # noqa: F811
    data, ann, _ = coco
    _workers_and_resume(data, ann, SPEC_W, 4, 3)


def test_refusals_and_canonical(coco):  # noqa: F811
    data, ann, _ = coco
    cases = [
        ("random_iou_crop | resize size=8,8", None,
         'op 0 "random_iou_crop": it decides by the sample\'s boxes'),
        ("random_zoom_out | targets", ann, "no fixed output size"),
        ("random_iou_crop | resize size=8 | targets", ann, "no fixed output size"),
        ("resize size=8,8 | random_apply ops=1 | random_zoom_out | resize size=8,8 | targets",
         ann, "inside random_apply"),
        ("random_zoom_out side_range=0.5,2 | resize size=8,8", None, "side_range"),
        ("random_zoom_out side_range=1,20 | resize size=8,8", None, "side_range"),
        ("random_zoom_out fill=1,2 | resize size=8,8", None, "fill"),
        ("random_zoom_out p=2 | resize size=8,8", None, '"p"|for p'),
        ("random_iou_crop sampler_options=1.5 | resize size=8,8 | targets", ann,
         "sampler_options"),
        ("random_iou_crop trials=0 | resize size=8,8 | targets", ann, "trials"),
        ("random_iou_crop attempts=5000 | resize size=8,8 | targets", ann, "attempts"),
        ("random_iou_crop min_scale=0.8 max_scale=0.5 | resize size=8,8 | targets", ann,
         "max_scale"),
        ("random_iou_crop min_aspect_ratio=0 | resize size=8,8 | targets", ann,
         "min_aspect_ratio"),
    ]
    for spec, a, msg in cases:
        with pytest.raises(seedpipe.Error, match=msg):
            seedpipe.Loader(data, pipeline=spec, annotations=a, batch_size=4)
    spec = ("random_zoom_out | random_iou_crop sampler_options=0.2,1 | resize size=8,8 | "
            "targets")
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4) as ld:
        assert ld.spec.startswith("random_zoom_out fill=0 side_range=1,4 p=0.5 | "
                                  "random_iou_crop min_scale=0.3 max_scale=1 "
                                  "min_aspect_ratio=0.5 max_aspect_ratio=2 "
                                  "sampler_options=0.2,1 trials=40 attempts=100 | ")
        with seedpipe.Loader(data, pipeline=ld.spec, annotations=ann, batch_size=4) as again:
            assert again.spec == ld.spec
