/* pipeline_resize.c - the ops random_resized_crop, resize and center_crop
 * (torchvision's RandomResizedCrop, Resize, CenterCrop): their values in
 * the spec, canonical form, output size, run and explain lines. They are
 * region ops: as the first op after decode they read only the region they
 * need from the encoded file, at a JPEG DCT scale 1/d where dct=auto allows
 * (pipeline_run.c's HOW IT WORKS); a resize followed by a center_crop
 * resamples only the window the crop keeps. The pixels are resize.c's;
 * docs/pipeline.md documents the ops.
 */
#include "augment/pipeline_internal.h"
#include "common/trace_internal.h"

#include <stdio.h>
#include <string.h>
#include "augment/ops_internal.h"
#include "common/common_internal.h"

extern const sp__op_desc sp__op_center_crop;   /* a resize before it fuses with it */

/* ---- values --------------------------------------------------------------------- */

static int parse_size(sp_error *err, int idx, const sp_op *op, const char *v, int *h, int *w,
                      int allow_single) {
    double s[2];
    int n;
    const char *expect = allow_single ? "H or H,W: integers in [1, 16384]"
                                      : "H,W integers in [1, 16384]";
    if (!sp__parse_list(v, s, 2, &n)) return sp__op_bad(err, idx, op, "size", v, expect);
    for (int i = 0; i < n; i++)
        /* range first: converting an out-of-range double to int is UB */
        if (!(s[i] >= 1 && s[i] <= SP_SPEC_MAX_SIZE) || s[i] != (double)(int)s[i])
            return sp__op_bad(err, idx, op, "size", v, expect);
    *h = (int)s[0];
    *w = n == 2 ? (int)s[1] : (allow_single ? 0 : (int)s[0]);
    return SP_OK;
}

static int parse_pair(sp_error *err, int idx, const sp_op *op, const char *key, const char *v,
                      int positive, double out[2]) {
    double s[2];
    int n;
    if (!sp__parse_list(v, s, 2, &n) || n != 2 || s[0] < 0.0 || s[1] < s[0] ||
        (positive && !(s[0] > 0)))
        return sp__op_bad(err, idx, op, key, v,
                          positive ? "a,b with 0 < a <= b" : "a,b with 0 <= a <= b");
    out[0] = s[0];
    out[1] = s[1];
    return SP_OK;
}

/* interpolation=bilinear (default) | bicubic. */
static int parse_interp(sp_error *err, int idx, const sp_op *op, const char *v, int *filter) {
    *filter = SP_RESAMPLE_BILINEAR;
    if (v && strcmp(v, "bicubic") == 0) *filter = SP_RESAMPLE_BICUBIC;
    else if (v && strcmp(v, "bilinear") != 0)
        return sp__op_bad(err, idx, op, "interpolation", v, "bilinear or bicubic");
    return SP_OK;
}

static int rrc_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                     sp_error *err) {
    (void)p;
    int rc = parse_size(err, idx, op, vals[0], &op->h, &op->w, 0);
    op->scale[0] = 0.08;
    op->scale[1] = 1.0;
    op->ratio[0] = 0.75;
    op->ratio[1] = sp__canon_num(4.0 / 3.0);
    if (!rc && vals[1]) rc = parse_pair(err, idx, op, "scale", vals[1], 0, op->scale);
    if (!rc && vals[2]) rc = parse_pair(err, idx, op, "ratio", vals[2], 1, op->ratio);
    return rc ? rc : parse_interp(err, idx, op, vals[3], &op->filter);
}

static int resize_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                        sp_error *err) {
    (void)p;
    int rc = parse_size(err, idx, op, vals[0], &op->h, &op->w, 1);
    return rc ? rc : parse_interp(err, idx, op, vals[1], &op->filter);
}

static int center_crop_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                             sp_error *err) {
    (void)p;
    return parse_size(err, idx, op, vals[0], &op->h, &op->w, 0);
}

static void rrc_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "random_resized_crop size=%d,%d scale=%.9g,%.9g ratio=%.9g,%.9g",
                    op->h, op->w, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1]);
    if (op->filter == SP_RESAMPLE_BICUBIC)   /* only then: bilinear forms unchanged */
        sp__sbuf_printf(b, " interpolation=bicubic");
}

static void resize_canon(sp__sbuf *b, const sp_op *op) {
    if (op->w) sp__sbuf_printf(b, "resize size=%d,%d", op->h, op->w);
    else sp__sbuf_printf(b, "resize size=%d", op->h);
    if (op->filter == SP_RESAMPLE_BICUBIC) sp__sbuf_printf(b, " interpolation=bicubic");
}

