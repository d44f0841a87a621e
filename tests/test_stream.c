/* test_stream.c - the batch-stream API (stream.h) and verify (verify.h).
 *
 *  1. The three kinds (in-process loader with 1 and 3 threads, through the
 *     epoch cache cold and warm, the worker pool, a client of a service
 *     forked here) give byte-identical batches: sp_batch_digest() equal
 *     batch by batch, every view flagged SP_BATCH_VIEW.
 *  2. End of stream: exactly epochs * batches per epoch batches, then
 *     SP_END (again and again), the view cleared; info's positions.
 *  3. State and resume: a state taken half way, formatted and parsed back,
 *     resumes on another kind with the rest of the uninterrupted stream; a
 *     service client's state names the same position.
 *  4. Bad arguments give clear errors (each message checked): NULL out,
 *     a bad kind, no loader config, workers and epochs out of range, no
 *     service name, a resume state for a service, a foreign state, too
 *     many views held, releasing none or out of order, a missing region.
 *  5. sp_verify_run(): identical streams for a small configuration (with
 *     a world size), the text and JSON renderings; the per-worker demo
 *     diverges and the divergence is located down to the byte.
 *  6. The stream digest, sp_stream_digest_of(): XXH3-128 of the batch
 *     digests as big-endian bytes, computed here apart from the library;
 *     verify's rows carry the same digest of the same batches.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "check.h"
#include "runner.h"
#include "service_join.h"
#include "seedpipe/service.h"
#include "seedpipe/shapes.h"
#include "seedpipe/pool.h"
#include "seedpipe/stream.h"
#include "seedpipe/verify.h"
#include "pool/pool_internal.h"
#include "service/service_internal.h"
#include "stream/stream_internal.h"
#include "stream/verify_internal.h"

#define NSAMPLES 90
#define BATCH 8
#define EPOCHS 2

static char g_root[64];

static void config(sp_loader_config *c) {
    sp_loader_config_default(c);
    c->dataset = g_root;
    c->pipeline = "shapes-train";
    c->seed = 42;
    c->batch_size = BATCH;
}

static sp_stream *open_kind(const sp_loader_config *lc, sp_stream_kind kind, int workers,
                            const char *cache, const sp_loader_state *resume) {
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = kind;
    sc.workers = workers;
    sc.epochs = EPOCHS;
    sc.cache_dir = cache;
    sc.resume = resume;
    sp_stream *s;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp_stream_open(lc, &sc, &s, &err), &err);
    return s;
}

/* Every remaining batch's digest into d (from index `from`); @return the count. */
static size_t drain(sp_stream *s, sp_digest *d, size_t from, size_t max) {
    sp_error err;
    sp_error_clear(&err);
    sp_batch v;
    size_t n = from;
    int rc;
    while ((rc = sp_stream_next(s, &v, &err)) == 0) {
        CHECK(n < max);
        CHECK(v.flags & SP_BATCH_VIEW);
        d[n++] = sp_stream_batch_digest(s, &v);
        CHECK_OK(sp_stream_release(s, &v, &err), &err);
        CHECK(v.images == NULL);   /* cleared */
    }
    CHECK_MSG(rc == SP_END, "rc %d: %s", rc, err.msg);
    return n;
}

static int same(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

static void check_same(const sp_digest *a, const sp_digest *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) CHECK_MSG(same(a[i], b[i]), "%s: batch %zu differs", what, i);
}

static pid_t fork_service(const sp_loader_config *lc, char *name, size_t n, uint32_t world) {
    snprintf(name, n, ".sp-test-stream-%d-%u", (int)getpid(), world);
    sp_service_config sc;
    memset(&sc, 0, sizeof sc);
    sc.name = name;
    sc.world = world;
    sc.workers = 2;
    sc.epochs = EPOCHS;
    pid_t pid;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp__service_fork(lc, &sc, &pid, &err), &err);
    return pid;
}

static sp_stream *open_service(const sp_loader_config *lc, const char *name, uint32_t rank) {
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = SP_STREAM_SERVICE;
    sc.service_name = name;
    sc.rank = rank;
    sp_stream *s;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp_stream_open(lc, &sc, &s, &err), &err);
    return s;
}

