"""test_protect.py - `protect=R` of the targets op: random_resized_crop and
random_crop redraw (at most R times, attempt a from block a << 16) a crop
that would lose a box the rules keep before it (docs/pipeline.md
"protect", docs/targets.md).

On test_targets.py's COCO-style set:
- every attempt explain prints (its crop, how many boxes it loses, the
  first and its rule) and the attempt run equal targets_ref.protect_decide
  over seedpipe's Philox with tests/detmath_ref.py's det_log/det_exp, and
  the boxes, labels, keypoints and counts equal targets_ref.apply through
  the chosen crop, byte for byte;
- the property: no protected box is lost unless all R + 1 attempts lose
  one (the fallback, counted and reported);
- protect=0 is the pipeline without it (same canonical spec, same bytes),
  and a sample whose attempt 0 is kept has the image it has without
  protect;
- equal batches at 0, 1 and 3 workers and after a resume; named refusals.
"""
import os
import re
import sys

import numpy as np
import pytest

import seedpipe
from seedpipe import _keys
import targets_ref
from test_targets import (coco, _sample_targets, _rules, _batches,  # noqa: F401 (coco)
                          _workers_and_resume, _check_row)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests"))
import detmath_ref  # noqa: E402

RRC = ("random_resized_crop size=48,64 scale=0.05,0.4 | hflip p=0.5 | targets max_boxes=12 "
       "min_area=4 min_visibility=0.3 keypoints=3")
CROP = ("resize size=96,120 | random_crop size=84,108 padding=4 pad_if_needed=1 | vflip p=0.5 | "
        "targets max_boxes=12 min_visibility=0.3 keypoints=3")
LATE = ("rotate degrees=15 | random_resized_crop size=40 scale=0.1,0.5 ratio=0.5,2 | "
        "targets max_boxes=12 min_area=2 keypoints=3")
ATTEMPT = re.compile(r"^    protect attempt (\d+): (?:box x=(\d+) y=(\d+) w=(\d+) h=(\d+)|"
                     r"offset x=(\d+) y=(\d+)): (?:loses no box \(kept\)|loses (\d+) box(?:es)? "
                     r"\(box (\d+): (\w+)\), rejected)$", re.M)
WHY = {"empty": 1, "min_area": 2, "min_visibility": 3}


def _crop_line(text, kind):
    lines = text.splitlines()
    at = next(j for j, ln in enumerate(lines) if re.match(r"\d+ %s:" % kind, ln))
    return lines, at


def _reference(text, i, seed, epoch, size, doc, rules, redraws):
    """(chosen attempt, the attempts, fallback?) for sample i from the
    documented draws, and the same read from explain."""
    kind = "random_resized_crop" if "random_resized_crop:" in text else "random_crop"
    lines, at = _crop_line(text, kind)
    k = int(lines[at].split(" ")[0])
    before = targets_ref.steps_from_explain("\n".join(lines[:at]), *size)
    W, H = (before[-1][4], before[-1][5]) if before else size
    key = _keys.stream_key(seed, 2)

    def words(block):
        return _keys.philox((block, k, i, epoch), key)

    if kind == "random_resized_crop":
        m = re.search(r"-> (\d+)x(\d+)", lines[at])
        ow, oh = int(m.group(1)), int(m.group(2))
        m = re.search(r"random_resized_crop size=\S+ scale=(\S+),(\S+) ratio=(\S+),(\S+)",
                      text_spec[0])
        sc, ra = [float(m.group(1)), float(m.group(2))], [float(m.group(3)), float(m.group(4))]

        def candidate(a):
            x, y, w, h = targets_ref.rrc_at(words, a << 16, W, H, sc, ra, detmath_ref)
            return (x, y, w, h), ("axis", (x, y, ow / w, oh / h), W, H, ow, oh)
    else:
        m = re.search(r"of (\d+)x(\d+) \(\d+x\d+ padded (\d+),(\d+),\d+,\d+ \w+, then (\d+),(\d+) "
                      r"each side\) -> (\d+)x(\d+)", lines[at])
        pw, ph, pl, pt, ex, ey, ow, oh = map(int, m.groups())

        def candidate(a):
            c = words(a << 16)
            y, x = (c[0] * (ph - oh + 1)) >> 32, (c[1] * (pw - ow + 1)) >> 32
            return (x, y), ("axis", (x - pl - ex, y - pt - ey, 1.0, 1.0), W, H, ow, oh)
    boxes = _sample_targets(doc, i)[0]
    ref = targets_ref.protect_decide(candidate, before, *size, boxes, rules, redraws)
    got = []
    for g in ATTEMPT.finditer("\n".join(lines[at + 1:])):
        pos = tuple(int(v) for v in g.group(2, 3, 4, 5, 6, 7) if v is not None)
        lost = int(g.group(8)) if g.group(8) else 0
        got.append((int(g.group(1)), pos, lost, int(g.group(9)) if lost else -1,
                    WHY[g.group(10)] if lost else 0))
    fell = "    protect fallback: all %d attempts lose a box; attempt 0 is kept" % (redraws + 1)
    return ref, (got, fell in text), (candidate(ref[0])[0], lines[at])


