/* model_cpu.c - the CPU reference backend of the training core
 * (nn_backend.h: sp__nn_cpu_backend): the small CNN of model.c over a
 * batch, on threads, with fixed reduction trees, and its data-parallel
 * step.
 *
 * HOW THE CPU BACKEND STAYS BIT-IDENTICAL FOR ANY THREAD COUNT:
 *  1. Per-sample phase: sample n's forward and backward run start to end
 *     in one thread and write its own slices: the conv tensors' gradients
 *     grads[n * Pc .. (n+1) * Pc) (Pc = parameters before fc.w), the fc
 *     input feat[n] (32 * H/4 * W/4 floats) and dlogits dl[n] (the loss
 *     gradient, pre-scaled by 1/B), and loss[n]. Threads take samples t,
 *     t + T, t + 2T, ...; which thread ran a sample cannot change its bits.
 *  2. Reduce-and-update phase: parameter p's batch gradient is the fixed
 *     tree of nn_math.h (sp_nn_tree_sum) over the samples in batch order
 *     of its per-sample gradient: grads[n * Pc + p] for a conv parameter,
 *     dl[n][o] * feat[n][i] for fc.w[o][i] (the very product
 *     sp__model_sample_grad writes, formed here instead of stored), dl[n][o]
 *     for fc.b[o]; then sp_nn_sgd_update. The tree runs on 32 consecutive
 *     parameters at once (tree_lanes), each lane with sp_nn_tree_sum's
 *     additions. Threads take fixed contiguous ranges of these blocks;
 *     each parameter is computed by exactly one thread with the same tree.
 *     (tests/test_nn.c checks a step bit for bit against
 *     sp__model_sample_grad + sp_nn_tree_sum + sp_nn_sgd_update.)
 *  3. The batch loss is sp_nn_tree_sum(loss, B, 1) / B.
 * Cost: B * (Pc + feat + classes) floats of per-sample state (about 53 KB
 * per sample for a 64 px RGB input and 10 classes), the price of a reduction order that
 * depends on nothing but B. If a thread cannot be created its share runs
 * in the calling thread, with the same result.
 */
#include "seedpipe/model.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_write_internal.h"
#include "train/model_internal.h"
#include "train/nn_backend.h"
#include "train/nn_math.h"

/* The fixed tree of nn_math.h (sp_nn_tree_push / _value) run on TREE_LANES
 * consecutive parameters at once: the merges depend only on the sizes
 * pushed, so every lane gets exactly the additions sp_nn_tree_sum would do
 * for it. lt_push takes a run of `size` leaves already summed (a leaf:
 * size 1; a whole aligned subtree: its size, see train.h). */
#define TREE_LANES 32
typedef struct lane_tree {
    float val[64][TREE_LANES];
    long size[64];
    int top;
} lane_tree;

static void lt_push(lane_tree *t, float *x, long sz, int lanes) {
    while (t->top > 0 && t->size[t->top - 1] == sz) {
        for (int j = 0; j < lanes; j++) x[j] = t->val[t->top - 1][j] + x[j];
        sz += t->size[t->top - 1];
        t->top--;
    }
    memcpy(t->val[t->top], x, (size_t)lanes * sizeof *x);
    t->size[t->top] = sz;
    t->top++;
}

static void lt_value(const lane_tree *t, int lanes, float *out) {
    if (t->top == 0) {
        for (int j = 0; j < lanes; j++) out[j] = 0.0f;
        return;
    }
    memcpy(out, t->val[t->top - 1], (size_t)lanes * sizeof *out);
    for (int i = t->top - 2; i >= 0; i--)
        for (int j = 0; j < lanes; j++) out[j] = t->val[i][j] + out[j];
}

/* The tree over n samples: sample s's value of lane j is a[s * sa + j]
 * (b == NULL) or a[s * sa] * b[s * sb + j]. lanes <= TREE_LANES; n == 0
 * gives 0. */
