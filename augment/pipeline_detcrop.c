/* pipeline_detcrop.c - the detection ops random_zoom_out and
 * random_iou_crop (torchvision v2's RandomZoomOut and RandomIoUCrop, the
 * SSD recipe): their values in the spec, canonical form, draws, their run
 * on the current image, their lines of `seedpipe explain` and their
 * descriptors. docs/pipeline.md documents the ops, every draw word and the
 * bounded retries.
 *
 *   random_zoom_out fill=V|R,G,B side_range=lo,hi p=P
 *   random_iou_crop min_scale= max_scale= min_aspect_ratio=
 *                   max_aspect_ratio= sampler_options=a,b,.. trials=T
 *                   attempts=A
 *
 * HOW IT WORKS: random_zoom_out pads the image with the fill onto a canvas
 * side times larger (block 0). random_iou_crop is the one op whose
 * geometry depends on the targets: it reads the sample's boxes as they are
 * at that point (the annotation moved and clipped through the steps logged
 * so far, sp__targets_visible()) and searches, as torchvision, for a crop
 * with at least one box centred in it whose IoU with the crop reaches a
 * drawn threshold. torchvision loops until it finds one; here attempt a
 * (an option draw, then `trials` crop draws) reads its own counters
 * (block a << 16 for the option, (a << 16) | (t + 1) for trial t), there
 * are at most `attempts` attempts, and when none succeeds the image is
 * kept as it is (the stated fallback). Both ops change the size, so a
 * fixed-size op must follow them (sp__pipeline_output_dims()).
 */
#include "augment/pipeline_internal.h"

#include <stdlib.h>
#include <string.h>
#include "common/common_internal.h"

#define MAX_OPTIONS 16
#define MAX_SIDE 16.0          /* random_zoom_out: the largest side_range */
#define MAX_TRIES 1000         /* trials and attempts */

static int num_in(const char *v, double lo, double hi, double *out) {
    return sp__parse_num(v, out) && *out >= lo && *out <= hi;
}

static int int_in(const char *v, int lo, int hi, int *out) {
    double d;
    if (!sp__parse_num(v, &d) || !(d >= lo && d <= hi) || d != (double)(int)d) return 0;
    *out = (int)d;
    return 1;
}

/* fill= side_range= p= (RandomZoomOut's defaults: 0, 1,4, 0.5). */
static int zoom_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                      sp_error *err) {
    op->nfill = 1;
    op->scale[0] = 1.0;
    op->scale[1] = 4.0;
    op->p = 0.5;
    if (vals[0]) {
        double s[3];
        int n, ok = sp__parse_list(vals[0], s, 3, &n) && n != 2 && (n == 1 || p->channels == 3);
        for (int i = 0; ok && i < n; i++) ok = s[i] >= 0 && s[i] <= 255 && s[i] == (int)s[i];
        if (!ok)
            return sp__op_bad(err, idx, op, "fill", vals[0], p->channels == 3 ? "V or R,G,B: "
                       "integers in [0, 255]" : "V: an integer in [0, 255] (gray pipeline)");
        op->nfill = n;
        for (int i = 0; i < 3; i++) op->fill[i] = (uint8_t)s[i < n ? i : 0];
    }
    if (vals[1]) {
        double s[2];
        int n;
        if (!sp__parse_list(vals[1], s, 2, &n) || n != 2 || !(s[0] >= 1.0) || !(s[0] <= s[1]) ||
            s[1] > MAX_SIDE)
            return sp__op_bad(err, idx, op, "side_range", vals[1], "lo,hi with 1 <= lo <= hi <= 16");
        op->scale[0] = s[0];
        op->scale[1] = s[1];
    }
    if (vals[2] && !num_in(vals[2], 0.0, 1.0, &op->p))
        return sp__op_bad(err, idx, op, "p", vals[2], "a number in [0, 1]");
    return SP_OK;
}

/* min_scale= max_scale= min_aspect_ratio= max_aspect_ratio=
 * sampler_options= trials= attempts= (RandomIoUCrop's defaults, and
 * seedpipe's bound on its loop). */
