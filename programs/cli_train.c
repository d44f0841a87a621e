/* cli_train.c - `seedpipe train`: the deterministic training core on loader batches.
 *
 *   seedpipe train DATASET --seed S --epochs E --batch-size B
 *       [--pipeline P] [--dtype uint8|float32] [--threads T] [--train-threads T]
 *       [--device cpu|cuda] [--mode strict|fast] [--cuda-device N]
 *       [--lr X] [--momentum X] [--weight-decay X]
 *       [--eval DATASET] [--eval-subset NAME] [--eval-pipeline P]
 *       [--checkpoint-dir DIR --checkpoint-every N] [--resume CKPT] [--stop-after N]
 *       [--workers W [--ring R] | --attach NAME] [--cache DIR] [--seeds 1,2,3]
 *       --out RUN.json
 *   seedpipe train DATASET ... --compare-devices STEPS --out CMP.json
 *   mpirun -np K seedpipe train DATASET ...      (data-parallel, any K dividing B)
 *
 * The same seed drives the data order and augmentation (loader) and the
 * model initialisation (stream 3). Batches come from the in-process loader
 * or, with --workers W >= 1, from the worker pool, or (--attach) from a
 * service, all through one batch stream (stream.h); every way gives the
 * same bytes, so the same weights.
 * --threads sets the loader threads and, unless --train-threads is given,
 * the CPU backend's threads (neither changes a bit). --cache DIR reads and
 * fills the epoch cache (cache.h; bytes unchanged).
 *
 * Evaluation: --eval DATASET evaluates on that whole dataset (a training
 * --split does not carry over to it); --eval-subset NAME evaluates on
 * subset NAME of the training split (of DATASET, or of the --eval one),
 * e.g. --split train=0.9,val=0.1 --subset train --eval-subset val.
 *
 * Every --checkpoint-every N steps, DIR/step-<step>.ckpt holds what a run
 * resumed with --resume needs to end with the same weights AND the same
 * run record as an uninterrupted one (cli_train_run.c). Prints loss and
 * accuracy per epoch.
 * With --seeds, runs each seed (records OUT-seed<S>.json), and writes to
 * OUT a summary with the mean and sample standard deviation of the final
 * loss and accuracies. --compare-devices STEPS runs the first STEPS batches
 * on the CPU and on CUDA (strict), each twice, and reports repeatability
 * and the max weight difference (exit 1 if a backend did not repeat).
 *
 * Data-parallel (docs/distributed.md): started by mpirun or srun, each of
 * the K ranks reads only its slice of every global batch (its own loader,
 * its own worker pool, or --attach NAME: its node's `seedpipe serve
 * --world K --ranks A-B`), and the trainer combines the ranks' partial
 * sums so the weights are the single process's bits (train.h). The ranks
 * check they hold the same dataset and stream (fingerprints) before the
 * first step and the same weights after the last; rank 0 alone prints,
 * evaluates, writes checkpoints and the run record (with "world"). A
 * checkpoint holds the global stream's position, so it resumes at any K.
 * Any error on any rank stops the whole job (cli_dist.h).
 *
 * This file is the command: its options, --seeds and --compare-devices;
 * one training run is cli_train_run.c (cli_train.h).
 */
#include "cli_train.h"
#include "seedpipe/targets.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_dist.h"
#include "seedpipe/dataset.h"
#include "seedpipe/train.h"

/* The first `steps` batches of the in-process stream on a new trainer
 * (cfg): its weights into w (nparams floats), their digest, the seconds. */
