/* detmath.c - deterministic log and exp from + - * / and bit manipulation.
 *
 * HOW IT WORKS: see include/seedpipe/detmath.h. The code of log and exp is
 * augment/detmath_internal.h (SP_HOSTDEV, so the training core's CPU
 * reference and CUDA kernels run the same functions); this file gives them
 * their public names, with the rounding that torchvision's geometry needs.
 * Compiled with -ffp-contract=off (the project default): no multiply-add is
 * fused. No libm function is called.
 *
 * SPEC: docs/determinism.md section 5a states this algorithm to the
 * operation (constants as exact hex floats, evaluation order, special
 * cases, test vectors); tests/detmath_ref.py implements it from that page
 * and tests/test_detmath_ref.py + test_ops.c (test_detmath_vectors) hold
 * the two bit for bit. A change that changes any result bit is a format
 * change (random_resized_crop boxes move) and must change that section,
 * its vectors, and the loader fingerprint's version string.
 */
#include "seedpipe/detmath.h"

#include <stdint.h>

#include "augment/detmath_internal.h"

double sp_det_log(double x) { return sp__det_log(x); }

double sp_det_exp(double x) { return sp__det_exp(x); }

double sp__det_round_half_even(double x) {
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
