"""seedpipe.torch.DataLoader as a drop-in for torch's (issue 26, DESIGN.md
section 12): DDP through DistributedSampler or rank/world, the sequential
order against torch's own DistributedSampler (world 1, 2, 3, uneven tails),
owned batches, one epoch per iterator, resume with set_epoch as a DDP loop
calls it, the seed from torch, and every refused argument named. Skipped
(visibly) without torch and torchvision."""
import subprocess
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
tv = pytest.importorskip("torchvision", reason="torchvision (python3-torchvision) not installed")
from torch.utils.data import ConcatDataset, DistributedSampler, Subset  # noqa: E402

from seedpipe.torch import DataLoader  # noqa: E402

T = tv.transforms
TRAIN = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor(),
                   T.Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))])
VAL = T.Compose([T.Resize(28), T.CenterCrop(24), T.ToTensor()])


@pytest.fixture(scope="module")
def odd(tmp_path_factory, binary):
    """25 images: uneven tails for world 2 and 3."""
    d = tmp_path_factory.mktemp("dropin") / "shapes25"
    subprocess.run([binary, "make-shapes", str(d), "--count", "25", "--size", "32", "--seed",
                    "9"], check=True, capture_output=True)
    return str(d)


def equal(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) and torch.equal(u, v)
                                    for (x, u), (y, v) in zip(a, b))


def chunks(seq, n, drop_last):
    out = [seq[i:i + n] for i in range(0, len(seq), n)]
    return out[:-1] if drop_last and out and len(out[-1]) < n else out


# ---- DDP: the order and the tail ---------------------------------------------------

@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("batch,drop_last", [(4, False), (3, True), (7, False)])
def test_sequential_ranks_get_distributed_samplers_indices(odd, world, batch, drop_last):
    ds = tv.datasets.ImageFolder(odd, transform=VAL)
    for rank in range(world):
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)
        # torch's own batches of indices: its DataLoader over this sampler
        want = chunks(list(sampler), batch, drop_last)
        dl = DataLoader(ds, batch_size=batch, sampler=sampler, drop_last=drop_last)
        got, labels = [], []
        for x, y in dl:
            assert len(y) > 0
            got.append(dl.batch_info.indices.tolist())
            labels.append(y.tolist())
        assert got == want, (world, rank)
        assert len(dl) == len(want)
        assert labels == [[ds.targets[i] for i in b] for b in want]
        dl.close()


def test_shuffled_rank_slices_are_the_single_process_batch(odd):
    ds = tv.datasets.ImageFolder(odd, transform=TRAIN)
    one = [(x, y) for x, y in DataLoader(ds, batch_size=6, shuffle=True, seed=3)]
    ranks = []
    for r in range(2):
        s = DistributedSampler(ds, num_replicas=2, rank=r, seed=3)   # shuffle=True
        dl = DataLoader(ds, batch_size=3, sampler=s)
        ranks.append([(x, y) for x, y in dl])
        assert dl.seed == 3 and len(dl) == 5
    assert [len(b[1]) for b in ranks[0]] == [len(b[1]) for b in ranks[1]]   # 25 -> 26: even
    assert min(len(b[1]) for b in ranks[0] + ranks[1]) > 0
    for g, (x, y) in enumerate(one[:-1]):       # the full global batches: byte for byte
        assert torch.equal(torch.cat([ranks[0][g][0], ranks[1][g][0]]), x)
        assert torch.equal(torch.cat([ranks[0][g][1], ranks[1][g][1]]), y)
    # the padded tail: 25 samples + 1 wrapped from the epoch's own start
    tail = torch.cat([ranks[0][-1][1], ranks[1][-1][1]])
    assert torch.equal(tail[:1], one[-1][1]) and torch.equal(tail[1:], one[0][1][:1])


def test_rank_and_world_without_a_sampler(odd, monkeypatch):
    ds = tv.datasets.ImageFolder(odd, transform=VAL)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    dl = DataLoader(ds, batch_size=4, rank="auto", world="auto", seed=0)
    assert (dl.rank, dl.world) == (1, 3)
    got = sum((dl.batch_info.indices.tolist() for _ in dl), [])
    assert got == list(DistributedSampler(ds, num_replicas=3, rank=1, shuffle=False))
    with pytest.raises(ValueError, match="rank=0, world=3.*DistributedSampler says rank 1"):
        DataLoader(ds, batch_size=4, rank=0, world=3,
                   sampler=DistributedSampler(ds, num_replicas=3, rank=1))


