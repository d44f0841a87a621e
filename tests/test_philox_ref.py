#!/usr/bin/env python3
"""test_philox_ref.py - the C code against the independent Python reference.

Run by ctest with python3 (standard library only). It first checks the
reference itself (tests/philox_ref.py) against published known answers, then
compares the seedpipe CLI ($SEEDPIPE_BIN) with it:
  - `rng --key K0 K1 --counter C0 C1 C2 C3` on known-answer and random inputs,
    with and without 0x prefixes, in the exact output format
    (4 words, 8-digit lowercase hex, one line);
  - `rng --batch` on 10,000 random (key, counter) pairs plus edge values;
  - `rng --seed S --stream NAME [--worker W]` for every stream and several
    seeds (0, 2^32, 2^64-1, ...) and worker ids;
  - `order --n N --seed S --epoch E` for N in {1, 2, 3, 5, 17, 1000, 4097}
    (whole order) and N = 65537 (a permutation, and a sample of positions);
  - `order --shard-sizes C0,C1,... --order block:K` (section 6a) on 150
    random shard tables (empty shards, K = 1, K >= S included) and one of
    3000 shards, and `order DATASET --order block:K` on shapes written as
    tar shards by `seedpipe shard`, whole epochs, byte for byte; the
    reference's block order is a permutation;
  - the reference's mixture weight rule on its edge texts (trailing zeros
    past 18 digits accepted, 19 digits or decimals refused).
It FAILS (exit 1), never skips, when SEEDPIPE_BIN is unset or the CLI lacks
these commands: the comparison is the point of the test.
"""
import gzip
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import philox_ref as R  # noqa: E402

HEX8 = re.compile(r"^[0-9a-f]{8}$")
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


# ---- the reference on its own --------------------------------------------------

def check_reference():
    want = (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    if R.philox((0, 0, 0, 0), (0, 0)) != want:
        fail("reference: DESIGN.md vector")
    n = 0
    for d in ("/usr/share/doc/librandom123-dev/tests", "/usr/share/doc/librandom123-doc/tests"):
        for name in ("kat_vectors.gz", "old_kat_vectors.gz"):
            path = os.path.join(d, name)
            if not os.path.exists(path):
                continue
            with gzip.open(path, "rt") as f:
                for line in f:
                    t = line.split()
                    if len(t) == 12 and t[0] == "philox4x32" and t[1] == "10":
                        w = [int(x, 16) for x in t[2:]]
                        if R.philox(w[0:4], w[4:6]) != tuple(w[6:10]):
                            fail("reference: %s: %s" % (path, line.strip()))
                        n += 1
    print("reference: DESIGN.md vector and %d Random123 vectors" % n)
    # The reference permutation is a permutation, and the key split is low-first.
    for size in (1, 2, 3, 5, 17, 100):
        if sorted(R.order(size, 9, 2)) != list(range(size)):
            fail("reference: order(%d) is not a permutation" % size)
    if R.key_from_seed(0x0123456789ABCDEF) != (0x89ABCDEF, 0x01234567):
        fail("reference: key_from_seed")
    # The mixture weight rule (docs/determinism.md section 10): trailing zeros
    # after the point dropped before 18 digits and 18 decimals are counted
    # (tests/test_mix.py runs the same texts through the tool).
    for text, want in (("0.1000000000000000000", (1, 1)),
                       ("999999999999999999.0", (999999999999999999, 0)),
                       ("0.500", (5, 1)), ("10.0", (10, 0)), (".25", (25, 2)),
                       ("0.000000000000000001", (1, 18)), ("1.", (1, 0))):
        if R.mix_weight(text) != want:
            fail("reference: mix_weight(%r) = %r, want %r" % (text, R.mix_weight(text), want))
    for text in ("1000000000000000000", "0.0000000000000000001", "0.1000000000000000001",
                 "0", "0.000", ".", "", "1e3", "-1", "\u0661"):
        try:
            R.mix_weight(text)
            fail("reference: mix_weight(%r) accepted" % text)
        except ValueError:
            pass
    # Rank slices concatenate to the global batch.
    for n, b_size, drop in ((10, 8, False), (10, 8, True), (100, 12, False), (7, 4, False)):
        for world in (1, 2, 4):
            for b in range(R.batches_per_epoch(n, b_size, drop)):
                got = []
                for r in range(world):
                    start, count = R.batch_slice(n, b_size, drop, r, world, b)
                    got += range(start, start + count)
                if got != list(range(b * b_size, min((b + 1) * b_size, n))):
                    fail("reference: batch_slice n=%d B=%d world=%d b=%d" % (n, b_size, world, b))


# ---- the CLI ---------------------------------------------------------------------

def cli(args, stdin=None):
    binary = os.environ.get("SEEDPIPE_BIN")
    cmd = [binary] + [str(a) for a in args]
    try:
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=300)
    except OSError as e:
        raise RuntimeError("cannot run %s: %s" % (" ".join(cmd), e))
    if p.returncode != 0:
        raise RuntimeError("`%s` exited %d (does the CLI implement this command?): %s"
                           % (" ".join(cmd[1:]), p.returncode, p.stderr.strip()[:500]))
    return p.stdout