static void tree_lanes(long n, const float *a, size_t sa, const float *b, size_t sb, int lanes,
                       float *out) {
    lane_tree t;
    t.top = 0;
    for (long s = 0; s < n; s++) {
        float x[TREE_LANES];
        if (b) {
            float g = a[(size_t)s * sa];
            const float *bs = b + (size_t)s * sb;
            for (int j = 0; j < lanes; j++) x[j] = g * bs[j];
        } else {
            memcpy(x, a + (size_t)s * sa, (size_t)lanes * sizeof *x);
        }
        lt_push(&t, x, 1, lanes);
    }
    lt_value(&t, lanes, out);
}

/* The maximal aligned spans of [off, off + m): [p, p + 2^j) with 2^j
 * dividing p (any 2^j for p = 0), greedily from off. At most 2 * 32 + 1
 * spans for 32-bit positions. @return their number. */
#define MAX_SPANS 66
static int aligned_spans(uint32_t off, uint32_t m, uint32_t *start, uint32_t *size) {
    int k = 0;
    uint64_t p = off, end = (uint64_t)off + m;
    while (p < end) {
        uint64_t s = p ? (p & (~p + 1)) : (uint64_t)1 << 40;
        while (p + s > end) s >>= 1;
        start[k] = (uint32_t)p;
        size[k] = (uint32_t)s;
        k++;
        p += s;
    }
    return k;
}

/* ---- the CPU backend ---------------------------------------------------------- */

typedef struct cpu_ctx {
    sp_model_layout l;
    float lr, mu, wd;
    int threads;
    float *params, *mom;
    float *ws;              /* threads * l.workspace */
    size_t pconv;           /* parameters before fc.w: the conv tensors */
    float *grads;           /* cap * pconv per-sample conv gradients */
    float *feat;            /* cap * feat per-sample fc inputs (p2) */
    float *dl;              /* cap * classes per-sample dlogits (scaled) */
    float *loss;            /* cap per-sample losses */
    int32_t *pred;          /* cap predictions (eval) */
    uint32_t cap;
    uint8_t *xch;           /* data-parallel exchange: send, then receive bytes */
    size_t xch_cap;
} cpu_ctx;

typedef struct job {
    cpu_ctx *c;
    int kind;               /* 0: grads, 1: reduce+update, 2: eval forward,
                             * 3: span sums (data-parallel), 4: spans+update */
    const float *x;
    const int32_t *labels;
    uint32_t n;             /* samples here */
    uint32_t total;         /* samples in the global batch (the 1/B scale) */
    /* kind 3: nspans local spans (first sample, size) -> span_out[k] */
    int nspans;
    const uint32_t *span_first, *span_size;
    float *const *span_out;
    /* kind 4: every rank's spans, in position order */
    int ngspans;
    const float *const *gspan;
    const uint32_t *gspan_size;
} job;

typedef struct task { const job *j; int t; } task;

/* The parameter vector in blocks of TREE_LANES, each within one of: the
 * conv tensors (per-sample gradients), one row o of fc.w (dl[o] * feat),
 * fc.b. */
static size_t nblocks(const cpu_ctx *c) {
    size_t F = c->l.feat, K = (size_t)c->l.in.classes;
    return (c->pconv + TREE_LANES - 1) / TREE_LANES + K * ((F + TREE_LANES - 1) / TREE_LANES) +
           (K + TREE_LANES - 1) / TREE_LANES;
}

/* Block bi: its first parameter *p0, its *lanes, and in g the tree over
 * samples [s0, s0 + n) of their per-sample gradients (n == 0: zeros). */
static void block_sum(const cpu_ctx *c, size_t bi, uint32_t s0, uint32_t n, float *g, size_t *p0,
                      size_t *lanes) {
    const sp_model_layout *l = &c->l;
    size_t F = l->feat, K = (size_t)l->in.classes, Pc = c->pconv;
    size_t per_row = (F + TREE_LANES - 1) / TREE_LANES;
    size_t nb_conv = (Pc + TREE_LANES - 1) / TREE_LANES, nb_fc = K * per_row;
    const float *dl = c->dl + (size_t)s0 * K;
    if (bi < nb_conv) {
        *p0 = bi * TREE_LANES;
        *lanes = Pc - *p0 < TREE_LANES ? Pc - *p0 : TREE_LANES;
        tree_lanes((long)n, c->grads + (size_t)s0 * Pc + *p0, Pc, NULL, 0, (int)*lanes, g);
    } else if (bi < nb_conv + nb_fc) {
        size_t o = (bi - nb_conv) / per_row, i0 = (bi - nb_conv) % per_row * TREE_LANES;
        *p0 = l->off[SP_T_FC_W] + o * F + i0;
        *lanes = F - i0 < TREE_LANES ? F - i0 : TREE_LANES;
        tree_lanes((long)n, dl + o, K, c->feat + (size_t)s0 * F + i0, F, (int)*lanes, g);
    } else {
        size_t o0 = (bi - nb_conv - nb_fc) * TREE_LANES;
        *p0 = l->off[SP_T_FC_B] + o0;
        *lanes = K - o0 < TREE_LANES ? K - o0 : TREE_LANES;
        tree_lanes((long)n, dl + o0, K, NULL, 0, (int)*lanes, g);
    }
}

