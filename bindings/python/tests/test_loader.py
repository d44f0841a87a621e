"""seedpipe.Loader: same bytes as the C `digest`, zero-copy views, worker-count
invariance, per-epoch iteration, exact resume, no leaks."""
import gc
import json
import os

import numpy as np
import pytest

import seedpipe
from conftest import array_digest, children, stream_digest, wait_no_children

P = "shapes-train"
DT = {"uint8": 0, "float32": 1}


def run_stream(ld):
    """[(digest recomputed from the arrays, digest by C, indices, labels)] of ld.stream()."""
    out = []
    chw = (ld._chw)
    for images, labels in ld.stream():
        info = ld.batch_info
        out.append((array_digest(images, labels, info.indices, chw, DT[ld.dtype.name]),
                    ld.batch_digest(), info.indices.tolist(), labels.tolist()))
    return out


CONFIGS = [
    dict(),
    dict(dtype="float32", layout="nhwc"),
    dict(rank=1, world=2, drop_last=True),
    dict(dtype="float32", layout="nchw", rank=0, world=2),
]


@pytest.mark.parametrize("workers", [0, 1, 2])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
                         or "default")
def test_bytes_equal_c_digest(shapes, workers, cfg):
    ref = seedpipe.digest(shapes, pipeline=P, seed=9, epochs=2, batch_size=8, **cfg)
    with seedpipe.Loader(shapes, pipeline=P, seed=9, epochs=2, batch_size=8, workers=workers,
                         **cfg) as ld:
        got = run_stream(ld)
    assert len(got) == len(ref) == 2 * len(ld)
    assert [g[0] for g in got] == ref.digests          # bytes Python saw, hashed independently
    assert [g[1] for g in got] == ref.digests          # the C digest of the same view
    assert [g[2] for g in got] == [b["indices"] for b in ref]
    assert [g[3] for g in got] == [b["labels"] for b in ref]
    assert stream_digest(ref.digests) == ref.stream


def test_worker_count_invariance(shapes):
    streams = []
    for w in (0, 1, 2):
        with seedpipe.Loader(shapes, pipeline=P, seed=4, epochs=2, batch_size=16, workers=w,
                             copy=True) as ld:
            streams.append([(x, y) for x, y in ld.stream()])
    for other in streams[1:]:
        assert len(other) == len(streams[0])
        for (x0, y0), (x1, y1) in zip(streams[0], other):
            assert np.array_equal(x0, x1) and np.array_equal(y0, y1)


# Every pixel-value op of issue 39 (and hue) with p strictly inside (0, 1),
# so that the draws decide per sample.
PIXEL_OPS = ("random_resized_crop size=24 scale=0.3,1 | invert p=0.3 | posterize bits=3 p=0.4 | "
             "solarize threshold=100 p=0.4 | autocontrast p=0.5 | equalize p=0.5 | "
             "sharpness factor=1.8 p=0.5 | color_jitter brightness=0.3 saturation=0.3 hue=0.2 | "
             "random_apply ops=2 p=0.5 | equalize p=1 | invert p=0.5 | hflip p=0.5")


def test_worker_count_invariance_pixel_ops(shapes):
    """The same batches at 0, 1 and 3 workers with every new pixel op in the
    pipeline, equal to the C digest, and not the same as without them."""
    ref = seedpipe.digest(shapes, pipeline=PIXEL_OPS, seed=6, epochs=2, batch_size=8)
    streams = []
    for w in (0, 1, 3):
        with seedpipe.Loader(shapes, pipeline=PIXEL_OPS, seed=6, epochs=2, batch_size=8,
                             workers=w, copy=True) as ld:
            streams.append([(x, y, ld.batch_digest()) for x, y in ld.stream()])
    for other in streams:
        assert [d for _, _, d in other] == ref.digests
        for (x0, y0, _), (x1, y1, _) in zip(streams[0], other):
            assert np.array_equal(x0, x1) and np.array_equal(y0, y1)
    plain = seedpipe.digest(shapes, pipeline=PIXEL_OPS.split(" | invert")[0], seed=6, epochs=2,
                            batch_size=8)
    assert plain.digests[0] != ref.digests[0]


