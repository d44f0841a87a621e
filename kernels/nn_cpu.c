/* nn_cpu.c - the CPU reference layers of the training core (one sample, CHW).
 *
 * Plain loops with a fixed accumulation order (written next to each function
 * in seedpipe/model.h), compiled with -ffp-contract=off so no multiply-add
 * is fused: the same inputs give the same bits with any compiler that
 * honours IEEE-754 single precision. Convolution forward and backward data
 * are a 3x3 stencil applied one input plane at a time, vectorised along a
 * row (each output element still gets its terms in the documented order;
 * tests/test_nn.c checks the bits against plain loops); the weight
 * gradient keeps each tap's sum in (i, j) order but interleaves the taps
 * and channels, and skips zero dy. Per-element arithmetic that the CUDA
 * kernels share (ReLU, pool window, softmax row, sums) comes from
 * nn_math.h.
 */
/* The hot loops are elementwise along a row or fixed-order chains: -O3's
 * vectoriser speeds them up about 2x without changing any result (no
 * reassociation without -ffast-math, no contraction with
 * -ffp-contract=off), so this file asks for it whatever the build type. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("O3")
#endif
#include "seedpipe/model.h"

#include <string.h>

#include "kernels/nn_math.h"

/* One plane of a 3x3 stencil, accumulated:
 *   out(i, j) = out(i, j) + k[0] * in(p0) + k[1] * in(p1) + ... + k[8] * in(p8)
 * left to right, tap t = 3 * ky + kx reading in(i + ky - 1, j + kx - 1)
 * (flip = 0: convolution forward) or in(i + 1 - ky, j + 1 - kx) (flip = 1:
 * backward data), taps outside the plane left out. Leaving a tap out gives
 * the same bits as adding its zero-padding term k * 0 = +-0, because the
 * accumulators here (a bias, or +0) are never -0. Interior rows run one
 * vectorisable pass along the row; each element still gets its terms in
 * tap order. */
static float stencil_edge(const float *out, const float *in, int h, int w, const float *k,
                          int flip, int i, int j) {
    float s = out[(size_t)i * (size_t)w + j];
    for (int ky = 0; ky < 3; ky++) {
        int ii = flip ? i + 1 - ky : i + ky - 1;
        if (ii < 0 || ii >= h) continue;
        for (int kx = 0; kx < 3; kx++) {
            int jj = flip ? j + 1 - kx : j + kx - 1;
            if (jj < 0 || jj >= w) continue;
            s = s + k[ky * 3 + kx] * in[(size_t)ii * (size_t)w + jj];
        }
    }
    return s;
}

static void stencil3x3(float *out, const float *in, int h, int w, const float *k, int flip) {
    const float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6],
                k7 = k[7], k8 = k[8];
    for (int i = 0; i < h; i++) {
        float *o = out + (size_t)i * (size_t)w;
        if (i == 0 || i == h - 1 || w < 3) {
            for (int j = 0; j < w; j++) o[j] = stencil_edge(out, in, h, w, k, flip, i, j);
            continue;
        }
        o[0] = stencil_edge(out, in, h, w, k, flip, i, 0);
        const float *rm = in + (size_t)(i - 1) * (size_t)w, *r0 = rm + w, *rp = r0 + w;
        if (!flip) {
            for (int j = 1; j < w - 1; j++)
                o[j] = o[j] + k0 * rm[j - 1] + k1 * rm[j] + k2 * rm[j + 1] + k3 * r0[j - 1] +
                       k4 * r0[j] + k5 * r0[j + 1] + k6 * rp[j - 1] + k7 * rp[j] + k8 * rp[j + 1];
        } else {
            for (int j = 1; j < w - 1; j++)
                o[j] = o[j] + k0 * rp[j + 1] + k1 * rp[j] + k2 * rp[j - 1] + k3 * r0[j + 1] +
                       k4 * r0[j] + k5 * r0[j - 1] + k6 * rm[j + 1] + k7 * rm[j] + k8 * rm[j - 1];
        }
        o[w - 1] = stencil_edge(out, in, h, w, k, flip, i, w - 1);
    }
}

