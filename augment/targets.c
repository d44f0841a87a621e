/* targets.c - boxes and keypoints moved through a sample's geometry log
 * (include/seedpipe/targets.h; the formulas are docs/pipeline.md
 * "Targets", reproduced by bindings/python/tests/targets_ref.py).
 *
 * HOW IT WORKS: every coordinate is a double from the float32 input; each
 * logged step maps it with the step's formula (below, in this order of
 * operations, no fused multiply-add: the build has -ffp-contract=off), and
 * the result is rounded to float32 once, when written. A box carries its
 * whole rectangle (the annotation clipped to the source image, then moved
 * by every step, never clipped again) and its visible rectangle (moved
 * the same way and clipped to the canvas after every step; empty once its
 * width or height is not positive, and then never revived). The rules of
 * the pipeline's `targets` op decide at the end which boxes are kept.
 */
#include "seedpipe/targets.h"
#include "augment/pipeline_internal.h"

#include <stdio.h>
#include <string.h>
#include "augment/targets_internal.h"

typedef struct rect { double x0, y0, x1, y1; } rect;

/* One point through one step. */
static void map_point(const sp_geom_step *g, double *x, double *y) {
    switch (g->kind) {
    case SP_GEOM_AXIS:
        *x = (*x - g->x0) * g->sx;
        *y = (*y - g->y0) * g->sy;
        break;
    case SP_GEOM_HFLIP: *x = (double)g->in_w - *x; break;
    case SP_GEOM_VFLIP: *y = (double)g->in_h - *y; break;
    case SP_GEOM_AFFINE: {
        double x1 = (g->m[0] * *x + g->m[1] * *y) + g->m[2];
        *y = (g->m[3] * *x + g->m[4] * *y) + g->m[5];
        *x = x1;
        break;
    }
    default: {   /* ROTATE: about the canvas centre, forward map = theta transposed */
        double cx = (double)g->in_w * 0.5, cy = (double)g->in_h * 0.5;
        double dx = *x - cx, dy = *y - cy;
        *x = (g->c * dx - g->s * dy) + cx;
        *y = (g->s * dx + g->c * dy) + cy;
        break;
    }
    }
}

static double dmin(double a, double b) { return b < a ? b : a; }
static double dmax(double a, double b) { return b > a ? b : a; }

/* A rectangle through one step: its four corners (x0,y0), (x1,y0),
 * (x1,y1), (x0,y1), then their bounding box. */
static rect map_rect(const sp_geom_step *g, rect r) {
    double xs[4] = {r.x0, r.x1, r.x1, r.x0}, ys[4] = {r.y0, r.y0, r.y1, r.y1};
    for (int i = 0; i < 4; i++) map_point(g, &xs[i], &ys[i]);
    rect o = {xs[0], ys[0], xs[0], ys[0]};
    for (int i = 1; i < 4; i++) {
        o.x0 = dmin(o.x0, xs[i]);
        o.x1 = dmax(o.x1, xs[i]);
        o.y0 = dmin(o.y0, ys[i]);
        o.y1 = dmax(o.y1, ys[i]);
    }
    return o;
}

/* Clip to [0, W] x [0, H]; 0 when nothing is left. */
static int clip_rect(rect *r, int W, int H) {
    r->x0 = dmax(r->x0, 0.0);
    r->y0 = dmax(r->y0, 0.0);
    r->x1 = dmin(r->x1, (double)W);
    r->y1 = dmin(r->y1, (double)H);
    return r->x1 > r->x0 && r->y1 > r->y0;
}

static int outside(double x, double y, int W, int H) {
    return !(x >= 0.0 && x <= (double)W && y >= 0.0 && y <= (double)H);
}

int sp__targets_visible(const sp_geom_log *log, int upto, const sp_targets *t, double *vis) {
    for (uint32_t i = 0; i < t->n; i++) {
        const float *b = t->boxes + 4 * (size_t)i;
        rect v = {b[0], b[1], b[2], b[3]};
        int alive = clip_rect(&v, log->src_w, log->src_h);
        for (int j = 0; alive && j < upto && j < log->n; j++) {
            v = map_rect(&log->step[j], v);
            alive = clip_rect(&v, log->step[j].out_w, log->step[j].out_h);
        }
        if (!alive) v.x0 = v.y0 = v.x1 = v.y1 = 0.0;
        double *o = vis + 4 * (size_t)i;
        o[0] = v.x0;
        o[1] = v.y0;
        o[2] = v.x1;
        o[3] = v.y1;
    }
    return (int)t->n;
}

