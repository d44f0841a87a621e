"""seedpipe.Mixture: a weighted mixture of an ImageFolder and WebDataset
shards as a Loader / torch DataLoader dataset: the same batches at any
worker count and after a resume at another, sources named per sample,
labels offset per source, another mixture's state refused."""
import os
import subprocess

import pytest

import seedpipe


@pytest.fixture(scope="module")
def sources(tmp_path_factory, binary, shapes):
    d = tmp_path_factory.mktemp("sp-mix")
    other = str(d / "other")
    subprocess.run([binary, "make-shapes", other, "--count", "40", "--size", "32", "--seed",
                    "9"], check=True, capture_output=True)
    shards = str(d / "shards")
    subprocess.run([binary, "shard", other, shards, "--max-count", "15"], check=True,
                   capture_output=True)
    return shapes, shards


def run(mix, workers, take=None, state=None, **kw):
    out = []
    with seedpipe.Loader(mix, seed=3, batch_size=8, workers=workers, epochs=2, **kw) as ld:
        if state is not None:
            ld.load_state_dict(state)
        for images, labels in ld.stream():
            info = ld.batch_info
            out.append((ld.batch_digest(), labels.tolist(), info.indices.tolist(),
                        info.sources))
            if take is not None and len(out) == take:
                return out, ld.state_dict()
    return out, None


def test_mixture_streams_alike(sources):
    folder, shards = sources
    mix = seedpipe.Mixture([(folder, 0.7), (shards, "0.3")])
    assert len(mix) == 100 and mix.sizes == [60, 40] and mix.class_offsets == [0, 6]
    ref, _ = run(mix, 0)
    assert len(ref) == 26
    for w in (1, 3):
        assert run(mix, w)[0] == ref, w
    head, st = run(mix, 1, take=9)
    assert head == ref[:9]
    assert run(mix, 3, state=st)[0] == ref[9:]
    n = [0, 0]
    for _, labels, indices, srcs in ref:
        for label, i, (s, j) in zip(labels, indices, srcs):
            assert (s, j) == ((0, i) if i < 60 else (1, i - 60))
            assert (label >= 6) == (s == 1)
            n[s] += 1
    assert n == [140, 60]   # 70 and 30 draws an epoch: the weights exactly
    # the digests are the CLI's
    p = subprocess.run([seedpipe.find_binary(), "digest", mix.path, "--seed", "3",
                        "--batch-size", "8", "--epochs", "2", "--out", "-"], check=True,
                       capture_output=True, text=True)
    cli = [line.split('"digest":"')[1][:32] for line in p.stdout.splitlines()
           if '"batch"' in line]
    assert cli == [r[0] for r in ref]
    with seedpipe.Loader(mix, seed=3, batch_size=8) as ld:
        text = ld.explain(0, 5)   # a slot of the epoch
        assert "random_resized_crop" in text


def test_another_mixture_is_refused(sources):
    folder, shards = sources
    a = seedpipe.Mixture([(folder, 0.7), (shards, 0.3)])
    b = seedpipe.Mixture([(folder, 0.6), (shards, 0.4)])
    c = seedpipe.Mixture([(folder, 0.7), (shards, 0.3)], length=50)
    _, st = run(a, 0, take=2)
    fps = set()
    for m in (a, b, c):
        with seedpipe.Loader(m, seed=3, batch_size=8) as ld:
            fps.add(ld.fingerprint)
    assert len(fps) == 3
    for m in (b, c):
        with pytest.raises(seedpipe.Error, match="fingerprint"):
            run(m, 0, state=st)


def test_mixture_arguments(sources, tmp_path):
    folder, shards = sources
    for bad, what in (([], "no source"), ([(folder, 0)], "positive"),
                      ([(folder, -1.5)], "positive"), ([(folder, "x")], "not a number"),
                      ([(folder,)], "pair"), ([(folder, float("inf"))], "finite")):
        with pytest.raises(ValueError, match=what):
            seedpipe.Mixture(bad)
    m = seedpipe.Mixture([(folder, 1)])
    with pytest.raises(ValueError, match="cannot be a source"):
        seedpipe.Mixture([(m, 1)])
    with pytest.raises(ValueError, match="length"):
        seedpipe.Mixture([(folder, 1)], length=0)
    p = tmp_path / "mine.mix"
    m = seedpipe.Mixture([(folder, 1e-05), (shards, 2)], path=p)
    assert m.weights == ["0.00001", "2"] and os.path.exists(p)
    assert "0.00001\t" in p.read_text()
    missing = seedpipe.Mixture([(str(tmp_path / "nothing"), 1)])
    with pytest.raises(seedpipe.Error, match=r"mixture\.mix:2: .*nothing"):
        seedpipe.Loader(missing)
    path = m.path
    del m   # a path= file is the caller's: kept
    assert os.path.exists(path)
    t = seedpipe.Mixture([(folder, 1)])
    tmp = t.path
    del t
    assert not os.path.exists(tmp)


def test_numpy_weights(sources):
    """numpy scalars are weights: a float as the shortest decimal of its own
    type (np.float32(0.7) is "0.7", not 0.699999988079071), an integer as
    its digits; the mixture is then the one written with those texts.
    Weights with trailing zeros past 18 digits open (the .mix rule)."""
    np = pytest.importorskip("numpy")
    folder, shards = sources
    m = seedpipe.Mixture([(folder, np.float32(0.7)), (shards, np.float32(0.3))])
    assert m.weights == ["0.7", "0.3"]
    same = seedpipe.Mixture([(folder, "0.7"), (shards, 0.3)])
    assert len(m) == len(same) and m.sizes == same.sizes
    assert run(m, 0, take=3) == run(same, 0, take=3)
    assert seedpipe.Mixture([(folder, np.int64(3)), (shards, np.uint8(1))]).weights == ["3", "1"]
    assert seedpipe.Mixture([(folder, np.float16(0.1)), (shards, np.float64(0.1))]).weights == \
        ["0.1", "0.1"]
    assert seedpipe.Mixture([(folder, np.float32(3e10))]).weights == ["30000000000"]
    for bad, what in ((np.bool_(True), "must be a number"), (np.float32("nan"), "finite"),
                      (np.float32(0), "positive"), (np.int32(-2), "positive"),
                      (np.float64("inf"), "finite")):
        with pytest.raises(ValueError, match=what):
            seedpipe.Mixture([(folder, bad)])
    edge = seedpipe.Mixture([(folder, "0.1000000000000000000"), (shards, "2.50000000000000000000")])
    assert len(edge) == sum(edge.sizes)
    with pytest.raises(seedpipe.Error, match="weight"):
        len(seedpipe.Mixture([(folder, "0.1000000000000000001")]))


def test_torch_dataloader(sources):
    torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
    from seedpipe.torch import DataLoader
    folder, shards = sources
    mix = seedpipe.Mixture([(folder, 0.5), (shards, 0.5)], length=64)
    dl = DataLoader(mix, batch_size=8, shuffle=True, seed=2, transform="random_resized_crop size=24 | hflip p=0.5")
    assert len(dl) == 8
    got = [(x.clone(), y.clone()) for x, y in dl]
    assert all(x.shape == (8, 3, 24, 24) for x, _ in got)
    ys = torch.cat([y for _, y in got])
    assert int((ys >= 6).sum()) == 32   # 0.5 of 64 draws from the shards
    dl.set_epoch(0)
    for (x0, y0), (x1, y1) in zip(got, dl):
        assert torch.equal(x0, x1) and torch.equal(y0, y1)
