/* cli_gcn.c - `seedpipe gcn-demo`: the seed documents' experiment.
 *
 *   seedpipe gcn-demo [--threads T] [--device cpu|cuda] [--runs 5] [--seed S]
 *                     [--nodes 1000] [--p 0.01]
 *
 * An Erdos-Renyi graph (both directions of each edge) drawn from the
 * spec'd RNG, random features n x 64, a GCN layer 64 -> 32 applied --runs
 * times to the same input; for the atomic and the deterministic
 * aggregation, the output sums (%.9g and the float's hex bits) and whether
 * all runs gave the same bits (docs/graph.md). "All equal" compares the
 * whole output bit for bit, not only the sums: a last-bit difference in
 * one element is usually absorbed by the float sum (the fixed-tree float
 * sum is printed with its bits; a left-to-right double sum next to it
 * shows such differences).
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "seedpipe/graph.h"

#define FIN 64u
#define FOUT 32u

static uint32_t bits(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

/* Runs the layer `runs` times in one mode; prints the sums; returns 1 if
 * all runs gave the same bits, 0 if not, -1 on error (err filled). */
static int experiment(const sp_gcn *g, const float *x, sp_scatter_mode mode, int cuda,
                      int threads, int runs, sp_error *err) {
    float *out = malloc((size_t)g->n * g->fout * sizeof *out);
    if (!out) {
        sp_error_set(err, SP_ENOMEM, "out of memory");
        return -1;
    }
    size_t cells = (size_t)g->n * g->fout;
    float *first = malloc(cells * sizeof *first);
    if (!first) {
        free(out);
        sp_error_set(err, SP_ENOMEM, "out of memory");
        return -1;
    }
    int equal = 1;
    const char *name = mode == SP_SCATTER_ATOMIC ? "atomic" : "deterministic";
    if (cuda) printf("%s scatter-add, cuda:\n", name);
    else printf("%s scatter-add, cpu, %d thread%s:\n", name, threads, threads == 1 ? "" : "s");
    for (int r = 0; r < runs; r++) {
        int rc;
        if (cuda) rc = sp_gcn_forward_cuda(g, x, mode, out, err);
        else rc = sp_gcn_forward_cpu(g, x, mode, threads, out, err);
        if (rc != 0) {
            free(out);
            free(first);
            return -1;
        }
        float s = sp_graph_sum(out, cells);
        double sd = 0.0;   /* left to right in double: shows last-bit differences */
        for (size_t i = 0; i < cells; i++) sd = sd + (double)out[i];
        size_t diff = 0;
        if (r == 0) memcpy(first, out, cells * sizeof *out);
        else
            for (size_t i = 0; i < cells; i++) diff += bits(out[i]) != bits(first[i]);
        if (diff) equal = 0;
        printf("  run %d: sum %.9g (0x%08x)  double sum %.17g  output xxh64 %016llx, %zu of %zu "
               "elements differ from run 1\n",
               r + 1, (double)s, bits(s), sd,
               (unsigned long long)XXH3_64bits(out, cells * sizeof *out), diff, cells);
    }
    printf("  All equal: %s\n", equal ? "True" : "False");
    free(out);
    free(first);
    return equal;
}

/* The CUDA device line; 1 if a device is there. */
static int report_cuda(void) {
    char dname[256];
    int ndev = sp_graph_cuda_device(dname, sizeof dname);
    if (!sp_graph_cuda_compiled()) {
        printf("CUDA: not compiled in (no CUDA device used)\n");
        return 0;
    }
    if (ndev > 0) {
        printf("CUDA device: %s\n", dname);
        return 1;
    }
    printf("CUDA: no CUDA device%s\n", ndev < 0 ? " (runtime error)" : "");
    return 0;
}

/* The deterministic form's bits on the CPU and on CUDA, compared and
 * reported. @return 1 if they are identical. */
static int cpu_vs_cuda(cli_args *a, const sp_gcn *g, const float *x, uint64_t nodes, int threads) {
    sp_error err;
    sp_error_clear(&err);
    size_t cells = (size_t)nodes * FOUT;
    float *oc = malloc(cells * sizeof *oc), *og = malloc(cells * sizeof *og);
    if (!oc || !og) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        cli_fail(a, &err);
    }
    if (sp_gcn_forward_cpu(g, x, SP_SCATTER_DETERMINISTIC, threads, oc, &err) ||
        sp_gcn_forward_cuda(g, x, SP_SCATTER_DETERMINISTIC, og, &err))
        cli_fail(a, &err);
    size_t diff = 0;
    for (size_t i = 0; i < cells; i++) diff += bits(oc[i]) != bits(og[i]);
    printf("deterministic CPU vs CUDA: %s (%zu of %zu elements differ)\n",
           diff ? "DIFFERENT" : "bit-identical", diff, cells);
    free(oc);
    free(og);
    return diff == 0;
}

int cmd_gcn_demo(cli_args *a) {
    uint64_t threads = cli_uint(a, "threads", 2, 1, SP_GRAPH_MAX_THREADS);
    uint64_t runs = cli_uint(a, "runs", 5, 1, 1000);
    uint64_t seed = cli_uint(a, "seed", 0, 0, UINT64_MAX);
    uint64_t nodes = cli_uint(a, "nodes", 1000, 1, 1000000);
    double p = cli_real(a, "p", 0.01, 0.0, 1.0);
    const char *device = cli_str(a, "device", "cpu");
    cli_check_unused(a);
    int want_cuda = 0;
    if (!strcmp(device, "cuda")) want_cuda = 1;
    else if (strcmp(device, "cpu")) cli_usage_error(a, "--device must be cpu or cuda");

    sp_error err;
    sp_error_clear(&err);
    uint32_t *src, *dst;
    uint64_t m;
    if (sp_graph_erdos_renyi((uint32_t)nodes, p, seed, &src, &dst, &m, &err)) cli_fail(a, &err);
    float *x = malloc((size_t)nodes * FIN * sizeof *x);
    if (!x) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        cli_fail(a, &err);
    }
    sp_graph_features((uint32_t)nodes, FIN, seed, x);
    sp_gcn *g;
    if (sp_gcn_create((uint32_t)nodes, m, src, dst, FIN, FOUT, seed, &g, &err)) cli_fail(a, &err);
    printf("graph: %llu nodes, %llu directed edges (p = %g, both directions), features %llux%u,"
           " GCN %u -> %u, seed %llu\n",
           (unsigned long long)nodes, (unsigned long long)m, p, (unsigned long long)nodes, FIN,
           FIN, FOUT, (unsigned long long)seed);

    int cuda = report_cuda();
    if (want_cuda && !cuda) {
        sp_error_set(&err, SP_EUNSUPP, "--device cuda: no CUDA device");
        cli_fail(a, &err);
    }
    int det_ok = 1;
    /* The CPU always runs (the reference); CUDA too when a device exists. */
    for (int dev = 0; dev <= cuda; dev++) {
        if (want_cuda && dev == 0) continue;
        for (int mode = 0; mode < 2; mode++) {
            int r = experiment(g, x, (sp_scatter_mode)mode, dev, (int)threads, (int)runs, &err);
            if (r < 0) cli_fail(a, &err);
            if (mode == SP_SCATTER_DETERMINISTIC && r != 1) det_ok = 0;
        }
    }
    if (cuda && !cpu_vs_cuda(a, g, x, nodes, (int)threads)) det_ok = 0;
    sp_gcn_destroy(g);
    free(x);
    free(src);
    free(dst);
    return det_ok ? 0 : 1;
}
