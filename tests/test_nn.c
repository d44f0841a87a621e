/* test_nn.c - the CPU reference layers of the training core.
 *
 * Each layer's forward against a float64 reference written here, and its
 * backward against central finite differences of that float64 reference;
 * softmax cross-entropy against a double computation; the deterministic
 * exp/log against libm (tests may use libm); the fixed summation tree's
 * exact shape; init reproducible, seed-dependent and within its bound; the
 * whole model's gradient against finite differences; 1, 2 and 3 CPU
 * threads give bit-identical weights after several SGD steps.
 * Cases (tests/runner.h), each in its own process: test_detmath, test_tree,
 * test_conv, test_conv_order, test_pool_relu, test_linear, test_softmax,
 * test_init, test_model_grad, test_threads, test_step_reference,
 * test_isa_levels (sets SEEDPIPE_ISA in its own process only), test_errors.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runner.h"
#include "train/nn_math.h"
#include "train/train_internal.h"   /* sp_nn_sgd_update: the reference step */
#include "seedpipe/model.h"
#include "seedpipe/philox.h"
#include "seedpipe/train.h"
#include "train/model_internal.h"

/* Deterministic test data in [-1, 1). */
static void fill(float *v, size_t n, uint32_t tag) {
    sp_key k = sp_rng_key(1234, tag);
    for (size_t i = 0; i < n; i++) {
        sp_ctr c = {{(uint32_t)i, 0, 0, 0}};
        v[i] = (float)(2.0 * sp_u01d(sp_philox4x32_10(c, k).c[0]) - 1.0);
    }
}

static double relerr(double a, double b) {
    return fabs(a - b) / (fabs(a) + fabs(b) + 1e-3);
}

/* ---- float64 references -------------------------------------------------------- */

static void conv_ref(const double *x, int cin, int h, int w, const double *wt, const double *b,
                     int cout, double *y) {
    for (int o = 0; o < cout; o++)
        for (int i = 0; i < h; i++)
            for (int j = 0; j < w; j++) {
                double s = b[o];
                for (int c = 0; c < cin; c++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int ii = i + ky - 1, jj = j + kx - 1;
                            if (ii < 0 || jj < 0 || ii >= h || jj >= w) continue;
                            s += wt[((o * cin + c) * 3 + ky) * 3 + kx] * x[(c * h + ii) * w + jj];
                        }
                y[(o * h + i) * w + j] = s;
            }
}

/* Objective sum_k y[k] * r[k] of a conv with double inputs. */
static double conv_obj(const double *x, int cin, int h, int w, const double *wt, const double *b,
                       int cout, const double *r) {
    double *y = malloc(sizeof(double) * (size_t)(cout * h * w));
    conv_ref(x, cin, h, w, wt, b, cout, y);
    double s = 0;
    for (int k = 0; k < cout * h * w; k++) s += y[k] * r[k];
    free(y);
    return s;
}

static double *to_d(const float *v, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = v[i];
    return d;
}