static void run_task(const job *j, int t) {
    cpu_ctx *c = j->c;
    const sp_model_layout *l = &c->l;
    int T = c->threads;
    float *ws = c->ws + (size_t)t * l->workspace;
    size_t sample = (size_t)l->in.c * (size_t)l->in.h * (size_t)l->in.w;
    if (j->kind == 0) {
        float scale = 1.0f / (float)j->total;
        size_t F = l->feat, K = (size_t)l->in.classes;
        for (uint32_t s = (uint32_t)t; s < j->n; s += (uint32_t)T) {
            int pred = 0;
            ws_view v = sp__model_ws_split(l, ws);
            c->loss[s] = sp__model_sample_backward(l, c->params, j->x + s * sample, j->labels[s],
                                                   scale, &v, c->grads + (size_t)s * c->pconv,
                                                   NULL, NULL, &pred);
            memcpy(c->feat + (size_t)s * F, v.p2, F * sizeof(float));
            memcpy(c->dl + (size_t)s * K, v.dlogits, K * sizeof(float));
            c->pred[s] = pred;
        }
    } else if (j->kind == 2) {
        float *logits = sp__model_ws_split(l, ws).dlogits;   /* unused by the forward pass */
        for (uint32_t s = (uint32_t)t; s < j->n; s += (uint32_t)T) {
            c->loss[s] = sp__model_sample_forward(l, c->params, j->x + s * sample, j->labels[s],
                                                  ws, logits);
            c->pred[s] = sp_nn_argmax(logits, l->in.classes);
        }
    } else {
        /* Thread t takes a contiguous range of parameter blocks; each
         * parameter is computed by exactly one thread with the same tree. */
        size_t nb = nblocks(c), per = (nb + (size_t)T - 1) / (size_t)T;
        size_t b0 = (size_t)t * per, b1 = b0 + per < nb ? b0 + per : nb;
        float g[TREE_LANES];
        for (size_t bi = b0; bi < b1; bi++) {
            size_t p0, lanes;
            if (j->kind == 3) {
                for (int k = 0; k < j->nspans; k++) {
                    block_sum(c, bi, j->span_first[k], j->span_size[k], g, &p0, &lanes);
                    memcpy(j->span_out[k] + p0, g, lanes * sizeof *g);
                }
                continue;
            }
            if (j->kind == 1) {
                block_sum(c, bi, 0, j->n, g, &p0, &lanes);
            } else {
                block_sum(c, bi, 0, 0, g, &p0, &lanes);
                lane_tree lt;
                lt.top = 0;
                for (int k = 0; k < j->ngspans; k++) {
                    memcpy(g, j->gspan[k] + p0, lanes * sizeof *g);
                    lt_push(&lt, g, (long)j->gspan_size[k], (int)lanes);
                }
                lt_value(&lt, (int)lanes, g);
            }
            for (size_t q = 0; q < lanes; q++)
                sp_nn_sgd_update(&c->params[p0 + q], &c->mom[p0 + q], g[q], c->lr, c->mu, c->wd);
        }
    }
}

static void *thread_main(void *arg) {
    task *tk = (task *)arg;
    run_task(tk->j, tk->t);
    return NULL;
}

/* Run the job's T shares: 1..T-1 on new threads, 0 (and any share whose
 * thread could not start) here. */