# The geometric ops of issue 39 with every draw deciding per sample.
GEOM_OPS = ("random_crop size=32 padding=4 pad_mode=reflect | hflip p=0.5 | "
            "random_crop size=30,28 padding=0,1,2,3 pad_mode=edge | "
            "random_crop size=36,30 pad_if_needed=1 fill=3,4,5 | "
            "random_apply ops=1 p=0.5 | gaussian_blur kernel=5,3 sigma=0.1,2 | hflip p=0.5 | "
            "gaussian_blur kernel=3 sigma=0.5,1.5 | random_erasing p=0.7 value=9,8,7")
# ... and random_erasing on normalized float32 output, value=random included
GEOM_OPS_FLOAT = ("random_crop size=28 padding=2 | hflip p=0.5 | rotate degrees=30 | "
                  "rotate degrees=-100,100 interpolation=bilinear fill=9 | "
                  "normalize mean=0.5 std=0.25 | "
                  "random_erasing p=0.5 value=random | random_erasing p=0.5 scale=0.1,0.4 "
                  "value=-1,0,1")


@pytest.mark.parametrize("spec", [GEOM_OPS, GEOM_OPS_FLOAT], ids=["uint8", "float32"])
def test_worker_count_invariance_geom_ops(shapes, spec):
    """The same batches at 0, 1 and 3 workers with the geometric ops, equal
    to the C digest, and not the same as a centre crop."""
    ref = seedpipe.digest(shapes, pipeline=spec, seed=6, epochs=2, batch_size=8)
    for w in (0, 1, 3):
        with seedpipe.Loader(shapes, pipeline=spec, seed=6, epochs=2, batch_size=8,
                             workers=w, copy=True) as ld:
            assert [ld.batch_digest() for _ in ld.stream()] == ref.digests
    plain = seedpipe.digest(shapes, pipeline=spec.split(" | ")[0], seed=6, epochs=2,
                            batch_size=8)
    assert plain.digests[0] != ref.digests[0]