/* The in-process stream's digests, the reference of every case. */
static size_t reference(const sp_loader_config *lc, sp_digest *ref, size_t max) {
    sp_stream *s = open_kind(lc, SP_STREAM_LOADER, 0, NULL, NULL);
    size_t n = drain(s, ref, 0, max);
    sp_stream_close(s);
    return n;
}

static void test_kinds_identical(void) {
    sp_loader_config lc;
    config(&lc);
    enum { MAX = 64 };
    sp_digest ref[MAX], d[MAX];
    size_t n = reference(&lc, ref, MAX);
    CHECK(n == EPOCHS * ((NSAMPLES + BATCH - 1) / BATCH));

    sp_loader_config l3 = lc;
    l3.threads = 3;
    sp_stream *s = open_kind(&l3, SP_STREAM_LOADER, 0, NULL, NULL);
    CHECK(drain(s, d, 0, MAX) == n);
    check_same(ref, d, n, "loader, 3 threads");
    sp_stream_close(s);

    char cache[96];
    snprintf(cache, sizeof cache, "%s-cache", g_root);
    for (int pass = 0; pass < 2; pass++) {   /* cold, then warm */
        s = open_kind(&lc, SP_STREAM_LOADER, 0, cache, NULL);
        CHECK(sp_stream_cache(s) != NULL && sp_stream_pool(s) == NULL);
        CHECK(drain(s, d, 0, MAX) == n);
        check_same(ref, d, n, pass ? "loader, cache warm" : "loader, cache cold");
        sp_cache_stats cs;
        sp_cache_stats_get(sp_stream_cache(s), &cs);
        if (pass == 0)   /* cold: the epoch helper computed and wrote every batch */
            CHECK_MSG(cs.batches_written == n && cs.batches_read == 0, "cold: %llu written, "
                      "%llu read", (unsigned long long)cs.batches_written,
                      (unsigned long long)cs.batches_read);
        else             /* warm: every batch came from the cache */
            CHECK_MSG(cs.batches_read == n && cs.batches_computed == 0, "warm: %llu read, "
                      "%llu computed", (unsigned long long)cs.batches_read,
                      (unsigned long long)cs.batches_computed);
        sp_stream_close(s);
    }
    s = open_kind(&lc, SP_STREAM_POOL, 3, cache, NULL);   /* the pool reads it */
    CHECK(sp_stream_cache(s) != NULL);
    CHECK(drain(s, d, 0, MAX) == n);
    check_same(ref, d, n, "pool, cache warm");
    sp_cache_stats ps;
    sp_cache_stats_get(sp_stream_cache(s), &ps);
    CHECK_MSG(ps.hits > 0 && ps.batches_written == 0, "pool: %llu hits, %llu written",
              (unsigned long long)ps.hits, (unsigned long long)ps.batches_written);
    sp_stream_close(s);

    s = open_kind(&lc, SP_STREAM_POOL, 2, NULL, NULL);
    CHECK(sp_stream_pool(s) != NULL && sp_stream_client(s) == NULL);
    CHECK(drain(s, d, 0, MAX) == n);
    check_same(ref, d, n, "pool, 2 workers");
    sp_stream_close(s);

    char name[80];
    pid_t pid = fork_service(&lc, name, sizeof name, 1);
    s = open_service(&lc, name, 0);   /* with lcfg: its fingerprint is checked */
    CHECK(sp_stream_client(s) != NULL && sp_stream_loader(s) != NULL);
    CHECK(drain(s, d, 0, MAX) == n);
    check_same(ref, d, n, "service");
    sp_stream_close(s);
    CHECK(join_status(pid, 10000) == 0);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    CHECK(system(cmd) == 0);
}

static void test_end_of_stream(void) {
    sp_loader_config lc;
    config(&lc);
    for (int kind = 0; kind < 2; kind++) {
        sp_stream *s = open_kind(&lc, (sp_stream_kind)kind, kind ? 2 : 0, NULL, NULL);
        sp_stream_info in;
        sp_stream_info_get(s, &in);
        CHECK(in.kind == (sp_stream_kind)kind && in.first == 0);
        CHECK(in.end == EPOCHS * in.batches_per_epoch && in.batch_size == BATCH);
        CHECK(in.world == 1 && in.sample_bytes > 0 && in.max_held >= 1);
        sp_digest d[64];
        CHECK(drain(s, d, 0, 64) == in.end);
        sp_error err;
        sp_error_clear(&err);
        sp_batch v;
        memset(&v, 0xff, sizeof v);
        CHECK(sp_stream_next(s, &v, &err) == SP_END);
        CHECK(v.images == NULL && v.count == 0);
        CHECK(sp_stream_next(s, &v, &err) == SP_END);
        sp_stream_info_get(s, &in);
        CHECK(in.taken == in.end && in.held == 0);
        sp_loader_state st;
        sp_stream_state(s, &st);
        CHECK(st.epoch == EPOCHS && st.batch == 0);
        sp_stream_close(s);
    }
}

