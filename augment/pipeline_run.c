/* pipeline_run.c - running a parsed pipeline on one sample (pipeline.h).
 *
 * HOW IT WORKS: the sample's pixels live in a small state (an owned buffer
 * and a current image that is that buffer, a view into it, or a view into
 * the caller's raw image). Ops run in spec order; every random decision is
 * sp_sample_draw(k_augment, block, op_index, sample, epoch), nothing else.
 *
 * Geometric ops (random_resized_crop, resize, center_crop) read their
 * input through a "source", which is either the current image or, for the
 * first op of a pipeline on encoded input, the encoded file itself. With
 * the file as source the op is fused with decoding (as DALI does): the
 * header is probed for W x H, the op's parameters are sampled from W x H
 * exactly as they would be from the decoded image, and only the region the
 * op reads is decoded, at a JPEG DCT scale 1/d chosen from those
 * parameters (a pure function of them, hence deterministic). The decoded
 * region is then resampled with the crop box mapped into the scaled
 * coordinates: a full-resolution edge u becomes u / d. With d = 1 the bytes
 * equal those of full decode followed by the op; docs/pipeline.md states
 * the rules.
 *
 * A horizontal flip is not done in place: it is recorded and the output
 * is written mirrored (all other non-geometric ops are per pixel, a sum or
 * histogram over all pixels, or sharpness's left-right symmetric 3x3
 * filter, so they commute with it); a geometric op, a gaussian_blur or
 * a rotate that follows applies it first. The decoded region keeps libjpeg's row layout
 * (SP__DECODE_WIDE: no copy).
 *
 * In the code: run_into() (behind sp_pipeline_run, _checked and _shaped)
 * makes the first state from the
 * encoded bytes (start_encoded(), fused with the first op when it is
 * geometric) or the raw pixels (start_raw()), runs the other ops
 * (run_ops()), and writes the output (sp__write_output(), in
 * pipeline_write.c). sp_pipeline_explain() replays the same draws as text.
 */
#include "augment/pipeline_internal.h"
#include "augment/decode_internal.h"
#include "common/sbuf_internal.h"
#include "common/trace_internal.h"
#include "seedpipe/targets.h"

#include <stddef.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct state {
    sp_image hold;   /* owned pixels, or zeroed */
    sp_image cur;    /* the image the next op sees */
    int writable;    /* cur points into hold */
    int hflip;       /* a pending horizontal flip of cur (applied on output) */
    sp_geom_log *log;   /* the geometry applied, for targets (targets.h), or NULL */
} state;

/* Log one geometric step (targets.h sp_geom_step); the log has room for
 * one step per op, and a fused resize + center_crop logs two. */
static void log_step(state *s, int kind, int op, int in_w, int in_h, int out_w, int out_h,
                     double x0, double y0, double sx, double sy) {
    if (!s->log || s->log->n >= SP_GEOM_LOG_MAX) return;
    sp__geom_step_set(&s->log->step[s->log->n++], kind, op, in_w, in_h, out_w, out_h, x0, y0,
                      sx, sy);
}

static void st_take(state *s, sp_image *owned) {
    sp_image_free(&s->hold);
    s->hold = *owned;
    s->cur = *owned;
    s->writable = 1;
    memset(owned, 0, sizeof *owned);
}

static int st_make_writable(state *s) {
    if (s->writable) return SP_OK;
    sp_image copy;
    int rc = sp_image_copy(&s->cur, &copy);
    if (rc) return rc;
    st_take(s, &copy);
    return SP_OK;
}

/* Where a geometric op reads pixels: the encoded file or an image. */
typedef struct source {
    int W, H;
    const sp_sample_src *src;     /* encoded input, or NULL */
    const sp_decode_limits *lim;
    sp_format format;
    int channels, dct;
    const sp_image *img;          /* image input (when src is NULL) */
    int dflags;                   /* sp__image_decode_ex() flags */
} source;

/* DCT scale for reading a cw x ch box that is resampled to ow x oh: the
 * largest d in 8, 4, 2 with cw >= d * ow and ch >= d * oh (JPEG with
 * dct=auto only), else 1. */
static int pick_scale(const source *s, int cw, int ch, int ow, int oh) {
    if (!s->src || s->format != SP_FORMAT_JPEG || !s->dct) return 1;
    for (int d = 8; d >= 2; d /= 2)
        if ((int64_t)cw >= (int64_t)d * ow && (int64_t)ch >= (int64_t)d * oh) return d;
    return 1;
}

/* Read full-resolution region (x, y, w, h) at scale 1/d. *owned says
 * whether out must be freed (decoded) or is a view into the source image. */
