/* augment/detmath_internal.h - the one deterministic log and exp, as
 * SP_HOSTDEV functions (not a public header; include/seedpipe/detmath.h is
 * their public face, sp_det_log() and sp_det_exp() in detmath.c).
 *
 * Defined here, in a header, so that every caller runs the same code:
 * augment/ (random_resized_crop's log-uniform ratio, through detmath.c)
 * and the training core (train/nn_math.h's softmax, on the CPU and, under
 * nvcc, in the CUDA kernels: SP_HOSTDEV is `static inline` in C and
 * `__host__ __device__` under nvcc). HOW IT WORKS: include/seedpipe/detmath.h;
 * the algorithm to the operation, its constants and test vectors:
 * docs/determinism.md section 5a (tests/detmath_ref.py implements it from
 * that page). The polynomial coefficients and the hi/lo splits of ln 2 are
 * the published fdlibm ones (e_log.c, e_exp.c; Sun Microsystems,
 * "Permission to use, copy, modify, and distribute this software is freely
 * granted, provided that this notice is preserved."). The evaluation order
 * is fixed and written out; every file that includes this is compiled with
 * -ffp-contract=off (the project default) or --fmad=false (nvcc), so no
 * multiply-add is fused. No libm function is called, and infinities and
 * NaN are made from their bits (no math.h macro in device code).
 *
 * A change here that changes any result bit is a format change
 * (random_resized_crop boxes move, losses change) and must change that
 * section, its vectors, and the loader fingerprint's version string.
 */
#ifndef SEEDPIPE_AUGMENT_DETMATH_INTERNAL_H
#define SEEDPIPE_AUGMENT_DETMATH_INTERNAL_H

#include "seedpipe/detmath.h"
#include <stdint.h>
#include <string.h>

#include "seedpipe/philox.h"   /* SP_HOSTDEV */

#ifdef __cplusplus
extern "C" {
#endif

SP_HOSTDEV uint64_t sp__det_d2u(double x) { uint64_t u; memcpy(&u, &x, sizeof u); return u; }
SP_HOSTDEV double sp__det_u2d(uint64_t u) { double x; memcpy(&x, &u, sizeof x); return x; }

/*! sp__det_log() : natural logarithm, < 1 ulp: log(0) = -inf, log(x < 0)
 *  = NaN (0x7ff8000000000000), log(+inf) = +inf, NaN gives NaN. */
SP_HOSTDEV double sp__det_log(double x) {
    const double LN2_HI = 6.93147180369123816490e-01; /* 0x3fe62e42 fee00000 */
    const double LN2_LO = 1.90821492927058770002e-10; /* 0x3dea39ef 35793c76 */
    const double TWO54 = 1.80143985094819840000e+16;  /* 2^54 */
    const double LG1 = 6.666666666666735130e-01, LG2 = 3.999999999940941908e-01,
                 LG3 = 2.857142874366239149e-01, LG4 = 2.222219843214978396e-01,
                 LG5 = 1.818357216161805012e-01, LG6 = 1.531383769920937332e-01,
                 LG7 = 1.479819860511658591e-01;
    uint64_t u = sp__det_d2u(x);
    int32_t hx = (int32_t)(u >> 32);
    int k = 0;
    if (hx < 0x00100000) {                 /* x < 2^-1022, zero or negative */
        if ((u & 0x7fffffffffffffffull) == 0) return sp__det_u2d(0xfff0000000000000ull);
        if (hx < 0) return sp__det_u2d(0x7ff8000000000000ull);   /* x < 0: NaN */
        k -= 54;                            /* subnormal: scale up */
        x *= TWO54;
        u = sp__det_d2u(x);
        hx = (int32_t)(u >> 32);
    }
    if (hx >= 0x7ff00000) return x + x;     /* +inf or NaN */
    k += (hx >> 20) - 1023;
    hx &= 0x000fffff;
    /* Normalise the mantissa into [sqrt(2)/2, sqrt(2)): i is 0x100000 when
     * the mantissa is >= sqrt(2) (then halve it and bump k). */
    int32_t i = (hx + 0x95f64) & 0x100000;
    u = ((uint64_t)(uint32_t)(hx | (i ^ 0x3ff00000)) << 32) | (u & 0xffffffffull);
    x = sp__det_u2d(u);
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

/* y * 2^k by integer addition to the exponent field; y is in [0.5, 2]
 * here, so the result is normal for k in [-1021, 1023]. */
SP_HOSTDEV double sp__det_scale_pow2(double y, int k) {
    if (k >= -1021) return sp__det_u2d(sp__det_d2u(y) + ((uint64_t)(int64_t)k << 52));
    /* Result may be subnormal: scale to a normal number first, then one
     * correctly rounded multiplication by 2^-1000. */
    double t = sp__det_u2d(sp__det_d2u(y) + ((uint64_t)(int64_t)(k + 1000) << 52));
    return t * sp__det_u2d((uint64_t)(1023 - 1000) << 52);
}

/*! sp__det_exp() : e^x, < 1 ulp: +inf above 709.78, 0 below -745.13 and
 *  for -inf, NaN gives NaN. */
SP_HOSTDEV double sp__det_exp(double x) {
    const double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;
    const double EXP_O_THRESHOLD = 7.09782712893383973096e+02;
    const double EXP_U_THRESHOLD = -7.45133219101941108420e+02;
    const double INV_LN2 = 1.44269504088896338700e+00;
    const double P1 = 1.66666666666666019037e-01, P2 = -2.77777777770155933842e-03,
                 P3 = 6.61375632143793436117e-05, P4 = -1.65339022054652515390e-06,
                 P5 = 4.13813679705723846039e-08;
    uint64_t u = sp__det_d2u(x);
    uint32_t hx = (uint32_t)(u >> 32) & 0x7fffffffu;
    int neg = (int)(u >> 63);
    if (hx >= 0x7ff00000u) {               /* inf or NaN */
        if (x != x) return x + x;
        return neg ? 0.0 : x;
    }
    if (x > EXP_O_THRESHOLD) return sp__det_u2d(0x7ff0000000000000ull);   /* +inf */
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
    return sp__det_scale_pow2(y, k);
}

#ifdef __cplusplus
}
#endif
/* ---- Internal to the library: once seedpipe/detmath.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__det_round_half_even() : round to nearest, ties to even (Python's
 *  round()), exact; |x| must be < 2^62. Used where torchvision rounds. */
double sp__det_round_half_even(double x);

#ifdef __cplusplus
}
#endif

#endif
