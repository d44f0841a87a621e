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
 * Every --checkpoint-every N steps, DIR/step-<step>.ckpt holds weights,
 * momentum, step count, hyperparameters and a blob: the loader state of
 * the next batch (state.h JSON line) and this command's accumulators (the
 * epoch's running loss/accuracy, finished epochs, the step losses), so a
 * run resumed with --resume ends with the same weights AND the same run
 * record as an uninterrupted one. Prints loss and accuracy per epoch.
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
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_dist.h"
#include "seedpipe/client.h"
#include "seedpipe/dataset.h"
#include "seedpipe/pipeline.h"
#include "seedpipe/pool.h"
#include "seedpipe/train.h"

typedef struct topts {
    const char *dataset, *eval_dataset, *eval_pipeline, *eval_subset, *ckpt_dir, *resume;
    const char *cache_dir, *attach;
    sp_loader_config lcfg;
    sp_train_config tcfg;
    uint32_t epochs;
    uint64_t ckpt_every, stop_after;
    int workers, ring;
    int progress;
} topts;

typedef struct accum {           /* what a checkpoint must carry besides the model */
    double loss_sum;             /* this epoch: sum of loss * count */
    uint64_t correct, seen;
    uint32_t nepochs;
    sp_run_epoch *epochs;
    uint64_t nsteps, cap, first; /* step losses of steps first.. */
    float *step_loss;
} accum;

/* This process's place in the job (rank 0 of 1 without a launcher). */
static cli_dist g_dist = {0, 1, 0, 0.0, 0};

