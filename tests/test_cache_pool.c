/* test_cache_pool.c - the epoch cache read and written by the worker pool's workers.
 *
 * The pool's cache (pool.h) must never change a byte of the stream:
 *  - cold then warm runs at 1, 2 and 3 workers give the in-process digests,
 *    the cold run writes every batch (by the workers) and commits every
 *    epoch, the warm run reads every batch and computes none;
 *  - an entry written by the pool is read by the in-process helper and the
 *    other way round (one format);
 *  - a byte flipped at a random offset of a random batch file, a truncated
 *    file, a missing file: reported once (naming the file), the entry moved
 *    aside, the stream identical; a missing manifest is a miss (refilled);
 *  - a batch with a failed sample (on_error skip) is written by the
 *    consumer with its failure-log lines and, warm, read like any other
 *    batch: same digests, same failure log;
 *  - on a dataset with 10 corrupt files of 60 (skip and substitute), the
 *    warm pool reads every batch from the cache as the in-process helper
 *    does (it used to recompute each batch with a failed sample), with the
 *    same bytes, skipped/substituted lists and failure log, whichever of
 *    the two filled the entry;
 *  - a full disk in the workers: a warning, the stream identical, nothing
 *    committed, nothing left in .tmp (a test hook: without
 *    SEEDPIPE_TEST_HOOKS the case skips);
 *  - two pools filling one key at once: both streams identical, one entry;
 *  - a worker SIGKILLed during a cold and a warm run: identical streams;
 *  - a worker dying right after writing a batch file: the consumer writes
 *    it again, every entry is committed (a test hook: without
 *    SEEDPIPE_TEST_HOOKS the case skips);
 *  - each epoch's commit and gc run on the cache's commit thread, counted
 *    and warned about on the consumer's (test hooks: without
 *    SEEDPIPE_TEST_HOOKS the case skips).
 *
 * Cases (tests/runner.h; each in its own process, under one mkdtemp root
 * whose dataset and reference digests setup makes): test_cold_warm,
 * test_damage (fills its own pristine entries), test_failures (makes its
 * own broken copy), test_failure_hits (another, with more corrupt files),
 * test_full_disk, test_concurrent, test_kill, test_die_writing,
 * test_commit_thread.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "runner.h"
#include "cache/cache_internal.h"
#include "seedpipe/cache.h"
#include "seedpipe/loader.h"
#include "seedpipe/pool.h"
#include "seedpipe/shapes.h"
#include "pool/pool_internal.h"

#define NSAMPLES 60
#define BATCH 8
#define NB ((NSAMPLES + BATCH - 1) / BATCH)
#define EPOCHS 2
#define TOTAL (EPOCHS * NB)

static char root[256], data[300], bad_data[300];
static const char *PIPE = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5 | "
                          "normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225";

typedef struct warns {
    int n;
    char last[SP_ERROR_MSG_MAX + 256];
} warns;
static void on_warn(void *ud, const char *msg) {
    warns *w = ud;
    w->n++;
    snprintf(w->last, sizeof w->last, "%s", msg);
}

static void config(sp_loader_config *cfg, const char *ds, sp_on_error oe) {
    sp_loader_config_default(cfg);
    cfg->dataset = ds;
    cfg->pipeline = PIPE;
    cfg->seed = 5;
    cfg->batch_size = BATCH;
    cfg->dtype = SP_DTYPE_FLOAT32;
    cfg->on_error = oe;
}

static uint64_t last_deaths;   /* worker deaths of the last pool_run() */

static int eq(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

/* In-process reference digests and failure count. */
static size_t reference(const char *ds, sp_on_error oe, sp_digest *ref) {
    sp_loader_config cfg;
    config(&cfg, ds, oe);
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(&cfg, &ld, &err), &err);
    sp_batch b;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint64_t i = 0; i < NB; i++) {
            CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
            ref[e * NB + i] = sp_batch_digest(ld, &b);
        }
    size_t nf = sp_loader_failure_count(ld);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    return nf;
}

static void opts(sp_cache_opts *o, warns *w) {
    sp_cache_opts_default(o);
    o->no_fsync = 1;
    o->warn = on_warn;
    o->warn_ud = w;
}

/* One pool run through the cache; every digest checked; kill_at >= 0
 * SIGKILLs worker 0 after that many batches. */
