"""The C path's samplers (loader.h "Samplers", docs/determinism.md section 13):
weighted and uniform draws with replacement, num_samples rounds, index
lists and repeated augmentation, each position's index against the
reference (tests/sampler_ref.py) bit for bit; WeightedRandomSampler's class
frequencies; the same batches at 0 and 3 workers and after a resume at
another worker count; refusals by name; the drop-in's mapping of torch's
samplers (skipped visibly without torch)."""
import os
import sys

import numpy as np
import pytest

import seedpipe

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))
import sampler_ref as R  # noqa: E402
from test_mix import make_idx, write_mix  # noqa: E402

P = "shapes-train"


@pytest.fixture(scope="module")
def ten(tmp_path_factory):
    """10 one-pixel samples, sample i of class i."""
    return make_idx(str(tmp_path_factory.mktemp("sp-samp")), "ten", 10)


@pytest.fixture(scope="module")
def idx200(tmp_path_factory):
    return make_idx(str(tmp_path_factory.mktemp("sp-samp200")), "two", 200)


def epochs_indices(data, epochs, pipeline="hflip p=0", **kw):
    out = {}
    with seedpipe.Loader(data, pipeline=pipeline, epochs=epochs, **kw) as ld:
        for _ in ld.stream():
            info = ld.batch_info
            out.setdefault(info.epoch, []).extend(int(i) for i in info.indices)
    return [out[e] for e in range(epochs)]


# ---- the reference, bit for bit ------------------------------------------------------

def test_weighted_indices_are_the_reference(idx200):
    rng = np.random.default_rng(4)
    cases = [rng.random(200).tolist(),
             [0.0] * 150 + [3.0] * 50,                            # zero weights: never drawn
             [1e300 if i % 7 == 0 else 1e-300 for i in range(200)],   # extreme scales
             [float(i % 13) * 2.0 ** -1070 for i in range(200)]]    # subnormal weights
    for k, w in enumerate(cases):
        got = epochs_indices(idx200, 2, seed=k, batch_size=16, weights=w, replacement=True,
                             num_samples=300)
        for e in (0, 1):
            assert got[e] == [i for i, _ in R.weighted(w, k, e, 300)], (k, e)
    assert set(got[0]) <= {i for i in range(200) if i % 13}


def test_weighted_without_replacement_is_the_reference(idx200):
    w = np.random.default_rng(8).random(200).tolist()
    w[3] = w[150] = 0.0
    for m in (1, 77, 198):
        got = epochs_indices(idx200, 2, seed=m, batch_size=16, weights=w, num_samples=m)
        for e in (0, 1):
            assert got[e] == [i for i, _ in R.weighted_without(w, m, e, m)], (m, e)
            assert len(set(got[e])) == m and 3 not in got[e] and 150 not in got[e]
    assert got[0] != got[1]
    # the first draw is the draw with replacement's (the same r, the same weights)
    once = epochs_indices(idx200, 1, seed=5, batch_size=16, weights=w, num_samples=1)[0]
    assert once == epochs_indices(idx200, 1, seed=5, batch_size=16, weights=w,
                                  replacement=True, num_samples=1)[0]


def test_uniform_rounds_and_repeat_are_the_reference(idx200):
    got = epochs_indices(idx200, 2, seed=3, batch_size=16, replacement=True, num_samples=250)
    assert got[1] == [i for i, _ in R.uniform(200, 3, 1, 250)]
    got = epochs_indices(idx200, 2, seed=3, batch_size=16, num_samples=450)
    assert got[1] == [i for i, _ in R.rounds(200, 3, 1, 450)]
    assert sorted(got[1][:200]) == list(range(200)) == sorted(got[1][200:400])
    assert got[1][:200] != got[1][200:400]                   # round 1: another order
    got = epochs_indices(idx200, 2, seed=3, batch_size=16, num_samples=50)
    assert got[0] == [i for i, _ in R.rounds(200, 3, 0, 50)]
    assert got[0] == epochs_indices(idx200, 1, seed=3, batch_size=16)[0][:50]
    got = epochs_indices(idx200, 2, seed=3, batch_size=18, repeat=3)
    assert got[1] == [i for i, _ in R.repeated(200, 3, 3, 1)]
    assert all(got[1].count(i) == 3 for i in range(200))