/* Every failure stops the whole job, naming this rank (cli_dist.h). */
static _Noreturn void train_fail(const cli_args *a, const sp_error *err) {
    cli_dist_fail(&g_dist, a->cmd, err);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float parse_float(cli_args *a, const char *key, float dflt) {
    const char *v = cli_str(a, key, NULL);
    if (!v) return dflt;
    char *end;
    errno = 0;
    float f = strtof(v, &end);
    if (errno || end == v || *end) cli_usage_error(a, "--%s: \"%s\" is not a number", key, v);
    return f;
}

static uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static double bitsd(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* JSON string body with escapes. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* ---- the checkpoint blob: state line, then accumulator lines ---------------- */

static char *blob_make(const sp_loader_state *st, const accum *ac, size_t *len) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return NULL;
    char line[SP_STATE_MAX_BYTES];
    sp_loader_state_format(st, line, sizeof line);
    fputs(line, f);
    fprintf(f, "acc %016llx %llu %llu\n", (unsigned long long)dbits(ac->loss_sum),
            (unsigned long long)ac->correct, (unsigned long long)ac->seen);
    fprintf(f, "epochs %u", ac->nepochs);
    for (uint32_t e = 0; e < ac->nepochs; e++)
        fprintf(f, " %016llx %016llx %016llx %016llx", (unsigned long long)dbits(ac->epochs[e].loss),
                (unsigned long long)dbits(ac->epochs[e].accuracy),
                (unsigned long long)dbits(ac->epochs[e].eval_accuracy),
                (unsigned long long)dbits(ac->epochs[e].eval_loss));
    /* Step losses while they fit the checkpoint's blob limit (1 MiB). */
    uint64_t keep = ac->nsteps * 9 < 900000 ? ac->nsteps : 0;
    fprintf(f, "\nlosses %llu %llu", (unsigned long long)(ac->first + ac->nsteps - keep),
            (unsigned long long)keep);
    for (uint64_t s = ac->nsteps - keep; s < ac->nsteps; s++)
        fprintf(f, " %08x", fbits(ac->step_loss[s]));
    fputc('\n', f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    *len = n;
    return text;
}

static int push_loss(accum *ac, float l) {
    if (ac->nsteps == ac->cap) {
        uint64_t nc = ac->cap ? 2 * ac->cap : 1024;
        float *nb = realloc(ac->step_loss, nc * sizeof *nb);
        if (!nb) return -1;
        ac->step_loss = nb;
        ac->cap = nc;
    }
    ac->step_loss[ac->nsteps++] = l;
    return 0;
}

static int push_epoch(accum *ac, sp_run_epoch ep) {
    sp_run_epoch *nb = realloc(ac->epochs, (ac->nepochs + 1) * sizeof *nb);
    if (!nb) return -1;
    ac->epochs = nb;
    ac->epochs[ac->nepochs++] = ep;
    return 0;
}

static int blob_parse(const char *blob, sp_loader_state *st, accum *ac, sp_error *err) {
    const char *nl = strchr(blob, '\n');
    if (!nl) return sp_error_set(err, SP_EFORMAT, "checkpoint: no loader state in the blob");
    int rc = sp_loader_state_parse(blob, (size_t)(nl - blob), st, err);
    if (rc) return rc;
    const char *p = nl + 1;
    unsigned long long ls, c, s;
    int used = 0;
    if (sscanf(p, "acc %llx %llu %llu\n%n", &ls, &c, &s, &used) != 3 || !used) goto bad;
    ac->loss_sum = bitsd(ls);
    ac->correct = c;
    ac->seen = s;
    p += used;
    unsigned ne;
    if (sscanf(p, "epochs %u%n", &ne, &used) != 1 || ne > 1000000) goto bad;
    p += used;
    for (unsigned e = 0; e < ne; e++) {
        unsigned long long v[4];
        if (sscanf(p, " %llx %llx %llx %llx%n", &v[0], &v[1], &v[2], &v[3], &used) != 4) goto bad;
        p += used;
        sp_run_epoch ep = {bitsd(v[0]), bitsd(v[1]), bitsd(v[2]), bitsd(v[3])};
        if (push_epoch(ac, ep)) return sp_error_set(err, SP_ENOMEM, "out of memory");
    }
    unsigned long long first, keep;
    if (sscanf(p, "\nlosses %llu %llu%n", &first, &keep, &used) != 2) goto bad;
    p += used;
    ac->first = first;
    for (unsigned long long i = 0; i < keep; i++) {
        unsigned x;
        if (sscanf(p, " %8x%n", &x, &used) != 1) goto bad;
        p += used;
        if (push_loss(ac, bitsf(x))) return sp_error_set(err, SP_ENOMEM, "out of memory");
    }
    return 0;
bad:
    return sp_error_set(err, SP_EFORMAT, "checkpoint: malformed training accumulators in the blob");
}

/* ---- evaluation ---------------------------------------------------------------- */

static int run_eval(sp_trainer *tr, sp_loader *ev, sp_batch *eb, double *acc, double *loss,
                    sp_error *err) {
    uint64_t nb = sp_loader_batches_per_epoch(ev), correct = 0, seen = 0;
    double ls = 0;
    for (uint64_t b = 0; b < nb; b++) {
        int rc = sp_loader_batch(ev, 0, b, eb, err);
        if (rc) return rc;
        uint32_t c;
        float l;
        rc = sp_trainer_eval_batch(tr, ev, eb, &l, &c, err);
        if (rc) return rc;
        correct += c;
        seen += eb->count;
        ls += (double)l * eb->count;
    }
    *acc = seen ? (double)correct / (double)seen : 0;
    *loss = seen ? ls / (double)seen : 0;
    return 0;
}

static void config_json(FILE *f, const topts *o, const sp_loader *ld, const sp_trainer *tr) {
    const sp_train_config *tc = sp_trainer_config(tr);
    const sp_model_layout *l = sp_trainer_layout(tr);
    const sp_loader_config *lc = sp_loader_config_of(ld);
    fputs("{\"dataset\":", f);
    json_str(f, o->dataset);
    fputs(",\"pipeline\":", f);
    json_str(f, sp_pipeline_canonical(sp_loader_pipeline(ld)));
    fputs(",\"eval_dataset\":", f);
    if (o->eval_dataset) json_str(f, o->eval_dataset);
    else fputs("null", f);
    fputs(",\"eval_subset\":", f);
    if (o->eval_subset) json_str(f, o->eval_subset);
    else fputs("null", f);
    fputs(",\"cache\":", f);
    if (o->cache_dir) json_str(f, o->cache_dir);
    else fputs("null", f);
    fprintf(f, ",\"seed\":%llu,\"epochs\":%u,\"batch_size\":%u,\"drop_last\":%s,\"dtype\":\"%s\","
               "\"layout\":\"%s\",\"loader_threads\":%d,\"workers\":%d,\"device\":\"%s\","
               "\"threads\":%d,\"mode\":\"%s\",\"lr\":%.9g,\"momentum\":%.9g,"
               "\"weight_decay\":%.9g,\"checkpoint_every\":%llu,\"world\":%u,\"resume\":",
            (unsigned long long)lc->seed, o->epochs, lc->batch_size, lc->drop_last ? "true" : "false",
            sp_dtype_name(lc->dtype), sp_layout_name(lc->layout), lc->threads, o->workers,
            sp_device_name(tc->device), tc->threads, tc->fast ? "fast" : tc->strict ? "strict" : "default",
            (double)tc->lr, (double)tc->momentum, (double)tc->weight_decay,
            (unsigned long long)o->ckpt_every, lc->world);
    if (o->resume) json_str(f, o->resume);
    else fputs("null", f);
    fprintf(f, ",\"model\":{\"input\":[%d,%d,%d],\"classes\":%d,\"conv\":[16,32],\"params\":%zu}}",
            l->in.c, l->in.h, l->in.w, l->in.classes, l->nparams);
}

static void progress(const topts *o, uint32_t e, uint64_t b, uint64_t nb, float loss) {
    if (!o->progress) return;
    int w = 30, done = (int)(nb ? (b * (uint64_t)w) / nb : 0);
    char bar[40];
    for (int i = 0; i < w; i++) bar[i] = i < done ? '#' : '.';
    bar[w] = 0;
    fprintf(stderr, "\r  epoch %u [%s] %llu/%llu loss %.4f ", e + 1, bar, (unsigned long long)b,
            (unsigned long long)nb, (double)loss);
    if (b == nb) fputs("\r\033[K", stderr);
}

/* The batch source of run_one(): a stream of the in-process loader, the
 * pool, or (--attach) this rank's slice of its node's service, which must
 * serve this stream (fingerprint) to a job of this world size. */
static sp_stream *open_source(cli_args *a, const topts *o, const sp_loader_config *lcfg,
                              const sp_loader *ld, const sp_loader_state *resume) {
    sp_error err;
    sp_error_clear(&err);
    sp_stream *s = NULL;
    if (!o->attach) {
        if (cli_stream_open(lcfg, o->workers, o->ring, o->epochs, resume, o->cache_dir, &s, &err))
            train_fail(a, &err);
        return s;
    }
    sp_client_opts co;
    memset(&co, 0, sizeof co);
    sp_digest fp = sp_loader_fingerprint(ld);
    co.expect_fingerprint = &fp;
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = SP_STREAM_SERVICE;
    sc.service_name = o->attach;
    sc.rank = lcfg->rank;
    sc.client_opts = &co;
    if (sp_stream_open(NULL, &sc, &s, &err)) train_fail(a, &err);
    sp_stream_info in;
    sp_stream_info_get(s, &in);
    if (in.world != lcfg->world) {
        sp_error_set(&err, SP_EINVAL, "--attach %s: the service serves a world of %u ranks, "
                     "this job has %u (serve --world %u)", o->attach, in.world, lcfg->world,
                     lcfg->world);
        train_fail(a, &err);
    }
    return s;
}

/* Batch bi of epoch e from the stream, which must be at it. */
static void next_batch(cli_args *a, const topts *o, sp_stream *s, uint32_t e, uint64_t bi,
                       sp_batch *view) {
    sp_error err;
    sp_error_clear(&err);
    int rc = sp_stream_next(s, view, &err);
    if (rc == SP_STREAM_END) {
        if (o->attach)
            sp_error_set(&err, SP_EIO, "--attach %s: the service ended the stream early",
                         o->attach);
        else
            sp_error_set(&err, SP_EIO, "worker pool ended the stream early");
    }
    if (rc) train_fail(a, &err);
    if (view->epoch == e && view->index == bi) return;
    if (o->attach)
        sp_error_set(&err, SP_EIO, "--attach %s: the service gave batch %u/%llu, expected "
                     "%u/%llu (serve --resume from the checkpoint's state)", o->attach,
                     view->epoch, (unsigned long long)view->index, e, (unsigned long long)bi);
    else
        sp_error_set(&err, SP_EIO, "worker pool gave batch %u/%llu, expected %u/%llu",
                     view->epoch, (unsigned long long)view->index, e, (unsigned long long)bi);
    train_fail(a, &err);
}

/* What one training run carries between its steps. */
typedef struct run_ctx {
    cli_args *a;
    const topts *o;
    sp_loader *ld, *ev;     /* the training loader; the eval loader (lead only) or NULL */
    sp_batch eb;            /* the eval batch */
    sp_trainer *tr;
    sp_stream *stream;
    accum ac;
    int lead;               /* rank 0: prints, evaluates, writes files */
    const char *ckdir;
    uint64_t nb, nstep_timed;
    double te, tstep, tdata; /* epoch start; step and data-wait time sums */
} run_ctx;

/* --eval / --eval-subset: the eval loader, which must give samples of the
 * training shape and classes. */
static void open_eval(run_ctx *x, const sp_loader_config *lcfg, const sp_model_shape *shape) {
    const topts *o = x->o;
    sp_error err;
    sp_error_clear(&err);
    sp_loader_config ecfg = *lcfg;
    ecfg.dataset = o->eval_dataset ? o->eval_dataset : lcfg->dataset;
    ecfg.subset = o->eval_subset;   /* no split without --eval-subset */
    if (!o->eval_subset) ecfg.split = NULL;
    ecfg.pipeline = o->eval_pipeline ? o->eval_pipeline : lcfg->pipeline;
    ecfg.drop_last = 0;
    ecfg.rank = 0;
    ecfg.world = 1;
    if (sp_loader_create(&ecfg, &x->ev, &err)) train_fail(x->a, &err);
    int ec, eh, ew, ek = sp_dataset_num_classes(sp_loader_dataset(x->ev));
    sp_loader_sample_dims(x->ev, &ec, &eh, &ew);
    if (ec != shape->c || eh != shape->h || ew != shape->w || ek != shape->classes) {
        sp_error_set(&err, SP_EINVAL,
                     "--eval: samples %dx%dx%d with %d classes, training has %dx%dx%d with %d",
                     ec, eh, ew, ek, shape->c, shape->h, shape->w, shape->classes);
        train_fail(x->a, &err);
    }
    if (sp_batch_alloc(x->ev, &x->eb)) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        train_fail(x->a, &err);
    }
}

/* --resume CKPT: weights and momentum into the trainer, the loader state
 * (checked against this stream) into *rst, the accumulators into x->ac. */
static void resume_from(run_ctx *x, sp_loader_state *rst) {
    const topts *o = x->o;
    sp_error err;
    sp_error_clear(&err);
    char *blob = NULL;
    if (sp_trainer_load(x->tr, o->resume, &blob, NULL, &err)) train_fail(x->a, &err);
    if (blob_parse(blob, rst, &x->ac, &err) || sp_loader_state_check(x->ld, rst, &err)) {
        free(blob);
        char m[SP_ERROR_MSG_MAX];
        memcpy(m, err.msg, sizeof m);
        sp_error_set(&err, err.code, "%s: %s", o->resume, m);
        train_fail(x->a, &err);
    }
    free(blob);
    if (x->lead)
        printf("resumed from %s: step %llu, epoch %u, batch %llu\n", o->resume,
               (unsigned long long)sp_trainer_steps(x->tr), rst->epoch + 1,
               (unsigned long long)rst->batch);
}

/* After the last batch of epoch e: evaluate, record and print the epoch. */
static void end_epoch(run_ctx *x, uint32_t e) {
    sp_error err;
    sp_error_clear(&err);
    accum *ac = &x->ac;
    sp_run_epoch ep = {ac->seen ? ac->loss_sum / (double)ac->seen : 0,
                       ac->seen ? (double)ac->correct / (double)ac->seen : 0, -1, 0};
    if (x->ev && run_eval(x->tr, x->ev, &x->eb, &ep.eval_accuracy, &ep.eval_loss, &err))
        train_fail(x->a, &err);
    if (push_epoch(ac, ep)) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        train_fail(x->a, &err);
    }
    ac->loss_sum = 0;
    ac->correct = ac->seen = 0;
    double tn = now();
    if (x->lead) {
        printf("epoch %u/%u: loss %.4f  acc %5.1f%%", e + 1, x->o->epochs, ep.loss,
               100.0 * ep.accuracy);
        if (x->ev)
            printf("  | eval loss %.4f  acc %5.1f%%", ep.eval_loss, 100.0 * ep.eval_accuracy);
        printf("  (%.1f s)\n", tn - x->te);
        fflush(stdout);
    }
    x->te = tn;
}

