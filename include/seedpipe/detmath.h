/* seedpipe/detmath.h - deterministic log and exp for paths that decide bytes.
 *
 * libm's transcendental functions may differ in the last bit between libm
 * versions, compilers and CPU/GPU (DESIGN.md section 1), so nothing that
 * decides an output byte may call them. These replacements are built only
 * from IEEE-754 + - * / (correctly rounded everywhere) and integer bit
 * manipulation, evaluated in a fixed order; compiled with
 * -ffp-contract=off they give the same bits on every conforming platform.
 *
 * Algorithms: the classic fdlibm reductions (Sun Microsystems, freely
 * redistributable) re-derived here:
 *   log: x = 2^k (1 + f) with sqrt(2)/2 <= 1+f < sqrt(2);
 *        log(1+f) = 2 atanh(s), s = f / (2 + f), the odd series in s
 *        replaced by a degree-14 minimax polynomial in s^2 (fdlibm's Lg1..7);
 *        log x = k ln2_hi + (log(1+f) + k ln2_lo).
 *   exp: x = k ln2 + r, |r| <= ln2 / 2 (Cody-Waite, ln2 split hi/lo);
 *        exp(r) = 1 + r + r c / (2 - c) with c = r - r^2 P(r^2) (fdlibm P1..5);
 *        scaled by 2^k by adding k to the exponent field.
 * Both are accurate to < 1 ulp (tests compare with libm over many inputs).
 * Special values: log(0) = -inf, log(x < 0) = NaN, log(+inf) = +inf,
 * exp(large) = +inf, exp(very negative) = 0, NaN in gives NaN out.
 *
 * Pure functions, thread- and fork-safe.
 */
#ifndef SEEDPIPE_DETMATH_H
#define SEEDPIPE_DETMATH_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version, and a program opts in by defining SEEDPIPE_ADVANCED_API; the
 * front door is seedpipe/stream.h. */
#ifndef SEEDPIPE_ADVANCED_API
#error "seedpipe/detmath.h is the advanced API: #define SEEDPIPE_ADVANCED_API before including it (README.md: The C API); the front door is seedpipe/stream.h"
#endif

#include "seedpipe/version.h"   /* SP_API */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp_det_log() : natural logarithm, deterministic, < 1 ulp. */
SP_API double sp_det_log(double x);
/*! sp_det_exp() : e^x, deterministic, < 1 ulp. */
SP_API double sp_det_exp(double x);

#ifdef __cplusplus
}
#endif
#endif
