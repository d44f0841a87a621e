/* cli_cache.c - seedpipe cache: build, ls, verify, gc (include/seedpipe/cache.h).
 *
 *   seedpipe cache build DATASET --cache DIR --pipeline P --seed S
 *         --batch-size B --epochs 0-9 [--threads T | --workers W] [--level L]
 *         [--max-size SIZE] [--dtype ..] [--layout ..] [--drop-last]
 *         [--rank R --world W] [--on-error fail|skip|substitute]
 *       fill the cache with epochs (N = 0..N-1, or S..S+N-1 with
 *       --epoch-start S; A-B inclusive; lists with commas); entries
 *       already there are verified and kept; a progress bar on a
 *       terminal; throughput and compression at the end. Each epoch to build is one batch stream (stream.h) through the cache:
 *       in-process, or with --workers W a worker pool (pool.h) of W
 *       processes that compute, compress and write, one pool per epoch.
 *   seedpipe cache ls DIR
 *       entries, most recently used first: key, epoch, seed, rank/world,
 *       dtype, batches, stored and raw size, compression ratio, last use
 *   seedpipe cache verify DIR [--recompute N [--dataset PATH]]
 *       re-check every checksum of every entry (read-only); with
 *       --recompute, recompute N batches spread over the entries and compare
 *       them byte for byte with the cached ones; exit 1 on any problem
 *   seedpipe cache gc DIR --max-size SIZE
 *       evict least recently used entries down to SIZE (10M, 2G, ...)
 */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "seedpipe/cache.h"
#include "seedpipe/pool.h"   /* SP_POOL_MAX_WORKERS */
#include "seedpipe/stream.h"

int cmd_cache(cli_args *a);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_warn(void *ud, const char *msg) {
    (void)ud;
    fprintf(stderr, "seedpipe cache: warning: %s\n", msg);
}