/* DIR/step-<step>.ckpt: the trainer, the state of the batch after (e, bi), the accumulators. */
static void checkpoint(run_ctx *x, uint32_t e, uint64_t bi, uint64_t step) {
    sp_error err;
    sp_error_clear(&err);
    sp_loader_state st;
    sp_loader_state_at(x->ld, e, bi + 1, &st);
    size_t blen = 0;
    char *blob = blob_make(&st, &x->ac, &blen);
    char path[4096];
    snprintf(path, sizeof path, "%s/step-%llu.ckpt", x->ckdir, (unsigned long long)step);
    if (!blob) sp_error_set(&err, SP_ENOMEM, "out of memory");
    if (!blob || sp_trainer_save(x->tr, path, blob, blen, &err)) train_fail(x->a, &err);
    free(blob);
}

/* One step on batch bi of epoch e. @return 1 when --stop-after stops the run. */
static int train_step(run_ctx *x, uint32_t e, uint64_t bi) {
    const topts *o = x->o;
    sp_error err;
    sp_error_clear(&err);
    sp_batch view;
    double td = now();
    next_batch(x->a, o, x->stream, e, bi, &view);
    float loss;
    uint32_t correct;
    double ts = now();
    x->tdata += ts - td;
    int rc = sp_trainer_step_batch(x->tr, x->ld, &view, &loss, &correct, &err);
    x->tstep += now() - ts;
    x->nstep_timed++;
    sp_error rerr;
    if (sp_stream_release(x->stream, &view, &rerr) && !rc) {
        err = rerr;
        rc = err.code;
    }
    if (rc) train_fail(x->a, &err);
    uint32_t count = sp_trainer_last_samples(x->tr);   /* the global batch's */
    x->ac.loss_sum += (double)loss * count;
    x->ac.correct += correct;
    x->ac.seen += count;
    if (push_loss(&x->ac, loss)) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        train_fail(x->a, &err);
    }
    if (x->lead) progress(o, e, bi + 1, x->nb, loss);
    uint64_t step = sp_trainer_steps(x->tr);
    if (bi + 1 == x->nb) end_epoch(x, e);
    if (x->lead && x->ckdir && o->ckpt_every && step % o->ckpt_every == 0)
        checkpoint(x, e, bi, step);
    if (o->stop_after && step >= o->stop_after) {
        if (x->lead) printf("stopped after step %llu (--stop-after)\n", (unsigned long long)step);
        return 1;
    }
    return 0;
}

