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

#include "seedpipe/graph.h"

float sp__nn_tree_sum_f(const float *v, long n, long stride);
double sp__nn_exp_f(double x);
double sp__nn_log_f(double x);
int sp__scatter_cuda_time(const sp_csr *g, const uint32_t *src, const uint32_t *dst, uint64_t m,
                          uint32_t f, int reps, double *ms_atomic, double *ms_det, sp_error *err);

#endif
