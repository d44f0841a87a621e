/* verify.c - run one stream in many configurations and compare it batch by batch (verify.h).
 *
 * Every row is one or more batch streams (stream.h): one stream for the
 * in-process, pool, crash and resume rows; K streams, one per rank, whose
 * slices of each global batch are concatenated in rank order and digested
 * as one batch, for the service rows (K clients of services forked here)
 * and the world rows (K in-process loaders). Each row keeps per batch its
 * digest and the digest of its skipped / substituted lists, and copies
 * the first batch that differs from the reference; its stream digest is
 * sp_stream_digest_of() its batch digests, as `seedpipe digest` prints
 * it. The report is then built from those: the first divergence is
 * located by recomputing the reference's batch with a fresh loader and
 * comparing sample indices, then bytes (verify_report.c renders it).
 */
#define _XOPEN_SOURCE 700   /* nftw, mkdtemp */
#include <ftw.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/hash_internal.h"
#include "stream/verify_internal.h"
#include "seedpipe/service.h"
#include "seedpipe/stream.h"
#include "loader/loader_internal.h"
#include "pool/pool_internal.h"
#include "service/service_internal.h"

static int same(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

/* XXH3-128 of a batch's skipped samples and (failed, substitute) pairs,
 * which sp_batch_digest() leaves out. */
static sp_digest lists_digest(const sp_batch *b) {
    sp__hash h;
    sp__hash_init(&h);
    sp__hash_u64(&h, b->nskipped);
    for (uint32_t i = 0; i < b->nskipped; i++) sp__hash_u64(&h, b->skipped[i]);
    sp__hash_u64(&h, b->nsubstituted);
    for (uint32_t i = 0; i < 2 * b->nsubstituted; i++) sp__hash_u64(&h, b->substituted[i]);
    return sp__hash_digest(&h);
}

static void copy_divergent(sp__verify_run *r, const sp_batch *b, size_t sb,
                           const uint32_t *counts, uint32_t k) {
    r->div = (int64_t)r->n;
    r->div_count = b->count;
    r->div_indices = malloc((b->count + 1) * sizeof(uint64_t));
    r->div_images = malloc((size_t)b->count * sb + 1);
    if (r->div_indices) memcpy(r->div_indices, b->indices, b->count * sizeof(uint64_t));
    if (r->div_images) memcpy(r->div_images, b->images, (size_t)b->count * sb);
    if (counts && k && (r->div_counts = malloc(k * sizeof *counts)))
        memcpy(r->div_counts, counts, k * sizeof *counts);
}

/* Per-batch bookkeeping of every row: digest, lists, the first divergence
 * from the reference (counts: the ranks' samples of a K-rank row, or NULL). */
static void record_batch(sp__verify *v, sp__verify_run *r, const sp_batch *b, sp_digest d,
                         size_t sb, const uint32_t *counts, uint32_t k) {
    sp_digest l = lists_digest(b);
    if (r->n < v->total) {
        r->d[r->n] = d;
        r->lists[r->n] = l;
    }
    const sp__verify_run *ref = v->ref;
    if (ref && r->div < 0 && (r->n >= ref->n || !same(ref->d[r->n], d)))
        copy_divergent(r, b, sb, counts, k);
    if (ref && r->list_div < 0 && r->n < ref->n && !same(ref->lists[r->n], l))
        r->list_div = (int64_t)r->n;
    r->n++;
    if (v->cfg.progress && (r->n % 8 == 0 || r->n == v->total))
        v->cfg.progress(v->cfg.progress_ud, r->row.name, r->n, v->total);
}

static int result_init(sp__verify *v, sp__verify_run *r, sp_error *err) {
    r->d = calloc(v->total + 1, sizeof *r->d);
    r->lists = calloc(v->total + 1, sizeof *r->lists);
    r->div = -1;
    r->list_div = -1;
    return r->d && r->lists ? SP_OK : sp_error_set(err, SP_ENOMEM, "out of memory");
}

/* The row's stream digest is sp_stream_digest_of() its batch digests, as
 * `seedpipe digest` prints it. Every row ends at the same epoch, so none
 * has more than v->total batches (one that had would differ from the
 * reference already at batch v->total, and be reported so). */
static void result_end(sp__verify *v, sp__verify_run *r, int rc, const sp_error *err) {
    r->row.stream = sp_stream_digest_of(r->d, r->n < v->total ? r->n : v->total);
    r->row.batches = r->n;
    r->row.rc = rc;
    if (rc != 0) snprintf(r->row.msg, sizeof r->row.msg, "%s", err->msg);
    if (v->cfg.progress) v->cfg.progress(v->cfg.progress_ud, NULL, 0, 0);
}

/* SIGKILL worker w of the stream's pool and wait (up to 2 s) until it is a
 * zombie, so the pool is sure to notice it even if the rest of the stream
 * is already computed. */
static void kill_worker(sp_stream *s, int w) {
    sp_pool *pool = sp_stream_pool(s);
    int pid = pool ? sp_pool_worker_pid(pool, w) : 0;
    if (pid <= 0 || kill(pid, SIGKILL) != 0) return;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "r");
        if (!f) break;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && p[2] == 'Z') break;
        usleep(1000);
    }
}