static void test_conv(void) {
    enum { CI = 2, H = 5, W = 6, CO = 3 };
    float x[CI * H * W], wt[CO * CI * 9], b[CO], y[CO * H * W], r[CO * H * W];
    float dx[CI * H * W], dw[CO * CI * 9], db[CO];
    fill(x, CI * H * W, 10);
    fill(wt, CO * CI * 9, 11);
    fill(b, CO, 12);
    fill(r, CO * H * W, 13);
    float *scr = malloc(sp__nn_conv3x3_scratch(CI, H, W, CO) * sizeof(float));
    sp__nn_conv3x3_forward(x, CI, H, W, wt, b, CO, y, scr);
    double *xd = to_d(x, CI * H * W), *wd = to_d(wt, CO * CI * 9), *bd = to_d(b, CO),
           *rd = to_d(r, CO * H * W), yd[CO * H * W];
    conv_ref(xd, CI, H, W, wd, bd, CO, yd);
    for (int k = 0; k < CO * H * W; k++) CHECK(fabs(y[k] - yd[k]) < 1e-5);
    sp__nn_conv3x3_backward(x, CI, H, W, wt, CO, r, dx, dw, db, scr);
    const double eps = 1e-6;
    double worst = 0;
    for (int k = 0; k < CI * H * W; k++) {
        double s = xd[k];
        xd[k] = s + eps;
        double fp = conv_obj(xd, CI, H, W, wd, bd, CO, rd);
        xd[k] = s - eps;
        double fm = conv_obj(xd, CI, H, W, wd, bd, CO, rd);
        xd[k] = s;
        double e = relerr(dx[k], (fp - fm) / (2 * eps));
        if (e > worst) worst = e;
    }
    for (int k = 0; k < CO * CI * 9; k++) {
        double s = wd[k];
        wd[k] = s + eps;
        double fp = conv_obj(xd, CI, H, W, wd, bd, CO, rd);
        wd[k] = s - eps;
        double fm = conv_obj(xd, CI, H, W, wd, bd, CO, rd);
        wd[k] = s;
        double e = relerr(dw[k], (fp - fm) / (2 * eps));
        if (e > worst) worst = e;
    }
    for (int k = 0; k < CO; k++) {
        double s = bd[k];
        bd[k] = s + eps;
        double fp = conv_obj(xd, CI, H, W, wd, bd, CO, rd);
        bd[k] = s - eps;
        double fm = conv_obj(xd, CI, H, W, wd, bd, CO, rd);
        bd[k] = s;
        double e = relerr(db[k], (fp - fm) / (2 * eps));
        if (e > worst) worst = e;
    }
    printf("conv3x3: backward vs finite differences, worst rel err %.2e\n", worst);
    CHECK(worst < 1e-4);
    /* Sparse dy (as after ReLU + max-pool; zero terms are skipped): dw and
     * db against the float64 sums, and dw bits against a plain loop over
     * every (i, j) in row-major order that does not skip. */
    for (int k = 0; k < CO * H * W; k++)
        if (k % 4 != 1) r[k] = (k % 8 == 0) ? -0.0f : 0.0f;
    sp__nn_conv3x3_backward(x, CI, H, W, wt, CO, r, dx, dw, db, scr);
    for (int o = 0; o < CO; o++)
        for (int c = 0; c < CI; c++)
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) {
                    double sd = 0;
                    float sf = 0.0f;
                    for (int i = 0; i < H; i++)
                        for (int j = 0; j < W; j++) {
                            int ii = i + ky - 1, jj = j + kx - 1;
                            if (ii < 0 || jj < 0 || ii >= H || jj >= W) continue;
                            float g = r[(o * H + i) * W + j], xv = x[(c * H + ii) * W + jj];
                            sd += (double)g * xv;
                            sf = sf + g * xv;
                        }
                    float got = dw[((o * CI + c) * 3 + ky) * 3 + kx];
                    CHECK(fabs(got - sd) < 1e-5);
                    CHECK(memcmp(&got, &sf, 4) == 0);
                }
    free(xd);
    free(wd);
    free(bd);
    free(rd);
    free(scr);
}

/* The documented per-element order, bit for bit: forward y = b, then
 * + w * x over (c, ky, kx); dx = 0, then + w * dy over (o, ky, kx). */
