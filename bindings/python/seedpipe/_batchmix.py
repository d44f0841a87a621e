"""Batch mixes: MixUp, CutMix and RandomChoice of them, keyed by the batch
(docs/determinism.md section 11a; docs/python.md "Batch mixes").

torchvision v2's MixUp and CutMix draw lambda (and CutMix's box) from
torch's global generator, so a batch's mix depends on what ran before it in
that process. Here every number is drawn from the batch's own Philox key:

    K_12 = philox((12, 0, 0, 0), K)[0..1]              "python batch ops"
    block(p, t) = philox((b & 0xffffffff, b >> 32, e, 256*p + t), K_12)

b is the global batch index (the same on every rank), e the epoch, p the
purpose (0 RandomChoice's pick, 1 and 2 the two Gamma draws of lambda, 3
CutMix's box centre) and t the try (0..64). A batch's mix is therefore a
pure function of (seed, epoch, global batch index): the same at any worker
count, on every rank, and after a resume.

The arithmetic is float64 (Python floats: IEEE-754 binary64, each + - * /
and sqrt correctly rounded, evaluated in the order written); logarithms and
exponentials are det_log/det_exp (section 5a, the C library's
sp_det_log/sp_det_exp), never libm's. The images are mixed in the batch's
own dtype with the torch operations torchvision v2 uses, so a float32 batch
is what torchvision gives for the same lambda and box.
"""
from __future__ import annotations

import ctypes
import math

from . import _keys

TAG_PY_BATCHOP = 12     # docs/determinism.md section 2: "python batch ops"
P_CHOICE, P_GAMMA_X, P_GAMMA_Y, P_BOX = 0, 1, 2, 3
TRIES = 64              # Marsaglia-Tsang tries per Gamma draw (t = 0..63; t = 64 the boost)

_det = []


def _detmath():
    """(det_log, det_exp) of the C library (docs/determinism.md section 5a)."""
    if not _det:
        from . import _lib
        log = _lib._fn("sp_det_log", ctypes.c_double, ctypes.c_double)
        exp = _lib._fn("sp_det_exp", ctypes.c_double, ctypes.c_double)
        _det.extend((log, exp))
    return _det[0], _det[1]


def _u01(x):
    """[0, 1): (x >> 8) * 2^-24 (section 5)."""
    return (x >> 8) * (1.0 / 16777216.0)


def _u01_pos(x):
    """(0, 1]: ((x >> 8) + 1) * 2^-24, for a logarithm."""
    return ((x >> 8) + 1) * (1.0 / 16777216.0)


def _uniform_int(x, n):
    return (x * n) >> 32


class Draws:
    """The Philox blocks of one batch: (seed, epoch, global batch index)."""

    __slots__ = ("key", "epoch", "index")
    _keys_of = {}

    def __init__(self, seed, epoch, index):
        key = Draws._keys_of.get(seed)
        if key is None:
            if len(Draws._keys_of) > 64:
                Draws._keys_of.clear()
            key = Draws._keys_of[seed] = _keys.stream_key(int(seed), TAG_PY_BATCHOP)
        self.key, self.epoch, self.index = key, int(epoch), int(index)

    def block(self, purpose, t):
        b = self.index
        return _keys.philox((b & _keys.MASK32, b >> 32, self.epoch, 256 * purpose + t),
                            self.key)

    def gamma(self, purpose, a):
        """Gamma(a, 1), a > 0: Marsaglia and Tsang (2000) on block(purpose, t),
        t = 0..63; for a < 1 a Gamma(a + 1) draw times U^(1/a), U from
        block(purpose, 64). Section 11a gives the exact steps."""
        log, exp = _detmath()
        b = a + 1.0 if a < 1.0 else a
        d = b - 1.0 / 3.0
        c = 1.0 / math.sqrt(9.0 * d)
        g = d                                   # after 64 rejected tries (p < 1e-38)
        for t in range(TRIES):
            w0, w1, w2, _ = self.block(purpose, t)
            u = 2.0 * _u01(w0) - 1.0
            v = 2.0 * _u01(w1) - 1.0
            s = u * u + v * v
            if s >= 1.0 or s == 0.0:
                continue
            x = u * math.sqrt((-2.0 * log(s)) / s)       # N(0, 1), Marsaglia's polar
            y = 1.0 + c * x
            if y <= 0.0:
                continue
            v3 = y * y * y
            if log(_u01_pos(w2)) < 0.5 * x * x + d - d * v3 + d * log(v3):
                g = d * v3
                break
        if a < 1.0:
            g = g * exp(log(_u01_pos(self.block(purpose, TRIES)[0])) / a)
        return g

    def beta(self, alpha):
        """lambda ~ Beta(alpha, alpha) = X / (X + Y), X and Y Gamma(alpha)
        draws of purposes 1 and 2; 0.5 if both are 0 (underflow, tiny alpha)."""
        x = self.gamma(P_GAMMA_X, alpha)
        y = self.gamma(P_GAMMA_Y, alpha)
        s = x + y
        return x / s if s > 0.0 else 0.5

    def box(self, lam, h, w):
        """CutMix's box (x1, y1, x2, y2) for lambda and an h x w image, and
        the lambda of its clipped area (torchvision v2's rule)."""
        w0, w1, _, _ = self.block(P_BOX, 0)
        r_x, r_y = _uniform_int(w0, w), _uniform_int(w1, h)
        r = 0.5 * math.sqrt(1.0 - lam)
        rw, rh = int(r * w), int(r * h)
        x1, y1 = max(r_x - rw, 0), max(r_y - rh, 0)
        x2, y2 = min(r_x + rw, w), min(r_y + rh, h)
        return (x1, y1, x2, y2), 1.0 - ((x2 - x1) * (y2 - y1)) / (w * h)


