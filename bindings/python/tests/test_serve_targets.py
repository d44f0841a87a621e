"""test_serve_targets.py - `seedpipe serve --annotations`: the targets ride
the service's ring (docs/targets.md "The service").

A make-shapes dataset with a COCO-style instances JSON written here (boxes
inside and across the border, two keypoints each, a rectangle polygon as
each box's segmentation) and, for masks=semantic, a label map per image.
Served batches (the image and every target array, the class label, the
batch digest) equal the in-process Loader's at 1 and 3 workers, and after
the client stopped, the service was stopped, and a new service resumed
from the client's state at another worker count.
"""
import json
import os
import re
import subprocess

import numpy as np
import pytest
from PIL import Image

import seedpipe
from conftest import our_regions
import served

SPEC = ("random_resized_crop size=24 scale=0.3,1 | hflip p=0.5 | "
        "targets max_boxes=6 keypoints=2 min_visibility=0.2 masks=instance")
SEMANTIC = "random_resized_crop size=20 | vflip p=0.5 | targets masks=semantic mask_fill=255"
COMMON = ["--seed", "7", "--epochs", "2", "--batch-size", "8"]


@pytest.fixture(scope="module")
def det(tmp_path_factory, binary):
    """(dataset root, annotation file) over 40 shapes of 32 x 32."""
    d = tmp_path_factory.mktemp("serve-tg")
    root = d / "shapes"
    subprocess.run([binary, "make-shapes", str(root), "--count", "40", "--size", "32", "--seed",
                    "3"], check=True, capture_output=True)
    rels = sorted(os.path.relpath(os.path.join(dp, f), root)
                  for dp, _, fs in os.walk(root) for f in fs)
    assert len(rels) == 40
    rng = np.random.default_rng(39)
    images, anns = [], []
    for i, rel in enumerate(rels):
        images.append({"id": i + 1, "file_name": rel, "width": 32, "height": 32})
        lab = rng.integers(0, 7, size=(32, 32), dtype=np.uint8)
        mp = (d / "shapes_masks" / rel).with_suffix(".png")
        mp.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(lab, "L").save(mp)
        for j in range(int(rng.integers(0, 5))):
            x, y = rng.uniform(-4, 28, size=2)
            w, h = rng.uniform(2, 16, size=2)
            kp = [float(x + w / 2), float(y + h / 2), 2, float(x), float(y), 1]
            poly = [x, y, x + w, y, x + w, y + h, x, y + h]
            anns.append({"id": 100 * i + j + 1, "image_id": i + 1,
                         "category_id": int(rng.integers(1, 9)), "iscrowd": 0,
                         "bbox": [float(x), float(y), float(w), float(h)], "keypoints": kp,
                         "segmentation": [[float(v) for v in poly]]})
    path = d / "instances.json"
    path.write_text(json.dumps({"images": images, "annotations": anns}))
    return str(root), str(path)


def _loader_batches(root, spec, ann):
    kw = {"annotations": ann} if ann else {}
    out = []
    with seedpipe.Loader(root, pipeline=spec, seed=7, epochs=2, batch_size=8, **kw) as ld:
        for b in ld.stream():
            out.append(({k: np.array(v) for k, v in b.items()}, ld.batch_digest()))
    return out


def _serve(binary, root, name, spec, ann, *extra):
    return served.start([binary, "serve", "--name", name, root, "--pipeline", spec, *COMMON,
                         *extra, *(["--annotations", ann] if ann else [])])


_stop = served.stop


def _take(cl, n=None):
    got = []
    for b in cl.stream():
        assert isinstance(b, dict)
        got.append(({k: np.array(v) for k, v in b.items()}, cl.batch_digest()))
        if n is not None and len(got) == n:
            break
    return got


def _same(got, ref):
    assert len(got) == len(ref)
    for (g, gd), (r, rd) in zip(got, ref):
        assert set(g) == set(r)
        for k in r:
            assert g[k].dtype == r[k].dtype and g[k].shape == r[k].shape, k
            assert g[k].tobytes() == r[k].tobytes(), k
        assert gd == rd