static int source_region(const source *s, int x, int y, int w, int h, int d, sp_image *out,
                         int *owned, const char *path, sp_error *err) {
    if (!s->src) {
        *owned = 0;
        if (d != 1 || sp_image_crop(s->img, x, y, w, h, out))
            return sp_error_set(err, SP_EINVAL, "%s: internal: bad region %d,%d %dx%d", path, x, y, w, h);
        return SP_OK;
    }
    sp_decode_req req = {s->channels, x, y, w, h, d};
    uint64_t t0 = sp__trace_t0();
    int rc = sp__image_decode_ex(s->src->bytes, s->src->len, path, &req, s->lim, s->dflags,
                                 out, err);
    sp__trace_end(SP_TRACE_DECODE, t0);
    if (rc) return rc;
    *owned = 1;
    int ws = (s->W + d - 1) / d, hs = (s->H + d - 1) / d;
    int x1 = (x + w + d - 1) / d, y1 = (y + h + d - 1) / d;
    int ew = (x1 < ws ? x1 : ws) - x / d, eh = (y1 < hs ? y1 : hs) - y / d;
    if (out->width != ew || out->height != eh || out->channels != s->channels) {
        sp_image_free(out);
        return sp_error_set(err, SP_EFORMAT, "%s: decoder returned %dx%dx%d for a %dx%d region at 1/%d",
                            path, out->width, out->height, out->channels, ew, eh, d);
    }
    return SP_OK;
}

static int check_out_size(int w, int h, const char *path, sp_error *err) {
    if (w <= 0 || h <= 0 || w > 65535 || h > 65535 || (int64_t)w * h > ((int64_t)1 << 28))
        return sp_error_set(err, SP_ELIMIT, "%s: resize to %dx%d is too large", path, w, h);
    return SP_OK;
}

static int run_rrc(const sp_pipeline *p, const sp_op *op, uint32_t k, const sp_sample_ctx *ctx,
                   const source *s, state *st, const char *path, sp_error *err) {
    sp_crop_box b;   /* protect= (pipeline_protect.c): the attempt that loses no box */
    uint32_t a = sp__protect_attempt(p, op, k, ctx, s->W, s->H, st->log, st->log ? st->log->n : 0,
                                     NULL);
    sp__rrc_sample_at(s->W, s->H, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1],
                      ctx->k_augment, k, ctx->sample, ctx->epoch, a << 16, &b);
    int d = pick_scale(s, b.w, b.h, op->w, op->h);
    log_step(st, SP_GEOM_AXIS, (int)k, s->W, s->H, op->w, op->h, b.x, b.y,
             (double)op->w / b.w, (double)op->h / b.h);
    sp_image reg, out;
    int owned, rc = source_region(s, b.x, b.y, b.w, b.h, d, &reg, &owned, path, err);
    if (rc) return rc;
    /* The crop box in the decoded region's coordinates (exact: d is a
     * power of two); kernels are clamped to the region (crop, then resize). */
    int rx = b.x / d, ry = b.y / d;
    sp_resample_geom g = {reg.width, reg.height,
                          (double)b.x / d - rx, (double)b.y / d - ry,
                          (double)(b.x + b.w) / d - rx, (double)(b.y + b.h) / d - ry,
                          op->w, op->h, 0, 0, op->w, op->h, op->filter};
    uint64_t t0 = sp__trace_t0();
    rc = sp_image_alloc(&out, op->w, op->h, reg.channels);
    if (!rc) rc = sp_resample(&reg, 0, 0, &g, &out);
    sp__trace_end(SP_TRACE_AUGMENT, t0);
    if (owned) sp_image_free(&reg);
    if (rc) {
        sp_image_free(&out);
        return sp_error_set(err, rc, "%s: random_resized_crop: %s", path, sp_strerror(rc));
    }
    st_take(st, &out);
    return SP_OK;
}

/* resize, optionally fused with the center_crop that follows it. */
static int run_resize(const sp_pipeline *p, int k, const source *s, state *st, int *consumed,
                      const char *path, sp_error *err) {
    const sp_op *op = &p->ops[k];
    int ow, oh;
    sp__resize_dims(op, s->W, s->H, &ow, &oh);
    int rc = check_out_size(ow, oh, path, err);
    if (rc) return rc;
    int wx = 0, wy = 0, ww = ow, wh = oh;
    *consumed = 1;
    if (k + 1 < p->nops && p->ops[k + 1].kind == SP_OP_CENTER_CROP && p->ops[k + 1].w <= ow &&
        p->ops[k + 1].h <= oh) {
        ww = p->ops[k + 1].w;
        wh = p->ops[k + 1].h;
        wx = sp_center_crop_offset(ow, ww);
        wy = sp_center_crop_offset(oh, wh);
        *consumed = 2;
    }
    log_step(st, SP_GEOM_AXIS, k, s->W, s->H, ow, oh, 0, 0, (double)ow / s->W,
             (double)oh / s->H);
    if (*consumed == 2)   /* the center_crop, a step of its own */
        log_step(st, SP_GEOM_AXIS, k + 1, ow, oh, ww, wh, wx, wy, 1, 1);
    int d = pick_scale(s, s->W, s->H, ow, oh);
    sp_resample_geom g = {(s->W + d - 1) / d, (s->H + d - 1) / d, 0.0, 0.0,
                          (double)s->W / d, (double)s->H / d, ow, oh, wx, wy, ww, wh, op->filter};
    int x0, y0, x1, y1;
    rc = sp_resample_span(&g, &x0, &y0, &x1, &y1);
    if (rc) return sp_error_set(err, rc, "%s: resize: %s", path, sp_strerror(rc));
    sp_image reg, out;
    int owned;
    int rx1 = x1 * d < s->W ? x1 * d : s->W, ry1 = y1 * d < s->H ? y1 * d : s->H;
    rc = source_region(s, x0 * d, y0 * d, rx1 - x0 * d, ry1 - y0 * d, d, &reg, &owned, path, err);
    if (rc) return rc;
    uint64_t t0 = sp__trace_t0();
    rc = sp_image_alloc(&out, ww, wh, reg.channels);
    if (!rc) rc = sp_resample(&reg, x0, y0, &g, &out);
    sp__trace_end(SP_TRACE_AUGMENT, t0);
    if (owned) sp_image_free(&reg);
    if (rc) {
        sp_image_free(&out);
        return sp_error_set(err, rc, "%s: resize: %s", path, sp_strerror(rc));
    }
    st_take(st, &out);
    return SP_OK;
}

