/* cli_train_run.c - one run of `seedpipe train` (cli_train.h): batches from a
 * stream into the training core, evaluation, checkpoints, the run record.
 *
 * The batch source is one batch stream (stream.h): the in-process loader,
 * (--workers W >= 1) the worker pool, or (--attach NAME) this rank's slice
 * of a service; every way gives the same bytes, so the same weights.
 *
 * Every --checkpoint-every N steps, DIR/step-<step>.ckpt holds weights,
 * momentum, step count, hyperparameters and a blob: the loader state of
 * the next batch (state.h JSON line) and the run's accumulators (the
 * epoch's running loss/accuracy, finished epochs, the step losses), so a
 * run resumed with --resume ends with the same weights AND the same run
 * record as an uninterrupted one.
 *
 * Data-parallel, every rank runs this with its own slice; rank 0 (the
 * lead) alone prints, evaluates, writes checkpoints and the run record.
 * The ranks check they hold the same dataset and stream (fingerprints)
 * before the first step and the same weights after the last. Any error on
 * any rank stops the whole job (cli_train_fail(), cli_dist.h).
 */
#include "cli_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "seedpipe/client.h"
#include "seedpipe/dataset.h"
#include "seedpipe/pipeline.h"
#include "seedpipe/trace.h"
#include "seedpipe/train.h"

typedef struct accum {           /* what a checkpoint must carry besides the model */
    double loss_sum;             /* this epoch: sum of loss * count */
    uint64_t correct, seen;
    uint32_t nepochs;
    sp_run_epoch *epochs;
    uint64_t nsteps, cap, first; /* step losses of steps first.. */
    float *step_loss;
} accum;

cli_dist cli_train_job = {0, 1, 0, 0.0, 0};   /* cli_train.h */

_Noreturn void cli_train_fail(const cli_args *a, const sp_error *err) {
    cli_dist_fail(&cli_train_job, a->cmd, err);
}