static void pool_run(const char *dir, const char *ds, sp_on_error oe, int workers,
                     const sp_digest *ref, size_t nfail, warns *w, sp_cache_stats *st,
                     int kill_at) {
    sp_loader_config cfg;
    config(&cfg, ds, oe);
    sp_cache_opts o;
    opts(&o, w);
    sp_pool_config pc = {workers, 0, EPOCHS, NULL, dir, &o};
    sp_pool *pool;
    sp_error err;
    CHECK_OK(sp__pool_create(&cfg, &pc, &pool, &err), &err);
    sp_batch v;
    for (int q = 0; q < TOTAL; q++) {
        if (q == kill_at) {
            int pid = sp_pool_worker_pid(pool, 0);
            CHECK(pid > 0 && kill(pid, SIGKILL) == 0);
        }
        CHECK_OK(sp__pool_next(pool, &v, &err), &err);
        CHECK_MSG(eq(sp_batch_digest(sp__pool_loader(pool), &v), ref[q]),
                  "%d workers: batch %d differs from the uncached stream", workers, q);
        CHECK_OK(sp__pool_release(pool, &v, &err), &err);
    }
    CHECK(sp__pool_next(pool, &v, &err) == SP_END);
    CHECK_MSG(sp_loader_failure_count(sp__pool_loader(pool)) == nfail,
              "failure log: %zu lines, uncached %zu",
              sp_loader_failure_count(sp__pool_loader(pool)), nfail);
    sp_cache_stats_get(sp_pool_cache(pool), st);
    sp_pool_stats ps;
    sp__pool_stats_get(pool, &ps);
    last_deaths = ps.worker_deaths;
    sp__pool_destroy(pool);
}

static int count_dir(const char *p) {
    DIR *d = opendir(p);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void rmrf(const char *p) { CHECK(sp__rmtree_at(AT_FDCWD, p) == 0 || count_dir(p) < 0); }

/* The entry directory of epoch e. */
static void entry_of(const char *dir, const char *ds, uint32_t e, char *out, size_t cap) {
    sp_loader_config cfg;
    config(&cfg, ds, SP_ON_ERROR_FAIL);
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(&cfg, &ld, &err), &err);
    char hex[33];
    sp_digest_hex(sp__cache_key(ld, e), hex);
    snprintf(out, cap, "%s/%s", dir, hex);
    sp_loader_destroy(ld);
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) {   /* xorshift: test offsets only */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void cp(const char *from, const char *to) {
    char cmd[3 * 400 + 64];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    CHECK(system(cmd) == 0);
}

static void cold_warm(const sp_digest *ref) {
    for (int workers = 1; workers <= 3; workers++) {
        char dir[400];
        snprintf(dir, sizeof dir, "%s/cw%d", root, workers);
        warns w = {0, ""};
        sp_cache_stats st;
        pool_run(dir, data, SP_ON_ERROR_FAIL, workers, ref, 0, &w, &st, -1);
        CHECK_MSG(w.n == 0, "cold run warned: %s", w.last);
        CHECK_MSG(st.batches_written == TOTAL && st.committed == EPOCHS && st.batches_read == 0,
                  "cold, %d workers: %llu written, %llu committed, %llu read", workers,
                  (unsigned long long)st.batches_written, (unsigned long long)st.committed,
                  (unsigned long long)st.batches_read);
        CHECK(count_dir(dir) == EPOCHS);
        /* warm, with another worker count */
        pool_run(dir, data, SP_ON_ERROR_FAIL, 4 - workers, ref, 0, &w, &st, -1);
        CHECK_MSG(w.n == 0, "warm run warned: %s", w.last);
        CHECK_MSG(st.batches_read == TOTAL && st.batches_computed == 0 && st.hits == EPOCHS,
                  "warm: %llu read, %llu computed, %llu hits",
                  (unsigned long long)st.batches_read, (unsigned long long)st.batches_computed,
                  (unsigned long long)st.hits);
        CHECK_MSG(st.bytes_read > 0 && st.raw_read > st.bytes_read,
                  "warm: %llu stored bytes read, %llu raw", (unsigned long long)st.bytes_read,
                  (unsigned long long)st.raw_read);
    }
    /* One format: the pool's entries are read by the in-process helper. */
    char dir[400];
    snprintf(dir, sizeof dir, "%s/cw2", root);
    sp_loader_config cfg;
    config(&cfg, data, SP_ON_ERROR_FAIL);
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(&cfg, &ld, &err), &err);
    warns w = {0, ""};
    sp_cache_opts o;
    opts(&o, &w);
    sp_cache *c;
    CHECK_OK(sp_cache_open(dir, &o, &c, &err), &err);
    sp_batch b;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint64_t i = 0; i < NB; i++) {
            CHECK_OK(sp__cache_epoch_batch(c, ld, e, i, &b, &err), &err);
            CHECK(eq(sp_batch_digest(ld, &b), ref[e * NB + i]));
        }
    sp_cache_flush(c);
    sp_cache_stats st;
    sp_cache_stats_get(c, &st);
    CHECK_MSG(st.batches_read == TOTAL && st.batches_computed == 0,
              "in-process read of a pool-written entry: %llu read",
              (unsigned long long)st.batches_read);
    sp_cache_close(c);
    /* ...and the other way round: the in-process helper fills, the pool reads. */
    snprintf(dir, sizeof dir, "%s/inproc", root);
    CHECK_OK(sp_cache_open(dir, &o, &c, &err), &err);
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint64_t i = 0; i < NB; i++)
            CHECK_OK(sp__cache_epoch_batch(c, ld, e, i, &b, &err), &err);
    sp_cache_close(c);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    pool_run(dir, data, SP_ON_ERROR_FAIL, 2, ref, 0, &w, &st, -1);
    CHECK(w.n == 0 && st.batches_read == TOTAL);
}