static int run_center_crop(const sp_op *op, const source *s, state *st, const char *path,
                           sp_error *err) {
    int ox = sp_center_crop_offset(s->W, op->w), oy = sp_center_crop_offset(s->H, op->h);
    int sx = ox > 0 ? ox : 0, sy = oy > 0 ? oy : 0;
    int nx = op->w < s->W ? op->w : s->W, ny = op->h < s->H ? op->h : s->H;
    sp_image reg;
    int owned, rc = source_region(s, sx, sy, nx, ny, 1, &reg, &owned, path, err);
    if (rc) return rc;
    /* Padding is decided by the sizes, never by the offsets' signs: a crop
     * one larger than the image has offset 0 on that axis (the one zero
     * column or row goes after the image) and still pads. */
    if (op->w <= s->W && op->h <= s->H) {   /* no padding: the region is the result */
        if (owned) st_take(st, &reg);
        else st->cur = reg;            /* a view into the current pixels */
        return SP_OK;
    }
    sp_image out;                       /* zero padding, as torchvision */
    rc = sp_image_alloc(&out, op->w, op->h, reg.channels);
    if (rc) {
        if (owned) sp_image_free(&reg);
        return sp_error_set(err, rc, "%s: center_crop: %s", path, sp_strerror(rc));
    }
    memset(out.data, 0, out.stride * (size_t)out.height);
    int dx = ox < 0 ? -ox : 0, dy = oy < 0 ? -oy : 0;
    for (int y = 0; y < ny; y++)
        memcpy(out.data + (size_t)(y + dy) * out.stride + (size_t)dx * (size_t)reg.channels,
               reg.data + (size_t)y * reg.stride, (size_t)nx * (size_t)reg.channels);
    if (owned) sp_image_free(&reg);
    st_take(st, &out);
    return SP_OK;
}

/* random_crop: the pixels the crop shows are read (for encoded input,
 * only that box is decoded, at 1/1), then copied through the index maps
 * (pipeline_geom.c, ops_geom.c); padding is never built. */
static int run_random_crop(const sp_pipeline *p, const sp_op *op, uint32_t k,
                           const sp_sample_ctx *ctx, const source *s, state *st, const char *path,
                           sp_error *err) {
    sp__crop_plan pl;
    uint32_t a = sp__protect_attempt(p, op, k, ctx, s->W, s->H, st->log, st->log ? st->log->n : 0,
                                     NULL);
    int rc = sp__random_crop_plan(op, s->W, s->H, ctx, k, a, &pl, path, err);
    if (rc) return rc;
    log_step(st, SP_GEOM_AXIS, (int)k, s->W, s->H, op->w, op->h,
             pl.g.x - pl.g.pad[0] - pl.g.extra_x, pl.g.y - pl.g.pad[1] - pl.g.extra_y, 1, 1);
    sp_image reg, out;
    int owned = 0, all_fill = !pl.bw;   /* then a 1x1 read still checks the file */
    rc = source_region(s, pl.bx, pl.by, all_fill ? 1 : pl.bw, all_fill ? 1 : pl.bh, 1, &reg,
                       &owned, path, err);
    if (!rc && (rc = sp_image_alloc(&out, op->w, op->h, reg.channels)))
        sp_error_set(err, rc, "%s: random_crop: %s", path, sp_strerror(rc));
    if (!rc) {
        sp_image_remap(&reg, pl.xmap, pl.ymap, op->fill, &out);
        st_take(st, &out);
    }
    if (owned) sp_image_free(&reg);
    sp__crop_plan_free(&pl);
    return rc;
}

static int run_geometric(const sp_pipeline *p, int k, const sp_sample_ctx *ctx, const source *s,
                         state *st, int *consumed, const char *path, sp_error *err) {
    const sp_op *op = &p->ops[k];
    *consumed = 1;
    if (op->kind == SP_OP_RRC) return run_rrc(p, op, (uint32_t)k, ctx, s, st, path, err);
    if (op->kind == SP_OP_RESIZE) return run_resize(p, k, s, st, consumed, path, err);
    if (op->kind == SP_OP_RANDOM_CROP)
        return run_random_crop(p, op, (uint32_t)k, ctx, s, st, path, err);
    log_step(st, SP_GEOM_AXIS, k, s->W, s->H, op->w, op->h, sp_center_crop_offset(s->W, op->w),
             sp_center_crop_offset(s->H, op->h), 1, 1);
    return run_center_crop(op, s, st, path, err);
}