double cli_train_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static double bitsd(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

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
    uint64_t nb = cli_loader_info(ev).batches_per_epoch, correct = 0, seen = 0;
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

static void config_json(FILE *f, const cli_train_opts *o, const sp_loader *ld,
                        const sp_trainer *tr) {
    const sp_train_config *tc = sp_trainer_config_of(tr);
    const sp_model_layout *l = sp_trainer_layout(tr);
    const sp_loader_config *lc = cli_loader_info(ld).config;
    fputs("{\"dataset\":", f);
    cli_json_str(f, o->dataset);
    fputs(",\"pipeline\":", f);
    cli_json_str(f, cli_loader_info(ld).spec);
    fputs(",\"eval_dataset\":", f);
    if (o->eval_dataset) cli_json_str(f, o->eval_dataset);
    else fputs("null", f);
    fputs(",\"eval_subset\":", f);
    if (o->eval_subset) cli_json_str(f, o->eval_subset);
    else fputs("null", f);
    fputs(",\"cache\":", f);
    if (o->cache_dir) cli_json_str(f, o->cache_dir);
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
    if (o->resume) cli_json_str(f, o->resume);
    else fputs("null", f);
    if (lc->order != SP_ORDER_SHUFFLE) {   /* only when set: a default record is unchanged */
        char ord[32];
        sp_order_spec_format(lc->order, lc->block_shards, ord, sizeof ord);
        fprintf(f, ",\"order\":\"%s\"", ord);
    }
    fprintf(f, ",\"model\":{\"input\":[%d,%d,%d],\"classes\":%d,\"conv\":[16,32],\"params\":%zu}}",
            l->in.c, l->in.h, l->in.w, l->in.classes, l->nparams);
}

static void progress(const cli_train_opts *o, uint32_t e, uint64_t b, uint64_t nb, float loss) {
    if (!o->progress) return;
    int w = 30, done = (int)(nb ? (b * (uint64_t)w) / nb : 0);
    char bar[40];
    for (int i = 0; i < w; i++) bar[i] = i < done ? '#' : '.';
    bar[w] = 0;
    fprintf(stderr, "\r  epoch %u [%s] %llu/%llu loss %.4f ", e + 1, bar, (unsigned long long)b,
            (unsigned long long)nb, (double)loss);
    if (b == nb) fputs("\r\033[K", stderr);
}

/* The batch source of cli_train_run(): a stream of the in-process loader, the
 * pool, or (--attach) this rank's slice of its node's service, which must
 * serve this stream (fingerprint) to a job of this world size. */
static sp_stream *open_source(cli_args *a, const cli_train_opts *o,
                              const sp_loader_config *lcfg, const sp_loader *ld,
                              const sp_loader_state *resume) {
    sp_error err;
    sp_error_clear(&err);
    sp_stream *s = NULL;
    if (!o->attach) {
        if (cli_stream_open(lcfg, o->workers, o->ring, o->epochs, resume, o->cache_dir, &s, &err))
            cli_train_fail(a, &err);
        return s;
    }
    sp_client_opts co;
    memset(&co, 0, sizeof co);
    sp_digest fp = cli_loader_info(ld).fingerprint;
    co.expect_fingerprint = &fp;
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = SP_STREAM_SERVICE;
    sc.service_name = o->attach;
    sc.rank = lcfg->rank;
    sc.client_opts = &co;
    if (sp_stream_open(NULL, &sc, &s, &err)) cli_train_fail(a, &err);
    sp_stream_info in;
    sp_stream_info_get(s, &in);
    if (in.world != lcfg->world) {
        sp_error_set(&err, SP_EINVAL, "--attach %s: the service serves a world of %u ranks, "
                     "this job has %u (serve --world %u)", o->attach, in.world, lcfg->world,
                     lcfg->world);
        cli_train_fail(a, &err);
    }
    return s;
}

/* Batch bi of epoch e from the stream, which must be at it. */
static void next_batch(cli_args *a, const cli_train_opts *o, sp_stream *s, uint32_t e,
                       uint64_t bi, sp_batch *view) {
    sp_error err;
    sp_error_clear(&err);
    int rc = sp_stream_next(s, view, &err);
    if (rc == SP_END) {
        if (o->attach)
            sp_error_set(&err, SP_EIO, "--attach %s: the service ended the stream early",
                         o->attach);
        else
            sp_error_set(&err, SP_EIO, "worker pool ended the stream early");
    }
    if (rc) cli_train_fail(a, &err);
    if (view->epoch == e && view->index == bi) return;
    if (o->attach)
        sp_error_set(&err, SP_EIO, "--attach %s: the service gave batch %u/%llu, expected "
                     "%u/%llu (serve --resume from the checkpoint's state)", o->attach,
                     view->epoch, (unsigned long long)view->index, e, (unsigned long long)bi);
    else
        sp_error_set(&err, SP_EIO, "worker pool gave batch %u/%llu, expected %u/%llu",
                     view->epoch, (unsigned long long)view->index, e, (unsigned long long)bi);
    cli_train_fail(a, &err);
}

/* What one training run carries between its steps. */
typedef struct run_ctx {
    cli_args *a;
    const cli_train_opts *o;
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
    const cli_train_opts *o = x->o;
    sp_error err;
    sp_error_clear(&err);
    sp_loader_config ecfg = *lcfg;
    ecfg.dataset = o->eval_dataset ? o->eval_dataset : lcfg->dataset;
    ecfg.subset = o->eval_subset;   /* no split without --eval-subset */
    if (!o->eval_subset) ecfg.split = NULL;
    ecfg.pipeline = o->eval_pipeline ? o->eval_pipeline : lcfg->pipeline;
    ecfg.drop_last = 0;
    ecfg.order = SP_ORDER_SHUFFLE;   /* the eval set, whatever its kind, in the default order */
    ecfg.block_shards = 0;
    ecfg.indices = NULL;             /* and every sample once: no sampler */
    ecfg.weights = NULL;
    ecfg.num_samples = 0;
    ecfg.replacement = 0;
    ecfg.repeat = 0;
    ecfg.rank = 0;
    ecfg.world = 1;
    if (sp_loader_create(&ecfg, &x->ev, &err)) cli_train_fail(x->a, &err);
    sp_loader_info ei = cli_loader_info(x->ev);
    int ec = ei.c, eh = ei.h, ew = ei.w, ek = cli_ds_info(ei.dataset).num_classes;
    if (ec != shape->c || eh != shape->h || ew != shape->w || ek != shape->classes) {
        sp_error_set(&err, SP_EINVAL,
                     "--eval: samples %dx%dx%d with %d classes, training has %dx%dx%d with %d",
                     ec, eh, ew, ek, shape->c, shape->h, shape->w, shape->classes);
        cli_train_fail(x->a, &err);
    }
    if (sp_batch_alloc(x->ev, &x->eb)) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        cli_train_fail(x->a, &err);
    }
}

