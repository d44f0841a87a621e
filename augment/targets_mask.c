/* targets_mask.c - instance masks rasterised from COCO segmentations and
 * moved through a sample's geometry log (include/seedpipe/masks.h states
 * the formulas; docs/pipeline.md "Moving a mask"; the Python reference is
 * bindings/python/tests/masks_ref.py).
 *
 * HOW IT WORKS:
 * - A polygon: its vertices upsampled by 5 and rounded as pycocotools does
 *   ((int)(5 v + 0.5)), each edge walked one upsampled pixel at a time
 *   along its longer axis (the other coordinate (int)(start + slope * t +
 *   0.5)), and every step that changes the upsampled column and lands on a
 *   pixel column centre of the mask gives a toggle at the column-major
 *   position x * h + ceil(y). The toggles are sorted; the mask is 1 from
 *   each toggle of odd multiplicity to the next (that is what pycocotools'
 *   run-length encoding of the sorted positions decodes to, duplicate
 *   positions cancelling in pairs). Polygons of one annotation are ORed.
 * - RLE: runs in column-major order, zeros first (the compressed string
 *   form is decoded by common/mask_rle.c).
 * - Warping: one step at a time into a scratch buffer (at most two live),
 *   each output pixel taking one source pixel (masks.h); a rotation or an
 *   affine step through the image's own binary32 theta, nearest.
 */
#include "seedpipe/masks.h"
#include "common/vec_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "augment/masks_internal.h"
#include "augment/ops_internal.h"

typedef struct tog { uint64_t *a; size_t n, cap; } tog;

static int tog_push(tog *t, uint64_t v) {
    return SP__VEC_PUSH(t->a, t->n, t->cap, 1024, v) != 0 ? SP_ENOMEM : SP_OK;
}

/* The walk's state: the previous upsampled boundary point. */
typedef struct walk { int have, pu, pv; int h, w; tog *t; } walk;

static int visit(walk *k, int u, int v) {
    int rc = SP_OK;
    if (k->have && u != k->pu) {
        double xd = (double)(u < k->pu ? u : u - 1);
        xd = (xd + 0.5) / 5.0 - 0.5;
        if (floor(xd) == xd && xd >= 0 && xd <= (double)(k->w - 1)) {
            double yd = (double)(v < k->pv ? v : k->pv);
            yd = (yd + 0.5) / 5.0 - 0.5;
            yd = yd < 0 ? 0 : yd > (double)k->h ? (double)k->h : yd;
            yd = ceil(yd);
            rc = tog_push(k->t, (uint64_t)xd * (uint64_t)k->h + (uint64_t)yd);
        }
    }
    k->have = 1;
    k->pu = u;
    k->pv = v;
    return rc;
}

/* One edge (xs, ys) -> (xe, ye) in upsampled pixels. */
static int edge(walk *k, int xs, int ys, int xe, int ye) {
    int dx = abs(xe - xs), dy = abs(ye - ys);
    int flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
        int t = xs; xs = xe; xe = t;
        t = ys; ys = ye; ye = t;
    }
    int rc = SP_OK;
    if (dx >= dy) {
        double s = dx ? (double)(ye - ys) / dx : 0.0;   /* a repeated point: never read */
        for (int d = 0; d <= dx && !rc; d++) {
            int t = flip ? dx - d : d;
            rc = visit(k, t + xs, dx ? (int)((double)ys + s * t + 0.5) : ys);
        }
    } else {
        double s = (double)(xe - xs) / dy;
        for (int d = 0; d <= dy && !rc; d++) {
            int t = flip ? dy - d : d;
            rc = visit(k, (int)((double)xs + s * t + 0.5), t + ys);
        }
    }
    return rc;
}

static int by_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* OR into mask the runs the sorted toggles describe. */
static void paint_toggles(tog *t, int h, int w, uint8_t *mask) {
    if (t->n) qsort(t->a, t->n, sizeof *t->a, by_u64);   /* t->a may be NULL when empty */
    uint64_t total = (uint64_t)h * (uint64_t)w;
    int on = 0;
    uint64_t from = 0;
    for (size_t i = 0; i <= t->n; i++) {
        uint64_t p = i < t->n ? t->a[i] : total;
        if (p > total) p = total;
        if (on)
            for (uint64_t q = from; q < p; q++) mask[(q % (uint64_t)h) * (uint64_t)w + q / h] = 1;
        if (i < t->n) {
            on = !on;
            from = p;
        }
    }
}

