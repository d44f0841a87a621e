"""Batch mixes keyed by the batch (issue 39 item 3; docs/determinism.md
section 11a; docs/python.md "Batch mixes"): seedpipe.torch.MixUp, CutMix and
RandomChoice as a DataLoader's collate_fn, on the C path and the Python
backend.

- lambda and the box recomputed from the spec alone (tests/philox_ref.py's
  Philox, tests/detmath_ref.py's det_log/det_exp) equal the package's bit
  for bit;
- a mixed batch against a float64 computation of the formula within the
  stated float32 bound, and bit-equal to a float32 computation of it;
- CutMix's lambda is the fraction of pixels not pasted; targets' rows sum
  to 1;
- the same batches at num_workers 0, 1 and 3, after a resume at another
  worker count, and on two ranks (each rank's slice mixed within itself,
  with the global batch's lambda and box);
- MixUp's lambda has Beta(alpha, alpha)'s mean and variance (5 standard
  errors over 4000 batches);
- torchvision v2's classes mapped by name (stand-ins: torchvision 0.14 has
  no v2 MixUp), refusals by name."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
tv = pytest.importorskip("torchvision", reason="torchvision (python3-torchvision) not installed")

from seedpipe import _batchmix as BM  # noqa: E402
from seedpipe.torch import CutMix, DataLoader, MixUp, RandomChoice  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests"))
import philox_ref as R  # noqa: E402

T = tv.transforms
TRAIN = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor(),
                   T.Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))])
U = 2.0 ** -24          # float32's unit roundoff
K = 10                  # num_classes (make-shapes labels are below it)


@pytest.fixture(scope="module")
def data(tmp_path_factory, binary):
    d = tmp_path_factory.mktemp("mix") / "shapes64"
    subprocess.run([binary, "make-shapes", str(d), "--count", "64", "--size", "32", "--seed",
                    "11"], check=True, capture_output=True)
    return str(d)


# ---- the spec, recomputed independently ---------------------------------------------

def ref_params(op, seed, epoch, b, h, w):
    """(kind, lambda, box) of op for batch b, from tests/philox_ref.py's
    batch_* functions (written from section 11a)."""
    if isinstance(op, RandomChoice):
        op = op.transforms[R.batch_pick(seed, epoch, b, op.p)]
    lam = R.batch_beta(seed, epoch, b, op.alpha)
    if isinstance(op, MixUp):
        return "mixup", lam, None
    box, lam = R.batch_box(seed, epoch, b, lam, h, w)
    return "cutmix", lam, box


@pytest.mark.parametrize("alpha", [0.2, 1.0, 2.5])
def test_draws_follow_the_spec(alpha):
    """lambda and the box: the package equals the spec recomputed from
    philox_ref/detmath_ref, bit for bit, over many batches and epochs."""
    ops = [MixUp(alpha=alpha, num_classes=K), CutMix(alpha=alpha, num_classes=K),
           RandomChoice([MixUp(alpha=alpha, num_classes=K), CutMix(alpha=alpha,
                                                                  num_classes=K)], p=[1, 3])]
    for seed in (0, 42, 2**64 - 1):
        for epoch in (0, 7):
            for b in (0, 1, 5, 2**33 + 3):
                for op in ops:
                    p = op.params(seed, epoch, b, (24, 20))
                    kind, lam, box = ref_params(op, seed, epoch, b, 24, 20)
                    assert (p["op"], p["lam"], p["box"]) == (kind, lam, box)
                    assert 0.0 <= lam <= 1.0


def test_known_answers():
    """determinism.md section 11a's example, from the package and from
    philox_ref (so the page cannot drift from either)."""
    from seedpipe import _keys
    assert R.stream_key(42, 12) == tuple(_keys.stream_key(42, 12)) == (0x61722e9d, 0x2c42e4d2)
    assert R.batch_block(42, 0, 0, 1, 0) == (0x1301706f, 0x81553a7e, 0x51a12781, 0x99ffc341)
    assert R.batch_beta(42, 0, 0, 1.0) == 0.5051259479702099
    assert R.batch_beta(42, 0, 0, 0.2) == 0.8676051318769809
    assert MixUp(alpha=1.0, num_classes=2).params(42, 0, 0, (224, 224))["lam"] == \
        0.5051259479702099
    p = CutMix(alpha=1.0, num_classes=2).params(42, 0, 0, (224, 224))
    assert (p["box"], p["lam"]) == ((127, 135, 224, 224), 0.8279456313775511)
    assert R.batch_pick(42, 0, 0, [1.0, 1.0]) == 1


# ---- the C path ---------------------------------------------------------------------

def loader(data, op, workers=0, **kw):
    kw.setdefault("batch_size", 8)
    return DataLoader(data, shuffle=True, num_workers=workers, transform=TRAIN, seed=3,
                      collate_fn=op, **kw)


def batches(dl, epochs=(0, 1)):
    out = []
    for e in epochs:
        dl.set_epoch(e)
        for x, y in dl:
            info = dl.batch_info
            out.append((x, y, info.epoch, info.index))
    return out


def check_batch(op, x, y, mx, my, seed, epoch, b):
    """(mx, my), the mixed batch of raw (x, y), against the spec."""
    h, w = x.shape[-2:]
    kind, lam, box = ref_params(op, seed, epoch, b, h, w)
    k = K
    onehot = np.eye(k, dtype=np.float64)[y.numpy()]
    rolled = np.roll(onehot, 1, axis=0)
    t64 = lam * onehot + (1.0 - lam) * rolled
    l32, m32 = np.float32(lam), np.float32(1.0 - lam)
    t32 = (np.roll(onehot.astype(np.float32), 1, 0) * m32) + (onehot.astype(np.float32) * l32)
    assert my.dtype == torch.float32 and tuple(my.shape) == (x.shape[0], k)
    assert np.array_equal(my.numpy(), t32)
    assert np.all(np.abs(my.numpy() - t64) <= 4 * U * (lam * onehot + (1 - lam) * rolled))
    assert np.all(np.abs(my.numpy().astype(np.float64).sum(1) - 1.0) <= 2 * U)
    xn = x.numpy()
    xr = np.roll(xn, 1, axis=0)
    assert lam == 1.0 or not torch.equal(mx, x)      # something was mixed
    if kind == "mixup":
        # float32, as torchvision computes it: roll * f32(1 - lam) + x * f32(lam)
        assert np.array_equal(mx.numpy(), (xr * m32) + (xn * l32))
        ref = lam * xn.astype(np.float64) + (1.0 - lam) * xr.astype(np.float64)
        # each of the two products and the sum rounded once, lam and 1 - lam
        # rounded to float32: |error| <= (3u + 3u^2 + u^3)(lam|x| + (1-lam)|x'|) < 4u(...)
        bound = 4 * U * (lam * np.abs(xn) + (1.0 - lam) * np.abs(xr)) + 2.0 ** -126
        assert np.all(np.abs(mx.numpy() - ref) <= bound)
    else:
        x1, y1, x2, y2 = box
        mask = np.zeros((h, w), bool)
        mask[y1:y2, x1:x2] = True
        exp = np.where(mask, xr, xn)
        assert np.array_equal(mx.numpy(), exp)
        # lambda is the fraction of pixels not pasted
        assert lam == 1.0 - mask.sum() / float(h * w)
    return kind


@pytest.mark.parametrize("which", ["mixup", "cutmix", "choice"])
def test_c_path_matches_the_reference(data, which):
    op = {"mixup": MixUp(alpha=1.0, num_classes=K),
          "cutmix": CutMix(alpha=1.0, num_classes=K),
          "choice": RandomChoice([MixUp(alpha=0.8, num_classes=K),
                                  CutMix(alpha=1.0, num_classes=K)])}[which]
    raw = batches(loader(data, None))
    mixed = batches(loader(data, op))
    assert len(raw) == len(mixed) == 16
    kinds = set()
    for (x, y, e, b), (mx, my, e2, b2) in zip(raw, mixed):
        assert (e, b) == (e2, b2)
        assert x.dtype == torch.float32
        kinds.add(check_batch(op, x, y, mx, my, 3, e, b))
    if which == "choice":
        assert kinds == {"mixup", "cutmix"}


def equal(a, b):
    return len(a) == len(b) and all(
        torch.equal(x, u) and torch.equal(y, v) and (e, i) == (f, j)
        for (x, y, e, i), (u, v, f, j) in zip(a, b))


def test_workers_and_resume(data):
    """The same mixed batches at 0, 1 and 3 workers, and resumed at another
    worker count after 3 batches."""
    def op():
        return RandomChoice([MixUp(alpha=1.0, num_classes=K), CutMix(alpha=1.0,
                                                                     num_classes=K)])
    runs = {w: batches(loader(data, op(), w)) for w in (0, 1, 3)}
    assert equal(runs[0], runs[1]) and equal(runs[0], runs[3])
    dl = loader(data, op(), 3)
    dl.set_epoch(1)
    it = iter(dl)
    head = [next(it) for _ in range(3)]
    state = dl.state_dict()
    dl.close()
    dl2 = loader(data, op(), 1)
    dl2.load_state_dict(state)
    tail = [(x, y, dl2.batch_info.epoch, dl2.batch_info.index) for x, y in dl2]
    full = runs[0][8:]
    assert all(torch.equal(x, f[0]) for (x, _), f in zip(head, full))
    assert equal(tail, full[3:])


def test_ranks_draw_the_global_batch(data):
    """world 2: each rank's batch has the global batch's index, hence world
    1's lambda and box; its slice (half of world 1's) is mixed within itself
    (the roll is over what the process collates, as torchvision's is)."""
    op = RandomChoice([MixUp(alpha=1.0, num_classes=K), CutMix(alpha=1.0, num_classes=K)])
    one = batches(loader(data, None, batch_size=8))
    for r in (0, 1):
        raw = batches(loader(data, None, batch_size=4, rank=r, world=2))
        mixed = batches(loader(data, op, batch_size=4, rank=r, world=2))
        assert len(raw) == len(mixed) == len(one)
        for (x, y, e, b), (mx, my, _, b2), (gx, _, ge, gb) in zip(raw, mixed, one):
            assert (e, b) == (ge, gb) == (e, b2)
            assert torch.equal(x, gx[4 * r:4 * r + 4])
            h, w = x.shape[-2:]
            assert op.params(3, e, b, (h, w)) == op.params(3, ge, gb, (h, w))
            check_batch(op, x, y, mx, my, 3, e, b)


@pytest.mark.parametrize("alpha", [0.2, 1.0, 2.0])
def test_mixup_lambda_is_beta(alpha):
    """Over N = 4000 batches, lambda's sample mean and variance are within 5
    standard errors of Beta(alpha, alpha)'s: mean 1/2, variance
    s2 = 1/(4(2 alpha + 1)); SE(mean) = sqrt(s2/N), SE(var) = sqrt((mu4 -
    s2^2)/N) with mu4 = s2^2 (3 - 6/(2 alpha + 3)) (the symmetric Beta's
    excess kurtosis is -6/(2 alpha + 3)). A false failure has probability
    below 1e-5 per check."""
    op, n = MixUp(alpha=alpha, num_classes=2), 4000
    lam = np.array([op.params(17, 2, b, (8, 8))["lam"] for b in range(n)])
    s2 = 1.0 / (4.0 * (2.0 * alpha + 1.0))
    mu4 = s2 * s2 * (3.0 - 6.0 / (2.0 * alpha + 3.0))
    assert abs(lam.mean() - 0.5) <= 5 * math.sqrt(s2 / n)
    assert abs(lam.var() - s2) <= 5 * math.sqrt((mu4 - s2 * s2) / n)
    assert lam.min() >= 0.0 and lam.max() <= 1.0


def test_refusals(data):
    u8 = T.Compose([T.CenterCrop(24), T.PILToTensor()])
    with pytest.raises(ValueError, match=r"collate_fn=MixUp.*ToTensor\(\)"):
        DataLoader(data, batch_size=4, transform=u8, collate_fn=MixUp(num_classes=K))
    with pytest.raises(ValueError, match="collate_fn"):
        DataLoader(data, batch_size=4, transform=TRAIN, collate_fn=lambda b: b, backend="c")
    with pytest.raises(ValueError, match="layout='nchw'"):
        DataLoader(data, batch_size=4, transform=TRAIN, layout="nhwc",
                   collate_fn=CutMix(num_classes=K))
    with pytest.raises(ValueError, match="num_classes=3, and the batch has label"):
        MixUp(num_classes=3).apply(torch.zeros(2, 3, 4, 4), torch.tensor([0, 7]), seed=0,
                                   epoch=0, index=0)
    with pytest.raises(ValueError, match="num_classes="):
        BM.as_batch_op(_standin("CutMix", "torchvision.transforms.v2._augment", alpha=1.0,
                                num_classes=None))
    with pytest.raises(ValueError, match="alpha"):
        MixUp(alpha=0, num_classes=K)
    with pytest.raises(ValueError, match="num_classes"):
        CutMix(num_classes=0)
    with pytest.raises(RuntimeError, match="apply"):
        MixUp(num_classes=K)(torch.zeros(2, 3, 4, 4), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="float"):
        MixUp(num_classes=K).apply(torch.zeros(2, 3, 4, 4, dtype=torch.uint8),
                                   torch.zeros(2, dtype=torch.long), seed=0, epoch=0, index=0)


# ---- the Python backend -------------------------------------------------------------

class Noise(torch.utils.data.Dataset):
    """A dataset of its own (the Python backend): a random image per sample
    (torch's generator, seeded by seedpipe per sample), label i % K."""

    def __len__(self):
        return 20

    def __getitem__(self, i):
        return torch.rand(3, 8, 6), i % K


@pytest.mark.parametrize("which", ["mixup", "cutmix"])
def test_python_backend(which):
    op = (MixUp if which == "mixup" else CutMix)(alpha=1.0, num_classes=K)

    def run(workers, collate):
        dl = DataLoader(Noise(), batch_size=4, shuffle=True, num_workers=workers, seed=5,
                        collate_fn=collate)
        assert dl.backend == "python"
        out = []
        for e in (0, 1):
            dl.set_epoch(e)
            out += [(x, y, e, b) for b, (x, y) in enumerate(dl)]
        dl.close()
        return out
    raw = run(0, None)
    runs = [run(w, op) for w in (0, 2)]
    assert equal(runs[0], runs[1])
    # torchvision's pattern: a collate_fn of your own calling op(images, labels)
    from torch.utils.data import default_collate
    assert equal(run(2, lambda batch: op(*default_collate(batch))), runs[0])
    for (x, y, e, b), (mx, my, _, _) in zip(raw, runs[0]):
        check_batch(op, x, y, mx, my, 5, e, b)


def test_python_backend_refuses_unbatched():
    with pytest.raises(ValueError, match="batch_size=None"):
        DataLoader(Noise(), batch_size=None, collate_fn=MixUp(num_classes=K))


def test_python_backend_resume():
    """Resumed after 2 batches at another worker count: the same mixes."""
    op = CutMix(alpha=1.0, num_classes=K)

    def make(workers):
        return DataLoader(Noise(), batch_size=4, shuffle=True, num_workers=workers, seed=6,
                          collate_fn=op)
    dl = make(0)
    full = list(dl)
    dl.close()
    dl = make(2)
    it = iter(dl)
    head = [next(it), next(it)]
    state = dl.state_dict()
    dl.close()
    dl = make(1)
    dl.load_state_dict(state)
    tail = list(dl)
    dl.close()
    assert len(head) + len(tail) == len(full) == 5
    for (x, y), (u, v) in zip(head + tail, full):
        assert torch.equal(x, u) and torch.equal(y, v)


def test_python_backend_ranks_and_dicts():
    """The Python backend under world 2: each rank's collate call is keyed by
    the global batch (world 1's lambda and box), its slice rolled within
    itself; a dict batch with a 'labels' key, and labels_getter=."""
    op = RandomChoice([MixUp(alpha=1.0, num_classes=K), CutMix(alpha=1.0, num_classes=K)])

    def run(ds, collate, **kw):
        dl = DataLoader(ds, shuffle=True, seed=8, collate_fn=collate, **kw)
        assert dl.backend == "python"
        out = []
        for b, batch in enumerate(dl):
            x, y = (batch["img"], batch["labels"]) if isinstance(batch, dict) else batch
            out.append((x, y, 0, b))
        dl.close()
        return out
    one = run(Noise(), None, batch_size=4)
    for r in (0, 1):
        raw = run(Noise(), None, batch_size=2, rank=r, world=2)
        mixed = run(Noise(), op, batch_size=2, rank=r, world=2, num_workers=1)
        assert len(raw) == len(mixed) == len(one) == 5
        for (x, y, e, b), (mx, my, _, _), (gx, _, _, _) in zip(raw, mixed, one):
            assert torch.equal(x, gx[2 * r:2 * r + 2])
            check_batch(op, x, y, mx, my, 8, e, b)
    raw = run(Noise(), None, batch_size=4)
    for getter in ("default", lambda batch: batch["labels"]):
        d_op = MixUp(alpha=1.0, num_classes=K, labels_getter=getter)
        mixed = run(Dicts(), d_op, batch_size=4)
        for (x, y, e, b), (mx, my, _, _) in zip(raw, mixed):
            check_batch(d_op, x, y, mx, my, 8, e, b)


class Dicts(Noise):
    def __getitem__(self, i):
        return {"img": torch.rand(3, 8, 6), "labels": i % K, "name": f"s{i}"}


# ---- torchvision v2's classes -------------------------------------------------------

def _standin(name, module, **attrs):
    cls = type(name, (), {"__module__": module})
    obj = cls()
    obj.__dict__.update(attrs)
    return obj


def test_torchvision_classes_map(data):
    """torchvision v2's MixUp/CutMix/RandomChoice as collate_fn map to
    seedpipe's by class name (stand-ins named as torchvision's: 0.14 has no
    v2 MixUp; the real classes are tested below where torchvision has them)."""
    mix = _standin("MixUp", "torchvision.transforms.v2._augment", alpha=0.5, num_classes=K)
    cut = _standin("CutMix", "torchvision.transforms.v2._augment", alpha=2.0, num_classes=K)
    choice = _standin("RandomChoice", "torchvision.transforms.v2._container",
                      transforms=[mix, cut], p=[0.25, 0.75])
    op = BM.as_batch_op(choice)
    assert isinstance(op, RandomChoice) and op.p == [0.25, 0.75]
    assert (op.transforms[0].alpha, op.transforms[1].alpha) == (0.5, 2.0)
    ours = RandomChoice([MixUp(alpha=0.5, num_classes=K), CutMix(alpha=2.0, num_classes=K)],
                        p=[0.25, 0.75])
    assert equal(batches(loader(data, choice)), batches(loader(data, ours)))
    other = _standin("MixUp", "mylib.aug", alpha=1.0, num_classes=K)
    assert BM.as_batch_op(other) is None


def test_real_torchvision_v2():
    v2 = pytest.importorskip("torchvision.transforms.v2",
                             reason="torchvision.transforms.v2 not in this torchvision")
    if not hasattr(v2, "MixUp"):
        pytest.skip(f"torchvision {tv.__version__} has no transforms.v2.MixUp")
    op = BM.as_batch_op(v2.RandomChoice([v2.MixUp(alpha=0.5, num_classes=K),
                                         v2.CutMix(num_classes=K)]))
    assert isinstance(op, RandomChoice) and op.transforms[0].alpha == 0.5