static void human(uint64_t b, char *out, size_t cap) {
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* --epochs: "N" (the N epochs from --epoch-start S, default 0), "A-B"
 * (inclusive) or a comma list of A and A-B items, into out (at most cap);
 * @return how many. Exits 2 if bad. Epoch 4294967295 is refused: a
 * stream's epochs are a 32-bit end (stream.h), it cannot stream that one. */
static size_t parse_epochs(cli_args *a, uint32_t *out, size_t cap) {
    const char *s = cli_str(a, "epochs", "1");
    size_t n = 0;
    if (!s[strcspn(s, "-,")]) {
        uint32_t start;
        uint64_t count;
        cli_epoch_range(a, cap, &start, &count);
        for (; n < count; n++) out[n] = start + (uint32_t)n;
    } else {
        if (cli_has(a, "epoch-start"))
            cli_usage_error(a, "--epoch-start S goes with --epochs N (a count), not with a list "
                            "or range (\"%s\")", s);
        const char *p = s;
        do {
            size_t len = strcspn(p, ","), dash = strcspn(p, "-");
            uint64_t x = cli_num_span(a, "epochs", s, p, dash < len ? dash : len, 0, UINT32_MAX);
            uint64_t y = dash < len ? cli_num_span(a, "epochs", s, p + dash + 1, len - dash - 1,
                                                   x, UINT32_MAX) : x;
            for (uint64_t e = x; e <= y; e++) {
                if (n == cap) cli_usage_error(a, "--epochs \"%s\": more than %zu epochs", s, cap);
                out[n++] = (uint32_t)e;
            }
            p += len;
        } while (*p++ == ',');
    }
    for (size_t k = 0; k < n; k++)
        if (out[k] == UINT32_MAX)
            cli_usage_error(a, "epoch 4294967295 cannot be cached: a stream's epochs are a "
                            "32-bit end (stream.h); `seedpipe digest --epoch-start 4294967295` "
                            "computes it");
    return n;
}

static void cache_opts(cli_args *a, sp_cache_opts *o) {
    sp_cache_opts_default(o);
    o->warn = on_warn;
    o->level = (int)cli_int(a, "level", o->level, -131072, 22);
    const char *ms = cli_str(a, "max-size", NULL);
    sp_error err;
    if (ms && sp_parse_size(ms, &o->max_size, &err) != 0) cli_usage_error(a, "%s", err.msg);
}

/* What `cache build` carries across its epochs. */
typedef struct build_ctx {
    cli_args *a;
    const char *dir;
    const sp_loader_config *cfg;
    const sp_cache_opts *o;
    int workers;
    sp_loader *ld;          /* geometry, and the key of each epoch's entry */
    sp_cache *c;            /* the lookups of the entries already there */
    sp_batch b;             /* ... and their batches */
    uint64_t nb, total, done, images, present;
    sp_cache_stats wrote;   /* what the epochs' streams wrote */
    cli_failures failed;    /* the epochs' failures, once per sample */
    int tty;
    double t0, last;
} build_ctx;

/* 1 if epoch e is already cached and every batch checks out; a bad entry
 * is moved aside by the reader (a warning) and 0 returned, to rebuild it. */
static int build_verified(build_ctx *x, uint32_t e) {
    sp_error err;
    sp_error_clear(&err);
    sp_cache_reader *r;
    int rc = sp_cache_reader_open(x->c, x->ld, e, &r, &err);
    if (rc == 0) {
        for (uint64_t i = 0; i < x->nb && rc == 0; i++) {
            rc = sp_cache_reader_batch(r, i, &x->b, &err);
            if (rc == SP_ENOMEM) cli_fail(x->a, &err);
            if (rc != 0) on_warn(NULL, err.msg);
        }
        sp_cache_reader_close(r);
        return rc == 0;
    }
    if (rc < 0) cli_fail(x->a, &err);
    if (err.code) on_warn(NULL, err.msg);
    return 0;
}

static void build_progress(build_ctx *x, uint32_t e, uint64_t i) {
    double t = now_s();
    if (!x->tty || (t - x->last <= 0.2 && x->done != x->total)) return;
    x->last = t;
    int w = 30, fill = (int)((double)w * (double)x->done / (double)x->total);
    fprintf(stderr, "\r  [%.*s%*s] epoch %u batch %" PRIu64 "/%" PRIu64 "  %.0f images/s ", fill,
            "##############################", w - fill, "", e, i + 1, x->nb,
            (double)x->images / (t - x->t0 + 1e-9));
}

/* A batch failed: the failures so far (in-process: every epoch's, as one
 * loader's log; a pool: this epoch's), then the error. */
static _Noreturn void build_fail(build_ctx *x, sp_stream *s, const sp_error *err) {
    if (x->tty) fputc('\n', stderr);
    if (x->workers) {
        cli_print_failures(sp_stream_loader(s), stderr);
    } else {
        cli_failures fl = x->failed;
        if (cli_failures_add(&fl, sp_stream_loader(s)) != 0)
            fprintf(stderr, "(out of memory listing the failures)\n");
        cli_failures_print(&fl, stderr);
    }
    cli_fail(x->a, err);
}

/* Stream epoch e through the cache (stream.h): in-process, or with
 * --workers a pool whose workers compute, compress and write. */
static void build_epoch(build_ctx *x, uint32_t e) {
    sp_error err;
    sp_error_clear(&err);
    sp_loader_state at;
    sp_loader_state_at(x->ld, e, 0, &at);
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = x->workers ? SP_STREAM_POOL : SP_STREAM_LOADER;
    sc.workers = x->workers;
    sc.epochs = e + 1;
    sc.resume = &at;
    sc.cache_dir = x->dir;
    sc.cache_opts = x->o;
    sp_stream *s;
    if (sp_stream_open(x->cfg, &sc, &s, &err) != 0) cli_fail(x->a, &err);
    for (uint64_t i = 0; i < x->nb; i++) {
        sp_batch v;
        if (sp_stream_next(s, &v, &err) != 0) build_fail(x, s, &err);
        x->images += v.count;
        x->done++;
        sp_stream_release(s, &v, NULL);
        build_progress(x, e, i);
    }
    sp_cache *written_by = sp_stream_cache(s);
    sp_cache_flush(written_by);
    sp_cache_stats ps;
    sp_cache_stats_get(written_by, &ps);
    x->wrote.committed += ps.committed;
    x->wrote.bytes_written += ps.bytes_written;
    x->wrote.raw_written += ps.raw_written;
    x->wrote.write_failures += ps.write_failures;
    if (cli_failures_add(&x->failed, sp_stream_loader(s)) != 0) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        cli_fail(x->a, &err);
    }
    sp_stream_close(s);
}