static int run_jitter(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, state *st) {
    int32_t fq[3];
    float hue;
    uint8_t order[4];
    int n = sp__jitter_draw(op, k, ctx, fq, &hue, order);
    if (fq[0] == SP_FACTOR_ONE && fq[1] == SP_FACTOR_ONE && fq[2] == SP_FACTOR_ONE && hue == 0.0f)
        return SP_OK;
    int rc = st_make_writable(st);
    if (rc) return rc;
    for (int t = 0; t < n; t++) {
        int fn = order[t];
        if (fn == 3) {
            if (hue != 0.0f) sp_adjust_hue(&st->cur, hue);
            continue;
        }
        if (fq[fn] == SP_FACTOR_ONE) continue;
        if (fn == 0) sp_adjust_brightness(&st->cur, fq[fn]);
        else if (fn == 1) sp_adjust_contrast(&st->cur, fq[fn]);
        else sp_adjust_saturation(&st->cur, fq[fn]);
    }
    return SP_OK;
}

/* gaussian_blur (ops_blur.c) with the sample's sigma (block 0, c[0]), in
 * torchvision's order: a pending horizontal flip is applied first (the
 * double sums are not mirror-symmetric to the last bit). */
static int run_blur(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, state *st,
                    const char *path, sp_error *err) {
    int rc = st_make_writable(st);
    if (rc) return rc;
    if (st->hflip) sp_image_hflip(&st->cur);
    st->hflip = 0;
    float sigma = sp__blur_sigma(op, k, ctx);
    rc = sp_image_gaussian_blur(&st->cur, op->ksize[0], op->ksize[1], sigma, sigma);
    if (rc == SP_EINVAL)
        return sp_error_set(err, rc, "%s: gaussian_blur: a %dx%d kernel on a %dx%d image (its "
                            "reflect padding must be smaller than the side, as torch's)", path,
                            op->ksize[0], op->ksize[1], st->cur.width, st->cur.height);
    return rc;
}

/* rotate (ops_rotate.c) with the sample's angle (block 0, c[0]); a pending
 * horizontal flip is applied first (torchvision's order). */
static int run_rotate(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, state *st) {
    if (st->hflip) {
        int rc = st_make_writable(st);
        if (rc) return rc;
        sp_image_hflip(&st->cur);
        st->hflip = 0;
    }
    sp_image out;
    int rc = sp_image_alloc(&out, st->cur.width, st->cur.height, st->cur.channels);
    if (rc) return rc;
    float angle = sp__rotate_angle(op, k, ctx), th[6];
    sp_rotation_theta(angle, th);
    log_step(st, SP_GEOM_ROTATE, (int)k, out.width, out.height, out.width, out.height, 0, 0, 1, 1);
    if (st->log && st->log->n) {
        st->log->step[st->log->n - 1].c = th[0];
        st->log->step[st->log->n - 1].s = th[1];
    }
    const float fill[3] = {(float)op->value[0], (float)op->value[1], (float)op->value[2]};
    sp_image_rotate(&st->cur, angle, op->bilinear, fill, &out);
    st_take(st, &out);
    return SP_OK;
}

/* random_zoom_out / random_iou_crop (pipeline_detcrop.c); a pending
 * horizontal flip is applied first. */
static int run_detcrop(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, state *st,
                       const char *path, sp_error *err) {
    int made = 0, rc = SP_OK;
    if (st->hflip && !(rc = st_make_writable(st))) sp_image_hflip(&st->cur);
    st->hflip = 0;
    sp_image out;
    if (rc) return sp_error_set(err, rc, "%s: %s", path, sp_strerror(rc));
    rc = sp__detcrop_run(op, k, ctx, &st->cur, st->log, &out, &made, path, err);
    if (!rc && made) st_take(st, &out);
    return rc;
}

/* The pixel-value ops (invert .. sharpness) on a writable image. */
static int run_pixel(const sp_op *op, sp_image *img) {
    switch (op->kind) {
    case SP_OP_INVERT: sp_image_invert(img); break;
    case SP_OP_POSTERIZE: sp_image_posterize(img, op->bits); break;
    case SP_OP_SOLARIZE: sp_image_solarize(img, op->level); break;
    case SP_OP_AUTOCONTRAST: sp_image_autocontrast(img); break;
    case SP_OP_EQUALIZE: sp_image_equalize(img); break;
    case SP_OP_SHARPNESS: return sp_image_sharpness(img, op->level);
    default: break;
    }
    return SP_OK;
}

/* hflip / vflip / grayscale: block 0, c[0]; applied iff u < p. */
static double bernoulli_u(uint32_t k, const sp_sample_ctx *ctx) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    return sp_u01d(d.c[0]);
}

static int bernoulli(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx) {
    return bernoulli_u(k, ctx) < op->p;
}

/* The first state from encoded bytes: probed, then the first op after
 * decode fused with decoding when it is geometric (*k moves past it), else
 * the whole image decoded. */
