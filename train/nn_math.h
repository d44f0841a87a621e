/* nn_math.h - per-element and per-reduction arithmetic of the training core,
 * shared verbatim by the CPU reference (nn_cpu.c, model.c, model_cpu.c) and
 * the CUDA kernels (nn_cuda.cu).
 *
 * Every function is SP_HOSTDEV (philox.h): `static inline` in C,
 * `__host__ __device__` under nvcc. Built from IEEE-754 + - * / and integer
 * bit manipulation only, evaluated in the written order, compiled with
 * -ffp-contract=off (host) and --fmad=false (device): the same inputs give
 * the same bits on the CPU and on the GPU. No libm transcendental is called
 * (DESIGN.md section 1); exp and log are augment/detmath_internal.h's,
 * the same functions as the loader's sp_det_exp/sp_det_log, each behind a
 * guard of the domain used here.
 *
 * The fixed reduction tree (sp_nn_tree_sum) HOW IT WORKS: values are
 * consumed in index order; each is pushed as a "run" of size 1 on a stack;
 * while the top two runs have equal size they are merged (left + right).
 * When all are consumed, the stack is folded from the top: acc = top,
 * then acc = below + acc. For n a power of two this is the balanced
 * pairwise tree; for other n it is a fixed tree of the binary digits of n.
 * The tree depends only on n, never on threads or launch geometry, needs
 * O(log n) registers and no scratch memory, so a GPU thread runs it alone.
 * Error grows like O(log n) (pairwise summation).
 */
#ifndef SEEDPIPE_NN_MATH_H
#define SEEDPIPE_NN_MATH_H

#include <stdint.h>
#include <string.h>

#include "augment/detmath_internal.h"   /* sp__det_exp, sp__det_log */
#include "seedpipe/philox.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp_nn_exp_neg() : e^x for x <= 0 (softmax after the max subtraction),
 *  < 1 ulp in double; x < -708 gives 0, NaN gives NaN. The one
 *  deterministic exp (augment/detmath_internal.h) behind this domain
 *  guard. */
SP_HOSTDEV double sp_nn_exp_neg(double x) {
    if (x != x) return x;
    if (x > 0.0) x = 0.0;             /* domain guard: callers pass x <= 0 */
    if (x < -708.0) return 0.0;
    return sp__det_exp(x);
}

/*! sp_nn_log_pos() : natural log of a positive normal double (callers
 *  pass the softmax denominator, >= 1), < 1 ulp. NaN and +inf pass
 *  through; zero, negative and subnormal inputs give -1e308 (never met).
 *  The one deterministic log (augment/detmath_internal.h) behind this
 *  domain guard. */
SP_HOSTDEV double sp_nn_log_pos(double x) {
    if (!(x >= 2.2250738585072014e-308)) return x != x ? x : -1.0e308;
    if (x > 1.7976931348623157e308) return x;
    return sp__det_log(x);
}

/* The fixed tree as an accumulator: push values in index order, then read
 * the sum (for values computed on the fly, e.g. per-sample partials). */
typedef struct sp_nn_tree {
    float val[64];
    long size[64];
    int top;
} sp_nn_tree;

SP_HOSTDEV void sp_nn_tree_init(sp_nn_tree *t) { t->top = 0; }

SP_HOSTDEV void sp_nn_tree_push(sp_nn_tree *t, float x) {
    long s = 1;
    while (t->top > 0 && t->size[t->top - 1] == s) {
        x = t->val[t->top - 1] + x;
        s += t->size[t->top - 1];
        t->top--;
    }
    t->val[t->top] = x;
    t->size[t->top] = s;
    t->top++;
}

SP_HOSTDEV float sp_nn_tree_value(const sp_nn_tree *t) {
    if (t->top == 0) return 0.0f;
    float acc = t->val[t->top - 1];
    for (int i = t->top - 2; i >= 0; i--) acc = t->val[i] + acc;
    return acc;
}

/*! sp_nn_tree_sum() : sum of v[0], v[stride], ..., v[(n-1)*stride] in the
 *  fixed tree described at the top of this file. n may be 0 (gives 0). */
SP_HOSTDEV float sp_nn_tree_sum(const float *v, long n, long stride) {
    sp_nn_tree t;
    sp_nn_tree_init(&t);
    for (long i = 0; i < n; i++) sp_nn_tree_push(&t, v[i * stride]);
    return sp_nn_tree_value(&t);
}

