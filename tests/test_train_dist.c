/* test_train_dist.c - data-parallel training: the same weights for any world size.
 *
 * The ranks are threads here, each with its own trainer, joined by a
 * communicator whose allgather is a barrier and a copy (what the CLI does
 * with MPI_Allgatherv, without MPI). Checked:
 *  1. For a global batch of 48 and K = 1, 2, 3, 4, 6, 8, 12, 16, 24 and 48
 *     ranks (every rank taking its contiguous slice), 4 SGD steps give on
 *     every rank the final-weights digest, the step losses and the hit
 *     counts of one process training on the whole batch, bit for bit;
 *     also with 3 CPU threads per rank.
 *  2. Uneven slices (a short last batch, a skipped sample): slice sizes
 *     {5, 0, 7, 1}, {0, 13} and {1, 1, 1, ..., 1} (13 ranks) give the
 *     single-process bits for the 13-sample batch.
 *  3. Before the exchange each rank holds a partial sum only: a rank's
 *     weights after a step with comm == NULL on its slice alone differ
 *     from the global step's (the test would pass for a no-op exchange
 *     otherwise).
 *  4. Refusals: a bad rank/world (SP_EINVAL); an exchange that fails gives
 *     its error back and takes no step.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/train.h"
#include "train/train_internal.h"

#define C_ 3
#define H_ 16
#define W_ 16
#define CLASSES 5
#define SAMPLE (C_ * H_ * W_)
#define STEPS 4
#define MAXW 64

/* ---- an in-process communicator: threads, a barrier, a copy --------------------- */

typedef struct tcomm {
    pthread_barrier_t bar;
    uint32_t world;
    const void *send[MAXW];
    size_t bytes[MAXW];
} tcomm;

typedef struct rank_ctx { tcomm *t; uint32_t rank; } rank_ctx;

static int tc_allgather(void *ctx, const void *send, size_t send_bytes, void *recv,
                        const size_t *recv_bytes, sp_error *err) {
    rank_ctx *rc = (rank_ctx *)ctx;
    tcomm *t = rc->t;
    t->send[rc->rank] = send;
    t->bytes[rc->rank] = send_bytes;
    pthread_barrier_wait(&t->bar);
    uint8_t *p = (uint8_t *)recv;
    int bad = 0;
    for (uint32_t k = 0; k < t->world; k++) {
        if (t->bytes[k] != recv_bytes[k]) bad = 1;
        else memcpy(p, t->send[k], t->bytes[k]);
        p += recv_bytes[k];
    }
    pthread_barrier_wait(&t->bar);   /* the send buffers stay valid until all copied */
    return bad ? sp_error_set(err, SP_EIO, "rank %u: sizes disagree", rc->rank) : 0;
}

static int failing_allgather(void *ctx, const void *send, size_t send_bytes, void *recv,
                             const size_t *recv_bytes, sp_error *err) {
    (void)ctx, (void)send, (void)send_bytes, (void)recv, (void)recv_bytes;
    return sp_error_set(err, SP_EIO, "exchange: peer rank 1 is gone");
}

/* ---- data and the reference -------------------------------------------------------- */

static float g_x[STEPS][48 * SAMPLE];
static int32_t g_y[STEPS][48];

static void make_data(void) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int b = 0; b < STEPS; b++) {
        for (int i = 0; i < 48 * SAMPLE; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            g_x[b][i] = (float)(s >> 40) / (float)(1u << 24);
        }
        for (int i = 0; i < 48; i++) g_y[b][i] = (int32_t)((i * 7 + b) % CLASSES);
    }
}

static sp_train_config config(int threads) {
    sp_train_config cfg;
    sp_train_config_default(&cfg);
    cfg.seed = 11;
    cfg.shape = (sp_model_shape){C_, H_, W_, CLASSES};
    cfg.threads = threads;
    return cfg;
}

typedef struct result {
    sp_digest w;
    float loss[STEPS];
    uint32_t correct[STEPS];
} result;

/* One process: steps on samples [0, n) of each batch. */
static result single(uint32_t n) {
    sp_error err;
    sp_train_config cfg = config(1);
    sp_trainer *tr;
    CHECK_OK(sp_trainer_create(&cfg, &tr, &err), &err);
    result r;
    for (int b = 0; b < STEPS; b++)
        CHECK_OK(sp__trainer_step(tr, g_x[b], g_y[b], n, &r.loss[b], &r.correct[b], &err), &err);
    CHECK(sp_trainer_last_samples(tr) == n);
    CHECK_OK(sp_trainer_weights_digest(tr, &r.w, &err), &err);
    sp_trainer_destroy(tr);
    return r;
}

typedef struct worker {
    rank_ctx rc;
    uint32_t first, count, total;
    int threads;
    result r;
    int rc_step;
} worker;

static void *rank_main(void *arg) {
    worker *w = (worker *)arg;
    sp_error err;
    sp_train_config cfg = config(w->threads);
    sp_trainer *tr;
    CHECK_OK(sp_trainer_create(&cfg, &tr, &err), &err);
    sp_train_comm comm = {w->rc.rank, w->rc.t->world, &w->rc, tc_allgather};
    CHECK_OK(sp_trainer_set_comm(tr, &comm, &err), &err);
    for (int b = 0; b < STEPS; b++) {
        CHECK_OK(sp__trainer_step(tr, g_x[b] + (size_t)w->first * SAMPLE, g_y[b] + w->first,
                                 w->count, &w->r.loss[b], &w->r.correct[b], &err),
                 &err);
        CHECK(sp_trainer_last_samples(tr) == w->total);
    }
    CHECK_OK(sp_trainer_weights_digest(tr, &w->r.w, &err), &err);
    sp_trainer_destroy(tr);
    return NULL;
}