static void compare_run(cli_args *a, const cli_train_opts *o, const sp_train_config *cfg,
                        uint64_t steps, uint64_t nb, float *w, sp_digest *d, double *secs) {
    sp_error err;
    sp_error_clear(&err);
    sp_trainer *tr = NULL;
    if (sp_trainer_create(cfg, &tr, &err)) cli_train_fail(a, &err);
    uint64_t epochs = nb ? (steps + nb - 1) / nb : 1;
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.epochs = epochs < 1 ? 1 : epochs > UINT32_MAX ? UINT32_MAX : (uint32_t)epochs;
    sp_stream *s = NULL;
    if (sp_stream_open(&o->lcfg, &sc, &s, &err)) cli_train_fail(a, &err);
    double t0 = cli_train_now();
    for (uint64_t k = 0; k < steps; k++) {
        sp_batch v;
        int rc = sp_stream_next(s, &v, &err);
        if (rc == SP_END)
            sp_error_set(&err, SP_ERANGE, "--compare-devices %llu: the stream has %llu batches",
                         (unsigned long long)steps, (unsigned long long)k);
        if (rc || sp_trainer_step_batch(tr, sp_stream_loader(s), &v, NULL, NULL, &err) ||
            sp_stream_release(s, &v, &err))
            cli_train_fail(a, &err);
    }
    *secs = cli_train_now() - t0;
    if (sp_trainer_get_params(tr, w, NULL, &err) || sp_trainer_weights_digest(tr, d, &err))
        cli_train_fail(a, &err);
    sp_stream_close(s);
    sp_trainer_destroy(tr);
}

/* --compare-devices N: the first N batches on the CPU reference and on
 * CUDA (strict), each twice; reports whether each backend repeated itself
 * bit for bit and the max absolute / relative weight difference CPU vs GPU.
 * Writes a small JSON object to out. */
static int compare_devices(cli_args *a, const cli_train_opts *o, uint64_t steps,
                           const char *out) {
    sp_error err;
    sp_error_clear(&err);
    sp_loader *ld = NULL;   /* the sample shape, classes and batches per epoch */
    if (sp_loader_create(&o->lcfg, &ld, &err)) cli_train_fail(a, &err);
    sp_train_config cfg = o->tcfg;
    cfg.seed = o->lcfg.seed;
    sp_loader_info li = cli_loader_info(ld);
    cfg.shape = (sp_model_shape){li.c, li.h, li.w, cli_ds_info(li.dataset).num_classes};
    sp_model_layout l;
    if (sp_model_layout_of(&cfg.shape, &l, &err)) cli_train_fail(a, &err);
    uint64_t nb = li.batches_per_epoch;
    float *w[4];
    sp_digest d[4];
    double secs[4];
    const char *names[4] = {"cpu", "cpu", "cuda", "cuda"};
    for (int r = 0; r < 4; r++) {
        cfg.device = r < 2 ? SP_DEVICE_CPU : SP_DEVICE_CUDA;
        if (r >= 2) cfg.strict = 1, cfg.fast = 0;
        w[r] = malloc(l.nparams * sizeof(float));
        if (!w[r]) {
            sp_error_set(&err, SP_ENOMEM, "out of memory");
            cli_train_fail(a, &err);
        }
        compare_run(a, o, &cfg, steps, nb, w[r], &d[r], &secs[r]);
        char hex[33];
        sp_digest_hex(d[r], hex);
        printf("%-5s run %d: %llu steps in %.2f s, weights digest %s\n", names[r], r % 2 + 1,
               (unsigned long long)steps, secs[r], hex);
    }
    double maxabs = 0, maxrel = 0;
    for (size_t i = 0; i < l.nparams; i++) {
        double df = fabs((double)w[0][i] - (double)w[2][i]);
        double rel = df / (fabs((double)w[0][i]) + 1e-3);
        if (df > maxabs) maxabs = df;
        if (rel > maxrel) maxrel = rel;
    }
    int cpu_rep = d[0].hi == d[1].hi && d[0].lo == d[1].lo;
    int gpu_rep = d[2].hi == d[3].hi && d[2].lo == d[3].lo;
    printf("cpu repeats itself: %s; cuda (strict) repeats itself: %s\n", cpu_rep ? "yes" : "NO",
           gpu_rep ? "yes" : "NO");
    printf("cpu vs cuda after %llu steps: max |dw| %.3e, max |dw| / (|w| + 1e-3) %.3e\n",
           (unsigned long long)steps, maxabs, maxrel);
    char js[512];
    int jn = snprintf(js, sizeof js, "{\"steps\":%llu,\"cpu_repeats\":%s,\"cuda_repeats\":%s,"
                      "\"max_abs_diff\":%.9g,\"max_rel_diff\":%.9g,\"cpu_seconds\":%.3f,"
                      "\"cuda_seconds\":%.3f}\n", (unsigned long long)steps,
                      cpu_rep ? "true" : "false", gpu_rep ? "true" : "false", maxabs, maxrel,
                      secs[0], secs[2]);
    sp_error werr;
    if (jn > 0 && (size_t)jn < sizeof js && cli_write_file_atomic(out, js, (size_t)jn, 1, &werr))
        fprintf(stderr, "seedpipe train: %s\n", werr.msg);
    for (int r = 0; r < 4; r++) free(w[r]);
    sp_loader_destroy(ld);
    return cpu_rep && gpu_rep ? 0 : 1;
}

