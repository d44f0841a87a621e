/* scatter_bench.c - deterministic (CSR, fixed order) vs atomic (CAS loop)
 * scatter-add (include/seedpipe/graph.h).
 *
 *   bench_scatter_bench [--quick]
 *
 * Graphs: the gcn-demo graph (Erdos-Renyi, 1,000 nodes, p = 0.01, both
 * directions, seed 0) and a random graph of 100,000 nodes and 1,000,000
 * directed edges (src, dst uniform from the "other" stream, seed 0);
 * 32 features per node (the GCN layer's output width), unit weights.
 * CPU with 1 and 2 threads; CUDA when compiled in and a device exists.
 * Per configuration: the median time per call of each form, the one-off
 * CSR build (sort) time, and the ratios deterministic / atomic per call
 * and amortised over 100 calls ((sort + 100 det) / (100 atomic)).
 * Prints one table; the deterministic outputs are also checked to be
 * bit-identical across thread counts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "seedpipe/graph.h"
#include "train/train_internal.h"
#include "train/graph_internal.h"

#define F 32u

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const sp_error *e) {
    fprintf(stderr, "scatter_bench: %s\n", e->msg);
    exit(1);
}

/* The plain serial loop (no atomics, edge order): what a single-threaded
 * index_add does; a baseline, not one of the two forms. */
static void serial_scatter(uint32_t n, uint64_t m, const uint32_t *src, const uint32_t *dst,
                           const float *x, float *out) {
    memset(out, 0, (size_t)n * F * sizeof *out);
    for (uint64_t e = 0; e < m; e++) {
        const float *xs = x + (size_t)src[e] * F;
        float *o = out + (size_t)dst[e] * F;
        for (uint32_t k = 0; k < F; k++) o[k] = o[k] + xs[k];
    }
}

static void bench(const char *name, uint32_t n, uint64_t m, const uint32_t *src,
                  const uint32_t *dst, int reps) {
    sp_error err;
    sp_error_clear(&err);
    float *x = malloc((size_t)n * F * sizeof *x);
    float *out = malloc((size_t)n * F * sizeof *out);
    float *ref = malloc((size_t)n * F * sizeof *ref);
    double *t = malloc((size_t)reps * sizeof *t);
    if (!x || !out || !ref || !t) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    sp_graph_features(n, F, 1, x);
    sp_csr g;
    double s0 = now();
    if (sp__csr_build(n, m, src, dst, &g, &err)) die(&err);
    double sort_s = now() - s0;
    for (int r = 0; r < reps; r++) {
        double a = now();
        serial_scatter(n, m, src, dst, x, out);
        t[r] = now() - a;
    }
    printf("%-22s serial loop, no atomics (baseline) %9.3f ms\n", name, median(t, reps) * 1e3);
    for (int threads = 1; threads <= 2; threads++) {
        double ta, td;
        if (sp__scatter_add_atomic(n, m, src, dst, NULL, x, F, threads, out, &err)) die(&err);
        for (int r = 0; r < reps; r++) {
            double a = now();
            if (sp__scatter_add_atomic(n, m, src, dst, NULL, x, F, threads, out, &err)) die(&err);
            t[r] = now() - a;
        }
        ta = median(t, reps);
        if (sp__scatter_add_csr(&g, NULL, x, F, threads, out, &err)) die(&err);
        for (int r = 0; r < reps; r++) {
            double a = now();
            if (sp__scatter_add_csr(&g, NULL, x, F, threads, out, &err)) die(&err);
            t[r] = now() - a;
        }
        td = median(t, reps);
        if (threads == 1) memcpy(ref, out, (size_t)n * F * sizeof *out);
        int same = memcmp(ref, out, (size_t)n * F * sizeof *out) == 0;
        printf("%-22s cpu %d thr  atomic %9.3f ms  det %9.3f ms  sort %8.3f ms  det/atomic %5.2f"
               "  amortised(100) %5.2f  det bits == 1 thread: %s\n",
               name, threads, ta * 1e3, td * 1e3, sort_s * 1e3, td / ta,
               (sort_s + 100 * td) / (100 * ta), same ? "yes" : "NO");
    }
    char dev[256];
    if (!sp_graph_cuda_compiled()) {
        printf("%-22s cuda: not compiled in\n", name);
    } else if (sp_graph_cuda_device(dev, sizeof dev) <= 0) {
        printf("%-22s cuda: no CUDA device\n", name);
    } else {
        double ma, md;
        if (sp__scatter_cuda_time(&g, src, dst, m, F, 50, &ma, &md, &err)) die(&err);
        printf("%-22s cuda (%s)  atomic %9.4f ms  det %9.4f ms  det/atomic %5.2f\n", name, dev, ma,
               md, md / ma);
    }
    sp__csr_free(&g);
    free(x);
    free(out);
    free(ref);
    free(t);
}

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    sp_error err;
    sp_error_clear(&err);
    uint32_t *src, *dst;
    uint64_t m;
    if (sp_graph_erdos_renyi(1000, 0.01, 0, &src, &dst, &m, &err)) die(&err);
    bench("demo 1000/10160", 1000, m, src, dst, quick ? 20 : 200);
    free(src);
    free(dst);

    const uint32_t n = 100000;
    const uint64_t big = 1000000;
    src = malloc(big * sizeof *src);
    dst = malloc(big * sizeof *dst);
    if (!src || !dst) return 1;
    sp_key k = sp_rng_key(0, SP_RNG_OTHER);
    for (uint64_t e = 0; e < big; e++) {
        sp_ctr c = {{(uint32_t)e, 0u, 3u, 0u}};
        sp_ctr o = sp_philox4x32_10(c, k);
        src[e] = sp_uniform_int(o.c[0], n);
        dst[e] = sp_uniform_int(o.c[1], n);
    }
    bench("random 100000/1000000", n, big, src, dst, quick ? 3 : 9);
    free(src);
    free(dst);
    return 0;
}
