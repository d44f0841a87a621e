"""Loader(trace=FILE.json): the timeline of a Python consumer and its pool
workers (trace.h, docs/tracing.md). The batches are the same bytes with and
without it; the file, written at close(), is Chrome trace-event JSON with
this process as "consumer" (its pid) and the workers named, one "next"
span per batch taken, every batch position's "sample" span once; a second
traced Loader in the same process is refused while the first records; the
trace can be started again after close()."""
import json
import os

import pytest

import seedpipe

from conftest import wait_no_children


def _digests(ld):
    out = []
    for _ in ld:
        out.append(ld.batch_digest())
    return out


def test_trace_same_bytes_and_spans(shapes, tmp_path):
    path = str(tmp_path / "t.json")
    with seedpipe.Loader(shapes, seed=3, batch_size=16, workers=2, epochs=1) as ld:
        plain = _digests(ld)
    with seedpipe.Loader(shapes, seed=3, batch_size=16, workers=2, epochs=1, trace=path) as ld:
        traced = _digests(ld)
        n = ld.num_samples
        with pytest.raises(seedpipe.Error, match="already records"):
            seedpipe.Loader(shapes, seed=3, batch_size=16, trace=str(tmp_path / "u.json"))
        assert not os.path.exists(path)   # written at close
    wait_no_children()
    assert traced == plain
    with open(path) as f:
        d = json.load(f)
    names = {e["pid"]: e["args"]["name"] for e in d["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names[os.getpid()] == "consumer"
    assert sorted(v for k, v in names.items() if k != os.getpid()) == ["worker 0", "worker 1"]
    spans = [e for e in d["traceEvents"] if e["ph"] == "X"]
    nexts = [e for e in spans if e["name"] == "next" and e["pid"] == os.getpid()]
    assert len(nexts) == len(plain)
    keys = {(e["args"]["batch"], e["args"]["pos"]) for e in spans if e["name"] == "sample"}
    assert len(keys) == n
    assert not [f for f in os.listdir(tmp_path) if ".parts-" in f]
    # once closed, a new trace may start
    p2 = str(tmp_path / "again.json")
    with seedpipe.Loader(shapes, seed=3, batch_size=16, epochs=1, trace=p2) as ld:
        assert _digests(ld) == plain
    with open(p2) as f:
        assert json.load(f)["otherData"]["events"] > 0