text_spec = [""]   # the canonical spec of the loader under test (its values)


def _run(data, ann, doc, spec, seed, epochs=2):
    """Check every sample of spec against the reference; returns the
    per-sample (attempt, fallback, protected boxes, kept boxes)."""
    sizes = {i: (im["width"], im["height"]) for i, im in enumerate(doc["images"][:12])}
    out = []
    with seedpipe.Loader(data, pipeline=spec, annotations=ann, batch_size=4, epochs=epochs,
                         seed=seed) as ld:
        rules = _rules(ld.spec)
        redraws = int(re.search(r" protect=(\d+)$", ld.spec).group(1))
        text_spec[0] = ld.spec
        for b in ld.stream():
            epoch = ld.batch_info.epoch
            for row, i in enumerate(ld.batch_info.indices):
                i = int(i)
                text = ld.explain(epoch, i)
                (a, tries, fell), (got, got_fell), (pos, line) = _reference(
                    text, i, seed, epoch, sizes[i], doc, rules, redraws)
                assert got == tries and got_fell == fell, (i, text, tries)
                if "random_resized_crop" in line:
                    assert "box x=%d y=%d w=%d h=%d " % pos in line, (line, pos)
                else:
                    assert "offset x=%d y=%d " % pos in line, (line, pos)
                steps = targets_ref.steps_from_explain(text, *sizes[i])
                _check_row(b, row, doc, i, steps, sizes[i], rules, text)
                boxes = _sample_targets(doc, i)[0]
                lines, at = _crop_line(text, "random_resized_crop" if "random_resized_crop"
                                       in line else "random_crop")
                before = targets_ref.steps_from_explain("\n".join(lines[:at]), *sizes[i])
                prot = [j for j, bx in enumerate(boxes)
                        if targets_ref.fate(before, *sizes[i], bx, rules) == 0]
                fates = re.findall(r"^box (\d+) cat -?\d+: (\w+)", text, re.M)
                assert [int(j) for j, _ in fates] == list(range(len(boxes)))
                lost = sum(fates[j][1] != "kept" for j in prot)
                out.append((a, fell, len(prot), lost, len(tries)))
    return out


@pytest.mark.parametrize("spec", [RRC + " protect=6", CROP + " protect=10", LATE + " protect=3"])
@pytest.mark.parametrize("seed", [0, 9])
def test_protect_equals_the_reference(coco, spec, seed):  # noqa: F811
    data, ann, doc = coco
    res = _run(data, ann, doc, spec, seed)
    assert len(res) == 24
    assert any(a > 0 for a, *_ in res), res   # a redraw happened


