/* test_nn_shared.c - the SP_HOSTDEV arithmetic of train/nn_math.h that the
 * CUDA kernels (train/cuda/nn_cuda.cuh) run, tested on the CPU.
 *
 * Every function a kernel calls is covered here, each against an
 * independent reference: sp_nn_relu / _relu_grad (bits, signed zero),
 * sp_nn_pool_argmax (all orders of four distinct values, ties),
 * sp_nn_argmax (first maximum), sp_nn_seq_sum (left-to-right bits),
 * sp_nn_tree_sum and the accumulator sp_nn_tree_init/_push/_value (bits
 * against a recursive definition of the tree, n = 0..300, with strides),
 * sp_nn_exp_neg / sp_nn_log_pos (against libm in double, special values),
 * sp_nn_softmax_xent_row (bits against its documented operation sequence,
 * value against a double reference, dlogits NULL) and sp_nn_sgd_update
 * (bits against the formula). The kernels add only launch geometry, so
 * these are the values a GPU computes, given --fmad=false.
 * Cases (tests/runner.h), one per group above: test_relu, test_pool_argmax,
 * test_argmax, test_seq_sum, test_tree, test_exp_log, test_softmax, test_sgd
 * (each process starts the test data generator from the same seed).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "runner.h"
#include "train/nn_math.h"
#include "train/train_internal.h"
#include "seedpipe/model.h"
#include "train/model_internal.h"

static uint32_t rng = 12345u;
static float frand(void) {   /* [-1, 1) */
    rng = rng * 1664525u + 1013904223u;
    return (float)((double)(rng >> 8) / 8388608.0 - 1.0);
}
static uint32_t fbits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static uint64_t dbits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }

static void test_relu(void) {
    CHECK(sp_nn_relu(2.5f) == 2.5f);
    CHECK(sp_nn_relu(-2.5f) == 0.0f);
    CHECK(fbits(sp_nn_relu(-0.0f)) == fbits(0.0f));   /* +0, as max(x, 0) in the CPU layer */
    CHECK(fbits(sp_nn_relu(0.0f)) == fbits(0.0f));
    CHECK(sp_nn_relu(NAN) == 0.0f);                    /* NaN > 0 is false */
    CHECK(sp_nn_relu_grad(1.0f, 3.0f) == 3.0f);
    CHECK(sp_nn_relu_grad(0.0f, 3.0f) == 0.0f);
    CHECK(sp_nn_relu_grad(-1.0f, 3.0f) == 0.0f);
    CHECK(fbits(sp_nn_relu_grad(1.0f, -0.0f)) == fbits(-0.0f));   /* dy passed as is */
    /* the CPU layers give the same bits */
    float x[5] = {1.5f, -2.0f, 0.0f, -0.0f, 1e-30f}, y[5], dy[5] = {1, 2, 3, 4, 5}, dx[5];
    sp__nn_relu_forward(x, 5, y);
    sp__nn_relu_backward(y, dy, 5, dx);
    for (int i = 0; i < 5; i++) {
        CHECK(fbits(y[i]) == fbits(sp_nn_relu(x[i])));
        CHECK(fbits(dx[i]) == fbits(sp_nn_relu_grad(y[i], dy[i])));
    }
}

