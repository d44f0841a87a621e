/* pipeline_geom.c - the pipeline side of the ops added for issue 39's
 * geometric item (random_crop, gaussian_blur, random_erasing, rotate):
 * their values in the spec, their canonical form, their draws (the plan of
 * a sample's random_crop: offset, source box, index maps; blur's sigma;
 * rotate's angle), and their line of `seedpipe explain`. The pixel work is
 * in ops_geom.c, ops_blur.c, ops_erase.c and ops_rotate.c; pipeline_spec.c,
 * pipeline_run.c and pipeline_write.c call in here, nothing here calls
 * them. docs/pipeline.md documents the ops.
 */
#include "augment/pipeline_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const PAD_MODES[] = {"constant", "edge", "reflect"};

static int bad(sp_error *err, int idx, const char *name, const char *key, const char *val,
               const char *expect) {
    return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": bad value \"%s\" for %s "
                        "(expected %s)", idx, name, val, key, expect);
}

/* 1..max comma-separated integers in [lo, hi]. */
static int int_list(const char *v, int *out, int max, int lo, int hi, int *n) {
    double s[4];
    if (!sp__parse_list(v, s, max, n)) return 0;
    for (int i = 0; i < *n; i++) {
        if (!(s[i] >= lo && s[i] <= hi) || s[i] != (double)(int)s[i]) return 0;
        out[i] = (int)s[i];
    }
    return 1;
}

/* random_crop size=H[,W] padding=P|LR,TB|L,T,R,B pad_mode= fill=V|R,G,B
 * pad_if_needed=0|1 (torchvision's RandomCrop arguments). */
static int parse_random_crop(const sp_pipeline *p, sp_op *op, int idx, const char *name,
                             const char *const *vals, sp_error *err) {
    int s[4] = {0}, n = 0;
    if (!int_list(vals[0], s, 2, 1, SP_SPEC_MAX_SIZE, &n))
        return bad(err, idx, name, "size", vals[0], "H or H,W: integers in [1, 16384]");
    op->h = s[0];
    op->w = n == 2 ? s[1] : s[0];
    if (vals[1]) {
        if (!int_list(vals[1], s, 4, 0, SP_SPEC_MAX_SIZE, &n) || n == 3)
            return bad(err, idx, name, "padding", vals[1], "P, LR,TB or L,T,R,B: integers in "
                       "[0, 16384] (torchvision's order)");
        int l = s[0], t = n >= 2 ? s[1] : s[0];
        op->pad[0] = l;
        op->pad[1] = t;
        op->pad[2] = n == 4 ? s[2] : l;
        op->pad[3] = n == 4 ? s[3] : t;
    }
    op->pad_mode = SP_PAD_CONSTANT;
    if (vals[2]) {
        op->pad_mode = -1;
        for (int m = 0; m < 3; m++)
            if (strcmp(vals[2], PAD_MODES[m]) == 0) op->pad_mode = m;
        if (op->pad_mode < 0) return bad(err, idx, name, "pad_mode", vals[2], "constant, edge or reflect");
    }
    op->nfill = 1;
    if (vals[3]) {
        int c = p->channels;
        if (!int_list(vals[3], s, 3, 0, 255, &n) || n == 2 || (n == 3 && c == 1))
            return bad(err, idx, name, "fill", vals[3], c == 3 ? "V or R,G,B: integers in [0, 255]"
                       : "V: an integer in [0, 255] (gray pipeline)");
        op->nfill = n;
        for (int i = 0; i < 3; i++) op->fill[i] = (uint8_t)s[n == 3 ? i : 0];
    }
    if (vals[4]) {
        if (strcmp(vals[4], "0") && strcmp(vals[4], "1"))
            return bad(err, idx, name, "pad_if_needed", vals[4], "0 or 1");
        op->pad_if_needed = vals[4][0] == '1';
    }
    return SP_OK;
}

/* gaussian_blur kernel=K|KX,KY sigma=S|lo,hi (torchvision's GaussianBlur:
 * odd sizes, x first; 0 < lo <= hi; default sigma 0.1,2). */