static void test_state_resume(void) {
    sp_loader_config lc;
    config(&lc);
    sp_digest ref[64], d[64];
    size_t n = reference(&lc, ref, 64), half = n / 2 + 1;   /* mid-epoch 1 */
    sp_stream *s;
    for (int kind = 0; kind < 2; kind++) {
        s = open_kind(&lc, (sp_stream_kind)kind, kind ? 2 : 0, NULL, NULL);
        sp_error err;
        sp_error_clear(&err);
        sp_batch v;
        for (size_t i = 0; i < half; i++) {
            CHECK_OK(sp_stream_next(s, &v, &err), &err);
            d[i] = sp_stream_batch_digest(s, &v);
            CHECK_OK(sp_stream_release(s, &v, &err), &err);
        }
        sp_loader_state st, back;
        sp_stream_state(s, &st);
        sp_stream_close(s);
        char text[1024];
        int len = sp_loader_state_format(&st, text, sizeof text);
        CHECK_OK(sp_loader_state_parse(text, (size_t)len, &back, &err), &err);
        s = open_kind(&lc, (sp_stream_kind)(1 - kind), 3, NULL, &back);   /* the other kind */
        sp_stream_info in;
        sp_stream_info_get(s, &in);
        CHECK(in.first == half);
        CHECK(drain(s, d, half, 64) == n);
        check_same(ref, d, n, kind ? "pool -> loader" : "loader -> pool");
        sp_stream_close(s);
    }
    /* A service client's state: the position after its last batch. */
    char name[80];
    pid_t pid = fork_service(&lc, name, sizeof name, 1);
    s = open_service(NULL, name, 0);
    sp_error err;
    sp_error_clear(&err);
    sp_batch v;
    for (size_t i = 0; i < half; i++) {
        CHECK_OK(sp_stream_next(s, &v, &err), &err);
        CHECK(same(sp_stream_batch_digest(s, &v), ref[i]));
        CHECK_OK(sp_stream_release(s, &v, &err), &err);
    }
    sp_loader_state st;
    sp_stream_state(s, &st);
    sp_stream_info in;
    sp_stream_info_get(s, &in);
    CHECK((uint64_t)st.epoch * in.batches_per_epoch + st.batch == half);
    CHECK(drain(s, d, half, 64) == n);
    check_same(ref, d, n, "service");
    sp_stream_close(s);
    CHECK(join_status(pid, 10000) == 0);
}

static void expect(int rc, int want, const sp_error *err, const char *sub) {
    CHECK_MSG(rc == want, "rc %d, want %d (%s)", rc, want, err->msg);
    CHECK_MSG(strstr(err->msg, sub) != NULL, "message \"%s\" lacks \"%s\"", err->msg, sub);
}