# ---- owned batches, epochs, resume ----------------------------------------------

@pytest.mark.parametrize("workers", [0, 2])
def test_list_equals_a_fresh_iteration(shapes, workers):
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)
    kept = list(DataLoader(ds, batch_size=8, shuffle=True, num_workers=workers, seed=1))
    fresh = DataLoader(ds, batch_size=8, shuffle=True, num_workers=0, seed=1)
    assert equal(kept, [(x.clone(), y.clone()) for x, y in fresh]) and len(kept) == 8


def test_zero_copy_views_are_views(shapes):
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)
    views = DataLoader(ds, batch_size=8, shuffle=True, seed=1, zero_copy=True)
    it = iter(views)
    a, b = next(it)[0], next(it)[0]
    assert a.data_ptr() == b.data_ptr()          # the loader's one batch buffer
    owned = DataLoader(ds, batch_size=8, shuffle=True, seed=1)
    it = iter(owned)
    a, b = next(it)[0], next(it)[0]
    assert a.data_ptr() != b.data_ptr()


def test_break_then_a_new_for_is_a_whole_epoch(shapes):
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)
    dl = DataLoader(ds, batch_size=8, shuffle=True, seed=2, num_workers=2)
    for i, _ in enumerate(dl):
        if i == 2:
            break
    second = list(dl)
    assert len(second) == len(dl) == 8
    ref = DataLoader(ds, batch_size=8, shuffle=True, seed=2)
    ref.set_epoch(1)
    assert equal(second, list(ref))
    peek = next(iter(dl))                        # a peek, then a full epoch again
    assert len(list(dl)) == 8 and len(peek[1]) == 8


@pytest.mark.parametrize("with_sampler", [False, True])
def test_resume_at_1_worker_from_2_with_set_epoch(shapes, with_sampler):
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)

    def make(workers):
        if with_sampler:
            s = DistributedSampler(ds, num_replicas=2, rank=1, seed=4)
            return DataLoader(ds, batch_size=4, sampler=s, num_workers=workers), s
        return DataLoader(ds, batch_size=4, shuffle=True, num_workers=workers, seed=4), None

    def set_epoch(dl, s, e):
        (s or dl).set_epoch(e)                   # what a DDP loop calls each epoch

    dl, s = make(2)
    seen, state = [], None
    for epoch in range(2):
        set_epoch(dl, s, epoch)
        for i, (x, y) in enumerate(dl):
            seen.append((epoch, i, x, y))
            if (epoch, i) == (1, 2):
                state = dl.state_dict()
    dl.close()
    assert state["epoch"] == 1 and state["batch"] == 3
    dl, s = make(1)
    dl.load_state_dict(state)
    got = []
    for epoch in range(1, 2):
        set_epoch(dl, s, epoch)
        got += [(x, y) for x, y in dl]
    want = [(x, y) for e, i, x, y in seen if e == 1 and i > 2]
    assert len(got) == len(want) == len(dl) - 3 and equal(got, want)
    set_epoch(dl, s, 1)                          # no state pending: the whole epoch
    assert len(list(dl)) == len(dl)


# ---- seed, pin_memory, accepted arguments -----------------------------------------

def test_seed_comes_from_torch_and_is_in_the_state(shapes):
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)
    torch.manual_seed(123)
    a = DataLoader(ds, batch_size=8, shuffle=True)
    assert a.seed == 123 and a.state_dict()["seed"] == 123
    first = [(x, y) for x, y in a]
    torch.manual_seed(123)
    assert equal(first, list(DataLoader(ds, batch_size=8, shuffle=True)))
    torch.manual_seed(124)
    other = DataLoader(ds, batch_size=8, shuffle=True)
    assert other.seed == 124 and not equal(first, list(other))
    # a derived seed follows a loaded state's: a resume in a differently seeded process
    b = DataLoader(ds, batch_size=8, shuffle=True)
    st = DataLoader(ds, batch_size=8, shuffle=True, seed=123).state_dict()
    b.load_state_dict(st)
    assert b.seed == 123 and equal(list(b), first)
    g = torch.Generator().manual_seed(77)
    assert DataLoader(ds, batch_size=8, shuffle=True, generator=g).seed == 77
    with pytest.raises(Exception, match="seed"):   # a given seed must match the state's
        DataLoader(ds, batch_size=8, shuffle=True, seed=5).load_state_dict(st)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present: pin_memory is honoured")
