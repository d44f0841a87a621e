#!/usr/bin/env python3
"""philox_ref.py - an independent reference for seedpipe's randomness.

Written from docs/determinism.md (the normative spec), not from the C code,
with the Python standard library only. It recomputes everything that decides
a data order or an augmentation draw: Philox4x32-10, the key of a seed, the
stream keys, the worker keys, sample draw blocks, u01 floats, uniform_int and
the epoch order (the keyed Feistel permutation with cycle-walking), plus
batching and rank slicing (with the sequential order, the padded tail and
the strided slices of section 7a: rank_positions(), rank_indices()), the
block:K order of section 6a (block_order()) and a
weighted mixture's epoch (section 10: mix_order()). tests/test_philox_ref.py compares it with the C
code through the seedpipe CLI.

Importable:
    import philox_ref as R
    R.philox((0, 0, 0, 0), (0, 0))   -> (0x6627e8d5, 0xe169c58d, ...)
    R.order(n=10, seed=42, epoch=0)  -> [sample index at position 0, 1, ...]

Command line, numbers as the seedpipe CLI reads them (so the two can be
diffed): a word (K0.., C0.., k0..) is 1 to 8 hex digits, optionally after
0x or 0X; every other number is decimal digits only, the whole word (no
leading zero: 010 is refused; no sign, space, 0x, exponent or empty word),
range-checked; an option
given twice is an error; errors exit 2 naming the option:
    python3 tests/philox_ref.py rng --key K0 K1 --counter C0 C1 C2 C3
    python3 tests/philox_ref.py rng --batch          < lines "k0 k1 c0 c1 c2 c3"
    python3 tests/philox_ref.py rng --seed S --stream shuffle|augment|init|worker|other|mix|block [--worker W]
    python3 tests/philox_ref.py order --n N --seed S --epoch E [--order global|sequential]
    python3 tests/philox_ref.py order --shard-sizes C0,C1.. --order block:K --seed S --epoch E
    python3 tests/philox_ref.py mix --sizes N0,N1.. --weights W0,W1.. [--length L]
                                    --seed S --epoch E
Output formats are the same as the seedpipe CLI's.
"""
import argparse
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from detmath_ref import det_exp, det_log, round_half_even  # noqa: E402,F401  (section 5a)

MASK32 = 0xFFFFFFFF

# Philox4x32 constants (Salmon et al., SC'11).
MULT = (0xD2511F53, 0xCD9E8D57)     # round multipliers
WEYL = (0x9E3779B9, 0xBB67AE85)     # key schedule increments
ROUNDS = 10

STREAMS = {"shuffle": 1, "augment": 2, "init": 3, "worker": 4, "other": 5, "mix": 6,
           "block": 7}

FEISTEL_ROUNDS = 8
MAX_N = 1 << 62


def philox(counter, key, rounds=ROUNDS):
    """Philox4x32-R: four 32-bit counter words and two key words -> four words.

    A round multiplies words 0 and 2 by the two multipliers, keeping the high
    and low 32 bits of each 64-bit product; the new block is
    (hi(M1*x2) ^ x1 ^ k0, lo(M1*x2), hi(M0*x0) ^ x3 ^ k1, lo(M0*x0)).
    The key gets the Weyl increments added between rounds (not before the
    first)."""
    x = [w & MASK32 for w in counter]
    k0, k1 = key[0] & MASK32, key[1] & MASK32
    for r in range(rounds):
        if r:
            k0 = (k0 + WEYL[0]) & MASK32
            k1 = (k1 + WEYL[1]) & MASK32
        p0 = MULT[0] * x[0]
        p1 = MULT[1] * x[2]
        x = [(p1 >> 32) ^ x[1] ^ k0, p1 & MASK32,
             (p0 >> 32) ^ x[3] ^ k1, p0 & MASK32]
    return tuple(x)


def key_from_seed(seed):
    """K = (low 32 bits of the 64-bit seed, high 32 bits)."""
    seed &= (1 << 64) - 1
    return (seed & MASK32, seed >> 32)


def derive(parent, tag):
    """The first two output words of philox((tag, 0, 0, 0), parent)."""
    out = philox((tag, 0, 0, 0), parent)
    return (out[0], out[1])


