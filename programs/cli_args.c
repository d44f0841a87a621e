/* cli_args.c - what every command of the tool shares: option lookups, usage
 * errors and failures, the loader and stream options, the cache's warning
 * line and counters, the failure log.
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

#include "seedpipe/pool.h"

/* The option `key` of the command line: marked used, its index, or -1. A
 * key the command's help does not list is a bug in the tool (cli_help.c):
 * it stops here, so the help cannot drift from what the commands read. */
static int lookup(cli_args *a, const char *key) {
    if (!cli_help_lists(a, key)) {
        fprintf(stderr, "seedpipe %s: internal error: --%s is read but `seedpipe %s --help` "
                        "does not list it\n", a->cmd, key, a->cmd);
        abort();
    }
    for (int i = 0; i < a->nopt; i++)
        if (strcmp(a->opt[i].key, key) == 0) {
            a->opt[i].used = 1;
            return i;
        }
    return -1;
}

const char *const *cli_words(cli_args *a, const char *key) {
    int i = lookup(a, key);
    return i < 0 ? NULL : a->opt[i].words;
}

const char *cli_str(cli_args *a, const char *key, const char *dflt) {
    int i = lookup(a, key);
    return i < 0 ? dflt : a->opt[i].val;
}

int cli_has(cli_args *a, const char *key) { return cli_str(a, key, NULL) != NULL; }

/* ---- numbers ----------------------------------------------------------------------- */

int cli_parse_dec(const char *s, size_t len, uint64_t *v) {
    int over = 0;
    *v = 0;
    if (len == 0) return -1;
    /* "010": refused, never reread: the tool read it as octal 8 before, so
     * a stored command line must fail rather than change its stream. */
    if (len > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '9') return -3;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9) return -1;
        if (*v > (UINT64_MAX - d) / 10) over = 1;
        else *v = *v * 10 + d;
    }
    return over ? -2 : 0;
}

static const char leading_zero[] =
    "has a leading zero (it was read as octal before: 010 was 8; write the number without it)";

uint64_t cli_num_span(const cli_args *a, const char *key, const char *whole, const char *s,
                      size_t len, uint64_t lo, uint64_t hi) {
    uint64_t v;
    int rc = cli_parse_dec(s, len, &v);
    if (rc == 0 && v >= lo && v <= hi) return v;
    char range[64];
    snprintf(range, sizeof range, "%llu..%llu", (unsigned long long)lo, (unsigned long long)hi);
    if (rc == -3 && whole && (s != whole || len != strlen(whole)))
        cli_usage_error(a, "--%s \"%s\": \"%.*s\" %s", key, whole, (int)len, s,
                        leading_zero);
    if (rc == -3)
        cli_usage_error(a, "--%s \"%.*s\": %s", key, (int)len, s,
                        leading_zero);
    if (whole && (s != whole || len != strlen(whole)))
        cli_usage_error(a, "--%s \"%s\": \"%.*s\" is %s %s", key, whole, (int)len, s,
                        rc == -1 ? "not a decimal number in" : "out of range", range);
    cli_usage_error(a, "--%s \"%s\": %s %s%s", key, s,
                    rc == -1 ? "not a decimal number in" : "out of range", range,
                    rc == -1 ? " (digits 0-9 only: no sign, space, 0x or exponent)" : "");
}

uint64_t cli_uint(cli_args *a, const char *key, uint64_t dflt, uint64_t lo, uint64_t hi) {
    const char *v = cli_str(a, key, NULL);
    return v ? cli_num_span(a, key, v, v, strlen(v), lo, hi) : dflt;
}

int64_t cli_int(cli_args *a, const char *key, int64_t dflt, int64_t lo, int64_t hi) {
    const char *v = cli_str(a, key, NULL);
    if (!v) return dflt;
    int neg = v[0] == '-' && lo < 0;
    uint64_t m;
    int rc = cli_parse_dec(v + neg, strlen(v + neg), &m);
    int64_t x = neg ? -(int64_t)(m > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : m)
                    : (int64_t)(m > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : m);
    if (rc == -3) cli_usage_error(a, "--%s \"%s\": %s", key, v, leading_zero);
    if (rc != 0 || x < lo || x > hi)
        cli_usage_error(a, "--%s \"%s\": %s %lld..%lld", key, v,
                        rc == -1 ? "not a decimal integer (digits, one leading '-') in"
                                 : "out of range", (long long)lo, (long long)hi);
    return x;
}