/* Damage one file of a pristine copy; a warm pool run must report it once
 * and stream the same bytes. */
static void damage(const sp_digest *ref) {
    char pristine[400], dir[400], ent[800], victim[900], corrupt[500];
    snprintf(pristine, sizeof pristine, "%s/pristine", root);
    snprintf(dir, sizeof dir, "%s/damage", root);
    snprintf(corrupt, sizeof corrupt, "%s/.corrupt", dir);
    {   /* the pristine entries: a cold run by one worker (as test_cold_warm's cw1) */
        warns w = {0, ""};
        sp_cache_stats st;
        pool_run(pristine, data, SP_ON_ERROR_FAIL, 1, ref, 0, &w, &st, -1);
        CHECK_MSG(w.n == 0 && st.committed == EPOCHS && count_dir(pristine) == EPOCHS,
                  "pristine fill: %d warnings (%s), %llu committed", w.n, w.last,
                  (unsigned long long)st.committed);
    }
    int rounds = 0;
    for (int r = 0; r < 24; r++) {
        cp(pristine, dir);
        uint32_t e = (uint32_t)(rnd() % EPOCHS);
        entry_of(dir, data, e, ent, sizeof ent);
        unsigned bi = (unsigned)(rnd() % NB);
        snprintf(victim, sizeof victim, "%s/b%08u", ent, bi);
        int fd = open(victim, O_RDWR);
        CHECK(fd >= 0);
        struct stat sb;
        CHECK(fstat(fd, &sb) == 0 && sb.st_size > 0);
        const char *what;
        if (r % 8 == 6) {
            CHECK(ftruncate(fd, sb.st_size - 1 - (off_t)(rnd() % (uint64_t)sb.st_size)) == 0);
            what = "truncated";
        } else if (r % 8 == 7) {
            CHECK(unlink(victim) == 0);
            what = "removed";
        } else {
            off_t off = (off_t)(rnd() % (uint64_t)sb.st_size);
            uint8_t byte;
            CHECK(pread(fd, &byte, 1, off) == 1);
            byte ^= (uint8_t)(1u << (rnd() % 8));
            CHECK(pwrite(fd, &byte, 1, off) == 1);
            what = "flipped";
        }
        close(fd);
        warns w = {0, ""};
        sp_cache_stats st;
        pool_run(dir, data, SP_ON_ERROR_FAIL, 1 + r % 3, ref, 0, &w, &st, -1);
        CHECK_MSG(w.n == 1, "round %d (%s byte in %s): %d warnings, last: %s", r, what, victim,
                  w.n, w.last);
        char base[16];
        snprintf(base, sizeof base, "b%08u", bi);
        CHECK_MSG(strstr(w.last, base) != NULL, "round %d: the warning does not name %s: %s", r,
                  base, w.last);
        CHECK_MSG(st.corrupt >= 1 && count_dir(corrupt) == 1,
                  "round %d: entry not moved aside (%llu corrupt)", r,
                  (unsigned long long)st.corrupt);
        rounds++;
    }
    /* A missing manifest: a miss; the pool recomputes and refills it. */
    cp(pristine, dir);
    entry_of(dir, data, 1, ent, sizeof ent);
    snprintf(victim, sizeof victim, "%s/%s", ent, SP__CM_NAME);
    CHECK(unlink(victim) == 0);
    warns w = {0, ""};
    sp_cache_stats st;
    pool_run(dir, data, SP_ON_ERROR_FAIL, 2, ref, 0, &w, &st, -1);
    CHECK_MSG(w.n == 1 && strstr(w.last, SP__CM_NAME), "missing manifest: %d warnings: %s", w.n,
              w.last);
    CHECK(st.batches_read == NB && st.committed == 1);
    pool_run(dir, data, SP_ON_ERROR_FAIL, 2, ref, 0, &w, &st, -1);
    CHECK(st.batches_read == TOTAL);
    printf("  %d damaged files caught by the pool's readers\n", rounds);
}