/* K ranks with the given slice sizes (consecutive); every rank's result
 * must equal ref. */
static void run_ranks(uint32_t K, const uint32_t *counts, int threads, const result *ref) {
    tcomm t;
    memset(&t, 0, sizeof t);
    t.world = K;
    CHECK(pthread_barrier_init(&t.bar, NULL, K) == 0);
    worker w[MAXW];
    pthread_t th[MAXW];
    uint32_t first = 0, total = 0;
    for (uint32_t k = 0; k < K; k++) total += counts[k];
    for (uint32_t k = 0; k < K; k++) {
        w[k] = (worker){{&t, k}, first, counts[k], total, threads, {{0, 0}, {0}, {0}}, 0};
        first += counts[k];
        CHECK(pthread_create(&th[k], NULL, rank_main, &w[k]) == 0);
    }
    for (uint32_t k = 0; k < K; k++) pthread_join(th[k], NULL);
    pthread_barrier_destroy(&t.bar);
    for (uint32_t k = 0; k < K; k++) {
        CHECK_MSG(w[k].r.w.hi == ref->w.hi && w[k].r.w.lo == ref->w.lo,
                  "world %u rank %u: weights differ from the single process", K, k);
        for (int b = 0; b < STEPS; b++) {
            CHECK_MSG(memcmp(&w[k].r.loss[b], &ref->loss[b], 4) == 0,
                      "world %u rank %u step %d: loss %.9g, single process %.9g", K, k, b,
                      (double)w[k].r.loss[b], (double)ref->loss[b]);
            CHECK(w[k].r.correct[b] == ref->correct[b]);
        }
    }
}

static void test_world_sizes(void) {
    result ref = single(48);
    static const uint32_t worlds[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 48};
    for (size_t i = 0; i < sizeof worlds / sizeof *worlds; i++) {
        uint32_t K = worlds[i], counts[MAXW];
        for (uint32_t k = 0; k < K; k++) counts[k] = 48 / K;
        run_ranks(K, counts, 1, &ref);
        if (K <= 4) run_ranks(K, counts, 3, &ref);
    }
    char hex[33];
    sp_digest_hex(ref.w, hex);
    printf("world sizes 1..48, batch 48, %d steps: every rank has the single-process weights %s\n",
           STEPS, hex);
}

static void test_uneven(void) {
    result ref = single(13);
    uint32_t a[] = {5, 0, 7, 1}, b[] = {0, 13}, ones[13];
    for (int i = 0; i < 13; i++) ones[i] = 1;
    run_ranks(4, a, 1, &ref);
    run_ranks(2, b, 2, &ref);
    run_ranks(13, ones, 1, &ref);
    printf("uneven slices {5,0,7,1}, {0,13}, 13 x {1}: single-process bits\n");
}

static void test_partial_differs(void) {
    /* A rank stepping alone on its half is not the global step. */
    sp_error err;
    sp_train_config cfg = config(1);
    sp_trainer *tr;
    CHECK_OK(sp_trainer_create(&cfg, &tr, &err), &err);
    float l;
    CHECK_OK(sp__trainer_step(tr, g_x[0], g_y[0], 24, &l, NULL, &err), &err);
    sp_digest half;
    CHECK_OK(sp_trainer_weights_digest(tr, &half, &err), &err);
    sp_trainer_destroy(tr);
    CHECK_OK(sp_trainer_create(&cfg, &tr, &err), &err);
    CHECK_OK(sp__trainer_step(tr, g_x[0], g_y[0], 48, &l, NULL, &err), &err);
    sp_digest full;
    CHECK_OK(sp_trainer_weights_digest(tr, &full, &err), &err);
    sp_trainer_destroy(tr);
    CHECK(half.hi != full.hi || half.lo != full.lo);
}

static void test_refusals(void) {
    sp_error err;
    sp_train_config cfg = config(1);
    sp_trainer *tr;
    CHECK_OK(sp_trainer_create(&cfg, &tr, &err), &err);
    sp_train_comm bad = {2, 2, NULL, failing_allgather};
    CHECK(sp_trainer_set_comm(tr, &bad, &err) == SP_EINVAL);
    bad.world = 0;
    bad.rank = 0;
    CHECK(sp_trainer_set_comm(tr, &bad, &err) == SP_EINVAL);
    sp_train_comm fails = {0, 2, NULL, failing_allgather};
    CHECK_OK(sp_trainer_set_comm(tr, &fails, &err), &err);
    CHECK(sp__trainer_step(tr, g_x[0], g_y[0], 24, NULL, NULL, &err) == SP_EIO);
    CHECK(strstr(err.msg, "peer rank 1 is gone") != NULL);
    CHECK(sp_trainer_steps(tr) == 0);
    CHECK_OK(sp_trainer_set_comm(tr, NULL, &err), &err);
    CHECK_OK(sp__trainer_step(tr, g_x[0], g_y[0], 24, NULL, NULL, &err), &err);
    CHECK(sp_trainer_steps(tr) == 1);
    CHECK(sp__trainer_step(tr, g_x[0], g_y[0], 0, NULL, NULL, &err) == SP_EINVAL);
    sp_trainer_destroy(tr);
}

static const sp_case cases[] = {
    SP_CASE(test_partial_differs),
    SP_CASE(test_refusals),
    SP_CASE(test_uneven),
    SP_CASE(test_world_sizes),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), make_data, NULL);
}
