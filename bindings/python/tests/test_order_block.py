"""Loader(order="block:K") over WebDataset shards (docs/determinism.md 6a):
each epoch's indices are the reference's block order (tests/philox_ref.py);
the bytes are the C `digest --order block:K`'s for 0, 1 and 2 workers; a
state resumes at another worker count and is refused under another K by
name; bad values and a dataset without shards are refused naming the
option and the reason."""
import os
import subprocess
import sys

import pytest

import seedpipe

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))
import philox_ref as R  # noqa: E402

P = "shapes-train"
SIZES = [7] * 8 + [4]   # 60 shapes, shards of at most 7


@pytest.fixture(scope="module")
def shards(shapes, binary, tmp_path_factory):
    d = str(tmp_path_factory.mktemp("sp-block") / "shards")
    subprocess.run([binary, "shard", shapes, d, "--max-count", "7"], check=True,
                   capture_output=True)
    return d


def test_indices_are_the_reference_order(shards):
    for k in (1, 3, 9):
        with seedpipe.Loader(shards, pipeline=P, seed=12, epochs=2, batch_size=8,
                             order=f"block:{k}") as ld:
            got = {0: [], 1: []}
            for _ in ld.stream():
                info = ld.batch_info
                got[info.epoch].extend(info.indices.tolist())
        for e in (0, 1):
            assert got[e] == R.block_order(SIZES, k, 12, e), (k, e)


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_bytes_equal_c_digest(shards, workers):
    ref = seedpipe.digest(shards, pipeline=P, seed=9, epochs=2, batch_size=8, order="block:3")
    assert ref != seedpipe.digest(shards, pipeline=P, seed=9, epochs=2, batch_size=8).digests
    with seedpipe.Loader(shards, pipeline=P, seed=9, epochs=2, batch_size=8, workers=workers,
                         order="block:3") as ld:
        got = [ld.batch_digest() for _ in ld.stream()]
    assert got == ref.digests


def test_resume_and_refusal(shards):
    ref = seedpipe.digest(shards, pipeline=P, seed=8, epochs=2, batch_size=8, order="block:2")
    with seedpipe.Loader(shards, pipeline=P, seed=8, epochs=2, batch_size=8, workers=2,
                         order="block:2") as ld:
        got = []
        for _ in ld.stream():
            got.append(ld.batch_digest())
            if len(got) == 5:
                break
        state = ld.state_dict()
    assert state["order"] == "block:2"
    with seedpipe.Loader(shards, pipeline=P, seed=8, epochs=2, batch_size=8, workers=0,
                         order="block:2") as ld2:
        ld2.load_state_dict(state)
        got += [ld2.batch_digest() for _ in ld2.stream()]
    assert got == ref.digests
    with seedpipe.Loader(shards, pipeline=P, seed=8, epochs=2, batch_size=8,
                         order="block:3") as ld3:
        with pytest.raises(seedpipe.Error) as ei:
            ld3.load_state_dict(state)
    assert "order block:2 in the state, block:3 here" in str(ei.value)


@pytest.mark.parametrize("bad,why", [("block:0", "at least 1"), ("block:x", "decimal number"),
                                     ("block:-2", "decimal number"), ("blocks", "expected"),
                                     (3, "order must be")])
def test_bad_values(shards, bad, why):
    with pytest.raises(ValueError, match=why):
        seedpipe.Loader(shards, pipeline=P, batch_size=8, order=bad)


def test_dataset_without_shards(shapes):
    with pytest.raises(seedpipe.Error) as ei:
        seedpipe.Loader(shapes, pipeline=P, batch_size=8, order="block:2")
    assert "no shards" in str(ei.value) and "imagefolder" in str(ei.value)


def test_global_is_the_default(shards):
    with seedpipe.Loader(shards, pipeline=P, seed=5, batch_size=8) as a, \
            seedpipe.Loader(shards, pipeline=P, seed=5, batch_size=8, order="global") as b, \
            seedpipe.Loader(shards, pipeline=P, seed=5, batch_size=8, order="shuffle") as c:
        assert a.fingerprint == b.fingerprint == c.fingerprint