static void conv_order_case(int ci, int h, int w, int co) {
    size_t nx = (size_t)(ci * h * w), ny = (size_t)(co * h * w), nw = (size_t)(co * ci * 9);
    float *x = malloc(nx * 4), *wt = malloc(nw * 4), *b = malloc((size_t)co * 4),
          *y = malloc(ny * 4), *dy = malloc(ny * 4), *dx = malloc(nx * 4), *dw = malloc(nw * 4),
          *db = malloc((size_t)co * 4);
    fill(x, nx, 70);
    fill(wt, nw, 71);
    fill(b, (size_t)co, 72);
    fill(dy, ny, 73);
    for (size_t k = 0; k < ny; k++)   /* zeros as after ReLU + max-pool, some -0 */
        if (k % 4 != 1) dy[k] = (k % 8 == 0) ? -0.0f : 0.0f;
    float *scr = malloc(sp__nn_conv3x3_scratch(ci, h, w, co) * sizeof(float));
    sp__nn_conv3x3_forward(x, ci, h, w, wt, b, co, y, scr);
    sp__nn_conv3x3_backward(x, ci, h, w, wt, co, dy, dx, dw, db, scr);
    for (int o = 0; o < co; o++)
        for (int i = 0; i < h; i++)
            for (int j = 0; j < w; j++) {
                float s = b[o];
                for (int c = 0; c < ci; c++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int ii = i + ky - 1, jj = j + kx - 1;
                            if (ii < 0 || jj < 0 || ii >= h || jj >= w) continue;
                            s = s + wt[((o * ci + c) * 3 + ky) * 3 + kx] * x[(c * h + ii) * w + jj];
                        }
                CHECK(memcmp(&s, &y[(o * h + i) * w + j], 4) == 0);
            }
    for (int c = 0; c < ci; c++)
        for (int i = 0; i < h; i++)
            for (int j = 0; j < w; j++) {
                float s = 0.0f;
                for (int o = 0; o < co; o++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int oi = i - ky + 1, oj = j - kx + 1;
                            if (oi < 0 || oj < 0 || oi >= h || oj >= w) continue;
                            s = s + wt[((o * ci + c) * 3 + ky) * 3 + kx] * dy[(o * h + oi) * w + oj];
                        }
                CHECK(memcmp(&s, &dx[(c * h + i) * w + j], 4) == 0);
            }
    /* dw = +0, then + dy * x over the valid (i, j) row-major; db = +0 +
     * dy[o][0] + dy[o][1] + ... */
    for (int o = 0; o < co; o++) {
        float sb = 0.0f;
        for (int p = 0; p < h * w; p++) sb = sb + dy[o * h * w + p];
        CHECK(memcmp(&sb, &db[o], 4) == 0);
        for (int c = 0; c < ci; c++)
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) {
                    float sf = 0.0f;
                    for (int i = 0; i < h; i++)
                        for (int j = 0; j < w; j++) {
                            int ii = i + ky - 1, jj = j + kx - 1;
                            if (ii < 0 || jj < 0 || ii >= h || jj >= w) continue;
                            sf = sf + dy[(o * h + i) * w + j] * x[(c * h + ii) * w + jj];
                        }
                    CHECK(memcmp(&sf, &dw[((o * ci + c) * 3 + ky) * 3 + kx], 4) == 0);
                }
    }
    free(x); free(wt); free(b); free(y); free(dy); free(dx); free(dw); free(db); free(scr);
}

/* Shapes that reach every tile and tail of the matrix product (rows: 4, 6,
 * 8, 16 high, leftovers; columns: 2 vectors, 1 vector, scalars) at each
 * SIMD width, and the model's own layers. */
static void test_conv_order(void) {
    conv_order_case(3, 7, 9, 4);
    conv_order_case(2, 4, 4, 3);
    conv_order_case(1, 3, 1, 2);
    conv_order_case(2, 1, 5, 2);
    conv_order_case(16, 14, 14, 5);
    conv_order_case(3, 32, 32, 16);    /* conv1 of the bench model */
    conv_order_case(16, 16, 16, 32);   /* conv2 */
    conv_order_case(1, 9, 13, 16);
    conv_order_case(5, 6, 11, 40);
    conv_order_case(7, 5, 7, 24);
    printf("conv3x3: forward, backward data, weights and bias bit-equal to the documented "
           "loop order\n");
}

