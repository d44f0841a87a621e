"""The Python backend (issue 37, DESIGN.md section 13): a user's own
map-style Dataset through seedpipe.torch.DataLoader gives the same batches,
every leaf byte for byte, at any num_workers, after a resume at another
worker count, and after its workers are SIGKILLed; torch's own DataLoader
with the full seeding recipe does not. Skips visibly without torch."""
import os
import pickle
import random
import signal
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the Python backend's tests need PyTorch "
                            "(Debian: python3-torch)")
from seedpipe.torch import DataLoader, sample_generator, sample_seed, verify  # noqa: E402
from seedpipe._pyverify import _first_diff, _leaves  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """12 small JPEG photos-to-be (random smooth colour fields), by PIL."""
    Image = pytest.importorskip("PIL.Image", reason="PIL (python3-pil) makes the JPEGs")
    d = tmp_path_factory.mktemp("jpegs")
    rng = np.random.default_rng(5)
    paths = []
    for k in range(12):
        small = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((64 + 4 * k, 48 + 2 * k), Image.BILINEAR)
        p = d / f"img{k:02d}.jpg"
        img.save(p, quality=90)
        paths.append(str(p))
    return paths


class PhotoDataset(torch.utils.data.Dataset):
    """The tutorial's dataset: PIL decode, torchvision random transforms,
    draws from random and np.random, a tensor and a dict of targets."""

    def __init__(self, paths):
        import torchvision.transforms as T
        self.paths = paths
        self.tf = T.Compose([T.RandomResizedCrop(32), T.ColorJitter(0.4, 0.4, 0.4),
                             T.RandomHorizontalFlip(), T.ToTensor()])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        from PIL import Image
        img = Image.open(self.paths[i]).convert("RGB")
        x = self.tf(img)
        if random.random() < 0.5:
            x = x.flip(1)
        extra = np.random.rand(3).astype(np.float32) + np.float32(random.randint(0, 9))
        return x, {"label": i % 3, "extra": extra}


class InitGeneratorDataset(torch.utils.data.Dataset):
    """Draws from a generator made in __init__: what seedpipe cannot seed."""

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.from_numpy(self.rng.random(4))


def _same(a, b):
    la, lb = _leaves(a), _leaves(b)
    if [p for p, _ in la] != [p for p, _ in lb]:
        return False
    for (_, (ka, da, va)), (_, (kb, db, vb)) in zip(la, lb):
        if (ka, da) != (kb, db):
            return False
        if isinstance(va, np.ndarray):
            if va.shape != vb.shape or va.tobytes() != vb.tobytes():
                return False
        elif va != vb:
            return False
    return True


def batches(ds, workers, n=None, **kw):
    kw.setdefault("batch_size", 4)
    kw.setdefault("shuffle", True)
    kw.setdefault("seed", 11)
    dl = DataLoader(ds, num_workers=workers, **kw)
    try:
        out = []
        for k, b in enumerate(dl):
            if n is not None and k >= n:
                break
            out.append(b)
        return out, dl
    finally:
        dl.close()


def test_custom_dataset_takes_the_python_backend(jpegs):
    dl = DataLoader(PhotoDataset(jpegs), batch_size=4)
    assert dl.backend == "python" and "dataset=PhotoDataset" in dl.backend_reason
    assert isinstance(dl, DataLoader)
    assert DataLoader[torch.Tensor] is DataLoader
    dl.close()


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_same_batches_at_any_worker_count(jpegs):
    ds = PhotoDataset(jpegs)
    ref, _ = batches(ds, 0)
    assert len(ref) == 3 and ref[0][0].shape == (4, 3, 32, 32)
    assert ref[0][1]["extra"].dtype == torch.float32 and ref[0][1]["label"].dtype == torch.int64
    for w in (1, 2, 3):
        got, _ = batches(ds, w)
        assert len(got) == len(ref)
        for k, (a, b) in enumerate(zip(ref, got)):
            assert _same(a, b), f"num_workers={w}: batch {k} differs from num_workers=0"
    # and the augmentation is random: not the same crops at another seed
    other, _ = batches(ds, 0, seed=12)
    assert not _same(ref[0], other[0])


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_torch_dataloader_with_the_seeding_recipe_differs(jpegs):
    """torch's DataLoader with seed_worker + generator + manual_seed: the
    augmentations change between 2 and 3 workers (the problem solved)."""
    ds = PhotoDataset(jpegs)

    def seed_worker(worker_id):
        s = torch.initial_seed() % 2**32
        np.random.seed(s)
        random.seed(s)

    def run(w):
        torch.manual_seed(0)
        g = torch.Generator()
        g.manual_seed(0)
        dl = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True, num_workers=w,
                                         worker_init_fn=seed_worker, generator=g)
        return [b for b in dl]
    a, b = run(2), run(3)
    assert [x[1]["label"].tolist() for x in a] == [x[1]["label"].tolist() for x in b]
    assert sum(_same(x, y) for x, y in zip(a, b)) < len(a), \
        "torch's DataLoader gave equal augmentations at 2 and 3 workers"