/* The closing line: epochs, throughput, what was written. */
static void build_report(const build_ctx *x, size_t ne) {
    double dt = now_s() - x->t0;
    const sp_cache_stats *s = &x->wrote;
    char st[32], raw[32];
    human(s->bytes_written, st, sizeof st);
    human(s->raw_written, raw, sizeof raw);
    printf("cache build: %zu epochs (%" PRIu64 " already cached and verified, %" PRIu64
           " committed), %" PRIu64 " images in %.2f s (%.0f images/s, %.1f MB/s raw); "
           "wrote %s of %s raw (ratio %.2f)\n",
           ne, x->present, s->committed, x->images, dt, dt > 0 ? (double)x->images / dt : 0.0,
           dt > 0 ? (double)s->raw_written / dt / 1e6 : 0.0, st, raw,
           s->bytes_written ? (double)s->raw_written / (double)s->bytes_written : 0.0);
}

static int cache_build(cli_args *a) {
    if (a->npos != 2) cli_usage_error(a, "usage: seedpipe cache build DATASET --cache DIR ...");
    const char *dir = cli_str(a, "cache", NULL);
    if (!dir) cli_usage_error(a, "--cache DIR is required");
    sp_loader_config cfg;
    cli_loader_config(a, a->pos[1], &cfg, CLI_BATCHES | CLI_FORMAT);
    sp_error err;
    sp_error_clear(&err);
    const char *oe = cli_str(a, "on-error", NULL);
    if (oe && sp_on_error_parse(oe, &cfg.on_error, &err) != 0) cli_usage_error(a, "%s", err.msg);
    static uint32_t epochs[1u << 16];
    size_t ne = parse_epochs(a, epochs, sizeof epochs / sizeof epochs[0]);
    sp_cache_opts o;
    cache_opts(a, &o);
    uint64_t workers = cli_uint(a, "workers", 0, 0, SP_POOL_MAX_WORKERS);
    cli_check_unused(a);

    build_ctx x;
    memset(&x, 0, sizeof x);
    x.a = a;
    x.dir = dir;
    x.cfg = &cfg;
    x.o = &o;
    x.workers = (int)workers;
    if (sp_loader_create(&cfg, &x.ld, &err) != 0) cli_fail(a, &err);
    if (sp_cache_open(dir, &o, &x.c, &err) != 0) cli_fail(a, &err);
    if (sp_batch_alloc(x.ld, &x.b) != 0) {
        sp_error_set(&err, SP_ENOMEM, "out of memory for a batch");
        cli_fail(a, &err);
    }
    x.nb = cli_loader_info(x.ld).batches_per_epoch;
    x.total = x.nb * ne;
    x.tty = isatty(2);
    x.t0 = now_s();
    for (size_t k = 0; k < ne; k++) {
        if (build_verified(&x, epochs[k])) {
            x.present++;
            x.done += x.nb;
        } else {
            build_epoch(&x, epochs[k]);
        }
    }
    if (x.tty && x.images) fputc('\n', stderr);
    build_report(&x, ne);
    cli_failures_print(&x.failed, stderr);
    cli_failures_free(&x.failed);
    sp_batch_free(&x.b);
    sp_cache_close(x.c);
    sp_loader_destroy(x.ld);
    return x.wrote.write_failures ? 1 : 0;
}

static void age(int64_t t, char *out, size_t cap) {
    int64_t d = (int64_t)time(NULL) - t;
    if (d < 0) d = 0;
    if (d < 120) snprintf(out, cap, "%" PRId64 "s ago", d);
    else if (d < 7200) snprintf(out, cap, "%" PRId64 "m ago", d / 60);
    else if (d < 172800) snprintf(out, cap, "%" PRId64 "h ago", d / 3600);
    else snprintf(out, cap, "%" PRId64 "d ago", d / 86400);
}

/* Open DIR (a->pos[1]) read-only and list its entries, or fail. */
static void open_listed(cli_args *a, sp_cache **c, sp_cache_entry_info **e, size_t *n) {
    sp_cache_opts o;
    sp_cache_opts_default(&o);
    o.read_only = 1;
    sp_error err;
    sp_error_clear(&err);
    if (sp_cache_open(a->pos[1], &o, c, &err) != 0 || sp_cache_list(*c, e, n, &err) != 0)
        cli_fail(a, &err);
}