static int parse_blur(sp_op *op, int idx, const char *name, const char *const *vals,
                      sp_error *err) {
    int k[2], n;
    if (!int_list(vals[0], k, 2, 1, SP_BLUR_MAX_KERNEL, &n) || !(k[0] & 1) || !(k[n - 1] & 1))
        return bad(err, idx, name, "kernel", vals[0], "K or KX,KY: odd integers in [1, 1023]");
    op->ksize[0] = k[0];
    op->ksize[1] = k[n - 1];
    op->sigma[0] = 0.1;
    op->sigma[1] = 2.0;
    double s[2];
    if (vals[1] && (!sp__parse_list(vals[1], s, 2, &n) || !(s[0] > 0) || s[n - 1] < s[0] ||
                    !(s[n - 1] <= 1e6)))
        return bad(err, idx, name, "sigma", vals[1], "S > 0, or lo,hi with 0 < lo <= hi "
                   "(at most 1e6)");
    if (vals[1]) {
        op->sigma[0] = s[0];
        op->sigma[1] = s[n - 1];
    }
    return SP_OK;
}

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

/* random_erasing p= scale=lo,hi ratio=lo,hi value=0|random|V|R,G,B
 * (torchvision's RandomErasing and its defaults). */
static int parse_erasing(const sp_pipeline *p, sp_op *op, int idx, const char *name,
                         const char *const *vals, sp_error *err) {
    op->p = 0.5;
    if (vals[0] && (!sp__parse_num(vals[0], &op->p) || op->p < 0 || op->p > 1))
        return bad(err, idx, name, "p", vals[0], "a probability in [0, 1]");
    op->scale[0] = 0.02;
    op->scale[1] = 0.33;
    if (vals[1] && !pair(vals[1], 0.0, 1.0, 0, op->scale))
        return bad(err, idx, name, "scale", vals[1], "a,b with 0 <= a <= b <= 1");
    op->ratio[0] = 0.3;
    op->ratio[1] = 3.3;
    if (vals[2] && !pair(vals[2], 0.0, 1e9, 1, op->ratio))
        return bad(err, idx, name, "ratio", vals[2], "a,b with 0 < a <= b");
    op->nvalue = 1;
    if (vals[3] && strcmp(vals[3], "random") == 0) {
        op->erase_random = 1;
    } else if (vals[3]) {
        int n;
        int ok = sp__parse_list(vals[3], op->value, 3, &n) && n != 2 && (n == 1 || p->channels == 3);
        for (int i = 0; ok && i < n; i++) ok = op->value[i] >= -1e6 && op->value[i] <= 1e6;
        if (!ok)
            return bad(err, idx, name, "value", vals[3], p->channels == 3 ? "random, V or R,G,B "
                       "in [-1e6, 1e6] (the output's units)" : "random or V in [-1e6, 1e6] "
                       "(gray pipeline)");
        op->nvalue = n;
        for (int i = n; i < 3; i++) op->value[i] = op->value[0];
    }
    return SP_OK;
}

/* rotate degrees=D|lo,hi interpolation=nearest|bilinear fill=V|R,G,B
 * (torchvision's RandomRotation with expand=False and the default centre). */
static int parse_rotate(const sp_pipeline *p, sp_op *op, int idx, const char *name,
                        const char *const *vals, sp_error *err) {
    double s[3];
    int n;
    if (!sp__parse_list(vals[0], s, 2, &n) || (n == 1 && !(s[0] >= 0 && s[0] <= 1e6)) ||
        (n == 2 && !(s[0] >= -1e6 && s[0] <= s[1] && s[1] <= 1e6)))
        return bad(err, idx, name, "degrees", vals[0], "D in [0, 1e6] (angle in [-D, D]) or "
                   "lo,hi with -1e6 <= lo <= hi <= 1e6");
    op->degrees[0] = n == 1 ? sp__canon_num(-s[0]) : s[0];
    op->degrees[1] = n == 1 ? s[0] : s[1];
    if (op->degrees[0] == 0) op->degrees[0] = 0.0;   /* no "-0" */
    if (vals[1] && strcmp(vals[1], "nearest") && strcmp(vals[1], "bilinear"))
        return bad(err, idx, name, "interpolation", vals[1], "nearest or bilinear");
    op->bilinear = vals[1] && strcmp(vals[1], "bilinear") == 0;
    op->nvalue = 1;
    if (vals[2]) {
        int ok = sp__parse_list(vals[2], s, 3, &n) && n != 2 && (n == 1 || p->channels == 3);
        for (int i = 0; ok && i < n; i++) ok = s[i] >= 0 && s[i] <= 255;
        if (!ok)
            return bad(err, idx, name, "fill", vals[2], p->channels == 3 ? "V or R,G,B in "
                       "[0, 255]" : "V in [0, 255] (gray pipeline)");
        op->nvalue = n;
        for (int i = 0; i < 3; i++) op->value[i] = s[i < n ? i : 0];
    }
    return SP_OK;
}