def test_weighted_class_frequencies(ten):
    """Weights 1..10 over 10 classes: 20 epochs of 50,000 draws, each class's
    share within 3% of its weight's."""
    w = list(range(1, 11))
    counts = np.zeros(10, np.int64)
    with seedpipe.Loader(ten, pipeline="hflip p=0", seed=3, batch_size=1000, epochs=20,
                         weights=w, replacement=True, num_samples=50000, threads=2) as ld:
        for _, labels in ld.stream():
            counts += np.bincount(labels.astype(np.int64), minlength=10)
    assert counts.sum() == 20 * 50000
    share = counts / counts.sum()
    want = np.array(w) / sum(w)
    assert np.all(np.abs(share - want) <= 0.03 * want), share / want


# ---- the same batches at any worker count, and resumed -------------------------------

def digests(data, workers, state=None, stop=None, **kw):
    with seedpipe.Loader(data, pipeline=P, seed=6, batch_size=8, epochs=2, workers=workers,
                         **kw) as ld:
        if state is not None:
            ld.load_state_dict(state)
        out = []
        for _ in ld.stream():
            out.append(ld.batch_digest())
            if stop is not None and len(out) == stop:
                return out, ld.state_dict()
    return out, None


@pytest.mark.parametrize("kw", [
    dict(weights=[float(i % 5) + 0.5 for i in range(60)], replacement=True, num_samples=44),
    dict(replacement=True, num_samples=30),
    dict(weights=[float(i % 5) for i in range(60)], num_samples=40),   # without replacement
    dict(indices=[3, 50, 7, 12, 41, 0, 33, 28, 9, 19, 58]),
    dict(repeat=3),
    dict(num_samples=70)])