def test_resume_at_another_worker_count(jpegs):
    ds = PhotoDataset(jpegs)
    full, _ = batches(ds, 0, batch_size=2)
    dl = DataLoader(ds, batch_size=2, shuffle=True, seed=11, num_workers=2)
    it = iter(dl)
    taken = [next(it) for _ in range(2)]
    state = dl.state_dict()
    dl.close()
    assert state["epoch"] == 0 and state["batch"] == 2
    dl3 = DataLoader(ds, batch_size=2, shuffle=True, seed=11, num_workers=3)
    dl3.load_state_dict(pickle.loads(pickle.dumps(state)))
    rest = list(dl3)
    dl3.close()
    assert len(taken) + len(rest) == len(full)
    for k, (a, b) in enumerate(zip(full, taken + rest)):
        assert _same(a, b), f"batch {k} differs after the resume"


def test_sigkilled_workers_change_nothing(jpegs):
    ds = PhotoDataset(jpegs * 3)
    ref, _ = batches(ds, 0, batch_size=3)
    dl = DataLoader(ds, batch_size=3, shuffle=True, seed=11, num_workers=2, prefetch_factor=1)
    got, killed = [], 0
    for k, b in enumerate(dl):
        got.append(b)
        if k in (1, 4, 7):
            os.kill(dl.worker_pids()[k % 2], signal.SIGKILL)
            killed += 1
    pids = dl.worker_pids()
    dl.close()
    assert killed == 3 and len(pids) == 2
    assert len(got) == len(ref)
    for k, (a, b) in enumerate(zip(ref, got)):
        assert _same(a, b), f"batch {k} differs after SIGKILLs"


