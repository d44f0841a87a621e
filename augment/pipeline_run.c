/* pipeline_run.c - running a parsed pipeline on one sample (pipeline.h),
 * and explaining its draws.
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
 * In the code: run_into() (behind sp__pipeline_run, _checked and _shaped)
 * makes the first state from the encoded bytes (start_encoded(), fused
 * with the first op when it is a region op) or the raw pixels
 * (start_raw()), runs the other ops (run_ops(): each op's descriptor's run,
 * pipeline_internal.h; the state and the source are pipeline_state.c's),
 * and writes the output (sp__write_output(), in pipeline_write.c).
 * sp__pipeline_explain() replays the same draws as text, each op's
 * descriptor writing its lines. Nothing here knows an op by name.
 */
#include "augment/pipeline_internal.h"
#include "augment/decode_internal.h"
#include "common/sbuf_internal.h"
#include "common/trace_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "augment/ops_internal.h"
#include "augment/targets_internal.h"
#include "common/common_internal.h"

/* The first state from encoded bytes: probed, then the first op after
 * decode fused with decoding when it is geometric (*k moves past it), else
 * the whole image decoded. */
static int start_encoded(const sp_pipeline *p, const sp_sample_ctx *ctx, const sp_sample_src *src,
                         const sp_decode_limits *lim, const sp__decode_hint *hint,
                         sp__run_state *st, int *k, const char *path, sp_error *err) {
    sp__source s = {0, 0, src, lim, SP_FORMAT_UNKNOWN, p->channels, p->dct, NULL,
                    hint ? *hint : (sp__decode_hint){0, NULL, 0}};
    s.hint.flags |= SP__DECODE_WIDE;
    sp_image_info info;
    int rc = sp__image_probe(src->bytes, src->len, path, lim, &info, err);
    if (rc) return rc;
    s.W = info.width;
    s.H = info.height;
    s.format = info.format;
    if (st->log) {
        st->log->src_w = s.W;
        st->log->src_h = s.H;
    }
    if (*k < p->nops && (p->ops[*k].desc->flags & SP__OP_REGION)) {
        sp__op_run r = {p, ctx, st, &s, *k + 1, path, err};
        rc = p->ops[*k].desc->run(&r, &p->ops[*k], *k);
        *k = r.next;
    } else {
        sp_image full;
        int owned;
        rc = sp__source_region(&s, 0, 0, s.W, s.H, 1, &full, &owned, path, err);
        if (!rc) sp__st_take(st, &full);
    }
    return rc;
}

/* The first state from raw pixels: a view of them, or converted to the
 * pipeline's channel count. */
static int start_raw(const sp_pipeline *p, const sp_image *r, sp__run_state *st, const char *path,
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
    int rc = sp__image_alloc(&conv, r->width, r->height, p->channels);
    if (!rc) rc = sp__image_to_gray(r, &conv);   /* 3 -> 1 luma, 1 -> 3 replicate */
    if (rc) sp_image_free(&conv);
    else sp__st_take(st, &conv);
    return rc;
}

/* Ops k.. of the pipeline on the state, in spec order. A region op reads
 * the current image through a source, after the pending flip. */