static int iou_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                     sp_error *err) {
    (void)p;
    static const double OPTS[] = {0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0};
    op->scale[0] = 0.3;
    op->scale[1] = 1.0;
    op->ratio[0] = 0.5;
    op->ratio[1] = 2.0;
    op->niou = 7;
    memcpy(op->iou_opts, OPTS, sizeof OPTS);
    op->trials = 40;
    op->attempts = 100;
    if (vals[0] && !num_in(vals[0], 1e-6, 1.0, &op->scale[0]))
        return sp__op_bad(err, idx, op, "min_scale", vals[0], "a number in (0, 1]");
    if (vals[1] && (!num_in(vals[1], 1e-6, 1.0, &op->scale[1]) || op->scale[1] < op->scale[0]))
        return sp__op_bad(err, idx, op, "max_scale", vals[1], "a number in [min_scale, 1]");
    if (op->scale[1] < op->scale[0])
        return sp__op_bad(err, idx, op, "min_scale", vals[0], "at most max_scale");
    if (vals[2] && !num_in(vals[2], 1e-6, 1e6, &op->ratio[0]))
        return sp__op_bad(err, idx, op, "min_aspect_ratio", vals[2], "a number in (0, 1e6]");
    if (vals[3] && (!num_in(vals[3], 1e-6, 1e6, &op->ratio[1]) || op->ratio[1] < op->ratio[0]))
        return sp__op_bad(err, idx, op, "max_aspect_ratio", vals[3], "a number in "
                   "[min_aspect_ratio, 1e6]");
    if (op->ratio[1] < op->ratio[0])
        return sp__op_bad(err, idx, op, "min_aspect_ratio", vals[2], "at most max_aspect_ratio");
    if (vals[4]) {
        int ok = sp__parse_list(vals[4], op->iou_opts, MAX_OPTIONS, &op->niou);
        for (int i = 0; ok && i < op->niou; i++) ok = op->iou_opts[i] >= 0 && op->iou_opts[i] <= 1;
        if (!ok)
            return sp__op_bad(err, idx, op, "sampler_options", vals[4], "1 to 16 minimum IoUs in "
                       "[0, 1], comma-separated (1: keep the image)");
    }
    if (vals[5] && !int_in(vals[5], 1, MAX_TRIES, &op->trials))
        return sp__op_bad(err, idx, op, "trials", vals[5], "an integer in [1, 1000]");
    if (vals[6] && !int_in(vals[6], 1, MAX_TRIES, &op->attempts))
        return sp__op_bad(err, idx, op, "attempts", vals[6], "an integer in [1, 1000]");
    return SP_OK;
}

static void zoom_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "random_zoom_out fill=%d", op->fill[0]);
    if (op->nfill == 3) sp__sbuf_printf(b, ",%d,%d", op->fill[1], op->fill[2]);
    sp__sbuf_printf(b, " side_range=%.9g,%.9g p=%.9g", op->scale[0], op->scale[1], op->p);
}

static void iou_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "random_iou_crop min_scale=%.9g max_scale=%.9g min_aspect_ratio=%.9g "
                    "max_aspect_ratio=%.9g sampler_options=", op->scale[0], op->scale[1],
                    op->ratio[0], op->ratio[1]);
    for (int i = 0; i < op->niou; i++) sp__sbuf_printf(b, "%s%.9g", i ? "," : "", op->iou_opts[i]);
    sp__sbuf_printf(b, " trials=%d attempts=%d", op->trials, op->attempts);
}

/* ---- draws ------------------------------------------------------------------ */

typedef struct zoom { int on, cw, ch, left, top; float r; double u; } zoom;

/* random_zoom_out, block 0: c[0] applies iff u01 < p; c[1] the side r =
 * lo + (hi - lo) u01 in binary32; the canvas (int)(W * r) x (int)(H * r)
 * (binary32 products, truncated); c[2], c[3] the image's offset
 * (int)((cw - W) * u01) and (int)((ch - H) * u01). */
static void draw_zoom(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int W, int H,
                      zoom *z) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    z->u = sp_u01d(d.c[0]);
    z->on = z->u < op->p;
    z->r = (float)op->scale[0] + (float)(op->scale[1] - op->scale[0]) * sp_u01f(d.c[1]);
    z->cw = (int)((float)W * z->r);
    z->ch = (int)((float)H * z->r);
    z->left = (int)((float)(z->cw - W) * sp_u01f(d.c[2]));
    z->top = (int)((float)(z->ch - H) * sp_u01f(d.c[3]));
}