static int start_encoded(const sp_pipeline *p, const sp_sample_ctx *ctx, const sp_sample_src *src,
                         const sp_decode_limits *lim, int dflags, state *st, int *k,
                         const char *path, sp_error *err) {
    source s = {0, 0, src, lim, SP_FORMAT_UNKNOWN, p->channels, p->dct, NULL,
                SP__DECODE_WIDE | dflags};
    sp_image_info info;
    int rc = sp_image_probe(src->bytes, src->len, path, lim, &info, err);
    if (rc) return rc;
    s.W = info.width;
    s.H = info.height;
    s.format = info.format;
    if (st->log) {
        st->log->src_w = s.W;
        st->log->src_h = s.H;
    }
    if (*k < p->nops && sp__op_is_geometric(p->ops[*k].kind)) {
        int consumed;
        rc = run_geometric(p, *k, ctx, &s, st, &consumed, path, err);
        *k += consumed;
    } else {
        sp_image full;
        int owned;
        rc = source_region(&s, 0, 0, s.W, s.H, 1, &full, &owned, path, err);
        if (!rc) st_take(st, &full);
    }
    return rc;
}

/* The first state from raw pixels: a view of them, or converted to the
 * pipeline's channel count. */
static int start_raw(const sp_pipeline *p, const sp_image *r, state *st, const char *path,
                     sp_error *err) {
    if (!r->data || r->width <= 0 || r->height <= 0 || (r->channels != 1 && r->channels != 3) ||
        r->stride < (size_t)r->width * (size_t)r->channels)
        return sp_error_set(err, SP_EINVAL, "%s: invalid raw image", path);
    if (st->log) {
        st->log->src_w = r->width;
        st->log->src_h = r->height;
    }
    if (r->channels == p->channels) {
        st->cur = *r;
        return SP_OK;
    }
    sp_image conv;
    int rc = sp_image_alloc(&conv, r->width, r->height, p->channels);
    if (!rc) rc = sp_image_to_gray(r, &conv);   /* 3 -> 1 luma, 1 -> 3 replicate */
    if (rc) sp_image_free(&conv);
    else st_take(st, &conv);
    return rc;
}

/* Ops k.. of the pipeline on the state, in spec order. */
static int run_ops(const sp_pipeline *p, const sp_sample_ctx *ctx, state *st, int k,
                   const char *path, sp_error *err) {
    int rc = SP_OK;
    while (!rc && k < p->nops) {
        const sp_op *op = &p->ops[k];
        if (sp__op_is_geometric(op->kind)) {
            if (st->hflip) {   /* a region is read: apply the pending flip */
                rc = st_make_writable(st);
                if (rc) {
                    sp_error_set(err, rc, "%s: %s", path, sp_strerror(rc));
                    break;
                }
                sp_image_hflip(&st->cur);
                st->hflip = 0;
            }
            source s = {st->cur.width, st->cur.height, NULL, NULL, SP_FORMAT_UNKNOWN, p->channels,
                        0, &st->cur, 0};
            sp_image keep = st->cur;   /* s.img must stay valid during the op */
            s.img = &keep;
            int consumed;
            rc = run_geometric(p, k, ctx, &s, st, &consumed, path, err);
            k += consumed;
            continue;
        }
        switch (op->kind) {
        case SP_OP_HFLIP:
            /* Deferred: the output is written mirrored. Every other
             * non-geometric op is per pixel (contrast's mean is a sum,
             * equalize and autocontrast use histograms, sharpness's kernel
             * and border are symmetric), so it commutes with the flip. */
            if (bernoulli(op, (uint32_t)k, ctx)) {
                st->hflip ^= 1;   /* geometrically here, in op order */
                log_step(st, SP_GEOM_HFLIP, k, st->cur.width, st->cur.height, st->cur.width,
                         st->cur.height, 0, 0, 1, 1);
            }
            break;
        case SP_OP_VFLIP:
            if (bernoulli(op, (uint32_t)k, ctx) && !(rc = st_make_writable(st))) {
                sp_image_vflip(&st->cur);
                log_step(st, SP_GEOM_VFLIP, k, st->cur.width, st->cur.height, st->cur.width,
                         st->cur.height, 0, 0, 1, 1);
            }
            break;
        case SP_OP_GRAYSCALE:
            if (bernoulli(op, (uint32_t)k, ctx) && !(rc = st_make_writable(st)))
                rc = sp_image_to_gray(&st->cur, &st->cur);
            break;
        case SP_OP_COLOR_JITTER: rc = run_jitter(op, (uint32_t)k, ctx, st); break;
        case SP_OP_GAUSSIAN_BLUR:
            if ((rc = run_blur(op, (uint32_t)k, ctx, st, path, err)) == SP_EINVAL) return rc;
            break;
        case SP_OP_ROTATE: rc = run_rotate(op, (uint32_t)k, ctx, st); break;
        case SP_OP_AFFINE: case SP_OP_AUTO_AUGMENT: case SP_OP_RAND_AUGMENT:
        case SP_OP_TRIVIAL_AUGMENT:   /* a pending flip first (torchvision's order) */
            if (!(rc = st_make_writable(st)) && st->hflip) sp_image_hflip(&st->cur);
            st->hflip = 0;
            if (!rc) rc = sp__policy_run(op, (uint32_t)k, ctx, &st->cur, st->log);
            break;
        case SP_OP_RANDOM_ZOOM_OUT: case SP_OP_RANDOM_IOU_CROP:
            if ((rc = run_detcrop(op, (uint32_t)k, ctx, st, path, err))) return rc;
            break;
        case SP_OP_RANDOM_APPLY:   /* not drawn: the ops it governs are skipped */
            if (!bernoulli(op, (uint32_t)k, ctx)) k += op->span;
            break;
        default:   /* the pixel-value ops; decode (op 0), normalize and random_erasing (on output) */
            if (sp__op_is_pixel(op->kind) && bernoulli(op, (uint32_t)k, ctx) &&
                !(rc = st_make_writable(st)))
                rc = run_pixel(op, &st->cur);
            break;
        }
        if (rc) sp_error_set(err, rc, "%s: %s", path, sp_strerror(rc));
        k++;
    }
    return rc;
}

