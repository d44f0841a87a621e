/* cli.h - internals shared by the seedpipe command-line tool's files.
 *
 * The tool (cli.c: dispatch and the command line's words; cli_args.c, the
 * bottom, called by all: option lookups, errors, the loader and stream
 * options; cli_core.c: rng, order, inspect, index, make-shapes;
 * cli_batch.c: digest, dump; cli_verify.c: verify, diff; cli_service.c:
 * serve, status; cli_cache.c; cli_train.c over cli_train_run.c, see
 * cli_train.h) is the only code that
 * prints or exits; it turns every library error into "seedpipe CMD: msg" on
 * stderr and exit status 1 (2 for a usage error).
 */
#ifndef SEEDPIPE_CLI_H
#define SEEDPIPE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "seedpipe/cache.h"
#include "seedpipe/loader.h"
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

/* Lookups; each marks the option used. Bad values exit with status 2. */
const char *cli_str(cli_args *a, const char *key, const char *dflt);
int cli_has(cli_args *a, const char *key);
uint64_t cli_u64(cli_args *a, const char *key, uint64_t dflt);
/* Exit 2 if an option was given that the command did not use. */
void cli_check_unused(cli_args *a);
/* Print "seedpipe CMD: msg" and exit 1. */
_Noreturn void cli_fail(const cli_args *a, const sp_error *err);
_Noreturn void cli_usage_error(const cli_args *a, const char *fmt, ...);

/* Fill a loader config from the common options: --pipeline --seed
 * --batch-size --drop-last --rank --world --dtype --layout --threads
 * --split --subset --split-seed. */
void cli_loader_config(cli_args *a, const char *dataset, sp_loader_config *cfg);

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
/* Fold a batch digest into a stream digest (big-endian hi, lo), as
 * `digest` prints it. */
struct XXH3_state_s;
void cli_digest_fold(struct XXH3_state_s *st, sp_digest d);
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

#endif
