"""torchvision's dataset objects through the drop-in (issue 39 item 5):
MNIST and FashionMNIST are read by the C path from their own IDX files, one
channel, (n, 1, 28, 28) equal to torch's batches in the sequential order at
0 and 2 workers; a transform with random ops runs there too, the same at
any worker count; a changed .data or a target_transform is refused by name
(the automatic choice then takes the Python backend); CIFAR10/100 go to C
through their arrays (an RGB IDX pair keyed by content), equal to torch's
batches, the CIFAR recipe the same at any worker count; FakeData is generated
in C (checked against the formula, recomputed here), torch's own on the
Python backend with backend="python". The MNIST- and CIFAR-format
folders are generated here. Skipped (visibly) without torch and torchvision."""
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
tv = pytest.importorskip("torchvision", reason="torchvision (python3-torchvision) not installed")

from seedpipe.torch import DataLoader  # noqa: E402

T = tv.transforms


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """MNIST/raw and FashionMNIST/raw, train 50 and t10k 21 random images."""
    r = tmp_path_factory.mktemp("tvds")
    rng = np.random.default_rng(5)
    for cls in ("MNIST", "FashionMNIST"):
        raw = r / cls / "raw"
        raw.mkdir(parents=True)
        for part, n in (("train", 50), ("t10k", 21)):
            imgs = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
            labs = rng.integers(0, 10, n, dtype=np.uint8)
            (raw / f"{part}-images-idx3-ubyte").write_bytes(
                struct.pack(">IIII", 0x803, n, 28, 28) + imgs.tobytes())
            (raw / f"{part}-labels-idx1-ubyte").write_bytes(
                struct.pack(">II", 0x801, n) + labs.tobytes())
    return str(r)


def batches(dl):
    return [(x.clone(), y.clone()) for x, y in dl]


@pytest.mark.parametrize("cls", ["MNIST", "FashionMNIST"])
@pytest.mark.parametrize("train", [True, False])
def test_sequential_batches_are_torchs(root, cls, train):
    ds = getattr(tv.datasets, cls)(root, train=train, transform=T.ToTensor())
    want = batches(torch.utils.data.DataLoader(ds, batch_size=8))
    for workers in (0, 2):
        dl = DataLoader(ds, batch_size=8, num_workers=workers)
        assert dl.backend == "c", dl.backend_reason
        got = batches(dl)
        assert len(got) == len(want) and got[0][0].shape == (8, 1, 28, 28)
        for (x, y), (tx, ty) in zip(got, want):
            assert x.dtype == tx.dtype and torch.equal(x, tx) and torch.equal(y, ty)
        dl.close()


def test_random_transform_same_at_any_worker_count(root):
    ds = tv.datasets.MNIST(root, train=True, transform=T.Compose([
        T.RandomCrop(28, padding=4), T.ToTensor()]))
    runs = []
    for workers in (0, 2):
        dl = DataLoader(ds, batch_size=8, shuffle=True, seed=3, num_workers=workers)
        assert dl.backend == "c"
        runs.append(batches(dl))
        dl.close()
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
               for a, b in zip(*runs))
    assert runs[0][0][0].shape == (8, 1, 28, 28)
    plain = batches(DataLoader(tv.datasets.MNIST(root, train=True, transform=T.ToTensor()),
                               batch_size=8, shuffle=True, seed=3))
    assert not all(torch.equal(a[0], b[0]) for a, b in zip(runs[0], plain))   # it crops


def test_changed_data_and_target_transform_refused(root):
    ds = tv.datasets.MNIST(root, train=True, transform=T.ToTensor())
    ds.data[3, 5, 5] ^= 0xFF
    with pytest.raises(ValueError, match=r"dataset: MNIST\.data: .*changed"):
        DataLoader(ds, batch_size=8, backend="c")
    dl = DataLoader(ds, batch_size=8)
    assert dl.backend == "python"                       # the automatic choice
    x, _ = next(iter(dl))
    assert torch.equal(x, next(iter(torch.utils.data.DataLoader(ds, batch_size=8)))[0])
    dl.close()
    ds = tv.datasets.MNIST(root, train=True, transform=T.ToTensor(), target_transform=int)
    with pytest.raises(ValueError, match=r"MNIST\(target_transform=\.\.\.\)"):
        DataLoader(ds, batch_size=8, backend="c")


