"""audit(): is a data loader's output the same at every worker count?

    import seedpipe
    def make_loader(num_workers):
        return torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True,
                                           num_workers=num_workers, generator=g)
    report = seedpipe.audit(make_loader, workers=[0, 1, 2, 4], batches=8)
    print(report)            # a table: per batch, which worker counts agree
    report.ok                # True only when every byte agrees
    report.verdict           # "order invariant; augmentation NOT invariant across worker counts"

CLI twin (exit 0 if fully invariant, 1 otherwise, 2 on a usage error):

    python -m seedpipe.audit mymodule:make_loader --workers 0,1,2,4 --batches 8

`make_loader(num_workers)` builds the user's own loader: a torch DataLoader,
a seedpipe.Loader, or any iterable of batches, where a batch is a tensor /
numpy array or a tuple, list or dict (nested as deep as wanted) of them.
Each loader is run for `batches` batches; every tensor of every batch is
hashed (BLAKE2b-128 of dtype, shape and the C-contiguous bytes, via numpy),
as a whole and sample by sample (along the first axis), and each worker
count is compared with the first one in `workers`.

Order vs augmentation. PyTorch's DataLoader seeds each worker with
base_seed + worker_id: the sampler runs in the main process, so the shuffle
order survives a change of num_workers, while random augmentations drawn in
the workers do not. To tell the two apart the tensors of a batch are split
into *order* tensors (labels, indices: integer or bool dtype, at most one
value per sample, i.e. ndim <= 1 or shape (n, 1)) and *content* tensors
(everything else: images, features). `order=` names the order tensors
explicitly ("1", "labels", "0.idx" ...: the paths shown in the report) when
the guess is wrong. torch is never imported here: a tensor is anything with
`.detach().cpu().numpy()` or that numpy can take.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import os
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["audit", "AuditReport", "main"]

FULL = "fully invariant across worker counts"
AUG = "order invariant; augmentation NOT invariant across worker counts"
ORDER = "order NOT invariant across worker counts"
CONTENT = "batches NOT invariant across worker counts (no label/index tensor to tell order from augmentation)"
COUNT = "batch count NOT invariant across worker counts"


# ---------------------------------------------------------------- hashing

def _to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach") and hasattr(x, "cpu"):          # torch.Tensor, without importing torch
        x = x.detach().cpu()
        try:
            return x.numpy()
        except TypeError:                                     # bfloat16 and friends
            return x.float().numpy()
    return np.asarray(x)


def _flatten(batch, path: str = "") -> List[Tuple[str, Any]]:
    """(path, leaf) pairs: tuple/list items by index, dict items by key, '.' between levels."""
    if isinstance(batch, dict):
        out = []
        for k in batch:
            out += _flatten(batch[k], f"{path}.{k}" if path else str(k))
        return out
    if isinstance(batch, (tuple, list)) and not _is_leaf(batch):
        out = []
        for i, v in enumerate(batch):
            out += _flatten(v, f"{path}.{i}" if path else str(i))
        return out
    return [(path or "0", batch)]


def _is_leaf(x) -> bool:
    # a list of plain numbers (e.g. a batch of python ints) is one tensor, not a structure
    return isinstance(x, (tuple, list)) and len(x) > 0 and all(
        isinstance(v, (int, float, bool, np.number, np.bool_)) for v in x)


def _h(*parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(p)
    return h.hexdigest()


class _Tensor:
    """Hashes of one tensor of one batch."""
    __slots__ = ("digest", "samples", "dtype", "shape", "is_order")

    def __init__(self, arr: np.ndarray):
        a = np.ascontiguousarray(arr)
        # object arrays (strings, mixed lists): their bytes are pointers, hash the reprs
        raw = ((lambda x: repr(x.tolist() if isinstance(x, np.ndarray) else x).encode())
               if a.dtype.kind == "O"
               else (lambda x: x.tobytes()))
        head = f"{a.dtype.str}|{a.shape}|".encode()
        self.digest = _h(head, raw(a))
        self.dtype, self.shape = a.dtype, a.shape
        if a.ndim == 0:
            self.samples = [self.digest]
        else:
            sh = f"{a.dtype.str}|{a.shape[1:]}|".encode()
            self.samples = [_h(sh, raw(a[i])) for i in range(a.shape[0])]
        self.is_order = (a.dtype.kind in "biu" and
                         (a.ndim <= 1 or (a.ndim == 2 and a.shape[1] == 1)))


def _hash_batch(batch) -> Dict[str, _Tensor]:
    return {p: _Tensor(_to_numpy(v)) for p, v in _flatten(batch)}


def _run(make_loader: Callable[[int], Iterable], w: int, batches: int) -> List[Dict[str, _Tensor]]:
    loader = make_loader(w)
    out: List[Dict[str, _Tensor]] = []
    it = iter(loader)
    try:
        for batch in it:
            out.append(_hash_batch(batch))   # hashed now: a seedpipe view dies at the next batch
            if len(out) >= batches:
                break
    finally:
        close = getattr(it, "close", None)          # generators
        if callable(close) and it is not loader:
            close()
        del it                                      # torch: shuts the worker processes down
        close = getattr(loader, "close", None)      # seedpipe.Loader, generators
        if callable(close):
            close()
    return out


# ---------------------------------------------------------------- report

class AuditReport:
    """What audit() found. Attributes:

    ok            True when every batch of every worker count equals the reference's
    verdict       FULL / AUG / ORDER / CONTENT / COUNT strings above (module constants)
    workers       the worker counts, workers[0] the reference
    batches       number of batches compared (the longest run's)
    counts        {w: batches that loader yielded (<= the batches asked)}
    agree         list, per batch, of the worker counts whose batch equals the reference's
    diff          {(batch, w): [tensor paths that differ]} for every divergent cell
    order_keys    paths of the order (label/index) tensors; content_keys the others
    order_ok      {w: order tensors equal in every batch}; content_ok likewise
    first         None, or dict(batch, worker, sample, tensor, kind, order_equal):
                  the first divergent batch (lowest index, then lowest worker
                  count), the first sample in it whose hashes differ, and the
                  tensor(s) that differ there
    """

    def __init__(self, workers, runs: Dict[int, List[Dict[str, _Tensor]]], order=None):
        self.workers = list(workers)
        self.runs = runs
        ref = runs[self.workers[0]]
        self.counts = {w: len(runs[w]) for w in self.workers}
        self.batches = max(self.counts.values()) if self.counts else 0
        keys: List[str] = []
        for w in self.workers:
            for b in runs[w]:
                for k in b:
                    if k not in keys:
                        keys.append(k)
        if order is None:
            first = next((b for w in self.workers for b in runs[w]), {})
            self.order_keys = [k for k in keys if k in first and first[k].is_order]
        else:
            self.order_keys = [str(k) for k in ([order] if isinstance(order, str) else order)]
            unknown = [k for k in self.order_keys if k not in keys]
            if unknown and keys:
                raise ValueError(f"order: no tensor {unknown[0]!r} in the batches "
                                 f"(tensors: {', '.join(keys)})")
        self.content_keys = [k for k in keys if k not in self.order_keys]
        self.keys = keys

        self.agree: List[List[int]] = []
        self.diff: Dict[Tuple[int, int], List[str]] = {}
        self.order_ok = {w: True for w in self.workers}
        self.content_ok = {w: True for w in self.workers}
        self.first: Optional[dict] = None
        for i in range(self.batches):
            rb = ref[i] if i < len(ref) else None
            row = []
            for w in self.workers:
                b = runs[w][i] if i < len(runs[w]) else None
                if rb is None or b is None:
                    d = ["<missing>"] if (rb is None) != (b is None) else []
                    if d:
                        self.order_ok[w] = self.content_ok[w] = False
                else:
                    d = [k for k in keys if (k in rb) != (k in b) or
                         (k in rb and rb[k].digest != b[k].digest)]
                if d:
                    self.diff[(i, w)] = d
                    for k in d:
                        if k in self.order_keys or k == "<missing>":
                            self.order_ok[w] = False
                        if k not in self.order_keys:
                            self.content_ok[w] = False
                    if self.first is None:
                        self.first = self._first(i, w, rb, b, d)
                elif b is not None:
                    row.append(w)
            self.agree.append(row)

        self.ok = not self.diff and len(set(self.counts.values())) <= 1
        if self.ok:
            self.verdict = FULL
        elif len(set(self.counts.values())) > 1:
            self.verdict = COUNT
        elif not all(self.order_ok.values()):
            self.verdict = ORDER
        elif self.order_keys:
            self.verdict = AUG
        else:
            self.verdict = CONTENT

    def _first(self, i, w, rb, b, d) -> dict:
        f = {"batch": i, "worker": w, "sample": None, "tensor": d,
             "kind": "order" if any(k in self.order_keys for k in d) else "content"}
        if rb is not None and b is not None:
            n = max((len(t.samples) for t in list(rb.values()) + list(b.values())), default=0)
            for s in range(n):
                ks = [k for k in d if k in rb and k in b and
                      (rb[k].samples[s:s + 1] != b[k].samples[s:s + 1])]
                if ks:
                    f["sample"], f["tensor"] = s, ks
                    break
        return f

    def _desc(self, k: str) -> str:
        for w in self.workers:
            for b in self.runs[w]:
                if k in b:
                    t = b[k]
                    kind = "order" if k in self.order_keys else "content"
                    return f"[{k}] {kind} {t.dtype} {tuple(t.shape)}"
        return f"[{k}]"

    def table(self) -> str:
        ref = self.workers[0]
        head = ["batch"] + [f"w={w}" for w in self.workers] + ["agree with w=%d" % ref]
        rows = []
        for i in range(self.batches):
            cells = [str(i)]
            for w in self.workers:
                if i >= len(self.runs[w]):
                    cells.append("-" if i >= len(self.runs[ref]) else "missing")
                elif w == ref:
                    cells.append("ref")
                elif (i, w) in self.diff:
                    cells.append("DIFF " + ",".join(self.diff[(i, w)]))
                else:
                    cells.append("same")
            cells.append(",".join(map(str, self.agree[i])) or "-")
            rows.append(cells)
        widths = [max(len(r[c]) for r in [head] + rows) for c in range(len(head))]
        fmt = lambda r: "  ".join(s.ljust(widths[c]) for c, s in enumerate(r)).rstrip()
        return "\n".join([fmt(head), fmt(["-" * x for x in widths])] + [fmt(r) for r in rows])

    def __str__(self) -> str:
        ref = self.workers[0]
        lines = [f"seedpipe audit: workers {', '.join(map(str, self.workers))} (reference "
                 f"w={ref}), {self.batches} batches"]
        lines += ["tensors: " + "; ".join(self._desc(k) for k in self.keys)]
        lines += ["", self.table(), ""]
        for w in self.workers[1:]:
            eq = sum(1 for i in range(self.batches) if (i, w) not in self.diff
                     and i < len(self.runs[w]))
            part = [f"w={w}: {eq}/{self.batches} batches equal"]
            if self.order_keys:
                part.append("order " + ("same" if self.order_ok[w] else "DIFFERS"))
            if self.content_keys:
                part.append("content " + ("same" if self.content_ok[w] else "DIFFERS"))
            if self.counts[w] != self.counts[ref]:
                part.append(f"{self.counts[w]} batches vs {self.counts[ref]}")
            lines.append("; ".join(part))
        if self.first:
            f = self.first
            where = f"batch {f['batch']}" + (f", sample {f['sample']}" if f["sample"] is not None
                                             else "")
            lines.append(f"first divergence: {where}, w={f['worker']} vs w={ref}, "
                         f"tensor {','.join(f['tensor'])} ({f['kind']})")
        lines.append(f"verdict: {self.verdict}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<AuditReport ok={self.ok} verdict={self.verdict!r}>"


def audit(make_loader: Callable[[int], Iterable], workers: Sequence[int] = (0, 1, 2, 4),
          batches: int = 8, order: Optional[Sequence[str]] = None) -> AuditReport:
    """Run make_loader(w) for each w in workers for `batches` batches, hash
    every tensor of every batch (whole and per sample) and compare each
    worker count with workers[0]. Returns an AuditReport (.ok, .verdict,
    .first, str() = a table). order: paths of the label/index tensors (by
    default: integer tensors with one value per sample)."""
    workers = [int(w) for w in workers]
    if not workers:
        raise ValueError("workers must name at least one worker count")
    if len(set(workers)) != len(workers):
        raise ValueError(f"workers has duplicates: {workers}")
    if any(w < 0 for w in workers):
        raise ValueError(f"workers must be >= 0, got {workers}")
    if not isinstance(batches, int) or batches < 1:
        raise ValueError(f"batches must be an int >= 1, got {batches!r}")
    if not callable(make_loader):
        raise ValueError("make_loader must be a function num_workers -> loader")
    runs = {w: _run(make_loader, w, batches) for w in workers}
    return AuditReport(workers, runs, order=order)


# ---------------------------------------------------------------- CLI

def _resolve(spec: str) -> Callable:
    mod, sep, fn = spec.rpartition(":")
    if not sep or not mod or not fn:
        raise ValueError(f"expected module:function or path/to/file.py:function, got {spec!r}")
    if mod.endswith(".py") or os.sep in mod:
        name = "_seedpipe_audit_target_" + os.path.splitext(os.path.basename(mod))[0]
        s = importlib.util.spec_from_file_location(name, mod)
        if s is None or s.loader is None:
            raise ValueError(f"cannot load {mod!r}")
        m = importlib.util.module_from_spec(s)
        sys.modules[name] = m
        s.loader.exec_module(m)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        m = importlib.import_module(mod)
    obj = m
    for part in fn.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{spec} is not callable")
    return obj


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m seedpipe.audit",
        description="Run make_loader(num_workers) at several worker counts and report whether "
                    "the batches are the same. Exit 0 if fully invariant, 1 otherwise.")
    ap.add_argument("target", help="module:function (or path/to/file.py:function) "
                                   "returning a loader for a given num_workers")
    ap.add_argument("--workers", default="0,1,2,4", help="comma-separated worker counts "
                    "(first = reference; default 0,1,2,4)")
    ap.add_argument("--batches", type=int, default=8, help="batches per run (default 8)")
    ap.add_argument("--order", default=None,
                    help="comma-separated paths of the label/index tensors (default: guessed)")
    a = ap.parse_args(argv)
    try:
        workers = [int(x) for x in a.workers.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--workers: expected comma-separated integers, got {a.workers!r}")
    try:
        fn = _resolve(a.target)
    except (ValueError, ImportError, AttributeError) as e:
        ap.error(f"{a.target}: {e}")
    try:
        rep = audit(fn, workers=workers, batches=a.batches,
                    order=a.order.split(",") if a.order else None)
    except ValueError as e:
        ap.error(str(e))
    print(rep)
    return 0 if rep.ok else 1