static void ensure_dir(cli_args *a, const char *dir) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        sp_error err;
        sp_error_set(&err, SP_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
        cli_train_fail(a, &err);
    }
}

static void mean_std(const double *v, int n, double *m, double *s) {
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    *m = sum / n;
    for (int i = 0; i < n; i++) sq += (v[i] - *m) * (v[i] - *m);
    *s = n > 1 ? sqrt(sq / (n - 1)) : 0;
}

/* Rank and world come from the launcher; --world/--rank may only agree. */
static void job_geometry(cli_args *a, cli_train_opts *o) {
    const cli_dist *d = &cli_train_job;
    const char *wopt = cli_str(a, "world", NULL), *ropt = cli_str(a, "rank", NULL);
    if (d->mpi) {
        if ((wopt && o->lcfg.world != d->world) || (ropt && o->lcfg.rank != d->rank))
            cli_usage_error(a, "--rank %u --world %u, but the launcher made this rank %u of %u",
                            o->lcfg.rank, o->lcfg.world, d->rank, d->world);
        o->lcfg.world = d->world;
        o->lcfg.rank = d->rank;
    } else if (o->lcfg.world > 1) {
        cli_usage_error(a, "--world %u needs %u processes: run `mpirun -np %u seedpipe train ...` "
                        "(this one was not started by mpirun or srun%s)",
                        o->lcfg.world, o->lcfg.world, o->lcfg.world,
                        cli_dist_have_mpi() ? "" : "; and this seedpipe was built without MPI");
    }
}

/* The training core's options: --device --train-threads --lr --momentum
 * --weight-decay --mode (--fast, --strict) --cuda-device. */
static void train_options(cli_args *a, cli_train_opts *o) {
    sp_error err;
    sp_error_clear(&err);
    sp_train_config_default(&o->tcfg);
    if (sp_device_parse(cli_str(a, "device", "cpu"), &o->tcfg.device, &err))
        cli_usage_error(a, "%s", err.msg);
    o->tcfg.threads = (int)cli_uint(a, "train-threads", (uint64_t)o->lcfg.threads, 1, 64);
    o->tcfg.lr = (float)cli_real(a, "lr", o->tcfg.lr, 0, 1e6);
    o->tcfg.momentum = (float)cli_real(a, "momentum", o->tcfg.momentum, 0, 1);
    o->tcfg.weight_decay = (float)cli_real(a, "weight-decay", o->tcfg.weight_decay, 0, 1e6);
    const char *mode = cli_str(a, "mode", "strict");
    if (cli_has(a, "fast")) mode = "fast";
    if (cli_has(a, "strict")) mode = "strict";
    if (!strcmp(mode, "strict")) o->tcfg.strict = 1, o->tcfg.fast = 0;
    else if (!strcmp(mode, "fast")) o->tcfg.strict = 0, o->tcfg.fast = 1;
    else if (!strcmp(mode, "default")) o->tcfg.strict = 0, o->tcfg.fast = 0;
    else cli_usage_error(a, "--mode must be strict, fast or default");
    o->tcfg.cuda_device = (int)cli_uint(a, "cuda-device", 0, 0, 1023);
}

/* The run's options: --epochs, evaluation, --cache, --attach,
 * checkpoints, --resume, --stop-after, and the pool's. */
