/* graph.c - scatter-add (atomic and deterministic), CSR build, GCN layer
 * (include/seedpipe/graph.h, docs/graph.md).
 *
 * HOW IT WORKS
 * CSR: two stable counting passes, first by src then by dst, give the
 * edges sorted by (dst, src) with ties (parallel edges) in input order.
 * Deterministic scatter: threads own contiguous destination ranges; each
 * row is accumulated left to right in CSR order into a per-row vector of f
 * accumulators (sp_graph_row_term), so every output element has exactly
 * one writer and a fixed sequence of operations. Atomic scatter: threads
 * own contiguous edge chunks and add into a shared array of _Atomic
 * uint32_t holding float bit patterns with a compare-and-swap loop; the
 * order of the additions into one element is whatever the scheduler made.
 */
#include "seedpipe/graph.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "train/cuda_plugin.h"
#include "train/nn_math.h"
#include "train/train_internal.h"
#include "common/vec_internal.h"
#include "train/graph_internal.h"

void sp__csr_free(sp_csr *g) {
    if (!g) return;
    free(g->rowptr);
    free(g->col);
    free(g->edge);
    memset(g, 0, sizeof *g);
}

int sp__csr_build(uint32_t n, uint64_t m, const uint32_t *src, const uint32_t *dst, sp_csr *out,
                  sp_error *err) {
    memset(out, 0, sizeof *out);
    if (n == 0) return sp_error_set(err, SP_EINVAL, "graph: no nodes");
    for (uint64_t e = 0; e < m; e++)
        if (src[e] >= n || dst[e] >= n)
            return sp_error_set(err, SP_EINVAL, "graph: edge %llu (%u -> %u): node id >= %u",
                                (unsigned long long)e, src[e], dst[e], n);
    uint64_t *cnt = calloc((size_t)n + 1, sizeof *cnt);
    uint64_t *tmp = malloc((m ? m : 1) * sizeof *tmp);
    out->rowptr = calloc((size_t)n + 1, sizeof *out->rowptr);
    out->col = malloc((m ? m : 1) * sizeof *out->col);
    out->edge = malloc((m ? m : 1) * sizeof *out->edge);
    if (!cnt || !tmp || !out->rowptr || !out->col || !out->edge) {
        free(cnt);
        free(tmp);
        sp__csr_free(out);
        return sp_error_set(err, SP_ENOMEM, "graph: out of memory for %llu edges",
                            (unsigned long long)m);
    }
    /* pass 1: by src (stable) into tmp */
    for (uint64_t e = 0; e < m; e++) cnt[src[e] + 1]++;
    for (uint32_t i = 0; i < n; i++) cnt[i + 1] += cnt[i];
    for (uint64_t e = 0; e < m; e++) tmp[cnt[src[e]]++] = e;
    /* pass 2: by dst (stable) into edge */
    uint64_t *rp = out->rowptr;
    for (uint64_t e = 0; e < m; e++) rp[dst[e] + 1]++;
    for (uint32_t i = 0; i < n; i++) rp[i + 1] += rp[i];
    memcpy(cnt, rp, ((size_t)n + 1) * sizeof *cnt);
    for (uint64_t t = 0; t < m; t++) {
        uint64_t e = tmp[t];
        uint64_t slot = cnt[dst[e]]++;
        out->edge[slot] = e;
        out->col[slot] = src[e];
    }
    free(cnt);
    free(tmp);
    out->n = n;
    out->nnz = m;
    return SP_OK;
}

/* ---- threads ----------------------------------------------------------------- */

typedef struct range_job {
    void (*fn)(void *ctx, uint64_t lo, uint64_t hi);
    void *ctx;
    uint64_t lo, hi;
} range_job;

static void *range_main(void *arg) {
    range_job *j = arg;
    j->fn(j->ctx, j->lo, j->hi);
    return NULL;
}

/* Run fn over [0, total) split into `threads` contiguous ranges; thread 0
 * is the caller. A thread that cannot start has its range done by the
 * caller afterwards. */