def test_pin_memory_without_cuda_warns_and_is_ignored(shapes):
    import seedpipe.torch as st
    st._warned_pin[0] = False
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)
    with pytest.warns(UserWarning, match="pin_memory=True but CUDA is not available"):
        dl = DataLoader(ds, batch_size=8, pin_memory=True, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DataLoader(ds, batch_size=8, pin_memory=True, seed=0)   # once
    assert equal(list(dl), list(DataLoader(ds, batch_size=8, seed=0)))


def test_torch_arguments_accepted(shapes):
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)
    dl = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True,
                    prefetch_factor=3, on_error="skip", seed=0)
    assert dl.loader.ring == 6 and len(list(dl)) == 8
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(ds, batch_size=8, persistent_workers=True)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(ds, batch_size=8, prefetch_factor=4)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, batch_size=8, shuffle=True, sampler=DistributedSampler(ds, 2, 0))


def test_subset_and_concat_are_honoured(shapes):
    ds = tv.datasets.ImageFolder(shapes, transform=VAL)
    whole = [(x, y) for x, y in DataLoader(ds, batch_size=60)][0]
    idx = [5, 0, 0, 59, 17]
    part = DataLoader(ConcatDataset([Subset(ds, idx), ds]), batch_size=65)
    x, y = next(iter(part))
    assert torch.equal(x[:5], whole[0][idx]) and torch.equal(y[:5], whole[1][idx])
    assert torch.equal(x[5:], whole[0]) and torch.equal(y[5:], whole[1])
    assert part.loader.num_samples == 65


# ---- refused, by name, with what to do instead --------------------------------------