/* The mean step and data-wait times (and, data-parallel, the exchange's). */
static void print_timing(const run_ctx *x, sp_device dev) {
    const char *source = x->o->attach ? "service" : x->o->workers > 0 ? "worker pool"
                                                                      : "in-process loader";
    double n = (double)x->nstep_timed;
    if (x->nstep_timed && g_dist.world > 1)
        printf("rank %u/%u: step time %.2f ms (exchange %.2f ms, %.1f KB), data wait %.2f ms "
               "(means of %llu steps, %s, %s)\n",
               g_dist.rank, g_dist.world, 1e3 * x->tstep / n, 1e3 * g_dist.comm_seconds / n,
               (double)g_dist.comm_bytes / 1e3 / n, 1e3 * x->tdata / n,
               (unsigned long long)x->nstep_timed, sp_device_name(dev), source);
    else if (x->nstep_timed)
        printf("step time %.2f ms, data wait %.2f ms (means of %llu steps, %s, %s)\n",
               1e3 * x->tstep / n, 1e3 * x->tdata / n, (unsigned long long)x->nstep_timed,
               sp_device_name(dev), source);
    g_dist.comm_seconds = 0;
    g_dist.comm_bytes = 0;
}

/* The final weights (the same on every rank) and the run record. */
static void write_record(run_ctx *x, uint64_t seed, double secs, const char *dev,
                         const char *out_path) {
    sp_error err;
    sp_error_clear(&err);
    sp_run_record r;
    memset(&r, 0, sizeof r);
    char *cfgj = NULL;
    size_t cfgn = 0;
    FILE *cf = open_memstream(&cfgj, &cfgn);
    if (!cf) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        train_fail(x->a, &err);
    }
    config_json(cf, x->o, x->ld, x->tr);
    fclose(cf);
    r.seed = seed;
    r.config_json = cfgj;
    r.dataset_fingerprint = sp_dataset_fingerprint(sp_loader_dataset(x->ld));
    r.loader_fingerprint = sp_loader_fingerprint(x->ld);
    r.device_json = dev;
    r.nepochs = x->ac.nepochs;
    r.epochs = x->ac.epochs;
    r.nsteps = x->ac.nsteps;
    r.step_loss = x->ac.step_loss;
    r.step_loss_first = x->ac.first;
    r.seconds = secs;
    if (sp_trainer_weights_digest(x->tr, &r.final_weights, &err) ||
        cli_dist_same(&g_dist, r.final_weights, "final weights", &err))
        train_fail(x->a, &err);
    char hex[33];
    sp_digest_hex(r.final_weights, hex);
    if (x->lead)
        printf("final weights digest %s (%llu steps%s)\n", hex,
               (unsigned long long)sp_trainer_steps(x->tr),
               g_dist.world > 1 ? ", the same on every rank" : "");
    if (x->lead && out_path && sp_run_record_write(out_path, &r, &err)) train_fail(x->a, &err);
    free(cfgj);
}