static void center_crop_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "center_crop size=%d,%d", op->h, op->w);
}

/* ---- output size ---------------------------------------------------------------- */

/* A resize's output for a W x H input (torchvision Resize). */
static void resize_dims(const sp_op *op, int W, int H, int *ow, int *oh) {
    if (op->w) { *ow = op->w; *oh = op->h; return; }
    /* torchvision Resize(int): the shorter side becomes S, the longer one
     * int(S * long / short) (floor; exact in integers). */
    int64_t s = op->h;
    if (W <= H) {
        *ow = (int)s;
        int64_t l = s * H / W;
        *oh = l > INT32_MAX ? INT32_MAX : (int)l;
    } else {
        *oh = (int)s;
        int64_t l = s * W / H;
        *ow = l > INT32_MAX ? INT32_MAX : (int)l;
    }
}

static void fixed_shape(const sp_op *op, int *w, int *h) {
    *w = op->w;
    *h = op->h;
}

static void resize_shape(const sp_op *op, int *w, int *h) {
    if (op->w || *w) resize_dims(op, *w, *h, w, h);
    else *h = 0;   /* shorter side of an unknown size: not known */
}

/* ---- run -------------------------------------------------------------------------- */

/* The step attempt a of random_resized_crop logs (protect=, pipeline_protect.c). */
static int rrc_step(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int W, int H,
                    uint32_t a, sp_geom_step *step, char *what, size_t n) {
    sp_crop_box b;
    sp__rrc_sample_at(W, H, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1],
                      ctx->k_augment, k, ctx->sample, ctx->epoch, a << 16, &b);
    sp__geom_step_set(step, SP_GEOM_AXIS, (int)k, W, H, op->w, op->h, b.x, b.y,
                      (double)op->w / b.w, (double)op->h / b.h);
    if (what) snprintf(what, n, "box x=%d y=%d w=%d h=%d", b.x, b.y, b.w, b.h);
    return 0;
}

static int rrc_run(sp__op_run *r, const sp_op *op, int k) {
    const sp__source *s = r->src;
    const sp_sample_ctx *ctx = r->ctx;
    sp__run_state *st = r->st;
    sp_crop_box b;   /* protect= (pipeline_protect.c): the attempt that loses no box */
    uint32_t a = sp__protect_attempt(r->p, op, rrc_step, (uint32_t)k, ctx, s->W, s->H, st->log,
                                     st->log ? st->log->n : 0, NULL);
    sp__rrc_sample_at(s->W, s->H, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1],
                      ctx->k_augment, (uint32_t)k, ctx->sample, ctx->epoch, a << 16, &b);
    int d = sp__source_scale(s, b.w, b.h, op->w, op->h);
    sp__st_log(st, SP_GEOM_AXIS, k, s->W, s->H, op->w, op->h, b.x, b.y,
               (double)op->w / b.w, (double)op->h / b.h);
    sp_image reg, out;
    int owned, rc = sp__source_region(s, b.x, b.y, b.w, b.h, d, &reg, &owned, r->path, r->err);
    if (rc) return rc;
    /* The crop box in the decoded region's coordinates (exact: d is a
     * power of two); kernels are clamped to the region (crop, then resize). */
    int rx = b.x / d, ry = b.y / d;
    sp_resample_geom g = {reg.width, reg.height,
                          (double)b.x / d - rx, (double)b.y / d - ry,
                          (double)(b.x + b.w) / d - rx, (double)(b.y + b.h) / d - ry,
                          op->w, op->h, 0, 0, op->w, op->h, op->filter};
    uint64_t t0 = sp__trace_t0();
    rc = sp__image_alloc(&out, op->w, op->h, reg.channels);
    if (!rc) rc = sp__resample(&reg, 0, 0, &g, &out);
    sp__trace_end(SP_TRACE_AUGMENT, t0);
    if (owned) sp_image_free(&reg);
    if (rc) {
        sp_image_free(&out);
        return sp_error_set(r->err, rc, "%s: random_resized_crop: %s", r->path, sp_strerror(rc));
    }
    sp__st_take(st, &out);
    return SP_OK;
}

/* The region a resize to ow x oh (window wx, wy, ww x wh of it) reads, at
 * scale 1/d, resampled into out. */
