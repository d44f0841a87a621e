"""Epoch orders of the Python backend: which dataset indices batch b of
epoch e holds, on this rank.

    KeyedOrder     seedpipe's own order (shuffle: the keyed Feistel
                   permutation; sequential: the identity), batches cut and
                   rank-sliced by the C library's sampler (sp_perm_at,
                   sp_batch_slice, sp_batch_position): the C path's order,
                   byte for byte, padded tail and strided slices included
    ReplacementOrder  RandomSampler(replacement=True, num_samples=M): position
                   p of epoch e draws uniform_int(philox((p lo, p hi, e, 0),
                   K_10)[0], n) (n < 2^32), keyed by seedpipe
    SubsetOrder    SubsetRandomSampler(indices), each index once: the keyed
                   order over the list (the C path's index list)
    RoundsOrder    RandomSampler(num_samples=M), no replacement: keyed
                   rounds (the C path's, section 13)
    WeightedOrder  WeightedRandomSampler(weights, M, replacement=True): the
                   C path's exact weighted draw (docs/determinism.md section
                   13, K_13), so both backends draw the same indices
    ListOrder      a user's sampler (any iterable of indices: a range, a
                   list, a custom Sampler) or batch_sampler, followed as it
                   is: listed again at each epoch, its order the user's

Every order gives, for a batch, its indices and each index's repetition
number r in the epoch (the r-th time that index appears before it in the
epoch's positions; 0 in KeyedOrder, whose padded positions are the same
samples as the positions they repeat, as in the C path). The sample seeds
(_keys.py) are addressed by (index, epoch, r).
"""
from __future__ import annotations

import ctypes

from . import _lib as L
from ._errors import Error
from ._keys import TAG_PY_SAMPLER, TAG_SHUFFLE, TAG_WEIGHTED, philox, stream_key


class KeyedOrder:
    kind = "seedpipe"

    def __init__(self, n, seed, batch_size, drop_last, rank, world, shuffle, pad_tail):
        self.n, self.shuffle = n, bool(shuffle)
        self.bt = L.sp_batching(n=n, batch_size=batch_size, drop_last=int(bool(drop_last)),
                                rank=rank, world=world, pad_tail=int(bool(pad_tail)),
                                strided=int(not shuffle and world > 1))
        err = L.sp_error()
        if L.sp_batching_check(ctypes.byref(self.bt), ctypes.byref(err)) != 0:
            raise Error(err.code, err.msg.decode(errors="replace"))
        self.perm = L.sp_perm()
        self.reseed(seed)
        self.padded = int(L.sp_batching_padded(ctypes.byref(self.bt)))

    def reseed(self, seed):
        """The same order under another seed (the loader's seed read late)."""
        self.key = L.sp_key((ctypes.c_uint32 * 2)(*stream_key(seed, TAG_SHUFFLE)))
        self.perm_epoch = None

    def batches(self, epoch):
        return int(L.sp_batches_per_epoch(ctypes.byref(self.bt)))

    def indices(self, epoch, b):
        pos, cnt = ctypes.c_uint64(), ctypes.c_uint32()
        L.sp_batch_slice(ctypes.byref(self.bt), b, ctypes.byref(pos), ctypes.byref(cnt))
        slots = range(pos.value, pos.value + cnt.value)
        positions = [int(L.sp_batch_position(ctypes.byref(self.bt), s)) for s in slots]
        if not self.shuffle:
            return positions, [0] * len(positions)
        if self.perm_epoch != epoch:
            L.sp_perm_init(ctypes.byref(self.perm), self.n, self.key, epoch)
            self.perm_epoch = epoch
        return [int(L.sp_perm_at(ctypes.byref(self.perm), p)) for p in positions], \
            [0] * len(positions)

    def describe(self):
        return {"order": "shuffle" if self.shuffle else "sequential", "n": self.n,
                "padded": self.padded, "batch_size": int(self.bt.batch_size),
                "drop_last": bool(self.bt.drop_last)}


def _reps(indices):
    seen, reps = {}, []
    for i in indices:
        r = seen.get(i, 0)
        reps.append(r)
        seen[i] = r + 1
    return reps


class _Listed:
    """An epoch's positions listed once and cut into batches."""

    def __init__(self):
        self._epoch, self._batches = None, None

    def _cut(self, flat, batch_size, drop_last):
        reps = _reps(flat)
        out = [(flat[k:k + batch_size], reps[k:k + batch_size])
               for k in range(0, len(flat), batch_size)]
        if drop_last and out and len(out[-1][0]) < batch_size:
            out.pop()
        return out

    def batches(self, epoch):
        return len(self._epoch_batches(epoch))

    def indices(self, epoch, b):
        return self._epoch_batches(epoch)[b]

    def _epoch_batches(self, epoch):
        if self._epoch != epoch:
            self._batches, self._epoch = self._list(epoch), epoch
        return self._batches


