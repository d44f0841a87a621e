"""test_shard_targets.py - targets in WebDataset shards: each sample's
KEY.json member, read with annotations="@json" (docs/targets.md "Targets
in WebDataset shards").

The dataset is test_targets.py's (Debian's mate-background photos reduced
to a grid of sizes, seeded random boxes with keypoints, a crowd box, a
sample without annotations, an image the folder lacks), each annotation
given a polygon segmentation here. No network.

- `seedpipe shard --annotations FILE` writes the folder as shards with a
  KEY.json a sample; the shards with "@json" give byte-identical batches
  (images, boxes, labels, keypoints, instance masks, counts, digests) to
  the folder with the file, at 0 and 2 workers;
- the members' bytes are the stream's identity: shards written from
  another annotation file have another fingerprint and refuse the state;
- a sample without a KEY.json has no boxes; the object form
  {"annotations": [...]} equals the array; hostile members are named
  errors naming the member; "@json" over a folder is refused by name.
"""
import io
import json
import os
import subprocess
import tarfile

import numpy as np
import pytest

import seedpipe
from test_targets import PHOTOS, _random_anns

SPEC = ("random_resized_crop size=40,48 scale=0.2,1 | hflip p=0.5 | "
        "targets max_boxes=12 keypoints=3 masks=instance")
SPEC_BOX = "resize size=32,32 | targets max_boxes=12"


def _cli(*args):
    exe = os.environ.get("SEEDPIPE_BIN", "seedpipe")
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """(folder, instances.json, the parsed JSON, shards written from both)."""
    if not PHOTOS:
        pytest.skip("no /usr/share/backgrounds/mate/*/*.jpg (Debian's mate-backgrounds)")
    from PIL import Image
    d = tmp_path_factory.mktemp("shardtargets")
    (d / "photos").mkdir()
    rng = np.random.default_rng(7)
    images, anns = [], []
    for i, p in enumerate(PHOTOS[:9]):
        with Image.open(p) as im:
            w, h = max(im.size[0] // (9 + i), 8), max(im.size[1] // (11 + i), 8)
            im.draft("RGB", (w * 2, h * 2))
            im.convert("RGB").resize((w, h), Image.BILINEAR).save(d / "photos" / f"{i:03d}.png")
        images.append({"id": 10 + i, "file_name": f"photos/{i:03d}.png"})
        if i == 4:
            continue      # sample 4: no annotations
        for a in _random_anns(rng, w, h, 10 + i, 100 * i):
            x, y, bw, bh = a["bbox"]
            a["segmentation"] = [[x, y, x + bw, y, x + bw / 2, y + bh]]
            anns.append(a)
    images.append({"id": 99, "file_name": "photos/absent.png"})
    anns.append({"id": 1, "image_id": 99, "category_id": 1, "bbox": [0, 0, 1, 1]})
    doc = {"info": {"v": 1}, "images": images, "annotations": anns}
    path = d / "instances.json"
    path.write_text(json.dumps(doc))
    shards = tmp_path_factory.mktemp("shards") / "s"
    _cli("shard", str(d), str(shards), "--max-count", "4", "--annotations", str(path))
    return str(d), str(path), doc, str(shards)


def _run(path, ann, spec, **kw):
    out = []
    with seedpipe.Loader(path, pipeline=spec, annotations=ann, batch_size=3, epochs=2,
                         **kw) as ld:
        for b in ld.stream():
            out.append(({k: np.array(v) for k, v in b.items()}, ld.batch_digest()))
        return out, ld.fingerprint


def _equal(a, b):
    assert len(a) == len(b) and a
    for (x, dx), (y, dy) in zip(a, b):
        assert sorted(x) == sorted(y)
        for k in x:
            assert x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k]), k
        assert dx == dy


def test_shards_give_the_folders_batches(data):
    folder, ann, doc, shards = data
    members = []
    for t in sorted(os.listdir(shards)):
        if t.endswith(".tar"):
            with tarfile.open(os.path.join(shards, t)) as tf:
                members += [m.name for m in tf.getmembers() if m.name.endswith(".json")]
    assert len(members) == 9                   # one a sample, "[]" for sample 4
    for seed in (0, 3):
        ref, _ = _run(folder, ann, SPEC, seed=seed)
        assert sum(int(b["num_boxes"].sum()) for b, _ in ref) > 0
        got, _ = _run(shards, "@json", SPEC, seed=seed)
        _equal(ref, got)
        got2, _ = _run(shards, "@json", SPEC, seed=seed, workers=2)
        _equal(ref, got2)


def test_members_are_the_streams_identity(data, tmp_path):
    folder, _, doc, shards = data
    doc2 = json.loads(json.dumps(doc))
    doc2["annotations"][0]["bbox"][0] += 1
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc2))
    shards2 = tmp_path / "shards2"
    _cli("shard", folder, str(shards2), "--max-count", "4", "--annotations", str(other))
    with seedpipe.Loader(shards, pipeline=SPEC_BOX, annotations="@json", batch_size=3) as a, \
            seedpipe.Loader(str(shards2), pipeline=SPEC_BOX, annotations="@json",
                            batch_size=3) as b:
        assert a.fingerprint != b.fingerprint
        next(iter(a))
        with pytest.raises(seedpipe.Error):
            b.load_state_dict(a.state_dict())


def _write_shard(path, members):
    """A tar of (name, bytes) members in order, each sample a PNG and a label."""
    with tarfile.open(path, "w") as tf:
        for name, b in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(b)
            tf.addfile(ti, io.BytesIO(b))


