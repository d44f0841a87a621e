/* test_graph.c - scatter-add and the GCN layer (include/seedpipe/graph.h).
 *
 * Asserts: the CSR is the stable (dst, src) sort of the edges (rowptr,
 * col, edge permutation; ties keep input order); the deterministic
 * scatter-add and GCN layer give the same bits run to run and for 1, 2, 3
 * and 4 threads, and agree with a double-precision reference within a
 * tolerance; the atomic form agrees with the reference within the same
 * tolerance (its bits are NOT asserted: they may change with scheduling);
 * the Erdos-Renyi draw and the features are pure functions of the seed;
 * bad edges are refused. On a CUDA build with a device, the deterministic
 * CUDA layer equals the CPU bit for bit.
 * Cases: test_csr, test_scatter_small, and the layer on two graphs,
 * test_gcn_n1000_p001 (n 1000, p 0.01, seed 0) and test_gcn_n777_p003
 * (n 777, p 0.03, seed 12345).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/graph.h"
#include "train/graph_internal.h"

static int same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void test_csr(void) {
    /* 5 nodes; edges chosen so sorting matters, with a parallel edge. */
    const uint32_t src[] = {3, 1, 4, 0, 3, 2, 1, 0, 3};
    const uint32_t dst[] = {0, 2, 2, 2, 1, 0, 2, 4, 0};
    uint64_t m = sizeof src / sizeof src[0];
    sp_csr g;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp__csr_build(5, m, src, dst, &g, &err), &err);
    CHECK(g.n == 5 && g.nnz == m);
    /* row 0: src 2 (e5), 3 (e0), 3 (e8); row 1: 3 (e4); row 2: 0 (e3),
     * 1 (e1), 1 (e6), 4 (e2); row 3: none; row 4: 0 (e7) */
    const uint64_t rp[] = {0, 3, 4, 8, 8, 9};
    const uint32_t col[] = {2, 3, 3, 3, 0, 1, 1, 4, 0};
    const uint64_t edge[] = {5, 0, 8, 4, 3, 1, 6, 2, 7};
    for (int i = 0; i <= 5; i++) CHECK(g.rowptr[i] == rp[i]);
    for (uint64_t s = 0; s < m; s++) CHECK(g.col[s] == col[s] && g.edge[s] == edge[s]);
    for (uint32_t d = 0; d < 5; d++)
        for (uint64_t s = g.rowptr[d]; s < g.rowptr[d + 1]; s++) {
            uint64_t e = g.edge[s];
            CHECK(dst[e] == d && src[e] == g.col[s]);
            if (s > g.rowptr[d]) {
                uint64_t pe = g.edge[s - 1];
                CHECK(src[pe] < src[e] || (src[pe] == src[e] && pe < e));   /* stable */
            }
        }
    /* every edge exactly once */
    int seen[9] = {0};
    for (uint64_t s = 0; s < m; s++) seen[g.edge[s]]++;
    for (uint64_t e = 0; e < m; e++) CHECK(seen[e] == 1);
    sp__csr_free(&g);
    /* an id out of range is refused, naming the edge */
    const uint32_t bad_s[] = {0, 7}, bad_d[] = {1, 1};
    CHECK(sp__csr_build(5, 2, bad_s, bad_d, &g, &err) == SP_EINVAL);
    CHECK(strstr(err.msg, "edge 1") != NULL);
    printf("csr ok\n");
}

/* A small graph with known sums: node 2 gets 1*x0 + 1*x1. */
static void test_scatter_small(void) {
    const uint32_t src[] = {0, 1, 2};
    const uint32_t dst[] = {2, 2, 0};
    const float x[] = {1, 2, 10, 20, 100, 200};   /* 3 nodes x 2 features */
    float out[6], out2[6];
    sp_csr g;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp__csr_build(3, 3, src, dst, &g, &err), &err);
    CHECK_OK(sp__scatter_add_csr(&g, NULL, x, 2, 1, out, &err), &err);
    const float want[] = {100, 200, 0, 0, 11, 22};
    CHECK(memcmp(out, want, sizeof want) == 0);
    CHECK_OK(sp__scatter_add_atomic(3, 3, src, dst, NULL, x, 2, 2, out2, &err), &err);
    CHECK(memcmp(out2, want, sizeof want) == 0);
    sp__csr_free(&g);
    printf("scatter small ok\n");
}

/* Double-precision reference of the layer (same weights). */
static void reference(const sp_gcn *g, const float *x, double *ref) {
    uint32_t n = g->n, fin = g->fin, fout = g->fout;
    double *h = calloc((size_t)n * fout, sizeof *h);
    CHECK(h);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t o = 0; o < fout; o++) {
            double acc = 0;
            for (uint32_t k = 0; k < fin; k++)
                acc += (double)x[(size_t)i * fin + k] * (double)g->weight[(size_t)o * fin + k];
            h[(size_t)i * fout + o] = acc;
        }
    for (size_t c = 0; c < (size_t)n * fout; c++) ref[c] = 0;
    for (uint64_t e = 0; e < g->m; e++)
        for (uint32_t o = 0; o < fout; o++)
            ref[(size_t)g->dst[e] * fout + o] += (double)g->w[e] * h[(size_t)g->src[e] * fout + o];
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t o = 0; o < fout; o++) ref[(size_t)i * fout + o] += g->bias[o];
    free(h);
}

static double max_err(const float *a, const double *ref, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - ref[i]);
        if (d > m) m = d;
    }
    return m;
}