static void run_job(const job *j) {
    int T = j->c->threads;
    pthread_t th[64];
    task tk[64];
    int started[64] = {0};
    for (int t = 1; t < T; t++) {
        tk[t].j = j;
        tk[t].t = t;
        started[t] = pthread_create(&th[t], NULL, thread_main, &tk[t]) == 0;
    }
    run_task(j, 0);
    for (int t = 1; t < T; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else run_task(j, t);
    }
}

static int ensure_cap(cpu_ctx *c, uint32_t n, sp_error *err) {
    if (n <= c->cap) return 0;
    size_t F = c->l.feat, K = (size_t)c->l.in.classes, per = c->pconv + F + K;
    if ((size_t)n > SIZE_MAX / sizeof(float) / per)
        return sp_error_set(err, SP_ENOMEM, "cpu backend: batch of %u too large", n);
    float *g = (float *)realloc(c->grads, (size_t)n * c->pconv * sizeof *g);
    if (!g) return sp_error_set(err, SP_ENOMEM, "cpu backend: per-sample gradients (%u x %zu)", n,
                                c->pconv);
    c->grads = g;
    float *fe = (float *)realloc(c->feat, (size_t)n * F * sizeof *fe);
    if (!fe) return sp_error_set(err, SP_ENOMEM, "cpu backend: per-sample features (%u x %zu)", n, F);
    c->feat = fe;
    float *dl = (float *)realloc(c->dl, (size_t)n * K * sizeof *dl);
    if (!dl) return sp_error_set(err, SP_ENOMEM, "cpu backend: out of memory");
    c->dl = dl;
    float *lo = (float *)realloc(c->loss, n * sizeof *lo);
    if (!lo) return sp_error_set(err, SP_ENOMEM, "cpu backend: out of memory");
    c->loss = lo;
    int32_t *pr = (int32_t *)realloc(c->pred, n * sizeof *pr);
    if (!pr) return sp_error_set(err, SP_ENOMEM, "cpu backend: out of memory");
    c->pred = pr;
    c->cap = n;
    return 0;
}

static void cpu_destroy(void *ctx) {
    cpu_ctx *c = (cpu_ctx *)ctx;
    if (!c) return;
    free(c->params);
    free(c->mom);
    free(c->ws);
    free(c->grads);
    free(c->feat);
    free(c->dl);
    free(c->loss);
    free(c->pred);
    free(c->xch);
    free(c);
}

static int cpu_create(const sp_model_layout *l, const sp_train_config *cfg, const float *params,
                      const float *momentum, void **out, sp_error *err) {
    cpu_ctx *c = (cpu_ctx *)calloc(1, sizeof *c);
    if (!c) return sp_error_set(err, SP_ENOMEM, "cpu backend: out of memory");
    c->l = *l;
    c->pconv = l->off[SP_T_FC_W];
    c->lr = cfg->lr;
    c->mu = cfg->momentum;
    c->wd = cfg->weight_decay;
    c->threads = cfg->threads < 1 ? 1 : cfg->threads > 64 ? 64 : cfg->threads;
    c->params = (float *)malloc(l->nparams * sizeof(float));
    c->mom = (float *)malloc(l->nparams * sizeof(float));
    c->ws = (float *)malloc((size_t)c->threads * l->workspace * sizeof(float));
    if (!c->params || !c->mom || !c->ws) {
        cpu_destroy(c);
        return sp_error_set(err, SP_ENOMEM, "cpu backend: out of memory");
    }
    memcpy(c->params, params, l->nparams * sizeof(float));
    memcpy(c->mom, momentum, l->nparams * sizeof(float));
    *out = c;
    return 0;
}

static int cpu_step(void *ctx, const float *x, const int32_t *labels, uint32_t n, float *loss,
                    uint32_t *correct, sp_error *err) {
    cpu_ctx *c = (cpu_ctx *)ctx;
    int rc = ensure_cap(c, n, err);
    if (rc) return rc;
    job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    j.x = x;
    j.labels = labels;
    j.n = j.total = n;
    run_job(&j);
    j.kind = 1;
    run_job(&j);
    *loss = sp_nn_tree_sum(c->loss, (long)n, 1) / (float)n;
    uint32_t ok = 0;
    for (uint32_t s = 0; s < n; s++) ok += c->pred[s] == labels[s];
    *correct = ok;
    return 0;
}