static void test_bad_arguments(void) {
    sp_loader_config lc;
    config(&lc);
    sp_stream_config sc;
    sp_stream *s = (sp_stream *)&lc;
    sp_error err;
    sp_error_clear(&err);
    sp_stream_config_default(&sc);
    expect(sp_stream_open(&lc, &sc, NULL, &err), SP_EINVAL, &err, "out is NULL");
    sc.kind = (sp_stream_kind)7;
    expect(sp_stream_open(&lc, &sc, &s, &err), SP_EINVAL, &err, "kind 7 is not loader");
    CHECK(s == NULL);
    sp_stream_config_default(&sc);
    expect(sp_stream_open(NULL, &sc, &s, &err), SP_EINVAL, &err, "needs a loader configuration");
    sc.epochs = 0;
    expect(sp_stream_open(&lc, &sc, &s, &err), SP_EINVAL, &err, "epochs must be >= 1");
    sp_stream_config_default(&sc);
    sc.kind = SP_STREAM_POOL;
    expect(sp_stream_open(&lc, &sc, &s, &err), SP_EINVAL, &err, "workers in 1..64 (got 0)");
    sc.workers = 65;
    expect(sp_stream_open(&lc, &sc, &s, &err), SP_EINVAL, &err, "(got 65)");
    sp_stream_config_default(&sc);
    sc.kind = SP_STREAM_SERVICE;
    expect(sp_stream_open(NULL, &sc, &s, &err), SP_EINVAL, &err, "needs a service name");
    sc.service_name = ".sp-test-stream-none";
    expect(sp_stream_open(NULL, &sc, &s, &err), SP_EIO, &err, "sp-test-stream-none");
    sp_loader_state st;
    memset(&st, 0, sizeof st);
    sc.resume = &st;
    expect(sp_stream_open(NULL, &sc, &s, &err), SP_EINVAL, &err, "takes its position");

    /* A state of another stream (seed 43) is refused, naming the seed. */
    sp_loader_config other = lc;
    other.seed = 43;
    s = open_kind(&other, SP_STREAM_LOADER, 0, NULL, NULL);
    sp_stream_state(s, &st);
    sp_stream_close(s);
    sp_stream_config_default(&sc);
    sc.resume = &st;
    expect(sp_stream_open(&lc, &sc, &s, &err), SP_EMISMATCH, &err, "seed 43 in the state");

    /* Views: one at a time in-process; any order on the pool (test_release_any_order). */
    s = open_kind(&lc, SP_STREAM_LOADER, 0, NULL, NULL);
    sp_batch a, b;
    expect(sp_stream_release(s, NULL, &err), SP_EINVAL, &err, "view is NULL");
    CHECK_OK(sp_stream_next(s, &a, &err), &err);
    expect(sp_stream_next(s, &b, &err), SP_EINVAL, &err, "1 view already held");
    CHECK_OK(sp_stream_release(s, &a, &err), &err);
    sp_stream_close(s);
    s = open_kind(&lc, SP_STREAM_POOL, 2, NULL, NULL);
    CHECK_OK(sp_stream_next(s, &a, &err), &err);
    CHECK_OK(sp_stream_next(s, &b, &err), &err);
    sp_batch a2 = a;
    CHECK_OK(sp_stream_release(s, &a, &err), &err);
    expect(sp_stream_release(s, &a2, &err), SP_EINVAL, &err, "is not held");   /* twice */
    CHECK_OK(sp_stream_release(s, &b, &err), &err);
    sp_stream_close(s);
    sp_stream_close(NULL);
}

/* The one release rule: views go back in any order. A pool stream whose
 * consumer gives back the newer of two views first, and a pool driven
 * directly the same way, give the in-process stream's batches; a view
 * given back twice, or not held, is refused by name. */
static void test_release_any_order(void) {
    sp_loader_config lc;
    config(&lc);
    sp_digest ref[64], d[64];
    sp_stream *s = open_kind(&lc, SP_STREAM_LOADER, 0, NULL, NULL);
    size_t n = drain(s, ref, 0, 64);
    sp_stream_close(s);
    CHECK(n >= 4);
    sp_error err;
    sp_error_clear(&err);
    s = open_kind(&lc, SP_STREAM_POOL, 2, NULL, NULL);
    size_t m = 0;
    for (;;) {
        sp_batch v[2];
        int rc = sp_stream_next(s, &v[0], &err), k = 1;
        if (rc == SP_END) break;
        CHECK_OK(rc, &err);
        d[m++] = sp_stream_batch_digest(s, &v[0]);
        rc = sp_stream_next(s, &v[1], &err);
        if (rc == 0) {
            d[m++] = sp_stream_batch_digest(s, &v[1]);
            k = 2;
        } else {
            CHECK_MSG(rc == SP_END, "rc %d: %s", rc, err.msg);
        }
        sp_batch again = v[k - 1];
        for (int j = k; j-- > 0;) CHECK_OK(sp_stream_release(s, &v[j], &err), &err);   /* newest first */
        expect(sp_stream_release(s, &again, &err), SP_EINVAL, &err, "is not held");
    }
    sp_stream_close(s);
    CHECK_MSG(m == n, "%zu batches, in-process %zu", m, n);
    check_same(ref, d, n, "pool stream, views given back newest first");

    /* The pool itself, three views held, given back middle, newest, oldest. */
    sp_pool_config pc = {2, 4, EPOCHS, NULL, NULL, NULL};
    sp_pool *pool;
    CHECK_OK(sp__pool_create(&lc, &pc, &pool, &err), &err);
    m = 0;
    for (int rc = 0; rc == 0;) {
        sp_batch v[3];
        int k = 0;
        while (k < 3 && (rc = sp__pool_next(pool, &v[k], &err)) == 0)
            d[m++] = sp_batch_digest(sp__pool_loader(pool), &v[k++]);
        CHECK_MSG(rc == 0 || rc == SP_END, "rc %d: %s", rc, err.msg);
        static const int order[3][3] = {{0}, {1, 0}, {1, 2, 0}};
        for (int j = 0; k && j < k; j++)
            CHECK_OK(sp__pool_release(pool, &v[order[k - 1][j]], &err), &err);
        if (k) expect(sp__pool_release(pool, &v[0], &err), SP_EINVAL, &err, "is not held");
    }
    sp__pool_destroy(pool);
    CHECK_MSG(m == n, "%zu batches, in-process %zu", m, n);
    check_same(ref, d, n, "pool, views given back middle, newest, oldest");
}

