/* seedpipe/graph.h - scatter-add over graph edges, atomic and deterministic,
 * and a GCN layer on top (docs/graph.md).
 *
 * Scatter-add (segment sum): out[d][k] = sum over edges e with dst[e] == d
 * of w[e] * x[src[e]][k]  (w = 1 when no weights are given).
 *
 * Two forms:
 *  - atomic (SP_SCATTER_ATOMIC), the usual one and a DEMONSTRATION: threads
 *    take contiguous chunks of the edge list and add each message into the
 *    shared output with a compare-and-swap loop on the float's bit pattern
 *    (CUDA: atomicAdd). Float addition is not associative, so the bits
 *    depend on which thread got there first.
 *  - deterministic (SP_SCATTER_DETERMINISTIC): the edges are sorted once by
 *    (dst, src) (stable, so parallel edges keep their input order) into a
 *    CSR; destination d is then summed by one thread (CPU: threads own
 *    contiguous ranges of destinations; CUDA: one thread per (d, k)) in the
 *    CSR order, left to right, starting from +0.0f:
 *        acc = 0; for e in row d: acc = acc + w[e] * x[col[e]][k]
 *    (sp_graph_row_term below; each product rounded to float, never
 *    contracted). The bits depend only on the data: the same run to run,
 *    for any thread count, and the same on the CPU and on CUDA
 *    (--fmad=false). No float atomics.
 *
 * GCN layer (Kipf & Welling): H = A_hat (X W^T) + b, A_hat =
 * D^-1/2 (A + I) D^-1/2 over the given directed edges (src -> dst) plus one
 * self-loop per node, D = in-degree + 1. dinv[i] = (float)(1 / sqrt(deg))
 * computed in double (correctly rounded); w[e] = dinv[src] * dinv[dst] in
 * float. (X W^T)[i][o] = x[i][0]*W[o][0] + x[i][1]*W[o][1] + ... left to
 * right in float. W (fout x fin) and b (fout) come from the model-init
 * stream: sp_nn_init_value(K_init(seed), SP_GCN_TENSOR_W / _B, index,
 * 1/sqrt(fin)) (train/nn_math.h), PyTorch Linear's default bound.
 *
 * Library code: never prints or exits. Thread-safe on distinct outputs.
 */
#ifndef SEEDPIPE_GRAPH_H
#define SEEDPIPE_GRAPH_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version, and a program opts in by defining SEEDPIPE_ADVANCED_API; the
 * front door is seedpipe/stream.h. */
#ifndef SEEDPIPE_ADVANCED_API
#error "seedpipe/graph.h is the advanced API: #define SEEDPIPE_ADVANCED_API before including it (README.md: The C API); the front door is seedpipe/stream.h"
#endif

#include <stddef.h>
#include <stdint.h>

#include "seedpipe/common.h"
#include "seedpipe/philox.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SP_SCATTER_ATOMIC = 0, SP_SCATTER_DETERMINISTIC = 1 } sp_scatter_mode;

#define SP_GCN_TENSOR_W 100u
#define SP_GCN_TENSOR_B 101u
#define SP_GRAPH_MAX_THREADS 64

/* One term of the deterministic row sum, shared by the CPU and CUDA code. */
SP_HOSTDEV float sp_graph_row_term(float acc, float w, float x) {
    float m = w * x;
    return acc + m;
}

/* Edges sorted by (dst, src): row d holds slots rowptr[d] .. rowptr[d+1]-1;
 * col[slot] = the source node, edge[slot] = the slot's index in the input
 * edge list (so per-edge data can be permuted into CSR order). */
typedef struct sp_csr {
    uint32_t n;         /* nodes */
    uint64_t nnz;       /* edges */
    uint64_t *rowptr;   /* n + 1 */
    uint32_t *col;      /* nnz */
    uint64_t *edge;     /* nnz */
} sp_csr;

/* A GCN layer over a fixed graph. */
typedef struct sp_gcn {
    uint32_t n, fin, fout;
    uint64_t m;          /* edges including the n self-loops (appended) */
    uint32_t *src, *dst; /* m, input order */
    float *w;            /* m, normalised weight per edge, input order */
    float *w_csr;        /* m, the same in CSR order */
    sp_csr csr;
    float *weight;       /* fout x fin, row-major */
    float *bias;         /* fout */
} sp_gcn;

/*! sp_gcn_create() : the layer for n nodes and m directed edges (self-loops
 *  are added; do not pass them), weights from seed's init stream.
 *  @return 0, SP_EINVAL, SP_ENOMEM. */
SP_API int sp_gcn_create(uint32_t n, uint64_t m, const uint32_t *src, const uint32_t *dst, uint32_t fin,
                         uint32_t fout, uint64_t seed, sp_gcn **out, sp_error *err);
SP_API void sp_gcn_destroy(sp_gcn *g);   /* accepts NULL */

/*! sp_gcn_forward_cpu() : out (n x fout) = the layer on x (n x fin), with
 *  the aggregation in `mode` on `threads` threads. The linear part is
 *  deterministic in both modes. @return 0, SP_ENOMEM. */
SP_API int sp_gcn_forward_cpu(const sp_gcn *g, const float *x, sp_scatter_mode mode, int threads,
                              float *out, sp_error *err);

/*! sp_graph_sum() : the fixed-tree float sum (sp_nn_tree_sum) of v[0..n). */
SP_API float sp_graph_sum(const float *v, size_t n);

/*! sp_graph_erdos_renyi() : G(n, p) from seed's "other" stream
 *  (SP_RNG_OTHER): pair i < j is an edge iff
 *  sp_u01d(philox((i, j, 1, 0), K_other)[0]) < p; for each, in (i, j)
 *  order, the edges i -> j then j -> i. *src / *dst are malloc'd arrays of
 *  *m edges. @return 0, SP_EINVAL, SP_ENOMEM. */
SP_API int sp_graph_erdos_renyi(uint32_t n, double p, uint64_t seed, uint32_t **src, uint32_t **dst,
                                uint64_t *m, sp_error *err);

/*! sp_graph_features() : n x f floats, element e = i*f + k is 2u - 1 with
 *  u = sp_u01f(philox((e / 4, 0, 2, 0), K_other)[e % 4]). */
SP_API void sp_graph_features(uint32_t n, uint32_t f, uint64_t seed, float *x);

/* CUDA. Always declared; in a build without CUDA (the library was not
 * compiled with SEEDPIPE_HAVE_CUDA) sp_graph_cuda_compiled() is 0,
 * sp_graph_cuda_device() is 0 and the others return SP_EUNSUPP. */
SP_API int sp_graph_cuda_compiled(void);
/*! sp_graph_cuda_device() : the number of CUDA devices (0: none; negative
 *  on a runtime error) and device 0's name into name. */
SP_API int sp_graph_cuda_device(char *name, size_t n);
/*! sp_gcn_forward_cuda() : the same layer on device 0 (uploads, runs,
 *  downloads). The deterministic mode gives the CPU's bits. */
SP_API int sp_gcn_forward_cuda(const sp_gcn *g, const float *x, sp_scatter_mode mode, float *out,
                               sp_error *err);

#ifdef __cplusplus
}
#endif
#endif