/* One training run; fills *final (the last epoch). @return 0 or exits. */
static void run_one(cli_args *a, topts *o, uint64_t seed, const char *out_path, const char *ckdir,
                    sp_run_epoch *final) {
    sp_error err;
    sp_error_clear(&err);
    run_ctx x;
    memset(&x, 0, sizeof x);
    x.a = a;
    x.o = o;
    x.ckdir = ckdir;
    sp_loader_config lcfg = o->lcfg;
    lcfg.seed = seed;
    if (sp_loader_create(&lcfg, &x.ld, &err)) train_fail(a, &err);
    /* Every rank must read the same dataset and stream (DESIGN.md 9). */
    if (cli_dist_same(&g_dist, sp_dataset_fingerprint(sp_loader_dataset(x.ld)),
                      "dataset fingerprint (every rank must see the same dataset: a shared "
                      "filesystem or identical copies)", &err) ||
        cli_dist_same(&g_dist, sp_loader_fingerprint(x.ld),
                      "loader fingerprint (pipeline, seed, batch geometry, format)", &err))
        train_fail(a, &err);
    x.lead = g_dist.rank == 0;
    int c, h, w;
    sp_loader_sample_dims(x.ld, &c, &h, &w);
    sp_train_config tcfg = o->tcfg;
    tcfg.seed = seed;
    tcfg.shape = (sp_model_shape){c, h, w, sp_dataset_num_classes(sp_loader_dataset(x.ld))};
    if (sp_trainer_create(&tcfg, &x.tr, &err)) train_fail(a, &err);
    sp_train_comm comm = cli_dist_comm(&g_dist);
    if (g_dist.world > 1 && sp_trainer_set_comm(x.tr, &comm, &err)) train_fail(a, &err);
    if ((o->eval_dataset || o->eval_subset) && x.lead)   /* the same weights everywhere */
        open_eval(&x, &lcfg, &tcfg.shape);
    sp_loader_state rst;
    memset(&rst, 0, sizeof rst);
    if (o->resume) resume_from(&x, &rst);
    /* The batch source, a batch stream (stream.h): the in-process loader,
     * (--workers >= 1) the pool, or (--attach) this rank's slice from a
     * service. */
    x.stream = open_source(a, o, &lcfg, x.ld, o->resume ? &rst : NULL);
    char dev[4096];
    sp_trainer_describe(x.tr, dev, sizeof dev);
    x.nb = sp_loader_batches_per_epoch(x.ld);
    double t0 = now();
    x.te = t0;
    int stopped = 0;
    for (uint32_t e = rst.epoch; e < o->epochs && !stopped; e++)
        for (uint64_t bi = e == rst.epoch ? rst.batch : 0; bi < x.nb && !stopped; bi++)
            stopped = train_step(&x, e, bi);
    double secs = now() - t0;
    print_timing(&x, tcfg.device);
    write_record(&x, seed, secs, dev, out_path);
    if (final) {
        sp_run_epoch none = {0, 0, -1, 0};
        *final = x.ac.nepochs ? x.ac.epochs[x.ac.nepochs - 1] : none;
    }
    free(x.ac.epochs);
    free(x.ac.step_loss);
    if (x.lead && (o->workers > 0 || o->cache_dir))
        cli_print_cache_stats(sp_stream_cache(x.stream), stdout);
    sp_stream_close(x.stream);
    sp_batch_free(&x.eb);
    sp_loader_destroy(x.ev);
    sp_trainer_destroy(x.tr);
    sp_loader_destroy(x.ld);
}

