"""test_targets.py - boxes and keypoints ride the pipeline (docs/targets.md,
docs/pipeline.md "Targets").

The dataset is Debian's mate-background photos reduced to sizes taken from
the photos' own (each by another factor, so the grid of image sizes and
aspect ratios is real), with a COCO-style instances JSON written here from
those sizes: seeded random boxes (inside, across the border, tiny, a crowd
one), three keypoints each (some outside, some invisible), an image the
dataset lacks and a sample without annotations. No network.

- every geometric op over that grid (and chains of them): boxes, labels,
  keypoints and counts equal targets_ref.py (written from the docs, the
  drawn parameters read from explain) byte for byte;
- the rules: each box kept or dropped by the stated rule (explain's
  fates), the counts per rule in the batch;
- equal batches (images and targets) at 0, 1 and 3 workers, after a
  resume at another worker count, and cold / warm through the cache; a
  state of another annotation file is refused;
- hostile annotation files and pipelines: named errors.
"""
import glob
import json
import re

import numpy as np
import pytest
from PIL import Image

import seedpipe
import targets_ref

PHOTOS = sorted(glob.glob("/usr/share/backgrounds/mate/*/*.jpg"))
FACTORS = (7, 10, 13, 17, 23, 29)
K = 3


def _random_anns(rng, w, h, image_id, start, count=(2, 9), tiny=0.0, crowd=3, polygon=None):
    """COCO annotations of one w x h image: boxes inside, across the border,
    tiny (sides from `tiny` to 2) and large, K keypoints each; annotation
    `crowd` (None: none) is a crowd one; polygon(rng, x, y, w, h), when
    given, draws each one's segmentation."""
    anns = []
    for j in range(int(rng.integers(*count))):
        kind = rng.integers(0, 4)
        if kind == 0:     # inside
            x, y = rng.uniform(0, w * 0.8), rng.uniform(0, h * 0.8)
            bw, bh = rng.uniform(1, w - x), rng.uniform(1, h - y)
        elif kind == 1:   # across the border (annotations sometimes are)
            x, y = rng.uniform(-w * 0.2, w), rng.uniform(-h * 0.2, h)
            bw, bh = rng.uniform(1, w * 0.5), rng.uniform(1, h * 0.5)
        elif kind == 2:   # tiny
            x, y = rng.uniform(0, w - 2), rng.uniform(0, h - 2)
            bw, bh = rng.uniform(tiny, 2), rng.uniform(tiny, 2)
        else:             # large
            x, y = rng.uniform(0, w * 0.3), rng.uniform(0, h * 0.3)
            bw, bh = rng.uniform(w * 0.3, w * 0.7), rng.uniform(h * 0.3, h * 0.7)
        kp = []
        for _ in range(K):
            kp += [float(rng.uniform(-5, w + 5)), float(rng.uniform(-5, h + 5)),
                   int(rng.integers(0, 3))]
        anns.append({"id": start + j, "image_id": image_id,
                     "category_id": int(rng.integers(1, 91)),
                     "bbox": [float(x), float(y), float(bw), float(bh)],
                     "iscrowd": int(j == crowd), "area": float(bw * bh), "keypoints": kp})
        if polygon:
            anns[-1]["segmentation"] = [polygon(rng, x, y, bw, bh)]
    return anns


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    """(dataset folder, annotation file, {sample: (w, h)}, parsed JSON)."""
    if not PHOTOS:
        pytest.skip("no /usr/share/backgrounds/mate/*/*.jpg (Debian's mate-backgrounds)")
    d = tmp_path_factory.mktemp("coco")
    (d / "photos").mkdir()
    rng = np.random.default_rng(41)
    images, anns = [], []
    for i, p in enumerate(PHOTOS[:12]):
        with Image.open(p) as im:
            W, H = im.size
            f = FACTORS[i % len(FACTORS)]
            w, h = max(W // f, 8), max(H // (f + i % 3), 8)
            im.draft("RGB", (w * 2, h * 2))
            im.convert("RGB").resize((w, h), Image.BILINEAR).save(d / "photos" / f"{i:03d}.png")
        images.append({"id": 100 + i, "file_name": f"photos/{i:03d}.png", "width": w,
                       "height": h})
        if i != 5:        # sample 5 has no annotations
            anns += _random_anns(rng, w, h, 100 + i, 1000 * i)
    images.append({"id": 999, "file_name": "photos/absent.png", "width": 10, "height": 10})
    anns.append({"id": 5, "image_id": 999, "category_id": 1, "bbox": [1, 1, 2, 2],
                 "iscrowd": 0})
    doc = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "x"}]}
    path = d / "instances.json"
    path.write_text(json.dumps(doc))
    return str(d), str(path), doc