static void failures(void) {
    sp_digest ref[TOTAL];
    size_t nf = reference(bad_data, SP_ON_ERROR_SKIP, ref);
    CHECK(nf >= 1);
    char dir[400];
    snprintf(dir, sizeof dir, "%s/skip", root);
    warns w = {0, ""};
    sp_cache_stats st;
    pool_run(dir, bad_data, SP_ON_ERROR_SKIP, 2, ref, nf, &w, &st, -1);
    CHECK_MSG(w.n == 0 && st.committed == EPOCHS && st.batches_written == TOTAL,
              "skip, cold: %d warnings (%s), %llu committed", w.n, w.last,
              (unsigned long long)st.committed);
    pool_run(dir, bad_data, SP_ON_ERROR_SKIP, 3, ref, nf, &w, &st, -1);
    /* The batches with a skipped sample are read too, failure log and all. */
    CHECK_MSG(w.n == 0 && st.batches_read == TOTAL && st.batches_computed == 0,
              "skip, warm: %llu read, %llu computed", (unsigned long long)st.batches_read,
              (unsigned long long)st.batches_computed);
}

/* ---- cached batches with failed samples: the pool reads what the in-process helper reads --- */

#define MAXFAIL 64
typedef struct fstream {
    sp_digest d[TOTAL];
    uint32_t count[TOTAL], nskipped[TOTAL], nsubst[TOTAL];
    uint64_t lists[TOTAL];         /* a hash of the batch's skipped and substituted lists */
    size_t nfail;
    sp_failure fail[MAXFAIL];
    sp_cache_stats st;
} fstream;

static void frecord(fstream *f, int q, const sp_loader *ld, const sp_batch *b) {
    f->d[q] = sp_batch_digest(ld, b);
    f->count[q] = b->count;
    f->nskipped[q] = b->nskipped;
    f->nsubst[q] = b->nsubstituted;
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < b->nskipped; i++) h = (h ^ b->skipped[i]) * 1099511628211ull;
    for (uint32_t i = 0; i < 2 * b->nsubstituted; i++)
        h = (h ^ (b->substituted[i] + 7)) * 1099511628211ull;
    f->lists[q] = h;
}

static void ffailures(fstream *f, const sp_loader *ld) {
    f->nfail = sp_loader_failure_count(ld);
    CHECK(f->nfail <= MAXFAIL);
    for (size_t i = 0; i < f->nfail; i++) CHECK(sp_loader_failure_get(ld, i, &f->fail[i]) == 0);
}

/* The in-process helper's stream through the cache at dir. */
static void inproc_cached(const char *dir, const char *ds, sp_on_error oe, fstream *f) {
    memset(f, 0, sizeof *f);
    sp_loader_config cfg;
    config(&cfg, ds, oe);
    sp_loader *ld;
    sp_cache *c;
    sp_error err;
    CHECK_OK(sp_loader_create(&cfg, &ld, &err), &err);
    warns w = {0, ""};
    sp_cache_opts o;
    opts(&o, &w);
    CHECK_OK(sp_cache_open(dir, &o, &c, &err), &err);
    sp_batch b;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint64_t i = 0; i < NB; i++) {
            CHECK_OK(sp__cache_epoch_batch(c, ld, e, i, &b, &err), &err);
            frecord(f, (int)(e * NB + i), ld, &b);
        }
    sp_cache_flush(c);
    sp_cache_stats_get(c, &f->st);
    ffailures(f, ld);
    CHECK_MSG(w.n == 0, "in-process: %s", w.last);
    sp_batch_free(&b);
    sp_cache_close(c);
    sp_loader_destroy(ld);
}

