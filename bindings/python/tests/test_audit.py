"""seedpipe.audit(): worker-count invariance of any loader.

- numpy-only iterables (no torch needed): the three verdicts, dict batches,
  the first divergent batch / sample / tensor, short runs, argument errors;
- a PyTorch DataLoader seeded as the PyTorch docs recommend (torch.manual_seed,
  a seeded generator, worker_init_fn seeding numpy/random from
  torch.initial_seed()) with a random flip and crop drawn with torch's RNG in
  __getitem__: the shuffle order survives num_workers 0 -> 2, the
  augmentation does not, and audit says so (skipped without torch);
- a seedpipe.Loader on a shapes dataset: fully invariant at 0 and 2 workers;
- the CLI twin `python -m seedpipe.audit module:function` (exit 0 / 1).
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import seedpipe
from seedpipe import audit as audit_fn     # the package re-exports the function
from seedpipe.audit import AUG, CONTENT, COUNT, FULL, ORDER, AuditReport

PKG = os.path.dirname(os.path.dirname(os.path.abspath(seedpipe.__file__)))


def _torch():
    if any(s in os.environ.get("LD_PRELOAD", "") for s in ("asan", "tsan", "ubsan")):
        pytest.skip("torch is not run under a sanitizer runtime preload")
    return pytest.importorskip("torch")


# ------------------------------------------------------------ numpy-only

def numpy_loader(order_depends_on_workers=False, aug_depends_on_workers=False, n=48, bs=8,
                 as_dict=False):
    """make_loader(w) for a numpy pipeline: shuffled indices, images derived from
    the index plus 'augmentation' noise; either may be made to depend on w."""
    def make(w):
        perm = np.random.default_rng(7 + (w if order_depends_on_workers else 0)).permutation(n)
        def gen():
            for s in range(0, n, bs):
                idx = perm[s:s + bs]
                imgs = np.stack([np.full((3, 4, 4), i, np.uint8) for i in idx])
                for j, i in enumerate(idx):
                    worker = (j % w) if (aug_depends_on_workers and w) else 0
                    noise = np.random.default_rng([int(i), 11 + worker]).integers(0, 9, (3, 4, 4))
                    imgs[j] += noise.astype(np.uint8)
                labels = (idx % 5).astype(np.int64)
                if as_dict:
                    yield {"image": imgs.astype(np.float32) / 255, "label": labels, "index": idx}
                else:
                    yield imgs, labels
        return gen()
    return make


def test_numpy_fully_invariant():
    assert seedpipe.audit is audit_fn and callable(audit_fn)
    r = seedpipe.audit(numpy_loader(), workers=[0, 1, 2, 4], batches=6)
    assert isinstance(r, AuditReport)
    assert r.ok and r.verdict == FULL and r.first is None
    assert r.batches == 6 and r.agree == [[0, 1, 2, 4]] * 6
    assert r.order_keys == ["1"] and r.content_keys == ["0"]
    s = str(r)
    assert "verdict: fully invariant across worker counts" in s and "DIFF" not in s


def test_numpy_augmentation_diverges():
    r = seedpipe.audit(numpy_loader(aug_depends_on_workers=True), workers=[0, 1, 2], batches=6)
    assert not r.ok and r.verdict == AUG
    # w=1 draws like w=0 (worker 0 only); w=2 draws sample 1 of every batch on worker 1
    assert r.agree == [[0, 1]] * 6
    assert r.order_ok == {0: True, 1: True, 2: True} and r.content_ok[2] is False
    assert r.first == {"batch": 0, "worker": 2, "sample": 1, "tensor": ["0"], "kind": "content"}
    assert r.diff[(0, 2)] == ["0"]
    s = str(r)
    assert "order invariant; augmentation NOT invariant" in s
    assert "first divergence: batch 0, sample 1, w=2 vs w=0, tensor 0 (content)" in s


def test_numpy_order_diverges_dict_batches():
    r = seedpipe.audit(numpy_loader(order_depends_on_workers=True, as_dict=True),
                       workers=[0, 2], batches=4)
    assert not r.ok and r.verdict == ORDER
    assert sorted(r.order_keys) == ["index", "label"] and r.content_keys == ["image"]
    assert r.first["batch"] == 0 and r.first["kind"] == "order"
    assert "index" in r.first["tensor"] and "image" in r.first["tensor"]
    assert "order NOT invariant" in str(r)


def test_numpy_explicit_order_and_no_order_tensor():
    # only images: nothing tells order from augmentation
    def make(w):
        return [np.full((2, 3), w, np.float32) for _ in range(3)]
    r = seedpipe.audit(make, workers=[0, 1], batches=8)
    assert r.verdict == CONTENT and r.batches == 3 and r.agree == [[0]] * 3
    # naming the order tensor explicitly overrides the guess
    r = seedpipe.audit(numpy_loader(aug_depends_on_workers=True), workers=[0, 2], batches=2,
                       order=["1"])
    assert r.verdict == AUG
    with pytest.raises(ValueError, match="no tensor 'nope'"):
        seedpipe.audit(numpy_loader(), workers=[0, 2], batches=2, order=["nope"])


def test_numpy_batch_count_differs():
    def make(w):
        return [(np.zeros((2, 2)), np.arange(2))] * (3 + w)
    r = seedpipe.audit(make, workers=[0, 1], batches=8)
    assert not r.ok and r.verdict == COUNT and r.counts == {0: 3, 1: 4}
    assert r.first["batch"] == 3 and "missing" in str(r)


def test_arguments():
    for kw, msg in ((dict(workers=[]), "at least one"), (dict(workers=[0, 0]), "duplicates"),
                    (dict(workers=[-1]), ">= 0"), (dict(batches=0), "batches")):
        with pytest.raises(ValueError, match=msg):
            seedpipe.audit(numpy_loader(), **kw)
    with pytest.raises(ValueError, match="make_loader"):
        seedpipe.audit(None)


def test_object_arrays_hashed_by_value():
    # lists of strings (file names) become object/str arrays: hashed by value, not pointer
    def make(w):
        return [{"name": [f"img{i}.png" for i in range(4)], "mixed": np.array([1, "a"], object),
                 "x": np.arange(4)} for _ in range(2)]
    r = seedpipe.audit(make, workers=[0, 1], batches=2)
    assert r.ok, str(r)


def test_loader_closed():
    closed = []

    class L:
        def __init__(self, w):
            self.w = w

        def __iter__(self):
            return iter([np.arange(4)] * 10)

        def close(self):
            closed.append(self.w)
    assert seedpipe.audit(L, workers=[0, 3], batches=2).ok
    assert closed == [0, 3]


# ------------------------------------------------------------ torch

class AugmentedImages:
    """64 deterministic 3x16x16 images; __getitem__ draws a random flip and a
    random crop offset (from a 20x20 padded copy) with torch's global RNG, as
    torchvision's RandomHorizontalFlip / RandomCrop do. Returns (image, label, index)."""

    def __init__(self, n=64):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        g = torch.Generator().manual_seed(1000 + i)          # the stored image: fixed per index
        img = torch.randint(0, 256, (3, 16, 16), generator=g, dtype=torch.uint8)
        img = torch.nn.functional.pad(img, (2, 2, 2, 2))
        if torch.rand(1).item() < 0.5:                      # augmentation: torch's RNG
            img = img.flip(-1)
        y, x = torch.randint(0, 5, (2,)).tolist()
        img = img[:, y:y + 16, x:x + 16].float() / 255
        return img, i % 10, i