def _sample_targets(doc, i):
    """(boxes xyxy as the loader reads them, labels, keypoints (n, K, 3))."""
    boxes, labels, kps = [], [], []
    for a in doc["annotations"]:
        if a["image_id"] != 100 + i or a.get("iscrowd"):
            continue
        x, y, w, h = a["bbox"]
        boxes.append([x, y, x + w, y + h])
        labels.append(a["category_id"])
        kps.append(np.array(a["keypoints"], np.float64).reshape(K, 3).tolist())
    return boxes, labels, kps


def _rules(spec):
    m = re.search(r"targets max_boxes=(\d+) clip=(\d) min_area=(\S+) min_visibility=(\S+) "
                  r"keypoints=(\d+)", spec)
    f = re.search(r" flip_pairs=(\S+)", spec)
    return {"max_boxes": int(m.group(1)), "clip": int(m.group(2)),
            "min_area": float(m.group(3)), "min_visibility": float(m.group(4)),
            "keypoints": int(m.group(5)),
            "flip_pairs": [tuple(map(int, p.split("-"))) for p in f.group(1).split(",")]
            if f else []}


def _batches(data, ann, spec, **kw):
    out = []
    kw.setdefault("epochs", 1)
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, **kw) as ld:
        for b in ld.stream():
            out.append(({k: np.array(v) for k, v in b.items()},
                        [int(i) for i in ld.batch_info.indices], ld.batch_digest()))
    return out


TGT = "targets max_boxes=12 keypoints=3"
SPECS = [
    "random_resized_crop size=48,64 scale=0.1,1 | " + TGT,
    "resize size=40 | center_crop size=36 | " + TGT,          # fused in the run: two steps
    "resize size=30,50 | " + TGT,
    "center_crop size=150,300 | " + TGT,                      # pads the smaller images
    "random_crop size=60,80 padding=4,2,6,8 pad_if_needed=1 | " + TGT,
    "random_crop size=60,90 pad_if_needed=1 pad_mode=edge | " + TGT,
    "random_resized_crop size=64 | hflip p=0.5 | vflip p=0.5 | " + TGT,
    "resize size=64,64 | rotate degrees=45 | " + TGT,
    "random_resized_crop size=56 | hflip p=1 | color_jitter brightness=0.4 | "
    "rotate degrees=30 interpolation=bilinear | center_crop size=40 | "
    "targets max_boxes=12 clip=0 min_area=4 min_visibility=0.3 keypoints=3",
    "resize size=48,48 | hflip p=0.5 | random_apply ops=2 p=0.5 | vflip p=1 | rotate "
    "degrees=90 | normalize mean=0.5 std=0.25 | random_erasing p=1 | " + TGT,
    # affine and the policy ops move targets by their forward matrix
    "resize size=56,64 | affine degrees=30 translate=0.2,0.1 scale=0.7,1.3 shear=-15,15,-10,10"
    " | " + TGT,
    "random_resized_crop size=48,64 | hflip p=0.5 | affine degrees=0 shear=40 "
    "interpolation=bilinear | " + TGT,
    "resize size=64,48 | rand_augment num_ops=3 magnitude=14 | " + TGT,
    "resize size=60,52 | trivial_augment_wide | hflip p=0.5 | " + TGT,
    "resize size=50,66 | auto_augment policy=svhn | "
    "targets max_boxes=12 clip=0 min_area=2 min_visibility=0.2 keypoints=3",
    "resize size=50,66 | auto_augment policy=imagenet | rotate degrees=10 | " + TGT,
]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("seed", [0, 7])
def test_targets_equal_the_reference(coco, spec, seed):
    data, ann, doc = coco
    sizes = {i: (im["width"], im["height"]) for i, im in enumerate(doc["images"][:12])}
    dtype = "float32" if "normalize" in spec else "uint8"
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, epochs=2,
                         seed=seed, dtype=dtype) as ld:
        rules = _rules(ld.spec)
        n = 0
        for b in ld.stream():
            epoch = ld.batch_info.epoch
            for row, i in enumerate(ld.batch_info.indices):
                i = int(i)
                text = ld.explain(epoch, i)
                steps = targets_ref.steps_from_explain(text, *sizes[i])
                _check_row(b, row, doc, i, steps, sizes[i], rules, text)
                n += 1
        assert n == 24