enum { REJ_EMPTY, REJ_ASPECT, REJ_CENTRE, REJ_IOU };

typedef struct iou_pick {
    int crop;              /* 1: crop (x, y, w, h); 0: the image is kept */
    int x, y, w, h;
    int attempt, trial;    /* the deciding attempt and trial (attempt == attempts: fallback) */
    double thr, best;      /* the option drawn; the best IoU of a box centred in the crop */
    int centred;           /* boxes centred in the crop */
} iou_pick;

/* One trial (block (a << 16) | (t + 1)): c[0], c[1] the scales of the width
 * and the height, lo + (hi - lo) u01 in binary32, w = (int)(W * rw),
 * h = (int)(H * rh); c[2], c[3] the offset (int)((W - w) u01) and
 * (int)((H - h) u01). Returns the rejection, or -1 when accepted. */
static int one_trial(const sp_op *op, sp_ctr d, int W, int H, const double *vis, int n,
                     double thr, iou_pick *pk) {
    float span = (float)(op->scale[1] - op->scale[0]), lo = (float)op->scale[0];
    int w = (int)((float)W * (lo + span * sp_u01f(d.c[0])));
    int h = (int)((float)H * (lo + span * sp_u01f(d.c[1])));
    if (w <= 0 || h <= 0) return REJ_EMPTY;
    double ar = (double)w / (double)h;
    if (!(op->ratio[0] <= ar && ar <= op->ratio[1])) return REJ_ASPECT;
    int x = (int)((float)(W - w) * sp_u01f(d.c[2])), y = (int)((float)(H - h) * sp_u01f(d.c[3]));
    double cx0 = x, cy0 = y, cx1 = (double)x + w, cy1 = (double)y + h, ca = (double)w * h;
    double best = -1.0;
    int centred = 0;
    for (int i = 0; i < n; i++) {
        const double *b = vis + 4 * i;
        double mx = 0.5 * (b[0] + b[2]), my = 0.5 * (b[1] + b[3]);
        if (!(cx0 < mx && mx < cx1 && cy0 < my && my < cy1)) continue;
        centred++;
        double iw = (b[2] < cx1 ? b[2] : cx1) - (b[0] > cx0 ? b[0] : cx0);
        double ih = (b[3] < cy1 ? b[3] : cy1) - (b[1] > cy0 ? b[1] : cy0);
        double inter = iw > 0 && ih > 0 ? iw * ih : 0.0;
        double iou = inter / (((b[2] - b[0]) * (b[3] - b[1]) + ca) - inter);
        if (iou > best) best = iou;
    }
    if (!centred) return REJ_CENTRE;
    if (best < thr) return REJ_IOU;
    *pk = (iou_pick){1, x, y, w, h, 0, 0, thr, best, centred};
    return -1;
}

/* random_iou_crop's decision for boxes vis (n x 4, at this point) on a
 * W x H image; e (may be NULL) gets one line per failed attempt. */
static void decide_iou(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int W, int H,
                       const double *vis, int n, iou_pick *pk, sp__fbuf *e) {
    memset(pk, 0, sizeof *pk);
    for (uint32_t a = 0; a < (uint32_t)op->attempts; a++) {
        sp_ctr d = sp_sample_draw(ctx->k_augment, a << 16, k, ctx->sample, ctx->epoch);
        double thr = op->iou_opts[sp_uniform_int(d.c[0], (uint32_t)op->niou)];
        pk->attempt = (int)a;
        pk->thr = thr;
        if (thr >= 1.0) return;   /* the option that keeps the image */
        int rej[4] = {0, 0, 0, 0};
        for (uint32_t t = 0; t < (uint32_t)op->trials; t++) {
            sp_ctr c = sp_sample_draw(ctx->k_augment, (a << 16) | (t + 1), k, ctx->sample,
                                      ctx->epoch);
            int r = one_trial(op, c, W, H, vis, n, thr, pk);
            if (r < 0) {
                pk->attempt = (int)a;
                pk->trial = (int)t;
                return;
            }
            rej[r]++;
        }
        if (e)
            sp__fbuf_printf(e, "    attempt %u option %.9g: %d trials rejected (%d empty, %d "
                            "aspect, %d no box centred, %d IoU below)\n", a, thr, op->trials,
                            rej[0], rej[1], rej[2], rej[3]);
    }
    pk->attempt = op->attempts;   /* the fallback: the image is kept */
}

