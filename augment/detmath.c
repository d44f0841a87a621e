/* detmath.c - deterministic log and exp from + - * / and bit manipulation.
 *
 * HOW IT WORKS: see include/seedpipe/detmath.h. The polynomial coefficients
 * and the hi/lo splits of ln 2 are the published fdlibm ones (e_log.c,
 * e_exp.c; Sun Microsystems, "Permission to use, copy, modify, and
 * distribute this software is freely granted, provided that this notice is
 * preserved."). The evaluation order below is fixed and written out
 * explicitly; the file must be compiled with -ffp-contract=off (the project
 * default) so no multiply-add is fused. No libm function is called.
 *
 * SPEC: docs/determinism.md section 5a states this algorithm to the
 * operation (constants as exact hex floats, evaluation order, special
 * cases, test vectors); tests/detmath_ref.py implements it from that page
 * and tests/test_detmath_ref.py + test_ops.c (test_detmath_vectors) hold
 * the two bit for bit. A change here that changes any result bit is a
 * format change (random_resized_crop boxes move) and must change that
 * section, its vectors, and the loader fingerprint's version string.
 */
#include "seedpipe/detmath.h"

#include <math.h>     /* INFINITY and NAN macros only; no libm call */
#include <stdint.h>
#include <string.h>

static uint64_t d2u(double x) { uint64_t u; memcpy(&u, &x, sizeof u); return u; }
static double u2d(uint64_t u) { double x; memcpy(&x, &u, sizeof x); return x; }

static const double LN2_HI = 6.93147180369123816490e-01; /* 0x3fe62e42 fee00000 */
static const double LN2_LO = 1.90821492927058770002e-10; /* 0x3dea39ef 35793c76 */
static const double TWO54 = 1.80143985094819840000e+16;   /* 2^54 */

static const double LG1 = 6.666666666666735130e-01;
static const double LG2 = 3.999999999940941908e-01;
static const double LG3 = 2.857142874366239149e-01;
static const double LG4 = 2.222219843214978396e-01;
static const double LG5 = 1.818357216161805012e-01;
static const double LG6 = 1.531383769920937332e-01;
static const double LG7 = 1.479819860511658591e-01;

double sp_det_log(double x) {
    uint64_t u = d2u(x);
    int32_t hx = (int32_t)(u >> 32);
    int k = 0;
    if (hx < 0x00100000) {                 /* x < 2^-1022, zero or negative */
        if ((u & 0x7fffffffffffffffull) == 0) return -INFINITY;
        if (hx < 0) return NAN;            /* x < 0 */
        k -= 54;                            /* subnormal: scale up */
        x *= TWO54;
        u = d2u(x);
        hx = (int32_t)(u >> 32);
    }
    if (hx >= 0x7ff00000) return x + x;     /* +inf or NaN */
    k += (hx >> 20) - 1023;
    hx &= 0x000fffff;
    /* Normalise the mantissa into [sqrt(2)/2, sqrt(2)): i is 0x100000 when
     * the mantissa is >= sqrt(2) (then halve it and bump k). */
    int32_t i = (hx + 0x95f64) & 0x100000;
    u = ((uint64_t)(uint32_t)(hx | (i ^ 0x3ff00000)) << 32) | (u & 0xffffffffull);
    x = u2d(u);
    k += i >> 20;
    double f = x - 1.0;
    double dk = (double)k;
    if ((0x000fffff & (2 + hx)) < 3) {     /* |f| < 2^-20 */
        if (f == 0.0) {
            if (k == 0) return 0.0;
            return dk * LN2_HI + dk * LN2_LO;
        }
        double r = f * f * (0.5 - 0.33333333333333333 * f);
        if (k == 0) return f - r;
        return dk * LN2_HI - ((r - dk * LN2_LO) - f);
    }
    double s = f / (2.0 + f);
    double z = s * s;
    double w = z * z;
    double t1 = w * (LG2 + w * (LG4 + w * LG6));
    double t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    double r = t2 + t1;
    int32_t j = (hx - 0x6147a) | (0x6b851 - hx);
    if (j > 0) {                            /* 1+f further from 1: use hfsq */
        double hfsq = 0.5 * f * f;
        if (k == 0) return f - (hfsq - s * (hfsq + r));
        return dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f);
    }
    if (k == 0) return f - s * (f - r);
    return dk * LN2_HI - ((s * (f - r) - dk * LN2_LO) - f);
}