static int open_one(sp__verify *v, int workers, const sp_loader_state *resume, sp_stream **s,
                    sp_error *err) {
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = workers > 0 ? SP_STREAM_POOL : SP_STREAM_LOADER;
    sc.workers = workers;
    sc.ring_slots = v->cfg.ring_slots;
    sc.epochs = v->cfg.epochs;
    sc.resume = resume;
    sc.cache_dir = v->cache;
    sc.cache_opts = v->cfg.cache_opts;
    return sp_stream_open(&v->lcfg, &sc, s, err);
}

/* Stop, save the state as text, read it back, resume on workers2. */
static int stop_and_resume(sp__verify *v, sp_stream **s, int workers2, sp_error *err) {
    sp_loader_state state, back;
    sp_stream_state(*s, &state);
    char text[SP_STATE_TEXT_MAX];
    int len = sp_loader_state_format(&state, text, sizeof text);
    sp_stream_close(*s);
    *s = NULL;
    int rc = sp_loader_state_parse(text, (size_t)len, &back, err);
    return rc != 0 ? rc : open_one(v, workers2, &back, s, err);
}

/* One stream: workers (0 = in-process), kill_at / stop_at batch numbers
 * (-1: none), resume on workers2. */
static void run_config(sp__verify *v, sp__verify_run *r, int workers, int64_t kill_at,
                       int64_t stop_at, int workers2) {
    sp_error err;
    sp_error_clear(&err);
    sp_stream *s = NULL;
    int rc = result_init(v, r, &err);
    if (rc == 0) rc = open_one(v, workers, NULL, &s, &err);
    while (rc == 0) {
        if (stop_at >= 0 && (int64_t)r->n == stop_at) {
            stop_at = -1;
            if ((rc = stop_and_resume(v, &s, workers2, &err)) != 0) break;
        }
        sp_batch b;
        rc = sp_stream_next(s, &b, &err);
        if (rc == SP_END) {
            rc = 0;
            break;
        }
        if (rc != 0) break;
        sp_stream_info in;
        sp_stream_info_get(s, &in);
        record_batch(v, r, &b, sp_stream_batch_digest(s, &b), in.sample_bytes, NULL, 0);
        sp_stream_release(s, &b, NULL);
        if (kill_at >= 0 && (int64_t)r->n == kill_at) kill_worker(s, 0);
    }
    if (s && sp_stream_pool(s)) {
        sp_pool_stats ps;
        sp__pool_stats_get(sp_stream_pool(s), &ps);
        r->row.worker_deaths = ps.worker_deaths;
    }
    sp_stream_close(s);
    result_end(v, r, rc, &err);
}

/* A batch buffer for a whole global batch (B samples) and its lists. */
static int cat_alloc(sp_batch *cat, uint32_t B, size_t sb) {
    memset(cat, 0, sizeof *cat);
    cat->capacity = B;
    cat->images = malloc((size_t)B * sb + 1);
    cat->labels = malloc(B * sizeof(int32_t) + 1);
    cat->indices = malloc(B * sizeof(uint64_t) + 1);
    cat->skipped = malloc(B * sizeof(uint64_t) + 1);
    cat->substituted = malloc(2 * B * sizeof(uint64_t) + 1);
    return cat->images && cat->labels && cat->indices && cat->skipped && cat->substituted;
}