/* The boxes at step `upto` of log (NULL when there are none). */
static double *boxes_at(const sp_geom_log *log, int upto, int *n) {
    *n = log->targets ? (int)log->targets->n : 0;
    if (!*n) return NULL;
    double *vis = malloc((size_t)*n * 4 * sizeof *vis);
    if (vis) sp__targets_visible(log, upto, log->targets, vis);
    return vis;
}

/* ---- run and explain --------------------------------------------------------- */

static void push_axis(sp_geom_log *log, int k, int W, int H, int ow, int oh, int x0, int y0) {
    sp_geom_step g;
    memset(&g, 0, sizeof g);
    g.kind = SP_GEOM_AXIS;
    g.op = k;
    g.in_w = W;
    g.in_h = H;
    g.out_w = ow;
    g.out_h = oh;
    g.x0 = x0;
    g.y0 = y0;
    g.sx = g.sy = 1.0;
    sp__geom_push(log, &g);
}

/* out = the w x h window of cur at (x, y) over a canvas of fill (the
 * window may reach past cur: zoom out places cur at (-x, -y)). */
static int window(const sp_image *cur, int x, int y, int w, int h, const uint8_t fill[3],
                  sp_image *out) {
    int rc = sp__image_alloc(out, w, h, cur->channels);
    if (rc) return rc;
    const int C = cur->channels;
    for (int r = 0; r < h; r++) {
        uint8_t *d = out->data + (size_t)r * out->stride;
        int sy = y + r;
        for (int c = 0; c < w; c++) {
            int sx = x + c;
            const uint8_t *s = sy >= 0 && sy < cur->height && sx >= 0 && sx < cur->width
                                   ? cur->data + (size_t)sy * cur->stride + (size_t)sx * C
                                   : fill;
            memcpy(d + (size_t)c * C, s, (size_t)C);
        }
    }
    return SP_OK;
}

/* A pending horizontal flip is applied first; out, when made, replaces
 * the image. */
static int zoom_run(sp__op_run *r, const sp_op *op, int k) {
    int rc = sp__st_unflip(r->st);
    if (rc) return sp__op_fail(r, rc);
    const sp_image *cur = &r->st->cur;
    const int W = cur->width, H = cur->height;
    zoom z;
    draw_zoom(op, (uint32_t)k, r->ctx, W, H, &z);
    if (!z.on) return SP_OK;
    if (z.cw > 65535 || z.ch > 65535 || (int64_t)z.cw * z.ch > ((int64_t)1 << 28))
        return sp_error_set(r->err, SP_ELIMIT, "%s: random_zoom_out: a %dx%d canvas for the "
                            "%dx%d image is too large (at most 65535 a side, 2^28 pixels)",
                            r->path, z.cw, z.ch, W, H);
    sp_image out;
    if ((rc = window(cur, -z.left, -z.top, z.cw, z.ch, op->fill, &out)))
        return sp_error_set(r->err, rc, "%s: random_zoom_out: %s", r->path, sp_strerror(rc));
    push_axis(r->st->log, k, W, H, z.cw, z.ch, -z.left, -z.top);
    sp__st_take(r->st, &out);
    return SP_OK;
}

static int iou_run(sp__op_run *r, const sp_op *op, int k) {
    int rc = sp__st_unflip(r->st);
    if (rc) return sp__op_fail(r, rc);
    const sp_image *cur = &r->st->cur;
    sp_geom_log *log = r->st->log;
    const int W = cur->width, H = cur->height;
    if (!log)
        return sp_error_set(r->err, SP_EINVAL, "%s: random_iou_crop decides by the sample's "
                            "boxes: run it with its targets (a loader with annotations)",
                            r->path);
    int n;
    double *vis = boxes_at(log, log->n, &n);
    if (n && !vis)
        return sp_error_set(r->err, SP_ENOMEM, "%s: random_iou_crop: out of memory", r->path);
    iou_pick pk;
    decide_iou(op, (uint32_t)k, r->ctx, W, H, vis, n, &pk, NULL);
    free(vis);
    if (!pk.crop) {   /* kept: an identity step, so explain finds the op in the log */
        push_axis(log, k, W, H, W, H, 0, 0);
        return SP_OK;
    }
    static const uint8_t zero[3] = {0, 0, 0};
    sp_image out;
    if ((rc = window(cur, pk.x, pk.y, pk.w, pk.h, zero, &out)))
        return sp_error_set(r->err, rc, "%s: random_iou_crop: %s", r->path, sp_strerror(rc));
    push_axis(log, k, W, H, pk.w, pk.h, pk.x, pk.y);
    sp__st_take(r->st, &out);
    return SP_OK;
}