static void test_pool_relu(void) {
    enum { C = 2, H = 5, W = 7, HO = 2, WO = 3 };
    float x[C * H * W], y[C * HO * WO], dy[C * HO * WO], dx[C * H * W];
    fill(x, C * H * W, 20);
    fill(dy, C * HO * WO, 21);
    sp__nn_maxpool2_forward(x, C, H, W, y);
    sp__nn_maxpool2_backward(x, C, H, W, dy, dx);
    for (int c = 0; c < C; c++)
        for (int i = 0; i < HO; i++)
            for (int j = 0; j < WO; j++) {
                const float *r0 = x + (c * H + 2 * i) * W + 2 * j, *r1 = r0 + W;
                float m = fmaxf(fmaxf(r0[0], r0[1]), fmaxf(r1[0], r1[1]));
                CHECK(y[(c * HO + i) * WO + j] == m);
            }
    /* float64 reference: objective sum y * dy; derivative by differences. */
    double worst = 0;
    for (int k = 0; k < C * H * W; k++) {
        double f[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            double xd[C * H * W];
            for (int q = 0; q < C * H * W; q++) xd[q] = x[q];
            xd[k] += sgn ? -1e-6 : 1e-6;
            double s = 0;
            for (int c = 0; c < C; c++)
                for (int i = 0; i < HO; i++)
                    for (int j = 0; j < WO; j++) {
                        double m = -1e300;
                        for (int a = 0; a < 2; a++)
                            for (int bb = 0; bb < 2; bb++) {
                                double v = xd[(c * H + 2 * i + a) * W + 2 * j + bb];
                                if (v > m) m = v;
                            }
                        s += m * dy[(c * HO + i) * WO + j];
                    }
            f[sgn] = s;
        }
        double e = fabs(dx[k] - (f[0] - f[1]) / 2e-6);
        if (e > worst) worst = e;
    }
    printf("maxpool2 (5x7, odd edges dropped): backward vs finite differences, worst abs err %.2e\n",
           worst);
    CHECK(worst < 1e-6);
    /* The last row and column (not in any window) get zero gradient. */
    for (int c = 0; c < C; c++) {
        for (int j = 0; j < W; j++) CHECK(dx[(c * H + H - 1) * W + j] == 0.0f);
        for (int i = 0; i < H; i++) CHECK(dx[(c * H + i) * W + W - 1] == 0.0f);
    }
    /* Ties: the first maximum in (0,0) (0,1) (1,0) (1,1) order takes it. */
    float t[4] = {1, 1, 1, 1}, tg[1] = {5}, tdx[4];
    sp__nn_maxpool2_backward(t, 1, 2, 2, tg, tdx);
    CHECK(tdx[0] == 5 && tdx[1] == 0 && tdx[2] == 0 && tdx[3] == 0);
    /* ReLU */
    float rx[4] = {-1.5f, 0.0f, 2.0f, -0.0f}, ry[4], rdy[4] = {1, 2, 3, 4}, rdx[4];
    sp__nn_relu_forward(rx, 4, ry);
    sp__nn_relu_backward(ry, rdy, 4, rdx);
    CHECK(ry[0] == 0 && ry[1] == 0 && ry[2] == 2 && ry[3] == 0);
    CHECK(rdx[0] == 0 && rdx[1] == 0 && rdx[2] == 3 && rdx[3] == 0);
}

static void test_linear(void) {
    enum { NI = 7, NO = 4 };
    float x[NI], wt[NO * NI], b[NO], y[NO], r[NO], dx[NI], dw[NO * NI], db[NO];
    fill(x, NI, 30);
    fill(wt, NO * NI, 31);
    fill(b, NO, 32);
    fill(r, NO, 33);
    sp__nn_linear_forward(x, NI, wt, b, NO, y);
    sp__nn_linear_backward(x, NI, wt, NO, r, dx, dw, db);
    double worst = 0;
    for (int o = 0; o < NO; o++) {
        double s = b[o];
        for (int i = 0; i < NI; i++) s += (double)wt[o * NI + i] * x[i];
        CHECK(fabs(s - y[o]) < 1e-6);
        CHECK(db[o] == r[o]);
        for (int i = 0; i < NI; i++) {
            double e = relerr(dw[o * NI + i], (double)r[o] * x[i]);   /* d/dw of sum r*y */
            if (e > worst) worst = e;
        }
    }
    for (int i = 0; i < NI; i++) {
        double s = 0;
        for (int o = 0; o < NO; o++) s += (double)wt[o * NI + i] * r[o];
        double e = relerr(dx[i], s);
        if (e > worst) worst = e;
    }
    printf("linear: backward vs float64 derivative, worst rel err %.2e\n", worst);
    CHECK(worst < 1e-5);
    /* Forward bits: b[o], then + w * x in i order (outputs run four at a
     * time; 7 outputs reach the leftover path). */
    enum { NI2 = 300, NO2 = 7 };
    float x2[NI2], w2[NO2 * NI2], b2[NO2], y2[NO2];
    fill(x2, NI2, 34);
    fill(w2, NO2 * NI2, 35);
    fill(b2, NO2, 36);
    sp__nn_linear_forward(x2, NI2, w2, b2, NO2, y2);
    for (int o = 0; o < NO2; o++) {
        float sf = b2[o];
        for (int i = 0; i < NI2; i++) sf = sf + w2[o * NI2 + i] * x2[i];
        CHECK(memcmp(&sf, &y2[o], 4) == 0);
    }
}