static int mask_dims_ok(int h, int w) {
    return h > 0 && w > 0 && (uint64_t)h * (uint64_t)w <= SP_MASK_MAX_PIXELS;
}

static int one_polygon(const double *xy, uint32_t n, int h, int w, uint64_t *steps, tog *t,
                       const char *what, sp_error *err) {
    int ux[2], uy[2], fx = 0, fy = 0;
    walk k = {0, 0, 0, h, w, t};
    for (uint32_t j = 0; j <= n; j++) {
        uint32_t q = j < n ? j : 0;
        double x = xy[2 * q], y = xy[2 * q + 1];
        if (!isfinite(x) || !isfinite(y) || fabs(x) > SP_MASK_MAX_COORD ||
            fabs(y) > SP_MASK_MAX_COORD)
            return sp_error_set(err, SP_EFORMAT, "%s: a polygon coordinate is not a finite "
                                "number within 2^24", what);
        ux[j & 1] = (int)(5.0 * x + 0.5);
        uy[j & 1] = (int)(5.0 * y + 0.5);
        if (j == 0) {
            fx = ux[0];
            fy = uy[0];
            continue;
        }
        int xs = ux[(j - 1) & 1], ys = uy[(j - 1) & 1], xe = j < n ? ux[j & 1] : fx,
            ye = j < n ? uy[j & 1] : fy;
        int dx = abs(xe - xs), dy = abs(ye - ys);
        *steps += (uint64_t)(dx > dy ? dx : dy) + 1;
        if (*steps > SP_MASK_MAX_BOUNDARY)
            return sp_error_set(err, SP_ELIMIT, "%s: polygon boundary longer than 2^28 "
                                "upsampled pixels", what);
        if (edge(&k, xs, ys, xe, ye))
            return sp_error_set(err, SP_ENOMEM, "%s: out of memory", what);
    }
    return SP_OK;
}

int sp__mask_polygons(const double *xy, const uint32_t *npts, uint32_t npoly, int h, int w,
                      uint8_t *mask, const char *what, sp_error *err) {
    if (!mask_dims_ok(h, w))
        return sp_error_set(err, SP_ELIMIT, "%s: mask of %dx%d pixels (at most 2^28)", what, w, h);
    if (npoly > SP_MASK_MAX_POLYGONS)
        return sp_error_set(err, SP_ELIMIT, "%s: %u polygons (at most %d)", what, npoly,
                            SP_MASK_MAX_POLYGONS);
    uint64_t steps = 0;
    size_t at = 0;
    int rc = SP_OK;
    for (uint32_t i = 0; i < npoly && !rc; i++) {
        if (npts[i] < 3 || npts[i] > SP_MASK_MAX_POINTS)
            return sp_error_set(err, npts[i] < 3 ? SP_EFORMAT : SP_ELIMIT, "%s: polygon %u has "
                                "%u points (3 to %d)", what, i, npts[i], SP_MASK_MAX_POINTS);
        tog t = {NULL, 0, 0};
        rc = one_polygon(xy + 2 * at, npts[i], h, w, &steps, &t, what, err);
        if (!rc) paint_toggles(&t, h, w, mask);
        free(t.a);
        at += npts[i];
    }
    return rc;
}

int sp__mask_rle(const uint32_t *counts, size_t m, int h, int w, uint8_t *mask, const char *what,
                 sp_error *err) {
    if (!mask_dims_ok(h, w))
        return sp_error_set(err, SP_ELIMIT, "%s: mask of %dx%d pixels (at most 2^28)", what, w, h);
    if (m > SP_MASK_MAX_COUNTS)
        return sp_error_set(err, SP_ELIMIT, "%s: %zu RLE counts (at most 2^24)", what, m);
    uint64_t total = (uint64_t)h * (uint64_t)w, sum = 0;
    for (size_t i = 0; i < m; i++) sum += counts[i];
    if (sum != total)
        return sp_error_set(err, SP_EFORMAT, "%s: RLE counts add up to %llu, the mask has "
                            "%dx%d = %llu pixels", what, (unsigned long long)sum, h, w,
                            (unsigned long long)total);
    uint64_t p = 0;
    for (size_t i = 0; i < m; i++) {
        uint8_t v = (uint8_t)(i & 1);
        for (uint32_t q = 0; q < counts[i]; q++, p++)
            mask[(p % (uint64_t)h) * (uint64_t)w + p / (uint64_t)h] = v;
    }
    return SP_OK;
}

