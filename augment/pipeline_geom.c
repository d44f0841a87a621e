/* pipeline_geom.c - the ops gaussian_blur, random_erasing and rotate
 * (torchvision's GaussianBlur, RandomErasing, RandomRotation with
 * expand=False): their values in the spec, canonical form, draws (blur's
 * sigma, rotate's angle, erasing's box), run and explain lines.
 * random_erasing works on the written output values (pipeline_write.c runs
 * it after every other op). The pixel work is in ops_blur.c, ops_erase.c
 * and ops_rotate.c; docs/pipeline.md documents the ops.
 */
#include "augment/pipeline_internal.h"

#include <string.h>
#include "augment/ops_internal.h"
#include "common/common_internal.h"

/* ---- gaussian_blur kernel=K|KX,KY sigma=S|lo,hi ------------------------------------
 * torchvision's GaussianBlur: odd sizes, x first; 0 < lo <= hi; default
 * sigma 0.1,2. */

static int blur_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                      sp_error *err) {
    (void)p;
    int k[2], n;
    if (!sp__parse_ints(vals[0], k, 2, 1, SP_BLUR_MAX_KERNEL, &n) || !(k[0] & 1) ||
        !(k[n - 1] & 1))
        return sp__op_bad(err, idx, op, "kernel", vals[0], "K or KX,KY: odd integers in "
                          "[1, 1023]");
    op->ksize[0] = k[0];
    op->ksize[1] = k[n - 1];
    op->sigma[0] = 0.1;
    op->sigma[1] = 2.0;
    double s[2];
    if (vals[1] && (!sp__parse_list(vals[1], s, 2, &n) || !(s[0] > 0) || s[n - 1] < s[0] ||
                    !(s[n - 1] <= 1e6)))
        return sp__op_bad(err, idx, op, "sigma", vals[1], "S > 0, or lo,hi with 0 < lo <= hi "
                          "(at most 1e6)");
    if (vals[1]) {
        op->sigma[0] = s[0];
        op->sigma[1] = s[n - 1];
    }
    return SP_OK;
}

static void blur_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "gaussian_blur kernel=%d,%d sigma=%.9g,%.9g", op->ksize[0],
                    op->ksize[1], op->sigma[0], op->sigma[1]);
}

/* The sample's sigma: block 0, (float)(lo + (hi - lo) * u01(c[0])). */
static float blur_sigma(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    return (float)(op->sigma[0] + (op->sigma[1] - op->sigma[0]) * sp_u01d(d.c[0]));
}

/* In torchvision's order: a pending horizontal flip is applied first (the
 * double sums are not mirror-symmetric to the last bit). */
static int blur_run(sp__op_run *r, const sp_op *op, int k) {
    sp__run_state *st = r->st;
    int rc = sp__st_writable(st);
    if (!rc) rc = sp__st_unflip(st);
    if (rc) return sp__op_fail(r, rc);
    float sigma = blur_sigma(op, (uint32_t)k, r->ctx);
    rc = sp__image_gaussian_blur(&st->cur, op->ksize[0], op->ksize[1], sigma, sigma);
    if (rc == SP_EINVAL)
        return sp_error_set(r->err, rc, "%s: gaussian_blur: a %dx%d kernel on a %dx%d image "
                            "(its reflect padding must be smaller than the side, as torch's)",
                            r->path, op->ksize[0], op->ksize[1], st->cur.width, st->cur.height);
    return rc ? sp__op_fail(r, rc) : SP_OK;
}

static int blur_explain(sp__op_explain *x, const sp_op *op, int k) {
    sp__fbuf_printf(x->e, "%d gaussian_blur: kernel %dx%d sigma %.9g\n", k, op->ksize[0],
                    op->ksize[1], (double)blur_sigma(op, (uint32_t)k, x->ctx));
    return k;
}

/* ---- random_erasing p= scale=lo,hi ratio=lo,hi value=0|random|V|R,G,B -------------
 * torchvision's RandomErasing and its defaults. */