def test_no_box_lost_unless_every_attempt_loses_one(coco, capsys):  # noqa: F811
    """RRC then a flip: a box the crop keeps is kept at the end, so with
    protect=R every sample keeps all its protected boxes, except the
    fallbacks (all R + 1 attempts lose one), which are counted."""
    data, ann, doc = coco
    res = _run(data, ann, doc, RRC + " protect=8", 4, epochs=4)
    fallbacks = sum(f for _, f, *_ in res)
    for a, fell, prot, lost, tries in res:
        if not fell:   # every protected box kept (tries 0: a sample without boxes)
            assert lost == 0 and tries in (0, a + 1)
        else:
            assert lost > 0 and tries == 9 and a == 0
    lost_without = 0   # the same samples without protect: protected boxes lost
    with seedpipe.Loader(data, pipeline=RRC, annotations=ann, batch_size=4, epochs=4,
                         seed=4) as ld:
        rules = _rules(ld.spec)
        for _ in ld.stream():
            for i in ld.batch_info.indices:
                fates = re.findall(r"^box \d+ cat -?\d+: (\w+)",
                                   ld.explain(ld.batch_info.epoch, int(i)), re.M)
                boxes = _sample_targets(doc, int(i))[0]
                lost_without += sum(fates[j] != "kept" for j, bx in enumerate(boxes)
                                    if targets_ref.fate([], *_size(doc, int(i)), bx, rules) == 0)
    lost_with = sum(lost for _, _, _, lost, _ in res)
    with capsys.disabled():
        print("\nprotect=8: %d samples, %d redrawn, %d fallbacks; protected boxes lost: %d "
              "(without protect: %d)" % (len(res), sum(a > 0 for a, *_ in res), fallbacks,
                                         lost_with, lost_without))
    assert lost_without > 0 and lost_with < lost_without
    assert sum(a > 0 for a, *_ in res) > 0


def _size(doc, i):
    im = doc["images"][i]
    return im["width"], im["height"]


def test_protect_zero_and_attempt_zero_keep_the_bytes(coco):  # noqa: F811
    data, ann, _ = coco
    plain = _batches(data, ann, RRC, seed=2)
    zero = _batches(data, ann, RRC + " protect=0", seed=2)
    assert [d for _, _, d in plain] == [d for _, _, d in zero]
    with seedpipe.Loader(data, pipeline=RRC + " protect=0", annotations=ann,
                         batch_size=4) as ld:
        assert "protect" not in ld.spec
    prot = _batches(data, ann, RRC + " protect=5", seed=2)
    same = diff = 0
    with seedpipe.Loader(data, pipeline=RRC + " protect=5", annotations=ann, batch_size=4,
                         seed=2) as ld:
        for (p, idx, _), (q, _, _) in zip(plain, prot):
            for row, i in enumerate(idx):
                text = ld.explain(0, i)
                kept = re.search(r"^    protect attempt (\d+): .*\(kept\)$", text, re.M)
                if not kept or kept.group(1) == "0":
                    assert p["image"][row].tobytes() == q["image"][row].tobytes(), text
                    same += 1
                else:
                    assert p["image"][row].tobytes() != q["image"][row].tobytes(), text
                    diff += 1
    assert same and diff


def test_workers_and_resume(coco):  # noqa: F811
    data, ann, _ = coco
    _workers_and_resume(data, ann, RRC + " protect=4", 4, 3)
    _workers_and_resume(data, ann, CROP + " protect=6", 1, 2)


def test_refusals(coco):  # noqa: F811
    data, ann, _ = coco
    for v in ("-1", "1001", "1.5", "x"):
        with pytest.raises(seedpipe.Error, match=r'"targets": bad value "%s" for protect'
                           % re.escape(v)):
            seedpipe.Loader(data, pipeline=RRC + " protect=" + v, annotations=ann, batch_size=4)
    with seedpipe.Loader(data, pipeline=RRC + " protect=7", annotations=ann, batch_size=4) as ld:
        assert ld.spec.endswith(" keypoints=3 protect=7")
        np.testing.assert_equal(ld.spec.count("protect"), 1)
