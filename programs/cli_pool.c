/* cli_pool.c - batch streams for the CLI (in-process or worker pool), verify, diff.
 *
 * A cli_stream hides where batches come from: the in-process loader
 * (--workers 0, --threads T) or the worker pool (--workers W >= 1), from the
 * start or from a --resume state. `digest` (cli_batch.c) writes a manifest
 * of whichever it gets; `verify` runs the same stream in several
 * configurations (worker counts, a SIGKILLed worker, a stop and resume,
 * a service in a child process read by one client and by 2 clients as
 * ranks whose slices are concatenated; with --world 1,2,4, for each world
 * size K the K ranks' slices from in-process loaders and from two services
 * that each serve half of the ranks, concatenated in rank order) and
 * compares per-batch digests (and skipped/substituted samples) against the
 * in-process reference, reporting the first divergence down to the byte;
 * `diff` compares two manifests.
 */
#define _XOPEN_SOURCE 700   /* nftw */
#include "cli.h"

#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "seedpipe/cache.h"
#include "seedpipe/client.h"
#include "seedpipe/manifest.h"
#include "seedpipe/pool.h"
#include "seedpipe/service.h"
#include "seedpipe/state.h"

/* ---- streams ------------------------------------------------------------------ */

struct cli_stream {
    sp_loader *ld;       /* in-process loader, or the pool's */
    sp_pool *pool;
    sp_cache *cache;     /* in-process --cache DIR, or NULL (the pool has its own) */
    sp_batch buf;        /* in-process batch buffer */
    uint64_t abs, end;   /* in-process: next and end stream positions */
    uint64_t nb;
    int held;
};

static void cache_warn(void *ud, const char *msg) {
    (void)ud;
    fprintf(stderr, "seedpipe: cache: %s\n", msg);
}

void cli_cache_opts(sp_cache_opts *o) {
    sp_cache_opts_default(o);
    o->warn = cache_warn;
}

int cli_stream_open(const sp_loader_config *cfg, int workers, int ring, uint32_t epochs,
                    const sp_loader_state *resume, cli_stream **out, sp_error *err) {
    return cli_stream_open_cached(cfg, workers, ring, epochs, resume, NULL, out, err);
}

int cli_stream_open_cached(const sp_loader_config *cfg, int workers, int ring, uint32_t epochs,
                           const sp_loader_state *resume, const char *cache_dir,
                           cli_stream **out, sp_error *err) {
    *out = NULL;
    cli_stream *s = calloc(1, sizeof *s);
    if (!s) return sp_error_set(err, SP_ENOMEM, "out of memory");
    sp_cache_opts o;
    cli_cache_opts(&o);
    int rc = 0;
    if (workers >= 1) {
        sp_pool_config pc = {workers, ring, epochs, resume, NULL, cache_dir, &o};
        rc = sp_pool_create(cfg, &pc, &s->pool, err);
        if (rc == 0) s->ld = sp_pool_loader(s->pool);
        if (rc == 0) s->nb = sp_loader_batches_per_epoch(s->ld);
    } else {
        if (cache_dir) rc = sp_cache_open(cache_dir, &o, &s->cache, err);
        if (rc == 0) rc = sp_loader_create(cfg, &s->ld, err);
        if (rc == 0 && resume) rc = sp_loader_state_check(s->ld, resume, err);
        if (rc == 0 && sp_batch_alloc(s->ld, &s->buf) != 0)
            rc = sp_error_set(err, SP_ENOMEM, "out of memory for a batch");
        if (rc == 0) {
            s->nb = sp_loader_batches_per_epoch(s->ld);
            s->abs = resume ? (uint64_t)resume->epoch * s->nb + resume->batch : 0;
            s->end = (uint64_t)epochs * s->nb;
        }
    }
    if (rc != 0) {
        cli_stream_close(s);
        return rc;
    }
    *out = s;
    return SP_OK;
}

int cli_stream_next(cli_stream *s, sp_batch **b, sp_error *err) {
    if (s->pool) {
        int rc = sp_pool_next(s->pool, &s->buf, err);
        if (rc == 0) *b = &s->buf;
        return rc;
    }
    if (s->abs >= s->end) return SP_POOL_END;
    uint32_t e = (uint32_t)(s->abs / s->nb);
    int rc = s->cache ? sp_cache_epoch_batch(s->cache, s->ld, e, s->abs % s->nb, &s->buf, err)
                      : sp_loader_batch(s->ld, e, s->abs % s->nb, &s->buf, err);
    if (rc != 0) return rc;
    s->abs++;
    *b = &s->buf;
    return SP_OK;
}

void cli_print_cache_stats(sp_cache *c, FILE *f) {
    if (!c) return;
    sp_cache_stats st;
    sp_cache_stats_get(c, &st);
    fprintf(f, "cache %s: %llu batches read, %llu computed, %llu written (%.1f MB stored, "
            "%.1f MB raw); %llu corrupt, %llu write failures\n",
            sp_cache_dir(c), (unsigned long long)st.batches_read,
            (unsigned long long)st.batches_computed, (unsigned long long)st.batches_written,
            (double)st.bytes_written / 1e6, (double)st.raw_written / 1e6,
            (unsigned long long)st.corrupt, (unsigned long long)st.write_failures);
    fflush(f);
}