def _png():
    from PIL import Image
    buf = io.BytesIO()
    Image.new("RGB", (20, 16), (9, 99, 199)).save(buf, format="PNG")
    return buf.getvalue()


ANN = {"category_id": 3, "bbox": [1, 2, 5, 6]}


def _hand_shards(tmp_path, json1):
    d = tmp_path / "hand"
    d.mkdir(exist_ok=True)
    png = _png()
    members = [("a.png", png), ("a.cls", b"0"), ("a.json", json.dumps([ANN]).encode()),
               ("b.png", png), ("b.cls", b"1")]                    # b: no .json
    if json1 is not None:
        members += [("c.png", png), ("c.cls", b"0"), ("c.json", json1)]
    _write_shard(d / "s.tar", members)
    return str(d)


def _boxes(path):
    """Per sample, in dataset order: (num_boxes, labels)."""
    out = {}
    with seedpipe.Loader(path, pipeline=SPEC_BOX, annotations="@json", batch_size=1,
                         epochs=1) as ld:
        for b in ld.stream():
            i = int(ld.batch_info.indices[0])
            out[i] = (int(b["num_boxes"][0]), np.array(b["labels"][0]))
    return [out[i] for i in sorted(out)]


def test_missing_member_and_object_form(tmp_path):
    obj = json.dumps({"other": [1], "annotations": [ANN, ANN]}).encode()
    got = _boxes(_hand_shards(tmp_path, obj))
    assert [n for n, _ in got] == [1, 0, 2]
    assert got[0][1][0] == 3 and list(got[2][1][:2]) == [3, 3]
    (tmp_path / "x").mkdir()
    arr = _boxes(_hand_shards(tmp_path / "x", json.dumps([ANN, ANN]).encode()))
    assert [n for n, _ in arr] == [1, 0, 2]


HOSTILE = [
    (b"{", "offset"),
    (b"7", "not an array of annotations"),
    (b'{"a": []}', "not an array of annotations"),
    (b"[7]", "annotation 0: not an object"),
    (b'[{"bbox": [1, 2, 3, 4]}]', 'annotation 0: "category_id"'),
    (json.dumps([ANN, dict(ANN, bbox=[1, 2, 3])]).encode(), 'annotation 1: "bbox"'),
    (json.dumps([dict(ANN, keypoints=[1, 2, 7])]).encode(), "keypoint visibility"),
    (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
    (b'[{"category_id": 1, "bbox": [0, 0, 1, 1], "segmentation": [[1, 2]]}]', "annotation 0"),
]


@pytest.mark.parametrize("text,msg", HOSTILE)
def test_hostile_members_are_named_errors(tmp_path, text, msg):
    path = _hand_shards(tmp_path, text)
    with pytest.raises(seedpipe.Error) as e:
        seedpipe.Loader(path, pipeline=SPEC_BOX, annotations="@json", batch_size=1)
    assert "s.tar/c.json" in str(e.value) and msg in str(e.value), str(e.value)


def test_at_json_needs_shards(data):
    folder = data[0]
    with pytest.raises(seedpipe.Error, match="not WebDataset shards"):
        seedpipe.Loader(folder, pipeline=SPEC_BOX, annotations="@json", batch_size=3)


def test_index_file_keeps_the_members(data, tmp_path, monkeypatch):
    """Shards older than the index's 2 s rule: the first open writes each
    shard's index file (with the .json members), the next reads it and
    gives the same batches as the folder."""
    folder, ann, _, shards = data
    cache = tmp_path / "cache"
    monkeypatch.setenv("SEEDPIPE_CACHE", str(cache))
    for t in os.listdir(shards):
        os.utime(os.path.join(shards, t), (1e9, 1e9))
    ref, _ = _run(folder, ann, SPEC_BOX, seed=2)
    first, _ = _run(shards, "@json", SPEC_BOX, seed=2)
    written = [p for p in cache.rglob("*") if p.is_file()]
    assert written, "no index file written"
    second, _ = _run(shards, "@json", SPEC_BOX, seed=2)
    _equal(ref, first)
    _equal(ref, second)


def test_a_json_only_key_is_not_a_sample(tmp_path):
    """A key holding only a KEY.json (metadata beside the samples) is no
    sample, with or without "@json", as before members were read: the
    shard's samples are its images, and their targets come through."""
    from PIL import Image
    root = tmp_path / "shards"
    root.mkdir()

    def png(v):
        b = io.BytesIO()
        Image.fromarray(np.full((12, 16, 3), v, np.uint8)).save(b, "PNG")
        return b.getvalue()
    box = json.dumps([{"bbox": [1, 2, 5, 6], "category_id": 7}]).encode()
    with tarfile.open(root / "s-000000.tar", "w", format=tarfile.USTAR_FORMAT) as t:
        for name, blob in (("a.png", png(1)), ("a.cls", b"0"), ("b.png", png(2)),
                           ("b.cls", b"1"), ("b.json", box), ("meta.json", b"{}")):
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            t.addfile(info, io.BytesIO(blob))
    for ann in (None, "@json"):
        kw = {"annotations": ann} if ann else {}
        spec = SPEC_BOX if ann else "resize size=32,32"
        with seedpipe.Loader(str(root), pipeline=spec, batch_size=2, **kw) as ld:
            assert ld.num_samples == 2
            b = next(iter(ld.stream()))
            assert len(b["image"] if ann else b[0]) == 2
            if ann:
                got = {int(i): int(n) for i, n in zip(ld.batch_info.indices, b["num_boxes"])}
                assert sorted(got.values()) == [0, 1], got
