/* cli.h - internals shared by the seedpipe command-line tool's files.
 *
 * The tool (cli.c: dispatch and the command line's words; cli_args.c, the
 * bottom, called by all: option lookups, errors, the loader and stream
 * options; cli_core.c: rng, order, inspect, index, make-shapes;
 * cli_batch.c: digest, dump; cli_verify.c: verify, diff; cli_service.c:
 * serve, status; cli_cache.c; cli_train.c over cli_train_run.c, see
 * cli_train.h; cli_util.c: files, JSON strings, a loader's info, the
 * tool's own so that it needs none of the library's) is the only code that
 * prints or exits; it turns every library error into "seedpipe CMD: msg" on
 * stderr and exit status 1 (2 for a usage error).
 */
#ifndef SEEDPIPE_CLI_H
#define SEEDPIPE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "seedpipe/cache.h"
#include "seedpipe/loader.h"
#include "seedpipe/sampler.h"
#include "seedpipe/split.h"
#include "seedpipe/state.h"
#include "seedpipe/stream.h"

/* Parsed command line: positional arguments and --key value options. */
typedef struct cli_args {
    const char *cmd;
    int npos;
    const char *pos[8];
    int nopt;
    struct {
        const char *key;
        const char *val;            /* first word ("1" for a flag) */
        const char *const *words;   /* all words, for multi-word options */
        int used;
    } opt[48];
} cli_args;

/* The words of a multi-word option, or NULL if absent. */
const char *const *cli_words(cli_args *a, const char *key);

/* Lookups; each marks the option used. Bad values exit with status 2. A
 * key that the command's help (cli_help.c) does not list aborts: the help
 * is the list of what each command reads. */
const char *cli_str(cli_args *a, const char *key, const char *dflt);
int cli_has(cli_args *a, const char *key);

/* Numbers on the command line (the tool's one rule): decimal digits only,
 * the whole word (leading zeros are decimal: 010 is ten), no sign, space,
 * 0x, exponent or empty word, in the option's own range [lo, hi]; anything
 * else is a usage error naming the option and the value. */
uint64_t cli_uint(cli_args *a, const char *key, uint64_t dflt, uint64_t lo, uint64_t hi);
/* The rule itself, for a caller with its own message: the len bytes at s
 * as decimal digits. @return 0 (*v set), -1 (no digits, or another byte),
 * -2 (more than 2^64 - 1). */
int cli_parse_dec(const char *s, size_t len, uint64_t *v);
/* The same for the len bytes at s, one item of the value `whole` of --key
 * (a list such as 1,2,4 or A-B; NULL: s is the whole value). */
uint64_t cli_num_span(const cli_args *a, const char *key, const char *whole, const char *s,
                      size_t len, uint64_t lo, uint64_t hi);
/* A signed option (lo < 0: one leading '-' allowed), e.g. a zstd level. */
int64_t cli_int(cli_args *a, const char *key, int64_t dflt, int64_t lo, int64_t hi);
/* A real number: digits[.digits][e[+-]digits] (no sign, hex, inf, nan), in [lo, hi]. */
double cli_real(cli_args *a, const char *key, double dflt, double lo, double hi);
/* --epoch-start E --epochs N (default 0 and 1): the epochs E..E+N-1, all
 * below 2^32 (E + N <= 2^32; a usage error naming both otherwise).
 * max_count bounds N (the command's own limit). */
void cli_epoch_range(cli_args *a, uint64_t max_count, uint32_t *start, uint64_t *count);
/* The state before batch 0 of epoch `epoch` of cfg's stream (a loader is
 * opened for it). Exits on failure. */
void cli_state_at(const cli_args *a, const sp_loader_config *cfg, uint32_t epoch,
                  sp_loader_state *st);

/* Files and JSON (cli_util.c), the tool's own. cli_read_file(): the whole
 * file, NUL-terminated (malloc'd; *len its bytes), or NULL with "path:
 * reason" in why. cli_publish_*: an atomic publish of path (a temporary
 * file beside it, O_EXCL, renamed into place by commit after an fsync;
 * durable: its directory fsync'd too; abort removes it; both free p and
 * accept NULL). cli_write_file_atomic(): begin, write n bytes, commit.
 * Each @return 0 or an sp_error code with "path: what failed: reason". */
char *cli_read_file(const char *path, size_t *len, char *why, size_t n);
typedef struct cli_publish cli_publish;
int cli_publish_begin(const char *path, cli_publish **out, sp_error *err);
int cli_publish_fd(const cli_publish *p);
int cli_publish_commit(cli_publish *p, int durable, sp_error *err);
void cli_publish_abort(cli_publish *p);
int cli_write_file_atomic(const char *path, const void *data, size_t n, int durable,
                          sp_error *err);
/* s as a JSON string (quotes and escapes; NULL: ""): programs/' one escaper. */
void cli_json_str(FILE *f, const char *s);
/* sp_loader_info_get() of ld, by value. */
sp_loader_info cli_loader_info(const sp_loader *ld);

/* The help (cli_help.c): every command's options, shared by `seedpipe
 * help`, `seedpipe help CMD` and `seedpipe CMD --help`. topic NULL: all.
 * @return 0, or -1 if topic names no command. */