/* The shared body of the three entry points: run the ops, then write the
 * output only if it has the declared shape (when one is given: the sample
 * slot's geometry) and fits in out_bytes. A pixel of another geometry is
 * never written: a wrong stride would scramble the slot, a short write
 * would leave what the buffer held. */
static int run_into(const sp_pipeline *p, const sp_sample_ctx *ctx, const sp_sample_src *src,
                    const sp_run_opts *opts, const sp_out_shape *shape, void *out,
                    size_t out_bytes, int dflags, sp_geom_log *log, sp_error *err) {
    static const sp_run_opts default_opts = {SP_DTYPE_UINT8, SP_LAYOUT_NCHW, 0, NULL};
    if (!p || !ctx || !src || !out) return sp_error_set(err, SP_EINVAL, "pipeline run: NULL argument");
    const sp_run_opts *o = opts ? opts : &default_opts;
    const char *path = src->path ? src->path : "(sample)";
    if ((unsigned)o->dtype > SP_DTYPE_FLOAT16)
        return sp_error_set(err, SP_EINVAL, "%s: dtype %s is for token corpora, not images",
                            path, sp_dtype_name(o->dtype));
    if (o->dtype == SP_DTYPE_UINT8 && p->has_normalize && !o->skip_normalize)
        return sp_error_set(err, SP_EINVAL,
                            "%s: the pipeline normalizes, so it needs float32 output "
                            "(or skip_normalize for a uint8 preview)", path);
    sp_decode_limits lim;
    if (o->limits) lim = *o->limits;
    else sp_decode_limits_default(&lim);

    state st;
    memset(&st, 0, sizeof st);
    st.log = log;
    if (log) log->n = log->src_w = log->src_h = 0;
    int rc, k = p->has_decode ? 1 : 0;
    if (src->bytes) rc = start_encoded(p, ctx, src, &lim, dflags, &st, &k, path, err);
    else if (src->raw) rc = start_raw(p, src->raw, &st, path, err);
    else return sp_error_set(err, SP_EINVAL, "%s: sample has neither bytes nor raw pixels", path);
    uint64_t t0 = sp__trace_t0();
    if (!rc && k < p->nops) {
        rc = run_ops(p, ctx, &st, k, path, err);
        sp__trace_end(SP_TRACE_AUGMENT, t0);
    }
    const sp_image *im = &st.cur;
    size_t need = (size_t)im->width * (size_t)im->height * (size_t)im->channels *
                  sp_dtype_size(o->dtype);
    int other = shape && (im->height != shape->height || im->width != shape->width ||
                          im->channels != shape->channels);
    if (rc == SP_OK && other)
        rc = sp_error_set(err, SP_ERANGE, "%s: output %dx%dx%d is not the sample's declared "
                          "%dx%dx%d (a pipeline without a fixed output size needs images of "
                          "one size); nothing written", path, im->height, im->width,
                          im->channels, shape->height, shape->width, shape->channels);
    else if (rc == SP_OK && need > out_bytes)
        rc = sp_error_set(err, SP_ERANGE, "%s: output %dx%dx%d needs %zu bytes, %zu available",
                          path, im->height, im->width, im->channels, need, out_bytes);
    else if (rc == SP_OK) {
        t0 = sp__trace_t0();
        sp__write_output(p, im, st.hflip, o, out);
        if (p->has_erasing &&
            (rc = sp__erase_output(p, ctx, im->width, im->height, im->channels, o, out)))
            sp_error_set(err, rc, "%s: random_erasing: %s", path, sp_strerror(rc));
        sp__trace_end(SP_TRACE_WRITE, t0);
    }
    sp_image_free(&st.hold);
    return rc;
}

int sp_pipeline_run_shaped(const sp_pipeline *p, const sp_sample_ctx *ctx,
                           const sp_sample_src *src, const sp_run_opts *opts,
                           const sp_out_shape *shape, void *out, size_t out_bytes, sp_error *err) {
    if (!shape) return sp_error_set(err, SP_EINVAL, "pipeline run: NULL shape");
    return run_into(p, ctx, src, opts, shape, out, out_bytes, 0, NULL, err);
}

int sp__pipeline_run_flags(const sp_pipeline *p, const sp_sample_ctx *ctx,
                           const sp_sample_src *src, const sp_run_opts *opts,
                           const sp_out_shape *shape, void *out, size_t out_bytes, int dflags,
                           sp_geom_log *log, sp_error *err) {
    return run_into(p, ctx, src, opts, shape, out, out_bytes, dflags, log, err);
}