void sp_nn_conv3x3_forward(const float *x, int cin, int h, int w, const float *wt,
                           const float *bias, int cout, float *y) {
    size_t hw = (size_t)h * (size_t)w;
    for (int o = 0; o < cout; o++) {
        float *yo = y + (size_t)o * hw;
        for (size_t p = 0; p < hw; p++) yo[p] = bias[o];
        for (int c = 0; c < cin; c++)
            stencil3x3(yo, x + (size_t)c * hw, h, w, wt + ((size_t)o * (size_t)cin + (size_t)c) * 9,
                       0);
    }
}

void sp_nn_conv3x3_backward(const float *x, int cin, int h, int w, const float *wt, int cout,
                            const float *dy, float *dx, float *dw, float *db) {
    size_t hw = (size_t)h * (size_t)w;
    for (int o = 0; o < cout; o++) db[o] = sp_nn_seq_sum(dy + (size_t)o * hw, (long)hw);
    /* dw: per (o, c, ky, kx) a sequential sum, from +0, over the valid
     * (i, j) in row-major order. Terms with dy == 0 are skipped: adding
     * g * x = +-0 to a sum that started at +0 never changes its bits (the
     * sum is never -0) as long as x is finite, and after ReLU + max-pool
     * backward at least 3/4 of dy is zero. The loop runs (i, j) outside and
     * (c, ky, kx) inside, so consecutive additions go to different
     * accumulators (no latency chain); each accumulator still receives its
     * terms in (i, j) order. */
    size_t wsz = (size_t)cout * (size_t)cin * 9;
    memset(dw, 0, wsz * sizeof *dw);
    for (int o = 0; o < cout; o++) {
        const float *dyo = dy + (size_t)o * hw;
        float *dwo = dw + (size_t)o * (size_t)cin * 9;
        for (int i = 0; i < h; i++) {
            int ky0 = i == 0 ? 1 : 0, ky1 = i == h - 1 ? 2 : 3;
            for (int j = 0; j < w; j++) {
                float g = dyo[(size_t)i * (size_t)w + j];
                if (g == 0.0f) continue;
                int kx0 = j == 0 ? 1 : 0, kx1 = j == w - 1 ? 2 : 3;
                /* element (i + ky - 1, j + kx - 1) of channel c */
                size_t base = (size_t)(i + ky0 - 1) * (size_t)w + (size_t)(j + kx0 - 1);
                if (ky0 == 0 && ky1 == 3 && kx0 == 0 && kx1 == 3) {   /* interior */
                    for (int c = 0; c < cin; c++) {
                        const float *xp = x + (size_t)c * hw + base;
                        float *sk = dwo + (size_t)c * 9;
                        sk[0] = sk[0] + g * xp[0];
                        sk[1] = sk[1] + g * xp[1];
                        sk[2] = sk[2] + g * xp[2];
                        sk[3] = sk[3] + g * xp[w];
                        sk[4] = sk[4] + g * xp[w + 1];
                        sk[5] = sk[5] + g * xp[w + 2];
                        sk[6] = sk[6] + g * xp[2 * w];
                        sk[7] = sk[7] + g * xp[2 * w + 1];
                        sk[8] = sk[8] + g * xp[2 * w + 2];
                    }
                    continue;
                }
                for (int c = 0; c < cin; c++) {
                    const float *xp = x + (size_t)c * hw + base;
                    float *sk = dwo + (size_t)c * 9;
                    for (int ky = ky0; ky < ky1; ky++)
                        for (int kx = kx0; kx < kx1; kx++)
                            sk[ky * 3 + kx] = sk[ky * 3 + kx] +
                                              g * xp[(size_t)(ky - ky0) * (size_t)w + (size_t)(kx - kx0)];
                }
            }
        }
    }
    if (!dx) return;
    /* dx[c][i'][j'] accumulates w * dy over (o, ky, kx) in that order. */
    memset(dx, 0, (size_t)cin * hw * sizeof *dx);
    for (int o = 0; o < cout; o++)
        for (int c = 0; c < cin; c++)
            stencil3x3(dx + (size_t)c * hw, dy + (size_t)o * hw, h, w,
                       wt + ((size_t)o * (size_t)cin + (size_t)c) * 9, 1);
}

