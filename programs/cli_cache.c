/* cli_cache.c - seedpipe cache: build, ls, verify, gc (include/seedpipe/cache.h).
 *
 *   seedpipe cache build DATASET --cache DIR --pipeline P --seed S
 *         --batch-size B --epochs 0-9 [--threads T | --workers W] [--level L]
 *         [--max-size SIZE] [--dtype ..] [--layout ..] [--drop-last]
 *         [--rank R --world W] [--on-error fail|skip|substitute]
 *       fill the cache with epochs (N = 0..N-1, A-B inclusive, lists with
 *       commas); entries already there are verified and kept; a progress
 *       bar on a terminal; throughput and compression at the end. With
 *       --workers W the epochs are computed, compressed and written by a
 *       worker pool (pool.h) of W processes, one pool per epoch.
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
#include "seedpipe/pool.h"

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

/* "N" (0..N-1), "A-B" (inclusive), comma lists. Sets *n (cap max). */
static int parse_epochs(const char *s, uint32_t *out, size_t cap, size_t *n) {
    *n = 0;
    const char *p = s;
    int single = strchr(s, '-') == NULL && strchr(s, ',') == NULL;
    while (*p) {
        char *end;
        unsigned long long x = strtoull(p, &end, 10), y;
        if (end == p || *p == '-' || *p == '+') return -1;
        p = end;
        if (*p == '-') {
            y = strtoull(p + 1, &end, 10);
            if (end == p + 1 || y < x) return -1;
            p = end;
        } else if (single) {
            if (x == 0) return -1;
            y = x - 1;
            x = 0;
        } else {
            y = x;
        }
        if (y > UINT32_MAX) return -1;
        for (unsigned long long e = x; e <= y; e++) {
            if (*n == cap) return -1;
            out[(*n)++] = (uint32_t)e;
        }
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return *n ? 0 : -1;
}

static void cache_opts(cli_args *a, sp_cache_opts *o) {
    sp_cache_opts_default(o);
    o->warn = on_warn;
    const char *lv = cli_str(a, "level", NULL);
    if (lv) {
        char *end;
        long l = strtol(lv, &end, 10);
        if (end == lv || *end || l < -131072 || l > 22)
            cli_usage_error(a, "--level: \"%s\" is not a zstd level", lv);
        o->level = (int)l;
    }
    const char *ms = cli_str(a, "max-size", NULL);
    sp_error err;
    if (ms && sp_cache_parse_size(ms, &o->max_size, &err) != 0) cli_usage_error(a, "%s", err.msg);
}

static int cache_build(cli_args *a) {
    if (a->npos != 2) cli_usage_error(a, "usage: seedpipe cache build DATASET --cache DIR ...");
    const char *dir = cli_str(a, "cache", NULL);
    if (!dir) cli_usage_error(a, "--cache DIR is required");
    sp_loader_config cfg;
    cli_loader_config(a, a->pos[1], &cfg);
    sp_error err;
    sp_error_clear(&err);
    const char *oe = cli_str(a, "on-error", NULL);
    if (oe && sp_on_error_parse(oe, &cfg.on_error, &err) != 0) cli_usage_error(a, "%s", err.msg);
    static uint32_t epochs[1u << 16];
    size_t ne;
    const char *es = cli_str(a, "epochs", "1");
    if (parse_epochs(es, epochs, sizeof epochs / sizeof epochs[0], &ne) != 0)
        cli_usage_error(a, "--epochs \"%s\": expected N, A-B or a comma list (at most 65536)", es);
    sp_cache_opts o;
    cache_opts(a, &o);
    uint64_t workers = cli_u64(a, "workers", 0);
    if (workers > SP_POOL_MAX_WORKERS)
        cli_usage_error(a, "--workers must be <= %d", SP_POOL_MAX_WORKERS);
    cli_check_unused(a);

    sp_loader *ld;
    cli_failures failed;
    memset(&failed, 0, sizeof failed);
    if (sp_loader_create(&cfg, &ld, &err) != 0) cli_fail(a, &err);
    sp_cache *c;
    if (sp_cache_open(dir, &o, &c, &err) != 0) cli_fail(a, &err);
    sp_batch b;
    if (sp_batch_alloc(ld, &b) != 0) {
        sp_error_set(&err, SP_ENOMEM, "out of memory for a batch");
        cli_fail(a, &err);
    }
    uint64_t nb = sp_loader_batches_per_epoch(ld), done = 0, images = 0, present = 0;
    uint64_t total = nb * ne;
    sp_cache_stats pooled;
    memset(&pooled, 0, sizeof pooled);
    int tty = isatty(2);
    double t0 = now_s(), last = 0;
    for (size_t k = 0; k < ne; k++) {
        sp_cache_reader *r;
        sp_error_clear(&err);
        int rc = sp_cache_reader_open(c, ld, epochs[k], &r, &err);
        if (rc == 0) {   /* already cached: check every batch; a bad one is moved aside */
            for (uint64_t i = 0; i < nb && rc == 0; i++) {
                rc = sp_cache_reader_batch(r, i, &b, &err);
                if (rc == SP_ENOMEM) cli_fail(a, &err);
                if (rc != 0) on_warn(NULL, err.msg);
            }
            sp_cache_reader_close(r);
            if (rc == 0) {
                present++;
                done += nb;
                continue;
            }
            sp_error_clear(&err);   /* rebuild it */
        } else if (rc < 0) {
            cli_fail(a, &err);
        } else if (err.code) {
            on_warn(NULL, err.msg);
        }
        sp_pool *pool = NULL;
        if (workers) {   /* the workers compute, compress and write */
            sp_loader_state at;
            sp_loader_state_at(ld, epochs[k], 0, &at);
            sp_pool_config pc = {(int)workers, 0, epochs[k] + 1, &at, NULL, dir, &o};
            if (sp_pool_create(&cfg, &pc, &pool, &err) != 0) cli_fail(a, &err);
        }
        for (uint64_t i = 0; i < nb; i++) {
            sp_batch view, *bp = pool ? &view : &b;
            int brc = pool ? sp_pool_next(pool, &view, &err)
                           : sp_cache_epoch_batch(c, ld, epochs[k], i, &b, &err);
            if (brc != 0) {
                if (tty) fputc('\n', stderr);
                cli_print_failures(pool ? sp_pool_loader(pool) : ld, stderr);
                cli_fail(a, &err);
            }
            images += bp->count;
            done++;
            if (pool) sp_pool_release(pool, NULL);
            double t = now_s();
            if (tty && (t - last > 0.2 || done == total)) {
                last = t;
                int w = 30, fill = (int)((double)w * (double)done / (double)total);
                fprintf(stderr, "\r  [%.*s%*s] epoch %u batch %" PRIu64 "/%" PRIu64
                        "  %.0f images/s ", fill, "##############################", w - fill, "",
                        epochs[k], i + 1, nb, (double)images / (t - t0 + 1e-9));
            }
        }
        sp_cache_flush(c);
        if (pool) {
            sp_cache_stats ps;
            sp_cache_stats_get(sp_pool_cache(pool), &ps);
            pooled.committed += ps.committed;
            pooled.bytes_written += ps.bytes_written;
            pooled.raw_written += ps.raw_written;
            pooled.write_failures += ps.write_failures;
            if (cli_failures_add(&failed, sp_pool_loader(pool)) != 0) {
                sp_error_set(&err, SP_ENOMEM, "out of memory");
                cli_fail(a, &err);
            }
            sp_pool_destroy(pool);
        }
    }
    if (tty && images) fputc('\n', stderr);
    double dt = now_s() - t0;
    sp_cache_stats s;
    sp_cache_stats_get(c, &s);
    s.committed += pooled.committed;
    s.bytes_written += pooled.bytes_written;
    s.raw_written += pooled.raw_written;
    s.write_failures += pooled.write_failures;
    char st[32], raw[32];
    human(s.bytes_written, st, sizeof st);
    human(s.raw_written, raw, sizeof raw);
    printf("cache build: %zu epochs (%" PRIu64 " already cached and verified, %" PRIu64
           " committed), %" PRIu64 " images in %.2f s (%.0f images/s, %.1f MB/s raw); "
           "wrote %s of %s raw (ratio %.2f)\n",
           ne, present, s.committed, images, dt, dt > 0 ? (double)images / dt : 0.0,
           dt > 0 ? (double)s.raw_written / dt / 1e6 : 0.0, st, raw,
           s.bytes_written ? (double)s.raw_written / (double)s.bytes_written : 0.0);
    if (cli_failures_add(&failed, ld) != 0) {   /* the in-process epochs' */
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        cli_fail(a, &err);
    }
    cli_failures_print(&failed, stderr);
    cli_failures_free(&failed);
    sp_batch_free(&b);
    sp_cache_close(c);
    sp_loader_destroy(ld);
    return s.write_failures ? 1 : 0;
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
    size_t sb = sp_loader_sample_bytes(ld);
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
    uint64_t nre = cli_u64(a, "recompute", 0);
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
        sp_digest fp = sp_loader_fingerprint(ld);
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
    if (sp_cache_parse_size(ms, &max, &err) != 0) cli_usage_error(a, "%s", err.msg);
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