static void test_softmax(void) {
    enum { K = 6 };
    float z[K], d[K];
    fill(z, K, 40);
    for (int j = 0; j < K; j++) z[j] *= 8.0f;
    for (int label = 0; label < K; label++) {
        float loss = sp__nn_softmax_xent(z, K, label, 0.25f, d);
        double m = z[0], s = 0;
        for (int j = 1; j < K; j++) m = z[j] > m ? z[j] : m;
        for (int j = 0; j < K; j++) s += exp((double)z[j] - m);
        double ref = log(s) - ((double)z[label] - m);
        CHECK_MSG(relerr(loss, ref) < 1e-6, "loss %.9g ref %.9g", (double)loss, ref);
        for (int j = 0; j < K; j++) {
            double p = exp((double)z[j] - m) / s;
            double g = ((j == label) ? p - 1.0 : p) * 0.25;
            CHECK(fabs(d[j] - g) < 1e-7);
        }
    }
    /* Large logits do not overflow. */
    float big[3] = {1000.0f, -1000.0f, 999.0f};
    float lb = sp__nn_softmax_xent(big, 3, 2, 1.0f, NULL);
    CHECK(fabs(lb - (log(1.0 + exp(-1.0)) + 1.0)) < 1e-5);
    printf("softmax cross-entropy: matches float64 within 1e-6 relative\n");
}

static void test_detmath(void) {
    double worst = 0;
    for (int i = 0; i < 200000; i++) {
        double x = -700.0 * (double)i / 200000.0 - 1e-7 * (i % 7);
        double e = fabs(sp__nn_exp_f(x) - exp(x)) / exp(x);
        if (e > worst) worst = e;
    }
    double worstl = 0;
    for (int i = 0; i < 200000; i++) {
        double x = 1.0 + (double)i * 0.37;
        double e = fabs(sp__nn_log_f(x) - log(x)) / (log(x) + 1e-300);
        if (i && e > worstl) worstl = e;
    }
    CHECK(sp__nn_log_f(1.0) == 0.0);
    CHECK(sp__nn_exp_f(0.0) == 1.0);
    CHECK(sp__nn_exp_f(-800.0) == 0.0);
    printf("exp/log: worst rel err vs libm %.2e / %.2e\n", worst, worstl);
    CHECK(worst < 4e-16 && worstl < 4e-16);
}

static void test_tree(void) {
    float v[5] = {1e8f, 1.0f, -1e8f, 3.0f, 0.5f};
    /* n = 3: (v0 + v1) + v2;  n = 5: ((v0 + v1) + (v2 + v3)) + v4 */
    float e3 = (v[0] + v[1]) + v[2];
    float e5 = ((v[0] + v[1]) + (v[2] + v[3])) + v[4];
    CHECK(sp__nn_tree_sum_f(v, 3, 1) == e3);
    CHECK(sp__nn_tree_sum_f(v, 5, 1) == e5);
    CHECK(sp__nn_tree_sum_f(v, 0, 1) == 0.0f);
    float big[1000];
    for (int i = 0; i < 1000; i++) big[i] = (float)i;
    CHECK(sp__nn_tree_sum_f(big, 1000, 1) == 499500.0f);
    CHECK(sp__nn_tree_sum_f(big, 500, 2) == 249500.0f);   /* even entries */
    printf("tree sum: fixed shape checked\n");
}