def stream_key(seed, stream):
    """K_tag for a stream (a name from STREAMS or its number)."""
    tag = STREAMS[stream] if isinstance(stream, str) else stream
    return derive(key_from_seed(seed), tag)


def worker_key(seed, worker):
    """K_worker(w): derived from the worker stream key K_4; never reaches a batch byte."""
    return derive(stream_key(seed, "worker"), worker)


def sample_draw(k_augment, block, op, sample, epoch):
    """Draw block j of op k for global sample i at epoch e: four 32-bit words."""
    return philox((block, op, sample, epoch), k_augment)


def u01(x):
    """Uniform in [0, 1): the top 24 bits of x over 2^24 (exact as a float)."""
    return (x >> 8) / 16777216.0


def uniform_int(x, n):
    """An integer in [0, n) from one word: floor(x * n / 2^32), 1 <= n <= 2^32."""
    if not 1 <= n <= 1 << 32:
        raise ValueError("uniform_int: n must be in [1, 2^32]")
    return (x * n) >> 32


class Perm:
    """The order of one epoch over n samples: at(pos) is the sample index at
    position pos. A balanced Feistel network on the smallest even bit width
    2h >= 2 with 4^h >= n, FEISTEL_ROUNDS rounds whose round function is the
    first word of philox((right, round, epoch, 0), K_shuffle) cut to h bits,
    then cycle-walking back into [0, n)."""

    def __init__(self, n, k_shuffle, epoch):
        if not 1 <= n <= MAX_N:
            raise ValueError("Perm: n must be in [1, 2^62]")
        self.n, self.key, self.epoch = n, k_shuffle, epoch & MASK32
        self.h = 1
        while 4 ** self.h < n:
            self.h += 1
        self.mask = (1 << self.h) - 1

    def network(self, x):
        left, right = x >> self.h, x & self.mask
        for r in range(FEISTEL_ROUNDS):
            f = philox((right, r, self.epoch, 0), self.key)[0] & self.mask
            left, right = right, left ^ f
        return (left << self.h) | right

    def at(self, pos):
        if not 0 <= pos < self.n:
            raise IndexError("Perm.at: position out of range")
        x = self.network(pos)
        while x >= self.n:
            x = self.network(x)
        return x


def order(n, seed, epoch):
    """The whole order of epoch `epoch` for a seed: list of sample indices."""
    p = Perm(n, stream_key(seed, "shuffle"), epoch)
    return [p.at(i) for i in range(n)]


# ---- the block order (docs/determinism.md section 6a) --------------------------------