def _check_row(b, row, doc, i, steps, size, rules, text):
    """Row `row` of batch b (sample i) equals targets_ref.apply() of its
    annotations through `steps`: boxes, labels, keypoints and counts."""
    boxes, labels, kps = _sample_targets(doc, i)
    rb, rl, rk, counts, _ = targets_ref.apply(steps, *size, boxes, labels, kps, rules)
    assert b["boxes"][row].tobytes() == rb.tobytes(), (i, text)
    assert b["labels"][row].tobytes() == rl.tobytes()
    assert b["keypoints"][row].tobytes() == rk.tobytes(), (i, text)
    assert int(b["num_boxes"][row]) == counts[0]
    assert b["dropped"][row].tolist() == counts[1:]


def _rules_property(coco, spec, seed):
    """Each box of every sample of spec (output 40 x 56, rules min_area=9
    min_visibility=0.25) is kept (inside the image, clipped) or dropped by
    the rule that holds, explain says which, the batch counts them per rule,
    a kept keypoint outside the image has visibility 0, and every rule is
    exercised."""
    data, ann, doc = coco
    seen = {"kept": 0, "empty": 0, "min_area": 0, "min_visibility": 0}
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, epochs=3,
                         seed=seed) as ld:
        for b in ld.stream():
            for row, i in enumerate(ld.batch_info.indices):
                fates = re.findall(r"box \d+ cat (-?\d+): (kept|dropped \((\w+)[^)]*\)) "
                                   r"\[[^\]]*\] visible (\S+) area (\S+)",
                                   ld.explain(ld.batch_info.epoch, int(i)))
                boxes, labels, _ = _sample_targets(doc, int(i))
                assert len(fates) == len(boxes)
                per = [0, 0, 0, 0]
                for cat, what, rule, vis, area in fates:
                    vis, area = float(vis), float(area)
                    if what == "kept":
                        assert area >= 9 and vis >= 0.25
                        per[0] += 1
                        seen["kept"] += 1
                        continue
                    seen[rule] += 1
                    if rule == "empty":
                        per[1] += 1
                        assert area == 0
                    elif rule == "min_area":
                        per[2] += 1
                        assert 0 < area < 9
                    else:
                        per[3] += 1
                        assert area >= 9 and vis < 0.25
                assert [int(b["num_boxes"][row])] + b["dropped"][row].tolist() == per
                kept = b["boxes"][row][:per[0]]
                assert (kept[:, 0] >= 0).all() and (kept[:, 2] <= 56).all()
                assert (kept[:, 1] >= 0).all() and (kept[:, 3] <= 40).all()
                assert (kept[:, 2] > kept[:, 0]).all() and (kept[:, 3] > kept[:, 1]).all()
                assert not b["boxes"][row][per[0]:].any()   # padding rows are zero
                kp = b["keypoints"][row][:per[0]]
                out = (kp[..., 0] < 0) | (kp[..., 0] > 56) | (kp[..., 1] < 0) | (kp[..., 1] > 40)
                assert (kp[..., 2][out] == 0).all()         # outside: visibility 0
    assert all(v > 0 for v in seen.values()), seen          # every rule was exercised


