"""seedpipe.digest() / seedpipe.verify(): the CLI as Python objects."""
import pytest

import seedpipe
from conftest import stream_digest


def test_digest_objects(shapes):
    m = seedpipe.digest(shapes, pipeline="shapes-train", seed=7, epochs=2, batch_size=16,
                        workers=2)
    assert isinstance(m, list) and len(m) == 8
    assert m.header["seedpipe_manifest"] == 1 and m.header["sample_shape"] == [3, 48, 48]
    assert [(b["epoch"], b["batch"]) for b in m] == [(e, i) for e in range(2) for i in range(4)]
    assert m[3]["count"] == 12 and len(m[3]["indices"]) == 12
    assert len(m.stream) == 32 and stream_digest(m.digests) == m.stream
    assert m.images_per_s > 0
    again = seedpipe.digest(shapes, pipeline="shapes-train", seed=7, epochs=2, batch_size=16)
    assert again.digests == m.digests


@pytest.mark.parametrize("kw,args", [
    (dict(), []),
    (dict(workers=2, dtype="float32", layout="nhwc", on_error="skip"),
     ["--workers", "2", "--dtype", "float32", "--layout", "nhwc", "--on-error", "skip"]),
    (dict(rank=1, world=2, drop_last=True), ["--rank", "1", "--world", "2", "--drop-last"]),
])
def test_digest_is_the_tools(binary, shapes, tmp_path, kw, args):
    # digest() runs in the library; the tool writes the same manifest lines
    # (the header's versions aside) and prints the same stream digest.
    import json
    import re
    import subprocess
    m = seedpipe.digest(shapes, pipeline="shapes-train", seed=5, epochs=2, batch_size=16, **kw)
    out = tmp_path / "m.jsonl"
    p = subprocess.run([binary, "digest", shapes, "--pipeline", "shapes-train", "--seed", "5",
                        "--epochs", "2", "--batch-size", "16", *args, "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(l) for l in out.read_text().splitlines()]
    assert {k: v for k, v in lines[0].items() if k != "versions"} == \
        {k: v for k, v in m.header.items() if k != "versions"}
    assert lines[1:] == list(m) and len(m) > 0
    assert re.search(r"stream ([0-9a-f]{32})", p.stdout + p.stderr).group(1) == m.stream
    assert m.output.startswith(f"digest: {len(m)} batches, ") and m.stream in m.output


def test_digest_error_carries_message(tmp_path):
    with pytest.raises(seedpipe.Error) as ei:
        seedpipe.digest(str(tmp_path / "nope"), epochs=1)
    assert "nope: No such file or directory" in str(ei.value)


def test_verify_ok(shapes):
    r = seedpipe.verify(shapes, pipeline="shapes-train", seed=3, epochs=1, batch_size=8,
                        workers=[1, 2], cache=False)
    assert r.ok and bool(r) and r.returncode == 0
    names = [row["configuration"] for row in r.rows]
    assert names[0] == "in-process (reference)" and "workers 2" in names
    assert any("SIGKILL" in n for n in names) and any("service" in n for n in names)
    assert len(set(r.digests.values())) == 1
    assert all(row["equal"] in (None, True) for row in r.rows)
    assert "identical" in r.summary


def test_verify_per_worker_rng_mismatch(shapes):
    # Per-worker bytes depend on which worker computed what: with 2 workers
    # on 60 samples a loaded machine could leave worker 1 unscheduled for the
    # whole epoch (then nothing diverges). 4 workers over 3 epochs make a
    # worker-0-only run practically impossible.
    r = seedpipe.verify(shapes, pipeline="shapes-train", seed=3, epochs=3, batch_size=8,
                        workers=[1, 4], rng_mode="per-worker", crash=False, resume=False,
                        service=False, cache=False)
    assert not r.ok and r.returncode != 0
    assert any(row["equal"] is False for row in r.rows)
    assert any("first divergence" in n for n in r.notes)
    assert "MISMATCH" in r.summary


def test_explain_matches_the_cli(binary, shapes):
    pipe = "random_resized_crop size=24 | hflip p=0.5 | color_jitter brightness=0.4"
    with seedpipe.Loader(shapes, pipeline=pipe, seed=11, batch_size=8) as ld:
        text = ld.explain(2, 17)
        with pytest.raises(seedpipe.Error, match="out of range"):
            ld.explain(0, 10**6)
    assert text.splitlines()[0].startswith("0 random_resized_crop: box x=")
    assert "hflip: " in text and "color_jitter: brightness " in text
    import subprocess
    cli = subprocess.run([binary, "explain", shapes, "--pipeline", pipe, "--seed", "11",
                          "--epoch", "2", "--sample", "17"], capture_output=True, text=True,
                         check=True).stdout
    assert cli.split("\n", 1)[1] == text, (cli, text)
    with seedpipe.Loader(shapes, pipeline=pipe, seed=11, batch_size=8, workers=2) as ld:
        assert ld.explain(2, 17) == text   # the same on the worker pool