def _fake_reference(j, c, h, w, classes):
    """Image j (H x W x C bytes) and label of the C FakeData, from the
    formula in docs/determinism.md (section 2, tag 14), in Python."""
    from seedpipe._keys import philox, stream_key
    key = stream_key(0, 14)
    n = c * h * w
    words = []
    for blk in range((n + 15) // 16):
        words += philox((blk, j & 0xFFFFFFFF, j >> 32, 0), key)
    raw = np.array(words, dtype="<u4").view(np.uint8)[:n]
    lab = (philox((0, j & 0xFFFFFFFF, j >> 32, 1), key)[0] * classes) >> 32
    return raw.reshape(h, w, c), lab


@pytest.mark.parametrize("shape", [(3, 10, 7), (1, 6, 9)])
def test_fakedata_generated_in_c(shape):
    ds = tv.datasets.FakeData(size=13, image_size=shape, num_classes=7, transform=T.ToTensor(),
                              random_offset=5)
    runs = []
    for workers in (0, 2):
        dl = DataLoader(ds, batch_size=4, num_workers=workers)
        assert dl.backend == "c", dl.backend_reason
        runs.append(batches(dl))
        dl.close()
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(*runs))
    x = torch.cat([b[0] for b in runs[0]])
    y = torch.cat([b[1] for b in runs[0]])
    assert x.shape == (13,) + shape and x.dtype == torch.float32
    for i in (0, 6, 12):
        img, lab = _fake_reference(i + 5, *shape, 7)
        want = torch.from_numpy(img.transpose(2, 0, 1).astype(np.float32)) / 255
        assert torch.equal(x[i], want) and int(y[i]) == lab
    assert len(set(y.tolist())) > 1 and 0 <= int(y.min()) and int(y.max()) < 7


def test_fakedata_refusals_and_the_python_backend():
    ds = tv.datasets.FakeData(size=20, image_size=(3, 8, 8), transform=T.ToTensor(),
                              target_transform=int)
    with pytest.raises(ValueError, match=r"FakeData\(target_transform=\.\.\.\)"):
        DataLoader(ds, batch_size=6, backend="c")
    ds = tv.datasets.FakeData(size=20, image_size=(2, 8, 8), transform=T.ToTensor())
    with pytest.raises(ValueError, match=r"FakeData\(image_size=\(2, 8, 8\)\)"):
        DataLoader(ds, batch_size=6, backend="c")
    # torch's own values: backend="python" runs FakeData's __getitem__
    ds = tv.datasets.FakeData(size=20, image_size=(3, 8, 8), transform=T.ToTensor())
    dl = DataLoader(ds, batch_size=6, backend="python")
    got = batches(dl)
    want = batches(torch.utils.data.DataLoader(ds, batch_size=6))
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(got, want))
    dl.close()


# ---- CIFAR10 / CIFAR100: their in-memory arrays, as an RGB IDX pair --------

def _pickle_batch(path, imgs, labs, key):
    import pickle
    flat = imgs.transpose(0, 3, 1, 2).reshape(len(imgs), -1)   # the CIFAR layout
    with open(path, "wb") as f:
        pickle.dump({"data": flat, key: labs.tolist()}, f)


@pytest.fixture(scope="module")
def cifar_root(tmp_path_factory):
    """cifar-10-batches-py (5 train batches of 7, a test batch of 11) and
    cifar-100-python (train 30, test 9), random pixels, in the pickle
    layout torchvision reads."""
    import pickle
    r = tmp_path_factory.mktemp("cifar")
    rng = np.random.default_rng(11)
    c10 = r / "cifar-10-batches-py"
    c10.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        n = 11 if name == "test_batch" else 7
        _pickle_batch(c10 / name, rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
                      rng.integers(0, 10, n), "labels")
    with open(c10 / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [f"c{i}" for i in range(10)]}, f)
    c100 = r / "cifar-100-python"
    c100.mkdir()
    for name, n in (("train", 30), ("test", 9)):
        _pickle_batch(c100 / name, rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
                      rng.integers(0, 100, n), "fine_labels")
    with open(c100 / "meta", "wb") as f:
        pickle.dump({"fine_label_names": [f"f{i}" for i in range(100)]}, f)
    return str(r)


@pytest.fixture
def cifar(cifar_root, monkeypatch, tmp_path):
    """The generated files are not torchvision's (their md5 sums differ):
    its integrity check is skipped; the cache goes to a fresh folder."""
    import os.path
    import torchvision.datasets.cifar as tvcifar
    monkeypatch.setattr(tvcifar, "check_integrity", lambda path, md5=None: os.path.isfile(path))
    monkeypatch.setenv("SEEDPIPE_CACHE", str(tmp_path / "cache"))
    return lambda cls, **kw: getattr(tv.datasets, cls)(cifar_root, **kw)


@pytest.mark.parametrize("cls", ["CIFAR10", "CIFAR100"])
@pytest.mark.parametrize("train", [True, False])
def test_cifar_sequential_batches_are_torchs(cifar, cls, train):
    ds = cifar(cls, train=train, transform=T.ToTensor())
    assert ds.data.shape[1:] == (32, 32, 3)
    want = batches(torch.utils.data.DataLoader(ds, batch_size=4))
    for workers in (0, 2):
        dl = DataLoader(ds, batch_size=4, num_workers=workers)
        assert dl.backend == "c", dl.backend_reason
        got = batches(dl)
        assert len(got) == len(want) and got[0][0].shape == (4, 3, 32, 32)
        for (x, y), (tx, ty) in zip(got, want):
            assert x.dtype == tx.dtype and torch.equal(x, tx) and torch.equal(y, ty)
        dl.close()
    if cls == "CIFAR100" and train:
        assert max(int(y.max()) for _, y in want) > 9   # labels past 0..9 kept


