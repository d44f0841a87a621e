/* resize_kernel.c - the Q14 kernels of the resampler (resize.c): for each
 * output coordinate of a window, the first source coordinate it reads, its
 * tap count and its weights. As PIL's ImagingResample: the triangle
 * (bilinear) or Keys' cubic (bicubic, a = -0.5) filter, its support
 * widened by the scale factor on downscale; weights computed in double
 * from + - * / only (a fixed order, no libm), quantised to Q14 (half away
 * from zero) and corrected so each kernel sums to exactly 1 << 14 (the
 * largest weight takes the difference); zero weights at both ends are
 * dropped. The same on every platform; include/seedpipe/ops.h and
 * docs/pipeline.md state the rules.
 */
#include "augment/resize_internal.h"

#include <stdlib.h>
#include <string.h>
#include "augment/ops_internal.h"

typedef sp__rs_kernel kernel;
typedef sp__rs_axis axis;

static double tri(double t) {
    if (t < 0.0) t = -t;
    return t < 1.0 ? 1.0 - t : 0.0;
}

/* PIL's bicubic_filter (Keys' cubic convolution, a = -0.5), term for term. */
static double cubic(double t) {
    const double a = -0.5;
    if (t < 0.0) t = -t;
    if (t < 1.0) return ((a + 2.0) * t - (a + 3.0)) * t * t + 1;
    if (t < 2.0) return (((t - 5) * t + 8) * t - 4) * a;
    return 0.0;
}

static int check_axis(int plane, double b0, double b1, int n_out, int w0, int wn) {
    if (plane <= 0 || n_out <= 0 || wn <= 0 || w0 < 0 || w0 > n_out - wn) return 0;
    if (!(b0 >= 0.0) || !(b1 <= (double)plane) || !(b1 > b0)) return 0;
    return 1;
}

/* Build the kernels of window [w0, w0 + wn) of an axis. dbuf has room for
 * ksize doubles. */
static int build_axis(axis *a, int plane, double b0, double b1, int n_out, int w0,
                      int wn, int filter, double **dbuf, size_t *dcap) {
    double scale = (b1 - b0) / (double)n_out;
    double fs = scale > 1.0 ? scale : 1.0;
    int bicubic = filter == SP_RESAMPLE_BICUBIC;
    double support = bicubic ? 2.0 * fs : fs;   /* support 2 or 1, widened by the scale */
    double ss = 1.0 / fs;
    if (support > 1e6) return SP_EINVAL;
    a->ksize = 2 * (int)support + 3;
    if ((size_t)a->ksize > *dcap) {
        double *nb = realloc(*dbuf, (size_t)a->ksize * sizeof **dbuf);
        if (!nb) return SP_ENOMEM;
        *dbuf = nb;
        *dcap = (size_t)a->ksize;
    }
    a->k = malloc((size_t)wn * sizeof *a->k);
    a->w = malloc((size_t)wn * (size_t)a->ksize * sizeof *a->w);
    if (!a->k || !a->w) return SP_ENOMEM;
    a->single = 1;
    a->contig = 1;
    a->lo = plane;
    a->hi = 0;
    double *kd = *dbuf;
    for (int i = 0; i < wn; i++) {
        double center = b0 + ((double)(w0 + i) + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        int xmax = (int)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > plane) xmax = plane;
        int n = xmax - xmin;
        if (n <= 0 || n > a->ksize) return SP_EINVAL;
        double sum = 0.0;
        for (int x = 0; x < n; x++) {
            double t = ((double)(x + xmin) - center + 0.5) * ss;
            kd[x] = bicubic ? cubic(t) : tri(t);
            sum += kd[x];
        }
        if (!(sum > 0.0)) return SP_EINVAL;
        int32_t *q = a->w + (size_t)i * (size_t)a->ksize;
        int32_t qsum = 0;
        int imax = 0;
        for (int x = 0; x < n; x++) {
            double v = kd[x] / sum * (double)(1 << SP_RESIZE_BITS);
            q[x] = (int32_t)(v < 0.0 ? v - 0.5 : v + 0.5);   /* half away from 0 */
            qsum += q[x];
            if (q[x] > q[imax]) imax = x;
        }
        q[imax] += (1 << SP_RESIZE_BITS) - qsum;
        /* Drop zero weights at both ends. */
        int first = 0, last = n - 1;
        while (first < last && q[first] == 0) first++;
        while (last > first && q[last] == 0) last--;
        if (first > 0) memmove(q, q + first, (size_t)(last - first + 1) * sizeof *q);
        a->k[i].start = xmin + first;
        a->k[i].n = last - first + 1;
        if (a->k[i].n != 1) a->single = 0;
        if (a->k[i].start != a->k[0].start + i) a->contig = 0;
        if (a->k[i].start < a->lo) a->lo = a->k[i].start;
        if (a->k[i].start + a->k[i].n > a->hi) a->hi = a->k[i].start + a->k[i].n;
    }
    return SP_OK;
}

void sp__axis_free(axis *a) {
    free(a->k);
    free(a->w);
}

int sp__axes_build(const sp_resample_geom *g, axis *ax, axis *ay) {
    memset(ax, 0, sizeof *ax);
    memset(ay, 0, sizeof *ay);
    if (!check_axis(g->plane_w, g->bx0, g->bx1, g->out_w, g->win_x, g->win_w) ||
        !check_axis(g->plane_h, g->by0, g->by1, g->out_h, g->win_y, g->win_h) ||
        (g->filter != SP_RESAMPLE_BILINEAR && g->filter != SP_RESAMPLE_BICUBIC))
        return SP_EINVAL;
    double *dbuf = NULL;
    size_t dcap = 0;
    int rc = build_axis(ax, g->plane_w, g->bx0, g->bx1, g->out_w, g->win_x, g->win_w, g->filter,
                        &dbuf, &dcap);
    if (!rc)
        rc = build_axis(ay, g->plane_h, g->by0, g->by1, g->out_h, g->win_y, g->win_h, g->filter,
                        &dbuf, &dcap);
    free(dbuf);
    if (rc) {
        sp__axis_free(ax);
        sp__axis_free(ay);
    }
    return rc;
}

int sp__resample_span(const sp_resample_geom *g, int *x0, int *y0, int *x1, int *y1) {
    axis ax, ay;
    int rc = sp__axes_build(g, &ax, &ay);
    if (rc) return rc;
    *x0 = ax.lo;
    *x1 = ax.hi;
    *y0 = ay.lo;
    *y1 = ay.hi;
    sp__axis_free(&ax);
    sp__axis_free(&ay);
    return SP_OK;
}

int sp__resample_kernel(const sp_resample_geom *g, int vertical, int i, int *start, int *n,
                        int32_t *w, int cap) {
    axis ax, ay;
    int rc = sp__axes_build(g, &ax, &ay);
    if (rc) return rc;
    const axis *a = vertical ? &ay : &ax;
    if (i < 0 || i >= (vertical ? g->win_h : g->win_w)) rc = SP_EINVAL;
    else if (a->k[i].n > cap) rc = SP_ELIMIT;
    if (!rc) {
        *start = a->k[i].start;
        *n = a->k[i].n;
        memcpy(w, a->w + (size_t)i * (size_t)a->ksize, (size_t)*n * sizeof *w);
    }
    sp__axis_free(&ax);
    sp__axis_free(&ay);
    return rc;
}

