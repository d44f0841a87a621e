/* test_api.c - traps the public API must not have.
 *
 *  1. Status codes: every code of common.h's two X-macros (the errors and
 *     the positive outcomes) has its own value and its own sp_strerror()
 *     text; SP_END is the one end of every stream (pool, client, stream);
 *     anything else is "unknown status"; sp_status_at() lists SP_OK and
 *     every code, in the X-macros' order, with its name.
 *  2. The failure log is read by copy-out: 4 threads compute batches of a
 *     dataset where every second file is corrupt (on-error skip), each
 *     logging failures (the log grows, and its array moves), while 2
 *     threads read every entry with sp_loader_failure_get() over and over.
 *     Every copy read is a complete entry (its message names a file of the
 *     dataset); in the end the log has one entry per corrupt file, and
 *     SP_ERANGE past it. Run under ThreadSanitizer by tests/tsan.sh (a
 *     pointer into the log, the old API, is what TSan and ASan flag here).
 *  3. Owned batches and views: sp_batch_alloc() gives an owned batch
 *     (flags 0); a worker pool's batch is a view (SP_BATCH_VIEW) of shared
 *     memory, which sp_batch_free() clears without freeing (ASan would
 *     abort on free() of mapped memory), and the pool goes on giving the
 *     loader's bytes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/client.h"
#include "seedpipe/loader.h"
#include "seedpipe/pool.h"
#include "seedpipe/service.h"
#include "seedpipe/shapes.h"
#include "loader_check.h"
#include "pool/pool_internal.h"

#define NSAMPLES 240
#define BATCH 8
#define WRITERS 4
#define READERS 2

static void test_status_codes(void) {
    static const struct { int code; const char *name; } all[] = {
#define XX(name, val, str) {SP_##name, #name},
        SP_ERRNO_MAP(XX) SP_STATUS_MAP(XX)
#undef XX
    };
    static const int errors[] = {
#define XX(name, val, str) SP_##name,
        SP_ERRNO_MAP(XX)
#undef XX
    };
    size_t n = sizeof all / sizeof all[0], nerr = sizeof errors / sizeof errors[0];
    CHECK(n >= 13);
    for (size_t i = 0; i < n; i++) {
        const char *s = sp_strerror(all[i].code);
        CHECK_MSG(s && strcmp(s, "unknown status") != 0 && strcmp(s, "ok") != 0,
                  "SP_%s has no text", all[i].name);
        for (size_t j = 0; j < i; j++) {
            CHECK_MSG(all[i].code != all[j].code, "SP_%s and SP_%s share %d", all[i].name,
                      all[j].name, all[i].code);
            CHECK(strcmp(s, sp_strerror(all[j].code)) != 0);
        }
        CHECK((all[i].code > 0) == (i >= nerr));   /* outcomes > 0, errors < 0 */
    }
    /* sp_status_at(): SP_OK, then every code above in order, then NULL */
    int code = 12345;
    CHECK(sp_status_at(0, &code) && !strcmp(sp_status_at(0, NULL), "OK") && code == SP_OK);
    for (size_t i = 0; i < n; i++) {
        const char *name = sp_status_at(i + 1, &code);
        CHECK_MSG(name && !strcmp(name, all[i].name) && code == all[i].code,
                  "sp_status_at(%zu) is not SP_%s", i + 1, all[i].name);
    }
    code = 12345;
    CHECK(sp_status_at(n + 1, &code) == NULL && code == 12345);
    CHECK(SP_CACHE_MISS > 0 && SP_CACHE_SKIP > 0 && SP_CACHE_MISS != SP_CACHE_SKIP);
    CHECK(strcmp(sp_strerror(SP_OK), "ok") == 0);
    CHECK(strcmp(sp_strerror(99), "unknown status") == 0);
    CHECK(strstr(sp_strerror(SP_END), "end of stream") != NULL);
    printf("status codes: %zu codes, distinct values and texts\n", n);
}

static char g_root[64];   /* the dataset, made by setup() */

/* The loader both cases use (on-error skip: the corrupt files are left out). */
static sp_loader_config loader_cfg(uint64_t seed) {
    sp_loader_config cfg;
    sp_loader_config_default(&cfg);
    cfg.dataset = g_root;
    cfg.pipeline = "resize size=16,16";
    cfg.seed = seed;
    cfg.batch_size = BATCH;
    cfg.on_error = SP_ON_ERROR_SKIP;
    return cfg;
}

typedef struct shared {
    sp_loader *ld;
    const char *root;
    _Atomic uint64_t next_batch;
    _Atomic int writers_left;
    _Atomic uint64_t reads;
    uint64_t nb;
} shared;