double cli_real(cli_args *a, const char *key, double dflt, double lo, double hi) {
    const char *v = cli_str(a, key, NULL);
    if (!v) return dflt;
    /* digits [. digits] or . digits, then [e [+-] digits]: what strtod reads, less
     * the sign, the space, hex, inf and nan it also takes */
    size_t i = strspn(v, "0123456789"), f = 0;
    if (v[i] == '.') f = strspn(v + i + 1, "0123456789"), i += 1 + f;
    int ok = i > 0 && (i > 1 || v[0] != '.') && (v[0] != '.' || f > 0);
    if (ok && (v[i] == 'e' || v[i] == 'E')) {
        size_t j = i + 1 + (v[i + 1] == '+' || v[i + 1] == '-'), n = strspn(v + j, "0123456789");
        ok = n > 0;
        i = j + n;
    }
    double x = ok && !v[i] ? strtod(v, NULL) : -1.0;
    if (!ok || v[i] || !(x >= lo && x <= hi))
        cli_usage_error(a, "--%s \"%s\": not a decimal number in [%g, %g]", key, v, lo, hi);
    return x;
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
    fprintf(stderr, " (seedpipe %s --help)\n", a->cmd);
    exit(2);
}

/* A token corpus (docs/tokens.md): --seq-len L [--packing concat|docs]
 * [--eod ID] [--pad ID] make its spec, in place of --pipeline. */
const char *cli_token_spec(cli_args *a) {
    static char spec[160];
    const char *packing = cli_str(a, "packing", NULL), *eod = cli_str(a, "eod", NULL);
    const char *pad = cli_str(a, "pad", NULL);
    if (!cli_str(a, "seq-len", NULL)) {
        if (packing || eod || pad)
            cli_usage_error(a, "--%s goes with --seq-len L (a token corpus)",
                            packing ? "packing" : eod ? "eod" : "pad");
        return NULL;
    }
    uint64_t L = cli_uint(a, "seq-len", 0, 1, 1u << 20);
    if (packing && strcmp(packing, "concat") != 0 && strcmp(packing, "docs") != 0)
        cli_usage_error(a, "--packing \"%s\": concat or docs", packing);
    char eodv[24] = "none";
    if (eod) snprintf(eodv, sizeof eodv, "%llu", (unsigned long long)cli_uint(a, "eod", 0, 0, INT32_MAX));
    snprintf(spec, sizeof spec, "tokens seq_len=%llu packing=%s eod=%s pad=%llu",
             (unsigned long long)L, packing ? packing : "concat", eodv,
             (unsigned long long)cli_uint(a, "pad", 0, 0, INT32_MAX));
    return spec;
}

/* 1 when the pipeline spec parses and normalizes (a spec that does not
 * parse is 0 here: the loader names its error). */
static int normalizes(const char *spec) {
    sp_pipeline *p = NULL;
    sp_error err;
    if (!spec || sp_pipeline_parse(spec, &p, &err) != 0) return 0;
    int n = sp_pipeline_has_normalize(p);
    sp_pipeline_destroy(p);
    return n;
}

/* The sampler options (loader.h "Samplers"; with CLI_BATCHES): --indices
 * FILE, --num-samples N, --replacement, --weights FILE, --repeat R. */
static void cli_sampler_options(cli_args *a, sp_loader_config *cfg) {
    const char *ind = cli_str(a, "indices", NULL), *wts = cli_str(a, "weights", NULL);
    char why[SP_ERROR_MSG_MAX];
    if (cli_sampler_files(ind, wts, cfg, why, sizeof why) != 0)
        cli_usage_error(a, "--%s %s", (ind && strstr(why, ind) == why) ? "indices" : "weights",
                        why);
    cfg->num_samples = cli_uint(a, "num-samples", 0, 1, UINT64_C(1) << 32);
    cfg->replacement = cli_has(a, "replacement");
    cfg->repeat = (uint32_t)cli_uint(a, "repeat", 1, 1, UINT32_MAX);
}

