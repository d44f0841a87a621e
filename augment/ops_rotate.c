/* ops_rotate.c - torchvision's rotate and affine on uint8 tensors
 * (RandomRotation with expand=False and the default centre, RandomAffine,
 * and the shear / translate / rotate of the policy ops; include/seedpipe/
 * ops.h: sp__rotation_theta, sp__affine_theta, sp__image_rotate,
 * sp__image_affine).
 *
 * HOW IT WORKS, following torchvision 0.14's tensor path step by step:
 * 1. theta: the inverse affine matrix of F.rotate(angle) about the image
 *    centre, [[cos r, sin r, 0], [-sin r, cos r, 0]] with r = -angle in
 *    radians, computed in double with the project's own sine and cosine
 *    (below: the angle reduced by quarter turns, exactly, then polynomials
 *    of fixed degree, + - * / only), then rounded to binary32. For
 *    F.affine, torchvision's _get_inverse_affine_matrix step for step in
 *    double (sp__affine_theta), the same sine and cosine, tan = sin / cos.
 * 2. The sampling grid (_gen_affine_grid): for output pixel (i, j),
 *    x = j - (W - 1) / 2, y = i - (H - 1) / 2 (exact), gx = (x * t00 / hw
 *    + y * t01 / hw) + t02 / hw and gy likewise with t1* / hh, hw = 0.5 W,
 *    hh = 0.5 H, every operation in binary32 in that order.
 * 3. grid_sample (align_corners=False, zero padding) as ATen's AVX2 CPU
 *    kernel, which the compiler built with fused multiply-adds:
 *    ix = fmaf(gx + 1, W / 2, -0.5), iy likewise; nearest takes the pixel
 *    at (rint(ix), rint(iy)) (ties to even); bilinear weighs the four
 *    neighbours by (1 - dx)(1 - dy), dx (1 - dy), (1 - dx) dy, dx dy
 *    (dx = ix - floor(ix)) and sums v_nw * w_nw, then fmaf(v, w, sum) for
 *    ne, sw, se in that order, outside pixels 0.
 * 4. The fill, as torchvision's mask channel: nearest: a pixel whose
 *    source is outside is the fill; bilinear: v * m + (1 - m) * fill with
 *    m the interpolated mask. Then round to nearest even and clamp. Without
 *    a fill (torchvision's fill=None, the policy ops' default) grid_sample's
 *    zeros stand: no mask, v alone.
 * LIMITATIONS: torch computes step 2 in a batched matrix product whose
 * order is its BLAS's (measured: the same grid, bit for bit, on the photos
 * tested), and on a CPU without AVX2 torch runs an unfused kernel, which a
 * last bit may separate from this; docs/pipeline.md gives the measured
 * agreement (exact on the photos tested). Before affine and the policy
 * ops, bilinear summed without fused multiply-adds: at most one level
 * apart on about 3e-6 of the values.
 */

#include <math.h>      /* floorf, rintf: exact; fmaf: correctly rounded */
#include <stdlib.h>
#include <string.h>
#include "augment/ops_internal.h"

/* sin and cos of t in [-pi/4, pi/4] by their Taylor polynomials to t^21 /
 * t^20 (error below 1e-18), Horner in double. */
static void sincos_small(double t, double *s, double *c) {
    double t2 = t * t, ps = 0.0, pc = 0.0;
    for (int k = 10; k >= 1; k--) {
        ps = -(1.0 + ps) * t2 / ((2.0 * k) * (2.0 * k + 1.0));
        pc = -(1.0 + pc) * t2 / ((2.0 * k - 1.0) * (2.0 * k));
    }
    *s = t * (1.0 + ps);
    *c = 1.0 + pc;
}

/* sin and cos of deg degrees: reduced by quarter turns (exact for
 * |deg| < 2^24), then the polynomials above. */
static void sincos_deg(double deg, double *s, double *c) {
    double q = floor(deg / 90.0 + 0.5);            /* quarter turns */
    double rem = deg - 90.0 * q;                   /* exact: |deg| < 2^24 */
    sincos_small(rem * (3.14159265358979323846 / 180.0), s, c);
    int n = (int)(q - 4.0 * floor(q / 4.0));       /* 0..3 */
    for (int i = 0; i < n; i++) {                  /* rotate by 90 degrees */
        double t = *s;
        *s = *c;
        *c = -t;
    }
}

void sp__rotation_theta(float angle, float theta[6]) {
    double s, c;
    sincos_deg(-(double)angle, &s, &c);            /* degrees; F.rotate passes -angle */
    theta[0] = (float)c;
    theta[1] = (float)s;
    theta[2] = 0.0f;
    theta[3] = (float)-s;
    theta[4] = (float)c;
    theta[5] = 0.0f;
}