enum { FATE_KEPT, FATE_EMPTY, FATE_AREA, FATE_VIS };

/* Does step g mirror the canvas (reverse its orientation)? Then the flip
 * pairs of keypoints swap identities. */
static int mirrors(const sp_geom_step *g) {
    if (g->kind == SP_GEOM_HFLIP || g->kind == SP_GEOM_VFLIP) return 1;
    if (g->kind == SP_GEOM_AFFINE) return g->m[0] * g->m[4] - g->m[1] * g->m[3] < 0.0;
    return g->kind == SP_GEOM_AXIS && g->sx * g->sy < 0.0;
}

/* Swap the (x, y, v) of keypoint j and its partner, for each pair. */
static void swap_pairs(const sp_targets_rules *r, double *kp, int k) {
    for (int j = 0; j < k; j++) {
        int o = r->flip[j];
        if (o <= j || o >= k) continue;
        for (int c = 0; c < 3; c++) {
            double t = kp[3 * j + c];
            kp[3 * j + c] = kp[3 * o + c];
            kp[3 * o + c] = t;
        }
    }
}

/* Step i of the walk: the log's steps [0, upto), then extra (may be NULL). */
static const sp_geom_step *walk_step(const sp_geom_log *log, int upto, const sp_geom_step *extra,
                                     int i) {
    return i < upto ? &log->step[i] : extra;
}

/* One box through steps [0, upto) of the log, then extra (NULL: none):
 * its fate, the rectangle to write, and its keypoints (kp: k x 3, moved in
 * place). */
static int box_walk(const sp_targets_rules *r, const sp_geom_log *log, int upto,
                    const sp_geom_step *extra, const float *b, double *kp, int k, rect *outr,
                    double *area, double *visible) {
    rect whole = {b[0], b[1], b[2], b[3]};
    int alive = clip_rect(&whole, log->src_w, log->src_h);
    rect vis = whole;
    for (int j = 0; j < k; j++)
        if (outside(kp[3 * j], kp[3 * j + 1], log->src_w, log->src_h)) kp[3 * j + 2] = 0.0;
    int n = upto + (extra != NULL);
    for (int i = 0; i < n; i++) {
        const sp_geom_step *g = walk_step(log, upto, extra, i);
        whole = map_rect(g, whole);
        if (alive) {
            vis = map_rect(g, vis);
            alive = clip_rect(&vis, g->out_w, g->out_h);
        }
        for (int j = 0; j < k; j++) {
            map_point(g, &kp[3 * j], &kp[3 * j + 1]);
            if (outside(kp[3 * j], kp[3 * j + 1], g->out_w, g->out_h)) kp[3 * j + 2] = 0.0;
        }
        if (k && r->flip_pairs && mirrors(g)) swap_pairs(r, kp, k);
    }
    *outr = r->clip && alive ? vis : whole;   /* a box left empty: where it went */
    *area = alive ? (vis.x1 - vis.x0) * (vis.y1 - vis.y0) : 0.0;
    double wa = (whole.x1 - whole.x0) * (whole.y1 - whole.y0);
    *visible = alive ? *area / wa : 0.0;
    if (!alive) return FATE_EMPTY;
    if (*area < r->min_area) return FATE_AREA;
    if (*visible < r->min_visibility) return FATE_VIS;
    return FATE_KEPT;
}

static int one_box(const sp_targets_rules *r, const sp_geom_log *log, const float *b, double *kp,
                   int k, rect *outr, double *area, double *visible) {
    return box_walk(r, log, log->n, NULL, b, kp, k, outr, area, visible);
}