/* --resume CKPT: weights and momentum into the trainer, the loader state
 * (checked against this stream) into *rst, the accumulators into x->ac. */
static void resume_from(run_ctx *x, sp_loader_state *rst) {
    const cli_train_opts *o = x->o;
    sp_error err;
    sp_error_clear(&err);
    char *blob = NULL;
    if (sp_trainer_load(x->tr, o->resume, &blob, NULL, &err)) cli_train_fail(x->a, &err);
    if (blob_parse(blob, rst, &x->ac, &err) || sp_loader_state_check(x->ld, rst, &err)) {
        free(blob);
        char m[SP_ERROR_MSG_MAX];
        memcpy(m, err.msg, sizeof m);
        sp_error_set(&err, err.code, "%s: %s", o->resume, m);
        cli_train_fail(x->a, &err);
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
        cli_train_fail(x->a, &err);
    if (push_epoch(ac, ep)) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        cli_train_fail(x->a, &err);
    }
    ac->loss_sum = 0;
    ac->correct = ac->seen = 0;
    double tn = cli_train_now();
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
    if (!blob || sp_trainer_save(x->tr, path, blob, blen, &err)) cli_train_fail(x->a, &err);
    free(blob);
}

/* One step on batch bi of epoch e. @return 1 when --stop-after stops the run. */
static int train_step(run_ctx *x, uint32_t e, uint64_t bi) {
    const cli_train_opts *o = x->o;
    sp_error err;
    sp_error_clear(&err);
    sp_batch view;
    double td = cli_train_now();
    next_batch(x->a, o, x->stream, e, bi, &view);
    float loss;
    uint32_t correct;
    double ts = cli_train_now();
    x->tdata += ts - td;
    uint64_t tt = sp_trace_clock();
    int rc = sp_trainer_step_batch(x->tr, x->ld, &view, &loss, &correct, &err);
    sp_trace_span(SP_TRACE_STEP, tt, e, bi);
    x->tstep += cli_train_now() - ts;
    x->nstep_timed++;
    sp_error rerr;
    if (sp_stream_release(x->stream, &view, &rerr) && !rc) {
        err = rerr;
        rc = err.code;
    }
    if (rc) cli_train_fail(x->a, &err);
    uint32_t count = sp_trainer_last_samples(x->tr);   /* the global batch's */
    x->ac.loss_sum += (double)loss * count;
    x->ac.correct += correct;
    x->ac.seen += count;
    if (push_loss(&x->ac, loss)) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        cli_train_fail(x->a, &err);
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
    if (x->nstep_timed && cli_train_job.world > 1)
        printf("rank %u/%u: step time %.2f ms (exchange %.2f ms, %.1f KB), data wait %.2f ms "
               "(means of %llu steps, %s, %s)\n",
               cli_train_job.rank, cli_train_job.world, 1e3 * x->tstep / n, 1e3 * cli_train_job.comm_seconds / n,
               (double)cli_train_job.comm_bytes / 1e3 / n, 1e3 * x->tdata / n,
               (unsigned long long)x->nstep_timed, sp_device_name(dev), source);
    else if (x->nstep_timed)
        printf("step time %.2f ms, data wait %.2f ms (means of %llu steps, %s, %s)\n",
               1e3 * x->tstep / n, 1e3 * x->tdata / n, (unsigned long long)x->nstep_timed,
               sp_device_name(dev), source);
    cli_train_job.comm_seconds = 0;
    cli_train_job.comm_bytes = 0;
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
        cli_train_fail(x->a, &err);
    }
    config_json(cf, x->o, x->ld, x->tr);
    fclose(cf);
    r.seed = seed;
    r.config_json = cfgj;
    r.dataset_fingerprint = cli_ds_info(cli_loader_info(x->ld).dataset).fingerprint;
    r.loader_fingerprint = cli_loader_info(x->ld).fingerprint;
    r.device_json = dev;
    r.nepochs = x->ac.nepochs;
    r.epochs = x->ac.epochs;
    r.nsteps = x->ac.nsteps;
    r.step_loss = x->ac.step_loss;
    r.step_loss_first = x->ac.first;
    r.seconds = secs;
    if (sp_trainer_weights_digest(x->tr, &r.final_weights, &err) ||
        cli_dist_same(&cli_train_job, r.final_weights, "final weights", &err))
        cli_train_fail(x->a, &err);
    char hex[33];
    sp_digest_hex(r.final_weights, hex);
    if (x->lead)
        printf("final weights digest %s (%llu steps%s)\n", hex,
               (unsigned long long)sp_trainer_steps(x->tr),
               cli_train_job.world > 1 ? ", the same on every rank" : "");
    if (x->lead && out_path && sp_run_record_write(out_path, &r, &err)) cli_train_fail(x->a, &err);
    free(cfgj);
}

