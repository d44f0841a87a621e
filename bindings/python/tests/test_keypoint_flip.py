"""test_keypoint_flip.py - `flip_pairs=` of the targets op: at every step
that mirrors the canvas (hflip, vflip) the keypoints of each pair swap
places, so COCO person's left_eye stays the person's left eye
(docs/pipeline.md "Moving keypoints", docs/targets.md).

On test_targets.py's COCO-style set (K = 3 keypoints a box):
- boxes, labels, keypoints and counts equal targets_ref.apply (with the
  pairs swapped after each mirroring step) byte for byte;
- against the same pipeline without flip_pairs: the same boxes, labels,
  counts and images, and keypoints equal with each pair swapped exactly
  when the sample was mirrored an odd number of times (explain says);
- torchvision's detection reference (references/detection/transforms.py,
  `_flip_coco_person_keypoints`): an hflip gives x -> W - x then the
  keypoints reindexed by flip_inds;
- equal batches at 0, 1 and 3 workers and after a resume; named refusals.
"""
import re

import numpy as np
import pytest

import seedpipe
import targets_ref
from test_targets import (coco, _rules, _batches, _workers_and_resume,  # noqa: F401 (coco)
                          _check_row, _sample_targets)

TGT = "targets max_boxes=12 keypoints=3 flip_pairs=0-2"
SPECS = [
    "random_resized_crop size=48,64 | hflip p=0.5 | vflip p=0.3 | rotate degrees=10 | " + TGT,
    "resize size=56,64 | hflip p=0.5 | trivial_augment_wide | hflip p=0.5 | " + TGT,
    "random_crop size=40,50 pad_if_needed=1 | hflip p=0.7 | "
    "targets max_boxes=12 clip=0 min_visibility=0.3 keypoints=3 flip_pairs=1-2",
]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("seed", [0, 7])
def test_flip_pairs_equal_the_reference(coco, spec, seed):  # noqa: F811
    data, ann, doc = coco
    sizes = {i: (im["width"], im["height"]) for i, im in enumerate(doc["images"][:12])}
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, epochs=2,
                         seed=seed) as ld:
        rules = _rules(ld.spec)
        assert rules["flip_pairs"]
        for b in ld.stream():
            for row, i in enumerate(ld.batch_info.indices):
                text = ld.explain(ld.batch_info.epoch, int(i))
                steps = targets_ref.steps_from_explain(text, *sizes[int(i)])
                _check_row(b, row, doc, int(i), steps, sizes[int(i)], rules, text)


def test_swapped_exactly_when_mirrored(coco):  # noqa: F811
    data, ann, _ = coco
    spec = SPECS[0]
    plain = _batches(data, ann, spec.replace(" flip_pairs=0-2", ""), seed=3, epochs=2)
    swap = _batches(data, ann, spec, seed=3, epochs=2)
    odd = even = 0
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, seed=3,
                         epochs=2) as ld:
        for n, ((p, idx, _), (q, idx2, _)) in enumerate(zip(plain, swap)):
            assert idx == idx2
            for k in ("image", "boxes", "labels", "num_boxes", "dropped"):
                assert p[k].tobytes() == q[k].tobytes(), k
            for row, i in enumerate(idx):
                text = ld.explain(n // 3, i)
                flips = len(re.findall(r"^\d+ [hv]flip: flipped", text, re.M))
                kp = p["keypoints"][row]
                want = kp[:, [2, 1, 0]] if flips % 2 else kp
                assert want.tobytes() == q["keypoints"][row].tobytes(), text
                if int(p["num_boxes"][row]):
                    odd += flips % 2
                    even += 1 - flips % 2
    assert odd and even


def test_torchvision_reference_flip(coco):  # noqa: F811
    """references/detection/transforms.py flips COCO person keypoints as
    `flipped[..., 0] = width - flipped[..., 0]; flipped = flipped[:, flip_inds]`
    (flip_inds [0, 2, 1, 4, 3, ...]); here with K = 3, flip_inds [0, 2, 1]."""
    data, ann, doc = coco
    spec = "resize size=48,64 | hflip p=1 | targets max_boxes=12 clip=0 min_area=0 " \
           "keypoints=3 flip_pairs=1-2"
    sizes = {i: (im["width"], im["height"]) for i, im in enumerate(doc["images"][:12])}
    for b, idx, _ in _batches(data, ann, spec, seed=1):
        for row, i in enumerate(idx):
            boxes, _, kps = _sample_targets(doc, i)
            n = int(b["num_boxes"][row])
            assert n == len(boxes)   # min_area=0, clip=0: every box with area kept
            W, H = sizes[i]
            for j in range(n):
                k = np.array(kps[j], np.float64)
                x = 64 - (k[:, 0].astype(np.float32).astype(np.float64) * (64 / W))
                y = k[:, 1].astype(np.float32).astype(np.float64) * (48 / H)
                v = k[:, 2].copy()
                inside = (k[:, 0] >= 0) & (k[:, 0] <= W) & (k[:, 1] >= 0) & (k[:, 1] <= H)
                v[~inside] = 0
                ref = np.stack([x, y, v], 1)[[0, 2, 1]].astype(np.float32)
                assert b["keypoints"][row][j].tobytes() == ref.tobytes(), (i, j)


def test_workers_and_resume(coco):  # noqa: F811
    data, ann, _ = coco
    _workers_and_resume(data, ann, SPECS[0], 2, 2)


def test_refusals_and_canonical(coco):  # noqa: F811
    data, ann, _ = coco
    for v, msg in (("0-3", "for flip_pairs"), ("1-1", "for flip_pairs"),
                   ("0-1,1-2", "for flip_pairs"), ("coco", "17 keypoints")):
        with pytest.raises(seedpipe.Error, match=msg):
            seedpipe.Loader(data, pipeline="resize size=8,8 | targets keypoints=3 flip_pairs="
                            + v, annotations=ann, batch_size=4)
    with pytest.raises(seedpipe.Error, match="needs keypoints"):
        seedpipe.Loader(data, pipeline="resize size=8,8 | targets flip_pairs=0-1",
                        annotations=ann, batch_size=4)
    with seedpipe.Loader(data, pipeline="resize size=8,8 | targets keypoints=3 flip_pairs=2-0",
                         annotations=ann, batch_size=4) as ld:
        assert ld.spec.endswith(" keypoints=3 flip_pairs=0-2")