/* The pool's stream (2 workers) through the cache at dir. */
static void pool_cached(const char *dir, const char *ds, sp_on_error oe, fstream *f) {
    memset(f, 0, sizeof *f);
    sp_loader_config cfg;
    config(&cfg, ds, oe);
    warns w = {0, ""};
    sp_cache_opts o;
    opts(&o, &w);
    sp_pool_config pc = {2, 0, EPOCHS, NULL, dir, &o};
    sp_pool *pool;
    sp_error err;
    CHECK_OK(sp__pool_create(&cfg, &pc, &pool, &err), &err);
    sp_batch v;
    for (int q = 0; q < TOTAL; q++) {
        CHECK_OK(sp__pool_next(pool, &v, &err), &err);
        frecord(f, q, sp__pool_loader(pool), &v);
        CHECK_OK(sp__pool_release(pool, &v, &err), &err);
    }
    CHECK(sp__pool_next(pool, &v, &err) == SP_END);
    sp_cache_stats_get(sp_pool_cache(pool), &f->st);
    ffailures(f, sp__pool_loader(pool));
    CHECK_MSG(w.n == 0, "pool: %s", w.last);
    sp__pool_destroy(pool);
}

static void fsame(const fstream *a, const fstream *b, const char *what) {
    for (int q = 0; q < TOTAL; q++)
        CHECK_MSG(eq(a->d[q], b->d[q]) && a->count[q] == b->count[q] &&
                      a->nskipped[q] == b->nskipped[q] && a->nsubst[q] == b->nsubst[q] &&
                      a->lists[q] == b->lists[q],
                  "%s: batch %d differs", what, q);
    CHECK_MSG(a->nfail == b->nfail, "%s: %zu vs %zu failures", what, a->nfail, b->nfail);
    for (size_t i = 0; i < a->nfail; i++)
        CHECK_MSG(a->fail[i].sample == b->fail[i].sample && a->fail[i].code == b->fail[i].code &&
                      strcmp(a->fail[i].msg, b->fail[i].msg) == 0,
                  "%s: failure %zu: %s vs %s", what, i, a->fail[i].msg, b->fail[i].msg);
}

static void failure_hits(const char *ds, sp_on_error oe, const char *name) {
    char d1[400], d2[400];
    snprintf(d1, sizeof d1, "%s/fh-%s-inproc", root, name);
    snprintf(d2, sizeof d2, "%s/fh-%s-pool", root, name);
    fstream ref, cold, warm_in, warm_pool, cross_in, cross_pool;
    inproc_cached(d1, ds, oe, &ref);   /* fills d1 */
    CHECK(ref.st.batches_written == TOTAL && ref.st.committed == EPOCHS && ref.nfail >= 2);
    int with = 0;
    for (int q = 0; q < TOTAL; q++) with += ref.nskipped[q] + ref.nsubst[q] > 0;
    inproc_cached(d1, ds, oe, &warm_in);
    pool_cached(d1, ds, oe, &warm_pool);   /* the pool reads the helper's entry */
    pool_cached(d2, ds, oe, &cold);        /* the pool fills d2 ... */
    pool_cached(d2, ds, oe, &cross_pool);  /* ... reads it ... */
    inproc_cached(d2, ds, oe, &cross_in);  /* ... and so does the helper */
    fsame(&ref, &warm_in, "in-process, warm");
    fsame(&ref, &warm_pool, "pool, warm from the in-process entry");
    fsame(&ref, &cold, "pool, cold");
    fsame(&ref, &cross_pool, "pool, warm from its own entry");
    fsame(&ref, &cross_in, "in-process, warm from the pool's entry");
    printf("  %s: %d of %d batches hold failed samples; warm reads: in-process %llu, pool %llu "
           "and %llu (computed %llu and %llu)\n", name, with, TOTAL,
           (unsigned long long)warm_in.st.batches_read,
           (unsigned long long)warm_pool.st.batches_read,
           (unsigned long long)cross_pool.st.batches_read,
           (unsigned long long)warm_pool.st.batches_computed,
           (unsigned long long)cross_pool.st.batches_computed);
    CHECK(with >= 4);
    CHECK(warm_in.st.batches_read == TOTAL && warm_in.st.batches_computed == 0);
    CHECK_MSG(warm_pool.st.batches_read == warm_in.st.batches_read &&
                  cross_pool.st.batches_read == warm_in.st.batches_read &&
                  warm_pool.st.batches_computed == 0 && cross_pool.st.batches_computed == 0,
              "%s: the warm pool read %llu and %llu batches, the in-process helper %llu", name,
              (unsigned long long)warm_pool.st.batches_read,
              (unsigned long long)cross_pool.st.batches_read,
              (unsigned long long)warm_in.st.batches_read);
}