int sp_pipeline_run_geom(const sp_pipeline *p, const sp_sample_ctx *ctx,
                         const sp_sample_src *src, const sp_run_opts *opts,
                         const sp_out_shape *shape, void *out, size_t out_bytes,
                         sp_geom_log *log, sp_error *err) {
    return run_into(p, ctx, src, opts, shape, out, out_bytes, 0, log, err);
}

int sp_pipeline_run_checked(const sp_pipeline *p, const sp_sample_ctx *ctx,
                            const sp_sample_src *src, const sp_run_opts *opts, void *out,
                            size_t out_bytes, sp_error *err) {
    return run_into(p, ctx, src, opts, NULL, out, out_bytes, 0, NULL, err);
}

int sp_pipeline_run(const sp_pipeline *p, const sp_sample_ctx *ctx, const sp_sample_src *src,
                    const sp_run_opts *opts, void *out, sp_error *err) {
    return run_into(p, ctx, src, opts, NULL, out, SIZE_MAX, 0, NULL, err);
}

/* ---- explain ------------------------------------------------------------------- */

/* random_apply: whether its ops run; returns the last op index it covers
 * (its ops are skipped) or k (they follow, explained as usual). */
static int explain_random_apply(sp__fbuf *e, const sp_op *op, int k, const sp_sample_ctx *ctx) {
    double u = bernoulli_u((uint32_t)k, ctx);
    int on = u < op->p;
    sp__fbuf_printf(e, "%d random_apply: ops %d..%d %s (u=%.4f %s p=%g)\n", k, k + 1,
                    k + op->span, on ? "applied" : "skipped", u, on ? "<" : ">=", op->p);
    for (int j = k + 1; !on && j <= k + op->span; j++)
        sp__fbuf_printf(e, "%d: skipped (random_apply %d)\n", j, k);
    return on ? k : k + op->span;
}

/* A pixel-value op: its magnitude and whether it applies (block 0, c[0]). */
static void explain_pixel(sp__fbuf *e, const sp_op *op, int k, const sp_sample_ctx *ctx) {
    static const char *const NAMES[] = {"invert", "posterize", "solarize", "autocontrast",
                                        "equalize", "sharpness"};
    double u = bernoulli_u((uint32_t)k, ctx);
    sp__fbuf_printf(e, "%d %s", k, NAMES[op->kind - SP_OP_INVERT]);
    if (op->kind == SP_OP_POSTERIZE) sp__fbuf_printf(e, " bits=%d", op->bits);
    if (op->kind == SP_OP_SOLARIZE) sp__fbuf_printf(e, " threshold=%g", op->level);
    if (op->kind == SP_OP_SHARPNESS) sp__fbuf_printf(e, " factor=%g", op->level);
    sp__fbuf_printf(e, ": %s (u=%.4f %s p=%g)\n", u < op->p ? "applied" : "not applied", u,
                    u < op->p ? "<" : ">=", op->p);
}

/* The decode line's name of a source format. */
/* random_resized_crop's line: the box of the attempt that ran (protect=),
 * then the attempts' lines (pipeline_protect.c). */
static void explain_rrc(sp__fbuf *e, const sp_pipeline *p, int k, const sp_sample_ctx *ctx,
                        const sp_geom_log *log, const source *s, int *W, int *H) {
    const sp_op *op = &p->ops[k];
    sp_crop_box b;
    uint32_t a = sp__protect_explained(p, op, k, ctx, *W, *H, log, NULL);
    sp__rrc_sample_at(*W, *H, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1],
                      ctx->k_augment, (uint32_t)k, ctx->sample, ctx->epoch, a << 16, &b);
    sp__fbuf_printf(e, "%d random_resized_crop: box x=%d y=%d w=%d h=%d of %dx%d -> %dx%d "
                    "(decoded at 1/%d)%s\n", k, b.x, b.y, b.w, b.h, *W, *H, op->w, op->h,
                    pick_scale(s, b.w, b.h, op->w, op->h),
                    op->filter == SP_RESAMPLE_BICUBIC ? ", bicubic" : "");
    sp__protect_explained(p, op, k, ctx, *W, *H, log, e);
    *W = op->w;
    *H = op->h;
}

static const char *fmt_name(sp_format f) {
    switch (f) {
    case SP_FORMAT_PNG: return "PNG";
    case SP_FORMAT_JPEG: return "JPEG";
    case SP_FORMAT_BMP: return "BMP";
    case SP_FORMAT_WEBP: return "WebP";
    case SP_FORMAT_TIFF: return "TIFF";
    default: return "pixels";
    }
}

/* The draws of sp_pipeline_run_checked(), op by op, without pixels: the
 * same functions are called with the same arguments, and the image size is
 * tracked through the geometric ops as they would change it. */
size_t sp_pipeline_explain(const sp_pipeline *p, const sp_sample_ctx *ctx, int W, int H,
                           sp_format format, char *buf, size_t n) {
    return sp__pipeline_explain_log(p, ctx, W, H, format, NULL, buf, n);
}