int sp__geom_parse(const sp_pipeline *p, sp_op *op, int idx, const char *name,
                   const char *const *vals, sp_error *err) {
    if (op->kind == SP_OP_ROTATE) return parse_rotate(p, op, idx, name, vals, err);
    if (op->kind == SP_OP_RANDOM_ERASING) return parse_erasing(p, op, idx, name, vals, err);
    if (op->kind == SP_OP_RANDOM_CROP) return parse_random_crop(p, op, idx, name, vals, err);
    if (op->kind == SP_OP_GAUSSIAN_BLUR) return parse_blur(op, idx, name, vals, err);
    return sp_error_set(err, SP_EINVAL, "pipeline op %d \"%s\": internal: not a geometric op",
                        idx, name);
}

void sp__geom_canon(sp__sbuf *b, const sp_op *op) {
    if (op->kind == SP_OP_ROTATE) {
        sp__sbuf_printf(b, "rotate degrees=%.9g,%.9g interpolation=%s fill=", op->degrees[0],
                        op->degrees[1], op->bilinear ? "bilinear" : "nearest");
        for (int i = 0; i < op->nvalue; i++) sp__sbuf_printf(b, "%s%.9g", i ? "," : "", op->value[i]);
    }
    if (op->kind == SP_OP_RANDOM_ERASING) {
        sp__sbuf_printf(b, "random_erasing p=%.9g scale=%.9g,%.9g ratio=%.9g,%.9g value=", op->p,
                        op->scale[0], op->scale[1], op->ratio[0], op->ratio[1]);
        if (op->erase_random) sp__sbuf_printf(b, "random");
        for (int i = 0; !op->erase_random && i < op->nvalue; i++)
            sp__sbuf_printf(b, "%s%.9g", i ? "," : "", op->value[i]);
    }
    if (op->kind == SP_OP_GAUSSIAN_BLUR)
        sp__sbuf_printf(b, "gaussian_blur kernel=%d,%d sigma=%.9g,%.9g", op->ksize[0],
                        op->ksize[1], op->sigma[0], op->sigma[1]);
    if (op->kind != SP_OP_RANDOM_CROP) return;
    sp__sbuf_printf(b, "random_crop size=%d,%d padding=%d,%d,%d,%d pad_mode=%s fill=%d", op->h,
                    op->w, op->pad[0], op->pad[1], op->pad[2], op->pad[3],
                    PAD_MODES[op->pad_mode], op->fill[0]);
    if (op->nfill == 3) sp__sbuf_printf(b, ",%d,%d", op->fill[1], op->fill[2]);
    sp__sbuf_printf(b, " pad_if_needed=%d", op->pad_if_needed);
}

void sp__crop_plan_free(sp__crop_plan *pl) {
    free(pl->xmap);
    pl->xmap = pl->ymap = NULL;
}

/* The smallest [lo, hi] of the non-negative entries of map; rebased to lo. */
static int map_span(int32_t *map, int len, int *lo) {
    int a = -1, b = -1;
    for (int i = 0; i < len; i++)
        if (map[i] >= 0) {
            if (a < 0 || map[i] < a) a = map[i];
            if (map[i] > b) b = map[i];
        }
    for (int i = 0; a >= 0 && i < len; i++)
        if (map[i] >= 0) map[i] -= a;
    *lo = a < 0 ? 0 : a;
    return a < 0 ? 0 : b - a + 1;
}

int sp__random_crop_geom(const sp_op *op, int W, int H, const sp_sample_ctx *ctx, uint32_t k,
                         uint32_t a, sp_random_crop_geom *g) {
    if (sp_random_crop_sample(W, H, op->h, op->w, op->pad, op->pad_if_needed, op->pad_mode,
                              ctx->k_augment, k, ctx->sample, ctx->epoch, g))
        return SP_EINVAL;
    if (a) {   /* protect=: attempt a's offset, block a << 16, the same words */
        sp_ctr d = sp_sample_draw(ctx->k_augment, a << 16, k, ctx->sample, ctx->epoch);
        g->y = (int)sp_uniform_int(d.c[0], (uint64_t)(g->ph - op->h + 1));
        g->x = (int)sp_uniform_int(d.c[1], (uint64_t)(g->pw - op->w + 1));
    }
    return SP_OK;
}