/* --compare-devices N: the first N batches on the CPU reference and on
 * CUDA (strict), each twice; reports whether each backend repeated itself
 * bit for bit and the max absolute / relative weight difference CPU vs GPU.
 * Writes a small JSON object to out. */
static int compare_devices(cli_args *a, topts *o, uint64_t steps, const char *out) {
    sp_error err;
    sp_error_clear(&err);
    sp_loader *ld = NULL;
    if (sp_loader_create(&o->lcfg, &ld, &err)) train_fail(a, &err);
    sp_batch b;
    if (sp_batch_alloc(ld, &b)) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        train_fail(a, &err);
    }
    sp_train_config cfg = o->tcfg;
    cfg.seed = o->lcfg.seed;
    sp_loader_sample_dims(ld, &cfg.shape.c, &cfg.shape.h, &cfg.shape.w);
    cfg.shape.classes = sp_dataset_num_classes(sp_loader_dataset(ld));
    sp_model_layout l;
    if (sp_model_layout_of(&cfg.shape, &l, &err)) train_fail(a, &err);
    uint64_t nb = sp_loader_batches_per_epoch(ld);
    float *w[4];
    sp_digest d[4];
    double secs[4];
    const char *names[4] = {"cpu", "cpu", "cuda", "cuda"};
    for (int r = 0; r < 4; r++) {
        cfg.device = r < 2 ? SP_DEVICE_CPU : SP_DEVICE_CUDA;
        if (r >= 2) cfg.strict = 1, cfg.fast = 0;
        sp_trainer *tr = NULL;
        if (sp_trainer_create(&cfg, &tr, &err)) train_fail(a, &err);
        w[r] = malloc(l.nparams * sizeof(float));
        if (!w[r]) {
            sp_error_set(&err, SP_ENOMEM, "out of memory");
            train_fail(a, &err);
        }
        double t0 = now();
        for (uint64_t k = 0; k < steps; k++) {
            if (sp_loader_batch(ld, (uint32_t)(k / nb), k % nb, &b, &err) ||
                sp_trainer_step_batch(tr, ld, &b, NULL, NULL, &err))
                train_fail(a, &err);
        }
        secs[r] = now() - t0;
        if (sp_trainer_get_params(tr, w[r], NULL, &err) || sp_trainer_weights_digest(tr, &d[r], &err))
            train_fail(a, &err);
        sp_trainer_destroy(tr);
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
    FILE *f = fopen(out, "w");
    if (f) {
        fprintf(f, "{\"steps\":%llu,\"cpu_repeats\":%s,\"cuda_repeats\":%s,\"max_abs_diff\":%.9g,"
                   "\"max_rel_diff\":%.9g,\"cpu_seconds\":%.3f,\"cuda_seconds\":%.3f}\n",
                (unsigned long long)steps, cpu_rep ? "true" : "false", gpu_rep ? "true" : "false",
                maxabs, maxrel, secs[0], secs[2]);
        fclose(f);
    }
    for (int r = 0; r < 4; r++) free(w[r]);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    return cpu_rep && gpu_rep ? 0 : 1;
}