static int cache_ls(cli_args *a) {
    if (a->npos != 2) cli_usage_error(a, "usage: seedpipe cache ls DIR");
    cli_check_unused(a);
    sp_cache *c;
    sp_cache_entry_info *e;
    size_t n;
    open_listed(a, &c, &e, &n);
    printf("%-12s %5s %12s %9s %-7s %7s %10s %10s %6s  %s\n", "key", "epoch", "seed",
           "rank/wld", "dtype", "batches", "stored", "raw", "ratio", "last use");
    uint64_t tot_disk = 0, tot_raw = 0, tot_st = 0;
    for (size_t i = 0; i < n; i++) {
        char st[32], raw[32], ago[32], rw[24];
        age(e[i].last_use, ago, sizeof ago);
        tot_disk += e[i].disk_bytes;
        if (!e[i].ok) {
            printf("%.12s  BROKEN: %s\n", e[i].key, e[i].problem);
            continue;
        }
        tot_raw += e[i].raw_bytes;
        tot_st += e[i].stored_bytes;
        human(e[i].stored_bytes, st, sizeof st);
        human(e[i].raw_bytes, raw, sizeof raw);
        snprintf(rw, sizeof rw, "%u/%u", e[i].rank, e[i].world);
        printf("%.12s %5u %12" PRIu64 " %9s %-7s %7" PRIu64 " %10s %10s %6.2f  %s\n", e[i].key,
               e[i].epoch, e[i].seed, rw, e[i].dtype, e[i].batches, st, raw,
               e[i].stored_bytes ? (double)e[i].raw_bytes / (double)e[i].stored_bytes : 0.0, ago);
    }
    char d[32], r[32];
    human(tot_disk, d, sizeof d);
    human(tot_raw, r, sizeof r);
    printf("%zu entries, %s on disk, %s raw (ratio %.2f)\n", n, d, r,
           tot_st ? (double)tot_raw / (double)tot_st : 0.0);
    sp_cache_list_free(e, n);
    sp_cache_close(c);
    return 0;
}

static void report_bad(void *ud, const char *msg) {
    (void)ud;
    printf("  BAD %s\n", msg);
}

/* Recompute batch i of entry e and compare it with the cached one. */
static int recompute_one(sp_cache *c, const sp_cache_entry_info *e, sp_loader *ld, uint64_t i,
                         sp_batch *x, sp_batch *y) {
    sp_error err;
    sp_error_clear(&err);
    sp_cache_reader *r;
    int rc = sp_cache_reader_open(c, ld, e->epoch, &r, &err);
    if (rc != 0) {
        printf("  BAD %s: cannot be read back: %s\n", e->key, err.msg[0] ? err.msg : "miss");
        return 1;
    }
    rc = sp_cache_reader_batch(r, i, x, &err);
    sp_cache_reader_close(r);
    if (rc != 0) {
        printf("  BAD %s\n", err.msg);
        return 1;
    }
    if (sp_loader_batch(ld, e->epoch, i, y, &err) != 0) {
        printf("  BAD %s: batch %" PRIu64 ": recompute failed: %s\n", e->key, i, err.msg);
        return 1;
    }
    size_t sb = cli_loader_info(ld).sample_bytes;
    const char *what = NULL;
    size_t off = 0;
    if (x->count != y->count) what = "sample count";
    else if (memcmp(x->indices, y->indices, x->count * sizeof *x->indices)) what = "indices";
    else if (memcmp(x->labels, y->labels, x->count * sizeof *x->labels)) what = "labels";
    else {
        for (off = 0; off < (size_t)x->count * sb; off++)
            if (x->images[off] != y->images[off]) break;
        if (off < (size_t)x->count * sb) what = "image bytes";
    }
    if (what) {
        printf("  BAD %s: epoch %u batch %" PRIu64 ": cached and recomputed %s differ", e->key,
               e->epoch, i, what);
        if (!strcmp(what, "image bytes"))
            printf(" (sample %zu, byte %zu)", off / sb, off % sb);
        printf("\n");
        return 1;
    }
    return 0;
}