def addr(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("layout,dtype", [("nchw", "uint8"), ("nhwc", "float32")])
def test_views_shape_dtype_layout(shapes, layout, dtype):
    with seedpipe.Loader(shapes, pipeline=P, seed=1, batch_size=8, layout=layout,
                         dtype=dtype) as ld:
        it = iter(ld)
        x1, y1 = next(it)
        assert x1.shape == ((8, 3, 48, 48) if layout == "nchw" else (8, 48, 48, 3))
        assert ld.sample_shape == x1.shape[1:]
        assert x1.dtype == np.dtype(dtype) and y1.dtype == np.int32 and y1.shape == (8,)
        assert x1.flags.c_contiguous
        # a view on the C batch buffer: not owning, based on the C memory, no copy
        assert x1.base is not None and not x1.flags.owndata and not y1.flags.owndata
        assert addr(x1) == ld._last.images and addr(y1) == ld._last.labels   # the C pointers
        first = x1.copy()
        x2, _ = next(it)
        # workers=0: every batch is computed into the same buffer
        assert np.shares_memory(x1, x2) and addr(x1) == addr(x2)
        assert not np.array_equal(first, x2)
        if dtype == "float32":
            assert 0.0 <= float(x2.min()) and float(x2.max()) <= 1.0


def test_pool_views_are_ring_slots(shapes):
    ring = 3
    with seedpipe.Loader(shapes, pipeline=P, seed=1, batch_size=4, workers=2, ring=ring) as ld:
        xs = []
        for x, y in ld:
            assert x.base is not None and not x.flags.owndata
            xs.append(x)
            if len(xs) == 2 * ring:
                break
        addrs = [addr(x) for x in xs]
        assert len(set(addrs)) == ring                  # R slots, reused in turn
        assert np.shares_memory(xs[0], xs[ring]) and addrs[0] == addrs[ring]
        assert not np.shares_memory(xs[0], xs[1])


def test_copy_true_owns(shapes):
    with seedpipe.Loader(shapes, pipeline=P, seed=1, batch_size=8, copy=True) as ld:
        it = iter(ld)
        x1, y1 = next(it)
        keep = x1.copy()
        x2, _ = next(it)
        assert x1.flags.owndata and y1.flags.owndata and not np.shares_memory(x1, x2)
        assert np.array_equal(x1, keep)


def test_len_and_per_epoch_iteration(shapes):
    ref = seedpipe.digest(shapes, pipeline=P, seed=2, epochs=3, batch_size=16)
    with seedpipe.Loader(shapes, pipeline=P, seed=2, epochs=3, batch_size=16, workers=2) as ld:
        assert len(ld) == 4                              # ceil(60 / 16)
        seen = []
        for e in range(3):
            assert ld.epoch == e
            n = 0
            for x, y in ld:
                seen.append(ld.batch_digest())
                assert ld.batch_info.epoch == e and ld.batch_info.index == n
                n += 1
            assert n == len(ld)
        assert [b for b in ld] == []                      # past `epochs`: nothing
        assert seen == ref.digests


def test_set_epoch(shapes):
    ref = seedpipe.digest(shapes, pipeline=P, seed=2, epochs=3, batch_size=16)
    for w in (0, 2):
        with seedpipe.Loader(shapes, pipeline=P, seed=2, batch_size=16, workers=w) as ld:
            ld.set_epoch(2)
            got = [ld.batch_digest() for _ in ld]
            ld.set_epoch(1)
            got1 = [ld.batch_digest() for _ in ld]
        assert got == ref.digests[8:12] and got1 == ref.digests[4:8]


@pytest.mark.parametrize("w_before,w_after,stop", [(0, 2, 3), (2, 1, 5), (2, 0, 4), (1, 2, 7)])
def test_exact_resume(shapes, w_before, w_after, stop):
    ref = seedpipe.digest(shapes, pipeline=P, seed=8, epochs=2, batch_size=8)
    with seedpipe.Loader(shapes, pipeline=P, seed=8, epochs=2, batch_size=8,
                         workers=w_before) as ld:
        got = []
        for x, y in ld.stream():
            got.append(ld.batch_digest())
            if len(got) == stop:
                break
        state = json.loads(json.dumps(ld.state_dict()))    # survives a JSON round trip
    assert ld.closed
    assert (state["epoch"], state["batch"]) == divmod(stop, 8)
    with seedpipe.Loader(shapes, pipeline=P, seed=8, epochs=2, batch_size=8,
                         workers=w_after) as ld2:
        ld2.load_state_dict(state)
        got += [ld2.batch_digest() for _ in ld2.stream()]
    assert got == ref.digests
    # the C tool resumes from the Python state to the same rest of the stream
    rest = seedpipe.digest(shapes, pipeline=P, seed=8, epochs=2, batch_size=8, resume=state)
    assert rest.digests == ref.digests[stop:]


def test_state_mismatch_is_refused_with_c_message(shapes):
    with seedpipe.Loader(shapes, pipeline=P, seed=3, batch_size=8) as a, \
            seedpipe.Loader(shapes, pipeline=P, seed=4, batch_size=8, dtype="float32") as b:
        with pytest.raises(seedpipe.Error) as ei:
            b.load_state_dict(a.state_dict())
    msg = str(ei.value)
    assert ei.value.code_name == "EMISMATCH"
    assert "state is for another stream" in msg and "seed 3 in the state, 4 here" in msg
    assert "float32" in msg
    with seedpipe.Loader(shapes, pipeline=P, seed=3, batch_size=8) as a:
        with pytest.raises(seedpipe.Error, match="fingerprint|seedpipe_state|state"):
            a.load_state_dict('{"seedpipe_state":1}')


def test_no_leak_on_del_and_exception(shapes):
    base = set(children())
    ld = seedpipe.Loader(shapes, pipeline=P, seed=1, batch_size=4, workers=2)
    next(iter(ld))
    pids = ld.worker_pids()
    assert len(pids) == 2 and set(pids) <= set(children())
    del ld
    gc.collect()
    assert not (set(wait_no_children()) - base)

    def train():
        with seedpipe.Loader(shapes, pipeline=P, seed=1, batch_size=4, workers=2) as ld:
            for i, (x, y) in enumerate(ld):
                if i == 2:
                    raise KeyError("boom")

    with pytest.raises(KeyError):
        train()
    assert not (set(wait_no_children()) - base)

    def train_no_with():
        ld = seedpipe.Loader(shapes, pipeline=P, seed=1, batch_size=4, workers=2)
        for i, (x, y) in enumerate(ld):
            if i == 1:
                raise ValueError("mid-iteration")

    with pytest.raises(ValueError):
        train_no_with()
    gc.collect()
    assert not (set(wait_no_children()) - base)


def test_close_is_idempotent_and_final(shapes):
    ld = seedpipe.Loader(shapes, pipeline=P, seed=1, batch_size=4, workers=1)
    next(iter(ld))
    ld.close()
    ld.close()
    assert ld.closed
    with pytest.raises(ValueError, match="closed"):
        iter(ld)
    with pytest.raises(ValueError, match="closed"):
        ld.state_dict()


def test_on_error_skip_and_failure_log(shapes, tmp_path):
    import shutil
    ds = tmp_path / "ds"
    shutil.copytree(shapes, ds)
    first_class = sorted(d for d in os.listdir(ds) if not d.startswith("."))[0]   # not the index
    victim = sorted((ds / first_class).iterdir())[0]
    victim.write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    ref = seedpipe.digest(ds, pipeline=P, seed=1, batch_size=8, on_error="skip", epochs=1)
    for w in (0, 2):
        with seedpipe.Loader(ds, pipeline=P, seed=1, batch_size=8, on_error="skip",
                             workers=w, epochs=1) as ld:
            got = [(ld.batch_digest(), ld.batch_info.skipped) for _ in ld]
            fails = ld.failures()
        assert [g[0] for g in got] == ref.digests
        assert [g[1] for g in got] == [b.get("skipped", []) for b in ref]
        assert len(fails) == 1 and victim.name in fails[0][1]
    with seedpipe.Loader(ds, pipeline=P, seed=1, batch_size=8) as ld:
        with pytest.raises(seedpipe.Error, match=victim.name):
            for _ in ld:
                pass


@pytest.mark.skipif(not seedpipe._lib.HAS_SPLIT, reason="library without dataset splits")
def test_split_subsets_partition_the_dataset(shapes):
    seen = []
    for sub in ("a", "b"):
        with seedpipe.Loader(shapes, pipeline=P, seed=1, batch_size=8, split="a=0.5,b=0.5",
                             subset=sub, workers=1) as ld:
            seen.append({i for _ in ld for i in ld.batch_info.indices.tolist()})
    assert not (seen[0] & seen[1]) and seen[0] | seen[1] == set(range(60))
    with pytest.raises(ValueError, match="split and subset"):
        seedpipe.Loader(shapes, split="a=1")


def test_dtype_follows_the_pipeline(shapes):
    """dtype left out: float32 when the pipeline normalizes (as the CLI's
    --dtype), uint8 when it does not; an explicit uint8 with normalize is
    still refused (issue 39 item 8)."""
    with seedpipe.Loader(shapes, pipeline="imagenet-eval", seed=1, batch_size=8,
                         epochs=1) as ld:
        x, _ = next(iter(ld))
        assert ld.dtype == np.float32 and x.dtype == np.float32
    with seedpipe.Loader(shapes, pipeline=P, seed=1, batch_size=8, epochs=1) as ld:
        assert ld.dtype == np.uint8
    auto = seedpipe.digest(shapes, pipeline="imagenet-eval", seed=1, batch_size=8)
    f32 = seedpipe.digest(shapes, pipeline="imagenet-eval", seed=1, batch_size=8,
                          dtype="float32")
    assert auto.stream == f32.stream
    with pytest.raises(seedpipe.Error, match="normalizes"):
        seedpipe.Loader(shapes, pipeline="imagenet-eval", dtype="uint8")
