"""torchvision's dataset objects through the drop-in (issue 39 item 5):
MNIST and FashionMNIST are read by the C path from their own IDX files, one
channel, (n, 1, 28, 28) equal to torch's batches in the sequential order at
0 and 2 workers; a transform with random ops runs there too, the same at
any worker count; a changed .data or a target_transform is refused by name
(the automatic choice then takes the Python backend); FakeData goes to the
Python backend and yields torch's batches. The MNIST-format folders are
generated here. Skipped (visibly) without torch and torchvision."""
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


def test_fakedata_through_the_python_backend():
    ds = tv.datasets.FakeData(size=20, image_size=(3, 8, 8), transform=T.ToTensor())
    dl = DataLoader(ds, batch_size=6)
    assert dl.backend == "python"
    got = batches(dl)
    want = batches(torch.utils.data.DataLoader(ds, batch_size=6))
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(got, want))
    dl.close()