static int cache_verify(cli_args *a) {
    if (a->npos != 2) cli_usage_error(a, "usage: seedpipe cache verify DIR [--recompute N]");
    uint64_t nre = cli_uint(a, "recompute", 0, 0, UINT64_MAX);
    const char *dataset = cli_str(a, "dataset", NULL);
    cli_check_unused(a);
    sp_cache *c;
    sp_cache_entry_info *e;
    size_t n;
    open_listed(a, &c, &e, &n);
    sp_error err;
    sp_error_clear(&err);
    uint64_t bad_total = 0, batches = 0, bytes = 0;
    char *ok = calloc(n ? n : 1, 1);
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        uint64_t bad;
        if (sp_cache_verify_entry(c, e[i].key, report_bad, NULL, &bad, &err) != 0)
            cli_fail(a, &err);
        bad_total += bad;
        ok[i] = bad == 0 && e[i].ok;
        if (ok[i]) {
            batches += e[i].batches;
            bytes += e[i].raw_bytes;
        }
    }
    double dt = now_s() - t0;
    printf("verify: %zu entries, %" PRIu64 " batches checked (%.1f MB raw in %.2f s), %" PRIu64
           " problems\n", n, batches, (double)bytes / 1e6, dt, bad_total);
    /* Recompute: N batches, round-robin over the good entries, evenly
     * spaced within each (a deterministic sample). */
    uint64_t good = 0, rdone = 0, rbad = 0;
    for (size_t i = 0; i < n; i++) good += ok[i];
    for (size_t i = 0; i < n && nre && good; i++) {
        if (!ok[i]) continue;
        uint64_t q = (nre + good - 1) / good;
        if (q > e[i].batches) q = e[i].batches;
        sp_loader_config cfg;
        sp_loader *ld;
        if (sp_cache_entry_config(&e[i], dataset, &cfg, &err) != 0 ||
            sp_loader_create(&cfg, &ld, &err) != 0) {
            printf("  BAD %s: cannot recompute: %s\n", e[i].key, err.msg);
            rbad++;
            continue;
        }
        sp_digest fp = cli_loader_info(ld).fingerprint;
        if (fp.hi != e[i].fingerprint.hi || fp.lo != e[i].fingerprint.lo) {
            printf("  BAD %s: cannot recompute: the dataset or pipeline is not the one the "
                   "entry was built from (fingerprint differs)\n", e[i].key);
            rbad++;
            sp_loader_destroy(ld);
            continue;
        }
        sp_batch x, y;
        if (sp_batch_alloc(ld, &x) != 0 || sp_batch_alloc(ld, &y) != 0) {
            sp_error_set(&err, SP_ENOMEM, "out of memory for a batch");
            cli_fail(a, &err);
        }
        for (uint64_t k = 0; k < q && rdone < nre; k++, rdone++)
            rbad += (uint64_t)recompute_one(c, &e[i], ld, k * e[i].batches / q, &x, &y);
        sp_batch_free(&x);
        sp_batch_free(&y);
        sp_loader_destroy(ld);
    }
    if (nre)
        printf("recompute: %" PRIu64 " batches recomputed and compared, %" PRIu64
               " differ or failed\n", rdone, rbad);
    free(ok);
    sp_cache_list_free(e, n);
    sp_cache_close(c);
    return bad_total || rbad ? 1 : 0;
}

static int cache_gc(cli_args *a) {
    if (a->npos != 2) cli_usage_error(a, "usage: seedpipe cache gc DIR --max-size SIZE");
    const char *ms = cli_str(a, "max-size", NULL);
    if (!ms) cli_usage_error(a, "--max-size SIZE is required (e.g. 10G)");
    cli_check_unused(a);
    sp_error err;
    sp_error_clear(&err);
    uint64_t max;
    if (sp_parse_size(ms, &max, &err) != 0) cli_usage_error(a, "%s", err.msg);
    struct stat st;
    if (stat(a->pos[1], &st) != 0 || !S_ISDIR(st.st_mode)) {
        sp_error_set(&err, SP_EIO, "%s: not a cache directory", a->pos[1]);
        cli_fail(a, &err);
    }
    sp_cache *c;
    sp_cache_gc_report r;
    if (sp_cache_open(a->pos[1], NULL, &c, &err) != 0 || sp_cache_gc(c, max, &r, &err) != 0)
        cli_fail(a, &err);
    char b0[32], b1[32];
    human(r.bytes_before, b0, sizeof b0);
    human(r.bytes_after, b1, sizeof b1);
    printf("gc: %u of %u entries evicted, %s -> %s; %u stale staging and %u moved-aside "
           "entries removed\n", r.evicted, r.entries_before, b0, b1, r.stale_removed,
           r.corrupt_removed);
    sp_cache_close(c);
    return 0;
}

int cmd_cache(cli_args *a) {
    const char *sub = a->npos ? a->pos[0] : "";
    if (!strcmp(sub, "build")) return cache_build(a);
    if (!strcmp(sub, "ls")) return cache_ls(a);
    if (!strcmp(sub, "verify")) return cache_verify(a);
    if (!strcmp(sub, "gc")) return cache_gc(a);
    cli_usage_error(a, "usage: seedpipe cache build|ls|verify|gc ... (got \"%s\")", sub);
}
