"""seedpipe.attach(): a client of a `seedpipe serve` started by the test."""
import subprocess

import numpy as np
import pytest

import seedpipe
from conftest import array_digest, our_regions
import served

COMMON = ["--pipeline", "shapes-train", "--seed", "11", "--epochs", "2", "--batch-size", "8"]


def serve(binary, shapes, name, *extra):
    return served.start([binary, "serve", "--name", name, shapes, *COMMON, *extra])


def finish(p):
    return served.stop(p, timeout=20)


def test_attach_same_bytes_as_digest(binary, shapes, region_name):
    ref = seedpipe.digest(shapes, pipeline="shapes-train", seed=11, epochs=2, batch_size=8)
    p = serve(binary, shapes, region_name, "--workers", 2)
    try:
        with seedpipe.attach(region_name) as cl:
            assert cl.world == 1 and len(cl) == 8 and cl.service_pid == p.pid
            assert cl.fingerprint == ref.header["fingerprint"]
            got, per_epoch = [], []
            for e in range(2):
                assert cl.epoch == e
                n = 0
                for x, y in cl:
                    assert x.shape[1:] == (3, 48, 48) and x.dtype == np.uint8
                    assert x.base is not None and not x.flags.owndata   # view on the region
                    info = cl.batch_info
                    got.append((array_digest(x, y, info.indices, (3, 48, 48), 0),
                                cl.batch_digest()))
                    n += 1
                per_epoch.append(n)
            assert list(cl) == []                         # the stream is over
        assert per_epoch == [8, 8]
        assert [g[0] for g in got] == ref.digests and [g[1] for g in got] == ref.digests
        rc, out, err = finish(p)
        assert rc == 0, (out, err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert not our_regions()


def test_attach_two_ranks(binary, shapes, region_name):
    refs = [seedpipe.digest(shapes, pipeline="shapes-train", seed=11, epochs=2, batch_size=8,
                            rank=r, world=2).digests for r in (0, 1)]
    p = serve(binary, shapes, region_name, "--workers", 2, "--world", 2)
    try:
        got = served.two_rank_digests(region_name)
        assert got[0] == refs[0] and got[1] == refs[1]
        assert finish(p)[0] == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_client_state_resumes_in_loader(binary, shapes, region_name):
    ref = seedpipe.digest(shapes, pipeline="shapes-train", seed=11, epochs=2, batch_size=8)
    p = serve(binary, shapes, region_name, "--workers", 1)
    try:
        cl = seedpipe.attach(region_name, copy=True)
        got = []
        for x, y in cl.stream():
            assert x.flags.owndata
            got.append(cl.batch_digest())
            if len(got) == 5:
                break
        state = cl.state_dict()
        with pytest.raises(ValueError):
            cl.set_epoch(1)
        del cl                                  # detaches; the service serves on and ends
        assert finish(p)[0] == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    with seedpipe.Loader(shapes, pipeline="shapes-train", seed=11, epochs=2, batch_size=8,
                         workers=2) as ld:
        ld.load_state_dict(state)
        got += [ld.batch_digest() for _ in ld.stream()]
    assert got == ref.digests


def test_attach_bfloat16(binary, shapes, region_name):
    """The service carries bfloat16 batches: the client's digests are the
    in-process loader's, and its arrays are the marked uint16 words."""
    spec = "random_resized_crop size=24 | normalize mean=0.5 std=0.25"
    with seedpipe.Loader(shapes, pipeline=spec, seed=2, batch_size=8, epochs=1,
                         dtype="bfloat16") as ld:
        ref = []
        for _ in ld:
            ref.append(ld.batch_digest())
    p = subprocess.Popen([binary, "serve", "--name", region_name, shapes, "--pipeline", spec,
                          "--seed", "2", "--epochs", "1", "--batch-size", "8", "--dtype",
                          "bfloat16", "--workers", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("ready ")
        got = []
        with seedpipe.attach(region_name) as cl:
            for x, _ in cl:
                assert x.dtype.itemsize == 2 and (x.dtype.metadata or {}).get(
                    "seedpipe_dtype") == "bfloat16"
                got.append(cl.batch_digest())
        assert got == ref
        assert finish(p)[0] == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert not our_regions()