/* lo,hi with lo_min <= lo <= hi <= hi_max (and lo > 0 when positive). */
static int pair(const char *v, double lo_min, double hi_max, int positive, double out[2]) {
    double s[2];
    int n;
    if (!sp__parse_list(v, s, 2, &n) || n != 2 || s[0] < lo_min || s[1] < s[0] || s[1] > hi_max ||
        (positive && !(s[0] > 0)))
        return 0;
    out[0] = s[0];
    out[1] = s[1];
    return 1;
}

static int erasing_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                         sp_error *err) {
    op->p = 0.5;
    int rc = sp__op_prob(err, idx, op, vals[0], &op->p);
    if (rc) return rc;
    op->scale[0] = 0.02;
    op->scale[1] = 0.33;
    if (vals[1] && !pair(vals[1], 0.0, 1.0, 0, op->scale))
        return sp__op_bad(err, idx, op, "scale", vals[1], "a,b with 0 <= a <= b <= 1");
    op->ratio[0] = 0.3;
    op->ratio[1] = 3.3;
    if (vals[2] && !pair(vals[2], 0.0, 1e9, 1, op->ratio))
        return sp__op_bad(err, idx, op, "ratio", vals[2], "a,b with 0 < a <= b");
    op->nvalue = 1;
    if (vals[3] && strcmp(vals[3], "random") == 0) {
        op->erase_random = 1;
    } else if (vals[3]) {
        int n;
        int ok = sp__parse_list(vals[3], op->value, 3, &n) && n != 2 && (n == 1 || p->channels == 3);
        for (int i = 0; ok && i < n; i++) ok = op->value[i] >= -1e6 && op->value[i] <= 1e6;
        if (!ok)
            return sp__op_bad(err, idx, op, "value", vals[3], p->channels == 3 ? "random, V or "
                              "R,G,B in [-1e6, 1e6] (the output's units)" : "random or V in "
                              "[-1e6, 1e6] (gray pipeline)");
        op->nvalue = n;
        for (int i = n; i < 3; i++) op->value[i] = op->value[0];
    }
    p->has_erasing = 1;
    return SP_OK;
}

static void erasing_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "random_erasing p=%.9g scale=%.9g,%.9g ratio=%.9g,%.9g value=", op->p,
                    op->scale[0], op->scale[1], op->ratio[0], op->ratio[1]);
    if (op->erase_random) sp__sbuf_printf(b, "random");
    for (int i = 0; !op->erase_random && i < op->nvalue; i++)
        sp__sbuf_printf(b, "%s%.9g", i ? "," : "", op->value[i]);
}

/* Whether (block 0) and where. */
static int erasing_explain(sp__op_explain *x, const sp_op *op, int k) {
    const sp_sample_ctx *ctx = x->ctx;
    double u = sp__op_u((uint32_t)k, ctx);
    sp__fbuf_printf(x->e, "%d random_erasing: ", k);
    if (!(u < op->p)) {
        sp__fbuf_printf(x->e, "not applied (u=%.4f >= p=%g)\n", u, op->p);
        return k;
    }
    sp_crop_box b;
    int t = sp__erasing_sample(x->W, x->H, op->scale[0], op->scale[1], op->ratio[0],
                               op->ratio[1], ctx->k_augment, (uint32_t)k, ctx->sample,
                               ctx->epoch, &b);
    if (!t)
        sp__fbuf_printf(x->e, "applied (u=%.4f < p=%g), 10 tries rejected: nothing erased\n",
                        u, op->p);
    else
        sp__fbuf_printf(x->e, "box x=%d y=%d w=%d h=%d of %dx%d (try %d, u=%.4f < p=%g)\n",
                        b.x, b.y, b.w, b.h, x->W, x->H, t, u, op->p);
    return k;
}

/* ---- rotate degrees=D|lo,hi interpolation=nearest|bilinear fill=V|R,G,B -----------
 * torchvision's RandomRotation with expand=False and the default centre. */