static void run_ranges(int threads, uint64_t total, void (*fn)(void *, uint64_t, uint64_t),
                       void *ctx) {
    if (threads < 1) threads = 1;
    if (threads > SP_GRAPH_MAX_THREADS) threads = SP_GRAPH_MAX_THREADS;
    range_job jobs[SP_GRAPH_MAX_THREADS];
    pthread_t tid[SP_GRAPH_MAX_THREADS];
    int started[SP_GRAPH_MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        jobs[t].fn = fn;
        jobs[t].ctx = ctx;
        jobs[t].lo = total * (uint64_t)t / (uint64_t)threads;
        jobs[t].hi = total * (uint64_t)(t + 1) / (uint64_t)threads;
        started[t] = 0;
    }
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&tid[t], NULL, range_main, &jobs[t]) == 0;
    range_main(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else range_main(&jobs[t]);
    }
}

/* ---- atomic form (the demonstration) -------------------------------------- */

typedef struct atomic_ctx {
    const uint32_t *src, *dst;
    const float *w, *x;
    uint32_t f;
    _Atomic uint32_t *acc;
} atomic_ctx;

static uint32_t f2u(float v) { uint32_t u; memcpy(&u, &v, 4); return u; }
static float u2f(uint32_t u) { float v; memcpy(&v, &u, 4); return v; }

static void atomic_range(void *arg, uint64_t lo, uint64_t hi) {
    atomic_ctx *c = arg;
    uint32_t f = c->f;
    for (uint64_t e = lo; e < hi; e++) {
        float we = c->w ? c->w[e] : 1.0f;
        const float *xs = c->x + (size_t)c->src[e] * f;
        _Atomic uint32_t *o = c->acc + (size_t)c->dst[e] * f;
        for (uint32_t k = 0; k < f; k++) {
            float m = we * xs[k];
            uint32_t old = atomic_load_explicit(&o[k], memory_order_relaxed);
            while (!atomic_compare_exchange_weak_explicit(&o[k], &old, f2u(u2f(old) + m),
                                                          memory_order_relaxed,
                                                          memory_order_relaxed)) {
            }
        }
    }
}

int sp__scatter_add_atomic(uint32_t n, uint64_t m, const uint32_t *src, const uint32_t *dst,
                           const float *w, const float *x, uint32_t f, int threads, float *out,
                           sp_error *err) {
    if (n == 0 || f == 0) return sp_error_set(err, SP_EINVAL, "scatter: n and f must be > 0");
    size_t cells = (size_t)n * f;
    _Atomic uint32_t *acc = malloc(cells * sizeof *acc);
    if (!acc) return sp_error_set(err, SP_ENOMEM, "scatter: out of memory");
    for (size_t i = 0; i < cells; i++) atomic_init(&acc[i], 0u);
    atomic_ctx c = {src, dst, w, x, f, acc};
    run_ranges(threads, m, atomic_range, &c);
    for (size_t i = 0; i < cells; i++) out[i] = u2f(atomic_load(&acc[i]));
    free(acc);
    return SP_OK;
}

/* ---- deterministic form ------------------------------------------------------ */

typedef struct det_ctx {
    const sp_csr *g;
    const float *w, *x;
    uint32_t f;
    float *out;
} det_ctx;

static void det_range(void *arg, uint64_t lo, uint64_t hi) {
    det_ctx *c = arg;
    uint32_t f = c->f;
    for (uint64_t d = lo; d < hi; d++) {
        float *o = c->out + (size_t)d * f;
        for (uint32_t k = 0; k < f; k++) o[k] = 0.0f;
        for (uint64_t s = c->g->rowptr[d]; s < c->g->rowptr[d + 1]; s++) {
            float we = c->w ? c->w[s] : 1.0f;
            const float *xs = c->x + (size_t)c->g->col[s] * f;
            for (uint32_t k = 0; k < f; k++) o[k] = sp_graph_row_term(o[k], we, xs[k]);
        }
    }
}

int sp__scatter_add_csr(const sp_csr *g, const float *w_csr, const float *x, uint32_t f,
                        int threads, float *out, sp_error *err) {
    if (!g || g->n == 0 || f == 0)
        return sp_error_set(err, SP_EINVAL, "scatter: empty graph or f == 0");
    det_ctx c = {g, w_csr, x, f, out};
    run_ranges(threads, g->n, det_range, &c);
    return SP_OK;
}