static void cat_free(sp_batch *cat) {
    free(cat->images);
    free(cat->labels);
    free(cat->indices);
    free(cat->skipped);
    free(cat->substituted);
}

/* Append a rank's slice (samples and lists) to the concatenation. */
static void cat_append(sp_batch *cat, const sp_batch *v, size_t sb) {
    memcpy(cat->images + (size_t)cat->count * sb, v->images, (size_t)v->count * sb);
    memcpy(cat->labels + cat->count, v->labels, v->count * sizeof(int32_t));
    memcpy(cat->indices + cat->count, v->indices, v->count * sizeof(uint64_t));
    memcpy(cat->skipped + cat->nskipped, v->skipped, v->nskipped * sizeof(uint64_t));
    memcpy(cat->substituted + 2 * cat->nsubstituted, v->substituted,
           2 * v->nsubstituted * sizeof(uint64_t));
    cat->count += v->count;
    cat->nskipped += v->nskipped;
    cat->nsubstituted += v->nsubstituted;
}

/* Take the next slice from each of the K streams and concatenate them in
 * rank order into cat. @return 0, SP_END (all ended), or an error. */
static int next_global(sp_stream **s, uint32_t K, sp_batch *views, sp_batch *cat,
                       uint32_t *counts, size_t sb, sp_error *err) {
    int ends = 0, rc = 0;
    for (uint32_t k = 0; k < K && rc == 0; k++) {
        int x = sp_stream_next(s[k], &views[k], err);
        if (x == SP_END) ends++;
        else rc = x;
    }
    if (rc != 0) return rc;
    if (ends) return ends == (int)K ? SP_END
                                    : sp_error_set(err, SP_EIO, "the ranks' streams have "
                                                   "different lengths");
    cat->count = cat->nskipped = cat->nsubstituted = 0;
    cat->epoch = views[0].epoch;
    cat->index = views[0].index;
    for (uint32_t k = 0; k < K; k++) {
        cat_append(cat, &views[k], sb);
        counts[k] = views[k].count;
        if (views[k].epoch != cat->epoch || views[k].index != cat->index)
            rc = sp_error_set(err, SP_EIO, "rank %u is at another batch", k);
    }
    return rc;
}

/* K streams, one per rank (already open, or rc != 0): every global batch is
 * the K slices concatenated in rank order, digested as one batch. */
static void run_ranks(sp__verify *v, sp__verify_run *r, sp_stream **s, uint32_t K, int rc,
                      sp_error *err) {
    sp_batch views[SP_VERIFY_MAX_WORLD], cat;
    uint32_t counts[SP_VERIFY_MAX_WORLD];
    memset(&cat, 0, sizeof cat);
    sp_stream_info in;
    memset(&in, 0, sizeof in);
    if (rc == 0) {
        sp_stream_info_get(s[0], &in);
        if (!cat_alloc(&cat, in.batch_size, in.sample_bytes))
            rc = sp_error_set(err, SP_ENOMEM, "out of memory");
    }
    while (rc == 0) {
        rc = next_global(s, K, views, &cat, counts, in.sample_bytes, err);
        if (rc == SP_END) {
            rc = 0;
            break;
        }
        if (rc != 0) break;
        record_batch(v, r, &cat, sp_stream_batch_digest(s[0], &cat), in.sample_bytes,
                     K > 1 ? counts : NULL, K > 1 ? K : 0);
        for (uint32_t k = 0; k < K; k++) sp_stream_release(s[k], &views[k], NULL);
    }
    cat_free(&cat);
    r->row.rc = rc;
}

/* World size K in-process: K loaders (rank k of world K). Equal to the
 * reference (world 1) iff the union of the ranks' slices is the global
 * batch stream. */