/* Every worker's writes fail (the write-failure hook, inherited by the
 * workers): no entry is committed and nothing is left staged. The hook
 * exists only in builds configured with SEEDPIPE_TEST_HOOKS=ON: elsewhere
 * the case skips. */
static void full_disk(const sp_digest *ref) {
#ifndef SEEDPIPE_TEST_HOOKS
    (void)ref;
    SKIP("the cache write-failure hook (sp__cache_fail_after_bytes) is compiled only into "
         "builds configured with -DSEEDPIPE_TEST_HOOKS=ON");
#else
    char dir[400], tmp[500];
    snprintf(dir, sizeof dir, "%s/full", root);
    snprintf(tmp, sizeof tmp, "%s/.tmp", dir);
    sp__cache_fail_after_bytes = 3000;   /* inherited by the workers: each fails its writes */
    warns w = {0, ""};
    sp_cache_stats st;
    pool_run(dir, data, SP_ON_ERROR_FAIL, 2, ref, 0, &w, &st, -1);
    sp__cache_fail_after_bytes = 0;
    CHECK_MSG(w.n >= 1 && strstr(w.last, "uncached") && st.committed == 0,
              "full disk: %d warnings (%s), %llu committed", w.n, w.last,
              (unsigned long long)st.committed);
    CHECK_MSG(count_dir(dir) == 0 && count_dir(tmp) == 0, "full disk left %d entries, %d staged",
              count_dir(dir), count_dir(tmp));
#endif
}

static void concurrent(const sp_digest *ref) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/race", root);
    for (int lock = 0; lock < 2; lock++) {
        rmrf(dir);
        pid_t kids[2];
        for (int k = 0; k < 2; k++) {
            kids[k] = fork();
            CHECK(kids[k] >= 0);
            if (kids[k] == 0) {
                warns w = {0, ""};
                sp_cache_stats st;
                pool_run(dir, data, SP_ON_ERROR_FAIL, 2, ref, 0, &w, &st, -1);
                _exit(0);
            }
        }
        for (int k = 0; k < 2; k++) {
            int status;
            CHECK(waitpid(kids[k], &status, 0) == kids[k]);
            CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a concurrent filler failed");
        }
        char tmp[500];
        snprintf(tmp, sizeof tmp, "%s/.tmp", dir);
        CHECK(count_dir(dir) == EPOCHS && count_dir(tmp) == 0);
        warns w = {0, ""};
        sp_cache_stats st;
        pool_run(dir, data, SP_ON_ERROR_FAIL, 3, ref, 0, &w, &st, -1);
        CHECK(w.n == 0 && st.batches_read == TOTAL);
    }
}

/* A worker dies right after writing a batch file (every epoch's batch 2):
 * the consumer replaces the file and the entries are still committed. The
 * hook exists only in builds configured with SEEDPIPE_TEST_HOOKS=ON:
 * elsewhere the case skips. */
static void die_writing(const sp_digest *ref) {
#ifndef SEEDPIPE_TEST_HOOKS
    (void)ref;
    SKIP("the cache-write crash hook (SEEDPIPE_TEST_CRASH_CACHE_WRITE) is compiled only into "
         "builds configured with -DSEEDPIPE_TEST_HOOKS=ON");
#else
    char dir[400], tmp[500];
    snprintf(dir, sizeof dir, "%s/diewrite", root);
    snprintf(tmp, sizeof tmp, "%s/.tmp", dir);
    CHECK(setenv("SEEDPIPE_TEST_CRASH_CACHE_WRITE", "2", 1) == 0);
    warns w = {0, ""};
    sp_cache_stats st;
    pool_run(dir, data, SP_ON_ERROR_FAIL, 2, ref, 0, &w, &st, -1);
    CHECK(unsetenv("SEEDPIPE_TEST_CRASH_CACHE_WRITE") == 0);
    CHECK_MSG(last_deaths >= EPOCHS, "the hook killed %llu workers",
              (unsigned long long)last_deaths);
    CHECK_MSG(w.n == 0 && st.committed == EPOCHS && st.batches_written == TOTAL &&
                  st.write_failures == 0,
              "a writer's death: %d warnings (%s), %llu committed, %llu written",
              w.n, w.last, (unsigned long long)st.committed,
              (unsigned long long)st.batches_written);
    CHECK(count_dir(tmp) == 0);
    pool_run(dir, data, SP_ON_ERROR_FAIL, 2, ref, 0, &w, &st, -1);
    CHECK(w.n == 0 && st.batches_read == TOTAL);
#endif
}

