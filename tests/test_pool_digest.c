/* test_pool_digest.c - sp_pool_digest(): whoever hashes a batch, the digest is
 * sp_batch_digest()'s.
 *
 * The pool hashes a batch while it is computed, by the consumer (a core is
 * free for it) or by the workers (every CPU runs a worker); pool_digest.c's
 * HOW IT WORKS. SEEDPIPE_POOL_DIGEST chooses the hasher here, so both run
 * on any machine:
 *  - test_hashers: each hasher with 1, 2 and 3 workers, two epochs on a
 *    built-in shapes set: every batch's sp_pool_digest() equals the
 *    sp_batch_digest() of the view and the in-process loader's digest of
 *    that batch; with the workers' hasher, every batch but the first ring
 *    (taken, or done, before the first sp_pool_digest() asked for it) was
 *    finished from the workers' record (sp__pool_digest_counts), with the
 *    consumer's none was; at 2 workers the digest is asked for before the
 *    first batch (sp_pool_digest(pool, NULL), which returns zeros);
 *  - test_hasher_cached: the same from a warm epoch cache, float32 and
 *    uint8 (a batch read from its file is hashed by the worker that reads
 *    it, as it is decompressed), at each SIMD level (SEEDPIPE_ISA);
 *  - test_hasher_killed: a worker SIGKILLed while it holds a batch's record
 *    (a test hook: without SEEDPIPE_TEST_HOOKS the case skips): the stream
 *    unchanged, the death counted, and the record freed: the batches that
 *    reuse its slot later are still hashed by the workers (a lock left
 *    held would send every one of them to the view).
 * Each case runs in its own process (tests/runner.h); setup makes the
 * dataset and the in-process reference once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "runner.h"
#include "pool/pool_shared.h"
#include "seedpipe/shapes.h"
#include "loader_check.h"
#include "pool/pool_internal.h"

#define EPOCHS 2
#define BATCH 2
#define MAXB 128
#define RING 4

static char g_tmp[256], shapes[300];
static const char *PIPE = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5 | "
                          "normalize mean=0.5,0.5,0.5 std=0.25,0.25,0.25";
static const char *PIPE_U8 = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5";
static int g_u8;   /* uint8 output (the cache stores it unfiltered), else float32 */

typedef struct run {
    int n;
    sp_digest d[MAXB];
    uint64_t by[3];    /* sp__pool_digest_counts() at the end */
    uint64_t deaths;
} run;

static void cfg_of(sp_loader_config *c) {
    sp_loader_config_default(c);
    c->dataset = shapes;
    c->pipeline = g_u8 ? PIPE_U8 : PIPE;
    c->seed = 5;
    c->batch_size = BATCH;
    c->dtype = g_u8 ? SP_DTYPE_UINT8 : SP_DTYPE_FLOAT32;
}

/* The in-process loader's digests. */
static void run_inproc(run *r) {
    memset(r, 0, sizeof *r);
    sp_loader_config c;
    cfg_of(&c);
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(&c, &ld, &err), &err);
    sp_batch b;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    uint64_t nb = ld_info(ld).batches_per_epoch;
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint64_t i = 0; i < nb; i++) {
            CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
            CHECK(r->n < MAXB);
            r->d[r->n++] = sp_batch_digest(ld, &b);
        }
    sp_batch_free(&b);
    sp_loader_destroy(ld);
}

/* A pool stream with hasher `who`; each batch's sp_pool_digest() checked
 * against the view's sp_batch_digest(). */
static void run_pool(const char *who, int workers, const char *cache, int ask_first, run *r) {
    memset(r, 0, sizeof *r);
    setenv("SEEDPIPE_POOL_DIGEST", who, 1);
    sp_loader_config c;
    cfg_of(&c);
    sp_pool_config pc = {workers, RING, EPOCHS, NULL, cache, NULL};
    sp_pool *pool;
    sp_error err;
    CHECK_OK(sp__pool_create(&c, &pc, &pool, &err), &err);
    if (ask_first) {   /* only asks: zeros */
        sp_digest z = sp_pool_digest(pool, NULL);
        CHECK(z.hi == 0 && z.lo == 0);
    }
    sp_batch v;
    int rc;
    while ((rc = sp__pool_next(pool, &v, &err)) == 0) {
        sp_digest d = sp_pool_digest(pool, &v), want = sp_batch_digest(sp__pool_loader(pool), &v);
        CHECK_MSG(d.hi == want.hi && d.lo == want.lo,
                  "%s, %d workers: sp_pool_digest differs from sp_batch_digest at batch %d", who,
                  workers, r->n);
        CHECK(r->n < MAXB);
        r->d[r->n++] = d;
        CHECK_OK(sp__pool_release(pool, &v, &err), &err);
    }
    CHECK_OK(rc == SP_END ? 0 : rc, &err);
    sp__pool_digest_counts(pool, r->by);
    sp_pool_stats st;
    sp__pool_stats_get(pool, &st);
    r->deaths = st.worker_deaths;
    sp__pool_destroy(pool);
    unsetenv("SEEDPIPE_POOL_DIGEST");
}