/* One training run (cli_train.h). */
void cli_train_run(cli_args *a, const cli_train_opts *o, uint64_t seed, const char *out_path,
                   const char *ckdir, sp_run_epoch *final) {
    sp_error err;
    sp_error_clear(&err);
    run_ctx x;
    memset(&x, 0, sizeof x);
    x.a = a;
    x.o = o;
    x.ckdir = ckdir;
    sp_loader_config lcfg = o->lcfg;
    lcfg.seed = seed;
    if (sp_loader_create(&lcfg, &x.ld, &err)) cli_train_fail(a, &err);
    sp_loader_info li = cli_loader_info(x.ld);
    /* Every rank must read the same dataset and stream (DESIGN.md 9). */
    if (cli_dist_same(&cli_train_job, cli_ds_info(li.dataset).fingerprint,
                      "dataset fingerprint (every rank must see the same dataset: a shared "
                      "filesystem or identical copies)", &err) ||
        cli_dist_same(&cli_train_job, li.fingerprint,
                      "loader fingerprint (pipeline, seed, batch geometry, format)", &err))
        cli_train_fail(a, &err);
    x.lead = cli_train_job.rank == 0;
    sp_train_config tcfg = o->tcfg;
    tcfg.seed = seed;
    tcfg.shape = (sp_model_shape){li.c, li.h, li.w, cli_ds_info(li.dataset).num_classes};
    if (sp_trainer_create(&tcfg, &x.tr, &err)) cli_train_fail(a, &err);
    sp_train_comm comm = cli_dist_comm(&cli_train_job);
    if (cli_train_job.world > 1 && sp_trainer_set_comm(x.tr, &comm, &err)) cli_train_fail(a, &err);
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
    x.nb = li.batches_per_epoch;
    double t0 = cli_train_now();
    x.te = t0;
    int stopped = 0;
    for (uint32_t e = rst.epoch; e < o->epochs && !stopped; e++)
        for (uint64_t bi = e == rst.epoch ? rst.batch : 0; bi < x.nb && !stopped; bi++)
            stopped = train_step(&x, e, bi);
    double secs = cli_train_now() - t0;
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