def words(line, count, what):
    t = line.split()
    if len(t) != count or not all(HEX8.match(x) for x in t):
        raise RuntimeError("%s: expected %d 8-digit lowercase hex words, got %r"
                           % (what, count, line))
    return tuple(int(x, 16) for x in t)


def check_rng_single(rnd):
    cases = [((0, 0), (0, 0, 0, 0)),
             ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF,) * 4),
             ((0xA4093822, 0x299F31D0), (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344))]
    cases += [((rnd.getrandbits(32), rnd.getrandbits(32)),
               tuple(rnd.getrandbits(32) for _ in range(4))) for _ in range(20)]
    for i, (k, c) in enumerate(cases):
        fmt = "0x%08x" if i % 2 else "%x"
        out = cli(["rng", "--key"] + [fmt % w for w in k] + ["--counter"] + [fmt % w for w in c])
        lines = out.splitlines()
        if len(lines) != 1:
            fail("rng --key/--counter printed %d lines, expected 1" % len(lines))
            continue
        got = words(lines[0], 4, "rng --key/--counter")
        if got != R.philox(c, k):
            fail("rng key=%s counter=%s: C %s, reference %s"
                 % (k, c, lines[0], " ".join("%08x" % w for w in R.philox(c, k))))


def check_rng_batch(rnd):
    rows = [(0, 0, 0, 0, 0, 0), (0xFFFFFFFF,) * 6, (1, 0, 0, 0, 0, 0), (0, 1, 0, 0, 0, 0)]
    rows += [tuple(rnd.getrandbits(32) for _ in range(6)) for _ in range(10000 - len(rows))]
    text = "".join(" ".join("%08x" % w for w in r) + "\n" for r in rows)
    lines = cli(["rng", "--batch"], stdin=text).splitlines()
    if len(lines) != len(rows):
        fail("rng --batch: %d output lines for %d input lines" % (len(lines), len(rows)))
        return
    bad = 0
    for r, line in zip(rows, lines):
        want = R.philox(r[2:6], r[0:2])
        if words(line, 4, "rng --batch") != want:
            bad += 1
            if bad <= 5:
                fail("rng --batch key=%08x %08x counter=%s: C %s, reference %s"
                     % (r[0], r[1], " ".join("%08x" % w for w in r[2:]), line,
                        " ".join("%08x" % w for w in want)))
    if bad:
        fail("rng --batch: %d of %d mismatches" % (bad, len(rows)))
    else:
        print("rng --batch: %d pairs match" % len(rows))


def check_streams():
    seeds = [0, 1, 42, 1 << 32, (1 << 64) - 1, 0x0123456789ABCDEF]
    for seed in seeds:
        for name in sorted(R.STREAMS):
            got = words(cli(["rng", "--seed", seed, "--stream", name]).strip(), 2,
                        "rng --seed --stream")
            if got != R.stream_key(seed, name):
                fail("stream key seed=%d %s: C %08x %08x, reference %08x %08x"
                     % ((seed, name) + got + R.stream_key(seed, name)))
        for w in (0, 1, 7, 255):
            got = words(cli(["rng", "--seed", seed, "--stream", "worker", "--worker", w]).strip(),
                        2, "rng --stream worker --worker")
            if got != R.worker_key(seed, w):
                fail("worker key seed=%d w=%d: C %08x %08x, reference %08x %08x"
                     % ((seed, w) + got + R.worker_key(seed, w)))
    print("stream and worker keys: %d seeds checked" % len(seeds))


def cli_order(n, seed, epoch):
    out = cli(["order", "--n", n, "--seed", seed, "--epoch", epoch]).split()
    if len(out) != n:
        raise RuntimeError("order --n %d printed %d indices" % (n, len(out)))
    return [int(x) for x in out]