static const double EXP_O_THRESHOLD = 7.09782712893383973096e+02;
static const double EXP_U_THRESHOLD = -7.45133219101941108420e+02;
static const double INV_LN2 = 1.44269504088896338700e+00;
static const double P1 = 1.66666666666666019037e-01;
static const double P2 = -2.77777777770155933842e-03;
static const double P3 = 6.61375632143793436117e-05;
static const double P4 = -1.65339022054652515390e-06;
static const double P5 = 4.13813679705723846039e-08;

/* y * 2^k by integer addition to the exponent field; y is in [0.5, 2]
 * here, so the result is normal for k in [-1021, 1023]. */
static double scale_pow2(double y, int k) {
    if (k >= -1021) return u2d(d2u(y) + ((uint64_t)(int64_t)k << 52));
    /* Result may be subnormal: scale to a normal number first, then one
     * correctly rounded multiplication by 2^-1000. */
    double t = u2d(d2u(y) + ((uint64_t)(int64_t)(k + 1000) << 52));
    return t * u2d((uint64_t)(1023 - 1000) << 52);
}

double sp_det_exp(double x) {
    uint64_t u = d2u(x);
    uint32_t hx = (uint32_t)(u >> 32) & 0x7fffffffu;
    int neg = (int)(u >> 63);
    if (hx >= 0x7ff00000u) {               /* inf or NaN */
        if (x != x) return x + x;
        return neg ? 0.0 : x;
    }
    if (x > EXP_O_THRESHOLD) return INFINITY;
    if (x < EXP_U_THRESHOLD) return 0.0;
    double hi, lo;
    int k;
    if (hx > 0x3fd62e42u) {                /* |x| > 0.5 ln2 */
        if (hx < 0x3ff0a2b2u) {            /* |x| < 1.5 ln2: k = +-1 */
            k = neg ? -1 : 1;
            hi = neg ? x + LN2_HI : x - LN2_HI;
            lo = neg ? -LN2_LO : LN2_LO;
        } else {
            k = (int)(INV_LN2 * x + (neg ? -0.5 : 0.5));   /* truncation */
            double dk = (double)k;
            hi = x - dk * LN2_HI;          /* exact: dk * LN2_HI has 32 bits */
            lo = dk * LN2_LO;
        }
        x = hi - lo;
    } else if (hx < 0x3e300000u) {         /* |x| < 2^-28 */
        return 1.0 + x;
    } else {
        k = 0;
        hi = x;
        lo = 0.0;
    }
    double t = x * x;
    double c = x - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
    if (k == 0) return 1.0 - ((x * c) / (c - 2.0) - x);
    double y = 1.0 - ((lo - (x * c) / (2.0 - c)) - hi);
    return scale_pow2(y, k);
}

double sp_det_round_half_even(double x) {
    double ax = x < 0 ? -x : x;
    if (!(ax < 4503599627370496.0)) return x;   /* >= 2^52 (or NaN): integral */
    double t = (double)(int64_t)x;              /* truncation toward zero */
    double d = x - t;                           /* exact */
    int odd = (int)((int64_t)t & 1);
    if (x >= 0) {
        if (d > 0.5 || (d == 0.5 && odd)) t += 1.0;
    } else {
        if (d < -0.5 || (d == -0.5 && odd)) t -= 1.0;
    }
    return t;
}