sp_cache *cli_stream_cache(cli_stream *s) { return s->pool ? sp_pool_cache(s->pool) : s->cache; }

void cli_stream_release(cli_stream *s) {
    if (s->pool) sp_pool_release(s->pool, NULL);
}

sp_loader *cli_stream_loader(cli_stream *s) { return s->ld; }

void cli_stream_state(cli_stream *s, sp_loader_state *st) {
    if (s->pool) sp_pool_state(s->pool, st);
    else sp_loader_state_at(s->ld, (uint32_t)(s->abs / s->nb), s->abs % s->nb, st);
}

int cli_stream_kill_worker(cli_stream *s, int w) {
    int pid = s->pool ? sp_pool_worker_pid(s->pool, w) : 0;
    if (pid <= 0 || kill(pid, SIGKILL) != 0) return 0;
    /* Wait (up to 2 s) until it is a zombie, so the pool is sure to notice
     * it even if the rest of the stream is already computed. */
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
    return pid;
}

void cli_stream_close(cli_stream *s) {
    if (!s) return;
    sp_cache_flush(s->cache);
    sp_cache_close(s->cache);
    if (s->pool) sp_pool_destroy(s->pool);
    else {
        sp_batch_free(&s->buf);
        sp_loader_destroy(s->ld);
    }
    free(s);
}

int cli_failures_add(cli_failures *fl, const sp_loader *ld) {
    size_t n = sp_loader_failure_count(ld);
    fl->on_error = sp_loader_config_of(ld)->on_error;
    for (size_t i = 0; i < n; i++) {
        sp_failure f;
        if (sp_loader_failure_get(ld, i, &f) != 0) continue;
        size_t k = 0;
        while (k < fl->n && fl->v[k].sample != f.sample) k++;
        if (k < fl->n) continue;   /* once per sample, as a loader's log */
        if (fl->n == fl->cap) {
            size_t cap = fl->cap ? 2 * fl->cap : 16;
            sp_failure *nv = realloc(fl->v, cap * sizeof *nv);
            if (!nv) return -1;
            fl->v = nv;
            fl->cap = cap;
        }
        fl->v[fl->n++] = f;
    }
    return 0;
}

void cli_failures_print(const cli_failures *fl, FILE *f) {
    if (!fl->n) return;
    fprintf(f, "%zu sample%s failed (on-error %s):\n", fl->n, fl->n > 1 ? "s" : "",
            sp_on_error_name(fl->on_error));
    for (size_t i = 0; i < fl->n; i++)
        fprintf(f, "  sample %llu: %s\n", (unsigned long long)fl->v[i].sample, fl->v[i].msg);
}

void cli_failures_free(cli_failures *fl) {
    free(fl->v);
    memset(fl, 0, sizeof *fl);
}

void cli_print_failures(const sp_loader *ld, FILE *f) {
    cli_failures fl;
    memset(&fl, 0, sizeof fl);
    if (cli_failures_add(&fl, ld) != 0) fprintf(f, "(out of memory listing the failures)\n");
    cli_failures_print(&fl, f);
    cli_failures_free(&fl);
}

void cli_pool_options(cli_args *a, sp_loader_config *cfg, int *workers, int *ring) {
    sp_error err;
    sp_error_clear(&err);
    if (sp_on_error_parse(cli_str(a, "on-error", "fail"), &cfg->on_error, &err) != 0 ||
        sp_rng_mode_parse(cli_str(a, "rng-mode", "per-sample"), &cfg->rng_mode, &err) != 0)
        cli_usage_error(a, "%s", err.msg);
    uint64_t w = cli_u64(a, "workers", 0), r = cli_u64(a, "ring", 0);
    if (w > SP_POOL_MAX_WORKERS) cli_usage_error(a, "--workers must be <= %d", SP_POOL_MAX_WORKERS);
    if (r > 1024) cli_usage_error(a, "--ring must be <= 1024");
    *workers = (int)w;
    *ring = (int)r;
}

void cli_digest_fold(XXH3_state_t *st, sp_digest d) {
    uint8_t raw[16];
    for (int k = 0; k < 8; k++) {
        raw[k] = (uint8_t)(d.hi >> (56 - 8 * k));
        raw[8 + k] = (uint8_t)(d.lo >> (56 - 8 * k));
    }
    XXH3_128bits_update(st, raw, sizeof raw);
}

/* ---- verify ---------------------------------------------------------------------- */

#define VERIFY_MAX_WORLD (2 * SP_SERVICE_MAX_RANKS)   /* two services of 64 ranks */