static void run_world(sp__verify *v, sp__verify_run *r, uint32_t K) {
    sp_error err;
    sp_error_clear(&err);
    r->row.world = K;
    sp_stream *s[SP_VERIFY_MAX_WORLD] = {0};
    int rc = result_init(v, r, &err);
    for (uint32_t k = 0; rc == 0 && k < K; k++) {
        sp_loader_config c = v->lcfg;
        c.rank = k;
        c.world = K;
        sp_stream_config sc;
        sp_stream_config_default(&sc);
        sc.epochs = v->cfg.epochs;
        rc = sp_stream_open(&c, &sc, &s[k], &err);
    }
    run_ranks(v, r, s, K, rc, &err);
    for (uint32_t k = 0; k < K; k++) sp_stream_close(s[k]);
    result_end(v, r, r->row.rc, &err);
}

/* The stream through services (child processes, private region names) read
 * by K clients in this process, one per rank, alternately. nsvc 1: one
 * service for all K ranks; 2: one per half (ranks 0..K/2-1 and K/2..K-1, as
 * two nodes would run them), each computing only its ranks. */
static void run_service(sp__verify *v, sp__verify_run *r, int workers, uint32_t K, uint32_t nsvc) {
    sp_error err;
    sp_error_clear(&err);
    char name[2][80];
    uint32_t first[2] = {0, nsvc == 2 ? K / 2 : K};
    pid_t pid[2] = {0, 0};
    sp_stream *s[SP_VERIFY_MAX_WORLD] = {0};
    int rc = result_init(v, r, &err);
    for (uint32_t i = 0; rc == 0 && i < nsvc; i++) {
        /* A private name; the leading dot keeps it out of plain `ls /dev/shm`. */
        snprintf(name[i], sizeof name[i], ".seedpipe-verify-%d-%u-%u-%u", (int)getpid(), K,
                 nsvc, i);
        uint32_t end = i + 1 < nsvc ? first[i + 1] : K;
        sp_service_config sc = {name[i],  K,        workers,  v->cfg.ring_slots, v->cfg.epochs,
                                NULL,     v->cache, v->cfg.cache_opts, first[i], end - first[i],
                                NULL};
        rc = sp__service_fork(&v->lcfg, &sc, &pid[i], &err);
        if (rc != 0) pid[i] = 0;
    }
    for (uint32_t k = 0; rc == 0 && k < K; k++) {
        sp_stream_config sc;
        sp_stream_config_default(&sc);
        sc.kind = SP_STREAM_SERVICE;
        sc.service_name = name[nsvc == 2 && k >= first[1]];
        sc.rank = k;
        rc = sp_stream_open(NULL, &sc, &s[k], &err);
    }
    run_ranks(v, r, s, K, rc, &err);
    rc = r->row.rc;
    for (uint32_t k = 0; k < K; k++) sp_stream_close(s[k]);
    for (uint32_t i = 0; i < nsvc; i++)
        if (pid[i] > 0) {
            int status, jrc = sp__service_join(pid[i], rc == 0 ? 10000 : 0, &status,
                                               rc == 0 ? &err : NULL);
            if (rc == 0 && jrc != 0) rc = jrc;
            else if (rc == 0 && status != 0)
                rc = sp_error_set(&err, SP_EIO, "the service exited with status %d", status);
        }
    result_end(v, r, rc, &err);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static sp__verify_run *row(sp__verify *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static sp__verify_run *row(sp__verify *v, const char *fmt, ...) {
    sp__verify_run *r = &v->runs[v->nruns++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->row.name, sizeof r->row.name, fmt, ap);
    va_end(ap);
    return r;
}

/* Through the epoch cache: a cold run on the pool fills it (the workers
 * write), warm runs read every batch back (the workers read) at two worker
 * counts and through the service. */
static void cache_rows(sp__verify *v, int wmax) {
    char cdir[64] = "/tmp/seedpipe-verify-cache-XXXXXX";
    const char *user = v->cfg.cache_dir;
    if (!user && !mkdtemp(cdir)) return;
    v->cache = user ? user : cdir;
    run_config(v, row(v, "cache %s, workers %d", user ? "(--cache)" : "cold", wmax), wmax, -1,
               -1, 0);
    run_config(v, row(v, "cache warm, workers %d", wmax), wmax, -1, -1, 0);
    run_config(v, row(v, "cache warm, workers 1"), 1, -1, -1, 0);
    if (!(v->cfg.flags & SP_VERIFY_NO_SERVICE) && v->lcfg.world == 1)
        run_service(v, row(v, "cache warm, service -> client"), wmax, 1, 1);
    v->cache = NULL;
    if (!user) nftw(cdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* "0-1", or "2" for a single rank. */
static void range_text(char *buf, size_t n, uint32_t lo, uint32_t hi) {
    if (lo == hi) snprintf(buf, n, "%u", lo);
    else snprintf(buf, n, "%u-%u", lo, hi);
}

static void service_and_world_rows(sp__verify *v, int wmax) {
    int no_service = (v->cfg.flags & SP_VERIFY_NO_SERVICE) != 0;
    if (!no_service && v->lcfg.world != 1) {
        snprintf(v->skip_name, sizeof v->skip_name, "service");
        snprintf(v->skip_why, sizeof v->skip_why,
                 "not run (--rank: the service serves global batches)");
        no_service = 1;
    } else if (!no_service) {
        run_service(v, row(v, "service -> client"), wmax, 1, 1);
        if (v->lcfg.order == SP_ORDER_SEQUENTIAL || v->lcfg.pad_tail || v->lcfg.repeat > 1) {
            snprintf(v->skip_name, sizeof v->skip_name, "service -> 2 clients as ranks");
            snprintf(v->skip_why, sizeof v->skip_why, "not run (%s: the ranks' slices are not "
                     "the world-1 batch)", v->lcfg.pad_tail ? "pad_tail"
                     : v->lcfg.repeat > 1 ? "repeat" : "sequential order");
        } else if (v->lcfg.batch_size % 2 == 0) {
            run_service(v, row(v, "service -> 2 clients as ranks"), wmax, 2, 1);
        } else {
            snprintf(v->skip_name, sizeof v->skip_name, "service -> 2 clients as ranks");
            snprintf(v->skip_why, sizeof v->skip_why, "not run (odd batch size)");
        }
    }
    /* The ranks' slices, in-process and (K >= 2) through one service per
     * half of the ranks, against world 1. */
    for (int i = 0; i < v->cfg.nworlds; i++) {
        uint32_t K = (uint32_t)v->cfg.worlds[i];
        if (K == 1) continue;   /* the reference */
        run_world(v, row(v, "world %u, in-process ranks", K), K);
        if (!no_service) {
            char lo[24], hi[24];
            range_text(lo, sizeof lo, 0, K / 2 - 1);
            range_text(hi, sizeof hi, K / 2, K - 1);
            sp__verify_run *r = row(v, "world %u, services %s + %s", K, lo, hi);
            run_service(v, r, wmax, K, 2);
            r->row.world = K;
        }
    }
}

static void run_all(sp__verify *v) {
    const sp_verify_config *c = &v->cfg;
    int wmax = 2;
    for (int i = 0; i < c->nworkers; i++) wmax = c->workers[i] > wmax ? c->workers[i] : wmax;
    run_config(v, row(v, "%s", c->nworlds ? "in-process, world 1" : "in-process (reference)"),
               0, -1, -1, 0);
    v->ref = &v->runs[0];
    for (int i = 0; i < c->nworkers; i++)
        run_config(v, row(v, "workers %d", c->workers[i]), c->workers[i], -1, -1, 0);
    if (!(c->flags & SP_VERIFY_NO_CRASH))
        run_config(v, row(v, "workers %d, one SIGKILLed", wmax), wmax,
                   (int64_t)(v->total / 3 ? v->total / 3 : 1), -1, 0);
    if (!(c->flags & SP_VERIFY_NO_RESUME)) {
        int64_t at = (int64_t)(v->total / 2);
        run_config(v, row(v, "stop at %lld, resume %d->%d", (long long)at, c->workers[0], wmax),
                   c->workers[0], -1, at, wmax);
    }
    if (!(c->flags & SP_VERIFY_NO_CACHE) && v->lcfg.rng_mode == SP_RNG_PER_SAMPLE)
        cache_rows(v, wmax);
    service_and_world_rows(v, wmax);
}

static int check_vcfg(const sp_loader_config *lcfg, const sp_verify_config *c, sp_error *err) {
    if (c->epochs < 1) return sp_error_set(err, SP_EINVAL, "verify: epochs must be >= 1");
    if (c->nworkers < 1 || c->nworkers > SP_VERIFY_MAX_LIST || !c->workers || c->nworlds < 0 ||
        c->nworlds > SP_VERIFY_MAX_LIST || (c->nworlds && !c->worlds))
        return sp_error_set(err, SP_EINVAL, "verify: 1..%d worker counts and 0..%d world sizes",
                            SP_VERIFY_MAX_LIST, SP_VERIFY_MAX_LIST);
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i] < 1 || c->workers[i] > SP_POOL_MAX_WORKERS)
            return sp_error_set(err, SP_EINVAL, "verify: worker count %d is not in 1..%d",
                                c->workers[i], SP_POOL_MAX_WORKERS);
    /* World rows compare K ranks' slices, concatenated, with the whole
     * stream: the reference must be the whole stream. */
    if (c->nworlds && lcfg->world != 1)
        return sp_error_set(err, SP_EINVAL, "verify: world sizes need the whole stream (the loader "
                            "configuration is rank %u of world %u)", lcfg->rank, lcfg->world);
    for (int i = 0; i < c->nworlds; i++) {
        int K = c->worlds[i];
        /* Strided slices (sequential, repeat) and padding (its size depends on K)
         * are not the world-1 stream cut in K (docs/determinism.md 7a). */
        if (K > 1 && (lcfg->order == SP_ORDER_SEQUENTIAL || lcfg->pad_tail || lcfg->repeat > 1))
            return sp_error_set(err, SP_EUNSUPP, "verify: world size %d: with %s the ranks' "
                                "slices, concatenated, are not the world-1 stream; verify each "
                                "rank's stream (rank/world) instead", K,
                                lcfg->pad_tail ? "pad_tail"
                                : lcfg->repeat > 1 ? "repeat (strided slices)"
                                                   : "the sequential order");
        if (K < 1 || K > SP_VERIFY_MAX_WORLD)
            return sp_error_set(err, SP_EINVAL, "verify: world size %d is not in 1..%d", K,
                                SP_VERIFY_MAX_WORLD);
        if (lcfg->batch_size % (uint32_t)K != 0)
            return sp_error_set(err, SP_EINVAL, "verify: world size %d: the batch size %u is "
                                "not divisible by %d", K, lcfg->batch_size, K);
    }
    return SP_OK;
}

int sp_verify_run(const sp_loader_config *lcfg, const sp_verify_config *vcfg,
                  sp_verify_report **out, sp_error *err) {
    static const int dflt[] = {1, 2, 3, 4, 8};
    if (!out || !lcfg || !vcfg)
        return sp_error_set(err, SP_EINVAL, "verify: NULL %s", !out ? "out" : !lcfg ? "loader "
                            "configuration" : "verify configuration");
    *out = NULL;
    sp_verify_config c = *vcfg;
    if (!c.workers && !c.nworkers) {
        c.workers = dflt;
        c.nworkers = 5;
    }
    int rc = check_vcfg(lcfg, &c, err);
    if (rc != 0) return rc;
    sp__verify *v = calloc(1, sizeof *v);
    if (!v) return sp_error_set(err, SP_ENOMEM, "out of memory");
    v->lcfg = *lcfg;
    v->cfg = c;
    v->nworlds = c.nworlds;
    for (int i = 0; i < c.nworlds; i++) v->worlds[i] = c.worlds[i];
    sp_loader *ld;
    if ((rc = sp_loader_create(lcfg, &ld, err)) != 0) {
        free(v);
        return rc;
    }
    v->total = sp__loader_batches_per_epoch(ld) * c.epochs;
    sp_loader_destroy(ld);
    run_all(v);
    v->cfg.workers = NULL;   /* the caller's lists are not kept (worlds: copied) */
    v->cfg.worlds = NULL;
    sp__verify_finish(v);
    *out = (sp_verify_report *)v;
    return SP_OK;
}