static void test_verify_api(void) {
    sp_loader_config lc;
    config(&lc);
    int ws[] = {1, 3}, ks[] = {1, 2};
    sp_verify_config vc;
    memset(&vc, 0, sizeof vc);
    vc.workers = ws;
    vc.nworkers = 2;
    vc.worlds = ks;
    vc.nworlds = 2;
    vc.epochs = 1;
    vc.flags = SP_VERIFY_NO_CACHE;
    sp_verify_report *r;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp_verify_run(&lc, &vc, &r, &err), &err);
    CHECK_MSG(sp_verify_ok(r), "%s", sp__verify_summary(r));
    size_t n = sp__verify_row_count(r);
    CHECK(n == 9);   /* reference, 2 counts, crash, resume, 2 service, world 2 x 2 */
    CHECK(!strcmp(sp__verify_row_get(r, 0)->name, "in-process, world 1"));
    CHECK(sp__verify_row_get(r, n) == NULL);
    for (size_t i = 0; i < n; i++) {
        const sp_verify_row *row = sp__verify_row_get(r, i);
        CHECK_MSG(row->equal && row->rc == 0 && same(row->stream, sp__verify_row_get(r, 0)->stream),
                  "%s", row->name);
    }
    CHECK(sp__verify_row_get(r, n - 1)->world == 2);
    char text[8192], json[16384];
    CHECK(sp_verify_format(r, text, sizeof text) < sizeof text);
    CHECK(strstr(text, "verify: all configurations give identical streams (per-sample rng, "
                       "on-error fail; world sizes 1,2)\n"));
    CHECK(strstr(text, "workers 3, one SIGKILLed: 1 worker death noticed"));
    CHECK(sp_verify_json(r, json, sizeof json) < sizeof json);
    CHECK(!strncmp(json, "{\"ok\":true,", 11));
    CHECK(sp_verify_format(r, text, 8) > 8 && strlen(text) == 7);   /* snprintf-style */
    sp_verify_free(r);

    /* The bad world size is an argument error, before anything runs. */
    int bad[] = {3};
    vc.worlds = bad;
    vc.nworlds = 1;
    expect(sp_verify_run(&lc, &vc, &r, &err), SP_EINVAL, &err, "not divisible by 3");

    /* A count without its list, world sizes for one rank's slice. */
    vc.worlds = NULL;
    vc.nworlds = 0;
    vc.workers = NULL;
    expect(sp_verify_run(&lc, &vc, &r, &err), SP_EINVAL, &err, "worker counts");
    vc.workers = ws;
    vc.worlds = ks;
    vc.nworlds = 2;
    sp_loader_config half = lc;
    half.world = 2;
    expect(sp_verify_run(&half, &vc, &r, &err), SP_EINVAL, &err, "rank 0 of world 2");

    /* The classic per-worker scheme diverges, located to the byte. */
    int w4[] = {1, 4};
    memset(&vc, 0, sizeof vc);
    vc.workers = w4;
    vc.nworkers = 2;
    vc.epochs = 3;
    vc.flags = SP_VERIFY_NO_CRASH | SP_VERIFY_NO_RESUME | SP_VERIFY_NO_SERVICE | SP_VERIFY_NO_CACHE;
    lc.rng_mode = SP_RNG_PER_WORKER;
    CHECK_OK(sp_verify_run(&lc, &vc, &r, &err), &err);
    CHECK(!sp_verify_ok(r) && sp__verify_row_count(r) == 3);
    const sp_verify_row *row = sp__verify_row_get(r, 2);
    CHECK(!row->equal && row->div.kind == SP_VERIFY_DIV_BYTE && row->div.byte_offset >= 0);
    CHECK(row->div.byte != row->div.byte_ref && row->div.position >= 0);
    CHECK(strstr(row->note, "first divergence at epoch"));
    CHECK(!strncmp(sp__verify_summary(r), "MISMATCH", 8));
    sp_verify_free(r);
    sp_verify_free(NULL);
}