static void test_init(void) {
    sp_model_shape s = {3, 32, 32, 6};
    sp_model_layout l;
    sp_error err;
    CHECK_OK(sp_model_layout_of(&s, &l, &err), &err);
    CHECK(l.nparams == 16 * 27 + 16 + 32 * 144 + 32 + 6 * 2048 + 6);
    float *a = malloc(l.nparams * 4), *b = malloc(l.nparams * 4), *c = malloc(l.nparams * 4);
    sp__model_init(&l, 7, a);
    sp__model_init(&l, 7, b);
    sp__model_init(&l, 8, c);
    CHECK(memcmp(a, b, l.nparams * 4) == 0);
    size_t differ = 0;
    for (size_t i = 0; i < l.nparams; i++) differ += a[i] != c[i];
    CHECK(differ > l.nparams / 2);
    double b1 = 1.0 / sqrt(27.0), mean = 0;
    for (size_t i = l.off[SP_T_CONV1_W]; i < l.off[SP_T_CONV1_W + 1]; i++) {
        CHECK(fabs(a[i]) <= b1);
        mean += a[i];
    }
    for (size_t i = l.off[SP_T_CONV1_B]; i < l.off[SP_T_CONV1_B + 1]; i++) CHECK(a[i] == 0.0f);
    for (size_t i = l.off[SP_T_FC_W]; i < l.off[SP_T_FC_W + 1]; i++)
        CHECK(fabs(a[i]) <= 1.0 / sqrt(2048.0));
    CHECK(fabs(mean / 432.0) < 0.1);
    /* The documented counter layout: element 5 of conv2.w (tensor 2) is
     * word 1 of philox((1, 2, 0, 0), K_init). */
    sp_ctr ctr = {{1, 2, 0, 0}};
    sp_ctr o = sp_philox4x32_10(ctr, sp_rng_key(7, SP_RNG_INIT));
    double bound2 = 1.0 / sqrt(144.0);
    CHECK(a[l.off[SP_T_CONV2_W] + 5] == (float)((2.0 * sp_u01d(o.c[1]) - 1.0) * bound2));
    printf("init: reproducible, seed-dependent, within bounds, documented counters\n");
    free(a);
    free(b);
    free(c);
}

/* The whole model's gradient (one sample) against float finite differences. */
static void test_model_grad(void) {
    sp_model_shape s = {1, 8, 8, 3};
    sp_model_layout l;
    sp_error err;
    CHECK_OK(sp_model_layout_of(&s, &l, &err), &err);
    float *p = malloc(l.nparams * 4), *g = malloc(l.nparams * 4), *ws = malloc(l.workspace * 4);
    double *pd = malloc(l.nparams * sizeof(double));
    sp__model_init(&l, 3, p);
    for (size_t i = l.off[SP_T_CONV1_B]; i < l.off[SP_T_CONV1_B + 1]; i++) p[i] = 0.1f;
    for (size_t i = l.off[SP_T_CONV2_B]; i < l.off[SP_T_CONV2_B + 1]; i++) p[i] = 0.05f;
    float x[64];
    fill(x, 64, 50);
    sp__model_sample_grad(&l, p, x, 1, 1.0f, ws, g, NULL);
    int checked = 0, ok = 0;
    for (size_t i = 0; i < l.nparams; i += 37) {
        float save = p[i];
        double h = 1e-2;
        p[i] = (float)(save + h);
        double fp = sp__model_sample_forward(&l, p, x, 1, ws, NULL);
        p[i] = (float)(save - h);
        double fm = sp__model_sample_forward(&l, p, x, 1, ws, NULL);
        p[i] = save;
        double fd = (fp - fm) / (2 * h);
        checked++;
        ok += fabs(fd - g[i]) < 2e-3 + 5e-2 * fabs(fd);
    }
    printf("model gradient: %d of %d sampled parameters match finite differences\n", ok, checked);
    CHECK(ok >= checked * 9 / 10);   /* a few may straddle a ReLU/max-pool kink */
    free(p);
    free(g);
    free(ws);
    free(pd);
}

static sp_digest train_digest(int threads, uint32_t batch) {
    sp_train_config cfg;
    sp_train_config_default(&cfg);
    cfg.seed = 11;
    cfg.shape = (sp_model_shape){3, 16, 16, 4};
    cfg.threads = threads;
    sp_trainer *tr;
    sp_error err;
    CHECK_OK(sp_trainer_create(&cfg, &tr, &err), &err);
    size_t n = (size_t)batch * 3 * 16 * 16;
    float *x = malloc(n * 4);
    int32_t lab[64];
    for (int step = 0; step < 5; step++) {
        fill(x, n, 60 + (uint32_t)step);
        for (uint32_t i = 0; i < batch; i++) lab[i] = (int32_t)((i * 7 + (uint32_t)step) % 4);
        float loss;
        CHECK_OK(sp__trainer_step(tr, x, lab, batch, &loss, NULL, &err), &err);
        CHECK(loss > 0 && loss < 10);
    }
    sp_digest d;
    CHECK_OK(sp_trainer_weights_digest(tr, &d, &err), &err);
    CHECK(sp_trainer_steps(tr) == 5);
    free(x);
    sp_trainer_destroy(tr);
    return d;
}