def test_rules_property(coco):
    """Random crops of random boxes and a rotation."""
    _rules_property(coco, "random_resized_crop size=40,56 scale=0.02,0.5 | hflip p=0.5 | "
                    "rotate degrees=20 | targets max_boxes=12 min_area=9 min_visibility=0.25 "
                    "keypoints=3", 3)


SPEC_W = ("random_resized_crop size=48 | hflip p=0.5 | rotate degrees=15 | "
          "targets max_boxes=12 min_visibility=0.2 keypoints=3")


def _equal(xs, ys):
    assert len(xs) == len(ys)
    for (x, ix, dx), (y, iy, dy) in zip(xs, ys):
        assert ix == iy and dx == dy
        assert x.keys() == y.keys()
        for k in x:
            assert x[k].tobytes() == y[k].tobytes(), k


def _workers_and_resume(data, ann, spec, seed, stop):
    """The batches of spec (2 epochs, batch 4): the same at 1 and 3 workers,
    and from a state taken after `stop` batches at 3 workers, resumed at 1.
    Returns the in-process reference."""
    ref = _batches(data, ann, spec, seed=seed, epochs=2)
    for w in (1, 3):
        _equal(ref, _batches(data, ann, spec, seed=seed, epochs=2, workers=w))
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, seed=seed,
                         epochs=2, workers=3) as ld:
        it = ld.stream()
        for _ in range(stop):
            next(it)
        state = ld.state_dict()
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, seed=seed,
                         epochs=2, workers=1) as ld:
        ld.load_state_dict(state)
        rest = [({k: np.array(v) for k, v in b.items()},
                 [int(i) for i in ld.batch_info.indices], ld.batch_digest())
                for b in ld.stream()]
    assert len(ref) == 6
    _equal(ref[stop:], rest)
    return ref


def test_workers_resume_and_cache(coco, tmp_path):
    data, ann, _ = coco
    ref = _workers_and_resume(data, ann, SPEC_W, 5, 4)
    cache = tmp_path / "cache"
    cold = _batches(data, ann, SPEC_W, seed=5, epochs=2, cache=str(cache))
    warm = _batches(data, ann, SPEC_W, seed=5, epochs=2, cache=str(cache))
    _equal(ref, cold)
    _equal(ref, warm)


def test_other_annotations_are_another_stream(coco, tmp_path):
    data, ann, doc = coco
    other = tmp_path / "other.json"
    doc2 = json.loads(json.dumps(doc))
    doc2["annotations"][0]["bbox"][0] += 1
    other.write_text(json.dumps(doc2))
    with seedpipe.Loader(data, pipeline=SPEC_W, annotations=ann, batch_size=4) as a, \
            seedpipe.Loader(data, pipeline=SPEC_W, annotations=str(other), batch_size=4) as b:
        assert a.fingerprint != b.fingerprint
        next(iter(a))
        with pytest.raises(seedpipe.Error, match="the annotation file"):
            b.load_state_dict(a.state_dict())


def _open_error(data, text, spec=SPEC_W, tmp=None):
    p = tmp / "bad.json"
    p.write_text(text) if isinstance(text, str) else p.write_bytes(text)
    with pytest.raises(seedpipe.Error) as e:
        seedpipe.Loader(data, pipeline=spec, annotations=str(p), batch_size=4)
    assert str(p) in str(e.value)
    return str(e.value)


IMG = '{"id": 1, "file_name": "photos/000.png"}'


def _ann(**kw):
    a = {"id": 1, "image_id": 1, "category_id": 2, "bbox": [1, 2, 3, 4]}
    a.update(kw)
    return '{"images": [%s], "annotations": [%s]}' % (IMG, json.dumps(a))