def _seed_worker(worker_id):
    import random
    import torch
    s = torch.initial_seed() % 2**32
    np.random.seed(s)
    random.seed(s)


def torch_make_loader(num_workers):
    import torch
    torch.manual_seed(0)
    g = torch.Generator()
    g.manual_seed(0)
    return torch.utils.data.DataLoader(AugmentedImages(), batch_size=8, shuffle=True,
                                       num_workers=num_workers, worker_init_fn=_seed_worker,
                                       generator=g)


def test_torch_dataloader_augmentation_not_invariant():
    _torch()
    r = seedpipe.audit(torch_make_loader, workers=[0, 2], batches=4)
    print(r)
    assert not r.ok
    assert r.verdict == AUG
    assert r.order_keys == ["1", "2"] and r.content_keys == ["0"]
    assert r.order_ok[2] and not r.content_ok[2]
    assert r.first["batch"] == 0 and r.first["kind"] == "content" and r.first["tensor"] == ["0"]
    assert r.agree.count([0]) >= 3          # (almost) every augmented batch differs
    # the same worker count twice is reproducible: the divergence is the seeding, not noise
    assert seedpipe.audit(torch_make_loader, workers=[2], batches=2).ok
    again = seedpipe.audit(torch_make_loader, workers=[0, 2], batches=4)
    assert again.diff == r.diff and again.first == r.first