static void test_threads(void) {
    for (uint32_t batch = 7; batch <= 16; batch += 9) {
        sp_digest d1 = train_digest(1, batch), d2 = train_digest(2, batch),
                  d3 = train_digest(3, batch);
        char h[33];
        sp_digest_hex(d1, h);
        printf("threads 1/2/3, batch %u: weights digest %s\n", batch, h);
        CHECK(d1.hi == d2.hi && d1.lo == d2.lo);
        CHECK(d1.hi == d3.hi && d1.lo == d3.lo);
    }
}

/* The CPU backend's step, bit for bit, against its definition (model_cpu.c):
 * per-sample gradients (sp__model_sample_grad, scale 1/B), each parameter's
 * batch gradient the fixed tree over the samples (sp_nn_tree_sum), then
 * sp_nn_sgd_update. The backend forms fc.w's per-sample terms inside its
 * reduction and runs the tree on many parameters at once; this checks that
 * it is still the same arithmetic. Two steps (momentum non-zero in the
 * second), 2 threads, batch sizes that are not powers of two, more than 32
 * classes (fc.b spans two lane blocks). */
static void step_reference_case(sp_model_shape shape, uint32_t batch) {
    sp_train_config cfg;
    sp_train_config_default(&cfg);
    cfg.seed = 5;
    cfg.shape = shape;
    cfg.threads = 2;
    sp_trainer *tr;
    sp_error err;
    CHECK_OK(sp_trainer_create(&cfg, &tr, &err), &err);
    const sp_model_layout *l = sp_trainer_layout(tr);
    size_t P = l->nparams, sample = (size_t)shape.c * (size_t)shape.h * (size_t)shape.w;
    float *w = malloc(P * 4), *m = calloc(P, 4), *g = malloc((size_t)batch * P * 4),
          *ws = malloc(l->workspace * 4), *x = malloc((size_t)batch * sample * 4),
          *col = malloc(batch * 4), *tw = malloc(P * 4), *tm = malloc(P * 4);
    int32_t *lab = malloc(batch * 4);
    sp__model_init(l, cfg.seed, w);
    for (int step = 0; step < 2; step++) {
        fill(x, (size_t)batch * sample, 80 + (uint32_t)step);
        for (uint32_t i = 0; i < batch; i++)
            lab[i] = (int32_t)((i * 5 + (uint32_t)step) % (uint32_t)shape.classes);
        CHECK_OK(sp__trainer_step(tr, x, lab, batch, NULL, NULL, &err), &err);
        for (uint32_t s = 0; s < batch; s++)
            sp__model_sample_grad(l, w, x + s * sample, lab[s], 1.0f / (float)batch, ws,
                                  g + (size_t)s * P, NULL);
        for (size_t p = 0; p < P; p++) {
            for (uint32_t s = 0; s < batch; s++) col[s] = g[(size_t)s * P + p];
            float gp = sp__nn_tree_sum_f(col, (long)batch, 1);
            sp_nn_sgd_update(&w[p], &m[p], gp, cfg.lr, cfg.momentum, cfg.weight_decay);
        }
        CHECK_OK(sp_trainer_get_params(tr, tw, tm, &err), &err);
        size_t bad = 0;
        for (size_t p = 0; p < P; p++) bad += memcmp(&w[p], &tw[p], 4) != 0 || memcmp(&m[p], &tm[p], 4) != 0;
        CHECK_MSG(bad == 0, "%zu of %zu parameters differ from the reference step %d", bad, P, step);
    }
    sp_trainer_destroy(tr);
    free(w); free(m); free(g); free(ws); free(x); free(col); free(tw); free(tm); free(lab);
}