def test_every_refusal_names_itself(shapes, odd):
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)

    def refused(match, *a, **kw):
        # backend="c": the C path refuses what it cannot do, by name; the
        # automatic choice gives such a loader to the Python backend instead
        with pytest.raises(ValueError, match=match) as e:
            DataLoader(*a, backend="c", **kw)
        msg = str(e.value)
        assert any(w in msg for w in ("instead", "pass ", "use ", "give ", "leave ", "keep ")), msg
        assert "backend='python'" in msg or "sampler=DistributedSampler" in match, msg

    auto = DataLoader(ds, batch_size=8, collate_fn=lambda b: b)
    assert auto.backend == "python" and auto.backend_reason.startswith("collate_fn")
    auto.close()

    refused("batch_sampler", ds, batch_sampler=[[0, 1]])
    refused("collate_fn", ds, batch_size=8, collate_fn=lambda b: b)
    refused("worker_init_fn", ds, batch_size=8, worker_init_fn=lambda w: None)
    refused("multiprocessing_context", ds, batch_size=8, multiprocessing_context="spawn")
    refused("timeout=5", ds, batch_size=8, timeout=5)
    refused(r"sampler=WeightedRandomSampler\(replacement=False\): num_samples=61", ds,
            batch_size=8,
            sampler=torch.utils.data.WeightedRandomSampler([1.0] * 60, 61, replacement=False))
    refused(r"is_valid_file", tv.datasets.ImageFolder(shapes, is_valid_file=lambda p: True),
            batch_size=8)
    refused(r"loader=", tv.datasets.ImageFolder(shapes, transform=VAL, loader=lambda p: p),
            batch_size=8)
    refused("target_transform", tv.datasets.ImageFolder(shapes, transform=VAL,
                                                         target_transform=int), batch_size=8)
    changed = tv.datasets.ImageFolder(shapes, transform=VAL)
    changed.samples = changed.samples[::2]
    changed.imgs = changed.samples
    refused(r"ImageFolder.samples", changed, batch_size=8)
    imgs = tv.datasets.ImageFolder(shapes, transform=VAL)
    imgs.imgs = imgs.samples[:3]
    refused(r"ImageFolder.imgs", imgs, batch_size=8)

    class Custom(torch.utils.data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return torch.zeros(3), 0
    refused("dataset=Custom", Custom(), batch_size=8)
    o = tv.datasets.ImageFolder(odd, transform=VAL)
    refused(r"sampler=DistributedSampler\(shuffle=True, drop_last=True\)", o, batch_size=4,
            sampler=DistributedSampler(o, num_replicas=2, rank=0, drop_last=True))
    with pytest.raises(ValueError, match="sampler=DistributedSampler.*another dataset"):
        DataLoader(ds, batch_size=4, sampler=DistributedSampler(o, num_replicas=2, rank=0),
                   backend="c")
    # drop_last on both: torch's batch count (floor(floor(25/2)/4) = 3)
    dl = DataLoader(o, batch_size=4, drop_last=True,
                    sampler=DistributedSampler(o, num_replicas=2, rank=0, drop_last=True))
    assert len(dl) == 3 == len(list(dl))


# ---- review fixes: the upstream validation sampler, seeds, iterators, views --------

@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("batch,drop_last", [(4, False), (5, True), (2, False)])
def test_validation_sampler_drop_last_is_distributed_samplers_cut(odd, world, batch, drop_last):
    """pytorch/examples' validation loader: DistributedSampler(shuffle=False,
    drop_last=True) with 25 samples (uneven for 2, 3, 4), the DataLoader with
    or without drop_last: each rank gets torch's own indices and batches."""
    ds = tv.datasets.ImageFolder(odd, transform=VAL)
    ref = DataLoader(ds, batch_size=25)
    (whole_x, whole_y), = list(ref)
    seen = []
    for rank in range(world):
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False,
                                     drop_last=True)
        want = chunks(list(sampler), batch, drop_last)
        dl = DataLoader(ds, batch_size=batch, sampler=sampler, drop_last=drop_last)
        got = []
        for x, y in dl:
            idx = dl.batch_info.indices.tolist()
            got.append(idx)
            assert torch.equal(x, whole_x[idx]) and torch.equal(y, whole_y[idx])
        assert got == want, (world, rank)
        assert len(dl) == len(want)
        seen += sum(got, [])
        dl.close()
    if not drop_last:     # the ranks together: the first floor(25 / world) * world samples
        assert sorted(seen) == list(range(25 // world * world))


def test_rank_world_without_a_process_group_share_one_seed(odd, monkeypatch):
    """rank/world without a sampler, seed or process group: every rank uses
    seed 0 (DistributedSampler's default), whatever its own torch seed, so
    the ranks partition each epoch."""
    ds = tv.datasets.ImageFolder(odd, transform=VAL)
    assert not torch.distributed.is_initialized()
    per_rank = []
    for rank in range(2):
        torch.manual_seed(1000 + rank)          # the processes' own seeds differ
        if rank == 0:                           # from the launcher's environment
            monkeypatch.setenv("RANK", "0")
            monkeypatch.setenv("WORLD_SIZE", "2")
            dl = DataLoader(ds, batch_size=4, shuffle=True, rank="auto", world="auto")
        else:
            dl = DataLoader(ds, batch_size=4, shuffle=True, rank=1, world=2)
        assert dl.seed == 0
        per_rank.append([sum((dl.batch_info.indices.tolist() for _ in dl), [])
                         for _epoch in range(2)])
        dl.close()
    for epoch in range(2):
        a, b = per_rank[0][epoch], per_rank[1][epoch]
        assert len(a) == len(b) == 13
        assert set(a) | set(b) == set(range(25)) and len(set(a) & set(b)) <= 1, epoch


def test_a_superseded_iterator_raises(shapes):
    ds = tv.datasets.ImageFolder(shapes, transform=VAL)
    dl = DataLoader(ds, batch_size=8, seed=0)
    with pytest.raises(RuntimeError, match="another iterator of this loader was started"):
        list(zip(dl, dl))
    i1 = iter(dl)
    next(i1)
    i2 = iter(dl)
    with pytest.raises(RuntimeError, match="another iterator of this loader was started"):
        list(i1)
    assert len(list(i2)) == len(dl) == 8        # the newer one is a whole epoch
    done = iter(dl)
    assert len(list(done)) == 8
    fresh = iter(dl)
    with pytest.raises(StopIteration):            # an ended iterator stays ended
        next(done)
    assert len(list(fresh)) == 8


def test_distributed_sampler_without_set_epoch_warns(shapes):
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)
    s = DistributedSampler(ds, num_replicas=2, rank=0, seed=1)
    dl = DataLoader(ds, batch_size=4, sampler=s)
    first = list(dl)
    with pytest.warns(UserWarning, match=r"set_epoch"):
        again = list(dl)                         # epoch 0 again: torch would redraw crops
    assert equal(first, again)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(dl)                                 # once per loader
        # a loop that calls set_epoch (on the sampler or the loader) is not warned
        s2 = DistributedSampler(ds, num_replicas=2, rank=0, seed=1)
        dl2 = DataLoader(ds, batch_size=4, sampler=s2)
        for epoch in (0, 1, 1):
            s2.set_epoch(epoch)
            list(dl2)
        dl2.set_epoch(1)
        list(dl2)
        # validation: no shuffle, no random transform: nothing would differ
        vds = tv.datasets.ImageFolder(shapes, transform=VAL)
        vs = DistributedSampler(vds, num_replicas=2, rank=0, shuffle=False)
        val = DataLoader(vds, batch_size=4, sampler=vs)
        list(val)
        list(val)


@pytest.mark.parametrize("workers", [0, 2])
def test_zero_copy_views_outlive_their_loader(shapes, workers):
    """A view taken from a loader nobody holds any more: the memory is
    kept (never freed under the view) and holds the batch."""
    import gc
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)
    x, y = next(iter(DataLoader(ds, batch_size=8, shuffle=True, seed=1, zero_copy=True,
                                num_workers=workers)))
    gc.collect()
    junk = [torch.full((8, 3, 24, 24), 7.0) for _ in range(64)]   # reuse freed memory
    wx, wy = next(iter(DataLoader(ds, batch_size=8, shuffle=True, seed=1)))
    assert torch.equal(x, wx) and torch.equal(y, wy)
    del x, y, junk
    gc.collect()


