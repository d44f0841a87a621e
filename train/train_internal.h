/* train_internal.h - what the training core exposes to its own tests and
 * benchmarks only: hidden in libseedpipe_train.so (no SP_API), reached
 * through the static library.
 *
 *   sp__nn_tree_sum_f(), sp__nn_exp_f(), sp__nn_log_f(): the library's
 *     compiled copies of nn_math.h's fixed-tree sum, exp (x <= 0) and log
 *     (x >= 1 normal), so a test can compare them with the header's, bit
 *     for bit, under the library's own compile flags (nn_cpu.c);
 *   sp__scatter_cuda_time(): device-resident timing of `reps` scatter-adds
 *     (f features, unit weights, zero input) in each form, mean ms per call,
 *     for bench/scatter_bench.c (graph.c; SP_EUNSUPP without CUDA).
 */
#ifndef SEEDPIPE_TRAIN_INTERNAL_H
#define SEEDPIPE_TRAIN_INTERNAL_H

#include "seedpipe/train.h"
#include "seedpipe/graph.h"

float sp__nn_tree_sum_f(const float *v, long n, long stride);
double sp__nn_exp_f(double x);
double sp__nn_log_f(double x);
int sp__scatter_cuda_time(const sp_csr *g, const uint32_t *src, const uint32_t *dst, uint64_t m,
                          uint32_t f, int reps, double *ms_atomic, double *ms_det, sp_error *err);

/* ---- Internal to the library: once seedpipe/train.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__trainer_eval() : forward only; *loss mean, *correct = argmax hits
 *  (the order of sp__trainer_step's outputs; either may be NULL). */
int sp__trainer_eval(sp_trainer *tr, const float *x, const int32_t *labels, uint32_t n,
                     float *loss, uint32_t *correct, sp_error *err);

/*! sp__trainer_step() : one SGD step on n samples, x float32 NCHW
 *  (n*C*H*W), labels in [0, classes). *loss (may be NULL) = mean loss
 *  and *correct (may be NULL) = argmax hits, both before the update.
 *  @return 0, SP_EINVAL (label out of range, n == 0), or a backend error. */
int sp__trainer_step(sp_trainer *tr, const float *x, const int32_t *labels, uint32_t n,
                     float *loss, uint32_t *correct, sp_error *err);

#ifdef __cplusplus
}
#endif

#endif