void sp__affine_rss(double angle, double shear_x, double shear_y, double rss[4]) {
    double sr, cr, sd, cd, sy, cy, sx, cx;
    sincos_deg(angle, &sr, &cr);
    sincos_deg(angle - shear_y, &sd, &cd);         /* rot - sy */
    sincos_deg(shear_y, &sy, &cy);
    sincos_deg(shear_x, &sx, &cx);
    double tx = sx / cx;                           /* tan(sx) */
    rss[0] = cd / cy;
    rss[1] = -cd * tx / cy - sr;
    rss[2] = sd / cy;
    rss[3] = -sd * tx / cy + cr;
}

void sp__affine_theta(const double rss[4], double scale, double cx, double cy, double tx,
                      double ty, float theta[6]) {
    double m[6] = {rss[3], -rss[1], 0.0, -rss[2], rss[0], 0.0};
    for (int i = 0; i < 6; i++) m[i] = m[i] / scale;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
    for (int i = 0; i < 6; i++) theta[i] = (float)m[i];
}

static uint8_t to_u8(float v) {
    v = rintf(v);
    return (uint8_t)(v > 0.0f ? (v >= 255.0f ? 255 : (int)v) : 0);   /* NaN: 0 */
}

/* One output pixel from source position (ix, iy). */
static void sample_px(const sp_image *src, float ix, float iy, int bilinear, const float fill[3],
                      uint8_t *d) {
    const int W = src->width, H = src->height, C = src->channels;
    if (!bilinear) {
        float fx = rintf(ix), fy = rintf(iy);
        int in = fx >= 0.0f && fx < (float)W && fy >= 0.0f && fy < (float)H;
        const uint8_t *s = in ? src->data + (size_t)fy * src->stride + (size_t)fx * C : NULL;
        for (int c = 0; c < C; c++) d[c] = s ? s[c] : fill ? to_u8(fill[c]) : 0;
        return;
    }
    float xw = floorf(ix), yn = floorf(iy);
    float w = ix - xw, e = 1.0f - w, n = iy - yn, so = 1.0f - n;
    float wt[4] = {so * e, so * w, n * e, n * w};   /* nw, ne, sw, se */
    const uint8_t *p[4] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < 4; k++) {
        float px = xw + (float)(k & 1), py = yn + (float)(k >> 1);
        if (px >= 0.0f && px < (float)W && py >= 0.0f && py < (float)H)
            p[k] = src->data + (size_t)py * src->stride + (size_t)px * C;
    }
    float m = 0.0f;
    for (int k = 0; k < 4; k++) m = m + (p[k] ? wt[k] : 0.0f);
    for (int c = 0; c < C; c++) {
        /* ATen's AVX2 kernel: nw * w_nw, then fused multiply-adds in order */
        float v = p[0] ? (float)p[0][c] * wt[0] : 0.0f;
        for (int k = 1; k < 4; k++) v = fmaf(p[k] ? (float)p[k][c] : 0.0f, wt[k], v);
        d[c] = to_u8(fill ? v * m + (1.0f - m) * fill[c] : v);
    }
}

int sp__image_rotate(const sp_image *src, float angle, int bilinear, const float fill[3],
                     sp_image *out) {
    float th[6];
    sp__rotation_theta(angle, th);
    return sp__image_affine(src, th, bilinear, fill, out);
}

int sp__image_affine(const sp_image *src, const float th[6], int bilinear, const float *fill,
                     sp_image *out) {
    const int W = src->width, H = src->height;
    if (out->width != W || out->height != H || out->channels != src->channels) return SP_EINVAL;
    float hw = 0.5f * (float)W, hh = 0.5f * (float)H;
    float r00 = th[0] / hw, r10 = th[1] / hw, r20 = th[2] / hw;
    float r01 = th[3] / hh, r11 = th[4] / hh, r21 = th[5] / hh;
    float sx = (float)W / 2.0f, sy = (float)H / 2.0f;
    for (int i = 0; i < H; i++) {
        float y = (float)i - ((float)H * 0.5f - 0.5f);
        uint8_t *d = out->data + (size_t)i * out->stride;
        for (int j = 0; j < W; j++, d += out->channels) {
            float x = (float)j - ((float)W * 0.5f - 0.5f);
            float gx = x * r00 + y * r10;
            gx = gx + r20;
            float gy = x * r01 + y * r11;
            gy = gy + r21;
            sample_px(src, fmaf(gx + 1.0f, sx, -0.5f), fmaf(gy + 1.0f, sy, -0.5f), bilinear, fill,
                      d);
        }
    }
    return SP_OK;
}
