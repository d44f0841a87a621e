/* cli_train.h - `seedpipe train` inside the tool: the command (cli_train.c:
 * options, --seeds, --compare-devices) on top of one training run
 * (cli_train_run.c: the batch stream, steps, evaluation, checkpoints, the
 * run record). Calls go one way, cli_train.c -> cli_train_run.c.
 */
#ifndef SEEDPIPE_CLI_TRAIN_H
#define SEEDPIPE_CLI_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "cli_dist.h"
#include "seedpipe/train.h"

/* The command's options, as parsed by cmd_train(). */
typedef struct cli_train_opts {
    const char *dataset, *eval_dataset, *eval_pipeline, *eval_subset, *ckpt_dir, *resume;
    const char *cache_dir, *attach;
    sp_loader_config lcfg;
    sp_train_config tcfg;
    uint32_t epochs;
    uint64_t ckpt_every, stop_after;
    int workers, ring;
    int progress;
} cli_train_opts;

/* This process's place in the job (rank 0 of 1 without a launcher). */
extern cli_dist cli_train_job;

/* Every failure stops the whole job, naming this rank (cli_dist.h). */
_Noreturn void cli_train_fail(const cli_args *a, const sp_error *err);

/* CLOCK_MONOTONIC seconds. */
double cli_train_now(void);

/* One training run with this seed: out_path the run record (rank 0), ckdir
 * the checkpoints (NULL: none); fills *final (may be NULL) with the last
 * epoch's results ({0, 0, -1, 0} if none finished). Exits on any error. */
void cli_train_run(cli_args *a, const cli_train_opts *o, uint64_t seed, const char *out_path,
                   const char *ckdir, sp_run_epoch *final);

#endif