int sp__targets_lost(const sp_targets_rules *r, const sp_geom_log *log, int upto,
                     const sp_geom_step *g, int *first, int *why) {
    const sp_targets *t = log->targets;
    int lost = 0;
    *first = -1;
    *why = FATE_KEPT;
    for (uint32_t i = 0; t && i < t->n; i++) {
        const float *b = t->boxes + 4 * (size_t)i;
        rect o;
        double area, visible;
        if (box_walk(r, log, upto, NULL, b, NULL, 0, &o, &area, &visible) != FATE_KEPT)
            continue;   /* not kept before the crop: not the crop's to protect */
        int fate = box_walk(r, log, upto, g, b, NULL, 0, &o, &area, &visible);
        if (fate == FATE_KEPT) continue;
        if (!lost++) {
            *first = (int)i;
            *why = fate;
        }
    }
    return lost;
}

static void fate_line(char *fates, size_t fates_n, uint32_t i, int32_t cat, int fate,
                      const rect *o, double area, double visible) {
    static const char *const NAMES[] = {"kept", "dropped (empty: nothing left in the image)",
                                        "dropped (min_area)", "dropped (min_visibility)"};
    size_t len = strlen(fates);
    if (len + 1 >= fates_n) return;
    snprintf(fates + len, fates_n - len, "box %u cat %d: %s [%.9g %.9g %.9g %.9g] visible %.4f "
             "area %.9g\n", i, cat, NAMES[fate], (double)(float)o->x0, (double)(float)o->y0,
             (double)(float)o->x1, (double)(float)o->y1, visible, area);
}

int sp__targets_apply(const sp_targets_rules *r, const sp_geom_log *log, const sp_targets *t,
                      void *out, sp_targets_stats *st, char *fates, size_t fates_n,
                      const char *path, sp_error *err) {
    const size_t N = (size_t)r->max_boxes, K = (size_t)r->keypoints;
    if (t->n > N)
        return sp_error_set(err, SP_ERANGE, "%s: %u boxes, more than the pipeline's "
                            "max_boxes=%d (targets op)", path, t->n, r->max_boxes);
    if (K && t->k && t->k != K)
        return sp_error_set(err, SP_ERANGE, "%s: %u keypoints per box, the pipeline's targets "
                            "op says keypoints=%d", path, t->k, r->keypoints);
    memset(out, 0, sp__targets_record_bytes(r));
    float *boxes = out, *kps = boxes + 4 * N;
    int32_t *labels = (int32_t *)(kps + 3 * N * K), *counts = labels + N;
    sp_targets_stats s = {0, 0, 0, 0};
    if (fates && fates_n) fates[0] = '\0';
    double kp[3 * SP_TARGETS_MAX_KEYPOINTS];
    for (uint32_t i = 0; i < t->n; i++) {
        for (size_t j = 0; j < K; j++)   /* missing keypoints: (0, 0, visibility 0) */
            for (int c = 0; c < 3; c++)
                kp[3 * j + c] = t->k ? (double)t->keypoints[((size_t)i * K + j) * 3 + c] : 0.0;
        rect o;
        double area, visible;
        int fate = one_box(r, log, t->boxes + 4 * (size_t)i, kp, (int)K, &o, &area, &visible);
        if (fates) fate_line(fates, fates_n, i, t->labels[i], fate, &o, area, visible);
        if (fate == FATE_EMPTY) s.dropped_empty++;
        else if (fate == FATE_AREA) s.dropped_area++;
        else if (fate == FATE_VIS) s.dropped_visibility++;
        if (fate != FATE_KEPT) continue;
        float *bo = boxes + 4 * (size_t)s.kept;
        bo[0] = (float)o.x0;
        bo[1] = (float)o.y0;
        bo[2] = (float)o.x1;
        bo[3] = (float)o.y1;
        for (size_t j = 0; j < 3 * K; j++) kps[(size_t)s.kept * 3 * K + j] = (float)kp[j];
        if (t->kept) t->kept[s.kept] = i;   /* masks follow their boxes (loader_masks.c) */
        labels[s.kept++] = t->labels[i];
    }
    counts[0] = (int32_t)s.kept;
    counts[1] = (int32_t)s.dropped_empty;
    counts[2] = (int32_t)s.dropped_area;
    counts[3] = (int32_t)s.dropped_visibility;
    if (st) *st = s;
    return SP_OK;
}