static void run_options(cli_args *a, cli_train_opts *o) {
    o->epochs = (uint32_t)cli_uint(a, "epochs", 1, 1, 1000000);
    o->eval_dataset = cli_str(a, "eval", NULL);
    o->eval_pipeline = cli_str(a, "eval-pipeline", NULL);
    o->eval_subset = cli_str(a, "eval-subset", NULL);
    if (o->eval_subset && !o->lcfg.split)
        cli_usage_error(a, "--eval-subset NAME needs the training --split");
    o->cache_dir = cli_str(a, "cache", NULL);
    o->attach = cli_str(a, "attach", NULL);
    o->ckpt_dir = cli_str(a, "checkpoint-dir", NULL);
    o->ckpt_every = cli_uint(a, "checkpoint-every", o->ckpt_dir ? 100 : 0, 0, UINT64_MAX);
    o->resume = cli_str(a, "resume", NULL);
    o->stop_after = cli_uint(a, "stop-after", 0, 0, UINT64_MAX);
    /* --on-error, --rng-mode, --workers, --ring as the pool commands. */
    cli_pool_options(a, &o->lcfg, &o->workers, &o->ring);
}

/* --seeds: up to 64 comma-separated integers into list. @return how many. */
static int parse_seeds(cli_args *a, const char *seeds, uint64_t *list) {
    int n = 0;
    const char *p = seeds;
    do {
        size_t len = strcspn(p, ",");
        if (n == 64) cli_usage_error(a, "--seeds \"%s\": more than 64 seeds", seeds);
        list[n++] = cli_num_span(a, "seeds", seeds, p, len, 0, UINT64_MAX);
        p += len;
    } while (*p++ == ',');
    return n;
}

/* The final results of the --seeds runs. */
typedef struct seed_results {
    int n, have_eval;
    double loss[64], acc[64], eacc[64];
} seed_results;

/* Rank 0: print the mean and sample standard deviation over the seeds,
 * finish the summary (sf: its runs so far, into *sum) and write it to out. */
static void write_summary(cli_args *a, const seed_results *res, FILE *sf, char **sum,
                          size_t *sumn, const char *out) {
    sp_error err;
    sp_error_clear(&err);
    int n = res->n;
    double lm, ls, am, as, em = 0, es = 0;
    mean_std(res->loss, n, &lm, &ls);
    mean_std(res->acc, n, &am, &as);
    printf("over %d seeds: final loss %.4f +- %.4f, train acc %.2f%% +- %.2f", n, lm, ls,
           100 * am, 100 * as);
    fprintf(sf, "],\"final_loss\":{\"mean\":%.9g,\"std\":%.9g},\"final_accuracy\":{\"mean\":%.9g,"
                "\"std\":%.9g}",
            lm, ls, am, as);
    if (res->have_eval) {
        mean_std(res->eacc, n, &em, &es);
        printf(", eval acc %.2f%% +- %.2f", 100 * em, 100 * es);
        fprintf(sf, ",\"final_eval_accuracy\":{\"mean\":%.9g,\"std\":%.9g}", em, es);
    }
    printf(" (sample std)\n");
    fprintf(sf, "}\n");
    fclose(sf);
    if (cli_write_file_atomic(out, *sum, *sumn, 1, &err)) {   /* cli_util.c: atomic publish */
        free(*sum);
        cli_train_fail(a, &err);
    }
    free(*sum);
    printf("summary: %s\n", out);
}

/* --seeds: one run a seed (records OUT-seed<S>.json, checkpoints in
 * DIR/seed-<S>), then rank 0 writes the summary to OUT. */