static void test_stream_digest_of(void) {
    sp_loader_config lc;
    config(&lc);
    sp_digest d[64];
    size_t n = reference(&lc, d, 64);
    CHECK(n > 2);
    uint8_t raw[64 * 16];
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++) {
            raw[16 * i + k] = (uint8_t)(d[i].hi >> (56 - 8 * k));
            raw[16 * i + 8 + k] = (uint8_t)(d[i].lo >> (56 - 8 * k));
        }
    for (size_t m = 0; m <= n; m += n) {   /* none, then all */
        XXH128_hash_t h = XXH3_128bits(raw, 16 * m);
        sp_digest got = sp_stream_digest_of(m ? d : NULL, m);
        CHECK_MSG(got.hi == h.high64 && got.lo == h.low64, "%zu batches", m);
    }
    sp_digest one = sp_stream_digest_of(d, n - 1), all = sp_stream_digest_of(d, n);
    CHECK(!same(one, all));   /* every batch counts */

    /* verify's stream digest is this one, over the same batches */
    int ws[] = {1};
    sp_verify_config vc;
    memset(&vc, 0, sizeof vc);
    vc.workers = ws;
    vc.nworkers = 1;
    vc.epochs = EPOCHS;
    vc.flags = SP_VERIFY_NO_CRASH | SP_VERIFY_NO_RESUME | SP_VERIFY_NO_SERVICE | SP_VERIFY_NO_CACHE;
    sp_verify_report *r;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp_verify_run(&lc, &vc, &r, &err), &err);
    CHECK(sp_verify_ok(r) && sp__verify_row_count(r) == 2);
    for (size_t i = 0; i < 2; i++) {
        const sp_verify_row *row = sp__verify_row_get(r, i);
        CHECK_MSG(same(row->stream, all) && row->batches == n, "%s", row->name);
    }
    sp_verify_free(r);
}

/* An in-process stream seeks back and forth without reopening: after a
 * seek the batches are those of that position; a held view stays valid;
 * pool streams refuse. */
static void test_seek(void) {
    sp_loader_config lc;
    config(&lc);
    sp_digest ref[64], d[64];
    size_t n = reference(&lc, ref, 64), nb = n / EPOCHS;
    sp_stream *s = open_kind(&lc, SP_STREAM_LOADER, 0, NULL, NULL);
    sp_loader *ld = sp_stream_loader(s);
    sp_error err;
    sp_error_clear(&err);
    sp_batch v;
    CHECK_OK(sp_stream_next(s, &v, &err), &err);
    sp_digest held = sp_stream_batch_digest(s, &v);
    sp_loader_state st;
    sp_loader_state_at(ld, 1, 3, &st);
    CHECK_OK(sp_stream_seek(s, &st, &err), &err);   /* with a view held */
    CHECK(same(sp_stream_batch_digest(s, &v), held) && same(held, ref[0]));
    CHECK_OK(sp_stream_release(s, &v, &err), &err);
    CHECK(drain(s, d, nb + 3, 64) == n);
    check_same(ref + nb + 3, d + nb + 3, n - nb - 3, "after a seek to epoch 1 batch 3");
    sp_loader_state_at(ld, 0, 1, &st);   /* back, past the end: again from there */
    CHECK_OK(sp_stream_seek(s, &st, &err), &err);
    CHECK(drain(s, d, 1, 64) == n);
    check_same(ref + 1, d + 1, n - 1, "after a seek back to batch 1");
    sp_loader_state_at(ld, EPOCHS, 0, &st);
    CHECK_OK(sp_stream_seek(s, &st, &err), &err);   /* the end itself */
    CHECK(sp_stream_next(s, &v, &err) == SP_END);
    sp_loader_state_at(ld, EPOCHS + 1, 0, &st);
    expect(sp_stream_seek(s, &st, &err), SP_ERANGE, &err, "outside this stream");
    sp_loader_config other = lc;
    other.seed = 43;
    sp_stream *o = open_kind(&other, SP_STREAM_LOADER, 0, NULL, NULL);
    sp_stream_state(o, &st);
    expect(sp_stream_seek(s, &st, &err), SP_EMISMATCH, &err, "seed 43");
    sp_stream_close(o);
    sp_stream_close(s);
    s = open_kind(&lc, SP_STREAM_POOL, 2, NULL, NULL);
    sp_loader_state_at(sp_stream_loader(s), 0, 2, &st);
    expect(sp_stream_seek(s, &st, &err), SP_EUNSUPP, &err, "cannot seek");
    sp_stream_close(s);
}