static void same(const run *ref, const run *r, const char *what) {
    CHECK_MSG(r->n == ref->n, "%s: %d batches, the loader gave %d", what, r->n, ref->n);
    for (int i = 0; i < ref->n; i++)
        CHECK_MSG(r->d[i].hi == ref->d[i].hi && r->d[i].lo == ref->d[i].lo,
                  "%s: batch %d differs from the in-process loader's", what, i);
    CHECK_MSG(r->by[0] + r->by[1] + r->by[2] == (uint64_t)r->n, "%s: %llu+%llu+%llu digests",
              what, (unsigned long long)r->by[0], (unsigned long long)r->by[1],
              (unsigned long long)r->by[2]);
    printf("  %s: %d batches: %llu from the workers' record, %llu from the consumer's, "
           "%llu from the view\n", what, r->n, (unsigned long long)r->by[0],
           (unsigned long long)r->by[1], (unsigned long long)r->by[2]);
}

static void test_hashers(void) {
    run ref, r;
    run_inproc(&ref);
    CHECK(ref.n >= 40);
    for (int w = 1; w <= 3; w++) {
        char what[64];
        snprintf(what, sizeof what, "workers hash, %d workers", w);
        run_pool("workers", w, NULL, w == 2, &r);
        same(&ref, &r, what);
        /* The first ring may be done before the first sp_pool_digest(). */
        CHECK_MSG(r.by[0] + RING >= (uint64_t)r.n, "%s: only %llu of %d batches from the "
                  "workers' record", what, (unsigned long long)r.by[0], r.n);
        snprintf(what, sizeof what, "consumer hashes, %d workers", w);
        run_pool("consumer", w, NULL, w == 2, &r);
        same(&ref, &r, what);
        CHECK_MSG(r.by[0] == 0, "%s: %llu batches from the workers' record", what,
                  (unsigned long long)r.by[0]);
    }
}

/* float32 (the cache's dictionary frames: hashed piece by piece as they
 * are expanded) and uint8 (unfiltered: hashed once decompressed). */
static void test_hasher_cached(void) {
    for (g_u8 = 0; g_u8 < 2; g_u8++) {
        run ref, r;
        run_inproc(&ref);
        char cache[320];
        snprintf(cache, sizeof cache, "%s/cache-%d-%d", g_tmp, (int)getpid(), g_u8);
        const char *dt = g_u8 ? "uint8" : "float32";
        printf("  %s\n", dt);
        run_pool("workers", 2, cache, 1, &r);   /* fills it */
        same(&ref, &r, "cold cache");
        run_pool("workers", 2, cache, 1, &r);
        same(&ref, &r, "warm cache, workers hash");
        CHECK_MSG(r.by[0] + RING >= (uint64_t)r.n, "warm cache, %s: only %llu of %d batches "
                  "from the workers' record", dt, (unsigned long long)r.by[0], r.n);
        run_pool("consumer", 2, cache, 0, &r);
        same(&ref, &r, "warm cache, consumer hashes");
        /* The expansion's other SIMD levels (the best one ran above). */
        for (int lv = 0; lv < 2; lv++) {
            setenv("SEEDPIPE_ISA", lv ? "avx2" : "sse2", 1);
            run_pool("workers", 2, cache, 1, &r);
            same(&ref, &r, lv ? "warm cache, workers hash, AVX2"
                              : "warm cache, workers hash, SSE2");
            unsetenv("SEEDPIPE_ISA");
        }
    }
    g_u8 = 0;
}

static void test_hasher_killed(void) {
#ifndef SEEDPIPE_TEST_HOOKS
    SKIP("the hook (SEEDPIPE_TEST_DIGEST_KILL) is compiled only into builds configured with "
         "-DSEEDPIPE_TEST_HOOKS=ON");
#else
    run ref, r;
    run_inproc(&ref);
    setenv("SEEDPIPE_TEST_DIGEST_KILL", "6", 1);   /* batch 6: slot 2, again at 10, 14, ... */
    run_pool("workers", 2, NULL, 0, &r);
    unsetenv("SEEDPIPE_TEST_DIGEST_KILL");
    same(&ref, &r, "a hasher killed");
    CHECK_MSG(r.deaths == 1, "%llu worker deaths, the hook kills one",
              (unsigned long long)r.deaths);
    /* The first ring, and the batch whose record died with its worker. */
    CHECK_MSG(r.by[2] <= RING + 1, "%llu batches hashed from the view: the dead worker's lock "
              "was not freed", (unsigned long long)r.by[2]);
#endif
}

static void setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sp-test-pool-digest-XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    snprintf(shapes, sizeof shapes, "%s/shapes", g_tmp);
    sp_shapes_opts o = {48, 32, 3};
    sp_error err;
    CHECK_OK(sp_shapes_make(shapes, &o, &err), &err);
}

static void teardown(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    CHECK(system(cmd) == 0);
}

static const sp_case cases[] = {
    SP_CASE(test_hashers),
    SP_CASE(test_hasher_cached),
    SP_CASE(test_hasher_killed),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}