static int run_seeds(cli_args *a, const cli_train_opts *o, const char *seeds, const char *out) {
    if (o->resume) cli_usage_error(a, "--resume resumes one run; it cannot be combined with --seeds");
    uint64_t list[64];
    seed_results res;
    memset(&res, 0, sizeof res);
    int n = res.n = parse_seeds(a, seeds, list);
    char base[4096];
    snprintf(base, sizeof base, "%s", out);
    size_t bl = strlen(base);
    if (bl > 5 && !strcmp(base + bl - 5, ".json")) base[bl - 5] = 0;
    char *sum = NULL;
    size_t sumn = 0;
    FILE *sf = open_memstream(&sum, &sumn);
    if (!sf) return 1;
    fprintf(sf, "{\"seeds\":[");
    for (int i = 0; i < n; i++) fprintf(sf, "%s%llu", i ? "," : "", (unsigned long long)list[i]);
    fprintf(sf, "],\"runs\":[");
    for (int i = 0; i < n; i++) {
        char path[4200], dir[4200];
        snprintf(path, sizeof path, "%s-seed%llu.json", base, (unsigned long long)list[i]);
        const char *ck = NULL;
        if (o->ckpt_dir) {
            snprintf(dir, sizeof dir, "%s/seed-%llu", o->ckpt_dir, (unsigned long long)list[i]);
            ensure_dir(a, dir);
            ck = dir;
        }
        if (cli_train_job.rank == 0) printf("== seed %llu ==\n", (unsigned long long)list[i]);
        sp_run_epoch fin;
        cli_train_run(a, o, list[i], path, ck, &fin);
        res.loss[i] = fin.loss;
        res.acc[i] = fin.accuracy;
        res.eacc[i] = fin.eval_accuracy;
        res.have_eval = fin.eval_accuracy >= 0;
        fprintf(sf, "%s", i ? "," : "");
        cli_json_str(sf, path);
    }
    if (cli_train_job.rank != 0) {   /* rank 0 writes the summary */
        fclose(sf);
        free(sum);
    } else {
        write_summary(a, &res, sf, &sum, &sumn, out);
    }
    cli_dist_finish(&cli_train_job);
    return 0;
}

int cmd_train(cli_args *a) {
    if (a->npos != 1) cli_usage_error(a, "usage: seedpipe train DATASET --epochs E --out RUN.json ...");
    cli_train_opts o;
    memset(&o, 0, sizeof o);
    o.dataset = a->pos[0];
    sp_error err;
    sp_error_clear(&err);
    if (cli_dist_start(&cli_train_job, &err)) cli_train_fail(a, &err);
    cli_trace_start_rank(a, cli_train_job.rank, cli_train_job.world);
    cli_loader_config(a, o.dataset, &o.lcfg, CLI_BATCHES | CLI_FORMAT);
    sp_pipeline *tp = NULL;   /* a targets op (masks=semantic needs no annotations) */
    int targets = o.lcfg.pipeline && sp_pipeline_parse(o.lcfg.pipeline, &tp, NULL) == 0 &&
                  sp_pipeline_targets(tp, NULL);
    sp_pipeline_destroy(tp);
    if (targets && !o.lcfg.annotations)
        cli_usage_error(a, "train: the pipeline ends with a targets op: seedpipe's training "
                           "core is an image classifier (one label per image) and cannot "
                           "train on boxes, keypoints or masks; serve them to your own model "
                           "with `seedpipe serve` or seedpipe.Loader (docs/targets.md)");
    if (o.lcfg.annotations)   /* docs/targets.md "What is not offered" */
        cli_usage_error(a, "train: --annotations: seedpipe's training core is an image "
                           "classifier (one label per image) and cannot train on boxes, "
                           "keypoints or masks; serve them to your own detection model with "
                           "`seedpipe serve --annotations` or seedpipe.Loader(annotations=) "
                           "(docs/targets.md)");
    job_geometry(a, &o);
    train_options(a, &o);
    run_options(a, &o);
    const char *out = cli_str(a, "out", NULL);
    const char *seeds = cli_str(a, "seeds", NULL);
    uint64_t compare = cli_uint(a, "compare-devices", 0, 0, UINT64_MAX);
    o.progress = isatty(2);
    cli_check_unused(a);
    if (!out) cli_usage_error(a, "--out RUN.json is required");
    if (o.attach && (o.workers > 0 || o.cache_dir))
        cli_usage_error(a, "--attach NAME reads the service's stream: no --workers or --cache");
    if (compare && cli_train_job.world > 1)
        cli_usage_error(a, "--compare-devices runs as one process, not under mpirun -np %u",
                        cli_train_job.world);
    if (compare) return compare_devices(a, &o, compare, out);
    if (o.ckpt_dir) ensure_dir(a, o.ckpt_dir);
    if (seeds) return run_seeds(a, &o, seeds, out);
    cli_train_run(a, &o, o.lcfg.seed, out, o.ckpt_dir, NULL);
    if (cli_train_job.rank == 0) printf("run record: %s\n", out);
    cli_dist_finish(&cli_train_job);
    return 0;
}
