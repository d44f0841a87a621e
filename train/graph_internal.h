/* train/graph_internal.h - the library-internal part of seedpipe/graph.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/graph.h.
 */
#ifndef SEEDPIPE_TRAIN_GRAPH_INTERNAL_H
#define SEEDPIPE_TRAIN_GRAPH_INTERNAL_H

#include "seedpipe/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__csr_build() : stable sort of m edges by (dst, src) (two counting
 *  passes, O(n + m)). Node ids must be < n.
 *  @return 0, SP_EINVAL (an id >= n: names the edge), SP_ENOMEM. */
int sp__csr_build(uint32_t n, uint64_t m, const uint32_t *src, const uint32_t *dst, sp_csr *out,
                  sp_error *err);

void sp__csr_free(sp_csr *g);   /* accepts NULL and a zeroed struct */

/*! sp__scatter_add_atomic() : out (n x f, overwritten) = scatter-add of the
 *  m edges, `threads` pthreads (<= 1: the caller only) each adding a
 *  contiguous chunk of edges with a CAS loop on uint32 bit patterns.
 *  w may be NULL (1). @return 0, SP_EINVAL, SP_ENOMEM. */
int sp__scatter_add_atomic(uint32_t n, uint64_t m, const uint32_t *src, const uint32_t *dst,
                           const float *w, const float *x, uint32_t f, int threads, float *out,
                           sp_error *err);

/*! sp__scatter_add_csr() : the deterministic form: out (g->n x f) row d =
 *  the fixed-order sum of its CSR row; w_csr (CSR order, may be NULL) are
 *  the weights. `threads` split the destinations; the bits never depend on
 *  it. @return 0, SP_EINVAL, SP_ENOMEM (threads could not start: the
 *  caller's thread does the rest, never an error). */
int sp__scatter_add_csr(const sp_csr *g, const float *w_csr, const float *x, uint32_t f,
                        int threads, float *out, sp_error *err);

#ifdef __cplusplus
}
#endif

#endif
