/* cache_bench.c - an epoch from a warm cache vs computed, same run, same machine.
 *
 *   bench_cache_bench DATASET [--pipeline P] [--dtype uint8|float32]
 *       [--batch-size B] [--threads T] [--level L] [--dir CACHE_DIR]
 *       [--warm-runs N] [--skip-normalize] [--keep] [--warm-only]
 *
 * --skip-normalize gives the uint8 output of a normalizing pipeline (e.g.
 * imagenet-train with --dtype uint8), which compresses better.
 * 1. computed: every batch of epoch 0 with sp_loader_batch() (T threads);
 * 2. cold: the same through sp__cache_epoch_batch() on an empty cache
 *    (compute + compress + checksum + write + fsync + commit);
 * 3. N rounds of (computed, warm from a fresh handle: read + verify both
 *    checksums + decompress [+ float32 decode]), interleaved so a shared
 *    machine's load hits both alike; best of each, wall and process CPU
 *    time; every digest is checked against the computed ones, so the speed
 *    is of correct bytes only;
 * 4. raw zstd: ZSTD_decompressDCtx() of the very same frames, already in
 *    memory, no checksums: the ceiling of the read path.
 * Also printed, not part of either pass's time: the digest check's time
 * (sp_batch_digest(), a consumer's first read of each batch) after the
 * computed and after the warm batches, so that a read path that merely
 * moved work to the consumer (say, a batch left out of cache) would show.
 * The cache directory defaults to a fresh one under /tmp (same file system
 * as the build), so "warm" means the files are in the page cache, which is
 * what a second run on the same node sees.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache_internal.h"
#include "seedpipe/cache.h"
#include "seedpipe/loader.h"

static uint64_t ds_size(const sp_dataset *ds) {
    sp_dataset_info in = SP_DATASET_INFO_INIT;
    return sp_dataset_info_get(ds, &in) == 0 ? in.size : 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const sp_error *e) {
    fprintf(stderr, "cache_bench: %s: %s\n", what, e ? e->msg : "");
    exit(1);
}

static void on_warn(void *ud, const char *msg) {
    (void)ud;
    fprintf(stderr, "cache_bench: warning: %s\n", msg);
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct tm2 { double wall, cpu, digest; } tm2;

/* One pass over epoch 0: through the cache (c != NULL) or computed. Only
 * the calls that produce batches are timed (wall and process CPU time);
 * the digest check is not. check: compare with dig, else fill dig. */
static tm2 pass(sp_cache *c, sp_loader *ld, sp_batch *b, sp_digest *dig, int check) {
    sp_loader_info li = {.struct_size = sizeof li};
    sp_loader_info_get(ld, &li);
    uint64_t nb = li.batches_per_epoch;
    sp_error err;
    tm2 t = {0, 0, 0};
    for (uint64_t i = 0; i < nb; i++) {
        double t0 = now_s(), c0 = cpu_s();
        int rc = c ? sp__cache_epoch_batch(c, ld, 0, i, b, &err)
                   : sp_loader_batch(ld, 0, i, b, &err);
        if (c && i + 1 == nb) sp_cache_flush(c);   /* the commit, when writing */
        t.wall += now_s() - t0;
        t.cpu += cpu_s() - c0;
        if (rc) die("batch", &err);
        double d0 = now_s();
        sp_digest d = sp_batch_digest(ld, b);
        t.digest += now_s() - d0;
        if (!check) dig[i] = d;
        else if (d.hi != dig[i].hi || d.lo != dig[i].lo) {
            fprintf(stderr, "cache_bench: batch %llu differs from the computed one\n",
                    (unsigned long long)i);
            exit(1);
        }
    }
    return t;
}