static int first_max4(const float v[4]) {
    int b = 0;
    for (int i = 1; i < 4; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static void test_pool_argmax(void) {
    /* every order of four distinct values */
    const float vals[4] = {-1.0f, 0.5f, 2.0f, 3.0f};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 4; d++) {
                    if (a == b || a == c || a == d || b == c || b == d || c == d) continue;
                    float v[4] = {vals[a], vals[b], vals[c], vals[d]};
                    CHECK(sp_nn_pool_argmax(v[0], v[1], v[2], v[3]) == first_max4(v));
                }
    /* ties: the first maximum in the order a, b, c, d */
    CHECK(sp_nn_pool_argmax(1, 1, 1, 1) == 0);
    CHECK(sp_nn_pool_argmax(0, 2, 2, 1) == 1);
    CHECK(sp_nn_pool_argmax(0, 1, 2, 2) == 2);
    CHECK(sp_nn_pool_argmax(0.0f, -0.0f, 0.0f, -0.0f) == 0);
    /* random windows, and the CPU layer routes the gradient to that element */
    for (int t = 0; t < 1000; t++) {
        float v[4];
        for (int i = 0; i < 4; i++) v[i] = (float)((int)(frand() * 3.0f)) * 0.5f;   /* many ties */
        CHECK(sp_nn_pool_argmax(v[0], v[1], v[2], v[3]) == first_max4(v));
        float x[4] = {v[0], v[1], v[2], v[3]}, dy = 7.0f, dx[4], y;
        sp__nn_maxpool2_forward(x, 1, 2, 2, &y);
        sp__nn_maxpool2_backward(x, 1, 2, 2, &dy, dx);
        int a = sp_nn_pool_argmax(v[0], v[1], v[2], v[3]);
        CHECK(fbits(y) == fbits(v[a]));
        for (int i = 0; i < 4; i++) CHECK(dx[i] == (i == a ? 7.0f : 0.0f));
    }
}

static void test_argmax(void) {
    float v[17];
    for (int t = 0; t < 500; t++) {
        int k = 1 + t % 17;
        for (int i = 0; i < k; i++) v[i] = (float)((int)(frand() * 4.0f));
        int b = 0;
        for (int i = 1; i < k; i++)
            if (v[i] > v[b]) b = i;
        CHECK(sp_nn_argmax(v, k) == b);
    }
    float tie[3] = {2, 5, 5};
    CHECK(sp_nn_argmax(tie, 3) == 1);
}

static void test_seq_sum(void) {
    float v[300];
    for (int i = 0; i < 300; i++) v[i] = frand() * (float)(1 + i % 7) * 1e3f;
    for (long n = 0; n <= 300; n += 7) {
        float s = 0.0f;
        for (long i = 0; i < n; i++) {
            volatile float t = s + v[i];   /* one rounding per addition */
            s = t;
        }
        CHECK(fbits(sp_nn_seq_sum(v, n)) == fbits(s));
    }
    CHECK(fbits(sp_nn_seq_sum(v, 0)) == fbits(0.0f));
}

/* The tree, from its definition (nn_math.h, HOW IT WORKS): n splits into
 * runs of the binary digits of n, largest first; each run is the balanced
 * pairwise tree; the runs fold from the last: r1 + (r2 + (r3 + ...)). */
static float pairwise(const float *v, long n, long stride) {
    if (n == 1) return v[0];
    long h = n / 2;
    volatile float s = pairwise(v, h, stride) + pairwise(v + h * stride, h, stride);
    return s;
}
static float tree_ref(const float *v, long n, long stride) {
    long runs[64], at[64];
    int r = 0;
    long pos = 0;
    for (int bit = 62; bit >= 0; bit--)
        if (n & (1L << bit)) {
            runs[r] = 1L << bit;
            at[r++] = pos;
            pos += 1L << bit;
        }
    if (r == 0) return 0.0f;
    float acc = pairwise(v + at[r - 1] * stride, runs[r - 1], stride);
    for (int i = r - 2; i >= 0; i--) {
        volatile float s = pairwise(v + at[i] * stride, runs[i], stride) + acc;
        acc = s;
    }
    return acc;
}

static void test_tree(void) {
    static float v[3 * 300];
    for (int i = 0; i < 3 * 300; i++) v[i] = frand() * (i % 5 ? 1.0f : 1e4f);
    for (long n = 0; n <= 300; n++)
        for (long stride = 1; stride <= 3; stride++) {
            float ref = tree_ref(v, n, stride);
            CHECK_MSG(fbits(sp_nn_tree_sum(v, n, stride)) == fbits(ref), "n %ld stride %ld", n,
                      stride);
            sp_nn_tree t;
            sp_nn_tree_init(&t);
            for (long i = 0; i < n; i++) sp_nn_tree_push(&t, v[i * stride]);
            CHECK(fbits(sp_nn_tree_value(&t)) == fbits(ref));
            CHECK(fbits(sp__nn_tree_sum_f(v, n, stride)) == fbits(ref));   /* the CPU export */
        }
    /* the kernels' column form: sum of v[c], v[c + K], ... (fc bias, conv bias stage 2) */
    for (long c = 0; c < 3; c++) CHECK(fbits(sp_nn_tree_sum(v + c, 64, 3)) == fbits(tree_ref(v + c, 64, 3)));
    /* a long sum (1e6 values) stays within the 64-entry stack */
    static float ones[1000000];
    for (int i = 0; i < 1000000; i++) ones[i] = 1.0f;
    CHECK(sp_nn_tree_sum(ones, 1000000, 1) == 1000000.0f);
}

static void test_exp_log(void) {
    double worst = 0;
    for (int i = 0; i <= 100000; i++) {
        double x = -708.0 * i / 100000.0;
        double e = sp_nn_exp_neg(x), r = exp(x);
        double rel = fabs(e - r) / r;
        if (rel > worst) worst = rel;
    }
    CHECK_MSG(worst < 4e-16, "exp_neg worst relative error %.3g", worst);
    CHECK(sp_nn_exp_neg(0.0) == 1.0);
    CHECK(sp_nn_exp_neg(-1000.0) == 0.0);
    CHECK(sp_nn_exp_neg(5.0) == 1.0);                 /* clamped domain: x > 0 -> 0 */
    CHECK(sp_nn_exp_neg(-1e-12) == 1.0 - 1e-12);
    CHECK(isnan(sp_nn_exp_neg(NAN)));
    worst = 0;
    for (int i = 0; i <= 100000; i++) {
        double x = pow(10.0, 30.0 * i / 100000.0);    /* [1, 1e30] */
        double l = sp_nn_log_pos(x), r = log(x);
        double err = fabs(l - r) / (r > 1e-300 ? r : 1.0);
        if (err > worst) worst = err;
    }
    CHECK_MSG(worst < 4e-16, "log_pos worst relative error %.3g", worst);
    CHECK(sp_nn_log_pos(1.0) == 0.0);
    CHECK(sp_nn_log_pos(0.0) == -1.0e308);
    CHECK(isnan(sp_nn_log_pos(NAN)));
    CHECK(isinf(sp_nn_log_pos(INFINITY)));
    CHECK(sp__det_u2d(sp__det_d2u(-3.25)) == -3.25 && sp__det_d2u(1.0) == dbits(1.0));
    /* the CPU exports are the same functions */
    CHECK(sp__nn_exp_f(-1.5) == sp_nn_exp_neg(-1.5) && sp__nn_log_f(7.0) == sp_nn_log_pos(7.0));
}

static void test_softmax(void) {
    float z[10], d[10], d2[10];
    for (int t = 0; t < 2000; t++) {
        int k = 2 + t % 9, label = t % k;
        for (int j = 0; j < k; j++) z[j] = frand() * (t % 3 ? 5.0f : 50.0f);
        if (t % 7 == 0) z[1] = z[0];   /* tied maximum candidates */
        float scale = 1.0f / (float)(1 + t % 64);
        float loss = sp_nn_softmax_xent_row(z, k, label, scale, d);
        /* the documented sequence, written out */
        float m = z[0];
        for (int j = 1; j < k; j++)
            if (z[j] > m) m = z[j];
        float sum = 0.0f;
        for (int j = 0; j < k; j++) {
            volatile float s = sum + (float)sp_nn_exp_neg((double)(z[j] - m));
            sum = s;
        }
        for (int j = 0; j < k; j++) {
            volatile float p = (float)sp_nn_exp_neg((double)(z[j] - m)) / sum;
            volatile float g = j == label ? p - 1.0f : p;
            volatile float gs = g * scale;
            CHECK(fbits(d[j]) == fbits(gs));
        }
        volatile float l = (float)sp_nn_log_pos((double)sum) - (z[label] - m);
        CHECK(fbits(loss) == fbits(l));
        /* value: against double */
        double md = z[0], sd = 0, gsum = 0;
        for (int j = 1; j < k; j++) md = fmax(md, z[j]);
        for (int j = 0; j < k; j++) sd += exp((double)z[j] - md);
        double ref = log(sd) - ((double)z[label] - md);
        CHECK_MSG(fabs(loss - ref) <= 1e-5 * (1 + fabs(ref)), "loss %.9g ref %.9g", loss, ref);
        for (int j = 0; j < k; j++) gsum += d[j];
        CHECK(fabs(gsum) < 1e-5);
        /* eval form (no dlogits): same loss; the CPU export: same bits */
        CHECK(fbits(sp_nn_softmax_xent_row(z, k, label, scale, NULL)) == fbits(loss));
        CHECK(fbits(sp__nn_softmax_xent(z, k, label, scale, d2)) == fbits(loss));
        CHECK(memcmp(d, d2, (size_t)k * 4) == 0);
    }
}

static void test_sgd(void) {
    float w = 1.0f, v = 0.0f;
    sp_nn_sgd_update(&w, &v, 0.5f, 0.1f, 0.9f, 0.01f);
    /* g = 0.5 + 0.01 * 1 = 0.51; v = 0.51; w = 1 - 0.051 */
    CHECK(fabsf(v - 0.51f) < 1e-7f && fabsf(w - 0.949f) < 1e-7f);
    for (int t = 0; t < 10000; t++) {
        float w0 = frand(), v0 = frand() * 0.1f, g = frand() * 0.01f;
        float lr = 0.02f, mu = 0.9f, wd = 5e-4f;
        float w1 = w0, v1 = v0;
        sp_nn_sgd_update(&w1, &v1, g, lr, mu, wd);
        volatile float a = wd * w0;
        volatile float gg = g + a;
        volatile float b = mu * v0;
        volatile float nv = b + gg;
        volatile float c = lr * nv;
        volatile float nw = w0 - c;
        CHECK(fbits(v1) == fbits(nv) && fbits(w1) == fbits(nw));
    }
}

static const sp_case cases[] = {
    SP_CASE(test_relu),
    SP_CASE(test_pool_argmax),
    SP_CASE(test_argmax),
    SP_CASE(test_seq_sum),
    SP_CASE(test_tree),
    SP_CASE(test_exp_log),
    SP_CASE(test_softmax),
    SP_CASE(test_sgd),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}
