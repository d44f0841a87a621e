/* cli_args.c - what every command of the tool shares: option lookups, usage
 * errors and failures, the loader and stream options, the cache's warning
 * line and counters, the failure log, digest folding.
 *
 * The bottom of the tool: it calls only the library, and every cli_*.c
 * calls down into it (cli.c dispatches to the commands), so the arrows
 * between the tool's files point one way.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "seedpipe/pool.h"

const char *const *cli_words(cli_args *a, const char *key) {
    for (int i = 0; i < a->nopt; i++)
        if (strcmp(a->opt[i].key, key) == 0) {
            a->opt[i].used = 1;
            return a->opt[i].words;
        }
    return NULL;
}

const char *cli_str(cli_args *a, const char *key, const char *dflt) {
    for (int i = 0; i < a->nopt; i++)
        if (strcmp(a->opt[i].key, key) == 0) {
            a->opt[i].used = 1;
            return a->opt[i].val;
        }
    return dflt;
}

int cli_has(cli_args *a, const char *key) { return cli_str(a, key, NULL) != NULL; }

uint64_t cli_u64(cli_args *a, const char *key, uint64_t dflt) {
    const char *v = cli_str(a, key, NULL);
    if (!v) return dflt;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || end == v || *end || v[0] == '-')
        cli_usage_error(a, "--%s: \"%s\" is not a non-negative integer", key, v);
    return (uint64_t)x;
}

void cli_check_unused(cli_args *a) {
    for (int i = 0; i < a->nopt; i++)
        if (!a->opt[i].used) cli_usage_error(a, "unknown option --%s", a->opt[i].key);
}

_Noreturn void cli_fail(const cli_args *a, const sp_error *err) {
    fprintf(stderr, "seedpipe %s: %s\n", a->cmd, err->msg[0] ? err->msg : sp_strerror(err->code));
    exit(1);
}

_Noreturn void cli_usage_error(const cli_args *a, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "seedpipe %s: ", a->cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (seedpipe help)\n", stderr);
    exit(2);
}

void cli_loader_config(cli_args *a, const char *dataset, sp_loader_config *cfg) {
    sp_loader_config_default(cfg);
    cfg->dataset = dataset;
    cfg->pipeline = cli_str(a, "pipeline", cfg->pipeline);
    cfg->seed = cli_u64(a, "seed", 0);
    uint64_t b = cli_u64(a, "batch-size", cfg->batch_size);
    if (b == 0 || b > 1u << 20) cli_usage_error(a, "--batch-size must be in 1..1048576");
    cfg->batch_size = (uint32_t)b;
    cfg->drop_last = cli_has(a, "drop-last");
    uint64_t world = cli_u64(a, "world", 1), rank = cli_u64(a, "rank", 0);
    if (world == 0 || world > 1u << 16 || rank >= world)
        cli_usage_error(a, "--rank must be < --world (got rank %llu, world %llu)",
                        (unsigned long long)rank, (unsigned long long)world);
    cfg->world = (uint32_t)world;
    cfg->rank = (uint32_t)rank;
    uint64_t t = cli_u64(a, "threads", 1);
    if (t > 64) cli_usage_error(a, "--threads must be <= 64");
    cfg->threads = (int)t;
    sp_error err;
    sp_error_clear(&err);
    if (sp_dtype_parse(cli_str(a, "dtype", "uint8"), &cfg->dtype, &err) != 0 ||
        sp_layout_parse(cli_str(a, "layout", "nchw"), &cfg->layout, &err) != 0)
        cli_usage_error(a, "%s", err.msg);
    cfg->split = cli_str(a, "split", NULL);
    cfg->subset = cli_str(a, "subset", NULL);
    cfg->split_seed = cli_u64(a, "split-seed", 0);
    sp_split sp;
    if (cfg->split && sp_split_parse(cfg->split, cfg->split_seed, &sp, &err) != 0)
        cli_usage_error(a, "--split: %s", err.msg);
    if (!cfg->split != !cfg->subset)
        cli_usage_error(a, "%s", cfg->split ? "--split needs --subset NAME"
                                            : "--subset needs --split NAME=FRACTION,...");
    if (cfg->split && sp_split_find(&sp, cfg->subset) < 0)
        cli_usage_error(a, "--subset %s: not a subset of --split %s", cfg->subset, cfg->split);
}

static void cache_warn(void *ud, const char *msg) {
    (void)ud;
    fprintf(stderr, "seedpipe: cache: %s\n", msg);
}

void cli_cache_opts(sp_cache_opts *o) {
    sp_cache_opts_default(o);
    o->warn = cache_warn;
}

int cli_stream_open(const sp_loader_config *cfg, int workers, int ring, uint32_t epochs,
                    const sp_loader_state *resume, const char *cache_dir, sp_stream **out,
                    sp_error *err) {
    static sp_cache_opts co;   /* outlives every stream: the pool keeps a pointer */
    cli_cache_opts(&co);
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = workers >= 1 ? SP_STREAM_POOL : SP_STREAM_LOADER;
    sc.workers = workers;
    sc.ring_slots = ring;
    sc.epochs = epochs;
    sc.resume = resume;
    sc.cache_dir = cache_dir;
    sc.cache_opts = &co;
    return sp_stream_open(cfg, &sc, out, err);
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