HOSTILE = [
    ("{", r"offset \d+"),
    ('{"images": [1, 2] ', r"offset \d+"),
    ("[]", "not a JSON object"),
    ('{"images": {}, "annotations": []}', '"images" must be an array'),
    ('{"images": [], "annotations": 3}', '"annotations" must be an array'),
    ('{"images": [7], "annotations": []}', "image 0: not an object"),
    ('{"images": [{"id": 1}], "annotations": []}', 'image 0: "file_name"'),
    ('{"images": [{"id": 1.5, "file_name": "a"}], "annotations": []}', 'image 0: "id"'),
    ('{"images": [%s, %s], "annotations": []}' % (IMG, IMG.replace("000", "001")),
     "two images have id 1"),
    ('{"images": [%s, %s], "annotations": []}' % (IMG, IMG.replace('"id": 1', '"id": 2')),
     "image 1: its \"file_name\" is another image's too"),
    ('{"images": [{"id": 1, "file_name": "%s"}], "annotations": []}' % ("a" * 5000),
     'image 0: "file_name"'),
    (_ann(image_id=9), 'annotation 0: "image_id" names no image'),
    (_ann(category_id=2 ** 40), 'annotation 0: "category_id"'),
    (_ann(bbox=[1, 2, 3]), 'annotation 0: "bbox" is not 4 numbers'),
    (_ann(bbox=[1, 2, -3, 4]), "annotation 0: \"bbox\" has a negative width"),
    (_ann(bbox=[1, 2, "3", 4]), 'annotation 0: a "bbox" value'),
    (_ann(bbox=[1e300, 2, 3, 4]), 'annotation 0: a "bbox" value'),
    (_ann(iscrowd=2), 'annotation 0: "iscrowd"'),
    (_ann(keypoints=[1, 2]), 'annotation 0: "keypoints" must be 3K'),
    (_ann(keypoints=[1, 2, 3]), "annotation 0: a keypoint visibility"),
    (_ann(keypoints=[1, 2, 1] * 257), 'annotation 0: "keypoints" must be 3K'),
    ('{"images": [%s], "annotations": [%s, %s]}' % (
        IMG, json.dumps({"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1],
                         "keypoints": [1, 1, 1]}),
        json.dumps({"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1],
                    "keypoints": [1, 1, 1, 2, 2, 2]})),
     "annotation 1: \"keypoints\" has another K"),
    ("[" * 100000, r"offset \d+"),
    (b'{"images": [{"id": 1, "file_name": "\xff\xfe"}], "annotations": []}', ""),
]


@pytest.mark.parametrize("text,msg", HOSTILE)
def test_hostile_annotations_are_named_errors(coco, tmp_path, text, msg):
    data = coco[0]
    if isinstance(text, bytes):   # invalid UTF-8: the reader refuses it or takes it as a name
        p = tmp_path / "bad.json"
        p.write_bytes(text)
        try:
            seedpipe.Loader(data, pipeline=SPEC_W, annotations=str(p), batch_size=4).close()
        except seedpipe.Error as e:
            assert str(p) in str(e)
        return
    assert re.search(msg, _open_error(data, text, tmp=tmp_path)), msg


