/* ops_erase.c - the draws of torchvision's RandomErasing
 * (include/seedpipe/ops.h: sp__erasing_sample, sp__erasing_normals): the
 * region, tried up to 10 times as torchvision's get_params, and the
 * standard normal values of value=random, from the sample's own Philox
 * draws. Only + - * /, sqrt (correctly rounded) and the project's
 * sp_det_log / sp_det_exp, in a fixed order, so the results are the same
 * on every IEEE machine. pipeline_write.c writes them into the output.
 */

#include <math.h>      /* sqrt only */

#include "seedpipe/detmath.h"
#include "augment/detmath_internal.h"
#include "augment/ops_internal.h"

int sp__erasing_sample(int W, int H, double s0, double s1, double r0, double r1,
                       sp_key k_augment, uint32_t op, uint32_t sample, uint32_t epoch,
                       sp_crop_box *box) {
    double area = (double)H * (double)W;
    double lr0 = sp_det_log(r0), lr1 = sp_det_log(r1);
    for (uint32_t t = 0; t < 10; t++) {
        sp_ctr d = sp_sample_draw(k_augment, 1 + t, op, sample, epoch);
        double target = area * (s0 + (s1 - s0) * sp_u01d(d.c[0]));
        double aspect = sp_det_exp(lr0 + (lr1 - lr0) * sp_u01d(d.c[1]));
        double hf = sp__det_round_half_even(sqrt(target * aspect));
        double wf = sp__det_round_half_even(sqrt(target / aspect));
        if (hf < H && wf < W) {
            box->h = (int)hf;
            box->w = (int)wf;
            box->y = (int)sp_uniform_int(d.c[2], (uint64_t)(H - box->h + 1));
            box->x = (int)sp_uniform_int(d.c[3], (uint64_t)(W - box->w + 1));
            return (int)t + 1;
        }
    }
    box->x = box->y = box->w = box->h = 0;
    return 0;
}

void sp__erasing_normals(sp_key k_augment, uint32_t op, uint32_t sample, uint32_t epoch,
                         size_t n, float *out) {
    size_t i = 0;
    for (uint32_t b = 11; i < n; b++) {
        sp_ctr d = sp_sample_draw(k_augment, b, op, sample, epoch);
        for (int pr = 0; pr < 4 && i < n; pr += 2) {
            double u = (double)(d.c[pr] >> 8) * (1.0 / 8388608.0) - 1.0;
            double v = (double)(d.c[pr + 1] >> 8) * (1.0 / 8388608.0) - 1.0;
            double s = u * u + v * v;
            if (s >= 1.0 || s == 0.0) continue;   /* Marsaglia's polar method: rejected */
            double f = sqrt(-2.0 * sp_det_log(s) / s);
            out[i++] = (float)(u * f);
            if (i < n) out[i++] = (float)(v * f);
        }
    }
}
