#!/usr/bin/env python3
"""test_detmath_ref.py - det_log / det_exp: the spec, the reference, the C code.

Run by ctest with python3 (standard library only). Three checks:
  1. the reference (tests/detmath_ref.py, written from docs/determinism.md
     section 5a) gives the bits of the test-vector table in that section,
     which is parsed from the page itself;
  2. the reference over a seeded input sequence (splitmix64, 20,000 inputs
     per function, below: all bit patterns, the ratios and log-ratios
     random_resized_crop uses, near 1, near sqrt(2) * 2^e, the k-boundaries
     of exp's reduction, the overflow and underflow thresholds, subnormal
     results) hashes to the FNV-1a digest that tests/test_ops.c
     (test_detmath_vectors) asserts for the C functions on the same
     sequence: bit for bit through the digest, in any build;
  3. where libseedpipe.so can be loaded with ctypes ($SP_BUILD_DIR, or
     $SEEDPIPE_LIB), every input of (2) and 100,000 more compared one by one
     with sp_det_log / sp_det_exp, and philox_ref.rrc_sample with
     sp__rrc_sample on 20,000 random images, ranges and keys (the reference's
     random_resized_crop uses det_log / det_exp). A library that cannot be
     loaded into this python (a sanitizer build) is reported and the
     one-by-one part is left out; (1) and (2) still decide.
Exit 0 on pass, 1 on failure.
"""
import ctypes
import math
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import detmath_ref as D  # noqa: E402
import philox_ref as R  # noqa: E402
from cli_testlib import reexec_for  # noqa: E402

FAILURES = []
N_PER_FUNCTION = 20000
# The same constants are in tests/test_ops.c (test_detmath_vectors): the
# digest of the C functions' results on the same sequence.
DIGEST_LOG = 0x4BE06560F10E4BC4
DIGEST_EXP = 0x00A88DCC7E852F25
CANONICAL_NAN = 0x7FF8000000000000


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


# ---- the seeded input sequence (mirrored in tests/test_ops.c) ----------------

class SplitMix64:
    def __init__(self, seed):
        self.s = seed & D.MASK64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & D.MASK64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & D.MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & D.MASK64
        return z ^ (z >> 31)


def log_inputs(n):
    g = SplitMix64(0x5EED0001)
    for i in range(n):
        r = g.next()
        u = (r >> 11) * 2.0 ** -53
        c = i % 5
        if c == 0:
            yield D.from_bits(r >> 1)                    # any non-negative pattern
        elif c == 1:
            yield 0.05 + 19.95 * u                        # ratios
        elif c == 2:
            yield 1.0 + (u - 0.5) * 2.0 ** -17            # near 1: the |f| small branch
        elif c == 3:
            yield math.ldexp(1.35 + 0.1 * u, (r & 63) - 32)   # around sqrt(2) * 2^e
        else:
            yield D.from_bits(r)                          # any pattern, negatives too


def exp_inputs(n):
    g = SplitMix64(0x5EED0002)
    for i in range(n):
        r = g.next()
        u = (r >> 11) * 2.0 ** -53
        c = i % 5
        if c == 0:
            yield -750.0 + 1462.0 * u                     # the whole range and beyond
        elif c == 1:
            yield (u - 0.5) * 2.0                         # k = 0, +-1; the RRC log-ratios
        elif c == 2:
            x = math.ldexp(1.0 + u, (r & 63) - 50)         # 2^-50 .. 2^14
            yield -x if (r >> 6) & 1 else x
        elif c == 3:
            k = (r & 4095) % 2100 - 1076                  # where k of the reduction changes
            yield (k + 0.5) * 0.6931471805599453 + (u - 0.5) * 1e-9
        else:
            w = r & 3
            if w == 0:
                yield D.O_THRESHOLD + (u - 0.5) * 1e-11
            elif w == 1:
                yield D.U_THRESHOLD + (u - 0.5) * 1e-11
            elif w == 2:
                yield -708.0 - 37.0 * u                   # subnormal results
            else:
                yield D.from_bits(r)