def test_more_refusals_name_themselves(shapes, odd):
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)
    n = len(ds)

    def refused(match, *a, **kw):
        with pytest.raises(ValueError, match=match) as e:
            DataLoader(*a, backend="c", **kw)      # the automatic choice: the Python backend
        msg = str(e.value)
        assert msg.startswith("DataLoader: ")
        assert any(w in msg for w in ("instead", "pass ", "use ", "give ", "put ", "Put ")), msg
        return msg

    # samplers the C path maps (test_samplers.py), refused where they cannot be followed
    refused(r"sampler=SubsetRandomSampler: .*listed twice.*RASampler", ds,
            batch_size=8, sampler=torch.utils.data.SubsetRandomSampler([0, 1, 0]))
    refused(r"sampler=list: index 60 is out of range.*pass indices in \[0, 59\]", ds,
            batch_size=8, sampler=[0, 60])
    refused(r"sampler=range: .*no indices", ds, batch_size=8, sampler=range(0))
    refused(r"batch_size=61: .*drop_last", ds, batch_size=61, drop_last=True)
    o = tv.datasets.ImageFolder(odd, transform=VAL)
    refused(r"batch_size=7: .*drop_last", o, batch_size=7, drop_last=True,
            sampler=DistributedSampler(o, num_replicas=4, rank=0, shuffle=False,
                                       drop_last=True))       # 24 samples, global batch 28
    refused(r"transform=ToTensor\(\): .*CenterCrop", tv.datasets.ImageFolder(shapes),
            batch_size=8, transform=T.ToTensor())
    refused(r"transform=ToTensor\(\): .*CenterCrop",
            tv.datasets.ImageFolder(shapes, transform=T.ToTensor()), batch_size=8)
    refused(r"rank=1 without world=", ds, batch_size=8, rank=1)
    refused(r"rank=3, world=2: .*\[0, 1\]", ds, batch_size=8, rank=3, world=2)
    refused(r"num_workers=65: .*64", ds, batch_size=8, num_workers=65)
    # the way out named for ToTensor: CenterCrop of the images' size changes no pixel
    same = tv.datasets.ImageFolder(shapes, transform=T.Compose([T.CenterCrop(32),
                                                                T.ToTensor()]))
    x, y = next(iter(DataLoader(same, batch_size=5)))
    assert torch.equal(x, torch.stack([same[i][0] for i in range(5)]))