# ---- the ops ---------------------------------------------------------------------


def _check_alpha(name, alpha):
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
            not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"{name}: alpha={alpha!r}: a finite number > 0 (lambda ~ "
                         "Beta(alpha, alpha))")
    return float(alpha)


def _check_classes(name, k):
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{name}: num_classes={k!r}: the number of classes, an int >= 1 "
                         "(the labels become one-hot rows of that length)")
    return k


class BatchOp:
    """What the three have in common: called by a seedpipe DataLoader as its
    collate_fn (the Python backend calls it with the samples, the C path
    applies it to each batch), keyed by the batch."""

    seedpipe_batch_op = True

    def __init__(self, labels_getter="default"):
        if labels_getter != "default" and not callable(labels_getter):
            raise ValueError(f"{type(self).__name__}: labels_getter={labels_getter!r}: "
                             "'default' (the second item of an (images, labels) batch, or "
                             "a dict's 'labels' key) or a callable batch -> labels")
        self.labels_getter = labels_getter
        # the Python backend's cache keys a collate_fn by its qualified name
        self.__qualname__ = repr(self)

    # -- the pure function --
    def params(self, seed, epoch, index, size):
        """What this op draws for batch `index` of `epoch` under `seed`, for
        images of size (H, W): {"op": "mixup"|"cutmix", "lam": float,
        "box": (x1, y1, x2, y2) or None}."""
        return self._params(Draws(seed, epoch, index), size)

    def apply(self, images, labels, *, seed, epoch, index):
        """(mixed images, float targets (B, num_classes)) of one batch:
        images (..., C, H, W) float with the batch first, labels int (B,)."""
        _check_images(images, type(self).__name__)
        p = self.params(seed, epoch, index, tuple(images.shape[-2:]))
        return _mix(images, labels, p, self._classes(p))

    # -- as a collate_fn --
    def __call__(self, *args):
        from ._pyloader import _current
        cur = _current[0]
        if cur is None or cur[0] != "batch" or len(args) not in (1, 2):
            raise RuntimeError(
                f"{type(self).__name__}: seedpipe's batch ops are keyed by the batch, so "
                "they run as a seedpipe DataLoader's collate_fn "
                f"(DataLoader(..., collate_fn={type(self).__name__}(...))); on a batch of "
                "your own call op.apply(images, labels, seed=S, epoch=E, index=B)")
        _, b, epoch, _, keys = cur
        if len(args) == 2:
            # torchvision's pattern inside a collate_fn of your own:
            # lambda batch: mix(*default_collate(batch))
            return self.apply(args[0], args[1], seed=keys.seed, epoch=epoch, index=b)
        from ._pybatch import default_collate
        batch = default_collate(args[0])
        return self.mix_batch(batch, keys.seed, epoch, b)

    def mix_batch(self, batch, seed, epoch, index):
        """A collated batch with its images mixed and its labels made the
        mixed targets (the batch's structure kept)."""
        labels = self._labels(batch)
        imgs = _image_slots(batch, labels)
        if not imgs:
            raise ValueError(f"{type(self).__name__}: the batch has no image tensor of "
                             "shape (B, ..., C, H, W) besides the labels")
        first = _get(batch, imgs[0])
        _check_images(first, type(self).__name__)
        p = self.params(seed, epoch, index, tuple(first.shape[-2:]))
        out = _copy(batch)
        targets = None
        for slot in imgs:
            x, targets = _mix(_get(batch, slot), labels, p, self._classes(p))
            _set(out, slot, x)
        _set(out, self._label_slot(batch, labels), targets)
        return out if not isinstance(batch, tuple) else tuple(out)

    def _labels(self, batch):
        if self.labels_getter != "default":
            return self.labels_getter(batch)
        if isinstance(batch, (tuple, list)) and len(batch) >= 2:
            return batch[1]
        if isinstance(batch, dict):
            for k in batch:
                if isinstance(k, str) and k.lower() == "labels":
                    return batch[k]
            for k in batch:
                if isinstance(k, str) and "label" in k.lower():
                    return batch[k]
        raise ValueError(f"{type(self).__name__}: no labels in the batch: the default "
                         "labels_getter takes the second item of an (images, labels) "
                         "batch or a dict's 'labels' key; pass labels_getter=")

    def _label_slot(self, batch, labels):
        for k in (range(len(batch)) if isinstance(batch, (tuple, list)) else batch):
            if batch[k] is labels:
                return k
        raise ValueError(f"{type(self).__name__}: labels_getter returned something that "
                         "is not an item of the batch (a tuple, list or dict)")