#ifdef SEEDPIPE_TEST_HOOKS
/* A warning's callback that also notes whether it ran on the thread that
 * takes the batches (main). */
typedef struct thread_warns {
    warns w;
    pthread_t main;
    int elsewhere;
} thread_warns;
static void on_thread_warn(void *ud, const char *msg) {
    thread_warns *tw = ud;
    if (!pthread_equal(pthread_self(), tw->main)) tw->elsewhere++;
    on_warn(&tw->w, msg);
}

/* A cold pool run into dir with max_size (0: none); fail_after > 0: the
 * consumer's cache writes (not the workers', forked before) fail after that
 * many bytes. Every digest checked. */
static void cold_run(const char *dir, uint64_t max_size, long long fail_after,
                     const sp_digest *ref, thread_warns *tw, sp_cache_stats *st) {
    sp_loader_config cfg;
    config(&cfg, data, SP_ON_ERROR_FAIL);
    sp_cache_opts o;
    opts(&o, NULL);
    o.warn = on_thread_warn;
    o.warn_ud = tw;
    o.max_size = max_size;
    sp_pool_config pc = {2, 0, EPOCHS, NULL, dir, &o};
    sp_pool *pool;
    sp_error err;
    CHECK_OK(sp__pool_create(&cfg, &pc, &pool, &err), &err);
    sp__cache_fail_after_bytes = fail_after;
    sp_batch v;
    for (int q = 0; q < TOTAL; q++) {
        CHECK_OK(sp__pool_next(pool, &v, &err), &err);
        CHECK(eq(sp_batch_digest(sp__pool_loader(pool), &v), ref[q]));
        CHECK_OK(sp__pool_release(pool, &v, &err), &err);
    }
    CHECK(sp__pool_next(pool, &v, &err) == SP_END);
    sp_cache_stats_get(sp_pool_cache(pool), st);   /* the last commit is counted by now */
    sp__pool_destroy(pool);
    sp__cache_fail_after_bytes = 0;
}
#endif

/* Each epoch's commit and the gc after it run on the cache's commit thread
 * (cache_commit.c), and are accounted on the consumer's: with room for one
 * entry, both epochs are committed (off the consumer's thread: the hook's
 * count) and only the last one's entry is left (gc after each commit);
 * when the consumer's writes fail (its manifests, on the commit thread),
 * each epoch warns "was not cached" on the consumer's thread, nothing is
 * committed and nothing is left staged. The count and the failures are
 * test hooks: without SEEDPIPE_TEST_HOOKS the case skips. */
static void commit_thread(const sp_digest *ref) {
#ifndef SEEDPIPE_TEST_HOOKS
    (void)ref;
    SKIP("the commit-thread count and the write-failure hook are compiled only into builds "
         "configured with -DSEEDPIPE_TEST_HOOKS=ON");
#else
    char one[400], dir[400], tmp[500], ent[800];
    snprintf(one, sizeof one, "%s/sized", root);
    snprintf(dir, sizeof dir, "%s/gc", root);
    thread_warns tw = {{0, ""}, pthread_self(), 0};
    sp_cache_stats st;
    cold_run(one, 0, 0, ref, &tw, &st);   /* the entries' sizes */
    sp_cache *c;
    sp_error err;
    sp_cache_entry_info *e;
    size_t n;
    CHECK_OK(sp_cache_open(one, NULL, &c, &err), &err);
    CHECK_OK(sp_cache_list(c, &e, &n, &err), &err);
    CHECK(n == EPOCHS);
    uint64_t biggest = e[0].disk_bytes > e[1].disk_bytes ? e[0].disk_bytes : e[1].disk_bytes;
    sp_cache_list_free(e, n);
    sp_cache_close(c);
    unsigned long before = sp__cache_commits_threaded;
    cold_run(dir, biggest + biggest / 2, 0, ref, &tw, &st);
    CHECK_MSG(st.committed == EPOCHS && sp__cache_commits_threaded - before == EPOCHS,
              "%llu committed, %lu of them on the commit thread",
              (unsigned long long)st.committed, sp__cache_commits_threaded - before);
    /* Room for one entry: the gc after each commit left exactly one of the
     * run's epochs. Which one is not asserted: entries are evicted least
     * recently used first by their manifests' mtimes, which tie when both
     * commits fall in one tick of the filesystem's clock (then the key
     * decides; seen under load, 4 runs in 150). */
    int kept = 0;
    for (uint32_t ep = 0; ep < EPOCHS; ep++) {
        entry_of(dir, data, ep, ent, sizeof ent);
        kept += count_dir(ent) > 0;
    }
    CHECK_MSG(count_dir(dir) == 1 && kept == 1, "gc left %d entries, %d of the run's epochs",
              count_dir(dir), kept);
    CHECK(tw.w.n == 0);
    rmrf(dir);
    cold_run(dir, 0, 1, ref, &tw, &st);
    snprintf(tmp, sizeof tmp, "%s/.tmp", dir);
    CHECK_MSG(tw.w.n == EPOCHS && tw.elsewhere == 0 && strstr(tw.w.last, "was not cached") &&
                  st.committed == 0 && st.write_failures == EPOCHS,
              "failed commits: %d warnings (%d on another thread; last: %s), %llu committed, "
              "%llu write failures", tw.w.n, tw.elsewhere, tw.w.last,
              (unsigned long long)st.committed, (unsigned long long)st.write_failures);
    CHECK(count_dir(dir) == 0 && count_dir(tmp) == 0);
#endif
}

