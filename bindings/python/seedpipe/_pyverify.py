"""seedpipe.torch.verify(): the guarantee checked on the user's own loader.

    report = verify(lambda num_workers: DataLoader(MyDataset(), batch_size=32,
                                                   shuffle=True, seed=1,
                                                   num_workers=num_workers),
                    workers=(0, 2, 3), batches=8)
    assert report.ok, report

It builds the loader at each worker count (and, with world=(1, 2), each
rank of each world size: make_loader(num_workers, rank=r, world=w), the
ranks' slices concatenated), takes the same batches from each, and
compares every leaf of every batch (tensors and arrays byte for byte,
with dtype and shape; numbers and strings by value) with the first
configuration's. The first difference is reported with its batch, leaf
(its path in the batch: [1]['extra']), sample (the row of that leaf) and
the likely cause.
"""
from __future__ import annotations

import hashlib

import numpy as np

CAUSE = ("the dataset (or its transforms, or collate_fn) draws from a random generator "
         "seedpipe does not seed: one made once in __init__ (np.random.default_rng(), "
         "random.Random(), torch.Generator() kept on self), os.urandom, the time, or a C "
         "library's own generator (OpenCV's cv2.RNG, ...). Draw inside __getitem__ from "
         "random, numpy.random or torch's global generator, or from "
         "seedpipe.torch.sample_generator() (docs/python.md, 'What seedpipe cannot seed')")


def _leaves(obj, path=""):
    """[(path, value)] of a batch, in a fixed order."""
    try:
        import torch
        if isinstance(obj, torch.Tensor):
            t = obj.detach().cpu().contiguous()
            if t.dtype is torch.bfloat16:
                t = t.view(torch.int16)
            return [(path, ("tensor", str(obj.dtype), t.numpy()))]
    except ImportError:   # pragma: no cover
        pass
    if isinstance(obj, np.ndarray):
        return [(path, ("ndarray", obj.dtype.str, np.ascontiguousarray(obj)))]
    if isinstance(obj, dict):
        out = []
        for k in obj:
            out += _leaves(obj[k], f"{path}[{k!r}]")
        return out
    if isinstance(obj, (list, tuple)):
        out = []
        for k, v in enumerate(obj):
            out += _leaves(v, f"{path}[{k}]")
        return out
    return [(path, ("value", type(obj).__name__, obj))]


def _concat(parts):
    """The leaves of the ranks' slices of one global batch, joined along the
    first dimension (lists of strings joined too)."""
    first = parts[0]
    out = []
    for k, (path, (kind, dt, v)) in enumerate(first):
        vals = [p[k][1][2] for p in parts]
        if kind in ("tensor", "ndarray") and v.ndim >= 1:
            out.append((path, (kind, dt, np.concatenate(vals))))
        else:
            out.append((path, (kind, dt, vals)))
    return out


def _digest(leaves):
    h = hashlib.blake2b(digest_size=16)
    for path, (kind, dt, v) in leaves:
        h.update(f"{path}|{kind}|{dt}|".encode())
        if isinstance(v, np.ndarray):
            h.update(repr(v.shape).encode())
            h.update(v.tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


def _first_diff(a, b):
    """(leaf path, sample row or None, what) of the first difference of two
    batches' leaves."""
    if [p for p, _ in a] != [p for p, _ in b]:
        return "", None, f"the batch structure differs: {[p for p, _ in a]} vs {[p for p, _ in b]}"
    for (path, (ka, da, va)), (_, (kb, db, vb)) in zip(a, b):
        if (ka, da) != (kb, db):
            return path, None, f"type {ka} {da} vs {kb} {db}"
        if isinstance(va, np.ndarray):
            if va.shape != vb.shape:
                return path, None, f"shape {va.shape} vs {vb.shape}"
            if va.tobytes() != vb.tobytes():
                if va.ndim == 0:
                    return path, None, "values differ"
                rows = np.flatnonzero([x.tobytes() != y.tobytes() for x, y in zip(va, vb)])
                return path, int(rows[0]), "values differ"
        elif va != vb:
            if isinstance(va, list) and isinstance(vb, list) and len(va) == len(vb):
                row = next(k for k, (x, y) in enumerate(zip(va, vb)) if x != y)
                return path, row, f"{va[row]!r} vs {vb[row]!r}"
            return path, None, f"{va!r} vs {vb!r}"
    return "", None, "digests differ"


class VerifyReport:
    """.ok, .rows [(config, batches, stream digest)], .difference (None or a
    dict: config, reference, batch, leaf, sample, what, cause)."""

    def __init__(self, rows, difference):
        self.rows, self.difference = rows, difference
        self.ok = difference is None

    def __bool__(self):
        return self.ok

    def __str__(self):
        lines = [f"{'configuration':<28} {'batches':>7}  stream digest"]
        for cfg, n, d in self.rows:
            lines.append(f"{cfg:<28} {n:>7}  {d}")
        if self.ok:
            lines.append("OK: every batch equal, every leaf byte for byte")
        else:
            d = self.difference
            lines.append(f"DIFFERENT: {d['config']} vs {d['reference']}: batch {d['batch']}, "
                         f"leaf {d['leaf'] or '(the batch)'}"
                         + (f", sample {d['sample']}" if d["sample"] is not None else "")
                         + f": {d['what']}")
            lines.append(f"likely cause: {d['cause']}")
        return "\n".join(lines)

    __repr__ = __str__


def _run(make, batches):
    dl = make()
    out = []
    try:
        for k, batch in enumerate(dl):
            if batches is not None and k >= batches:
                break
            out.append(_leaves(batch))
    finally:
        close = getattr(dl, "close", None)
        if close is not None:
            close()
    return out


def verify(make_loader, workers=(0, 2, 3), batches=8, world=None):
    """Run make_loader(num_workers) at each worker count (with world=, each
    rank: make_loader(num_workers, rank=r, world=w)) for `batches` batches of
    its first epoch, and compare every batch with the first configuration's.
    Returns a VerifyReport (truthy when equal)."""
    configs = []
    for w in workers:
        if world is None:
            configs.append((f"num_workers={w}", lambda w=w: _run(
                lambda: make_loader(w), batches)))
        else:
            for ws in world:
                def per_rank(w=w, ws=ws):
                    parts = [_run(lambda r=r: make_loader(w, rank=r, world=ws), batches)
                             for r in range(ws)]
                    return [_concat([p[k] for p in parts]) for k in range(len(parts[0]))]
                configs.append((f"num_workers={w} world={ws}", per_rank))
    rows, ref, ref_name = [], None, None
    for name, run in configs:
        got = run()
        digest = hashlib.blake2b("".join(_digest(b) for b in got).encode(),
                                 digest_size=16).hexdigest()
        rows.append((name, len(got), digest))
        if ref is None:
            ref, ref_name = got, name
            continue
        for b, (x, y) in enumerate(zip(ref, got)):
            if _digest(x) != _digest(y):
                leaf, row, what = _first_diff(x, y)
                return VerifyReport(rows, dict(config=name, reference=ref_name, batch=b,
                                               leaf=leaf, sample=row, what=what, cause=CAUSE))
        if len(ref) != len(got):
            return VerifyReport(rows, dict(config=name, reference=ref_name,
                                           batch=min(len(ref), len(got)), leaf="", sample=None,
                                           what=f"{len(got)} batches vs {len(ref)}",
                                           cause="the epoch's length depends on the workers"))
    return VerifyReport(rows, None)