size_t sp__pipeline_explain_log(const sp_pipeline *p, const sp_sample_ctx *ctx, int W, int H,
                                sp_format format, const sp_geom_log *log, char *buf, size_t n) {
    sp__fbuf e = {buf, n, 0};
    if (n) buf[0] = '\0';
    if (!p || !ctx) return 0;
    static const char *const NAMES[4] = {"brightness", "contrast", "saturation", "hue"};
    int at_source = 1;
    for (int k = 0; k < p->nops; k++) {
        const sp_op *op = &p->ops[k];
        source s = {W, H, NULL, NULL, format, p->channels, p->dct, NULL, 0};
        sp_sample_src dummy = {0};
        if (at_source) s.src = &dummy;   /* pick_scale() only asks whether there is one */
        switch (op->kind) {
        case SP_OP_DECODE:
            sp__fbuf_printf(&e, "%d decode: %dx%d %s, %s\n", k, W, H, fmt_name(format),
                            p->channels == 1 ? "gray" : "rgb");
            continue;
        case SP_OP_RRC: explain_rrc(&e, p, k, ctx, log, &s, &W, &H); break;
        case SP_OP_RESIZE: {
            int ow, oh;
            sp__resize_dims(op, W, H, &ow, &oh);
            sp__fbuf_printf(&e, "%d resize: %dx%d -> %dx%d (decoded at 1/%d)%s\n", k, W, H, ow, oh,
                   pick_scale(&s, W, H, ow, oh), op->filter == SP_RESAMPLE_BICUBIC ? ", bicubic" : "");
            W = ow;
            H = oh;
            break;
        }
        case SP_OP_CENTER_CROP: {
            /* Per axis: the crop's offset, or the zero padding before and
             * after the image when the crop is larger (docs/pipeline.md). */
            int ox = sp_center_crop_offset(W, op->w), oy = sp_center_crop_offset(H, op->h);
            sp__fbuf_printf(&e, "%d center_crop: ", k);
            if (op->w > W) sp__fbuf_printf(&e, "pad x=%d,%d ", -ox, op->w - W + ox);
            else sp__fbuf_printf(&e, "offset x=%d ", ox);
            if (op->h > H) sp__fbuf_printf(&e, "pad y=%d,%d ", -oy, op->h - H + oy);
            else sp__fbuf_printf(&e, "offset y=%d ", oy);
            sp__fbuf_printf(&e, "of %dx%d -> %dx%d\n", W, H, op->w, op->h);
            W = op->w;
            H = op->h;
            break;
        }
        case SP_OP_HFLIP:
        case SP_OP_VFLIP:
        case SP_OP_GRAYSCALE: {
            double u = bernoulli_u((uint32_t)k, ctx);
            const char *name = op->kind == SP_OP_HFLIP   ? "hflip"
                             : op->kind == SP_OP_VFLIP ? "vflip" : "grayscale";
            const char *did = op->kind == SP_OP_GRAYSCALE ? "converted" : "flipped";
            sp__fbuf_printf(&e, "%d %s: %s (u=%.4f %s p=%g)\n", k, name, u < op->p ? did : "not applied",
                   u, u < op->p ? "<" : ">=", op->p);
            break;
        }
        case SP_OP_COLOR_JITTER: {
            int32_t fq[3];
            float hue;
            uint8_t o[4];
            int n = sp__jitter_draw(op, (uint32_t)k, ctx, fq, &hue, o);
            sp__fbuf_printf(&e, "%d color_jitter: brightness %.4f contrast %.4f saturation %.4f",
                            k, fq[0] / 4096.0, fq[1] / 4096.0, fq[2] / 4096.0);
            if (n == 4) sp__fbuf_printf(&e, " hue %.6f", (double)hue);
            sp__fbuf_printf(&e, ", order");
            for (int t = 0; t < n; t++) sp__fbuf_printf(&e, "%s %s", t ? "," : "", NAMES[o[t]]);
            sp__fbuf_printf(&e, "\n");
            break;
        }
        case SP_OP_NORMALIZE:
            sp__fbuf_printf(&e, "%d normalize: fixed (no draw)\n", k);
            break;
        case SP_OP_TARGETS:
            sp__fbuf_printf(&e, "%d targets: rules (no draw; the boxes' fates follow)\n", k);
            break;
        case SP_OP_RANDOM_APPLY: k = explain_random_apply(&e, op, k, ctx); break;
        case SP_OP_RANDOM_ZOOM_OUT:
        case SP_OP_RANDOM_IOU_CROP: sp__detcrop_explain(&e, op, k, ctx, log, &W, &H); break;
        case SP_OP_RANDOM_CROP: sp__protect_explain_crop(&e, p, k, ctx, log, &W, &H); break;
        case SP_OP_GAUSSIAN_BLUR:
        case SP_OP_RANDOM_ERASING:
        case SP_OP_ROTATE: sp__geom_explain(&e, op, k, ctx, 0, &W, &H); break;
        case SP_OP_AFFINE: case SP_OP_AUTO_AUGMENT: case SP_OP_RAND_AUGMENT:
        case SP_OP_TRIVIAL_AUGMENT: sp__policy_explain(&e, op, k, ctx, W, H); break;
        default:
            if (sp__op_is_pixel(op->kind)) explain_pixel(&e, op, k, ctx);
            else sp__fbuf_printf(&e, "%d (op %d): no draw\n", k, (int)op->kind);
            break;
        }
        if (sp__op_is_geometric(op->kind) || op->kind >= SP_OP_RANDOM_ZOOM_OUT) at_source = 0;
    }
    return e.len;
}