static int rotate_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                        sp_error *err) {
    double s[3];
    int n;
    if (!sp__parse_list(vals[0], s, 2, &n) || (n == 1 && !(s[0] >= 0 && s[0] <= 1e6)) ||
        (n == 2 && !(s[0] >= -1e6 && s[0] <= s[1] && s[1] <= 1e6)))
        return sp__op_bad(err, idx, op, "degrees", vals[0], "D in [0, 1e6] (angle in [-D, D]) "
                          "or lo,hi with -1e6 <= lo <= hi <= 1e6");
    op->degrees[0] = n == 1 ? sp__canon_num(-s[0]) : s[0];
    op->degrees[1] = n == 1 ? s[0] : s[1];
    if (op->degrees[0] == 0) op->degrees[0] = 0.0;   /* no "-0" */
    if (vals[1] && strcmp(vals[1], "nearest") && strcmp(vals[1], "bilinear"))
        return sp__op_bad(err, idx, op, "interpolation", vals[1], "nearest or bilinear");
    op->bilinear = vals[1] && strcmp(vals[1], "bilinear") == 0;
    op->nvalue = 1;
    if (vals[2]) {
        int ok = sp__parse_list(vals[2], s, 3, &n) && n != 2 && (n == 1 || p->channels == 3);
        for (int i = 0; ok && i < n; i++) ok = s[i] >= 0 && s[i] <= 255;
        if (!ok)
            return sp__op_bad(err, idx, op, "fill", vals[2], p->channels == 3 ? "V or R,G,B in "
                              "[0, 255]" : "V in [0, 255] (gray pipeline)");
        op->nvalue = n;
        for (int i = 0; i < 3; i++) op->value[i] = s[i < n ? i : 0];
    }
    return SP_OK;
}

static void rotate_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "rotate degrees=%.9g,%.9g interpolation=%s fill=", op->degrees[0],
                    op->degrees[1], op->bilinear ? "bilinear" : "nearest");
    for (int i = 0; i < op->nvalue; i++) sp__sbuf_printf(b, "%s%.9g", i ? "," : "", op->value[i]);
}

/* The sample's angle: block 0, (float)(lo + (hi - lo) * u01(c[0])). */
static float rotate_angle(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    return (float)(op->degrees[0] + (op->degrees[1] - op->degrees[0]) * sp_u01d(d.c[0]));
}

/* ops_rotate.c with the sample's angle; a pending horizontal flip is
 * applied first (torchvision's order). */
static int rotate_run(sp__op_run *r, const sp_op *op, int k) {
    sp__run_state *st = r->st;
    int rc = sp__st_unflip(st);
    sp_image out;
    if (!rc) rc = sp__image_alloc(&out, st->cur.width, st->cur.height, st->cur.channels);
    if (rc) return sp__op_fail(r, rc);
    float angle = rotate_angle(op, (uint32_t)k, r->ctx), th[6];
    sp__rotation_theta(angle, th);
    sp__st_log(st, SP_GEOM_ROTATE, k, out.width, out.height, out.width, out.height, 0, 0, 1, 1);
    if (st->log && st->log->n) {
        st->log->step[st->log->n - 1].c = th[0];
        st->log->step[st->log->n - 1].s = th[1];
    }
    const float fill[3] = {(float)op->value[0], (float)op->value[1], (float)op->value[2]};
    sp__image_rotate(&st->cur, angle, op->bilinear, fill, &out);
    sp__st_take(st, &out);
    return SP_OK;
}

static int rotate_explain(sp__op_explain *x, const sp_op *op, int k) {
    sp__fbuf_printf(x->e, "%d rotate: angle %.9g (%s)\n", k,
                    (double)rotate_angle(op, (uint32_t)k, x->ctx),
                    op->bilinear ? "bilinear" : "nearest");
    return k;
}

const sp__op_desc sp__op_gaussian_blur = {
    "gaussian_blur", {"kernel", "sigma", NULL}, 1, SP__OP_MOVES_TARGETS,
    blur_parse, blur_canon, NULL, blur_run, blur_explain, NULL};

const sp__op_desc sp__op_random_erasing = {   /* its run: sp__erase_output() */
    "random_erasing", {"p", "scale", "ratio", "value", NULL}, 0,
    SP__OP_AFTER_OUTPUT | SP__OP_ON_OUTPUT | SP__OP_MOVES_TARGETS,
    erasing_parse, erasing_canon, NULL, NULL, erasing_explain, NULL};

const sp__op_desc sp__op_rotate = {
    "rotate", {"degrees", "interpolation", "fill", NULL}, 1, SP__OP_MOVES_TARGETS,
    rotate_parse, rotate_canon, NULL, rotate_run, rotate_explain, NULL};
