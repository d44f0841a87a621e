/* pipeline_jitter.c - the op color_jitter (torchvision's ColorJitter): its
 * values in the spec, canonical form, its draw (its order and factors,
 * shared by the run and the explain line), run and explain. The pixels are
 * ops_pixel.c's and ops.c's; docs/pipeline.md "color_jitter" states which
 * word decides what.
 */
#include "augment/pipeline_internal.h"

#include <string.h>
#include "augment/ops_internal.h"

static const char *const NAMES[4] = {"brightness", "contrast", "saturation", "hue"};

/* hue: h (range [-h, h], 0 <= h <= 0.5) or lo,hi with -0.5 <= lo <= hi <=
 * 0.5, as torchvision; absent or 0: no hue. */
static int parse_hue(sp_error *err, int idx, const sp_op *op, const char *v, double hue[2]) {
    hue[0] = hue[1] = 0.0;
    if (!v) return SP_OK;
    double s[2];
    int n;
    if (!sp__parse_list(v, s, 2, &n) || (n == 1 && !(s[0] >= 0 && s[0] <= 0.5)) ||
        (n == 2 && !(s[0] >= -0.5 && s[0] <= s[1] && s[1] <= 0.5)))
        return sp__op_bad(err, idx, op, "hue", v, "h in [0, 0.5] (shift in [-h, h]) or lo,hi "
                          "with -0.5 <= lo <= hi <= 0.5");
    hue[0] = n == 1 ? sp__canon_num(-s[0]) : s[0];
    hue[1] = n == 1 ? s[0] : s[1];
    if (hue[0] == 0) hue[0] = 0.0;   /* no "-0" in the canonical form */
    if (hue[1] == 0) hue[1] = 0.0;
    return SP_OK;
}

/* brightness, contrast, saturation: b (factor in [max(0, 1-b), 1+b]) or
 * lo,hi; default 1,1 (no change). */
static int parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals, sp_error *err) {
    (void)p;
    for (int k = 0; k < 3; k++) {
        op->jitter[k][0] = op->jitter[k][1] = 1.0;
        const char *v = vals[k];
        if (!v) continue;
        double s[2];
        int n;
        if (!sp__parse_list(v, s, 2, &n) || s[0] < 0 || (n == 2 && s[1] < s[0]) ||
            s[n - 1] > SP_FACTOR_MAX || (n == 1 && s[0] + 1.0 > SP_FACTOR_MAX))
            return sp__op_bad(err, idx, op, NAMES[k], v, "b >= 0 (factor in [max(0, 1-b), "
                              "1+b]) or lo,hi with 0 <= lo <= hi <= 255");
        if (n == 1) {
            op->jitter[k][0] = sp__canon_num(1.0 - s[0] > 0 ? 1.0 - s[0] : 0.0);
            op->jitter[k][1] = sp__canon_num(1.0 + s[0]);
        } else {
            op->jitter[k][0] = s[0];
            op->jitter[k][1] = s[1];
        }
    }
    return parse_hue(err, idx, op, vals[3], op->hue);
}

static void canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "color_jitter");
    for (int k = 0; k < 3; k++)
        sp__sbuf_printf(b, " %s=%.9g,%.9g", NAMES[k], op->jitter[k][0], op->jitter[k][1]);
    if (op->hue[0] != 0 || op->hue[1] != 0)   /* only when given: old forms unchanged */
        sp__sbuf_printf(b, " hue=%.9g,%.9g", op->hue[0], op->hue[1]);
}

/* color_jitter: block 0; c[0] picks one of the 6 orders of (brightness,
 * contrast, saturation) in lexicographic order, c[1..3] the factors (Q12).
 * With a hue range, c[0] picks one of the 24 orders of (brightness,
 * contrast, saturation, hue) instead (torchvision's randperm(4)), and block
 * 1's c[0] the hue shift, (float)(lo + (hi - lo) * u01). Returns the order
 * (*n = 3 or 4 entries); shared by the run and by sp__pipeline_explain(). */
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

static int jitter_draw(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int32_t fq[3],
                       float *hue, uint8_t order[4]) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    for (int t = 0; t < 3; t++) {
        double lo = op->jitter[t][0], hi = op->jitter[t][1];
        fq[t] = sp__factor_q12(lo + (hi - lo) * sp_u01d(d.c[1 + t]));
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

static int run(sp__op_run *r, const sp_op *op, int k) {
    int32_t fq[3];
    float hue;
    uint8_t order[4];
    int n = jitter_draw(op, (uint32_t)k, r->ctx, fq, &hue, order);
    if (fq[0] == SP_FACTOR_ONE && fq[1] == SP_FACTOR_ONE && fq[2] == SP_FACTOR_ONE && hue == 0.0f)
        return SP_OK;
    int rc = sp__st_writable(r->st);
    if (rc) return sp__op_fail(r, rc);
    sp_image *img = &r->st->cur;
    for (int t = 0; t < n; t++) {
        int fn = order[t];
        if (fn == 3) {
            if (hue != 0.0f) sp__adjust_hue(img, hue);
            continue;
        }
        if (fq[fn] == SP_FACTOR_ONE) continue;
        if (fn == 0) sp__adjust_brightness(img, fq[fn]);
        else if (fn == 1) sp__adjust_contrast(img, fq[fn]);
        else sp__adjust_saturation(img, fq[fn]);
    }
    return SP_OK;
}

static int explain(sp__op_explain *x, const sp_op *op, int k) {
    int32_t fq[3];
    float hue;
    uint8_t o[4];
    int n = jitter_draw(op, (uint32_t)k, x->ctx, fq, &hue, o);
    sp__fbuf_printf(x->e, "%d color_jitter: brightness %.4f contrast %.4f saturation %.4f", k,
                    fq[0] / 4096.0, fq[1] / 4096.0, fq[2] / 4096.0);
    if (n == 4) sp__fbuf_printf(x->e, " hue %.6f", (double)hue);
    sp__fbuf_printf(x->e, ", order");
    for (int t = 0; t < n; t++) sp__fbuf_printf(x->e, "%s %s", t ? "," : "", NAMES[o[t]]);
    sp__fbuf_printf(x->e, "\n");
    return k;
}

const sp__op_desc sp__op_color_jitter = {
    "color_jitter", {"brightness", "contrast", "saturation", "hue", NULL}, 0,
    SP__OP_MOVES_TARGETS, parse, canon, NULL, run, explain, NULL};