/* The data-parallel exchange's layout: rank k's aligned spans (nsp[k];
 * their sizes at gsize[k * MAX_SPANS]) and message bytes[k] (u32 correct,
 * counts[k] losses, the spans' sums); c->xch grown to hold this rank's
 * message and then every rank's. */
static int xch_plan(cpu_ctx *c, const sp__nn_part *pt, int *nsp, uint32_t *gsize, size_t *bytes,
                    sp_error *err) {
    uint32_t first[MAX_SPANS];
    size_t recv = 0, off = 0, P = c->l.nparams;
    for (uint32_t k = 0; k < pt->comm->world; k++) {
        nsp[k] = aligned_spans((uint32_t)off, pt->counts[k], first, gsize + (size_t)k * MAX_SPANS);
        off += pt->counts[k];
        bytes[k] = 4 + 4 * (size_t)pt->counts[k] + 4 * P * (size_t)nsp[k];
        recv += bytes[k];
    }
    size_t me = bytes[pt->comm->rank];
    if (me + recv > c->xch_cap) {
        uint8_t *nb = (uint8_t *)realloc(c->xch, me + recv);
        if (!nb)
            return sp_error_set(err, SP_ENOMEM, "cpu backend: %zu bytes for the gradient exchange",
                                me + recv);
        c->xch = nb;
        c->xch_cap = me + recv;
    }
    return 0;
}

/* The gathered messages rb (xch_plan's layout), in position order: every
 * rank's correct count summed into *hits, the losses into losses, every
 * span's sums and size into gspan, gsize (compacted in place).
 * @return the number of spans. */
static int unpack(const cpu_ctx *c, const sp__nn_part *pt, const uint8_t *rb, const int *nsp,
                  const size_t *bytes, uint32_t *gsize, const float **gspan, float *losses,
                  uint32_t *hits) {
    size_t P = c->l.nparams, off = 0;
    int ng = 0;
    const uint8_t *p = rb;
    for (uint32_t k = 0; k < pt->comm->world; k++) {
        uint32_t hk;
        memcpy(&hk, p, 4);
        *hits += hk;
        memcpy(losses + off, p + 4, 4 * (size_t)pt->counts[k]);
        off += pt->counts[k];
        const uint8_t *q = p + 4 + 4 * (size_t)pt->counts[k];
        for (int i = 0; i < nsp[k]; i++, ng++) {
            gspan[ng] = (const float *)(const void *)(q + 4 * P * (size_t)i);
            gsize[ng] = gsize[(size_t)k * MAX_SPANS + (size_t)i];
        }
        p += bytes[k];
    }
    return ng;
}

/* A data-parallel step (train.h "data-parallel training"). Rank k sends
 * u32 correct, counts[k] float losses, then its aligned spans' sums
 * (nparams floats each); every rank pushes all spans in position order
 * and updates its own copy of the parameters: the same bits everywhere. */
