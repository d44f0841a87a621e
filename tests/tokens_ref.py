#!/usr/bin/env python3
"""tokens_ref.py - an independent reference for a token corpus's windows.

Written from docs/determinism.md section 12 (the normative spec), not from
the C code, with the Python standard library and philox_ref.py only: the
epoch's document order (a keyed Fisher-Yates shuffle), the concat stream
and its windows, the docs packing's layout (best-fit decreasing over the
piece lengths) and each epoch's pieces in its places, and the fields of a
docs window. tests/test_tokens.py compares it with the library, window by
window.

    import tokens_ref as T
    docs = [[5, 6, 7], [], [8, 9]]           # a corpus: each document's tokens
    T.windows(docs, seq_len=4, packing="concat", eod=0, pad=0, seed=1, epoch=0)
    -> [[tokens of window 0], [window 1], ...]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import philox_ref as R  # noqa: E402

TOKENS_STREAM = 11     # K_tokens = K_11 (section 2)
IGNORE = -100


def shuffle(a, seed, epoch, stream):
    """Section 12: Fisher-Yates, i = n-1 down to 1, j = (x * (i+1)) >> 64
    with x the low 64 bits of philox((i, epoch, stream, 0), K_tokens)."""
    a = list(a)
    k = R.stream_key(seed, TOKENS_STREAM)
    for i in range(len(a) - 1, 0, -1):
        o = R.philox((i, epoch, stream, 0), k)
        x = o[0] | (o[1] << 32)
        j = (x * (i + 1)) >> 64
        a[i], a[j] = a[j], a[i]
    return a


def concat_windows(docs, L, eod, pad, seed, epoch):
    order = shuffle(range(len(docs)), seed, epoch, 0)
    stream = []
    for d in order:
        stream += docs[d]
        if eod is not None:
            stream.append(eod)
    n = (len(stream) - 1 + L - 1) // L
    out = []
    for w in range(n):
        win = stream[w * L: w * L + L + 1]
        out.append(win + [pad] * (L + 1 - len(win)))
    return out


def pieces(docs, L):
    """(class length -> members in canonical order). Class L: the full
    pieces as (doc, j) in (doc, j) order; class l < L: the documents whose
    length mod L is l, in increasing id (their last piece)."""
    cls = {}
    for d, toks in enumerate(docs):
        n = len(toks)
        for j in range(n // L):
            cls.setdefault(L, []).append((d, j))
        if n % L:
            cls.setdefault(n % L, []).append((d, n // L))
    return cls


def layout(docs, L):
    """Best-fit decreasing: items class by class from L down to 1; each
    into the open window whose room is the smallest that holds it, among
    equals the one that came to that room last; else a new window. Returns
    the windows as lists of items (class length, rank in class)."""
    cls = pieces(docs, L)
    items = [(l, r) for l in sorted(cls, reverse=True) for r in range(len(cls[l]))]
    wins, room = [], []
    last = {}                                    # window -> when it came to its room
    clock = 0
    for l, r in items:
        best = None
        for w in range(len(wins)):
            if room[w] >= l and room[w] > 0:
                if (best is None or room[w] < room[best] or
                        (room[w] == room[best] and last[w] > last[best])):
                    best = w
        if best is None:
            best = len(wins)
            wins.append([])
            room.append(L)
        wins[best].append((l, r))
        room[best] -= l
        clock += 1
        last[best] = clock
    return wins


def docs_windows(docs, L, pad, seed, epoch, lay=None):
    cls = pieces(docs, L)
    shuffled = {l: shuffle(m, seed, epoch, l) for l, m in cls.items()}
    out, nth = [], {}                          # the r-th place of class l, window by window
    for win in (lay if lay is not None else layout(docs, L)):
        tok, lab, seg, pos, cu = [], [], [], [], [0]
        for s, (l, _) in enumerate(win, 1):
            r = nth.get(l, 0)
            nth[l] = r + 1
            d, j = shuffled[l][r]
            t = docs[d][j * L: j * L + l]
            nxt = docs[d][j * L + 1: j * L + l + 1]
            tok += t
            lab += nxt + [IGNORE] * (l - len(nxt))
            seg += [s] * l
            pos += list(range(l))
            cu.append(len(tok))
        n = len(win)
        padn = L - len(tok)
        rec = (tok + [pad] * padn + lab + [IGNORE] * padn + seg + [0] * padn + pos + [0] * padn +
               cu + [cu[-1]] * (L - n) + [n])
        out.append(rec)
    return out


def windows(docs, seq_len, packing="concat", eod=None, pad=0, seed=0, epoch=0):
    """Every window of the epoch, in window order (the loader's sample
    index; its own order then permutes them: section 6)."""
    if packing == "concat":
        return concat_windows(docs, seq_len, eod, pad, seed, epoch)
    return docs_windows(docs, seq_len, pad, seed, epoch)


def blend_draw_number(a, per_epoch, s, epoch, q, since=None):
    """Section 12b: the number K of source s's draw at slot q of the epoch
    (a: the schedule's sources over one epoch, per_epoch: c_s), counted from
    the run's start or, after a switch since = (e0, q0, draws), continued
    from draws[s] at slot q0 of epoch e0; None before the switch."""
    k = a[:q].count(s)
    if since is None:
        return epoch * per_epoch[s] + k
    e0, q0, draws = since
    if (epoch, q) < (e0, q0):
        return None
    k0 = a[:q0].count(s)
    if epoch == e0:
        return draws[s] + k - k0
    return draws[s] + per_epoch[s] - k0 + (epoch - e0 - 1) * per_epoch[s] + k


def blend_schedule(sizes, weights, length=None):
    """(a, per_epoch, length) of a blend whose sources have sizes windows."""
    w, total = R.mix_weights(weights)
    length = length or sum(sizes)
    a = R.mix_schedule(w, total, length)
    return a, [a.count(s) for s in range(len(sizes))], length


def blend_sizes(corpora, seq_len, packing="concat", eod=None, pad=0, seed=0):
    return [len(windows(docs, seq_len, packing, eod, pad, seed, 0)) for docs in corpora]


def blend_draws_at(sizes, weights, epoch, q, length=None, since=None):
    """Every source's draw number at slot q of the epoch: the draws field of
    a switch made there (section 12b)."""
    a, per_epoch, _ = blend_schedule(sizes, weights, length)
    return [blend_draw_number(a, per_epoch, s, epoch, q, since) for s in range(len(sizes))]


def blend_windows(corpora, weights, seq_len, packing="concat", eod=None, pad=0, seed=0, epoch=0,
                  length=None, since=None):
    """A blend (sections 12a, 12b): slot q of the epoch (the epoch's
    position q: a blend's slots are in schedule order) is section 10's draw
    of its source s over the source's N_s windows: draw K (from the run's
    start, epoch * c_s + k, or continued after the switch `since`) is
    window perm(K mod N_s) of the source's pass K div N_s, and that window
    is the source's window of epoch = that pass. Slots before the switch
    are None."""
    sizes = blend_sizes(corpora, seq_len, packing, eod, pad, seed)
    a, per_epoch, length = blend_schedule(sizes, weights, length)
    cache, out = {}, []
    k_mix = R.stream_key(seed, "mix")
    for q in range(length):
        s = a[q]
        big = blend_draw_number(a, per_epoch, s, epoch, q, since)
        if big is None:
            out.append(None)
            continue
        pas = (big // sizes[s]) & 0xffffffff
        p = R.Perm(sizes[s], R.derive(k_mix, s), pas)
        if (s, pas) not in cache:
            cache[s, pas] = windows(corpora[s], seq_len, packing, eod, pad, seed, pas)
        out.append((s, cache[s, pas][p.at(big % sizes[s])]))
    return out