def test_torch_dataloader_without_augmentation_invariant():
    torch = _torch()

    class Plain(AugmentedImages):
        def __getitem__(self, i):
            g = torch.Generator().manual_seed(1000 + i)
            return torch.randint(0, 256, (3, 8, 8), generator=g, dtype=torch.uint8), i % 10

    def make(w):
        g = torch.Generator()
        g.manual_seed(3)
        return torch.utils.data.DataLoader(Plain(32), batch_size=8, shuffle=True,
                                           num_workers=w, generator=g)
    r = seedpipe.audit(make, workers=[0, 2], batches=4)
    assert r.ok and r.verdict == FULL


# ------------------------------------------------------------ seedpipe

def test_seedpipe_loader_fully_invariant(shapes):
    def make(w):
        return seedpipe.Loader(shapes, pipeline="shapes-train", seed=3, batch_size=8,
                               workers=w)
    r = seedpipe.audit(make, workers=[0, 1, 2], batches=6)
    assert r.ok, str(r)
    assert r.verdict == FULL and r.batches == 6 and r.agree == [[0, 1, 2]] * 6
    assert r.order_keys == ["1"]        # labels int32; images uint8 NCHW are content
    # a different seed at one worker count is caught as an augmentation change
    def make2(w):
        return seedpipe.Loader(shapes, pipeline="shapes-train", seed=3 + (w == 2),
                               batch_size=8, workers=w)
    assert not seedpipe.audit(make2, workers=[0, 2], batches=3).ok


def test_seedpipe_loader_wrapped_in_torch(shapes):
    """The seedpipe loader's batches as torch tensors (seedpipe.torch.to_tensors)."""
    _torch()
    from seedpipe.torch import to_tensors

    def make(w):
        ld = seedpipe.Loader(shapes, pipeline="shapes-train", seed=1, batch_size=8, workers=w,
                             dtype="float32")

        def gen():
            with ld:
                for images, labels in ld:
                    yield to_tensors(images, labels)
        return gen()
    r = seedpipe.audit(make, workers=[0, 2], batches=4)
    assert r.ok and r.verdict == FULL, str(r)


# ------------------------------------------------------------ CLI twin

CLI_MODULE = textwrap.dedent("""
    import numpy as np

    def invariant(num_workers):
        return [(np.arange(12, dtype=np.float32).reshape(3, 4) + b, np.arange(3) + b)
                for b in range(5)]

    def augmented(num_workers):
        return [(np.full((3, 4), num_workers + b, np.float32), np.arange(3) + b)
                for b in range(5)]
""")


def _cli(tmp_path, *args):
    (tmp_path / "audit_target.py").write_text(CLI_MODULE)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PKG, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "seedpipe.audit", *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)


def test_cli_invariant(tmp_path):
    p = _cli(tmp_path, "audit_target:invariant", "--workers", "0,2", "--batches", "4")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verdict: fully invariant across worker counts" in p.stdout
    assert "w=0" in p.stdout and "w=2" in p.stdout and "RuntimeWarning" not in p.stderr


def test_cli_divergent(tmp_path):
    p = _cli(tmp_path, "audit_target:augmented", "--workers", "0,1,2")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "order invariant; augmentation NOT invariant across worker counts" in p.stdout
    assert "first divergence: batch 0, sample 0, w=1 vs w=0, tensor 0 (content)" in p.stdout
    # a file path works as well as a module name
    p = _cli(tmp_path, str(tmp_path / "audit_target.py") + ":invariant", "--batches", "2")
    assert p.returncode == 0, p.stdout + p.stderr


def test_cli_usage_errors(tmp_path):
    assert _cli(tmp_path, "no_colon").returncode == 2
    p = _cli(tmp_path, "audit_target:missing")
    assert p.returncode == 2 and "missing" in p.stderr
    assert _cli(tmp_path, "audit_target:invariant", "--workers", "a,b").returncode == 2