def result_bits(y):
    return CANONICAL_NAN if y != y else D.bits(y)


def fnv1a(values, fn):
    h = 0xCBF29CE484222325
    for x in values:
        b = result_bits(fn(x))
        for i in range(8):
            h ^= (b >> (8 * i)) & 0xFF
            h = (h * 0x100000001B3) & D.MASK64
    return h


# ---- 1. the page's table ---------------------------------------------------------

ROW = re.compile(r"^\|\s*`?(det_log|det_exp)`?\s*\|[^|]*\|\s*`?([0-9a-f]{16})`?\s*\|"
                 r"\s*`?([0-9a-f]{16}|NaN)`?\s*\|")


def check_table():
    path = os.path.join(HERE, "..", "docs", "determinism.md")
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = ROW.match(line)
            if m:
                rows.append(m.groups())
    if len(rows) < 24:
        fail("docs/determinism.md: %d det_log/det_exp vector rows found, expected at least 24"
             % len(rows))
    for name, xb, yb in rows:
        x = D.from_bits(int(xb, 16))
        y = (D.det_log if name == "det_log" else D.det_exp)(x)
        if yb == "NaN":
            if y == y:
                fail("table: %s(%s) is %s, the page says NaN" % (name, xb, y.hex()))
        elif result_bits(y) != int(yb, 16):
            fail("table: %s(%s): reference %016x, the page %s" % (name, xb, result_bits(y), yb))
    print("table: %d vectors from docs/determinism.md" % len(rows))
    return rows


# ---- 2. the digest the C test asserts ----------------------------------------------

def check_digests():
    dl = fnv1a(log_inputs(N_PER_FUNCTION), D.det_log)
    de = fnv1a(exp_inputs(N_PER_FUNCTION), D.det_exp)
    print("digest: det_log %016x det_exp %016x over %d inputs each" % (dl, de, N_PER_FUNCTION))
    if dl != DIGEST_LOG:
        fail("det_log digest %016x, tests/test_ops.c asserts %016x for the C code" % (dl, DIGEST_LOG))
    if de != DIGEST_EXP:
        fail("det_exp digest %016x, tests/test_ops.c asserts %016x for the C code" % (de, DIGEST_EXP))


# ---- 3. one by one through ctypes --------------------------------------------------

def load_library():
    cands = []
    if os.environ.get("SEEDPIPE_LIB"):
        cands.append(os.environ["SEEDPIPE_LIB"])
    if os.environ.get("SP_BUILD_DIR"):
        cands.append(os.path.join(os.environ["SP_BUILD_DIR"], "libseedpipe.so"))
    cands.append(os.path.join(HERE, "..", "build", "libseedpipe.so"))
    for path in cands:
        if not os.path.exists(path):
            continue
        reexec_for(path)   # a sanitizer build: its runtimes preloaded first
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            print("note: cannot load %s into this python (%s): one-by-one part left out"
                  % (path, str(e)[:200]))
            return None, path
    print("note: no libseedpipe.so found (%s): one-by-one part left out" % ", ".join(cands))
    return None, None


class Key(ctypes.Structure):
    _fields_ = [("k", ctypes.c_uint32 * 2)]


class Box(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int), ("w", ctypes.c_int), ("h", ctypes.c_int)]