static void test_gcn(uint32_t n, double p, uint64_t seed) {
    sp_error err;
    sp_error_clear(&err);
    uint32_t *src, *dst, *src2, *dst2;
    uint64_t m, m2;
    CHECK_OK(sp_graph_erdos_renyi(n, p, seed, &src, &dst, &m, &err), &err);
    CHECK_OK(sp_graph_erdos_renyi(n, p, seed, &src2, &dst2, &m2, &err), &err);
    CHECK(m == m2 && memcmp(src, src2, m * 4) == 0 && memcmp(dst, dst2, m * 4) == 0);
    CHECK(m % 2 == 0);
    for (uint64_t e = 0; e < m; e += 2) CHECK(src[e] == dst[e + 1] && dst[e] == src[e + 1]);
    /* expected pairs n(n-1)/2 * p; within 5 sigma */
    double pairs = (double)n * (n - 1) / 2, mean = pairs * p, sd = sqrt(pairs * p * (1 - p));
    CHECK_MSG(fabs((double)(m / 2) - mean) < 5 * sd + 1, "%llu pairs, expected %.0f",
              (unsigned long long)(m / 2), mean);
    const uint32_t fin = 64, fout = 32;
    float *x = malloc((size_t)n * fin * sizeof *x);
    CHECK(x);
    sp_graph_features(n, fin, seed, x);
    for (size_t i = 0; i < (size_t)n * fin; i++) CHECK(x[i] >= -1.0f && x[i] < 1.0f);
    sp_gcn *g;
    CHECK_OK(sp_gcn_create(n, m, src, dst, fin, fout, seed, &g, &err), &err);
    CHECK(g->m == m + n);
    size_t cells = (size_t)n * fout;
    float *first = malloc(cells * sizeof *first), *out = malloc(cells * sizeof *out);
    double *ref = malloc(cells * sizeof *ref);
    CHECK(first && out && ref);
    reference(g, x, ref);
    /* tolerance: |w| <= 1, |x W^T| <= 8 (64 products, bound 1/8), rows of
     * ~deg + 1 terms: float error well below 1e-4 */
    const double tol = 1e-4;
    CHECK_OK(sp_gcn_forward_cpu(g, x, SP_SCATTER_DETERMINISTIC, 1, first, &err), &err);
    double e1 = max_err(first, ref, cells);
    CHECK_MSG(e1 < tol, "deterministic vs reference: %g", e1);
    for (int t = 1; t <= 4; t++)
        for (int r = 0; r < 3; r++) {
            CHECK_OK(sp_gcn_forward_cpu(g, x, SP_SCATTER_DETERMINISTIC, t, out, &err), &err);
            CHECK_MSG(same_bits(first, out, cells), "deterministic: %d threads, run %d differ", t,
                      r);
        }
    float s0 = sp_graph_sum(first, cells);
    size_t atomic_diff = 0;
    for (int t = 1; t <= 4; t++) {
        CHECK_OK(sp_gcn_forward_cpu(g, x, SP_SCATTER_ATOMIC, t, out, &err), &err);
        double ea = max_err(out, ref, cells);
        CHECK_MSG(ea < tol, "atomic (%d threads) vs reference: %g", t, ea);
        for (size_t i = 0; i < cells; i++) atomic_diff += memcmp(&out[i], &first[i], 4) != 0;
    }
    /* the raw scatter too, with thread counts 1..4, on the CSR */
    float *agg = malloc(cells * sizeof *agg), *agg2 = malloc(cells * sizeof *agg2);
    CHECK(agg && agg2);
    CHECK_OK(sp__scatter_add_csr(&g->csr, NULL, first, fout, 1, agg, &err), &err);
    for (int t = 2; t <= 4; t++) {
        CHECK_OK(sp__scatter_add_csr(&g->csr, NULL, first, fout, t, agg2, &err), &err);
        CHECK(same_bits(agg, agg2, cells));
    }
    if (sp_graph_cuda_compiled()) {
        char name[256];
        if (sp_graph_cuda_device(name, sizeof name) > 0) {
            CHECK_OK(sp_gcn_forward_cuda(g, x, SP_SCATTER_DETERMINISTIC, out, &err), &err);
            CHECK_MSG(same_bits(first, out, cells), "CUDA deterministic differs from the CPU");
            CHECK_OK(sp_gcn_forward_cuda(g, x, SP_SCATTER_ATOMIC, out, &err), &err);
            CHECK(max_err(out, ref, cells) < tol);
            printf("cuda (%s): deterministic == cpu bits\n", name);
        } else {
            printf("cuda: compiled in, no CUDA device\n");
        }
    }
    printf("gcn n=%u m=%llu: sum %.9g, max err det %.3g, atomic elements != det: %zu\n", n,
           (unsigned long long)m, (double)s0, e1, atomic_diff);
    free(agg);
    free(agg2);
    free(first);
    free(out);
    free(ref);
    free(x);
    sp_gcn_destroy(g);
    free(src);
    free(dst);
    free(src2);
    free(dst2);
}

static void test_gcn_n1000_p001(void) { test_gcn(1000, 0.01, 0); }
static void test_gcn_n777_p003(void) { test_gcn(777, 0.03, 12345); }

static const sp_case cases[] = {
    SP_CASE(test_csr),
    SP_CASE(test_scatter_small),
    SP_CASE(test_gcn_n1000_p001),
    SP_CASE(test_gcn_n777_p003),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}
