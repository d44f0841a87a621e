#!/usr/bin/env python3
"""Reference for the samplers of docs/determinism.md section 13, written from
that section, Python standard library only (with tests/philox_ref.py for
Philox and the epoch order). The tests compare the C loader's indices and
augmentation addresses with these, bit for bit.

    python3 tests/sampler_ref.py weighted --weights 1 2 3 --seed 5 --epoch 0 --count 10
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import philox_ref as R  # noqa: E402

TAG_SAMPLER = 10    # uniform draws with replacement
TAG_WEIGHTED = 13   # weighted draws with replacement
M64 = (1 << 64) - 1


def quantize(weights):
    """Q_i: the weights scaled by 2^k (the largest to 63 - L bits, L the bit
    length of n) and floored; exact (binary64 scaling by a power of two)."""
    n = len(weights)
    if n == 0:
        raise ValueError("no weights")
    if any(not (math.isfinite(w) and w >= 0) for w in weights):
        raise ValueError("a weight must be finite and >= 0")
    top = max(weights)
    if top == 0:
        raise ValueError("the weights are all 0")
    L = n.bit_length()
    _, E = math.frexp(top)
    k = (63 - L) - E
    return [math.floor(math.ldexp(float(w), k)) for w in weights]


def prefix_sums(q):
    out, s = [], 0
    for v in q:
        s += v
        out.append(s)
    return out


def uniform_below(key, pos, epoch, S):
    """An exactly uniform integer in [0, S): u = x0 | x1 << 32 (then x2, x3,
    then block j + 1) until (u * S) mod 2^64 >= 2^64 mod S; r = u * S >> 64."""
    t = (1 << 64) % S
    j = 0
    while True:
        x = R.philox((pos & 0xFFFFFFFF, pos >> 32, epoch & 0xFFFFFFFF, j), key)
        for h in (0, 2):
            u = x[h] | (x[h + 1] << 32)
            m = u * S
            if (m & M64) >= t:
                return m >> 64
        j += 1


def weighted_at(cum, key, pos, epoch):
    """The loader-sample index of position pos: the first i with C_i > r."""
    r = uniform_below(key, pos, epoch, cum[-1])
    a, b = 0, len(cum) - 1
    while a < b:
        mid = (a + b) // 2
        if cum[mid] > r:
            b = mid
        else:
            a = mid + 1
    return a


def weighted(weights, seed, epoch, count):
    """Positions 0..count-1 of epoch `epoch`: (index, address) pairs."""
    cum = prefix_sums(quantize(weights))
    key = R.stream_key(seed, TAG_WEIGHTED)
    return [(weighted_at(cum, key, p, epoch), p) for p in range(count)]


def weighted_without(weights, seed, epoch, count):
    """Without replacement: position p draws r below the remaining weights'
    sum (uniform_below, K_13), takes the first i whose running sum of the
    remaining weights exceeds r, and sets its weight to 0. Each sample is
    augmented as itself (address = index)."""
    q = quantize(weights)
    key = R.stream_key(seed, TAG_WEIGHTED)
    out = []
    for p in range(count):
        r = uniform_below(key, p, epoch, sum(q))
        acc = 0
        for i, v in enumerate(q):
            acc += v
            if acc > r:
                break
        out.append((i, i))
        q[i] = 0
    return out


def uniform(n, seed, epoch, count):
    """RandomSampler(replacement=True): uniform_int(philox((p lo, p hi, e, 0), K_10)[0], n)."""
    key = R.stream_key(seed, TAG_SAMPLER)
    return [((R.philox((p & 0xFFFFFFFF, p >> 32, epoch, 0), key)[0] * n) >> 32, p)
            for p in range(count)]


def rounds(n, seed, epoch, count, dsize=None, sequential=False, indices=None):
    """Without replacement, num_samples = count: round q = p // n of the order
    (round 0 the epoch's order under K_shuffle, round q the order under
    derive(K_shuffle, q)); copy q of dataset sample i is addressed q * D + i."""
    dsize = dsize if dsize is not None else n
    ks = R.stream_key(seed, "shuffle")
    perms = {}
    out = []
    for p in range(count):
        q, t = divmod(p, n)
        if sequential:
            j = t
        else:
            if q not in perms:
                perms[q] = R.Perm(n, ks if q == 0 else R.derive(ks, q), epoch)
            j = perms[q].at(t)
        i = indices[j] if indices is not None else j
        out.append((i, q * dsize + i))
    return out


def repeated(n, r, seed, epoch, count=None, dsize=None, sequential=False, indices=None):
    """repeat r: position p holds copy p % r of the order's position p // r
    (positions past r * n wrap); copy c of dataset sample i is addressed c * D + i."""
    dsize = dsize if dsize is not None else n
    count = n * r if count is None else count
    perm = None if sequential else R.Perm(n, R.stream_key(seed, "shuffle"), epoch)
    out = []
    for p in range(count):
        c, t = (p % (n * r)) % r, (p % (n * r)) // r
        j = t if perm is None else perm.at(t)
        i = indices[j] if indices is not None else j
        out.append((i, c * dsize + i))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("weighted", help="a WeightedRandomSampler epoch's indices")
    w.add_argument("--weights", type=float, nargs="+", required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--epoch", type=int, default=0)
    w.add_argument("--count", type=int, required=True)
    a = ap.parse_args(argv)
    for i, _ in weighted(a.weights, a.seed, a.epoch, a.count):
        print(i)


if __name__ == "__main__":
    main()