static int cpu_step_part(void *ctx, const float *x, const int32_t *labels, const sp__nn_part *pt,
                         float *loss, uint32_t *correct, sp_error *err) {
    cpu_ctx *c = (cpu_ctx *)ctx;
    const sp_train_comm *comm = pt->comm;
    uint32_t W = comm->world, n = pt->counts[comm->rank];
    size_t P = c->l.nparams;
    int rc = ensure_cap(c, n, err);
    if (rc) return rc;
    size_t *bytes = (size_t *)malloc(W * sizeof *bytes);
    int *nsp = (int *)malloc(W * sizeof *nsp);
    uint32_t *gsize = (uint32_t *)malloc((size_t)W * MAX_SPANS * sizeof *gsize);
    const float **gspan = (const float **)malloc((size_t)W * MAX_SPANS * sizeof *gspan);
    float *losses = (float *)malloc(((size_t)pt->total + 1) * sizeof *losses);
    if (!bytes || !nsp || !gsize || !gspan || !losses) {
        rc = sp_error_set(err, SP_ENOMEM, "cpu backend: out of memory (data-parallel step)");
        goto out;
    }
    rc = xch_plan(c, pt, nsp, gsize, bytes, err);
    if (rc) goto out;
    uint32_t first[MAX_SPANS], size[MAX_SPANS];
    size_t me = bytes[comm->rank];
    uint8_t *sb = c->xch, *rb = c->xch + me;

    /* Per-sample gradients with the global 1/B, then this rank's spans. */
    job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    j.x = x;
    j.labels = labels;
    j.n = n;
    j.total = pt->total;
    if (n) run_job(&j);
    int ns = aligned_spans(pt->offset, n, first, size);
    float *out[MAX_SPANS];
    for (int k = 0; k < ns; k++) {
        first[k] -= pt->offset;                   /* local sample index */
        out[k] = (float *)(void *)(sb + 4 + 4 * (size_t)n + 4 * P * (size_t)k);
    }
    uint32_t ok = 0;
    for (uint32_t s = 0; s < n; s++) ok += c->pred[s] == labels[s];
    memcpy(sb, &ok, 4);
    if (n) memcpy(sb + 4, c->loss, 4 * (size_t)n);
    j.kind = 3;
    j.nspans = ns;
    j.span_first = first;
    j.span_size = size;
    j.span_out = out;
    if (ns) run_job(&j);

    rc = comm->allgather(comm->ctx, sb, me, rb, bytes, err);
    if (rc) goto out;

    /* Every rank's spans in position order, then the tree's last merges. */
    uint32_t hits = 0;
    j.kind = 4;
    j.ngspans = unpack(c, pt, rb, nsp, bytes, gsize, gspan, losses, &hits);
    j.gspan = gspan;
    j.gspan_size = gsize;
    run_job(&j);
    *loss = sp_nn_tree_sum(losses, (long)pt->total, 1) / (float)pt->total;
    *correct = hits;
out:
    free(bytes);
    free(nsp);
    free(gsize);
    free(gspan);
    free(losses);
    return rc;
}

static int cpu_eval(void *ctx, const float *x, const int32_t *labels, uint32_t n,
                    float *loss, uint32_t *correct, sp_error *err) {
    cpu_ctx *c = (cpu_ctx *)ctx;
    int rc = ensure_cap(c, n, err);
    if (rc) return rc;
    job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    j.kind = 2;
    j.x = x;
    j.labels = labels;
    j.n = j.total = n;
    run_job(&j);
    uint32_t ok = 0;
    for (uint32_t s = 0; s < n; s++) ok += c->pred[s] == labels[s];
    *correct = ok;
    *loss = sp_nn_tree_sum(c->loss, (long)n, 1) / (float)n;
    return 0;
}

static int cpu_get(void *ctx, float *params, float *momentum, sp_error *err) {
    (void)err;
    cpu_ctx *c = (cpu_ctx *)ctx;
    if (params) memcpy(params, c->params, c->l.nparams * sizeof(float));
    if (momentum) memcpy(momentum, c->mom, c->l.nparams * sizeof(float));
    return 0;
}

static int cpu_set(void *ctx, const float *params, const float *momentum, sp_error *err) {
    (void)err;
    cpu_ctx *c = (cpu_ctx *)ctx;
    if (params) memcpy(c->params, params, c->l.nparams * sizeof(float));
    if (momentum) memcpy(c->mom, momentum, c->l.nparams * sizeof(float));
    return 0;
}

static int cpu_describe(void *ctx, char *buf, size_t size) {
    cpu_ctx *c = (cpu_ctx *)ctx;
    sp__jw w = sp__jw_buf(buf, size);
    sp__jw_inside(&w);   /* members: the caller writes the braces */
    sp__jw_kstr(&w, "backend", "cpu");
    sp__jw_key(&w, "threads");
    sp__jw_i64(&w, c->threads);
    sp__jw_kstr(&w, "conv_simd", sp__nn_conv_isa());
    sp__jw_kstr(&w, "reduction", "per-sample gradients, fixed binary-counter tree over the batch");
    return (int)w.len;
}

const sp__nn_backend sp__nn_cpu_backend = {"cpu",    cpu_create,    cpu_destroy,
                                           cpu_step, cpu_step_part, cpu_eval,
                                           cpu_get,  cpu_set,       cpu_describe};