static void test_step_reference(void) {
    step_reference_case((sp_model_shape){3, 16, 16, 4}, 7);
    step_reference_case((sp_model_shape){1, 12, 20, 37}, 13);
    printf("cpu step: bit-equal to per-sample gradients + sp_nn_tree_sum + SGD\n");
}

/* Every SIMD level of the convolutions (nn_cpu.c: SEEDPIPE_ISA caps it)
 * gives the documented bits and the same trained weights. */
static void test_isa_levels(void) {
    static const struct { const char *name, *cpu; } levels[] = {
        {"sse2", "sse2"}, {"avx2", "avx2"}, {"avx512", "avx512f"}};
    sp_digest ref = {0, 0};
    int ran = 0;
    for (int i = 0; i < 3; i++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        int have = i == 0 ? 1 : i == 1 ? __builtin_cpu_supports("avx2")
                                       : __builtin_cpu_supports("avx512f");
#else
        int have = i == 0;   /* one portable level: the cap changes nothing */
#endif
        if (!have) {
            printf("level %s: not on this CPU, not run\n", levels[i].name);
            continue;
        }
        setenv("SEEDPIPE_ISA", levels[i].name, 1);
#if defined(__x86_64__) || defined(__i386__)
        CHECK_MSG(!strcmp(sp__nn_conv_isa(), levels[i].name), "level %s runs as %s",
                  levels[i].name, sp__nn_conv_isa());
#endif
        test_conv_order();
        sp_digest d = train_digest(2, 16);
        char h[33];
        sp_digest_hex(d, h);
        printf("level %s: weights digest %s\n", levels[i].name, h);
        if (ran == 0) ref = d;
        CHECK_MSG(d.hi == ref.hi && d.lo == ref.lo, "level %s gives other weights than sse2",
                  levels[i].name);
        ran++;
    }
    unsetenv("SEEDPIPE_ISA");
    printf("conv3x3: %d SIMD level(s) give identical bits\n", ran);
}

static void test_errors(void) {
    sp_train_config cfg;
    sp_train_config_default(&cfg);
    cfg.shape = (sp_model_shape){2, 16, 16, 4};
    sp_trainer *tr;
    sp_error err;
    CHECK(sp_trainer_create(&cfg, &tr, &err) == SP_EINVAL);
    cfg.shape.c = 1;
    cfg.lr = -1;
    CHECK(sp_trainer_create(&cfg, &tr, &err) == SP_EINVAL);
    /* Without CUDA built: SP_EUNSUPP; built but no device here: SP_EIO. */
    cfg.lr = 0.1f;
    cfg.device = SP_DEVICE_CUDA;
    int rc = sp_trainer_create(&cfg, &tr, &err);
    if (rc == 0) {
        sp_trainer_destroy(tr);
    } else {
        printf("device cuda refused: %s\n", err.msg);
        CHECK(rc == SP_EUNSUPP || rc == SP_EIO);
    }
    /* Strict mode refuses a non-deterministic algorithm before touching a
     * device (so this runs without a GPU when CUDA is built). */
    cfg.conv_bwd_filter_algo = 0;
    rc = sp_trainer_create(&cfg, &tr, &err);
    CHECK(rc == SP_EUNSUPP);
    printf("strict, backward filter ALGO_0: %s\n", err.msg);
    CHECK(strstr(err.msg, "BWD_FILTER_ALGO_0") || strstr(err.msg, "without CUDA"));
    cfg.conv_bwd_filter_algo = SP_ALGO_DEFAULT;
    cfg.fast = 1;
    rc = sp_trainer_create(&cfg, &tr, &err);
    CHECK(rc == SP_EUNSUPP);
    CHECK(strstr(err.msg, "fast") || strstr(err.msg, "without CUDA"));
}

static const sp_case cases[] = {
    SP_CASE(test_detmath),
    SP_CASE(test_tree),
    SP_CASE(test_conv),
    SP_CASE(test_conv_order),
    SP_CASE(test_pool_relu),
    SP_CASE(test_linear),
    SP_CASE(test_softmax),
    SP_CASE(test_init),
    SP_CASE(test_model_grad),
    SP_CASE(test_threads),
    SP_CASE(test_step_reference),
    SP_CASE(test_isa_levels),
    SP_CASE(test_errors),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}
