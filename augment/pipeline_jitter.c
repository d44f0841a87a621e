/* pipeline_jitter.c - color_jitter's draw (its order and factors), shared
 * by the run and sp_pipeline_explain() (pipeline_run.c); docs/pipeline.md
 * "color_jitter" states which word decides what.
 */
#include "augment/pipeline_internal.h"

#include <string.h>

/* color_jitter: block 0; c[0] picks one of the 6 orders of (brightness,
 * contrast, saturation) in lexicographic order, c[1..3] the factors (Q12).
 * With a hue range, c[0] picks one of the 24 orders of (brightness,
 * contrast, saturation, hue) instead (torchvision's randperm(4)), and block
 * 1's c[0] the hue shift, (float)(lo + (hi - lo) * u01). Returns the order
 * (*n = 3 or 4 entries); shared by the run and by sp_pipeline_explain(). */
static const uint8_t JITTER_ORDERS[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                            {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

/* The permutation number r (0..23) of (0, 1, 2, 3) in lexicographic order. */
static void perm4(uint32_t r, uint8_t out[4]) {
    uint8_t left[4] = {0, 1, 2, 3};
    for (int i = 0, n = 4; i < 4; i++, n--) {
        uint32_t f = n == 4 ? 6 : n == 3 ? 2 : 1, j = r / f;
        r %= f;
        out[i] = left[j];
        for (int t = (int)j; t + 1 < n; t++) left[t] = left[t + 1];
    }
}

static int has_hue(const sp_op *op) { return op->hue[0] != 0 || op->hue[1] != 0; }

int sp__jitter_draw(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int32_t fq[3],
                       float *hue, uint8_t order[4]) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    for (int t = 0; t < 3; t++) {
        double lo = op->jitter[t][0], hi = op->jitter[t][1];
        fq[t] = sp_factor_q12(lo + (hi - lo) * sp_u01d(d.c[1 + t]));
    }
    *hue = 0.0f;
    if (!has_hue(op)) {
        memcpy(order, JITTER_ORDERS[sp_uniform_int(d.c[0], 6)], 3);
        return 3;
    }
    perm4((uint32_t)sp_uniform_int(d.c[0], 24), order);
    sp_ctr h = sp_sample_draw(ctx->k_augment, 1, k, ctx->sample, ctx->epoch);
    *hue = (float)(op->hue[0] + (op->hue[1] - op->hue[0]) * sp_u01d(h.c[0]));
    return 4;
}