/*! sp_nn_seq_sum() : v[0] + v[1] + ... left to right (short per-sample
 *  sums, e.g. a bias gradient over one feature map). */
SP_HOSTDEV float sp_nn_seq_sum(const float *v, long n) {
    float s = 0.0f;
    for (long i = 0; i < n; i++) s = s + v[i];
    return s;
}

/*! sp_nn_softmax_xent_row() : one row of softmax cross-entropy.
 *  logits: k values; label in [0, k). Writes dlogits[j] = (p_j - [j ==
 *  label]) * scale (scale = 1 / batch size for a mean loss) and returns the
 *  row's loss -log p_label = log(sum_j e^(z_j - m)) - (z_label - m), m =
 *  max_j z_j (first maximum). The exps are computed in double by
 *  sp_nn_exp_neg and rounded to float; the sum is a left-to-right float
 *  sum; p_j = e_j / sum in float. dlogits may be NULL (eval). */
SP_HOSTDEV float sp_nn_softmax_xent_row(const float *logits, int k, int label, float scale,
                                        float *dlogits) {
    float m = logits[0];
    for (int j = 1; j < k; j++)
        if (logits[j] > m) m = logits[j];
    float sum = 0.0f;
    for (int j = 0; j < k; j++) sum = sum + (float)sp_nn_exp_neg((double)(logits[j] - m));
    if (dlogits) {
        for (int j = 0; j < k; j++) {
            float p = (float)sp_nn_exp_neg((double)(logits[j] - m)) / sum;
            float g = j == label ? p - 1.0f : p;
            dlogits[j] = g * scale;
        }
    }
    return (float)sp_nn_log_pos((double)sum) - (logits[label] - m);
}

/*! sp_nn_argmax() : index of the first maximum of v[0..k) (eval). */
SP_HOSTDEV int sp_nn_argmax(const float *v, int k) {
    int b = 0;
    for (int j = 1; j < k; j++)
        if (v[j] > v[b]) b = j;
    return b;
}

/*! sp_nn_pool_argmax() : which of the 2x2 window (a b / c d), in the order
 *  a, b, c, d, holds the first maximum (0..3). Forward and backward of
 *  max-pool both use it, so a gradient goes to exactly one input. */
SP_HOSTDEV int sp_nn_pool_argmax(float a, float b, float c, float d) {
    int i = 0;
    float m = a;
    if (b > m) { m = b; i = 1; }
    if (c > m) { m = c; i = 2; }
    if (d > m) { i = 3; }
    return i;
}

/*! sp_nn_relu() / sp_nn_relu_grad() : max(x, 0); dy where the output was
 *  positive, else 0. */
SP_HOSTDEV float sp_nn_relu(float x) { return x > 0.0f ? x : 0.0f; }
SP_HOSTDEV float sp_nn_relu_grad(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

/*! sp_nn_sgd_update() : SGD with momentum and weight decay (PyTorch's
 *  torch.optim.SGD, dampening 0, no Nesterov), one parameter:
 *    g = grad + wd * w;  v = mu * v + g;  w = w - lr * v.
 *  (On the first step PyTorch sets v = g; with v initialised to 0 this is
 *  the same value.) */
SP_HOSTDEV void sp_nn_sgd_update(float *w, float *v, float grad, float lr, float mu, float wd) {
    float g = grad + wd * *w;
    float nv = mu * *v + g;
    *v = nv;
    *w = *w - lr * nv;
}

/*! sp_nn_init_value() : initial value of element `index` of parameter
 *  tensor `tensor` under the init key (philox stream SP_RNG_INIT):
 *  word index % 4 of philox((index / 4, tensor, 0, 0), K_init), as
 *  u = (x >> 8) * 2^-24, mapped to (2u - 1) * bound in double, rounded to
 *  float. */
SP_HOSTDEV float sp_nn_init_value(sp_key k_init, uint32_t tensor, uint32_t index, double bound) {
    sp_ctr c = {{index / 4u, tensor, 0u, 0u}};
    sp_ctr o = sp_philox4x32_10(c, k_init);
    double u = sp_u01d(o.c[index % 4u]);
    return (float)((2.0 * u - 1.0) * bound);
}

#ifdef __cplusplus
}
#endif
#endif