/* PyTorch's nearest source index (UpSample.h nearest_idx, float32). */
static int64_t nearest(int64_t d, int64_t in, int64_t out) {
    if (in == out) return d;
    if (out == 2 * in) return d >> 1;
    float scale = (float)in / (float)out;
    int64_t s = (int64_t)floorf((float)d * scale);
    return s < in - 1 ? s : in - 1;
}

static int64_t round_extent(int out, double sc) { return (int64_t)floor((double)out / sc + 0.5); }

static void warp_axis(const sp_geom_step *g, const uint8_t *src, uint8_t fill, uint8_t *dst) {
    int64_t ex = round_extent(g->out_w, g->sx), ey = round_extent(g->out_h, g->sy);
    int64_t x0 = (int64_t)floor(g->x0), y0 = (int64_t)floor(g->y0);
    for (int i = 0; i < g->out_h; i++) {
        int64_t sy = y0 + nearest(i, ey, g->out_h);
        uint8_t *d = dst + (size_t)i * (size_t)g->out_w;
        if (sy < 0 || sy >= g->in_h) {
            memset(d, fill, (size_t)g->out_w);
            continue;
        }
        const uint8_t *s = src + (size_t)sy * (size_t)g->in_w;
        for (int j = 0; j < g->out_w; j++) {
            int64_t sx = x0 + nearest(j, ex, g->out_w);
            d[j] = sx >= 0 && sx < g->in_w ? s[sx] : fill;
        }
    }
}

static void warp_step(const sp_geom_step *g, const uint8_t *src, uint8_t fill, uint8_t *dst) {
    const size_t W = (size_t)g->in_w, H = (size_t)g->in_h;
    if (g->kind == SP_GEOM_AXIS) {
        warp_axis(g, src, fill, dst);
    } else if (g->kind == SP_GEOM_HFLIP) {
        for (size_t i = 0; i < H; i++)
            for (size_t j = 0; j < W; j++) dst[i * W + j] = src[i * W + (W - 1 - j)];
    } else if (g->kind == SP_GEOM_VFLIP) {
        for (size_t i = 0; i < H; i++) memcpy(dst + i * W, src + (H - 1 - i) * W, W);
    } else {   /* ROTATE, AFFINE: the image's theta, nearest */
        float th[6] = {(float)g->c, (float)g->s, 0.0f, (float)-g->s, (float)g->c, 0.0f};
        if (g->kind == SP_GEOM_AFFINE) memcpy(th, g->th, sizeof th);
        float f[3] = {(float)fill, (float)fill, (float)fill};
        sp_image a = {g->in_w, g->in_h, 1, W, (uint8_t *)(uintptr_t)src};
        sp_image b = {g->in_w, g->in_h, 1, W, dst};
        sp__image_affine(&a, th, 0, f, &b);
    }
}

int sp__mask_warp(const sp_geom_log *log, const uint8_t *src, uint8_t fill, uint8_t *out,
                  sp_error *err) {
    int W = log->src_w, H = log->src_h;
    if (log->n == 0) {
        memcpy(out, src, (size_t)W * (size_t)H);
        return SP_OK;
    }
    size_t most = 1;
    for (int i = 0; i < log->n; i++) {
        const sp_geom_step *g = &log->step[i];
        int axis = g->kind == SP_GEOM_AXIS, known = axis || g->kind == SP_GEOM_HFLIP ||
                                                 g->kind == SP_GEOM_VFLIP ||
                                                 g->kind == SP_GEOM_ROTATE ||
                                                 g->kind == SP_GEOM_AFFINE;
        if (!known || g->in_w != W || g->in_h != H || g->out_w <= 0 || g->out_h <= 0 ||
            (axis ? !(g->sx > 0 && g->sy > 0) : g->out_w != W || g->out_h != H))
            return sp_error_set(err, SP_EINVAL, "mask: geometry step %d is not a known step "
                                "that follows the one before it", i);
        W = g->out_w;
        H = g->out_h;
        size_t b = (size_t)W * (size_t)H;
        most = b > most ? b : most;
    }
    uint8_t *buf[2] = {malloc(most), malloc(most)};
    if (!buf[0] || !buf[1]) {
        free(buf[0]);
        free(buf[1]);
        return sp_error_set(err, SP_ENOMEM, "mask: out of memory");
    }
    const uint8_t *cur = src;
    for (int i = 0; i < log->n; i++) {
        uint8_t *d = i == log->n - 1 ? out : buf[i & 1];
        warp_step(&log->step[i], cur, fill, d);
        cur = d;
    }
    free(buf[0]);
    free(buf[1]);
    return SP_OK;
}