static void ensure_dir(cli_args *a, const char *dir) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        sp_error err;
        sp_error_set(&err, SP_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
        train_fail(a, &err);
    }
}

static void mean_std(const double *v, int n, double *m, double *s) {
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    *m = sum / n;
    for (int i = 0; i < n; i++) sq += (v[i] - *m) * (v[i] - *m);
    *s = n > 1 ? sqrt(sq / (n - 1)) : 0;
}

int cmd_train(cli_args *a) {
    if (a->npos != 1) cli_usage_error(a, "usage: seedpipe train DATASET --epochs E --out RUN.json ...");
    topts o;
    memset(&o, 0, sizeof o);
    o.dataset = a->pos[0];
    sp_error err;
    sp_error_clear(&err);
    if (cli_dist_start(&g_dist, &err)) train_fail(a, &err);
    cli_loader_config(a, o.dataset, &o.lcfg);
    /* Rank and world come from the launcher; --world/--rank may only agree. */
    const char *wopt = cli_str(a, "world", NULL), *ropt = cli_str(a, "rank", NULL);
    if (g_dist.mpi) {
        if ((wopt && o.lcfg.world != g_dist.world) || (ropt && o.lcfg.rank != g_dist.rank))
            cli_usage_error(a, "--rank %u --world %u, but the launcher made this rank %u of %u",
                            o.lcfg.rank, o.lcfg.world, g_dist.rank, g_dist.world);
        o.lcfg.world = g_dist.world;
        o.lcfg.rank = g_dist.rank;
    } else if (o.lcfg.world > 1) {
        cli_usage_error(a, "--world %u needs %u processes: run `mpirun -np %u seedpipe train ...` "
                        "(this one was not started by mpirun or srun%s)",
                        o.lcfg.world, o.lcfg.world, o.lcfg.world,
                        cli_dist_have_mpi() ? "" : "; and this seedpipe was built without MPI");
    }
    sp_train_config_default(&o.tcfg);
    if (sp_device_parse(cli_str(a, "device", "cpu"), &o.tcfg.device, &err))
        cli_usage_error(a, "%s", err.msg);
    o.tcfg.threads = (int)cli_u64(a, "train-threads", (uint64_t)o.lcfg.threads);
    if (o.tcfg.threads < 1 || o.tcfg.threads > 64) cli_usage_error(a, "--train-threads must be in 1..64");
    o.tcfg.lr = parse_float(a, "lr", o.tcfg.lr);
    o.tcfg.momentum = parse_float(a, "momentum", o.tcfg.momentum);
    o.tcfg.weight_decay = parse_float(a, "weight-decay", o.tcfg.weight_decay);
    const char *mode = cli_str(a, "mode", "strict");
    if (cli_has(a, "fast")) mode = "fast";
    if (cli_has(a, "strict")) mode = "strict";
    if (!strcmp(mode, "strict")) o.tcfg.strict = 1, o.tcfg.fast = 0;
    else if (!strcmp(mode, "fast")) o.tcfg.strict = 0, o.tcfg.fast = 1;
    else if (!strcmp(mode, "default")) o.tcfg.strict = 0, o.tcfg.fast = 0;
    else cli_usage_error(a, "--mode must be strict, fast or default");
    o.tcfg.cuda_device = (int)cli_u64(a, "cuda-device", 0);
    uint64_t ep = cli_u64(a, "epochs", 1);
    if (ep == 0 || ep > 1000000) cli_usage_error(a, "--epochs must be in 1..1000000");
    o.epochs = (uint32_t)ep;
    o.eval_dataset = cli_str(a, "eval", NULL);
    o.eval_pipeline = cli_str(a, "eval-pipeline", NULL);
    o.eval_subset = cli_str(a, "eval-subset", NULL);
    if (o.eval_subset && !o.lcfg.split)
        cli_usage_error(a, "--eval-subset NAME needs the training --split");
    o.cache_dir = cli_str(a, "cache", NULL);
    o.attach = cli_str(a, "attach", NULL);
    o.ckpt_dir = cli_str(a, "checkpoint-dir", NULL);
    o.ckpt_every = cli_u64(a, "checkpoint-every", o.ckpt_dir ? 100 : 0);
    o.resume = cli_str(a, "resume", NULL);
    o.stop_after = cli_u64(a, "stop-after", 0);
    /* --on-error, --rng-mode, --workers, --ring as the pool commands. */
    cli_pool_options(a, &o.lcfg, &o.workers, &o.ring);
    const char *out = cli_str(a, "out", NULL);
    const char *seeds = cli_str(a, "seeds", NULL);
    uint64_t compare = cli_u64(a, "compare-devices", 0);
    o.progress = isatty(2);
    cli_check_unused(a);
    if (!out) cli_usage_error(a, "--out RUN.json is required");
    if (o.attach && (o.workers > 0 || o.cache_dir))
        cli_usage_error(a, "--attach NAME reads the service's stream: no --workers or --cache");
    if (compare && g_dist.world > 1)
        cli_usage_error(a, "--compare-devices runs as one process, not under mpirun -np %u",
                        g_dist.world);
    if (compare) return compare_devices(a, &o, compare, out);
    if (o.ckpt_dir) ensure_dir(a, o.ckpt_dir);

    if (!seeds) {
        run_one(a, &o, o.lcfg.seed, out, o.ckpt_dir, NULL);
        if (g_dist.rank == 0) printf("run record: %s\n", out);
        cli_dist_finish(&g_dist);
        return 0;
    }
    if (o.resume) cli_usage_error(a, "--resume resumes one run; it cannot be combined with --seeds");
    uint64_t list[64];
    int n = 0;
    for (const char *p = seeds; *p;) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 0);
        if (errno || end == p || (*end && *end != ',') || n == 64 || *p == '-')
            cli_usage_error(a, "--seeds: expected up to 64 comma-separated integers (\"%s\")", seeds);
        list[n++] = v;
        p = *end ? end + 1 : end;
    }
    double loss[64] = {0}, acc[64] = {0}, eacc[64] = {0};
    int have_eval = 0;
    char base[4096];
    snprintf(base, sizeof base, "%s", out);
    size_t bl = strlen(base);
    if (bl > 5 && !strcmp(base + bl - 5, ".json")) base[bl - 5] = 0;
    FILE *sf = NULL;
    char *sum = NULL;
    size_t sumn = 0;
    sf = open_memstream(&sum, &sumn);
    if (!sf) return 1;
    fprintf(sf, "{\"seeds\":[");
    for (int i = 0; i < n; i++) fprintf(sf, "%s%llu", i ? "," : "", (unsigned long long)list[i]);
    fprintf(sf, "],\"runs\":[");
    for (int i = 0; i < n; i++) {
        char path[4200], dir[4200];
        snprintf(path, sizeof path, "%s-seed%llu.json", base, (unsigned long long)list[i]);
        const char *ck = NULL;
        if (o.ckpt_dir) {
            snprintf(dir, sizeof dir, "%s/seed-%llu", o.ckpt_dir, (unsigned long long)list[i]);
            ensure_dir(a, dir);
            ck = dir;
        }
        if (g_dist.rank == 0) printf("== seed %llu ==\n", (unsigned long long)list[i]);
        sp_run_epoch fin;
        run_one(a, &o, list[i], path, ck, &fin);
        loss[i] = fin.loss;
        acc[i] = fin.accuracy;
        eacc[i] = fin.eval_accuracy;
        have_eval = fin.eval_accuracy >= 0;
        fprintf(sf, "%s", i ? "," : "");
        json_str(sf, path);
    }
    if (g_dist.rank != 0) {   /* rank 0 writes the summary */
        fclose(sf);
        free(sum);
        cli_dist_finish(&g_dist);
        return 0;
    }
    double lm, ls, am, as, em = 0, es = 0;
    mean_std(loss, n, &lm, &ls);
    mean_std(acc, n, &am, &as);
    printf("over %d seeds: final loss %.4f +- %.4f, train acc %.2f%% +- %.2f", n, lm, ls,
           100 * am, 100 * as);
    fprintf(sf, "],\"final_loss\":{\"mean\":%.9g,\"std\":%.9g},\"final_accuracy\":{\"mean\":%.9g,"
                "\"std\":%.9g}",
            lm, ls, am, as);
    if (have_eval) {
        mean_std(eacc, n, &em, &es);
        printf(", eval acc %.2f%% +- %.2f", 100 * em, 100 * es);
        fprintf(sf, ",\"final_eval_accuracy\":{\"mean\":%.9g,\"std\":%.9g}", em, es);
    }
    printf(" (sample std)\n");
    fprintf(sf, "}\n");
    fclose(sf);
    FILE *f = fopen(out, "w");
    if (!f || fwrite(sum, 1, sumn, f) != sumn || fclose(f) != 0) {
        sp_error_set(&err, SP_EIO, "%s: cannot write: %s", out, strerror(errno));
        free(sum);
        train_fail(a, &err);
    }
    free(sum);
    printf("summary: %s\n", out);
    cli_dist_finish(&g_dist);
    return 0;
}