class ReplacementOrder(_Listed):
    kind = "replacement"

    def __init__(self, n, num_samples, seed, batch_size, drop_last):
        super().__init__()
        if not 1 <= n <= 0xFFFFFFFF:
            raise ValueError(f"RandomSampler(replacement=True): {n} samples; seedpipe draws "
                             "with replacement from at most 2^32 - 1 samples")
        self.n, self.m, self.bs, self.drop = n, num_samples, batch_size, drop_last
        self.reseed(seed)

    def reseed(self, seed):
        self.key, self._epoch = stream_key(seed, TAG_PY_SAMPLER), None

    def _list(self, epoch):
        flat = [(philox((p & 0xFFFFFFFF, p >> 32, epoch, 0), self.key)[0] * self.n) >> 32
                for p in range(self.m)]
        return self._cut(flat, self.bs, self.drop)

    def describe(self):
        return {"order": "replacement", "n": self.n, "num_samples": self.m,
                "batch_size": self.bs, "drop_last": self.drop}


def quantize(weights):
    """The prefix sums C_i of the weights made integers (determinism.md
    section 13): scaled by 2^k, the largest to 63 - L bits (L the bit length
    of n), floored; exact in binary64. ValueError naming a bad weight."""
    import math
    w = [float(v) for v in weights]
    if not w:
        raise ValueError("WeightedRandomSampler: no weights")
    for i, v in enumerate(w):
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"WeightedRandomSampler: weights[{i}] = {v!r}: a weight must be "
                             "finite and >= 0")
    top = max(w)
    if top == 0:
        raise ValueError("WeightedRandomSampler: the weights are all 0 (nothing to draw)")
    k = (63 - len(w).bit_length()) - math.frexp(top)[1]
    cum, s = [], 0
    for v in w:
        s += math.floor(math.ldexp(v, k))
        cum.append(s)
    return cum


def weighted_at(cum, key, epoch, p):
    """Position p's draw: r exactly uniform in [0, S), then the first i with
    C_i > r."""
    import bisect
    return bisect.bisect_right(cum, draw_below(key, epoch, p, cum[-1]))


def draw_below(key, epoch, p, S):
    """An exactly uniform integer below S from position p's blocks."""
    t = (1 << 64) % S
    j = 0
    while True:
        x = philox((p & 0xFFFFFFFF, p >> 32, epoch & 0xFFFFFFFF, j), key)
        for h in (0, 2):
            m = (x[h] | (x[h + 1] << 32)) * S
            if (m & 0xFFFFFFFFFFFFFFFF) >= t:
                return m >> 64
        j += 1


def without_replacement(cum, key, epoch, m):
    """An epoch of m weighted draws without replacement (section 13): a
    Fenwick tree over the quantized weights, each drawn weight removed."""
    n = len(cum)
    q = [cum[0]] + [cum[i] - cum[i - 1] for i in range(1, n)]
    t = [0] + q[:]
    for i in range(1, n + 1):
        up = i + (i & -i)
        if up <= n:
            t[up] += t[i]
    total, top = cum[-1], 1 << (n.bit_length() - 1)
    out = []
    for p in range(m):
        r, at, step = draw_below(key, epoch, p, total), 0, top
        while step:
            if at + step <= n and t[at + step] <= r:
                at += step
                r -= t[at]
            step >>= 1
        out.append(at)
        total -= q[at]
        i = at + 1
        while i <= n:
            t[i] -= q[at]
            i += i & -i
    return out