/* A service stream with a loader configuration refuses another seed (the
 * fingerprint covers everything but the seed) and another world; a stream
 * that has failed keeps failing with its first error. */
static void test_refusals_and_failure(void) {
    sp_loader_config lc;
    config(&lc);
    char name[80];
    pid_t pid = fork_service(&lc, name, sizeof name, 2);
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = SP_STREAM_SERVICE;
    sc.service_name = name;
    sp_stream *s = NULL;
    sp_error err;
    sp_error_clear(&err);
    sp_loader_config other = lc;
    other.seed = 43;
    other.world = 2;
    expect(sp_stream_open(&other, &sc, &s, &err), SP_EMISMATCH, &err, "serves seed 42");
    CHECK(s == NULL);
    expect(sp_stream_open(&lc, &sc, &s, &err), SP_EINVAL, &err, "world of 2 ranks");
    sp_loader_config r1 = lc;
    r1.world = 2;
    r1.rank = 1;
    s = open_service(&r1, name, 0);   /* rank from lcfg: 1 */
    sp_stream_info in;
    sp_stream_info_get(s, &in);
    CHECK(in.rank == 1 && in.world == 2 && in.kind == SP_STREAM_SERVICE);
    sp_stream_close(s);
    CHECK(kill(pid, SIGTERM) == 0);
    CHECK(join_status(pid, 10000) == 0);

    /* A damaged file in a copy of the set: on-error fail stops the stream
     * at its batch, and every later call gives that error again. */
    char bad[96], cmd[600];
    snprintf(bad, sizeof bad, "%s-bad", g_root);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && f=$(find '%s' -name '*.png' | "
             "sort | head -1) && printf 'not a png' > \"$f\"", bad, g_root, bad, bad);
    CHECK(system(cmd) == 0);
    sp_loader_config lb = lc;
    lb.dataset = bad;
    for (int kind = SP_STREAM_LOADER; kind <= SP_STREAM_POOL; kind++) {
        s = open_kind(&lb, (sp_stream_kind)kind, 2, NULL, NULL);
        sp_batch v;
        int rc;
        while ((rc = sp_stream_next(s, &v, &err)) == 0) CHECK_OK(sp_stream_release(s, &v, &err), &err);
        CHECK_MSG(rc < 0 && strstr(err.msg, "-bad/"), "%s: rc %d: %s",
                  sp__stream_kind_name((sp_stream_kind)kind), rc, err.msg);
        char first[SP_ERROR_MSG_MAX];
        snprintf(first, sizeof first, "%s", err.msg);
        sp_error again;
        sp_error_clear(&again);
        CHECK(sp_stream_next(s, &v, &again) == rc && !strcmp(again.msg, first));
        sp_error_clear(&again);
        CHECK(sp_stream_release(s, NULL, &again) == rc && !strcmp(again.msg, first));
        sp_stream_close(s);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", bad);
    CHECK(system(cmd) == 0);
}

static void setup(void) {
    snprintf(g_root, sizeof g_root, "/tmp/sp-test-stream-XXXXXX");
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
    SP_CASE(test_kinds_identical),
    SP_CASE(test_end_of_stream),
    SP_CASE(test_state_resume),
    SP_CASE(test_bad_arguments),
    SP_CASE(test_verify_api),
    SP_CASE(test_stream_digest_of),
    SP_CASE(test_refusals_and_failure),
    SP_CASE(test_seek),
    SP_CASE(test_release_any_order),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}