def test_cifar_recipe_runs_on_c_the_same_at_any_worker_count(cifar):
    recipe = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))])
    ds = cifar("CIFAR10", train=True, transform=recipe)
    runs = []
    for workers in (0, 2):
        dl = DataLoader(ds, batch_size=5, shuffle=True, seed=9, num_workers=workers)
        assert dl.backend == "c", dl.backend_reason
        runs.append(batches(dl))
        dl.close()
    assert len(runs[0]) == 7 and runs[0][0][0].shape == (5, 3, 32, 32)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(*runs))
    plain = cifar("CIFAR10", train=True, transform=T.Compose([
        T.ToTensor(), T.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))]))
    base = batches(DataLoader(plain, batch_size=5, shuffle=True, seed=9))
    assert all(torch.equal(a[1], b[1]) for a, b in zip(runs[0], base))   # same order
    assert not all(torch.equal(a[0], b[0]) for a, b in zip(runs[0], base))   # it crops


def test_cifar_changed_arrays_are_read_as_torch_reads_them(cifar, tmp_path):
    ds = cifar("CIFAR10", train=False, transform=T.ToTensor())
    before = batches(DataLoader(ds, batch_size=4))
    ds.data = ds.data[::-1].copy()
    ds.data[0, 3, 4, 1] ^= 0xFF
    ds.targets = [(t + 1) % 10 for t in ds.targets]
    dl = DataLoader(ds, batch_size=4)
    assert dl.backend == "c", dl.backend_reason
    got = batches(dl)
    want = batches(torch.utils.data.DataLoader(ds, batch_size=4))
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(got, want))
    assert not torch.equal(got[0][0], before[0][0])
    dl.close()
    assert len(list((tmp_path / "cache" / "tv-arrays").iterdir())) == 2   # keyed by content


def test_cifar_refusals_name_the_attribute(cifar):
    ds = cifar("CIFAR100", train=False, transform=T.ToTensor(), target_transform=int)
    with pytest.raises(ValueError, match=r"CIFAR100\(target_transform=\.\.\.\)"):
        DataLoader(ds, batch_size=4, backend="c")
    assert DataLoader(ds, batch_size=4).backend == "python"
    ds = cifar("CIFAR10", train=False, transform=T.ToTensor())
    ds.data = ds.data.astype(np.float32)
    with pytest.raises(ValueError, match=r"dataset: CIFAR10\.data: .*uint8"):
        DataLoader(ds, batch_size=4, backend="c")
    ds = cifar("CIFAR10", train=False, transform=T.ToTensor())
    ds.targets = ds.targets[:-1]
    with pytest.raises(ValueError, match=r"dataset: CIFAR10\.targets"):
        DataLoader(ds, batch_size=4, backend="c")


def test_idx_paths_keep_their_channels(root, cifar):
    grey = f"{root}/MNIST/raw/train-images-idx3-ubyte"
    x, _ = next(iter(DataLoader(grey, batch_size=8, transform=T.ToTensor())))
    want, _ = next(iter(torch.utils.data.DataLoader(
        tv.datasets.MNIST(root, train=True, transform=T.ToTensor()), batch_size=8)))
    assert x.shape == (8, 1, 28, 28) and torch.equal(x, want)
    ds = cifar("CIFAR10", train=False, transform=T.ToTensor())
    DataLoader(ds, batch_size=4).close()            # writes the RGB pair
    from seedpipe import _tvdatasets
    rgb = _tvdatasets.array_source(ds)
    assert _tvdatasets.channels_of(rgb) == 3 and _tvdatasets.channels_of(grey) == 1
    x, _ = next(iter(DataLoader(rgb, batch_size=4, transform=T.ToTensor())))
    assert torch.equal(x, next(iter(torch.utils.data.DataLoader(ds, batch_size=4)))[0])


def test_fakedata_spec_as_a_path_keeps_one_channel():
    spec = "fakedata:size=6,image=1x5x4,classes=3"
    x, y = next(iter(DataLoader(spec, batch_size=6, transform=T.ToTensor())))
    assert x.shape == (6, 1, 5, 4)
    for i in range(6):
        img, lab = _fake_reference(i, 1, 5, 4, 3)
        assert torch.equal(x[i, 0], torch.from_numpy(img[:, :, 0].astype(np.float32)) / 255)
        assert int(y[i]) == lab