class WeightedOrder(_Listed):
    """WeightedRandomSampler: draws with replacement (each position on its
    own), or without (a whole epoch of draws, each sample at most once)."""
    kind = "weighted"

    def __init__(self, weights, num_samples, seed, batch_size, drop_last, replacement=True):
        super().__init__()
        self.cum = quantize(weights)
        self.n, self.m, self.bs, self.drop = len(self.cum), num_samples, batch_size, drop_last
        self.replacement = bool(replacement)
        positive = sum(1 for i, c in enumerate(self.cum) if c != (self.cum[i - 1] if i else 0))
        if not self.replacement and num_samples > positive:
            raise ValueError(f"WeightedRandomSampler(replacement=False): num_samples "
                             f"{num_samples}, but only {positive} samples have a weight above 0")
        self.reseed(seed)

    def reseed(self, seed):
        self.key, self._epoch = stream_key(seed, TAG_WEIGHTED), None

    def _list(self, epoch):
        if self.replacement:
            flat = [weighted_at(self.cum, self.key, epoch, p) for p in range(self.m)]
        else:
            flat = without_replacement(self.cum, self.key, epoch, self.m)
        return self._cut(flat, self.bs, self.drop)

    def describe(self):
        d = {"order": "weighted", "n": self.n, "num_samples": self.m,
             "weights": _digest(self.cum), "batch_size": self.bs, "drop_last": self.drop}
        if not self.replacement:
            d["replacement"] = False
        return d


def _digest(values):
    """A short hash of integers (what a state must match)."""
    import hashlib
    return hashlib.sha256(",".join(map(str, values)).encode()).hexdigest()[:32]


class SubsetOrder(KeyedOrder):
    """SubsetRandomSampler(indices) (each listed once): the keyed order over
    the list, as the C path's index list (docs/determinism.md section 13)."""
    kind = "subset"

    def __init__(self, indices, seed, batch_size, drop_last, rank, world):
        self.sub = list(indices)
        super().__init__(len(self.sub), seed, batch_size, drop_last, rank, world, True,
                         pad_tail=world > 1)

    def indices(self, epoch, b):
        idx, reps = super().indices(epoch, b)
        return [self.sub[i] for i in idx], reps

    def describe(self):
        d = super().describe()
        d.update(order="subset", indices=_digest(self.sub))
        return d


class RoundsOrder(_Listed):
    """RandomSampler(num_samples=M) without replacement: round q = p // n of
    the keyed order, round 0 the epoch's (K_shuffle), round q the order under
    derive(K_shuffle, q), as the C path's (docs/determinism.md section 13)."""
    kind = "rounds"

    def __init__(self, n, num_samples, seed, batch_size, drop_last):
        super().__init__()
        self.n, self.m, self.bs, self.drop = n, num_samples, batch_size, drop_last
        self.reseed(seed)

    def reseed(self, seed):
        self.kshuf, self._epoch = stream_key(seed, TAG_SHUFFLE), None

    def _list(self, epoch):
        flat, perm = [], L.sp_perm()
        for q in range((self.m + self.n - 1) // self.n):
            k = self.kshuf if q == 0 else philox((q, 0, 0, 0), self.kshuf)[:2]
            L.sp_perm_init(ctypes.byref(perm), self.n, L.sp_key((ctypes.c_uint32 * 2)(*k)),
                           epoch)
            flat += [int(L.sp_perm_at(ctypes.byref(perm), t))
                     for t in range(min(self.n, self.m - q * self.n))]
        return self._cut(flat, self.bs, self.drop)

    def describe(self):
        return {"order": "rounds", "n": self.n, "num_samples": self.m,
                "batch_size": self.bs, "drop_last": self.drop}


class ListOrder(_Listed):
    kind = "sampler"

    def __init__(self, sampler, n, batch_size, drop_last, batched):
        super().__init__()
        self.sampler, self.n, self.bs, self.drop = sampler, n, batch_size, drop_last
        self.batched = batched

    def reseed(self, seed):
        """The user's sampler owns its order: nothing seedpipe keys."""
    def _check(self, i, where):
        if isinstance(i, bool) or not hasattr(i, "__index__"):
            raise TypeError(f"{where}: {i!r} is not an integer index")
        i = int(i.__index__())
        if not -self.n <= i < self.n:
            raise IndexError(f"{where}: index {i} out of range for {self.n} samples")
        return i

    def _list(self, epoch):
        name = type(self.sampler).__name__
        if self.batched:
            out = []
            for k, batch in enumerate(self.sampler):
                idx = [self._check(i, f"batch_sampler={name}, batch {k}") for i in batch]
                out.append(idx)
            flat = [i for b in out for i in b]
            reps, k, res = _reps(flat), 0, []
            for b in out:
                res.append((b, reps[k:k + len(b)]))
                k += len(b)
            return res
        flat = [self._check(i, f"sampler={name}") for i in self.sampler]
        if self.bs is None:
            return [([i], [r]) for i, r in zip(flat, _reps(flat))]
        return self._cut(flat, self.bs, self.drop)

    def describe(self):
        return {"order": "sampler", "sampler": type(self.sampler).__name__, "n": self.n,
                "batch_size": self.bs, "drop_last": self.drop}