int cli_help_print(FILE *f, const char *topic, const char *sub);
/* 1 if the help of a's command (cache: of its subcommand) lists --key. */
int cli_help_lists(const cli_args *a, const char *key);
/* Exit 2 if an option was given that the command did not use. */
void cli_check_unused(cli_args *a);
/* Print "seedpipe CMD: msg" and exit 1. */
_Noreturn void cli_fail(const cli_args *a, const sp_error *err);
_Noreturn void cli_usage_error(const cli_args *a, const char *fmt, ...);

/* Fill a loader config from the common options: --pipeline --seed
 * --split --subset --split-seed; with CLI_BATCHES --batch-size
 * --drop-last --rank --world --threads; with CLI_FORMAT --dtype --layout
 * (an option not read is an unknown one for the command). */
#define CLI_BATCHES 1u
#define CLI_FORMAT 2u
void cli_loader_config(cli_args *a, const char *dataset, sp_loader_config *cfg, unsigned what);
/* The files of --indices FILE and --weights FILE (each may be NULL) into
 * cfg (cli_sampler.c); -1 with the reason in why. */
int cli_sampler_files(const char *indices, const char *weights, sp_loader_config *cfg,
                      char *why, size_t n);
/* The token spec of --seq-len L [--packing P] [--eod ID] [--pad ID]
 * (docs/tokens.md), or NULL without --seq-len; static storage. */
const char *cli_token_spec(cli_args *a);

/* A batch stream (stream.h) from the command's options: the in-process
 * loader (workers 0, cfg->threads threads) or the worker pool (workers >=
 * 1), from the start or from `resume` to the end of epoch epochs - 1,
 * through the epoch cache at cache_dir (NULL: none), whose warnings are
 * printed as "seedpipe: cache: ..." (never a stream error). */
int cli_stream_open(const sp_loader_config *cfg, int workers, int ring, uint32_t epochs,
                    const sp_loader_state *resume, const char *cache_dir, sp_stream **out,
                    sp_error *err);
/* One line of cache counters (nothing when c is NULL). */
void cli_print_cache_stats(sp_cache *c, FILE *f);
/* Default cache options with warnings printed as "seedpipe: cache: ..." */
void cli_cache_opts(sp_cache_opts *o);
/* --on-error, --rng-mode into cfg; --workers, --ring. */
void cli_pool_options(cli_args *a, sp_loader_config *cfg, int *workers, int *ring);
/* The failure log, one line per sample ("  sample I: path: reason"). */
void cli_print_failures(const sp_loader *ld, FILE *f);
/* Failures gathered from several loaders' logs (e.g. one pool an epoch),
 * once per sample; printed as cli_print_failures() prints one log. */
typedef struct cli_failures {
    sp_failure *v;
    size_t n, cap;
    sp_on_error on_error;
} cli_failures;
int cli_failures_add(cli_failures *fl, const sp_loader *ld);   /* -1: out of memory */
void cli_failures_print(const cli_failures *fl, FILE *f);
void cli_failures_free(cli_failures *fl);

/* --trace FILE.json: record a trace (trace.h) of this process and its
 * workers, written when the tool exits (also on an error). */
void cli_trace_start(cli_args *a);
/* The same for rank r of a job of `world` processes (world > 1: each rank
 * writes FILE.rankR.json beside FILE.json). */
void cli_trace_start_rank(cli_args *a, uint32_t rank, uint32_t world);
int cmd_trace_summary(cli_args *a);

int cmd_rng(cli_args *a);
int cmd_order(cli_args *a);
int cmd_inspect(cli_args *a);
int cmd_index(cli_args *a);
int cmd_shard(cli_args *a);
int cmd_explain(cli_args *a);
int cmd_split(cli_args *a);
/* Print the dataset's persistent-index warning, if any, to stderr. */
void cli_index_warning(const sp_dataset *ds);
int cmd_make_shapes(cli_args *a);
int cmd_digest(cli_args *a);
int cmd_dump(cli_args *a);
int cmd_verify(cli_args *a);   /* cli_verify.c */
int cmd_diff(cli_args *a);
int cmd_serve(cli_args *a);    /* cli_service.c */
int cmd_status(cli_args *a);
int cmd_cache(cli_args *a);     /* cli_cache.c */
int cmd_train(cli_args *a);     /* cli_train.c */
int cmd_gcn_demo(cli_args *a);  /* cli_gcn.c */
int cmd_env(cli_args *a);       /* cli_env.c */

/* A dataset's sp_dataset_info and a mixture's source s (sp_mix_source,
 * zeroed when s is out of range), by value: the tool asks a few times. */
static inline sp_dataset_info cli_ds_info(const sp_dataset *ds) {
    sp_dataset_info in = SP_DATASET_INFO_INIT;
    sp_dataset_info_get(ds, &in);
    return in;
}
static inline sp_mix_source cli_mix_source(const sp_dataset *ds, uint32_t s) {
    sp_mix_source src = SP_MIX_SOURCE_INIT;
    if (sp_dataset_mix_source_get(ds, s, &src) != 0) src.dataset = NULL;
    return src;
}

#endif