/* log: the sample's run, for the attempts; NULL: it names what it cannot
 * know. */
static int iou_explain(sp__op_explain *x, const sp_op *op, int k) {
    sp__fbuf *e = x->e;
    const sp_geom_log *log = x->log;
    int *W = &x->W, *H = &x->H;
    int s = -1;
    for (int i = 0; log && i < log->n && s < 0; i++)
        if (log->step[i].op == k) s = i;
    if (s < 0) {
        sp__fbuf_printf(e, "%d random_iou_crop: decided by the sample's boxes (explain it with "
                        "its annotations); the size after it is not known here\n", k);
        return k;
    }
    int n;
    double *vis = boxes_at(log, s, &n);
    if (n && !vis) {
        sp__fbuf_printf(e, "%d random_iou_crop: (out of memory)\n", k);
        return k;
    }
    iou_pick pk;
    sp__fbuf_printf(e, "%d random_iou_crop: %d boxes at this point, %dx%d\n", k, n, *W, *H);
    decide_iou(op, (uint32_t)k, x->ctx, *W, *H, vis, n, &pk, e);
    free(vis);
    if (pk.crop) {
        sp__fbuf_printf(e, "    attempt %d option %.9g: trial %d: crop x=%d y=%d w=%d h=%d of "
                        "%dx%d; %d boxes centred, best IoU %.6f\n", pk.attempt, pk.thr,
                        pk.trial, pk.x, pk.y, pk.w, pk.h, *W, *H, pk.centred, pk.best);
        *W = pk.w;
        *H = pk.h;
    } else if (pk.attempt < op->attempts) {
        sp__fbuf_printf(e, "    attempt %d option %.9g: no crop (the option that keeps the "
                        "image)\n", pk.attempt, pk.thr);
    } else {
        sp__fbuf_printf(e, "    fallback: no crop after %d attempts\n", op->attempts);
    }
    return k;
}

static int zoom_explain(sp__op_explain *x, const sp_op *op, int k) {
    zoom z;
    draw_zoom(op, (uint32_t)k, x->ctx, x->W, x->H, &z);
    if (!z.on) {
        sp__fbuf_printf(x->e, "%d random_zoom_out: not applied (u=%.4f >= p=%g)\n", k, z.u,
                        op->p);
        return k;
    }
    sp__fbuf_printf(x->e, "%d random_zoom_out: canvas %dx%d, image at x=%d y=%d of %dx%d (side "
                    "%.9g, u=%.4f < p=%g)\n", k, z.cw, z.ch, z.left, z.top, x->W, x->H,
                    (double)z.r, z.u, op->p);
    x->W = z.cw;
    x->H = z.ch;
    return k;
}

/* A size drawn by the sample: only a fixed-size op after it fixes the output. */
static void drawn_shape(const sp_op *op, int *w, int *h) {
    (void)op;
    *w = *h = 0;
}

#define DETCROP_FLAGS (SP__OP_NEW_SIZE | SP__OP_MOVES_TARGETS)

const sp__op_desc sp__op_random_zoom_out = {
    "random_zoom_out", {"fill", "side_range", "p", NULL}, 0, DETCROP_FLAGS,
    zoom_parse, zoom_canon, drawn_shape, zoom_run, zoom_explain, NULL};

const sp__op_desc sp__op_random_iou_crop = {
    "random_iou_crop", {"min_scale", "max_scale", "min_aspect_ratio", "max_aspect_ratio",
                        "sampler_options", "trials", "attempts", NULL}, 0,
    DETCROP_FLAGS | SP__OP_NEEDS_TARGETS,
    iou_parse, iou_canon, drawn_shape, iou_run, iou_explain, NULL};