def block_order(sizes, k, seed, epoch):
    """The whole block:k order of an epoch over shards of sizes[s] samples
    (shard s holds samples o_s .. o_s + sizes[s] - 1, o_s the sizes before
    it), built block by block as section 6a lays it out: the shards
    permuted under K_block[0] (K_block[u] = derive(K_block, u)), grouped
    into blocks of k places, each block's samples listed place by place and
    permuted under K_block[1 + j]. Returns [sample at position 0, 1, ...]."""
    if k < 1:
        raise ValueError("block_order: k must be >= 1")
    if not sizes or sum(sizes) < 1:
        raise ValueError("block_order: need at least one shard and one sample")
    kb = stream_key(seed, "block")
    first = [sum(sizes[:s]) for s in range(len(sizes))]
    shards = Perm(len(sizes), derive(kb, 0), epoch)
    placed = [shards.at(t) for t in range(len(sizes))]
    out = []
    for j in range(0, -(-len(sizes) // k)):
        samples = []
        for s in placed[j * k:(j + 1) * k]:
            samples.extend(range(first[s], first[s] + sizes[s]))
        if not samples:
            continue
        inner = Perm(len(samples), derive(kb, 1 + j), epoch)
        out.extend(samples[inner.at(q)] for q in range(len(samples)))
    return out


def parse_order(text):
    """An order as the CLI and the Loader take it: ("shuffle", 0) for
    "global" or "shuffle", ("sequential", 0), ("block", K) for "block:K"
    (K decimal, 1..2^32-1, no leading zero). ValueError otherwise."""
    if text in ("global", "shuffle"):
        return ("shuffle", 0)
    if text == "sequential":
        return ("sequential", 0)
    if text.startswith("block:"):
        try:
            return ("block", _dec(1, MASK32)(text[6:]))
        except argparse.ArgumentTypeError as e:
            raise ValueError('order "%s": K %s' % (text, e))
    raise ValueError('order "%s": expected global (or shuffle), sequential or block:K' % text)


# ---- weighted mixtures (docs/determinism.md section 10) ------------------------------

def mix_weight(text):
    """A weight as a .mix file writes it: (mantissa, decimals), the value
    mantissa / 10^decimals; ASCII digits with at most one '.', positive.
    The trailing zeros after the point are dropped first (0.500 is 0.5,
    999999999999999999.0 is 999999999999999999); what is left may hold at
    most 18 significant digits (first non-zero digit to the last, zeros
    before the point included) and 18 decimals (docs/determinism.md
    section 10, dataset_mix.c's parse_weight())."""
    if not re.fullmatch(r"[0-9]*\.?[0-9]*", text) or not re.search(r"[0-9]", text):
        raise ValueError("weight %r: expected a positive decimal" % text)
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0")
    m = int((whole + frac) or "0")
    d = len(frac)
    if m == 0 or len(str(m)) > 18 or d > 18:
        raise ValueError("weight %r: zero or too many digits" % text)
    return m, d


def mix_weights(texts):
    """The weights scaled to integers over 10^max(decimals), divided by their
    gcd: ([W_s], W = sum)."""
    parsed = [mix_weight(t) for t in texts]
    dmax = max(d for _, d in parsed)
    w = [m * 10 ** (dmax - d) for m, d in parsed]
    g = math.gcd(*w)
    w = [x // g for x in w]
    return w, sum(w)


def mix_schedule(w, total, count):
    """The sources of slots 0 .. count-1: the quota method (Balinski and
    Young) over one period of `total` slots, repeated. Slot q goes, among
    the sources with C_s * W < W_s * (q + 1), to the largest W_s / (C_s + 1),
    the smallest s on a tie (C_s: its slots so far in this period)."""
    period = min(total, count)
    base, c = [], [0] * len(w)
    for q in range(period):
        best = None
        for s, ws in enumerate(w):
            if c[s] * total >= ws * (q + 1):
                continue
            if best is None or ws * (c[best] + 1) > w[best] * (c[s] + 1):
                best = s
        base.append(best)
        c[best] += 1
    return [base[q % period] for q in range(count)]


def mix_order(sizes, weights, seed, epoch, length=None, sequential=False):
    """A mixture's epoch: for each position, (source, index in the source).
    Slot q is source s's k-th draw of the epoch (k = its slots before q);
    its draw K = epoch * c_s + k (c_s: its slots in the epoch) is position
    K mod n_s of the source's own order for pass K div n_s (mod 2^32), keyed
    by derive(K_6, s); the epoch order permutes the slots (K_1)."""
    w, total = mix_weights(weights)
    length = length or sum(sizes)
    a = mix_schedule(w, total, length)
    per_epoch = [a.count(s) for s in range(len(sizes))]
    seen = [0] * len(sizes)
    slot = []
    k_mix = stream_key(seed, "mix")
    for q in range(length):
        s = a[q]
        big = epoch * per_epoch[s] + seen[s]
        seen[s] += 1
        p = Perm(sizes[s], derive(k_mix, s), (big // sizes[s]) & MASK32)
        slot.append((s, p.at(big % sizes[s])))
    if sequential:
        return slot
    perm = Perm(length, stream_key(seed, "shuffle"), epoch)
    return [slot[perm.at(i)] for i in range(length)]


def batches_per_epoch(n, batch_size, drop_last):
    full, rest = divmod(n, batch_size)
    return full + (1 if rest and not drop_last else 0)


def batch_slice(n, batch_size, drop_last, rank, world, b):
    """Positions [start, start + count) of global batch b that rank takes."""
    if batch_size % world or rank >= world:
        raise ValueError("batch_slice: need batch_size % world == 0 and rank < world")
    if b >= batches_per_epoch(n, batch_size, drop_last):
        return n, 0
    per = batch_size // world
    start = b * batch_size + rank * per
    end = min(start + per, n)
    return (min(start, n), max(0, end - start))


def padded_size(n, world, pad_tail):
    """n' of section 7a: n, or with pad_tail ceil(n / world) * world."""
    return -(-n // world) * world if pad_tail else n


def rank_positions(n, batch_size, drop_last, rank, world, b, order="shuffle", pad_tail=False):
    """Section 7a: the epoch positions (in [0, n), padding wrapped) of rank
    `rank`'s part of global batch b, in the rank's order. order "shuffle":
    a contiguous slice; "sequential": the strided positions b*B + r + world*j."""
    if batch_size % world or rank >= world:
        raise ValueError("rank_positions: need batch_size % world == 0 and rank < world")
    np_ = padded_size(n, world, pad_tail)
    nb = np_ // batch_size + (1 if np_ % batch_size and not drop_last else 0)
    if b >= nb:
        return []
    first = b * batch_size
    cnt = min(batch_size, np_ - first)
    if order == "sequential":
        pos = list(range(first + rank, first + cnt, world))
    else:
        if pad_tail:
            lo, hi = rank * cnt // world, (rank + 1) * cnt // world
        else:
            per = batch_size // world
            lo, hi = min(rank * per, cnt), min((rank + 1) * per, cnt)
        pos = list(range(first + lo, first + hi))
    return [p % n for p in pos]


def rank_indices(n, seed, epoch, batch_size, drop_last, rank, world, b, order="shuffle",
                 pad_tail=False):
    """The loader's sample indices (no split) of rank `rank`'s part of batch b
    of epoch `epoch`: rank_positions() through the epoch order."""
    pos = rank_positions(n, batch_size, drop_last, rank, world, b, order, pad_tail)
    if order == "sequential":
        return pos
    p = Perm(n, stream_key(seed, "shuffle"), epoch)
    return [p.at(i) for i in pos]


def rrc_sample(W, H, scale, ratio, k_augment, op, sample, epoch):
    """random_resized_crop's box (docs/pipeline.md, section 3) for a W x H
    image, scale = (a, b), ratio = (a, b), the draws of op `op`: returns
    (x, y, w, h, try) with try = 1..10 for the accepted try, 0 for the
    fallback. Every float operation is the page's, in its order; det_log and
    det_exp are docs/determinism.md section 5a (detmath_ref); math.sqrt is
    IEEE's correctly rounded square root."""
    s0, s1 = float(scale[0]), float(scale[1])
    r0, r1 = float(ratio[0]), float(ratio[1])
    area = float(H) * float(W)
    lr0, lr1 = det_log(r0), det_log(r1)
    for t in range(10):
        d = sample_draw(k_augment, t, op, sample, epoch)
        target = area * (s0 + (s1 - s0) * u01(d[0]))
        aspect = det_exp(lr0 + (lr1 - lr0) * u01(d[1]))
        w = round_half_even(math.sqrt(target * aspect))
        h = round_half_even(math.sqrt(target / aspect))
        if 0 < w <= W and 0 < h <= H:
            w, h = int(w), int(h)
            return (uniform_int(d[3], W - w + 1), uniform_int(d[2], H - h + 1), w, h, t + 1)
    in_ratio = float(W) / float(H)
    w, h = W, H
    if in_ratio < r0:
        h = int(round_half_even(float(w) / r0))
    elif in_ratio > r1:
        w = int(round_half_even(float(h) * r1))
    w, h = min(max(w, 1), W), min(max(h, 1), H)
    return ((W - w) // 2, (H - h) // 2, w, h, 0)


# ---- batch mixes (docs/determinism.md section 11a) ------------------------------

def batch_block(seed, epoch, b, purpose, t):
    """Block t of purpose p of global batch b at epoch e: philox((b lo, b hi,
    e, 256*p + t), K_12). Purposes: 0 pick, 1 and 2 Gamma, 3 box."""
    return philox((b & MASK32, b >> 32, epoch, 256 * purpose + t), stream_key(seed, 12))


def _u01_pos(x):
    return ((x >> 8) + 1) / 16777216.0


def batch_gamma(seed, epoch, b, purpose, a):
    """Gamma(a) by Marsaglia-Tsang with the polar normal, 64 tries, the boost
    for a < 1 from block 64 (section 11a, every operation in its order)."""
    bb = a + 1.0 if a < 1.0 else a
    d = bb - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    g = d
    for t in range(64):
        w = batch_block(seed, epoch, b, purpose, t)
        u, v = 2.0 * u01(w[0]) - 1.0, 2.0 * u01(w[1]) - 1.0
        s = (u * u) + (v * v)
        if not 0.0 < s < 1.0:
            continue
        x = u * math.sqrt((-2.0 * det_log(s)) / s)
        y = 1.0 + (c * x)
        if y <= 0.0:
            continue
        v3 = (y * y) * y
        if det_log(_u01_pos(w[2])) < ((((0.5 * x) * x) + d) - (d * v3)) + (d * det_log(v3)):
            g = d * v3
            break
    if a < 1.0:
        g = g * det_exp(det_log(_u01_pos(batch_block(seed, epoch, b, purpose, 64)[0])) / a)
    return g


def batch_beta(seed, epoch, b, alpha):
    """lambda ~ Beta(alpha, alpha) of batch b: X / (X + Y), or 0.5 if X + Y is 0."""
    x, y = batch_gamma(seed, epoch, b, 1, alpha), batch_gamma(seed, epoch, b, 2, alpha)
    return x / (x + y) if x + y > 0 else 0.5


def batch_box(seed, epoch, b, lam, h, w):
    """CutMix's ((x1, y1, x2, y2), lambda') for an h x w image."""
    wd = batch_block(seed, epoch, b, 3, 0)
    rx, ry = uniform_int(wd[0], w), uniform_int(wd[1], h)
    r = 0.5 * math.sqrt(1.0 - lam)
    rw, rh = math.trunc(r * w), math.trunc(r * h)
    x1, y1, x2, y2 = max(rx - rw, 0), max(ry - rh, 0), min(rx + rw, w), min(ry + rh, h)
    return (x1, y1, x2, y2), 1.0 - ((x2 - x1) * (y2 - y1)) / (w * h)


def batch_pick(seed, epoch, b, p):
    """RandomChoice's op for probabilities p (normalised left to right)."""
    total = 0.0
    for x in p:
        total += x
    u, acc = u01(batch_block(seed, epoch, b, 0, 0)[0]), 0.0
    for i, x in enumerate(p):
        acc += x / total
        if u < acc:
            return i
    return max(i for i, x in enumerate(p) if x > 0)


# ---- command line ------------------------------------------------------------

def _word(s):
    """A 32-bit word as `seedpipe rng` documents it: 1 to 8 hex digits
    (0-9, a-f, A-F), optionally after 0x or 0X; nothing else."""
    t = s[2:] if s[:2] in ("0x", "0X") else s
    if not 1 <= len(t) <= 8 or any(c not in "0123456789abcdefABCDEF" for c in t):
        raise argparse.ArgumentTypeError(
            '"%s": not a 32-bit word (1 to 8 hex digits, optionally after 0x)' % s)
    return int(t, 16)


def _dec(lo, hi):
    """A decimal number in [lo, hi] as the seedpipe CLI reads one: digits 0-9
    only, the whole word, no leading zero (refused, as the tool refuses it),
    nothing else."""
    def parse(s):
        if len(s) > 1 and s[0] == "0" and s[1] in "0123456789":
            raise argparse.ArgumentTypeError(
                '"%s": has a leading zero (it was read as octal before: 010 was 8; write the '
                'number without it)' % s)
        if not s or any(c not in "0123456789" for c in s):
            raise argparse.ArgumentTypeError(
                '"%s": not a decimal number in %d..%d (digits 0-9 only: no sign, space, 0x '
                'or exponent)' % (s, lo, hi))
        v = int(s, 10)
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError('"%s": out of range %d..%d' % (s, lo, hi))
        return v
    return parse


class _Once(argparse.Action):
    """An option that may be given once (argparse keeps the last silently)."""
    def __call__(self, parser, ns, values, option_string=None):
        if getattr(ns, self.dest) is not None:
            parser.error("%s given twice" % option_string)
        setattr(ns, self.dest, values)


def _fmt(words):
    return " ".join("%08x" % w for w in words)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    sub = ap.add_subparsers(dest="cmd", required=True)
    rng = sub.add_parser("rng", help="Philox words or derived keys", allow_abbrev=False)
    rng.add_argument("--key", nargs=2, type=_word, metavar=("K0", "K1"), action=_Once)
    rng.add_argument("--counter", nargs=4, type=_word, metavar=("C0", "C1", "C2", "C3"),
                     action=_Once)
    rng.add_argument("--batch", action="store_true",
                     help="read 'k0 k1 c0 c1 c2 c3' lines from stdin")
    rng.add_argument("--seed", type=_dec(0, 2**64 - 1), action=_Once)
    rng.add_argument("--stream", choices=sorted(STREAMS), action=_Once)
    rng.add_argument("--worker", type=_dec(0, MASK32), action=_Once)
    od = sub.add_parser("order", help="the epoch order, one index per line", allow_abbrev=False)
    od.add_argument("--n", type=_dec(1, MAX_N), action=_Once)
    od.add_argument("--shard-sizes", action=_Once, help="c_0,c_1,... (samples a shard)")
    od.add_argument("--order", action=_Once, help="global | shuffle | sequential | block:K")
    od.add_argument("--seed", type=_dec(0, 2**64 - 1), required=True, action=_Once)
    od.add_argument("--epoch", type=_dec(0, MASK32), required=True, action=_Once)
    mx = sub.add_parser("mix", help="a mixture's epoch: 'SOURCE INDEX' a position",
                        allow_abbrev=False)
    mx.add_argument("--sizes", required=True, action=_Once, help="n_0,n_1,...")
    mx.add_argument("--weights", required=True, action=_Once, help="w_0,w_1,... as written")
    mx.add_argument("--length", type=_dec(1, 1 << 32), action=_Once)
    mx.add_argument("--seed", type=_dec(0, 2**64 - 1), required=True, action=_Once)
    mx.add_argument("--epoch", type=_dec(0, MASK32), required=True, action=_Once)
    a = ap.parse_args(argv)

    out = sys.stdout
    if a.cmd == "mix":
        sizes = [_dec(1, MASK32)(t) for t in a.sizes.split(",")]
        weights = a.weights.split(",")
        if len(sizes) != len(weights):
            ap.error("--sizes and --weights need as many entries")
        try:
            order_ = mix_order(sizes, weights, a.seed, a.epoch, a.length)
        except ValueError as e:
            ap.error(str(e))
        out.write("".join("%d %d\n" % sq for sq in order_))
    elif a.cmd == "order":
        try:
            kind, k = parse_order(a.order or "global")
        except ValueError as e:
            ap.error("--order: %s" % e)
        if (a.n is None) == (a.shard_sizes is None):
            ap.error("order needs --n N or --shard-sizes C0,C1,...")
        if a.shard_sizes is not None:
            sizes = [_dec(0, MASK32)(t) for t in a.shard_sizes.split(",")]
            n = sum(sizes)
            if n < 1:
                ap.error("--shard-sizes: no sample")
        else:
            n = a.n
        if kind == "block":
            if a.shard_sizes is None:
                ap.error("--order block:K needs --shard-sizes")
            idx = block_order(sizes, k, a.seed, a.epoch)
        elif kind == "sequential":
            idx = range(n)
        else:
            p = Perm(n, stream_key(a.seed, "shuffle"), a.epoch)
            idx = (p.at(i) for i in range(n))
        out.write("".join("%d\n" % i for i in idx))
    elif a.batch:
        for line in sys.stdin:
            try:
                w = [_word(t) for t in line.split()]
            except argparse.ArgumentTypeError as e:
                ap.error("--batch: %s" % e)
            if not w:
                continue
            if len(w) != 6:
                ap.error("--batch: each line needs 6 hex words: k0 k1 c0 c1 c2 c3")
            out.write(_fmt(philox(w[2:6], w[0:2])) + "\n")
    elif a.key is not None and a.counter is not None:
        out.write(_fmt(philox(a.counter, a.key)) + "\n")
    elif a.seed is not None and a.stream is not None:
        if a.worker is not None:
            if a.stream != "worker":
                ap.error("--worker needs --stream worker")
            out.write(_fmt(worker_key(a.seed, a.worker)) + "\n")
        else:
            out.write(_fmt(stream_key(a.seed, a.stream)) + "\n")
    else:
        ap.error("rng needs --key and --counter, --batch, or --seed and --stream")
    return 0


if __name__ == "__main__":
    sys.exit(main())