static void *writer(void *arg) {
    shared *s = (shared *)arg;
    sp_batch b;
    CHECK(sp_batch_alloc(s->ld, &b) == 0);
    sp_error err;
    for (;;) {
        uint64_t q = atomic_fetch_add(&s->next_batch, 1);
        if (q >= 3 * s->nb) break;
        CHECK_OK(sp_loader_batch(s->ld, (uint32_t)(q / s->nb), q % s->nb, &b, &err), &err);
    }
    sp_batch_free(&b);
    atomic_fetch_sub(&s->writers_left, 1);
    return NULL;
}

static void *reader(void *arg) {
    shared *s = (shared *)arg;
    size_t rl = strlen(s->root);
    int last = 0;
    while (!last) {
        last = atomic_load(&s->writers_left) == 0;   /* one full pass after the writers */
        size_t n = sp_loader_failure_count(s->ld);
        for (size_t i = 0; i < n; i++) {
            sp_failure f;
            CHECK(sp_loader_failure_get(s->ld, i, &f) == 0);   /* the log only grows */
            CHECK(memchr(f.msg, '\0', sizeof f.msg) != NULL);
            CHECK_MSG(strncmp(f.msg, s->root, rl) == 0, "entry %zu: \"%s\"", i, f.msg);
            CHECK(f.code < 0 && f.sample < NSAMPLES);
            atomic_fetch_add(&s->reads, 1);
        }
    }
    return NULL;
}

static void test_failure_log_threads(void) {
    const char *root = g_root;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s/*/* | awk 'NR %% 2 == 0' | "
                              "while read f; do printf broken > \"$f\"; done", root);
    CHECK(system(cmd) == 0);
    sp_loader_config cfg = loader_cfg(3);
    shared s;
    memset(&s, 0, sizeof s);
    s.root = root;
    sp_error err;
    CHECK_OK(sp_loader_create(&cfg, &s.ld, &err), &err);
    s.nb = ld_info(s.ld).batches_per_epoch;
    atomic_store(&s.writers_left, WRITERS);
    pthread_t w[WRITERS], r[READERS];
    for (int i = 0; i < READERS; i++) CHECK(pthread_create(&r[i], NULL, reader, &s) == 0);
    for (int i = 0; i < WRITERS; i++) CHECK(pthread_create(&w[i], NULL, writer, &s) == 0);
    for (int i = 0; i < WRITERS; i++) pthread_join(w[i], NULL);
    for (int i = 0; i < READERS; i++) pthread_join(r[i], NULL);
    size_t n = sp_loader_failure_count(s.ld);
    CHECK_MSG(n == NSAMPLES / 2, "%zu failures logged, %d files are corrupt", n, NSAMPLES / 2);
    sp_failure f;
    CHECK(sp_loader_failure_get(s.ld, n, &f) == SP_ERANGE);
    printf("failure log: %zu entries logged by %d threads while %d threads made %llu copies\n",
           n, WRITERS, READERS, (unsigned long long)atomic_load(&s.reads));
    sp_loader_destroy(s.ld);
}

static void test_batch_views(void) {
    sp_loader_config cfg = loader_cfg(4);
    sp_error err;
    sp_loader *ld;
    CHECK_OK(sp_loader_create(&cfg, &ld, &err), &err);
    sp_batch own;
    CHECK(sp_batch_alloc(ld, &own) == 0 && own.flags == 0);
    sp_pool_config pc;
    memset(&pc, 0, sizeof pc);
    pc.workers = 1;
    pc.epochs = 1;
    sp_pool *pool;
    CHECK_OK(sp__pool_create(&cfg, &pc, &pool, &err), &err);
    for (uint64_t b = 0; b < 3; b++) {
        sp_batch v;
        CHECK_OK(sp__pool_next(pool, &v, &err), &err);
        CHECK(v.flags & SP_BATCH_VIEW);
        CHECK_OK(sp_loader_batch(ld, 0, b, &own, &err), &err);
        sp_digest a = sp_batch_digest(ld, &v), o = sp_batch_digest(ld, &own);
        CHECK(a.hi == o.hi && a.lo == o.lo);
        sp_batch held = v;
        sp_batch_free(&v);   /* a view: cleared, nothing freed */
        CHECK(v.images == NULL && v.count == 0);
        CHECK_OK(sp__pool_release(pool, &held, &err), &err);
    }
    sp__pool_destroy(pool);
    sp_batch_free(&own);
    CHECK(own.images == NULL);
    sp_loader_destroy(ld);
    printf("views: pool batches are views, sp_batch_free leaves their memory alone\n");
}

static void setup(void) {
    snprintf(g_root, sizeof g_root, "/tmp/sp-test-api-XXXXXX");
    CHECK(mkdtemp(g_root) != NULL);
    sp_shapes_opts o = {NSAMPLES, 16, 5};
    sp_error err;
    CHECK_OK(sp_shapes_make(g_root, &o, &err), &err);
}

static void teardown(void) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    CHECK(system(cmd) == 0);
}


static const sp_case cases[] = {
    SP_CASE(test_status_codes),
    SP_CASE(test_failure_log_threads),
    SP_CASE(test_batch_views),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}
