"""Loader(cache=DIR) and `seedpipe serve --cache DIR`: the epoch cache never
changes a byte, in-process and on the worker pool, cold and warm, and a
damaged file is a RuntimeWarning naming it, never served."""
import glob
import os
import warnings

import pytest

import seedpipe
from conftest import our_regions
from test_attach import finish, serve

KW = dict(pipeline="shapes-train", seed=11, batch_size=8, epochs=2)


def digests(ld):
    out = []
    for _ in range(2):
        for _x, _y in ld:
            out.append(ld.batch_digest())
    return out


def test_loader_cache_cold_warm(shapes, tmp_path):
    ref = seedpipe.digest(shapes, pipeline="shapes-train", seed=11, epochs=2, batch_size=8)
    for workers in (0, 2):
        cache = tmp_path / f"c{workers}"
        for attempt in ("cold", "warm"):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with seedpipe.Loader(shapes, workers=workers, cache=cache, **KW) as ld:
                    assert digests(ld) == ref.digests, f"workers {workers} {attempt}"
                    st = ld.cache_stats()
            if attempt == "cold":
                assert st["batches_written"] == 16 and st["batches_read"] == 0
            else:
                assert st["batches_read"] == 16 and st["batches_computed"] == 0, st
        entries = [d for d in os.listdir(cache) if not d.startswith(".")]
        assert len(entries) == 2
    with seedpipe.Loader(shapes, workers=1, **KW) as ld:
        assert ld.cache_stats() is None


def test_loader_cache_damaged_file_warns(shapes, tmp_path):
    ref = seedpipe.digest(shapes, pipeline="shapes-train", seed=11, epochs=2, batch_size=8)
    cache = tmp_path / "c"
    with seedpipe.Loader(shapes, workers=2, cache=cache, **KW) as ld:
        digests(ld)
    victim = sorted(glob.glob(str(cache / "*" / "b*")))[5]
    with open(victim, "r+b") as f:
        f.seek(200)
        b = f.read(1)
        f.seek(200)
        f.write(bytes([b[0] ^ 1]))
    with pytest.warns(RuntimeWarning, match=os.path.basename(victim)):
        with seedpipe.Loader(shapes, workers=2, cache=cache, **KW) as ld:
            assert digests(ld) == ref.digests
    assert os.listdir(cache / ".corrupt")


def test_loader_cache_bad_argument(shapes):
    with pytest.raises(ValueError, match="cache"):
        seedpipe.Loader(shapes, cache=3, **KW)


def test_serve_cache_cold_warm(binary, shapes, region_name, tmp_path):
    ref = seedpipe.digest(shapes, pipeline="shapes-train", seed=11, epochs=2, batch_size=8)
    cache = str(tmp_path / "svc")
    for attempt in ("cold", "warm"):
        p = serve(binary, shapes, region_name, "--workers", 2, "--cache", cache)
        try:
            with seedpipe.attach(region_name) as cl:
                got = []
                for _ in range(2):
                    for _x, _y in cl:
                        got.append(cl.batch_digest())
            assert got == ref.digests, attempt
            rc, out, err = finish(p)
            assert rc == 0, (out, err)
            want = "16 written" if attempt == "cold" else "16 batches read, 0 computed"
            assert want in out, out
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    # The service's entries are the global stream's: digest reads them.
    d = seedpipe.digest(shapes, pipeline="shapes-train", seed=11, epochs=2, batch_size=8,
                        workers=1, cache=cache)
    assert d.digests == ref.digests
    assert not our_regions()