void cli_loader_config(cli_args *a, const char *dataset, sp_loader_config *cfg, unsigned what) {
    sp_loader_config_default(cfg);
    cfg->dataset = dataset;
    cfg->pipeline = cli_str(a, "pipeline", cfg->pipeline);
    cfg->seed = cli_uint(a, "seed", 0, 0, UINT64_MAX);
    cfg->annotations = cli_str(a, "annotations", NULL);
    sp_error err;
    sp_error_clear(&err);
    const char *tok = cli_token_spec(a);
    if (tok && cli_str(a, "pipeline", NULL))
        cli_usage_error(a, "--seq-len makes the token spec: no --pipeline with it");
    if (tok) cfg->pipeline = tok;
    /* remote shards' local copies (docs/remote.md): read by the dataset's
     * open from the environment, which forked workers inherit */
    const char *sc = cli_str(a, "shard-cache", NULL), *scs = cli_str(a, "shard-cache-size", NULL);
    uint64_t bytes;
    if (scs && (!sc || sp_parse_size(scs, &bytes, &err) != 0))
        cli_usage_error(a, "--shard-cache-size: %s", sc ? err.msg : "goes with --shard-cache DIR");
    if (sc && setenv("SEEDPIPE_SHARD_CACHE", sc, 1) != 0)
        cli_usage_error(a, "--shard-cache: %s", strerror(errno));
    if (scs && setenv("SEEDPIPE_SHARD_CACHE_SIZE", scs, 1) != 0)
        cli_usage_error(a, "--shard-cache-size: %s", strerror(errno));
    if (what & CLI_BATCHES) {
        cfg->batch_size = (uint32_t)cli_uint(a, "batch-size", cfg->batch_size, 1, 1u << 20);
        cfg->drop_last = cli_has(a, "drop-last");
        cfg->world = (uint32_t)cli_uint(a, "world", 1, 1, 1u << 16);
        cfg->rank = (uint32_t)cli_uint(a, "rank", 0, 0, cfg->world - 1);
        cfg->threads = (int)cli_uint(a, "threads", 1, 1, 64);
        const char *order = cli_str(a, "order", NULL);
        if (order && sp_order_spec_parse(order, &cfg->order, &cfg->block_shards, &err) != 0)
            cli_usage_error(a, "--order: %s", err.msg);
        cli_sampler_options(a, cfg);
    }
    /* the output dtype follows the pipeline when --dtype is not given: float32
     * when it normalizes (uint8 would lose it), else uint8; an explicit
     * --dtype uint8 with a normalizing pipeline stays the loader's error */
    if ((what & CLI_FORMAT) &&
        (sp_dtype_parse(cli_str(a, "dtype", normalizes(cfg->pipeline) ? "float32" : "uint8"),
                        &cfg->dtype, &err) != 0 ||
         sp_layout_parse(cli_str(a, "layout", "nchw"), &cfg->layout, &err) != 0))
        cli_usage_error(a, "%s", err.msg);
    cfg->split = cli_str(a, "split", NULL);
    cfg->subset = cli_str(a, "subset", NULL);
    cfg->split_seed = cli_uint(a, "split-seed", 0, 0, UINT64_MAX);
    sp_split sp;
    if (cfg->split && sp_split_parse(cfg->split, cfg->split_seed, &sp, &err) != 0)
        cli_usage_error(a, "--split: %s", err.msg);
    if (!cfg->split != !cfg->subset)
        cli_usage_error(a, "%s", cfg->split ? "--split needs --subset NAME"
                                            : "--subset needs --split NAME=FRACTION,...");
    if (cfg->split && sp_split_find(&sp, cfg->subset) < 0)
        cli_usage_error(a, "--subset %s: not a subset of --split %s", cfg->subset, cfg->split);
}

void cli_epoch_range(cli_args *a, uint64_t max_count, uint32_t *start, uint64_t *count) {
    *start = (uint32_t)cli_uint(a, "epoch-start", 0, 0, UINT32_MAX);
    *count = cli_uint(a, "epochs", 1, 1, max_count);
    if ((uint64_t)*start + *count > (uint64_t)UINT32_MAX + 1)
        cli_usage_error(a, "--epoch-start %u --epochs %llu: the last epoch, %llu, is past "
                        "4294967295 (epochs are 32-bit words)", *start,
                        (unsigned long long)*count,
                        (unsigned long long)*start + *count - 1);
}

void cli_state_at(const cli_args *a, const sp_loader_config *cfg, uint32_t epoch,
                  sp_loader_state *st) {
    sp_error err;
    sp_error_clear(&err);
    sp_loader *ld;
    if (sp_loader_create(cfg, &ld, &err) != 0) cli_fail(a, &err);
    sp_loader_state_at(ld, epoch, 0, st);
    sp_loader_destroy(ld);
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
    fl->on_error = cli_loader_info(ld).config->on_error;
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
    *workers = (int)cli_uint(a, "workers", 0, 0, SP_POOL_MAX_WORKERS);
    *ring = (int)cli_uint(a, "ring", 0, 0, 1024);
}
