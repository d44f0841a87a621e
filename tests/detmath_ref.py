#!/usr/bin/env python3
"""detmath_ref.py - an independent reference for seedpipe's det_log / det_exp.

Written from docs/determinism.md section 5a (the normative algorithm), with
the Python standard library only. Python floats are IEEE-754 binary64 and
every operation below is one correctly rounded operation (round to nearest,
ties to even; CPython never fuses a multiply and an add), so each line is the
spec's line and the results are the C code's bits (augment/detmath.c,
sp_det_log / sp_det_exp / sp__det_round_half_even). tests/test_detmath_ref.py
checks that bit for bit. philox_ref.py imports these for random_resized_crop.

    import detmath_ref as D
    D.det_log(2.0)   -> 0.6931471805599453
    D.bits(D.det_exp(1.0)) -> 0x4005bf0a8b14576a  (1 ulp above e: the spec's bits)
"""
import struct

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF


def bits(x):
    """The 64-bit pattern of a binary64 value."""
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits(u):
    """The binary64 value of a 64-bit pattern."""
    return struct.unpack("<d", struct.pack("<Q", u & MASK64))[0]


def _hi_signed(u):
    """The upper 32 bits of a pattern as a signed 32-bit integer."""
    h = u >> 32
    return h - (1 << 32) if h & 0x80000000 else h


# Constants (section 5a): given as hex floats, the exact values.
LN2_HI = float.fromhex("0x1.62e42fee00000p-1")    # 3fe62e42fee00000
LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")   # 3dea39ef35793c76
TWO54 = float.fromhex("0x1p54")                   # 4350000000000000
THIRD = float.fromhex("0x1.5555555555555p-2")     # 3fd5555555555555
LG1 = float.fromhex("0x1.5555555555593p-1")       # 3fe5555555555593
LG2 = float.fromhex("0x1.999999997fa04p-2")       # 3fd999999997fa04
LG3 = float.fromhex("0x1.2492494229359p-2")       # 3fd2492494229359
LG4 = float.fromhex("0x1.c71c51d8e78afp-3")       # 3fcc71c51d8e78af
LG5 = float.fromhex("0x1.7466496cb03dep-3")       # 3fc7466496cb03de
LG6 = float.fromhex("0x1.39a09d078c69fp-3")       # 3fc39a09d078c69f
LG7 = float.fromhex("0x1.2f112df3e5244p-3")       # 3fc2f112df3e5244

O_THRESHOLD = float.fromhex("0x1.62e42fefa39efp+9")    # 40862e42fefa39ef
U_THRESHOLD = float.fromhex("-0x1.74910d52d3051p+9")   # c0874910d52d3051
INV_LN2 = float.fromhex("0x1.71547652b82fep+0")        # 3ff71547652b82fe
P1 = float.fromhex("0x1.555555555553ep-3")             # 3fc555555555553e
P2 = float.fromhex("-0x1.6c16c16bebd93p-9")            # bf66c16c16bebd93
P3 = float.fromhex("0x1.1566aaf25de2cp-14")            # 3f11566aaf25de2c
P4 = float.fromhex("-0x1.bbd41c5d26bf1p-20")           # bebbbd41c5d26bf1
P5 = float.fromhex("0x1.6376972bea4d0p-25")            # 3e66376972bea4d0
TWOM1000 = float.fromhex("0x1p-1000")                  # 1170000000000000

INF = float("inf")
NAN = float("nan")


def det_log(x):
    """Natural logarithm, section 5a, step by step."""
    x = float(x)
    u = bits(x)
    hx = _hi_signed(u)
    k = 0
    if hx < 0x00100000:                       # zero, subnormal, or sign bit set
        if u & 0x7FFFFFFFFFFFFFFF == 0:
            return -INF                       # +0 and -0
        if hx < 0:
            return NAN                        # negative, -inf, NaN with sign bit
        k = -54
        x = x * TWO54                         # exact
        u = bits(x)
        hx = _hi_signed(u)
    if hx >= 0x7FF00000:
        return x + x                          # +inf, or a NaN
    k = k + (hx >> 20) - 1023
    m = hx & 0x000FFFFF
    i = (m + 0x95F64) & 0x100000
    x1 = from_bits(((m | (i ^ 0x3FF00000)) << 32) | (u & MASK32))
    k = k + (i >> 20)
    f = x1 - 1.0
    dk = float(k)
    if ((m + 2) & 0x000FFFFF) < 3:            # m in {0, 0xffffe, 0xfffff}
        if f == 0.0:
            if k == 0:
                return 0.0
            return dk * LN2_HI + dk * LN2_LO
        r = (f * f) * (0.5 - THIRD * f)
        if k == 0:
            return f - r
        return dk * LN2_HI - ((r - dk * LN2_LO) - f)
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (LG2 + w * (LG4 + w * LG6))
    t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)))
    r = t2 + t1
    if 0x6147A <= m <= 0x6B851:
        hfsq = (0.5 * f) * f
        if k == 0:
            return f - (hfsq - s * (hfsq + r))
        return dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f)
    if k == 0:
        return f - s * (f - r)
    return dk * LN2_HI - ((s * (f - r) - dk * LN2_LO) - f)


def _scale(y, k):
    """y * 2^k, section 5a: exponent-field addition, or one rounding."""
    if k >= -1021:
        return from_bits(bits(y) + (k << 52))
    return from_bits(bits(y) + ((k + 1000) << 52)) * TWOM1000


def det_exp(x):
    """e^x, section 5a, step by step."""
    x = float(x)
    u = bits(x)
    hx = (u >> 32) & 0x7FFFFFFF
    neg = u >> 63
    if hx >= 0x7FF00000:
        if x != x:
            return x + x
        return 0.0 if neg else INF
    if x > O_THRESHOLD:
        return INF
    if x < U_THRESHOLD:
        return 0.0
    if hx > 0x3FD62E42:
        if hx < 0x3FF0A2B2:
            k = -1 if neg else 1
            hi = x + LN2_HI if neg else x - LN2_HI
            lo = -LN2_LO if neg else LN2_LO
        else:
            k = int(INV_LN2 * x + (-0.5 if neg else 0.5))   # int(): toward zero
            dk = float(k)
            hi = x - dk * LN2_HI
            lo = dk * LN2_LO
        r = hi - lo
    elif hx < 0x3E300000:
        return 1.0 + x
    else:
        k, hi, lo, r = 0, x, 0.0, x
    t = r * r
    c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
    if k == 0:
        return 1.0 - ((r * c) / (c - 2.0) - r)
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    return _scale(y, k)


def round_half_even(x):
    """round_even of docs/pipeline.md: nearest integer, ties to even (exact);
    infinities and NaN are returned as they are."""
    if x != x or x in (INF, -INF):
        return x
    return float(round(x))