typedef struct run_result {
    char name[96];
    int rc;
    char msg[SP_ERROR_MSG_MAX];
    uint64_t n;
    sp_digest *d;          /* per batch */
    sp_digest *lists;      /* per batch: its skipped and substituted samples (lists_digest) */
    sp_digest stream;
    int equal;
    uint32_t world;        /* a --world row: K; 0 for the others */
    /* first batch that differs from the reference, copied */
    int64_t div;
    uint32_t div_count;
    uint64_t *div_indices;
    uint8_t *div_images;
    uint32_t *div_counts;  /* a --world row: each rank's samples in that batch */
    int64_t list_div;      /* first batch whose skipped/substituted samples differ */
    uint64_t deaths;
} run_result;

typedef struct verify_ctx {
    cli_args *a;
    sp_loader_config cfg;
    uint32_t epochs;
    int ring;
    uint64_t total;        /* batches in the stream */
    const run_result *ref; /* NULL while running the reference */
    int tty;
    const char *cache;     /* the cache rows' directory, or NULL */
} verify_ctx;

static int same(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

static void hash_le64(XXH3_state_t *st, uint64_t x) {
    uint8_t w[8];
    for (int k = 0; k < 8; k++) w[k] = (uint8_t)(x >> (8 * k));
    XXH3_128bits_update(st, w, sizeof w);
}

/* XXH3-128 of a batch's skipped samples and (failed, substitute) pairs,
 * which sp_batch_digest() leaves out. */
static sp_digest lists_digest(const sp_batch *b) {
    XXH3_state_t *st = XXH3_createState();
    sp_digest d = {0, 0};
    if (!st) return d;
    XXH3_128bits_reset(st);
    hash_le64(st, b->nskipped);
    for (uint32_t i = 0; i < b->nskipped; i++) hash_le64(st, b->skipped[i]);
    hash_le64(st, b->nsubstituted);
    for (uint32_t i = 0; i < 2 * b->nsubstituted; i++) hash_le64(st, b->substituted[i]);
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    d.hi = h.high64;
    d.lo = h.low64;
    return d;
}

static void copy_divergent(run_result *r, const sp_batch *b, size_t sb, const uint32_t *counts,
                           uint32_t k) {
    r->div = (int64_t)r->n;
    r->div_count = b->count;
    r->div_indices = malloc((b->count + 1) * sizeof(uint64_t));
    r->div_images = malloc((size_t)b->count * sb + 1);
    if (r->div_indices) memcpy(r->div_indices, b->indices, b->count * sizeof(uint64_t));
    if (r->div_images) memcpy(r->div_images, b->images, (size_t)b->count * sb);
    if (counts && k && (r->div_counts = malloc(k * sizeof *counts)))
        memcpy(r->div_counts, counts, k * sizeof *counts);
}

/* Per-batch bookkeeping of every run: digest, lists, the first divergence
 * from the reference (counts: the ranks' samples of a --world row, or NULL). */
static void record_batch(verify_ctx *v, run_result *r, XXH3_state_t *st, const sp_batch *b,
                         sp_digest d, size_t sb, const uint32_t *counts, uint32_t k) {
    sp_digest l = lists_digest(b);
    if (r->n < v->total) {
        r->d[r->n] = d;
        r->lists[r->n] = l;
    }
    if (v->ref && r->div < 0 && (r->n >= v->ref->n || !same(v->ref->d[r->n], d)))
        copy_divergent(r, b, sb, counts, k);
    if (v->ref && r->list_div < 0 && r->n < v->ref->n && !same(v->ref->lists[r->n], l))
        r->list_div = (int64_t)r->n;
    cli_digest_fold(st, d);
    r->n++;
    if (v->tty && (r->n % 8 == 0 || r->n == v->total))
        fprintf(stderr, "\r  %-28s batch %llu/%llu   ", r->name, (unsigned long long)r->n,
                (unsigned long long)v->total);
}

static int result_init(verify_ctx *v, run_result *r, sp_error *err) {
    r->d = calloc(v->total + 1, sizeof *r->d);
    r->lists = calloc(v->total + 1, sizeof *r->lists);
    r->div = -1;
    r->list_div = -1;
    return r->d && r->lists ? SP_OK : sp_error_set(err, SP_ENOMEM, "out of memory");
}

static void result_end(verify_ctx *v, run_result *r, XXH3_state_t *st, int rc,
                       const sp_error *err) {
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    r->stream.hi = h.high64;
    r->stream.lo = h.low64;
    r->rc = rc;
    if (rc != 0) snprintf(r->msg, sizeof r->msg, "%s", err->msg);
    if (v->tty) fputs("\r\033[K", stderr);
}

/* Run one configuration: workers (0 = in-process), kill_at/stop_at batch
 * numbers (-1: none), resume with workers2. */
static void run_config(verify_ctx *v, run_result *r, int workers, int64_t kill_at,
                       int64_t stop_at, int workers2) {
    sp_error err;
    sp_error_clear(&err);
    XXH3_state_t *st = XXH3_createState();
    XXH3_128bits_reset(st);
    cli_stream *s = NULL;
    int rc = result_init(v, r, &err);
    if (rc == 0)
        rc = cli_stream_open_cached(&v->cfg, workers, v->ring, v->epochs, NULL, v->cache, &s,
                                    &err);
    while (rc == 0) {
        if (stop_at >= 0 && (int64_t)r->n == stop_at) {
            /* Stop, save the state as text, read it back, resume. */
            sp_loader_state state, back;
            cli_stream_state(s, &state);
            char text[1024];
            int len = sp_loader_state_format(&state, text, sizeof text);
            cli_stream_close(s);
            s = NULL;
            rc = sp_loader_state_parse(text, (size_t)len, &back, &err);
            if (rc == 0)
                rc = cli_stream_open_cached(&v->cfg, workers2, v->ring, v->epochs, &back, v->cache,
                                            &s, &err);
            stop_at = -1;
            if (rc != 0) break;
        }
        sp_batch *b;
        rc = cli_stream_next(s, &b, &err);
        if (rc == SP_POOL_END) {
            rc = 0;
            break;
        }
        if (rc != 0) break;
        sp_loader *ld = cli_stream_loader(s);
        record_batch(v, r, st, b, sp_batch_digest(ld, b), sp_loader_sample_bytes(ld), NULL, 0);
        cli_stream_release(s);
        if (kill_at >= 0 && (int64_t)r->n == kill_at) cli_stream_kill_worker(s, 0);
    }
    if (s && s->pool) {
        sp_pool_stats ps;
        sp_pool_stats_get(s->pool, &ps);
        r->deaths = ps.worker_deaths;
    }
    cli_stream_close(s);
    result_end(v, r, st, rc, &err);
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

/* World size K in-process: K loaders (rank k of world K, the reference's
 * options otherwise); for every global batch the K slices concatenated in
 * rank order, skipped and substituted samples too, are digested as one
 * batch. Equal to the reference (world 1) iff the union of the ranks'
 * slices is the global batch stream. */
static void run_world(verify_ctx *v, run_result *r, uint32_t K) {
    sp_error err;
    sp_error_clear(&err);
    XXH3_state_t *st = XXH3_createState();
    XXH3_128bits_reset(st);
    r->world = K;
    sp_loader *ld[VERIFY_MAX_WORLD] = {0};
    sp_batch sl[VERIFY_MAX_WORLD], cat;
    uint32_t counts[VERIFY_MAX_WORLD];
    memset(sl, 0, sizeof sl);
    memset(&cat, 0, sizeof cat);
    int rc = result_init(v, r, &err);
    for (uint32_t k = 0; rc == 0 && k < K; k++) {
        sp_loader_config c = v->cfg;
        c.rank = k;
        c.world = K;
        rc = sp_loader_create(&c, &ld[k], &err);
        if (rc == 0 && sp_batch_alloc(ld[k], &sl[k]) != 0)
            rc = sp_error_set(&err, SP_ENOMEM, "out of memory for a batch");
    }
    size_t sb = rc == 0 ? sp_loader_sample_bytes(ld[0]) : 0;
    if (rc == 0 && !cat_alloc(&cat, v->cfg.batch_size, sb))
        rc = sp_error_set(&err, SP_ENOMEM, "out of memory for a batch");
    uint64_t nb = rc == 0 ? sp_loader_batches_per_epoch(ld[0]) : 1;
    for (uint64_t abs = 0; rc == 0 && abs < v->total; abs++) {
        uint32_t e = (uint32_t)(abs / nb);
        uint64_t bi = abs % nb;
        cat.count = cat.nskipped = cat.nsubstituted = 0;
        cat.epoch = e;
        cat.index = bi;
        for (uint32_t k = 0; rc == 0 && k < K; k++) {
            rc = sp_loader_batch(ld[k], e, bi, &sl[k], &err);
            if (rc == 0) {
                cat_append(&cat, &sl[k], sb);
                counts[k] = sl[k].count;
            }
        }
        if (rc == 0) record_batch(v, r, st, &cat, sp_batch_digest(ld[0], &cat), sb, counts, K);
    }
    for (uint32_t k = 0; k < K; k++) {
        sp_batch_free(&sl[k]);
        sp_loader_destroy(ld[k]);
    }
    cat_free(&cat);
    result_end(v, r, st, rc, &err);
}

/* " (rank k of world K, its position j)" for position p of a --world row's
 * divergent batch, from the ranks' sample counts. */
static void rank_of(const run_result *r, uint32_t p, char *buf, size_t n) {
    buf[0] = '\0';
    if (!r->world || !r->div_counts) return;
    uint32_t first = 0;
    for (uint32_t k = 0; k < r->world; k++) {
        if (p < first + r->div_counts[k]) {
            snprintf(buf, n, " (rank %u of world %u, its position %u)", k, r->world, p - first);
            return;
        }
        first += r->div_counts[k];
    }
}

/* Print the first divergence of r against the reference, down to the byte. */
static void report_divergence(verify_ctx *v, const run_result *r) {
    sp_error err;
    sp_error_clear(&err);
    sp_loader *ld;
    if (sp_loader_create(&v->cfg, &ld, &err) != 0) {
        printf("    (cannot recompute: %s)\n", err.msg);
        return;
    }
    /* The reference's name and this run's, in the lines below. */
    char there[32] = "the reference", here[32] = "here";
    if (r->world) {
        snprintf(there, sizeof there, "world 1");
        snprintf(here, sizeof here, "world %u", r->world);
    }
    uint64_t nb = sp_loader_batches_per_epoch(ld);
    uint32_t e = (uint32_t)((uint64_t)r->div / nb);
    uint64_t bi = (uint64_t)r->div % nb;
    printf("  %s: first divergence%s at epoch %u, batch %llu (stream batch %lld)\n", r->name,
           r->world ? " from world 1" : "", e, (unsigned long long)bi, (long long)r->div);
    if (r->div >= (int64_t)v->ref->n || !r->div_indices || !r->div_images) {
        printf("    the reference has no such batch\n");
        sp_loader_destroy(ld);
        return;
    }
    sp_batch b;
    if (sp_batch_alloc(ld, &b) != 0) {
        sp_loader_destroy(ld);
        return;
    }
    /* Per-worker mode: a loader's running sample counter decides the draws,
     * so replay the stream up to the batch (the demonstration mode only). */
    int rrc = 0;
    if (v->cfg.rng_mode == SP_RNG_PER_WORKER)
        for (uint64_t q = 0; q < (uint64_t)r->div && rrc == 0; q++)
            rrc = sp_loader_batch(ld, (uint32_t)(q / nb), q % nb, &b, &err);
    if (rrc != 0 || sp_loader_batch(ld, e, bi, &b, &err) != 0) {
        printf("    (cannot recompute: %s)\n", err.msg);
    } else {
        size_t sb = sp_loader_sample_bytes(ld);
        uint32_t n = b.count < r->div_count ? b.count : r->div_count;
        int found = 0;
        char rk[80];
        for (uint32_t p = 0; p < n && !found; p++) {
            rank_of(r, p, rk, sizeof rk);
            if (b.indices[p] != r->div_indices[p]) {
                printf("    position %u%s: sample index %llu in %s, %llu %s%s\n", p, rk,
                       (unsigned long long)b.indices[p], there,
                       (unsigned long long)r->div_indices[p], r->world ? "in " : "", here);
                found = 1;
                break;
            }
            const uint8_t *x = b.images + (size_t)p * sb, *y = r->div_images + (size_t)p * sb;
            for (size_t k = 0; k < sb; k++)
                if (x[k] != y[k]) {
                    printf("    position %u%s, sample index %llu: byte offset %zu in the batch "
                           "(%zu in the sample): %u in %s, %u %s%s\n",
                           p, rk, (unsigned long long)b.indices[p], (size_t)p * sb + k, k, x[k],
                           there, y[k], r->world ? "in " : "", here);
                    found = 1;
                    break;
                }
        }
        if (!found)
            printf("    %u samples in %s, %u %s%s\n", b.count, there, r->div_count,
                   r->world ? "in " : "", here);
    }
    sp_batch_free(&b);
    sp_loader_destroy(ld);
}

static void free_result(run_result *r) {
    free(r->d);
    free(r->lists);
    free(r->div_indices);
    free(r->div_images);
    free(r->div_counts);
}

/* The stream through services (child processes, private region names) read
 * by K clients in this process, one per rank, alternately; the slices of
 * each global batch are concatenated in rank order and digested as one.
 * nsvc 1: one service for all K ranks; 2: one per half (ranks 0..K/2-1 and
 * K/2..K-1, as two nodes would run them), each computing only its ranks. */
static void run_service(verify_ctx *v, run_result *r, int workers, uint32_t K, uint32_t nsvc) {
    sp_error err;
    sp_error_clear(&err);
    XXH3_state_t *st = XXH3_createState();
    XXH3_128bits_reset(st);
    char name[2][80];
    uint32_t first[2] = {0, nsvc == 2 ? K / 2 : K};
    pid_t pid[2] = {0, 0};
    sp_client *c[VERIFY_MAX_WORLD] = {0};
    sp_batch views[VERIFY_MAX_WORLD], cat;
    uint32_t counts[VERIFY_MAX_WORLD];
    memset(&cat, 0, sizeof cat);
    sp_cache_opts co;
    cli_cache_opts(&co);
    int rc = result_init(v, r, &err);
    for (uint32_t s = 0; rc == 0 && s < nsvc; s++) {
        /* A private name; the leading dot keeps it out of plain `ls /dev/shm`. */
        snprintf(name[s], sizeof name[s], ".seedpipe-verify-%d-%u-%u-%u", (int)getpid(), K,
                 nsvc, s);
        uint32_t end = s + 1 < nsvc ? first[s + 1] : K;
        sp_service_config sc = {name[s], K,        workers, v->ring,  v->epochs, NULL,
                                v->cache, &co,     first[s], end - first[s]};
        rc = sp_service_fork(&v->cfg, &sc, &pid[s], &err);
        if (rc != 0) pid[s] = 0;
    }
    for (uint32_t k = 0; rc == 0 && k < K; k++)
        rc = sp_client_attach(name[nsvc == 2 && k >= first[1]], k, &c[k], &err);
    sp_client_info info;
    memset(&info, 0, sizeof info);
    if (rc == 0) {
        sp_client_info_get(c[0], &info);
        if (!cat_alloc(&cat, info.batch_size, info.sample_bytes))
            rc = sp_error_set(&err, SP_ENOMEM, "out of memory");
    }
    while (rc == 0) {
        int ends = 0;
        for (uint32_t k = 0; k < K && rc == 0; k++) {
            int x = sp_client_next(c[k], &views[k], &err);
            if (x == SP_CLIENT_END) ends++;
            else rc = x;
        }
        if (rc != 0 || ends) {
            if (rc == 0 && ends != (int)K)
                rc = sp_error_set(&err, SP_EIO, "the ranks' streams have different lengths");
            break;
        }
        cat.count = cat.nskipped = cat.nsubstituted = 0;
        cat.epoch = views[0].epoch;
        cat.index = views[0].index;
        for (uint32_t k = 0; k < K; k++) {   /* concatenate the slices in rank order */
            cat_append(&cat, &views[k], info.sample_bytes);
            counts[k] = views[k].count;
            if (views[k].epoch != cat.epoch || views[k].index != cat.index)
                rc = sp_error_set(&err, SP_EIO, "rank %u is at another batch", k);
        }
        record_batch(v, r, st, &cat, sp_client_batch_digest(c[0], &cat), info.sample_bytes,
                     K > 1 ? counts : NULL, K > 1 ? K : 0);
        for (uint32_t k = 0; k < K; k++) sp_client_release(c[k], &views[k], NULL);
    }
    for (uint32_t k = 0; k < K; k++) sp_client_detach(c[k]);
    for (uint32_t s = 0; s < nsvc; s++)
        if (pid[s] > 0) {
            int status = sp_service_join(pid[s], rc == 0 ? 10000 : 0);
            if (rc == 0 && status != 0)
                rc = sp_error_set(&err, SP_EIO, "the service exited with status %d", status);
        }
    cat_free(&cat);
    result_end(v, r, st, rc, &err);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Remove a directory tree of our own (the verify cache). */
static void remove_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* A comma-separated list of 1..max into out[16]; @return the count (exits 2 if bad). */
static int parse_list(cli_args *a, const char *opt, const char *list, long max, int *out) {
    int n = 0;
    for (const char *p = list; *p;) {
        char *end;
        long w = strtol(p, &end, 10);
        if (end == p || w < 1 || w > max || n == 16)
            cli_usage_error(a, "--%s: a comma-separated list of at most 16 numbers in 1..%ld "
                            "(got \"%s\")", opt, max, list);
        out[n++] = (int)w;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') cli_usage_error(a, "--%s: bad list \"%s\"", opt, list);
    }
    if (n == 0) cli_usage_error(a, "--%s: an empty list", opt);
    return n;
}

/* "0-1", or "2" for a single rank. */
static void range_text(char *buf, size_t n, uint32_t lo, uint32_t hi) {
    if (lo == hi) snprintf(buf, n, "%u", lo);
    else snprintf(buf, n, "%u-%u", lo, hi);
}

#define MAX_CONFIGS 64

int cmd_verify(cli_args *a) {
    if (a->npos != 1) cli_usage_error(a, "usage: seedpipe verify DATASET --workers 1,2,4 ...");
    verify_ctx v;
    memset(&v, 0, sizeof v);
    v.a = a;
    /* --workers is a list here, not a number; so is --world, unless --rank
     * names one rank of it (then that rank's stream is verified). */
    const char *wlist = cli_str(a, "workers", "1,2,3,4,8");
    const char *klist = cli_has(a, "rank") ? NULL : cli_str(a, "world", NULL);
    cli_args tmp = *a;
    for (int i = 0; i < tmp.nopt; i++)
        if (!strcmp(tmp.opt[i].key, "workers") || (klist && !strcmp(tmp.opt[i].key, "world")))
            tmp.opt[i].key = "";
    cli_loader_config(&tmp, a->pos[0], &v.cfg);
    int dummy_w, ring;
    cli_pool_options(&tmp, &v.cfg, &dummy_w, &ring);
    for (int i = 0; i < a->nopt; i++) a->opt[i].used |= tmp.opt[i].used;
    v.ring = ring;
    uint64_t epochs = cli_u64(a, "epochs", 1);
    if (epochs == 0 || epochs > UINT32_MAX) cli_usage_error(a, "--epochs must be >= 1");
    v.epochs = (uint32_t)epochs;
    int no_crash = cli_has(a, "no-crash"), no_resume = cli_has(a, "no-resume");
    int no_service = cli_has(a, "no-service");
    int no_cache = cli_has(a, "no-cache");
    const char *user_cache = cli_str(a, "cache", NULL);   /* kept; else a temporary one */
    if (user_cache && no_cache) cli_usage_error(a, "--cache DIR and --no-cache exclude each other");
    cli_check_unused(a);
    int ws[16], nw = parse_list(a, "workers", wlist, SP_POOL_MAX_WORKERS, ws);
    int ks[16], nk = klist ? parse_list(a, "world", klist, VERIFY_MAX_WORLD, ks) : 0;
    for (int i = 0; i < nk; i++)
        if (v.cfg.batch_size % (uint32_t)ks[i] != 0)
            cli_usage_error(a, "--world %d: the batch size %u is not divisible by %d (every world "
                            "size must divide the global batch)", ks[i], v.cfg.batch_size, ks[i]);
    sp_error err;
    sp_error_clear(&err);
    {
        sp_loader *ld;
        if (sp_loader_create(&v.cfg, &ld, &err) != 0) cli_fail(a, &err);
        v.total = sp_loader_batches_per_epoch(ld) * v.epochs;
        sp_loader_destroy(ld);
    }
    v.tty = isatty(2);
    int wmax = 1;
    for (int i = 0; i < nw; i++) wmax = ws[i] > wmax ? ws[i] : wmax;
    if (wmax < 2) wmax = 2;

    run_result rs[MAX_CONFIGS];
    memset(rs, 0, sizeof rs);
    int nr = 0;
    snprintf(rs[nr].name, sizeof rs[nr].name, "%s", nk ? "in-process, world 1"
                                                       : "in-process (reference)");
    run_config(&v, &rs[nr++], 0, -1, -1, 0);
    v.ref = &rs[0];
    for (int i = 0; i < nw; i++) {
        snprintf(rs[nr].name, sizeof rs[nr].name, "workers %d", ws[i]);
        run_config(&v, &rs[nr++], ws[i], -1, -1, 0);
    }
    if (!no_crash) {
        snprintf(rs[nr].name, sizeof rs[nr].name, "workers %d, one SIGKILLed", wmax);
        run_config(&v, &rs[nr++], wmax, (int64_t)(v.total / 3 ? v.total / 3 : 1), -1, 0);
    }
    if (!no_resume) {
        int64_t at = (int64_t)(v.total / 2);
        snprintf(rs[nr].name, sizeof rs[nr].name, "stop at %lld, resume %d->%d", (long long)at,
                 ws[0], wmax);
        run_config(&v, &rs[nr++], ws[0], -1, at, wmax);
    }

    /* Through the epoch cache: a cold run on the pool fills it (the workers
     * write), warm runs read every batch back (the workers read) at two
     * worker counts and through the service. */
    char cdir[64] = "";
    if (!no_cache && v.cfg.rng_mode == SP_RNG_PER_SAMPLE) {
        snprintf(cdir, sizeof cdir, "/tmp/seedpipe-verify-cache-XXXXXX");
        if (user_cache || mkdtemp(cdir)) {
            v.cache = user_cache ? user_cache : cdir;
            snprintf(rs[nr].name, sizeof rs[nr].name, "cache %s, workers %d",
                     user_cache ? "(--cache)" : "cold", wmax);
            run_config(&v, &rs[nr++], wmax, -1, -1, 0);
            snprintf(rs[nr].name, sizeof rs[nr].name, "cache warm, workers %d", wmax);
            run_config(&v, &rs[nr++], wmax, -1, -1, 0);
            snprintf(rs[nr].name, sizeof rs[nr].name, "cache warm, workers 1");
            run_config(&v, &rs[nr++], 1, -1, -1, 0);
            if (!no_service && v.cfg.world == 1) {
                snprintf(rs[nr].name, sizeof rs[nr].name, "cache warm, service -> client");
                run_service(&v, &rs[nr++], wmax, 1, 1);
            }
            v.cache = NULL;
            if (!user_cache) remove_tree(cdir);
        }
    }

    const char *service_skip = NULL;
    if (!no_service) {
        if (v.cfg.world != 1) {
            service_skip = "not run (--rank: the service serves global batches)";
        } else {
            snprintf(rs[nr].name, sizeof rs[nr].name, "service -> client");
            run_service(&v, &rs[nr++], wmax, 1, 1);
            if (v.cfg.batch_size % 2 == 0) {
                snprintf(rs[nr].name, sizeof rs[nr].name, "service -> 2 clients as ranks");
                run_service(&v, &rs[nr++], wmax, 2, 1);
            } else {
                service_skip = "not run (odd batch size)";
            }
        }
    }

    /* --world: the ranks' slices, in-process and (K >= 2) through one
     * service per half of the ranks, against world 1. */
    for (int i = 0; i < nk; i++) {
        uint32_t K = (uint32_t)ks[i];
        if (K == 1) continue;   /* the reference */
        snprintf(rs[nr].name, sizeof rs[nr].name, "world %u, in-process ranks", K);
        run_world(&v, &rs[nr++], K);
        if (!no_service) {
            char lo[24], hi[24];
            range_text(lo, sizeof lo, 0, K / 2 - 1);
            range_text(hi, sizeof hi, K / 2, K - 1);
            snprintf(rs[nr].name, sizeof rs[nr].name, "world %u, services %s + %s", K, lo, hi);
            run_service(&v, &rs[nr], wmax, K, 2);
            rs[nr++].world = K;
        }
    }

    int all = 1;
    printf("%-30s %8s  %-32s  %s\n", "configuration", "batches", "stream digest", "equal");
    for (int i = 0; i < nr; i++) {
        run_result *r = &rs[i];
        char hex[33];
        sp_digest_hex(r->stream, hex);
        r->equal = r->rc == 0 && r->n == rs[0].n && same(r->stream, rs[0].stream) &&
                   r->list_div < 0;
        if (i > 0 && (!r->equal || rs[0].rc != 0)) all = 0;
        if (r->rc != 0) all = 0;
        printf("%-30s %8llu  %-32s  %s\n", r->name, (unsigned long long)r->n,
               r->rc ? "(failed)" : hex, i == 0 ? "reference" : r->equal ? "yes" : "NO");
    }
    if (service_skip)
        printf("%-30s %8s  %-32s  %s\n", v.cfg.world != 1 ? "service" : "service -> 2 clients as ranks",
               "-", "-", service_skip);
    for (int i = 0; i < nr; i++) {
        run_result *r = &rs[i];
        if (r->deaths)
            printf("  %s: %llu worker death%s noticed, work redone by a replacement\n",
                   r->name, (unsigned long long)r->deaths, r->deaths > 1 ? "s" : "");
        if (r->rc != 0) {
            printf("  %s: error: %s\n", r->name, r->msg);
        } else if (i > 0 && !r->equal && r->div >= 0) {
            report_divergence(&v, r);
        } else if (i > 0 && !r->equal && r->list_div >= 0) {
            uint64_t nb = v.total / v.epochs;
            printf("  %s: the skipped/substituted samples differ from the reference first at "
                   "epoch %llu, batch %llu (stream batch %lld)\n", r->name,
                   (unsigned long long)((uint64_t)r->list_div / nb),
                   (unsigned long long)((uint64_t)r->list_div % nb), (long long)r->list_div);
        } else if (i > 0 && !r->equal) {
            printf("  %s: %llu batches, the reference has %llu\n", r->name,
                   (unsigned long long)r->n, (unsigned long long)rs[0].n);
        }
    }
    char worlds[160] = "";
    if (nk) {
        size_t len = (size_t)snprintf(worlds, sizeof worlds, "; world sizes");
        for (int i = 0; i < nk && len < sizeof worlds; i++)
            len += (size_t)snprintf(worlds + len, sizeof worlds - len, "%s%d", i ? "," : " ",
                                    ks[i]);
    }
    printf("%s (%s rng, on-error %s%s)\n",
           all ? "verify: all configurations give identical streams"
               : "verify: MISMATCH: the stream depends on the configuration",
           sp_rng_mode_name(v.cfg.rng_mode), sp_on_error_name(v.cfg.on_error), worlds);
    for (int i = 0; i < nr; i++) free_result(&rs[i]);
    return all ? 0 : 1;
}

/* ---- diff ------------------------------------------------------------------- */

int cmd_diff(cli_args *a) {
    if (a->npos != 2) cli_usage_error(a, "usage: seedpipe diff A.jsonl B.jsonl");
    cli_check_unused(a);
    sp_error err;
    sp_error_clear(&err);
    sp_manifest *m1, *m2;
    if (sp_manifest_read(a->pos[0], &m1, &err) != 0) cli_fail(a, &err);
    if (sp_manifest_read(a->pos[1], &m2, &err) != 0) {
        sp_manifest_free(m1);
        cli_fail(a, &err);
    }
    sp_manifest_divergence d;
    sp_manifest_compare(m1, m2, &d);
    if (d.equal) {
        printf("equal: %zu batches\n", m1->nbatches);
    } else {
        if (d.header[0]) printf("header differs: %s\n", d.header);
        if (d.batch_found) {
            printf("first divergence: epoch %u, batch %llu", d.epoch, (unsigned long long)d.batch);
            if (d.position >= 0)
                printf(", position %lld, sample index %llu in A, %llu in B", (long long)d.position,
                       (unsigned long long)d.index_a, (unsigned long long)d.index_b);
            printf(": %s\n", d.what);
        }
    }
    sp_manifest_free(m1);
    sp_manifest_free(m2);
    return d.equal ? 0 : 1;
}