@pytest.mark.parametrize("workers", [1, 3])
def test_served_targets_equal_loader(binary, det, region_name, workers):
    root, ann = det
    ref = _loader_batches(root, SPEC, ann)
    assert sum(int(b["num_boxes"].sum()) for b, _ in ref) > 0   # boxes ride at all
    assert sum(int(b["masks"].sum()) for b, _ in ref) > 0
    assert len({b["keypoints"].tobytes() for b, _ in ref}) > 1
    assert {"boxes", "labels", "keypoints", "masks", "num_boxes", "dropped"} <= set(ref[0][0])
    p = _serve(binary, root, region_name, SPEC, ann, "--workers", workers)
    try:
        with seedpipe.attach(region_name) as cl:
            got = _take(cl)
        assert _stop(p)[0] == 0
    finally:
        _stop(p, terminate=True)
    _same(got, ref)
    assert not our_regions()


def test_served_semantic_masks(binary, det, region_name):
    root, _ = det
    ref = _loader_batches(root, SEMANTIC, None)
    assert ref[0][0]["semantic"].shape == (8, 20, 20)
    p = _serve(binary, root, region_name, SEMANTIC, None, "--workers", 2)
    try:
        with seedpipe.attach(region_name) as cl:
            got = _take(cl)
        assert _stop(p)[0] == 0
    finally:
        _stop(p, terminate=True)
    _same(got, ref)


def test_served_targets_resume(binary, det, region_name, tmp_path):
    """A client takes 3 batches and its state; the service is stopped; a
    new service resumes from that state at 3 workers: the batches, put
    together, are the in-process Loader's."""
    root, ann = det
    ref = _loader_batches(root, SPEC, ann)
    p = _serve(binary, root, region_name, SPEC, ann, "--workers", 1)
    try:
        cl = seedpipe.attach(region_name, copy=True)
        got = _take(cl, 3)
        state = cl.state_dict()
        cl.close()
    finally:
        _stop(p, terminate=True)
    sf = tmp_path / "state.json"
    sf.write_text(json.dumps(state))
    p = _serve(binary, root, region_name, SPEC, ann, "--workers", 3, "--resume", sf)
    try:
        with seedpipe.attach(region_name) as cl:
            got += _take(cl)
        assert _stop(p)[0] == 0
    finally:
        _stop(p, terminate=True)
    _same(got, ref)


def test_c_trainer_reads_targets(binary, det, region_name):
    """examples/trainer.c reads the served record: the image for its mean,
    the counts for the boxes kept, and its stream digest is the Loader's."""
    root, ann = det
    trainer = os.path.join(os.path.dirname(binary), "example_trainer")
    if not os.path.exists(trainer):
        pytest.skip(f"{trainer} is not built")
    ref = _loader_batches(root, SPEC, ann)
    kept = sum(int(b["num_boxes"].sum()) for b, _ in ref)
    p = _serve(binary, root, region_name, SPEC, ann, "--workers", 2)
    try:
        r = subprocess.run([trainer, "--name", region_name], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert _stop(p)[0] == 0
    finally:
        _stop(p, terminate=True)
    assert f"targets: {kept} boxes kept over 80 images" in r.stdout, r.stdout
    d = subprocess.run([binary, "digest", root, "--annotations", ann, "--pipeline", SPEC,
                        *COMMON, "--out", "-"], capture_output=True, text=True, timeout=120)
    assert d.returncode == 0, d.stderr
    sd = re.search(r"stream ([0-9a-f]{32})", d.stdout + d.stderr).group(1)
    assert f"stream digest: {sd}" in r.stdout, (r.stdout, d.stderr)


def test_train_refuses_targets(binary, det, tmp_path):
    """`seedpipe train` is a classifier: a targets pipeline is refused
    plainly, with or without annotations (masks=semantic needs none)."""
    root, ann = det
    for extra in (["--annotations", ann, "--pipeline", SPEC], ["--pipeline", SEMANTIC]):
        r = subprocess.run([binary, "train", root, *extra, "--batch-size", "8", "--epochs", "1",
                            "--out", str(tmp_path / "run.json")], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode != 0 and "training core is an image classifier" in r.stderr, \
            r.stderr
    assert not (tmp_path / "run.json").exists()