/* ---- GCN layer --------------------------------------------------------------- */

void sp_gcn_destroy(sp_gcn *g) {
    if (!g) return;
    free(g->src);
    free(g->dst);
    free(g->w);
    free(g->w_csr);
    sp__csr_free(&g->csr);
    free(g->weight);
    free(g->bias);
    free(g);
}

int sp_gcn_create(uint32_t n, uint64_t m, const uint32_t *src, const uint32_t *dst, uint32_t fin,
                  uint32_t fout, uint64_t seed, sp_gcn **out, sp_error *err) {
    *out = NULL;
    if (n == 0 || fin == 0 || fout == 0)
        return sp_error_set(err, SP_EINVAL, "gcn: n, fin and fout must be > 0");
    sp_gcn *g = calloc(1, sizeof *g);
    if (!g) return sp_error_set(err, SP_ENOMEM, "gcn: out of memory");
    g->n = n;
    g->fin = fin;
    g->fout = fout;
    g->m = m + n;
    g->src = malloc(g->m * sizeof *g->src);
    g->dst = malloc(g->m * sizeof *g->dst);
    g->w = malloc(g->m * sizeof *g->w);
    g->w_csr = malloc(g->m * sizeof *g->w_csr);
    g->weight = malloc((size_t)fin * fout * sizeof *g->weight);
    g->bias = malloc((size_t)fout * sizeof *g->bias);
    uint32_t *deg = calloc(n, sizeof *deg);
    float *dinv = malloc((size_t)n * sizeof *dinv);
    if (!g->src || !g->dst || !g->w || !g->w_csr || !g->weight || !g->bias || !deg || !dinv) {
        free(deg);
        free(dinv);
        sp_gcn_destroy(g);
        return sp_error_set(err, SP_ENOMEM, "gcn: out of memory");
    }
    memcpy(g->src, src, m * sizeof *src);
    memcpy(g->dst, dst, m * sizeof *dst);
    for (uint32_t i = 0; i < n; i++) g->src[m + i] = g->dst[m + i] = i;
    int rc = sp__csr_build(n, g->m, g->src, g->dst, &g->csr, err);
    if (rc != 0) {
        free(deg);
        free(dinv);
        sp_gcn_destroy(g);
        return rc;
    }
    for (uint64_t e = 0; e < g->m; e++) deg[g->dst[e]]++;
    for (uint32_t i = 0; i < n; i++) dinv[i] = (float)(1.0 / sqrt((double)deg[i]));
    for (uint64_t e = 0; e < g->m; e++) g->w[e] = dinv[g->src[e]] * dinv[g->dst[e]];
    for (uint64_t s = 0; s < g->m; s++) g->w_csr[s] = g->w[g->csr.edge[s]];
    free(deg);
    free(dinv);
    sp_key kinit = sp_rng_key(seed, SP_RNG_INIT);
    double bound = 1.0 / sqrt((double)fin);
    for (uint32_t i = 0; i < fin * fout; i++)
        g->weight[i] = sp_nn_init_value(kinit, SP_GCN_TENSOR_W, i, bound);
    for (uint32_t o = 0; o < fout; o++) g->bias[o] = sp_nn_init_value(kinit, SP_GCN_TENSOR_B, o, bound);
    *out = g;
    return SP_OK;
}

int sp_gcn_forward_cpu(const sp_gcn *g, const float *x, sp_scatter_mode mode, int threads,
                       float *out, sp_error *err) {
    uint32_t n = g->n, fin = g->fin, fout = g->fout;
    float *h = malloc((size_t)n * fout * sizeof *h);
    if (!h) return sp_error_set(err, SP_ENOMEM, "gcn: out of memory");
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t o = 0; o < fout; o++) {
            float acc = 0.0f;
            const float *xi = x + (size_t)i * fin, *wo = g->weight + (size_t)o * fin;
            for (uint32_t k = 0; k < fin; k++) acc = sp_graph_row_term(acc, xi[k], wo[k]);
            h[(size_t)i * fout + o] = acc;
        }
    int rc = mode == SP_SCATTER_ATOMIC
                 ? sp__scatter_add_atomic(n, g->m, g->src, g->dst, g->w, h, fout, threads, out, err)
                 : sp__scatter_add_csr(&g->csr, g->w_csr, h, fout, threads, out, err);
    free(h);
    if (rc != 0) return rc;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t o = 0; o < fout; o++) out[(size_t)i * fout + o] += g->bias[o];
    return SP_OK;
}