def check_c(lib, rows, path):
    for name in ("sp_det_log", "sp_det_exp"):
        getattr(lib, name).restype = ctypes.c_double
        getattr(lib, name).argtypes = [ctypes.c_double]
    pairs = ((lib.sp_det_log, D.det_log), (lib.sp_det_exp, D.det_exp))
    rnd = random.Random(0x5EED)
    extra = []
    for _ in range(25000):
        extra.append(D.from_bits(rnd.getrandbits(64)))
        extra.append(rnd.uniform(-0.7, 0.7))
        extra.append(rnd.uniform(0.01, 100.0))
        extra.append(float("%.9g" % rnd.uniform(0.05, 5.0)))   # canonical ratios
    sets = ((pairs[0], list(log_inputs(N_PER_FUNCTION)) + extra),
            (pairs[1], list(exp_inputs(N_PER_FUNCTION)) + extra))
    total = bad = 0
    for (cf, pf), xs in sets:
        for x in xs:
            a, b = result_bits(cf(x)), result_bits(pf(x))
            total += 1
            if a != b:
                bad += 1
                if bad <= 10:
                    fail("%s(%s = %016x): C %016x, reference %016x"
                         % (pf.__name__, repr(x), D.bits(x), a, b))
    for name, xb, yb in rows:
        cf = lib.sp_det_log if name == "det_log" else lib.sp_det_exp
        y = cf(D.from_bits(int(xb, 16)))
        if (yb == "NaN") != (y != y) or (yb != "NaN" and result_bits(y) != int(yb, 16)):
            fail("table: C %s(%s) = %016x, the page %s" % (name, xb, result_bits(y), yb))
    print("C against the reference: %d of %d results differ" % (bad, total))

    # sp__rrc_sample as spt_rrc_sample (tests/testing_lib.c, a test build)
    tpath = os.path.join(os.path.dirname(path), "libseedpipe_testing.so")
    if not os.path.exists(tpath):
        print("note: %s not built: the crop-draw part left out" % tpath)
        return
    f = ctypes.CDLL(tpath).spt_rrc_sample
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_double] * 4 + [
        Key, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(Box)]
    rbad = 0
    n = 20000
    for i in range(n):
        W, H = rnd.randint(1, 4000), rnd.randint(1, 4000)
        if i % 3 == 0:
            scale, ratio = (0.08, 1.0), (0.75, 1.33333333)   # imagenet-train
        else:
            a, b = rnd.random(), rnd.random()
            scale = (min(a, b), max(a, b))
            a, b = (float("%.9g" % rnd.uniform(0.05, 4.0)) for _ in range(2))
            ratio = (min(a, b), max(a, b))
        k = (rnd.getrandbits(32), rnd.getrandbits(32))
        op, sample, epoch = rnd.randint(0, 7), rnd.getrandbits(32), rnd.getrandbits(32)
        key, box = Key(), Box()
        key.k[0], key.k[1] = k
        t = f(W, H, scale[0], scale[1], ratio[0], ratio[1], key, op, sample, epoch,
              ctypes.byref(box))
        want = R.rrc_sample(W, H, scale, ratio, k, op, sample, epoch)
        if (box.x, box.y, box.w, box.h, t) != want:
            rbad += 1
            if rbad <= 5:
                fail("rrc W=%d H=%d scale=%r ratio=%r key=%r op=%d sample=%d epoch=%d: "
                     "C %r, reference %r" % (W, H, scale, ratio, k, op, sample, epoch,
                                            (box.x, box.y, box.w, box.h, t), want))
    print("random_resized_crop against the reference: %d of %d boxes differ" % (rbad, n))


def main():
    # The reference's special values, independent of any table.
    inf = float("inf")
    for got, want in ((D.det_log(1.0), 0.0), (D.det_log(0.0), -inf), (D.det_log(-0.0), -inf),
                      (D.det_log(inf), inf), (D.det_exp(0.0), 1.0), (D.det_exp(-inf), 0.0),
                      (D.det_exp(inf), inf), (D.det_exp(1000.0), inf), (D.det_exp(-1000.0), 0.0)):
        if got != want:
            fail("reference special value: %r, expected %r" % (got, want))
    if not (D.det_log(-1.0) != D.det_log(-1.0) and D.det_exp(float("nan")) != D.det_exp(float("nan"))):
        fail("reference: NaN cases")
    rows = check_table()
    check_digests()
    lib, path = load_library()
    if lib is not None:
        print("library: %s" % path)
        check_c(lib, rows, path)
    if FAILURES:
        print("test_detmath_ref: %d failure(s)" % len(FAILURES), file=sys.stderr)
        return 1
    print("test_detmath_ref: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