def test_workers_and_resume(shapes, kw):
    ref, _ = digests(shapes, 0, **kw)
    assert ref != digests(shapes, 0)[0]
    assert digests(shapes, 3, **kw)[0] == ref
    head, state = digests(shapes, 3, stop=len(ref) // 2 + 1, **kw)   # mid-epoch 1 or 0
    tail, _ = digests(shapes, 0, state=state, **kw)
    assert head + tail == ref
    with pytest.raises(seedpipe.Error) as ei:   # the sampler is part of the stream's identity
        digests(shapes, 0, state=state)
    assert "another stream" in str(ei.value)


def test_resume_refuses_other_weights(shapes):
    w = [1.0] * 60
    _, state = digests(shapes, 0, stop=2, weights=w, replacement=True)
    w[5] = 2.0
    with pytest.raises(seedpipe.Error, match="fingerprint"):
        digests(shapes, 0, state=state, weights=w, replacement=True)


# ---- subsets and repeated augmentation -----------------------------------------------

def test_subset_is_exactly_the_subset_each_epoch(idx200):
    sub = [int(i) for i in np.random.default_rng(1).permutation(200)[:37]]
    got = epochs_indices(idx200, 4, seed=2, batch_size=8, indices=sub)
    for e in range(4):
        assert sorted(got[e]) == sorted(sub), e
        assert got[e] == [i for i, _ in R.rounds(37, 2, e, 37, dsize=200, indices=sub)]
    assert len({tuple(g) for g in got}) == 4                  # a new order each epoch
    seq = epochs_indices(idx200, 2, seed=2, batch_size=8, indices=sub, order="sequential")
    assert seq == [sub, sub]


def test_repeat_copies_are_augmented_apart(shapes):
    r = 3
    plain = {}
    with seedpipe.Loader(shapes, pipeline=P, seed=4, batch_size=12) as ld:
        for x, _ in ld:
            for i, img in zip(ld.batch_info.indices.tolist(), x):
                plain[i] = img.tobytes()
    copies = {}
    with seedpipe.Loader(shapes, pipeline=P, seed=4, batch_size=12, repeat=r) as ld:
        for x, _ in ld:
            for i, img in zip(ld.batch_info.indices.tolist(), x):
                copies.setdefault(i, []).append(img.tobytes())
    assert sorted(copies) == list(range(60))
    assert all(len(c) == r for c in copies.values())
    assert all(c[0] == plain[i] for i, c in copies.items())   # copy 0: the sample's own address
    distinct = sum(len(set(c)) == r for c in copies.values())
    assert distinct >= 54, distinct                            # copies 1, 2: their own draws


def test_repeat_copies_land_on_different_ranks(shapes):
    r, world = 3, 3
    ranks = []
    for rank in range(world):
        with seedpipe.Loader(shapes, pipeline=P, seed=4, batch_size=12, repeat=r, rank=rank,
                             world=world) as ld:
            got = []
            for _ in ld:
                got.extend(ld.batch_info.indices.tolist())
            ranks.append(got)
    for rank in range(world):
        assert sorted(ranks[rank]) == list(range(60)), rank   # each sample once per rank
    order = [i for i, _ in R.repeated(60, r, 4, 0)]
    assert ranks[1] == order[1::3]


# ---- refusals ------------------------------------------------------------------------

@pytest.mark.parametrize("kw,why", [
    (dict(weights=[1.0] * 9 + [0.0]), "only 9 samples have a weight above 0"),
    (dict(weights=[1.0] * 9, replacement=True), "9 weights for 10 samples"),
    (dict(weights=[0.0] * 10, replacement=True), "all 0"),
    (dict(weights=[1.0] * 9 + [float("nan")], replacement=True), r"weights\[9\]"),
    (dict(weights=[1.0] * 9 + [-1.0], replacement=True), "finite and >= 0"),
    (dict(indices=[1, 2, 1]), "listed twice"),
    (dict(indices=[1, 10]), "past the dataset"),
    (dict(repeat=2, replacement=True), "repeat=2 with replacement"),
    (dict(num_samples=5, order="block:1"), "block order")])
def test_refused_by_name(ten, kw, why):
    with pytest.raises(seedpipe.Error, match=why):
        seedpipe.Loader(ten, pipeline="hflip p=0", batch_size=2, **kw)


def test_mixture_refused(ten, tmp_path):
    mix = write_mix(str(tmp_path / "m.mix"), [(1, ten), (2, ten)])
    for kw in (dict(num_samples=5), dict(repeat=2), dict(replacement=True)):
        with pytest.raises(seedpipe.Error, match="cannot be combined with a mixture"):
            seedpipe.Loader(mix, pipeline="hflip p=0", batch_size=2, **kw)


# ---- the drop-in: torch's samplers -----------------------------------------------------

def torch_parts():
    torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
    tv = pytest.importorskip("torchvision", reason="torchvision not installed")
    from seedpipe.torch import DataLoader, RASampler
    return torch, tv, DataLoader, RASampler


def dropin_indices(dl):
    out = []
    for _ in dl:
        out.extend(dl.batch_info.indices.tolist())
    return out


def test_dropin_maps_torch_samplers(shapes):
    torch, tv, DataLoader, _ = torch_parts()
    from torch.utils.data import RandomSampler, SubsetRandomSampler, WeightedRandomSampler
    T = tv.transforms
    ds = tv.datasets.ImageFolder(shapes, transform=T.Compose([T.CenterCrop(24), T.ToTensor()]))
    w = torch.tensor([float(i % 4 + 1) for i in range(60)], dtype=torch.double)
    dl = DataLoader(ds, batch_size=8, sampler=WeightedRandomSampler(w, 50), seed=9)
    assert dropin_indices(dl) == [i for i, _ in R.weighted(w.tolist(), 9, 0, 50)]
    assert dropin_indices(dl) == [i for i, _ in R.weighted(w.tolist(), 9, 1, 50)]
    dl = DataLoader(ds, batch_size=8, sampler=WeightedRandomSampler(w[:20], 30), seed=9)
    assert set(dropin_indices(dl)) <= set(range(20))        # torch draws from len(weights)
    sub = [4, 8, 15, 16, 23, 42]
    dl = DataLoader(ds, batch_size=4, sampler=SubsetRandomSampler(sub), seed=1)
    assert sorted(dropin_indices(dl)) == sub
    dl = DataLoader(ds, batch_size=4, sampler=sub, seed=1)   # a list: in its order
    assert dropin_indices(dl) == sub
    dl = DataLoader(ds, batch_size=8, sampler=RandomSampler(ds, replacement=True,
                                                            num_samples=33), seed=2)
    assert dropin_indices(dl) == [i for i, _ in R.uniform(60, 2, 0, 33)]
    dl = DataLoader(ds, batch_size=8, sampler=RandomSampler(ds, num_samples=75), seed=2)
    got = dropin_indices(dl)
    assert got == [i for i, _ in R.rounds(60, 2, 0, 75)] and len(dl) == 10
    dl = DataLoader(ds, batch_size=8, sampler=WeightedRandomSampler(w, 30, replacement=False),
                    seed=9)
    got = dropin_indices(dl)
    assert got == [i for i, _ in R.weighted_without(w.tolist(), 9, 0, 30)]
    assert len(set(got)) == 30
    with pytest.raises(ValueError, match=r"WeightedRandomSampler\(replacement=False\): "
                                         r"num_samples=61"):
        DataLoader(ds, batch_size=8, sampler=WeightedRandomSampler(w, 61, replacement=False),
                   backend="c")
    with pytest.raises(ValueError, match="listed twice"):
        DataLoader(ds, batch_size=8, sampler=[1, 2, 2], backend="c")
    # the automatic choice gives what the C path refuses to the Python backend
    assert DataLoader(ds, batch_size=8, sampler=[1, 2, 2]).backend == "python"
    assert DataLoader(ds, batch_size=8, sampler=sub).backend == "c"


def test_dropin_rasampler(tmp_path, binary):
    import subprocess
    torch, tv, DataLoader, RASampler = torch_parts()
    d = str(tmp_path / "shapes512")
    subprocess.run([binary, "make-shapes", d, "--count", "512", "--size", "16", "--seed", "3"],
                   check=True, capture_output=True)
    T = tv.transforms
    ds = tv.datasets.ImageFolder(d, transform=T.Compose([T.RandomCrop(12), T.ToTensor()]))
    ranks = []
    for rank in range(2):
        s = RASampler(ds, num_replicas=2, rank=rank, repetitions=3, seed=5)
        dl = DataLoader(ds, batch_size=16, sampler=s)
        assert len(list(s)) == s.num_selected_samples == 256   # torch's own iteration
        got = dropin_indices(dl)
        assert len(got) == 256 and len(dl) == 16
        ranks.append(got)
    order = [i for i, _ in R.repeated(512, 3, 5, 0, count=512)]
    assert ranks[0] == order[0::2] and ranks[1] == order[1::2]
    # the three copies of a sample: consecutive positions, so on both ranks
    assert set(ranks[0][:100]) & set(ranks[1][:100])


def test_cli_flags_give_the_loaders_batches(shapes, binary, tmp_path):
    import json
    import subprocess
    wf, xf = tmp_path / "w.txt", tmp_path / "i.txt"
    w = [float(i % 7) + 0.25 for i in range(60)]
    wf.write_text("\n".join(repr(v) for v in w) + "\n")
    ind = [9, 4, 33, 2, 58, 17]
    xf.write_text(" ".join(map(str, ind)))
    cases = [(["--weights", str(wf), "--replacement", "--num-samples", "36"],
              dict(weights=w, replacement=True, num_samples=36)),
             (["--indices", str(xf), "--repeat", "2"], dict(indices=ind, repeat=2)),
             (["--num-samples", "75"], dict(num_samples=75)),
             (["--weights", str(wf), "--num-samples", "50"], dict(weights=w, num_samples=50))]
    for flags, kw in cases:
        out = subprocess.run([binary, "digest", shapes, "--out", "-", "--seed", "6",
                              "--batch-size", "8", "--epochs", "2", "--workers", "2"] + flags,
                             check=True, capture_output=True, text=True).stdout
        lines = [json.loads(x) for x in out.splitlines()[1:]]
        assert [x["digest"] for x in lines] == digests(shapes, 0, **kw)[0], flags
        res = seedpipe.digest(shapes, seed=6, batch_size=8, epochs=2, workers=2, **kw)
        assert res.digests == [x["digest"] for x in lines], flags
    xf.write_text("1.0\n-2\n")
    bad = subprocess.run([binary, "digest", shapes, "--out", "-", "--weights", str(xf)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "word 2, \"-2\", is not a finite number >= 0" in bad.stderr
    xf.write_text("3 x 5")
    bad = subprocess.run([binary, "digest", shapes, "--out", "-", "--indices", str(xf)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "word 2, \"x\"" in bad.stderr
    # a FIFO (or any file that is not a regular one) is refused, not waited on
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    bad = subprocess.run([binary, "digest", shapes, "--out", "-", "--weights", str(fifo)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and f"{fifo}: not a regular file" in bad.stderr, bad.stderr


def test_python_backend_draws_the_same_weighted_indices():
    """A Python dataset (the Python backend) with a WeightedRandomSampler draws
    what the C path draws: the same section 13 rule, keyed by seedpipe."""
    torch, _, DataLoader, _ = torch_parts()
    from torch.utils.data import BatchSampler, TensorDataset, WeightedRandomSampler
    ds = TensorDataset(torch.arange(40))
    w = torch.tensor([float((i * 7) % 5) for i in range(40)], dtype=torch.double)
    for workers in (0, 2):
        dl = DataLoader(ds, batch_size=6, sampler=WeightedRandomSampler(w, 45), seed=12,
                        num_workers=workers)
        assert dl.backend == "python"
        for e in (0, 1):
            got = [int(i) for (x,) in dl for i in x]
            assert got == [i for i, _ in R.weighted(w.tolist(), 12, e, 45)], (workers, e)
        dl.close()
    dl = DataLoader(ds, batch_size=6, sampler=WeightedRandomSampler(w, 25, replacement=False),
                    seed=12)
    assert dl.backend == "python"
    assert [int(i) for (x,) in dl for i in x] == \
        [i for i, _ in R.weighted_without(w.tolist(), 12, 0, 25)]
    dl.close()
    bs = BatchSampler(WeightedRandomSampler(w, 10), 4, drop_last=True)
    dl = DataLoader(ds, batch_sampler=bs, seed=12)
    assert [[int(i) for i in x] for (x,) in dl] == \
        [[i for i, _ in R.weighted(w.tolist(), 12, 0, 10)][k:k + 4] for k in (0, 4)]
    dl.close()


def test_python_backend_subset_and_rounds_are_the_c_paths():
    """SubsetRandomSampler and RandomSampler(num_samples=M) on the Python
    backend: the C path's keyed orders (section 13), exactly."""
    torch, _, DataLoader, _ = torch_parts()
    from torch.utils.data import RandomSampler, SubsetRandomSampler, TensorDataset
    ds = TensorDataset(torch.arange(30))
    sub = [7, 3, 29, 11, 0, 18, 21]
    dl = DataLoader(ds, batch_size=3, sampler=SubsetRandomSampler(sub), seed=4)
    assert dl.backend == "python"
    for e in (0, 1):
        got = [int(i) for (x,) in dl for i in x]
        assert got == [i for i, _ in R.rounds(7, 4, e, 7, dsize=30, indices=sub)], e
    state = dl.state_dict()
    dl.close()
    dl = DataLoader(ds, batch_size=3, sampler=SubsetRandomSampler(sub[:-1]), seed=4)
    with pytest.raises(Exception, match="order|state"):
        dl.load_state_dict(state)                         # another subset: another stream
    dl.close()
    dl = DataLoader(ds, batch_size=4, sampler=RandomSampler(ds, num_samples=70), seed=4)
    got = [int(i) for (x,) in dl for i in x]
    assert got == [i for i, _ in R.rounds(30, 4, 0, 70)]
    dl.close()


def test_dropin_weighted_workers_and_resume(shapes):
    """WeightedRandomSampler through the drop-in: the same batches at 0 and 3
    workers, and a resume mid-epoch at another worker count continues them."""
    torch, tv, DataLoader, _ = torch_parts()
    from torch.utils.data import WeightedRandomSampler
    T = tv.transforms
    ds = tv.datasets.ImageFolder(shapes, transform=T.Compose([
        T.RandomResizedCrop(20), T.RandomHorizontalFlip(), T.ToTensor()]))
    w = torch.tensor([float(1 + i % 10) for i in range(60)], dtype=torch.double)

    def loader(workers):
        return DataLoader(ds, batch_size=6, sampler=WeightedRandomSampler(w, 45), seed=17,
                          num_workers=workers)

    def take(dl, k=None):
        out = []
        for x, y in dl:
            out.append((x.clone(), y.clone()))
            if k is not None and len(out) == k:
                break
        return out

    ref = loader(0)
    want = take(ref) + take(ref)                     # epochs 0 and 1
    ref.close()
    dl = loader(3)
    got = take(dl)
    head = take(dl, 3)                               # epoch 1, 3 of its 8 batches
    state = dl.state_dict()
    dl.close()
    assert len(got) == 8 and all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
                                 for a, b in zip(got, want[:8]))
    dl = loader(0)
    dl.load_state_dict(state)
    tail = take(dl)
    dl.close()
    rest = head + tail
    assert len(rest) == 8 and all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
                                  for a, b in zip(rest, want[8:]))