void sp_nn_relu_forward(const float *x, size_t n, float *y) {
    for (size_t i = 0; i < n; i++) y[i] = sp_nn_relu(x[i]);
}

void sp_nn_relu_backward(const float *y, const float *dy, size_t n, float *dx) {
    for (size_t i = 0; i < n; i++) dx[i] = sp_nn_relu_grad(y[i], dy[i]);
}

void sp_nn_maxpool2_forward(const float *x, int c, int h, int w, float *y) {
    int ho = h / 2, wo = w / 2;
    for (int ch = 0; ch < c; ch++) {
        const float *xc = x + (size_t)ch * (size_t)h * (size_t)w;
        float *yc = y + (size_t)ch * (size_t)ho * (size_t)wo;
        for (int i = 0; i < ho; i++)
            for (int j = 0; j < wo; j++) {
                const float *r0 = xc + (size_t)(2 * i) * (size_t)w + 2 * j, *r1 = r0 + w;
                int a = sp_nn_pool_argmax(r0[0], r0[1], r1[0], r1[1]);
                yc[(size_t)i * (size_t)wo + j] = (a < 2 ? r0 : r1)[a & 1];
            }
    }
}

void sp_nn_maxpool2_backward(const float *x, int c, int h, int w, const float *dy, float *dx) {
    /* The same values as the CUDA gather (each input checks its window):
     * here each window is checked once and writes its four inputs; the
     * odd last row/column (in no window) gets 0. */
    int ho = h / 2, wo = w / 2;
    memset(dx, 0, (size_t)c * (size_t)h * (size_t)w * sizeof *dx);
    for (int ch = 0; ch < c; ch++) {
        const float *xc = x + (size_t)ch * (size_t)h * (size_t)w;
        const float *dyc = dy + (size_t)ch * (size_t)ho * (size_t)wo;
        float *dxc = dx + (size_t)ch * (size_t)h * (size_t)w;
        for (int i = 0; i < ho; i++)
            for (int j = 0; j < wo; j++) {
                size_t p = (size_t)(2 * i) * (size_t)w + 2 * (size_t)j;
                const float *r0 = xc + p, *r1 = r0 + w;
                int a = sp_nn_pool_argmax(r0[0], r0[1], r1[0], r1[1]);
                dxc[p + (size_t)(a >> 1) * (size_t)w + (size_t)(a & 1)] =
                    dyc[(size_t)i * (size_t)wo + j];
            }
    }
}

void sp_nn_linear_forward(const float *x, int nin, const float *wt, const float *bias, int nout,
                          float *y) {
    for (int o = 0; o < nout; o++) {
        const float *wr = wt + (size_t)o * (size_t)nin;
        float s = bias[o];
        for (int i = 0; i < nin; i++) s = s + wr[i] * x[i];
        y[o] = s;
    }
}

void sp_nn_linear_backward(const float *x, int nin, const float *wt, int nout, const float *dy,
                           float *dx, float *dw, float *db) {
    for (int o = 0; o < nout; o++) {
        float g = dy[o];
        float *dwr = dw + (size_t)o * (size_t)nin;
        for (int i = 0; i < nin; i++) dwr[i] = g * x[i];
        db[o] = g;
    }
    if (!dx) return;
    for (int i = 0; i < nin; i++) dx[i] = 0.0f;
    for (int o = 0; o < nout; o++) {
        const float *wr = wt + (size_t)o * (size_t)nin;
        float g = dy[o];
        for (int i = 0; i < nin; i++) dx[i] = dx[i] + wr[i] * g;
    }
}

float sp_nn_softmax_xent(const float *logits, int k, int label, float scale, float *dlogits) {
    return sp_nn_softmax_xent_row(logits, k, label, scale, dlogits);
}

float sp_nn_tree_sum_f(const float *v, long n, long stride) { return sp_nn_tree_sum(v, n, stride); }
double sp_nn_exp_f(double x) { return sp_nn_exp_neg(x); }
double sp_nn_log_f(double x) { return sp_nn_log_pos(x); }