static void tmin(tm2 *best, tm2 t) {
    if (t.wall < best->wall) best->wall = t.wall;
    if (t.cpu < best->cpu) best->cpu = t.cpu;
    if (t.digest < best->digest) best->digest = t.digest;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_cache_bench DATASET [--pipeline P] [--dtype D] "
                        "[--batch-size B] [--threads T] [--level L] [--dir DIR] "
                        "[--warm-runs N] [--skip-normalize] [--keep] [--warm-only]\n");
        return 2;
    }
    sp_loader_config cfg;
    sp_loader_config_default(&cfg);
    cfg.dataset = argv[1];
    cfg.seed = 1;
    cfg.batch_size = 64;
    const char *dir = NULL;
    int level = SP_CACHE_DEFAULT_LEVEL, warm_runs = 3, keep = 0, warm_only = 0;
    sp_error err;
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--keep")) { keep = 1; continue; }
        if (!strcmp(k, "--skip-normalize")) { cfg.skip_normalize = 1; continue; }
        if (!strcmp(k, "--warm-only")) { warm_only = 1; continue; }
        if (!v) { fprintf(stderr, "cache_bench: %s needs a value\n", k); return 2; }
        i++;
        if (!strcmp(k, "--pipeline")) cfg.pipeline = v;
        else if (!strcmp(k, "--dtype")) {
            if (sp_dtype_parse(v, &cfg.dtype, &err)) die("dtype", &err);
        }
        else if (!strcmp(k, "--batch-size")) cfg.batch_size = (uint32_t)atoi(v);
        else if (!strcmp(k, "--threads")) cfg.threads = atoi(v);
        else if (!strcmp(k, "--level")) level = atoi(v);
        else if (!strcmp(k, "--dir")) dir = v;
        else if (!strcmp(k, "--warm-runs")) warm_runs = atoi(v);
        else { fprintf(stderr, "cache_bench: unknown option %s\n", k); return 2; }
    }
    sp_loader *ld;
    if (sp_loader_create(&cfg, &ld, &err)) die("loader", &err);
    char tmpl[] = "/tmp/sp_cache_bench.XXXXXX";   /* after the loader: a bad option leaves none */
    if (!dir) {
        if (!mkdtemp(tmpl)) { perror("mkdtemp"); return 1; }
        dir = tmpl;
    }
    sp_loader_info li = {.struct_size = sizeof li};
    sp_loader_info_get(ld, &li);
    uint64_t nb = li.batches_per_epoch;
    sp_batch b;
    if (sp_batch_alloc(ld, &b)) die("alloc", NULL);
    sp_digest *dig = calloc(nb, sizeof *dig);
    const char *pl = cfg.pipeline;

    sp_cache_opts o;
    sp_cache_opts_default(&o);
    o.level = level;
    o.warn = on_warn;
    sp_cache *c;
    if (warm_only) {   /* profiling aid: --dir of a kept cache, warm passes only */
        if (dir == tmpl) die("--warm-only needs --dir of a kept cache", NULL);
        for (int r = 0; r < warm_runs; r++) {
            if (sp_cache_open(dir, &o, &c, &err)) die("cache", &err);
            tm2 t = pass(c, ld, &b, dig, 0);
            sp_cache_stats ws;
            sp_cache_stats_get(c, &ws);
            sp_cache_close(c);
            printf("warm %.3f s wall, %.3f s cpu (%llu batches read)\n", t.wall, t.cpu,
                   (unsigned long long)ws.batches_read);
        }
        return 0;
    }
    /* Computed once for the reference digests, then cold (fill the cache),
     * then rounds of (computed, warm) interleaved so that the load of a
     * shared machine hits both alike; the best of each is reported, in wall
     * time and in process CPU time (robust to other tenants). */
    tm2 comp = pass(NULL, ld, &b, dig, 0);
    if (sp_cache_open(dir, &o, &c, &err)) die("cache", &err);
    tm2 cold = pass(c, ld, &b, dig, 1);
    sp_cache_stats cs;
    sp_cache_stats_get(c, &cs);
    sp_cache_close(c);
    if (cs.committed != 1) die("the cold pass did not commit an entry", NULL);
    tm2 warm = {1e30, 1e30, 1e30};
    for (int r = 0; r < warm_runs; r++) {
        if (r > 0) tmin(&comp, pass(NULL, ld, &b, dig, 1));
        if (sp_cache_open(dir, &o, &c, &err)) die("cache", &err);
        tmin(&warm, pass(c, ld, &b, dig, 1));
        sp_cache_stats ws;
        sp_cache_stats_get(c, &ws);
        sp_cache_close(c);
        if (ws.batches_read != nb) die("the warm pass did not read every batch", NULL);
    }

    /* Raw ZSTD_decompress of the same frames, from memory. */
    char edir[4096];
    char hex[33];
    sp_digest_hex(sp__cache_key(ld, 0), hex);
    snprintf(edir, sizeof edir, "%s/%s", dir, hex);
    uint8_t **files = calloc(nb, sizeof *files);
    sp__cb_header *hs = calloc(nb, sizeof *hs);
    size_t raw_total = 0, max_raw = 0;
    for (uint64_t i = 0; i < nb; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/b%08llu", edir, (unsigned long long)i);
        FILE *f = fopen(p, "rb");
        if (!f) die(p, NULL);
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        files[i] = malloc((size_t)n);
        if (fread(files[i], 1, (size_t)n, f) != (size_t)n) die(p, NULL);
        fclose(f);
        if (sp__cb_parse_header(files[i], (size_t)n, p, &hs[i], &err)) die("header", &err);
        const uint8_t *fr = files[i] + SP__CB_HEADER;   /* what zstd returns */
        size_t r = (size_t)ZSTD_getFrameContentSize(fr, hs[i].meta_stored) +
                   (size_t)ZSTD_getFrameContentSize(fr + hs[i].meta_stored, hs[i].images_stored);
        raw_total += r;
        if (r > max_raw) max_raw = r;
    }
    uint8_t *out = malloc(max_raw + 1);
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    double t_zstd = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        for (uint64_t i = 0; i < nb; i++) {
            const uint8_t *s = files[i] + SP__CB_HEADER;
            size_t a = ZSTD_decompressDCtx(dc, out, max_raw, s, hs[i].meta_stored);
            size_t z = ZSTD_decompressDCtx(dc, out, max_raw, s + hs[i].meta_stored,
                                           hs[i].images_stored);
            if (ZSTD_isError(a) || ZSTD_isError(z)) die("zstd", NULL);
        }
        double t = now_s() - t0;
        if (t < t_zstd) t_zstd = t;
    }
    double raw_mb = (double)raw_total / 1e6, st_mb = (double)cs.bytes_written / 1e6;
    double out_mb = (double)ds_size(li.dataset) * (double)li.sample_bytes / 1e6;
    printf("dataset %s, pipeline %s%s, %s, batch %u, %llu batches, %d thread(s), zstd level %d, "
           "best of %d rounds\n",
           cfg.dataset, pl, cfg.skip_normalize ? " (skip normalize)" : "",
           sp_dtype_name(cfg.dtype), cfg.batch_size, (unsigned long long)nb,
           cfg.threads < 1 ? 1 : cfg.threads, level, warm_runs);
    double n_img = (double)ds_size(li.dataset);
    printf("  computed epoch       %7.3f s wall %7.3f s cpu  (%.0f images/s)\n", comp.wall,
           comp.cpu, n_img / comp.wall);
    printf("  cold (compute+store) %7.3f s wall %7.3f s cpu  (%.2fx computed)\n", cold.wall,
           cold.cpu, cold.wall / comp.wall);
    printf("  warm from cache      %7.3f s wall %7.3f s cpu  -> %.1fx faster (wall), %.1fx (cpu)\n",
           warm.wall, warm.cpu, comp.wall / warm.wall, comp.cpu / warm.cpu);
    printf("  first read of the batches (sp_batch_digest): %.3f s after computed, %.3f s after "
           "warm\n", comp.digest, warm.digest);
    printf("  stored %.1f MB for %.1f MB of batch bytes: ratio %.2f (zstd alone %.2f on %.1f MB of "
           "frames)\n", st_mb, out_mb, out_mb / st_mb, raw_mb / st_mb, raw_mb);
    printf("  cache read path     %8.0f MB/s of batch bytes (%.0f MB/s of zstd output: read + "
           "2 checksums + decompress%s)\n", out_mb / warm.wall, raw_mb / warm.wall,
           cfg.dtype == SP_DTYPE_FLOAT32 ? " + dictionary/shuffle decode" : "");
    printf("  raw ZSTD_decompress %8.0f MB/s of zstd output (same frames, in memory, best of 5)\n",
           raw_mb / t_zstd);
    for (uint64_t i = 0; i < nb; i++) free(files[i]);
    free(files);
    free(hs);
    free(out);
    ZSTD_freeDCtx(dc);
    free(dig);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    if (!keep && dir == tmpl) {
        if (sp__rmtree_at(AT_FDCWD, dir) != 0) fprintf(stderr, "cleanup failed\n");
    }
    return 0;
}