def test_seed_is_read_at_the_first_iter(shapes):
    """torch reads its seed when an iterator starts: a script seeding after
    building its loaders is deterministic."""
    ds = tv.datasets.ImageFolder(shapes, transform=TRAIN)
    torch.manual_seed(5)
    dl = DataLoader(ds, batch_size=8, shuffle=True)
    torch.manual_seed(6)
    first = list(dl)
    assert dl.seed == 6
    torch.manual_seed(7)                          # kept after the first iter()
    second = list(dl)
    assert dl.seed == 6 and dl.state_dict()["seed"] == 6
    ref = DataLoader(ds, batch_size=8, shuffle=True, seed=6)
    assert equal(first, list(ref)) and equal(second, list(ref))
    torch.manual_seed(8)
    st = DataLoader(ds, batch_size=8, shuffle=True)
    torch.manual_seed(9)
    assert st.state_dict()["seed"] == 9           # state_dict() reads it too
    torch.manual_seed(10)
    assert st.seed == 9


def test_rank_world_with_a_process_group_use_rank_0s_seed(odd):
    """With torch.distributed up, rank 0's torch.initial_seed() is broadcast
    (a one-process gloo group here: the collective runs, rank 0 is us)."""
    import socket
    dist = torch.distributed
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with gloo not available")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                            world_size=1)
    try:
        torch.manual_seed(4242)
        dl = DataLoader(tv.datasets.ImageFolder(odd, transform=VAL), batch_size=4,
                        shuffle=True, rank=1, world=2)
        torch.manual_seed(1)                     # read when built: a collective
        assert dl.seed == 4242
        dl.close()
    finally:
        dist.destroy_process_group()


# ---- Subset indices: torch's rules, at a million indices -----------------------------

def test_subset_indices_follow_torchs_rules(shapes):
    import numpy as np
    ds = tv.datasets.ImageFolder(shapes, transform=VAL)
    for bad, what in (([1.5], "1.5 is not an integer index"), ([0, "a"], "is not an integer"),
                      ([[0, 1], [2]], "nested"), ([[0, 1], [2, 3]], "nested"),
                      ([0, 60], "index 60 out of range")):
        with pytest.raises(ValueError, match=what):
            DataLoader(Subset(ds, bad), batch_size=1, backend="c")
    # the automatic choice leaves them to the dataset: torch's own TypeError
    dl = DataLoader(Subset(ds, [1.5]), batch_size=1)
    assert dl.backend == "python"
    with pytest.raises(TypeError):
        list(dl)
    dl.close()
    # negative, numpy and tensor indices, as torch indexes with them
    want = None
    for idx in ([-1, 0, -60], [59, 0, 0], np.array([59, 0, 0]), torch.tensor([59, 0, 0])):
        dl = DataLoader(Subset(ds, idx), batch_size=3, num_workers=0)
        x, y = next(iter(dl))
        assert dl.backend == "c" and y.tolist() == [ds.targets[k] for k in (59, 0, 0)]
        want = x if want is None else want
        assert torch.equal(x, want)


def test_a_million_indices_and_a_deep_chain_of_subsets(shapes):
    import numpy as np
    ds = tv.datasets.ImageFolder(shapes, transform=VAL)
    idx = np.random.default_rng(1).integers(0, len(ds), 1_000_000)
    dl = DataLoader(Subset(ds, idx), batch_size=4, shuffle=False, backend="c")
    assert len(dl) == 250_000
    x, y = next(iter(dl))
    assert y.tolist() == [ds.targets[i] for i in idx[:4]]
    small, = [b for b, _ in DataLoader(Subset(ds, idx[:4].tolist()), batch_size=4,
                                       backend="c")]
    assert torch.equal(x, small)               # the same samples as a 4-index Subset
    dl.close()
    deep = ds
    for _ in range(3000):                      # recursion would fail: a loop walks it
        deep = Subset(deep, range(len(deep) - 1, -1, -1))
    dl = DataLoader(deep, batch_size=2, shuffle=False, backend="c")
    x, y = next(iter(dl))                      # 3,000 reversals: the original order
    assert y.tolist() == ds.targets[:2]
    dl.close()