class MixUp(BatchOp):
    """torchvision.transforms.v2.MixUp keyed by the batch: lambda ~
    Beta(alpha, alpha); images = lam * x + (1 - lam) * x.roll(1, 0); the
    one-hot labels mixed the same way (float32, (B, num_classes))."""

    def __init__(self, *, alpha=1.0, num_classes, labels_getter="default"):
        self.alpha = _check_alpha("MixUp", alpha)
        self.num_classes = _check_classes("MixUp", num_classes)
        super().__init__(labels_getter)

    def _params(self, dr, size):
        return {"op": "mixup", "lam": dr.beta(self.alpha), "box": None}

    def _classes(self, p):
        return self.num_classes

    def __repr__(self):
        return f"MixUp(alpha={self.alpha!r}, num_classes={self.num_classes})"


class CutMix(BatchOp):
    """torchvision.transforms.v2.CutMix keyed by the batch: lambda ~
    Beta(alpha, alpha); a box of about (1 - lam) of the image, centred at a
    uniform pixel and clipped, pasted from x.roll(1, 0); lambda recomputed
    from the clipped box; the labels mixed with it."""

    def __init__(self, *, alpha=1.0, num_classes, labels_getter="default"):
        self.alpha = _check_alpha("CutMix", alpha)
        self.num_classes = _check_classes("CutMix", num_classes)
        super().__init__(labels_getter)

    def _params(self, dr, size):
        h, w = size
        box, lam = dr.box(dr.beta(self.alpha), h, w)
        return {"op": "cutmix", "lam": lam, "box": box}

    def _classes(self, p):
        return self.num_classes

    def __repr__(self):
        return f"CutMix(alpha={self.alpha!r}, num_classes={self.num_classes})"


class RandomChoice(BatchOp):
    """torchvision.transforms.v2.RandomChoice of batch ops: one of them per
    batch, op i with probability p[i] (default equal), picked by block(0, 0)."""

    def __init__(self, transforms, p=None):
        ops = list(transforms)
        if not ops:
            raise ValueError("RandomChoice: transforms: at least one batch op")
        for op in ops:
            if not isinstance(op, (MixUp, CutMix)):
                raise ValueError(f"RandomChoice: {type(op).__name__}: seedpipe's RandomChoice "
                                 "of batch ops takes seedpipe.torch.MixUp and CutMix (or "
                                 "torchvision v2's, mapped to them)")
        if p is None:
            p = [1.0] * len(ops)
        p = [float(x) for x in p]
        if len(p) != len(ops) or any(not math.isfinite(x) or x < 0 for x in p) or \
                sum(p) <= 0:
            raise ValueError(f"RandomChoice: p={p!r}: one probability >= 0 per transform, "
                             "not all 0")
        total = 0.0
        for x in p:
            total += x
        self.transforms, self.p = ops, [x / total for x in p]
        super().__init__(ops[0].labels_getter)

    def pick(self, dr):
        u, acc = _u01(dr.block(P_CHOICE, 0)[0]), 0.0
        for i, x in enumerate(self.p):
            acc += x
            if u < acc:
                return i
        return max(i for i, x in enumerate(self.p) if x > 0)

    def _params(self, dr, size):
        i = self.pick(dr)
        p = self.transforms[i]._params(dr, size)
        p["choice"] = i
        return p

    def _classes(self, p):
        return self.transforms[p["choice"]].num_classes

    def __repr__(self):
        return f"RandomChoice([{', '.join(map(repr, self.transforms))}], p={self.p!r})"