static void kill_worker(const sp_digest *ref) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/kill", root);
    warns w = {0, ""};
    sp_cache_stats st;
    pool_run(dir, data, SP_ON_ERROR_FAIL, 3, ref, 0, &w, &st, 2);   /* cold */
    pool_run(dir, data, SP_ON_ERROR_FAIL, 3, ref, 0, &w, &st, 3);   /* warm (or refilled) */
    pool_run(dir, data, SP_ON_ERROR_FAIL, 2, ref, 0, &w, &st, -1);
    CHECK_MSG(st.batches_read + st.batches_computed == TOTAL, "after kills: %llu read",
              (unsigned long long)st.batches_read);
}

/* ---- cases: each in its own process; ref is the in-process stream of `data` ------------ */

static sp_digest g_ref[TOTAL];

static void setup(void) {
    snprintf(root, sizeof root, "/tmp/sp_test_cache_pool.XXXXXX");
    CHECK(mkdtemp(root));
    snprintf(data, sizeof data, "%s/data", root);
    snprintf(bad_data, sizeof bad_data, "%s/bad", root);
    sp_error err;
    sp_shapes_opts so = {NSAMPLES, 32, 9};
    CHECK_OK(sp_shapes_make(data, &so, &err), &err);
    CHECK(reference(data, SP_ON_ERROR_FAIL, g_ref) == 0);
}

static void teardown(void) { rmrf(root); }

static void test_cold_warm(void) { cold_warm(g_ref); }
static void test_damage(void) { damage(g_ref); }
static void test_failures(void) {
    /* The broken copy only this case reads (made here, not in setup). */
    sp_error err;
    sp_shapes_opts so = {NSAMPLES, 32, 9};
    CHECK_OK(sp_shapes_make(bad_data, &so, &err), &err);
    sp_test_break_png(bad_data, 7);   /* one undecodable file for the on-error test */
    failures();
}
static void test_failure_hits(void) {
    char ds[400];
    snprintf(ds, sizeof ds, "%s/manybad", root);
    sp_error err;
    sp_shapes_opts so = {NSAMPLES, 32, 9};
    CHECK_OK(sp_shapes_make(ds, &so, &err), &err);
    for (int n = 2; n <= 30; n += 3) sp_test_break_png(ds, n);   /* 10 of its 30 PNGs */
    failure_hits(ds, SP_ON_ERROR_SKIP, "skip");
    failure_hits(ds, SP_ON_ERROR_SUBSTITUTE, "substitute");
}
static void test_full_disk(void) { full_disk(g_ref); }
static void test_concurrent(void) { concurrent(g_ref); }
static void test_kill(void) { kill_worker(g_ref); }
static void test_die_writing(void) { die_writing(g_ref); }
static void test_commit_thread(void) { commit_thread(g_ref); }

static const sp_case cases[] = {
    SP_CASE(test_cold_warm),
    SP_CASE(test_damage),
    SP_CASE(test_failures),
    SP_CASE(test_failure_hits),
    SP_CASE(test_full_disk),
    SP_CASE(test_concurrent),
    SP_CASE(test_kill),
    SP_CASE(test_die_writing),
    SP_CASE(test_commit_thread),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}