float sp_graph_sum(const float *v, size_t n) { return sp_nn_tree_sum(v, (long)n, 1); }

int sp_graph_erdos_renyi(uint32_t n, double p, uint64_t seed, uint32_t **src, uint32_t **dst,
                         uint64_t *m, sp_error *err) {
    *src = *dst = NULL;
    *m = 0;
    if (n == 0 || !(p >= 0.0 && p <= 1.0))
        return sp_error_set(err, SP_EINVAL, "erdos-renyi: need n > 0 and p in [0, 1]");
    sp_key k = sp_rng_key(seed, SP_RNG_OTHER);
    size_t scap = 0, dcap = 0, cnt = 0;
    uint32_t *s = NULL, *d = NULL;
    int oom = SP__VEC_RESERVE(s, scap, 1024, 1024) != 0 || SP__VEC_RESERVE(d, dcap, 1024, 1024) != 0;
    for (uint32_t i = 0; !oom && i < n; i++)
        for (uint32_t j = i + 1; !oom && j < n; j++) {
            sp_ctr c = {{i, j, 1u, 0u}};
            if (!(sp_u01d(sp_philox4x32_10(c, k).c[0]) < p)) continue;
            oom = SP__VEC_RESERVE(s, scap, cnt + 2, 1024) != 0 ||
                  SP__VEC_RESERVE(d, dcap, cnt + 2, 1024) != 0;
            if (oom) break;
            s[cnt] = i; d[cnt] = j; cnt++;
            s[cnt] = j; d[cnt] = i; cnt++;
        }
    if (oom) {
        free(s);
        free(d);
        return sp_error_set(err, SP_ENOMEM, "erdos-renyi: out of memory");
    }
    *src = s;
    *dst = d;
    *m = cnt;
    return SP_OK;
}

void sp_graph_features(uint32_t n, uint32_t f, uint64_t seed, float *x) {
    sp_key k = sp_rng_key(seed, SP_RNG_OTHER);
    uint64_t total = (uint64_t)n * f;
    for (uint64_t e = 0; e < total; e += 4) {
        sp_ctr c = {{(uint32_t)(e / 4), 0u, 2u, 0u}};
        sp_ctr o = sp_philox4x32_10(c, k);
        for (uint64_t q = 0; q < 4 && e + q < total; q++)
            x[e + q] = 2.0f * sp_u01f(o.c[q]) - 1.0f;
    }
}

/* The CUDA forms live in the CUDA plugin (graph_cuda.cu, loaded on the
 * first call: train/cuda_plugin.h). */
#ifdef SEEDPIPE_HAVE_CUDA
int sp_graph_cuda_compiled(void) { return 1; }
#else
int sp_graph_cuda_compiled(void) { return 0; }
#endif

int sp_graph_cuda_device(char *name, size_t n) {
    if (name && n) name[0] = '\0';
    const sp__cuda_plugin *cuda = sp__cuda_plugin_load(NULL);
    return cuda ? cuda->device(name, n) : 0;
}

int sp_gcn_forward_cuda(const sp_gcn *g, const float *x, sp_scatter_mode mode, float *out,
                        sp_error *err) {
    const sp__cuda_plugin *cuda = sp__cuda_plugin_load(err);
    return cuda ? cuda->gcn_forward(g, x, mode, out, err) : SP_EUNSUPP;
}

int sp__scatter_cuda_time(const sp_csr *g, const uint32_t *src, const uint32_t *dst, uint64_t m,
                          uint32_t f, int reps, double *ms_atomic, double *ms_det, sp_error *err) {
    *ms_atomic = *ms_det = 0.0;
    const sp__cuda_plugin *cuda = sp__cuda_plugin_load(err);
    return cuda ? cuda->scatter_time(g, src, dst, m, f, reps, ms_atomic, ms_det, err)
                : SP_EUNSUPP;
}