def test_rules_and_pipeline_errors(coco, tmp_path):
    data, ann, _ = coco
    many = ('{"images": [%s], "annotations": [%s]}' % (IMG, ", ".join(
        json.dumps({"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]}) for _ in range(5))))
    msg = _open_error(data, many, spec="resize size=32,32 | targets max_boxes=4", tmp=tmp_path)
    assert "sample 0 (photos/000.png) has 5 boxes, more than the targets op's max_boxes=4" in msg
    kp = _open_error(data, _ann(keypoints=[1, 1, 1]), spec="resize size=8,8 | targets "
                     "keypoints=2", tmp=tmp_path)
    assert "1 keypoints per box, the targets op says keypoints=2" in kp
    cases = [
        (dict(pipeline="resize size=8,8 | targets"), "a targets op needs annotations"),
        (dict(pipeline="resize size=8,8", annotations=ann), "ends with a targets op"),
        (dict(pipeline="targets | resize size=8,8", annotations=ann), "no op may follow targets"),
        (dict(pipeline="resize size=8,8 | random_apply ops=1 | targets", annotations=ann),
         "random_apply"),
        (dict(pipeline="resize size=8,8 | targets max_boxes=0", annotations=ann), "max_boxes"),
        (dict(pipeline="resize size=8,8 | targets min_visibility=2", annotations=ann),
         "min_visibility"),
        (dict(pipeline="resize size=8,8 | targets keypoints=300", annotations=ann), "keypoints"),
    ]
    for kw, msg in cases:
        with pytest.raises(seedpipe.Error, match=msg):
            seedpipe.Loader(data, batch_size=4, **kw)


def test_canonical_and_fields(coco):
    data, ann, _ = coco
    with seedpipe.Loader(data, pipeline="resize size=8,8|targets  keypoints=0", annotations=ann,
                         batch_size=4) as ld:
        assert ld.spec.endswith("| targets max_boxes=100 clip=1 min_area=1 min_visibility=0 "
                                "keypoints=0")
        b = next(iter(ld))
        assert set(b) == {"image", "boxes", "labels", "num_boxes", "dropped", "label"}
        assert b["image"].shape == (4, 3, 8, 8) and b["boxes"].shape == (4, 100, 4)
        assert b["boxes"].dtype == np.float32 and b["labels"].dtype == np.int32


def test_verify_covers_targets(coco):
    """`seedpipe verify` with --annotations: worker counts, a SIGKILLed
    worker, a stop/resume, the cache and world 2 give the one stream
    (images and targets), the service included; train refuses
    --annotations, saying its core is a classifier."""
    import os
    import subprocess
    bin_ = os.environ.get("SEEDPIPE_BIN")
    if not bin_:
        pytest.skip("SEEDPIPE_BIN is not set (the seedpipe tool)")
    data, ann, _ = coco
    r = subprocess.run([bin_, "verify", data, "--annotations", ann, "--pipeline", SPEC_W,
                        "--seed", "2", "--epochs", "2", "--batch-size", "4", "--workers", "1,3",
                        "--world", "1,2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all configurations give identical streams" in r.stdout
    assert "service -> client" in r.stdout and "not run (targets" not in r.stdout
    r = subprocess.run([bin_, "train", data, "--annotations", ann, "--pipeline", SPEC_W],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "training core is an image classifier" in r.stderr, r.stderr


def test_images_are_those_without_targets(coco):
    """The targets op draws nothing and the record puts the image first:
    every image equals the same pipeline's without targets, byte for byte."""
    data, ann, _ = coco
    plain = SPEC_W.rsplit("|", 1)[0]
    with seedpipe.Loader(data, pipeline=SPEC_W, annotations=ann, batch_size=4, seed=9) as a, \
            seedpipe.Loader(data, pipeline=plain, batch_size=4, seed=9) as b:
        for x, (images, labels) in zip(a, b):
            assert x["image"].tobytes() == images.tobytes()
            assert x["label"].tolist() == labels.tolist()


def test_a_file_listed_twice_has_its_targets_twice(tmp_path):
    """samples= may name one file twice (a list, a Subset with repeats):
    every copy carries the image's targets, never only the first."""
    Image = pytest.importorskip("PIL.Image")
    (tmp_path / "a").mkdir()
    images, anns = [], []
    for i in range(3):
        Image.fromarray(np.full((20 + i, 30, 3), 40 * i, np.uint8)).save(tmp_path / "a" / f"{i}.png")
        images.append({"id": i + 1, "file_name": f"a/{i}.png", "width": 30, "height": 20 + i})
        anns.append({"id": 10 + i, "image_id": i + 1, "category_id": i + 2,
                     "bbox": [1, 2, 5 + i, 6], "iscrowd": 0})
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps({"images": images, "annotations": anns, "categories": []}))
    paths = ["a/0.png", "a/1.png", "a/0.png", "a/2.png", "a/0.png"]
    with seedpipe.Loader(str(tmp_path), samples=(paths, [0, 1, 0, 2, 0]), annotations=str(ann),
                         pipeline="resize size=10,10 | targets", batch_size=5) as ld:
        b = {k: np.array(v) for k, v in next(iter(ld.stream())).items()}   # views end at close
        idx = [int(i) for i in ld.batch_info.indices]
    assert sorted(idx) == [0, 1, 2, 3, 4]
    assert b["num_boxes"].tolist() == [1] * 5
    by = {i: (b["labels"][r, 0], b["boxes"][r, 0].tobytes()) for r, i in enumerate(idx)}
    assert by[0] == by[2] == by[4] and by[0][0] == 2
    assert by[1][0] == 3 and by[3][0] == 4