# ---- the mixing (torchvision v2's tensor operations) ------------------------------


def _check_images(x, name):
    import torch
    if not isinstance(x, torch.Tensor) or x.ndim < 4:
        raise ValueError(f"{name}: the images must be a batch tensor (B, ..., C, H, W), "
                         f"got {type(x).__name__}{tuple(getattr(x, 'shape', ()))}")
    if not x.is_floating_point():
        raise ValueError(f"{name}: the images are {x.dtype}, and a mix needs float images: "
                         "end the transform with ToTensor() (float32 in [0, 1]) or pass "
                         "dtype='float32' to the DataLoader")


def _mix(x, labels, p, k):
    import torch
    from torch.nn.functional import one_hot
    if not isinstance(labels, torch.Tensor) or labels.ndim != 1 or \
            labels.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise ValueError("batch mix: the labels must be an integer tensor of shape (B,), got "
                         f"{getattr(labels, 'dtype', type(labels).__name__)}"
                         f"{tuple(getattr(labels, 'shape', ()))}")
    if labels.shape[0] != x.shape[0]:
        raise ValueError(f"batch mix: {labels.shape[0]} labels for {x.shape[0]} images")
    if labels.numel() and not 0 <= int(labels.min()) <= int(labels.max()) < k:
        raise ValueError(f"batch mix: num_classes={k}, and the batch has label "
                         f"{int(labels.max()) if int(labels.max()) >= k else int(labels.min())}"
                         ": pass num_classes= the dataset's number of classes")
    lam = p["lam"]
    if p["box"] is None:
        out = x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam))
    else:
        x1, y1, x2, y2 = p["box"]
        out = x.clone()
        out[..., y1:y2, x1:x2] = x.roll(1, 0)[..., y1:y2, x1:x2]
    t = one_hot(labels.to(torch.int64), num_classes=k).to(torch.float32)
    t = t.roll(1, 0).mul_(1.0 - lam).add_(t.mul(lam))
    return out, t


def _image_slots(batch, labels):
    import torch
    keys = range(len(batch)) if isinstance(batch, (tuple, list)) else \
        (batch if isinstance(batch, dict) else ())
    return [k for k in keys if batch[k] is not labels and isinstance(batch[k], torch.Tensor)
            and batch[k].ndim >= 4]


def _get(batch, k):
    return batch[k]


def _copy(batch):
    return dict(batch) if isinstance(batch, dict) else list(batch)


def _set(out, k, v):
    out[k] = v


# ---- torchvision's objects ----------------------------------------------------------

_TV_MIXES = {"MixUp": MixUp, "CutMix": CutMix}


def as_batch_op(obj):
    """seedpipe's batch op for a collate_fn: ours as is, torchvision v2's
    MixUp/CutMix/RandomChoice (by class name, from a torchvision module)
    mapped to ours with their alpha, num_classes and p; None otherwise."""
    if isinstance(obj, BatchOp):
        return obj
    cls = type(obj)
    if not (getattr(cls, "__module__", "") or "").startswith("torchvision.transforms"):
        return None
    name = cls.__name__
    if name in _TV_MIXES:
        if getattr(obj, "num_classes", None) is None:
            raise ValueError(f"DataLoader: collate_fn=torchvision {name}(num_classes=None): "
                             "seedpipe's labels are class indices, made one-hot rows of "
                             "num_classes; pass num_classes= (the number of classes)")
        lg = getattr(obj, "labels_getter", getattr(obj, "_labels_getter", "default"))
        if lg is None or "default" in getattr(lg, "__name__", ""):
            lg = "default"          # torchvision's default heuristic, as ours
        return _TV_MIXES[name](alpha=float(obj.alpha), num_classes=int(obj.num_classes),
                               labels_getter=lg if callable(lg) else "default")
    if name == "RandomChoice":
        ops = [as_batch_op(t) for t in getattr(obj, "transforms", ())]
        if ops and all(isinstance(o, (MixUp, CutMix)) for o in ops):
            return RandomChoice(ops, p=list(obj.p) if getattr(obj, "p", None) else None)
    return None