static int resize_read(sp__op_run *r, const sp_op *op, int ow, int oh, const int win[4],
                       sp_image *out) {
    const sp__source *s = r->src;
    int d = sp__source_scale(s, s->W, s->H, ow, oh);
    sp_resample_geom g = {(s->W + d - 1) / d, (s->H + d - 1) / d, 0.0, 0.0,
                          (double)s->W / d, (double)s->H / d, ow, oh, win[0], win[1], win[2],
                          win[3], op->filter};
    int x0, y0, x1, y1;
    int rc = sp__resample_span(&g, &x0, &y0, &x1, &y1);
    if (rc) return sp_error_set(r->err, rc, "%s: resize: %s", r->path, sp_strerror(rc));
    sp_image reg;
    int owned;
    int rx1 = x1 * d < s->W ? x1 * d : s->W, ry1 = y1 * d < s->H ? y1 * d : s->H;
    rc = sp__source_region(s, x0 * d, y0 * d, rx1 - x0 * d, ry1 - y0 * d, d, &reg, &owned,
                           r->path, r->err);
    if (rc) return rc;
    uint64_t t0 = sp__trace_t0();
    rc = sp__image_alloc(out, win[2], win[3], reg.channels);
    if (!rc) rc = sp__resample(&reg, x0, y0, &g, out);
    sp__trace_end(SP_TRACE_AUGMENT, t0);
    if (owned) sp_image_free(&reg);
    if (rc) {
        sp_image_free(out);
        return sp_error_set(r->err, rc, "%s: resize: %s", r->path, sp_strerror(rc));
    }
    return SP_OK;
}

/* resize, fused with the center_crop that follows it when the crop fits. */
static int resize_run(sp__op_run *r, const sp_op *op, int k) {
    const sp__source *s = r->src;
    int ow, oh;
    resize_dims(op, s->W, s->H, &ow, &oh);
    if (ow <= 0 || oh <= 0 || ow > 65535 || oh > 65535 || (int64_t)ow * oh > ((int64_t)1 << 28))
        return sp_error_set(r->err, SP_ELIMIT, "%s: resize to %dx%d is too large", r->path, ow,
                            oh);
    int win[4] = {0, 0, ow, oh};
    const sp_op *next = k + 1 < r->p->nops ? &r->p->ops[k + 1] : NULL;
    if (next && next->desc == &sp__op_center_crop && next->w <= ow && next->h <= oh) {
        win[2] = next->w;
        win[3] = next->h;
        win[0] = sp__center_crop_offset(ow, win[2]);
        win[1] = sp__center_crop_offset(oh, win[3]);
        r->next = k + 2;
    }
    sp__st_log(r->st, SP_GEOM_AXIS, k, s->W, s->H, ow, oh, 0, 0, (double)ow / s->W,
               (double)oh / s->H);
    if (r->next == k + 2)   /* the center_crop, a step of its own */
        sp__st_log(r->st, SP_GEOM_AXIS, k + 1, ow, oh, win[2], win[3], win[0], win[1], 1, 1);
    sp_image out;
    int rc = resize_read(r, op, ow, oh, win, &out);
    if (!rc) sp__st_take(r->st, &out);
    return rc;
}

static int center_crop_run(sp__op_run *r, const sp_op *op, int k) {
    const sp__source *s = r->src;
    sp__run_state *st = r->st;
    int ox = sp__center_crop_offset(s->W, op->w), oy = sp__center_crop_offset(s->H, op->h);
    sp__st_log(st, SP_GEOM_AXIS, k, s->W, s->H, op->w, op->h, ox, oy, 1, 1);
    int sx = ox > 0 ? ox : 0, sy = oy > 0 ? oy : 0;
    int nx = op->w < s->W ? op->w : s->W, ny = op->h < s->H ? op->h : s->H;
    sp_image reg;
    int owned, rc = sp__source_region(s, sx, sy, nx, ny, 1, &reg, &owned, r->path, r->err);
    if (rc) return rc;
    /* Padding is decided by the sizes, never by the offsets' signs: a crop
     * one larger than the image has offset 0 on that axis (the one zero
     * column or row goes after the image) and still pads. */
    if (op->w <= s->W && op->h <= s->H) {   /* no padding: the region is the result */
        if (owned) sp__st_take(st, &reg);
        else st->cur = reg;            /* a view into the current pixels */
        return SP_OK;
    }
    sp_image out;                       /* zero padding, as torchvision */
    rc = sp__image_alloc(&out, op->w, op->h, reg.channels);
    if (rc) {
        if (owned) sp_image_free(&reg);
        return sp_error_set(r->err, rc, "%s: center_crop: %s", r->path, sp_strerror(rc));
    }
    memset(out.data, 0, out.stride * (size_t)out.height);
    int dx = ox < 0 ? -ox : 0, dy = oy < 0 ? -oy : 0;
    for (int y = 0; y < ny; y++)
        memcpy(out.data + (size_t)(y + dy) * out.stride + (size_t)dx * (size_t)reg.channels,
               reg.data + (size_t)y * reg.stride, (size_t)nx * (size_t)reg.channels);
    if (owned) sp_image_free(&reg);
    sp__st_take(st, &out);
    return SP_OK;
}