class Crashy(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise KeyError(f"no label for sample {i}")
        return torch.tensor([i])


def test_an_exception_reaches_the_trainer_with_its_traceback():
    dl = DataLoader(Crashy(), batch_size=2, num_workers=2)
    with pytest.raises(KeyError) as e:
        list(dl)
    msg = str(e.value)
    assert "sample index 5" in msg and "epoch 0, batch 2" in msg
    assert "Traceback" in msg and "no label for sample 5" in msg and "__getitem__" in msg
    dl.close()


class Segfaulty(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            import faulthandler
            faulthandler.disable()          # no Python stack dump in the test's output
            os.kill(os.getpid(), signal.SIGSEGV)
        return torch.tensor([i])


def test_a_sample_that_always_crashes_its_worker_is_named():
    dl = DataLoader(Segfaulty(), batch_size=1, num_workers=1)
    # (under AddressSanitizer its handler turns the SIGSEGV into an abort, or
    # into exit status 1 without abort_on_error)
    with pytest.raises(RuntimeError, match=r"died 3 times computing batch 2 .*\[2\].*"
                       r"(SIGSEGV|SIGABRT|exit status 1)"):
        list(dl)
    dl.close()


def test_in_process_leaves_the_trainers_randomness_alone(jpegs):
    def draws():
        return (torch.rand(3).tolist(), np.random.rand(3).tolist(), random.random())

    torch.manual_seed(1)
    np.random.seed(1)
    random.seed(1)
    expect = draws()
    torch.manual_seed(1)
    np.random.seed(1)
    random.seed(1)
    threads = torch.get_num_threads()
    batches(PhotoDataset(jpegs), 0)
    assert draws() == expect
    assert torch.initial_seed() == 1 and torch.get_num_threads() == threads


def test_verify_passes_a_seeded_dataset_and_names_an_unseeded_one(jpegs):
    ds = PhotoDataset(jpegs)
    rep = verify(lambda w: DataLoader(ds, batch_size=4, shuffle=True, seed=3, num_workers=w),
                 workers=(0, 2), batches=3)
    assert rep.ok, str(rep)
    bad = verify(lambda w: DataLoader(InitGeneratorDataset(), batch_size=4, seed=3,
                                      num_workers=w), workers=(0, 2), batches=4)
    assert not bad.ok
    d = bad.difference
    assert d["config"] == "num_workers=2" and d["batch"] == 1 and d["sample"] is not None
    assert "__init__" in d["cause"] and "batch 1" in str(bad)


class Explicit(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        g = sample_generator()
        r = sample_generator("numpy")
        return torch.rand(2, generator=g), r.random(2), sample_seed() % (1 << 62)


def test_explicit_generators_are_keyed_by_the_sample():
    a, _ = batches(Explicit(), 0)
    b, _ = batches(Explicit(), 2)
    assert all(_same(x, y) for x, y in zip(a, b))
    assert len({int(s) for x in a for s in x[2]}) == 10
    with pytest.raises(RuntimeError, match="outside"):
        sample_seed()


class Big(torch.utils.data.Dataset):
    """4 MB float32 per sample, and one 4x larger: buffers grow, never truncate."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        n = (1 << 20) * (4 if i == 4 else 1)
        return {"x": np.full(n, i, dtype=np.float32)[:1 << 20],
                "tail": np.arange(n, dtype=np.float32), "name": f"s{i}"}


def test_kept_batches_are_never_overwritten_and_buffers_grow():
    def collate(samples):
        return {"x": torch.stack([torch.from_numpy(s["x"]) for s in samples]),
                "tail": [torch.from_numpy(s["tail"]) for s in samples],
                "name": [s["name"] for s in samples]}
    ref, _ = batches(Big(), 0, batch_size=1, shuffle=False, collate_fn=collate)
    got, _ = batches(Big(), 2, batch_size=1, shuffle=False, collate_fn=collate)
    assert [g["name"] for g in got] == [[f"s{i}"] for i in range(6)]
    assert got[4]["tail"][0].shape == (4 << 20,) and float(got[4]["tail"][0][-1]) == (4 << 20) - 1
    for k, (a, b) in enumerate(zip(ref, got)):
        assert _same(a, b), f"kept batch {k} was changed"
        assert float(b["x"][0, 0]) == k


def test_default_collate_is_torchs():
    from torch.utils.data import default_collate

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return (torch.full((2, 3), i, dtype=torch.bfloat16), np.int16(i), 1.5 * i, i,
                    f"n{i}", {"a": [np.arange(i, i + 2), torch.tensor(i > 2)]})
    ds = DS()
    want = default_collate([ds[i] for i in range(3)])
    got, _ = batches(ds, 2, batch_size=3, shuffle=False)
    assert _same(want, got[0])
    assert got[0][0].dtype == torch.bfloat16 and got[0][2].dtype == torch.float64


def test_samplers_batch_samplers_and_unbatched():
    from torch.utils.data import BatchSampler, RandomSampler, TensorDataset
    ds = TensorDataset(torch.arange(20).float(), torch.arange(20))
    order = [5, 3, 3, 19, 0, 7, 7, 7]
    got, _ = batches(ds, 2, batch_size=3, shuffle=None, sampler=order)
    assert [b[1].tolist() for b in got] == [[5, 3, 3], [19, 0, 7], [7, 7]]
    got, _ = batches(ds, 0, batch_size=None, shuffle=None, sampler=range(4))
    assert [b[1].item() for b in got] == [0, 1, 2, 3] and got[0][0].shape == ()
    rs = RandomSampler(ds, replacement=True, num_samples=30)
    a, _ = batches(ds, 0, batch_size=5, shuffle=None, sampler=rs)
    b, _ = batches(ds, 3, batch_size=5, shuffle=None, sampler=rs)
    assert [x[1].tolist() for x in a] == [x[1].tolist() for x in b]
    assert len(set(int(i) for x in a for i in x[1])) < 20     # with replacement
    bs = BatchSampler(RandomSampler(ds), batch_size=4, drop_last=True)
    a, _ = batches(ds, 0, batch_size=1, shuffle=None, batch_sampler=bs)
    b, _ = batches(ds, 2, batch_size=1, shuffle=None, batch_sampler=bs)
    assert len(a) == 5 and all(_same(x, y) for x, y in zip(a, b))
    assert sorted(int(i) for x in a for i in x[1]) == list(range(20))


def test_iterable_dataset_is_refused_by_name():
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))
    with pytest.raises(ValueError, match="IterableDataset has no index"):
        DataLoader(Stream(), batch_size=2)


def test_worker_init_fn_and_get_worker_info():
    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            info = torch.utils.data.get_worker_info()
            return torch.tensor([i, -1 if info is None else info.num_workers])

    def init(wid):
        info = torch.utils.data.get_worker_info()
        assert info.id == wid and info.num_workers == 2
        random.random()                     # its draws never reach a sample
    got, _ = batches(DS(), 2, batch_size=4, worker_init_fn=init, shuffle=False)
    assert torch.cat(got)[:, 1].tolist() == [2] * 8
    got, _ = batches(DS(), 0, batch_size=4, shuffle=False)
    assert torch.cat(got)[:, 1].tolist() == [-1] * 8


def test_world_slices_concatenate_to_the_global_batch(jpegs):
    ds = PhotoDataset(jpegs)
    ref, _ = batches(ds, 0, batch_size=4)
    parts = [batches(ds, 1, batch_size=2, rank=r, world=2)[0] for r in range(2)]
    for k, g in enumerate(ref):
        cat = torch.cat([parts[0][k][0], parts[1][k][0]])
        assert torch.equal(cat, g[0]), f"batch {k}: the ranks' images are not the global batch"
        lab = torch.cat([parts[0][k][1]["label"], parts[1][k][1]["label"]])
        assert torch.equal(lab, g[1]["label"])


def test_cache_serves_a_warm_epoch_without_getitem(tmp_path, jpegs):
    calls = []

    class Counted(PhotoDataset):
        def __getitem__(self, i):
            calls.append(i)
            return super().__getitem__(i)
    ds = Counted(jpegs)
    with pytest.raises(ValueError, match="fingerprint"):
        DataLoader(ds, batch_size=4, cache=str(tmp_path))
    cold, _ = batches(ds, 2, cache=str(tmp_path), fingerprint="photos-v1")
    n_cold = len(calls)
    warm, dl = batches(ds, 0, cache=str(tmp_path), fingerprint="photos-v1")
    assert len(calls) == n_cold, "a warm epoch called __getitem__"
    assert dl.loader.cache.hits == len(cold) and dl.loader.cache.misses == 0
    ref, _ = batches(PhotoDataset(jpegs), 0)
    for a, b, c in zip(ref, cold, warm):
        assert _same(a, b) and _same(a, c)


def test_seedpipe_loader_takes_a_dataset_object(jpegs):
    import seedpipe
    ds = PhotoDataset(jpegs)
    with seedpipe.Loader(ds, seed=5, batch_size=4) as a, \
            seedpipe.Loader(ds, seed=5, batch_size=4, workers=2) as b:
        assert a.backend == "python" and len(a) == 3
        ra, rb = list(a), list(b)
        assert all(_same(x, y) for x, y in zip(ra, rb)) and len(ra) == 3
        b.set_epoch(0)
        it = iter(b)
        next(it)
        state = b.state_dict()
        it.close()
    with seedpipe.Loader(ds, seed=5, batch_size=4) as c:
        c.load_state_dict(state)
        rest = list(c)
        assert len(rest) == 2 and all(_same(x, y) for x, y in zip(ra[1:], rest))
    with pytest.raises(ValueError, match="pipeline=.*C path"):
        seedpipe.Loader(ds, pipeline="imagenet-train")


def test_a_caller_keeping_every_batch_costs_one_descriptor_each():
    """Batches kept in a list stay intact; their buffers leave the pool, and
    the trainer's open files grow by about one per kept batch, not more."""
    ds = torch.utils.data.TensorDataset(torch.arange(400).float().repeat_interleave(64)
                                        .view(400, 64))
    before = len(os.listdir("/proc/self/fd"))
    dl = DataLoader(ds, batch_size=4, num_workers=2, seed=1, shuffle=True)
    kept = list(dl)
    during = len(os.listdir("/proc/self/fd"))
    ref, _ = batches(ds, 0, batch_size=4, seed=1)
    assert len(kept) == 100 and all(_same(a, b) for a, b in zip(ref, kept))
    assert during - before <= 100 + 2 * dl._ld.ring + 12, (before, during)
    dl.close()


def test_timeout_and_persistent_workers():
    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            time.sleep(2 if i == 3 else 0)
            return torch.tensor([i])
    dl = DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.5)
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        list(dl)
    dl.close()

    class Scaled(torch.utils.data.Dataset):
        scale = 1

        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.tensor([i * self.scale])
    ds = Scaled()
    fresh = DataLoader(ds, batch_size=4, num_workers=1)                 # forked each epoch
    kept = DataLoader(ds, batch_size=4, num_workers=1, persistent_workers=True)
    assert next(iter(fresh)).tolist() == next(iter(kept)).tolist() == [[0], [1], [2], [3]]
    ds.scale = 10                    # the trainer changes the dataset between epochs
    assert torch.cat(list(fresh)).view(-1).tolist() == [0, 10, 20, 30]   # as torch's
    assert torch.cat(list(kept)).view(-1).tolist() == [0, 1, 2, 3]       # as torch's, too
    fresh.close()
    kept.close()


def test_cache_read_back_by_workers_and_a_corrupt_entry_recomputed(tmp_path, jpegs):
    ds = PhotoDataset(jpegs)
    ref, _ = batches(ds, 0)
    cold, dl = batches(ds, 2, cache=str(tmp_path), fingerprint="v1")
    assert (dl.loader.cache.misses, dl.loader.cache.hits) == (3, 0)
    entry = sorted(p for p in (tmp_path / os.listdir(tmp_path)[0]).iterdir())[1]
    data = bytearray(entry.read_bytes())
    data[200] ^= 0xFF                                  # one flipped byte
    entry.write_bytes(bytes(data))
    warm, dl = batches(ds, 2, cache=str(tmp_path), fingerprint="v1")
    assert (dl.loader.cache.hits, dl.loader.cache.corrupt) == (2, 1)
    again, dl = batches(ds, 0, cache=str(tmp_path), fingerprint="v1")
    assert dl.loader.cache.hits == 3                   # rewritten by the worker
    for k, (a, b, c, d) in enumerate(zip(ref, cold, warm, again)):
        assert _same(a, b) and _same(a, c) and _same(a, d), f"batch {k}"
    other, dl = batches(ds, 0, cache=str(tmp_path), fingerprint="v2")
    assert dl.loader.cache.hits == 0                   # another fingerprint: another entry


def test_verify_over_world_sizes(jpegs):
    ds = PhotoDataset(jpegs)

    def make(w, rank=0, world=1):
        return DataLoader(ds, batch_size=4 // world, shuffle=True, seed=3, num_workers=w,
                          rank=rank, world=world)
    rep = verify(make, workers=(0, 1), batches=3, world=(1, 2))
    assert rep.ok, str(rep)
    assert [r[0] for r in rep.rows] == ["num_workers=0 world=1", "num_workers=0 world=2",
                                        "num_workers=1 world=1", "num_workers=1 world=2"]
    assert len({r[2] for r in rep.rows}) == 1


def test_a_failing_worker_init_fn_is_named():
    def init(wid):
        raise OSError(f"no GPU for worker {wid}")
    dl = DataLoader(torch.utils.data.TensorDataset(torch.arange(4)), batch_size=2,
                    num_workers=1, worker_init_fn=init)
    with pytest.raises(RuntimeError, match=r"(?s)worker 0 failed to start.*no GPU for worker 0"):
        list(dl)
    dl.close()


def test_cache_refuses_a_folder_others_can_write(tmp_path):
    ds = torch.utils.data.TensorDataset(torch.arange(4))
    dl = DataLoader(ds, batch_size=2, cache=str(tmp_path), fingerprint="v1")
    sub = dl.loader.cache.dir
    dl.close()
    os.chmod(sub, 0o777)
    with pytest.raises(ValueError, match="not this user's alone.*pickles"):
        DataLoader(ds, batch_size=2, cache=str(tmp_path), fingerprint="v1")


def test_distributed_sampler_drop_last_uneven_follows_torch():
    """DistributedSampler(drop_last=True) over 10 samples and 3 ranks: each
    rank gets torch's own indices (3 each), so no rank has fewer batches."""
    from torch.utils.data import DistributedSampler, TensorDataset
    ds = TensorDataset(torch.arange(10))
    for rank in range(3):
        s = DistributedSampler(ds, num_replicas=3, rank=rank, drop_last=True, seed=4)
        s.set_epoch(2)
        want = list(s)
        got, dl = batches(ds, 2, batch_size=2, shuffle=None, sampler=s)
        assert [int(i) for (x,) in got for i in x] == want and len(got) == 2