int sp__random_crop_plan(const sp_op *op, int W, int H, const sp_sample_ctx *ctx, uint32_t k,
                         uint32_t attempt, sp__crop_plan *pl, const char *path, sp_error *err) {
    memset(pl, 0, sizeof *pl);
    sp_random_crop_geom *g = &pl->g;
    if (sp__random_crop_geom(op, W, H, ctx, k, attempt, g))
        return sp_error_set(err, SP_EINVAL, "%s: random_crop: a %dx%d crop of the %dx%d image "
                            "padded %d,%d,%d,%d (%s%s) is not possible: the padded image is "
                            "smaller than the crop, or a reflect pad is not smaller than the "
                            "side it reflects (as torchvision)", path, op->w, op->h, W, H,
                            op->pad[0], op->pad[1], op->pad[2], op->pad[3],
                            PAD_MODES[op->pad_mode], op->pad_if_needed ? ", pad_if_needed" : "");
    pl->xmap = malloc(((size_t)op->w + (size_t)op->h) * sizeof *pl->xmap);
    if (!pl->xmap) return sp_error_set(err, SP_ENOMEM, "%s: random_crop: out of memory", path);
    pl->ymap = pl->xmap + op->w;
    sp_random_crop_map(W, g->pad[0], g->pad[2], g->extra_x, op->pad_mode, g->x, op->w, pl->xmap);
    sp_random_crop_map(H, g->pad[1], g->pad[3], g->extra_y, op->pad_mode, g->y, op->h, pl->ymap);
    pl->bw = map_span(pl->xmap, op->w, &pl->bx);
    pl->bh = map_span(pl->ymap, op->h, &pl->by);
    if (!pl->bw || !pl->bh) pl->bw = pl->bh = 0;   /* every pixel is the fill */
    return SP_OK;
}

float sp__rotate_angle(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    return (float)(op->degrees[0] + (op->degrees[1] - op->degrees[0]) * sp_u01d(d.c[0]));
}

float sp__blur_sigma(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    return (float)(op->sigma[0] + (op->sigma[1] - op->sigma[0]) * sp_u01d(d.c[0]));
}

/* random_erasing: whether (block 0) and where. */
static void explain_erasing(sp__fbuf *e, const sp_op *op, int k, const sp_sample_ctx *ctx, int W,
                            int H) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, (uint32_t)k, ctx->sample, ctx->epoch);
    double u = sp_u01d(d.c[0]);
    sp__fbuf_printf(e, "%d random_erasing: ", k);
    if (!(u < op->p)) {
        sp__fbuf_printf(e, "not applied (u=%.4f >= p=%g)\n", u, op->p);
        return;
    }
    sp_crop_box b;
    int t = sp_erasing_sample(W, H, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1],
                              ctx->k_augment, (uint32_t)k, ctx->sample, ctx->epoch, &b);
    if (!t) sp__fbuf_printf(e, "applied (u=%.4f < p=%g), 10 tries rejected: nothing erased\n",
                            u, op->p);
    else sp__fbuf_printf(e, "box x=%d y=%d w=%d h=%d of %dx%d (try %d, u=%.4f < p=%g)\n", b.x,
                         b.y, b.w, b.h, W, H, t, u, op->p);
}

void sp__geom_explain(sp__fbuf *e, const sp_op *op, int k, const sp_sample_ctx *ctx,
                      uint32_t attempt, int *W, int *H) {
    if (op->kind == SP_OP_RANDOM_ERASING) explain_erasing(e, op, k, ctx, *W, *H);
    if (op->kind == SP_OP_ROTATE)
        sp__fbuf_printf(e, "%d rotate: angle %.9g (%s)\n", k,
                        (double)sp__rotate_angle(op, (uint32_t)k, ctx),
                        op->bilinear ? "bilinear" : "nearest");
    if (op->kind == SP_OP_GAUSSIAN_BLUR)
        sp__fbuf_printf(e, "%d gaussian_blur: kernel %dx%d sigma %.9g\n", k, op->ksize[0],
                        op->ksize[1], (double)sp__blur_sigma(op, (uint32_t)k, ctx));
    if (op->kind != SP_OP_RANDOM_CROP) return;
    sp_random_crop_geom g;
    if (sp__random_crop_geom(op, *W, *H, ctx, (uint32_t)k, attempt, &g))
        sp__fbuf_printf(e, "%d random_crop: %dx%d does not fit %dx%d padded (error)\n", k,
                        op->w, op->h, *W, *H);
    else
        sp__fbuf_printf(e, "%d random_crop: offset x=%d y=%d of %dx%d (%dx%d padded %d,%d,%d,%d "
                        "%s, then %d,%d each side) -> %dx%d\n", k, g.x, g.y, g.pw, g.ph, *W, *H,
                        g.pad[0], g.pad[1], g.pad[2], g.pad[3], PAD_MODES[op->pad_mode],
                        g.extra_x, g.extra_y, op->w, op->h);
    *W = op->w;
    *H = op->h;
}