/* ---- explain ---------------------------------------------------------------------- */

/* The box of the attempt that ran (protect=), then the attempts' lines. */
static int rrc_explain(sp__op_explain *x, const sp_op *op, int k) {
    const sp_sample_ctx *ctx = x->ctx;
    sp_crop_box b;
    uint32_t a = sp__protect_explained(x->p, op, rrc_step, k, ctx, x->W, x->H, x->log, NULL);
    sp__rrc_sample_at(x->W, x->H, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1],
                      ctx->k_augment, (uint32_t)k, ctx->sample, ctx->epoch, a << 16, &b);
    sp__fbuf_printf(x->e, "%d random_resized_crop: box x=%d y=%d w=%d h=%d of %dx%d -> %dx%d "
                    "(decoded at 1/%d)%s\n", k, b.x, b.y, b.w, b.h, x->W, x->H, op->w, op->h,
                    sp__source_scale(x->src, b.w, b.h, op->w, op->h),
                    op->filter == SP_RESAMPLE_BICUBIC ? ", bicubic" : "");
    sp__protect_explained(x->p, op, rrc_step, k, ctx, x->W, x->H, x->log, x->e);
    x->W = op->w;
    x->H = op->h;
    return k;
}

static int resize_explain(sp__op_explain *x, const sp_op *op, int k) {
    int ow, oh;
    resize_dims(op, x->W, x->H, &ow, &oh);
    sp__fbuf_printf(x->e, "%d resize: %dx%d -> %dx%d (decoded at 1/%d)%s\n", k, x->W, x->H, ow,
                    oh, sp__source_scale(x->src, x->W, x->H, ow, oh),
                    op->filter == SP_RESAMPLE_BICUBIC ? ", bicubic" : "");
    x->W = ow;
    x->H = oh;
    return k;
}

/* Per axis: the crop's offset, or the zero padding before and after the
 * image when the crop is larger (docs/pipeline.md). */
static int center_crop_explain(sp__op_explain *x, const sp_op *op, int k) {
    int W = x->W, H = x->H;
    int ox = sp__center_crop_offset(W, op->w), oy = sp__center_crop_offset(H, op->h);
    sp__fbuf_printf(x->e, "%d center_crop: ", k);
    if (op->w > W) sp__fbuf_printf(x->e, "pad x=%d,%d ", -ox, op->w - W + ox);
    else sp__fbuf_printf(x->e, "offset x=%d ", ox);
    if (op->h > H) sp__fbuf_printf(x->e, "pad y=%d,%d ", -oy, op->h - H + oy);
    else sp__fbuf_printf(x->e, "offset y=%d ", oy);
    sp__fbuf_printf(x->e, "of %dx%d -> %dx%d\n", W, H, op->w, op->h);
    x->W = op->w;
    x->H = op->h;
    return k;
}

/* A resize may log its fused center_crop's step too. */
static int resize_steps(const sp_op *op) { (void)op; return 2; }

#define REGION_FLAGS (SP__OP_REGION | SP__OP_MOVES_TARGETS)

const sp__op_desc sp__op_random_resized_crop = {
    "random_resized_crop", {"size", "scale", "ratio", "interpolation", NULL}, 1, REGION_FLAGS,
    rrc_parse, rrc_canon, fixed_shape, rrc_run, rrc_explain, NULL};

const sp__op_desc sp__op_resize = {
    "resize", {"size", "interpolation", NULL}, 1, REGION_FLAGS,
    resize_parse, resize_canon, resize_shape, resize_run, resize_explain, resize_steps};

const sp__op_desc sp__op_center_crop = {
    "center_crop", {"size", NULL}, 1, REGION_FLAGS,
    center_crop_parse, center_crop_canon, fixed_shape, center_crop_run, center_crop_explain,
    NULL};
