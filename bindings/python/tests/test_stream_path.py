"""Loader (in-process and pool) and Client take every batch from one
sp_stream (stream.h): what the stream reports agrees with the Python object,
one view is held at a time, and an in-process Loader keeps its whole-life
behaviour (views, failure log, cache counters) across the stream reopened by
set_epoch() / load_state_dict()."""
import os
import shutil
from ctypes import byref

import numpy as np
import pytest

import seedpipe
from seedpipe import _state
from seedpipe import _lib as L
from test_attach import finish, serve

KW = dict(pipeline="shapes-train", seed=11, batch_size=8, epochs=2)


def sinfo(obj):
    i = L.sp_stream_info()
    L.sp_stream_info_get(obj._res.stream, byref(i))
    return i


def addr(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("workers,ring", [(0, 0), (2, 0), (2, 3)])
def test_loader_is_one_stream(shapes, workers, ring):
    with seedpipe.Loader(shapes, workers=workers, ring=ring, **KW) as ld:
        if workers:     # the pool stream is opened (the workers forked) at the first batch
            assert ld._res.stream is None and ld.worker_pids() == []
        n = 0
        for x, _ in ld.stream():
            n += 1
            i = sinfo(ld)
            assert i.kind == L.STREAM_KINDS["pool" if workers else "loader"]
            assert i.held == 1 and i.taken == n         # only the last batch's view is held
            assert i.max_held == (ring or 2 * workers if workers else 1)
            assert i.fingerprint.hex() == ld.fingerprint and i.batches_per_epoch == len(ld)
            assert (i.c, i.h, i.w) == ld._chw and (i.rank, i.world) == (0, 1)
            assert addr(x) == ld._last.images
        assert n == 2 * len(ld) and (i.first, i.end) == (0, 2 * len(ld))
        if workers:
            assert len(ld.worker_pids()) == workers


@pytest.mark.parametrize("workers", [0, 2])
def test_state_dict_is_the_position(shapes, workers):
    """sp_stream_state() gives what sp_loader_state_at(epoch, batch) gave."""
    with seedpipe.Loader(shapes, workers=workers, **KW) as ld:
        for k, _ in enumerate(ld.stream()):
            st = L.sp_loader_state()
            L.sp_loader_state_at(ld._ld(), ld.epoch, ld._batch, byref(st))
            assert ld.state_dict() == _state.state_to_dict(st)
            if k == 10:
                break
        ld.load_state_dict(ld.state_dict())     # in place: the next batch is still (1, 3)
        next(iter(ld))
        assert (ld.batch_info.epoch, ld.batch_info.index) == (1, 3)
        i = sinfo(ld)
        if workers:                             # the pool was restarted there
            assert (i.first, i.taken) == (len(ld) + 3, 1)
        else:                                   # the in-process stream just went on
            assert (i.first, i.taken) == (0, 12)


def test_in_process_views_survive_a_reposition_until_the_next_batch(shapes):
    with seedpipe.Loader(shapes, **KW) as ld:
        it = iter(ld)
        next(it)
        x, y = next(it)
        keep = x.copy(), y.copy()
        old = ld._res.stream
        ld.set_epoch(1)                         # the same stream seeks to (1, 0)...
        assert ld._res.stream == old and ld._res.retired is None
        assert sinfo(ld).first == 0 and ld.batch_info is None
        assert np.array_equal(x, keep[0]) and np.array_equal(y, keep[1])   # ...the buffer stays
        next(iter(ld))
        assert (ld.batch_info.epoch, ld.batch_info.index) == (1, 0)
        assert sinfo(ld).taken == 3


def test_in_process_failure_log_and_cache_counters_span_repositions(shapes, tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(shapes, ds)
    first_class = sorted(d for d in os.listdir(ds) if not d.startswith("."))[0]
    victim = sorted((ds / first_class).iterdir())[0]
    victim.write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    with seedpipe.Loader(ds, on_error="skip", cache=tmp_path / "c", **KW) as ld:
        list(ld)
        f = ld.failures()
        assert len(f) == 1 and victim.name in f[0][1]
        cs = ld.cache_stats()
        assert cs["batches_written"] == len(ld)
        ld.set_epoch(0)                         # a seek: the same log and counters
        assert ld.failures() == f and ld.cache_stats()["batches_written"] == len(ld)
        list(ld)                                # epoch 0 again, now read from the cache
        assert ld.failures() == f               # the sample is logged once
        cs = ld.cache_stats()
        assert cs["batches_written"] == len(ld) and cs["batches_read"] == len(ld)


def test_a_library_without_streams_is_refused(shapes, monkeypatch):
    monkeypatch.setattr(L, "HAS_STREAM", False)
    with pytest.raises(seedpipe.Error) as ei:
        seedpipe.Loader(shapes)
    assert ei.value.code_name == "EUNSUPP" and "no batch streams" in str(ei.value)
    with pytest.raises(seedpipe.Error, match="no batch streams"):
        seedpipe.attach(".sp-py-no-such-region")


def test_client_is_a_service_stream(binary, shapes, region_name):
    ref = seedpipe.digest(shapes, pipeline="shapes-train", seed=11, epochs=2, batch_size=8)
    p = serve(binary, shapes, region_name, "--workers", 2)
    try:
        with seedpipe.attach(region_name) as cl:
            i = sinfo(cl)
            assert i.kind == L.STREAM_KINDS["service"] and i.held == 0
            assert i.max_held == cl.info.ring_slots and i.fingerprint.hex() == cl.fingerprint
            assert L.sp_stream_loader(cl._res.stream) is None       # attached without a config
            got = []
            for _ in cl:
                got.append(cl.batch_digest())
                assert sinfo(cl).held == 1
            st = L.sp_loader_state()
            L.sp_client_state(L.sp_stream_client(cl._res.stream), byref(st))
            assert cl.state_dict() == _state.state_to_dict(st) and cl.epoch == 1
            got += [cl.batch_digest() for _ in cl.stream()]
            assert sinfo(cl).taken == 2 * len(cl) and list(cl) == []
        assert got == ref.digests
        assert finish(p)[0] == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