def check_orders():
    cases = [(1, 0, 0), (2, 5, 0), (2, 5, 1), (3, 42, 0), (5, 42, 9), (17, 7, 3),
             (1000, 42, 0), (1000, 42, 1), (1000, 43, 0), (4097, (1 << 64) - 1, 4294967295)]
    for n, seed, epoch in cases:
        got = cli_order(n, seed, epoch)
        want = R.order(n, seed, epoch)
        if got != want:
            first = next(i for i in range(n) if got[i] != want[i])
            fail("order n=%d seed=%d epoch=%d: position %d is %d in C, %d in the reference"
                 % (n, seed, epoch, first, got[first], want[first]))
    n, seed, epoch = 65537, 2024, 3
    got = cli_order(n, seed, epoch)
    if sorted(got) != list(range(n)):
        fail("order n=65537 is not a permutation")
    perm = R.Perm(n, R.stream_key(seed, "shuffle"), epoch)
    for pos in list(range(200)) + list(range(n - 200, n)) + list(range(0, n, 331)):
        if got[pos] != perm.at(pos):
            fail("order n=65537 position %d: C %d, reference %d" % (pos, got[pos], perm.at(pos)))
            break
    print("order: %d cases match" % (len(cases) + 1))


def cli_block(sizes, k, seed, epoch, dataset=None):
    args = ["order"] + ([dataset] if dataset else ["--shard-sizes", ",".join(map(str, sizes))])
    return cli(args + ["--order", "block:%d" % k, "--seed", seed, "--epoch", epoch])


def check_block_orders(rnd):
    cases = [([5], 1, 0, 0), ([5], 3, 1, 2), ([3, 0, 4, 2, 5], 2, 42, 0), ([0, 0, 9, 0], 1, 7, 1),
             ([10, 10, 10, 7], 4, 42, 4294967295), ([10, 10, 10, 7], 9, (1 << 64) - 1, 3)]
    for _ in range(150):
        ns = rnd.randint(1, 60)
        sizes = [rnd.choice([0, rnd.randint(1, 40)]) for _ in range(ns)]
        if not sum(sizes):
            sizes[0] = 1
        cases.append((sizes, rnd.randint(1, 12), rnd.getrandbits(64), rnd.getrandbits(32)))
    cases.append(([rnd.randint(0, 5) for _ in range(3000)] + [1], 16, 2024, 5))
    for sizes, k, seed, epoch in cases:
        want = R.block_order(sizes, k, seed, epoch)
        if sorted(want) != list(range(sum(sizes))):
            fail("reference: block order of %d shards is not a permutation" % len(sizes))
        text = "".join("%d\n" % i for i in want)
        got = cli_block(sizes, k, seed, epoch)
        if got != text:
            g = got.split()
            first = next((i for i in range(min(len(g), len(want))) if int(g[i]) != want[i]),
                         min(len(g), len(want)))
            fail("order block:%d of %d shards seed=%d epoch=%d: differs from position %d"
                 % (k, len(sizes), seed, epoch, first))
    # A real dataset of shards: its shard sizes are what `shard --max-count` wrote.
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        cli(["make-shapes", os.path.join(tmp, "f"), "--count", 41, "--size", 16])
        cli(["shard", os.path.join(tmp, "f"), os.path.join(tmp, "s"), "--max-count", 6])
        sizes = [6] * 6 + [5]
        for k, seed, epoch in ((1, 3, 0), (2, 3, 1), (3, 99, 7), (7, 1, 0)):
            if cli_block(None, k, seed, epoch, os.path.join(tmp, "s")) != "".join(
                    "%d\n" % i for i in R.block_order(sizes, k, seed, epoch)):
                fail("order DATASET --order block:%d seed=%d epoch=%d differs from the "
                     "reference" % (k, seed, epoch))
    print("block order: %d shard tables and a sharded dataset match" % len(cases))


def main():
    check_reference()
    binary = os.environ.get("SEEDPIPE_BIN")
    if not binary:
        fail("SEEDPIPE_BIN is not set: it must name the seedpipe CLI (ctest sets it)")
    elif not os.access(binary, os.X_OK):
        fail("SEEDPIPE_BIN=%s is not an executable file" % binary)
    else:
        rnd = random.Random(0x5EED)
        for check in (check_rng_single, check_rng_batch, check_streams, check_orders,
                      check_block_orders):
            try:
                if check in (check_rng_single, check_rng_batch, check_block_orders):
                    check(rnd)
                else:
                    check()
            except RuntimeError as e:
                fail("%s: %s" % (check.__name__, e))
    if FAILURES:
        print("test_philox_ref: %d failure(s)" % len(FAILURES), file=sys.stderr)
        return 1
    print("test_philox_ref: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