static int run_ops(const sp_pipeline *p, const sp_sample_ctx *ctx, sp__run_state *st, int k,
                   const char *path, sp_error *err) {
    int rc = SP_OK;
    while (!rc && k < p->nops) {
        const sp_op *op = &p->ops[k];
        sp__op_run r = {p, ctx, st, NULL, k + 1, path, err};
        if (op->desc->flags & SP__OP_REGION) {
            if ((rc = sp__st_unflip(st))) {   /* a region is read: apply the pending flip */
                sp__op_fail(&r, rc);
                break;
            }
            sp__source s = {st->cur.width, st->cur.height, NULL, NULL, SP_FORMAT_UNKNOWN,
                            p->channels, 0, &st->cur, {0, NULL, 0}};
            sp_image keep = st->cur;   /* s.img must stay valid during the op */
            s.img = &keep;
            r.src = &s;
            rc = op->desc->run(&r, op, k);
        } else if (op->desc->run) {
            rc = op->desc->run(&r, op, k);
        }
        k = r.next;
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
                    size_t out_bytes, const sp__decode_hint *hint, sp_geom_log *log,
                    sp_error *err) {
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
    else sp__decode_limits_default(&lim);

    sp__run_state st;
    memset(&st, 0, sizeof st);
    st.log = log;
    if (log) log->n = log->src_w = log->src_h = 0;
    int rc, k = p->has_decode ? 1 : 0;
    if (src->bytes) rc = start_encoded(p, ctx, src, &lim, hint, &st, &k, path, err);
    else if (src->raw) rc = start_raw(p, src->raw, &st, path, err);
    else return sp_error_set(err, SP_EINVAL, "%s: sample has neither bytes nor raw pixels", path);
    uint64_t t0 = sp__trace_t0();
    if (!rc && k < p->nops) {
        rc = run_ops(p, ctx, &st, k, path, err);
        sp__trace_end(SP_TRACE_AUGMENT, t0);
    }
    const sp_image *im = &st.cur;
    size_t need = (size_t)im->width * (size_t)im->height * (size_t)im->channels *
                  sp__dtype_size(o->dtype);
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

int sp__pipeline_run_shaped(const sp_pipeline *p, const sp_sample_ctx *ctx,
                            const sp_sample_src *src, const sp_run_opts *opts,
                            const sp_out_shape *shape, void *out, size_t out_bytes, sp_error *err) {
    if (!shape) return sp_error_set(err, SP_EINVAL, "pipeline run: NULL shape");
    return run_into(p, ctx, src, opts, shape, out, out_bytes, NULL, NULL, err);
}

int sp__pipeline_run_hint(const sp_pipeline *p, const sp_sample_ctx *ctx,
                          const sp_sample_src *src, const sp_run_opts *opts,
                          const sp_out_shape *shape, void *out, size_t out_bytes,
                          const sp__decode_hint *hint, sp_geom_log *log, sp_error *err) {
    return run_into(p, ctx, src, opts, shape, out, out_bytes, hint, log, err);
}

int sp__pipeline_run_geom(const sp_pipeline *p, const sp_sample_ctx *ctx,
                          const sp_sample_src *src, const sp_run_opts *opts,
                          const sp_out_shape *shape, void *out, size_t out_bytes,
                          sp_geom_log *log, sp_error *err) {
    return run_into(p, ctx, src, opts, shape, out, out_bytes, NULL, log, err);
}

int sp__pipeline_run_checked(const sp_pipeline *p, const sp_sample_ctx *ctx,
                             const sp_sample_src *src, const sp_run_opts *opts, void *out,
                             size_t out_bytes, sp_error *err) {
    return run_into(p, ctx, src, opts, NULL, out, out_bytes, NULL, NULL, err);
}

int sp__pipeline_run(const sp_pipeline *p, const sp_sample_ctx *ctx, const sp_sample_src *src,
                     const sp_run_opts *opts, void *out, sp_error *err) {
    return run_into(p, ctx, src, opts, NULL, out, SIZE_MAX, NULL, NULL, err);
}

/* ---- explain ------------------------------------------------------------------- */

/* The draws of sp__pipeline_run_checked(), op by op, without pixels: the
 * same functions are called with the same arguments, and the image size is
 * tracked through the ops as they would change it. */
size_t sp__pipeline_explain(const sp_pipeline *p, const sp_sample_ctx *ctx, int W, int H,
                            sp_format format, char *buf, size_t n) {
    return sp__pipeline_explain_log(p, ctx, W, H, format, NULL, buf, n);
}

size_t sp__pipeline_explain_log(const sp_pipeline *p, const sp_sample_ctx *ctx, int W, int H,
                                sp_format format, const sp_geom_log *log, char *buf, size_t n) {
    sp__fbuf e = {buf, n, 0};
    if (n) buf[0] = '\0';
    if (!p || !ctx) return 0;
    sp_sample_src file = {0};   /* sp__source_scale() only asks whether there is one */
    sp__source s = {W, H, &file, NULL, format, p->channels, p->dct, NULL, {0, NULL, 0}};
    sp__op_explain x = {&e, p, ctx, log, &s, W, H};
    for (int k = 0; k < p->nops; k++) {
        const sp_op *op = &p->ops[k];
        int first = k;
        s.W = x.W;
        s.H = x.H;
        if (op->desc->explain) k = op->desc->explain(&x, op, k);
        else sp__fbuf_printf(&e, "%d %s: no draw\n", k, op->desc->name);
        /* Only the op right after decode reads the file (start_encoded():
         * at a DCT scale if it reads a region); every op after it reads an
         * image decoded at 1/1 or made by the ops before. */
        if (!(p->has_decode && first == 0)) s.src = NULL;
    }
    return e.len;
}
