/* cli_batch.c - seedpipe digest and dump: batches out of the loader or the pool.
 *
 * `digest` writes a manifest (manifest.h) of every batch of epochs
 * S..S+E-1 (--epoch-start S, default 0; --epochs E; from --resume STATE
 * on; up to --stop-after N batches, then --save-state FILE), in-process or
 * on the worker pool (--workers W), and prints a stream digest
 * (sp_stream_digest_of() the batch digests in order), so two runs can be compared by one
 * line; the batches come from a batch stream (stream.h), whichever kind
 * (epoch 4294967295, past a stream's reach, from the loader directly:
 * digest_src). The manifest header's "epochs" is E. --batch-mix
 * mixup:alpha=A[,classes=K] (or cutmix:, or choice:OP,OP[,p=..]: a
 * RandomChoice; sp_batch_mix_parse()) mixes each batch as the torch
 * drop-in's MixUp/CutMix/RandomChoice do (batchmix.h, docs/determinism.md 11a) and
 * writes sp_batch_mix_digest() of it in place of the batch digest (the
 * stream digest folds those). `dump` renders one batch
 * as a contact-sheet PNG (uint8 preview, before normalization).
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seedpipe/batchmix.h"
#include "seedpipe/imageio.h"
#include "seedpipe/manifest.h"
#include "seedpipe/pool.h"
#include "seedpipe/state.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The manifest's FILE: stdout for "-", a special file (/dev/null) as it
 * is, else a FILE over an atomic publish of `out` (cli_util.c: a temporary
 * file beside it under an unpredictable name, renamed into place at the
 * end; *pub). Exits on failure (the stream closed first). */
static FILE *open_manifest(cli_args *a, const char *out, cli_publish **pub, sp_stream *stream) {
    sp_error err;
    sp_error_clear(&err);
    FILE *f = stdout;
    struct stat sbuf;
    *pub = NULL;
    int special = stat(out, &sbuf) == 0 && !S_ISREG(sbuf.st_mode) && !S_ISDIR(sbuf.st_mode);
    if (special) {
        f = fopen(out, "w");   /* /dev/null, a terminal: the user named it */
        if (!f) sp_error_set(&err, SP_EIO, "%s: cannot open", out);
    } else if (strcmp(out, "-") != 0) {
        int fd = -1;
        f = NULL;
        if (cli_publish_begin(out, pub, &err) == SP_OK &&
            ((fd = dup(cli_publish_fd(*pub))) < 0 || !(f = fdopen(fd, "w")))) {
            sp_error_set(&err, SP_EIO, "%s: cannot create: %s", out, strerror(errno));
            if (fd >= 0) close(fd);
            cli_publish_abort(*pub);
            *pub = NULL;
        }
    }
    if (!f) {
        sp_stream_close(stream);   /* accepts NULL */
        cli_fail(a, &err);
    }
    return f;
}

/* Where digest's batches come from: a batch stream (stream.h), or, for a
 * range that reaches epoch 4294967295, the in-process loader batch by
 * batch (a stream's `epochs` is a uint32 end, before which it stops, so
 * the last epoch cannot be streamed: there the pool and the cache are
 * refused, the bytes are the same). */
typedef struct digest_src {
    sp_stream *stream;     /* NULL: the direct loader */
    sp_loader *ld;         /* direct: owned; else sp_stream_loader() */
    sp_batch b;            /* direct: the batch buffer */
    uint64_t epoch, batch, end, nb;   /* direct: the next batch; end: one past the last epoch */
} digest_src;

static void src_open(cli_args *a, digest_src *s, const sp_loader_config *cfg, int workers,
                     int ring, uint32_t start, uint64_t count, const char *resume_path,
                     const char *cache_dir) {
    sp_error err;
    sp_error_clear(&err);
    memset(s, 0, sizeof *s);
    sp_loader_state resume;
    if (resume_path && sp_loader_state_load(resume_path, &resume, &err) != 0) cli_fail(a, &err);
    if (resume_path && resume.epoch < start)
        cli_usage_error(a, "--resume %s: the state is at epoch %u, before --epoch-start %u",
                        resume_path, resume.epoch, start);
    s->end = (uint64_t)start + count;
    if (s->end <= UINT32_MAX) {
        if (!resume_path && start > 0) cli_state_at(a, cfg, start, &resume);
        if (cli_stream_open(cfg, workers, ring, (uint32_t)s->end,
                            resume_path || start > 0 ? &resume : NULL, cache_dir, &s->stream,
                            &err) != 0)
            cli_fail(a, &err);
        s->ld = sp_stream_loader(s->stream);
        return;
    }
    if (workers || cache_dir)
        cli_usage_error(a, "epoch 4294967295 is computed in-process only: a pool's or cache's "
                        "stream ends before a 32-bit epoch (stream.h); drop --workers/--cache");
    if (sp_loader_create(cfg, &s->ld, &err) != 0) cli_fail(a, &err);
    if (resume_path && sp_loader_resume(s->ld, &resume, &err) != 0) cli_fail(a, &err);
    if (sp_batch_alloc(s->ld, &s->b) != 0) {
        sp_error_set(&err, SP_ENOMEM, "out of memory for a batch");
        cli_fail(a, &err);
    }
    s->nb = cli_loader_info(s->ld).batches_per_epoch;
    s->epoch = resume_path ? resume.epoch : start;
    s->batch = resume_path ? resume.batch : 0;
}

static int src_next(digest_src *s, sp_batch *view, sp_error *err) {
    if (s->stream) return sp_stream_next(s->stream, view, err);
    if (s->epoch >= s->end || s->nb == 0) return SP_END;
    int rc = sp_loader_batch(s->ld, (uint32_t)s->epoch, s->batch, &s->b, err);
    *view = s->b;
    if (++s->batch == s->nb) s->epoch++, s->batch = 0;
    return rc;
}

static void src_release(digest_src *s, sp_batch *view) {
    if (s->stream) sp_stream_release(s->stream, view, NULL);
}

/* The position after the last batch taken. @return 0, or SP_ERANGE after
 * the last batch of epoch 4294967295 (no next position to name). */
static int src_state(digest_src *s, sp_loader_state *st, sp_error *err) {
    if (s->stream) {
        sp_stream_state(s->stream, st);
        return 0;
    }
    if (s->epoch > UINT32_MAX)
        return sp_error_set(err, SP_ERANGE, "--save-state: the stream ended with epoch "
                            "4294967295, which has no next position to save");
    sp_loader_state_at(s->ld, (uint32_t)s->epoch, s->batch, st);
    return 0;
}

static void src_close(digest_src *s) {
    if (s->stream) {
        sp_stream_close(s->stream);
    } else {
        sp_batch_free(&s->b);
        sp_loader_destroy(s->ld);
    }
}

/* The batch digests taken so far (16 bytes a batch), for the stream
 * digest (sp_stream_digest_of()). */
typedef struct digest_list {
    sp_digest *v;
    size_t n, cap;
} digest_list;

static int digests_add(digest_list *l, sp_digest d, sp_error *err) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        sp_digest *v = realloc(l->v, cap * sizeof *v);
        if (!v) return sp_error_set(err, SP_ENOMEM, "out of memory for the batch digests");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = d;
    return 0;
}

/* The end of a manifest: close it (a regular file published into place);
 * on an earlier error (rc), drop the temporary file. @return rc, or the
 * close's error. */
static int close_manifest(FILE *f, const char *out, cli_publish *pub, int rc, sp_error *err) {
    if (f != stdout && fclose(f) != 0 && rc == 0)
        rc = sp_error_set(err, SP_EIO, "%s: write failed: %s", out, strerror(errno));
    if (pub && rc == 0) rc = cli_publish_commit(pub, 0, err);
    else cli_publish_abort(pub);
    return rc;
}

/* --batch-mix: the spec, its class count, and the buffers of one batch. */
typedef struct cli_mix {
    int op, k;   /* op: 1 when a mix is asked for */
    sp_batch_mix_spec spec;
    uint64_t seed;
    int c, h, w;
    float *x, *scratch, *targets;
    int64_t *lab;
} cli_mix;

/* The spec, before anything starts (a usage error exits). */
static void mix_parse(cli_args *a, const sp_loader_config *cfg, cli_mix *m) {
    memset(m, 0, sizeof *m);
    const char *spec = cli_str(a, "batch-mix", NULL);
    if (!spec) return;
    sp_error e;
    sp_error_clear(&e);
    if (sp_batch_mix_parse(spec, &m->spec, &e) != 0) cli_usage_error(a, "%s", e.msg);
    if (cfg->dtype != SP_DTYPE_FLOAT32 || cfg->layout != SP_LAYOUT_NCHW)
        cli_usage_error(a, "--batch-mix needs --dtype float32 and --layout nchw (the mix is "
                        "torch's float32 arithmetic on (B, C, H, W) batches)");
    m->op = 1;
    m->k = m->spec.classes;   /* 0: the dataset's classes (mix_open()) */
    m->seed = cfg->seed;
}

/* The batch buffers, once the loader is open. */
static int mix_open(const sp_loader_config *cfg, sp_loader *ld, cli_mix *m, sp_error *err) {
    if (!m->op) return 0;
    sp_loader_info li = cli_loader_info(ld);
    if (!m->k) m->k = cli_ds_info(li.dataset).num_classes;
    m->c = li.c, m->h = li.h, m->w = li.w;
    size_t cap = cfg->batch_size, plane = (size_t)m->c * m->h * m->w, k = (size_t)m->k;
    m->x = malloc(cap * plane * sizeof *m->x);
    m->scratch = malloc(plane * sizeof *m->x);   /* one image (sp_batch_mix_f32()) */
    m->targets = malloc(cap * (size_t)k * sizeof *m->targets);
    m->lab = malloc(cap * sizeof *m->lab);
    if (!m->x || !m->scratch || !m->targets || !m->lab)
        return sp_error_set(err, SP_ENOMEM, "--batch-mix: out of memory for a batch of %zu",
                            cap);
    return 0;
}

static void mix_close(cli_mix *m) {
    free(m->x);
    free(m->scratch);
    free(m->targets);
    free(m->lab);
}

/* The digest of batch view mixed: sp_batch_mix_digest(). */
static int mix_digest(cli_mix *m, const sp_batch *view, sp_digest *d, sp_error *err) {
    int n = (int)view->count;
    size_t bytes = (size_t)n * m->c * m->h * m->w * sizeof *m->x;
    sp_batch_mix mx;
    int rc = sp_batch_mix_spec_draw(&m->spec, m->seed, view->epoch, view->index, m->h, m->w,
                                    &mx, err);
    memcpy(m->x, view->images, bytes);
    for (int i = 0; i < n; i++) m->lab[i] = view->labels[i];
    if (rc == 0)
        rc = sp_batch_mix_f32(&mx, m->x, n, m->c, m->h, m->w, m->lab, m->k, m->targets,
                              m->scratch, err);
    if (rc == 0) *d = sp_batch_mix_digest(&mx, n, m->k, view->labels, m->x, bytes, m->targets);
    return rc;
}

/* The batch loop of `digest`: what it writes and counts. */
typedef struct digest_run {
    digest_src *src;
    sp_loader *ld;
    sp_pool *pool;            /* hashes each batch as it computes it, or NULL */
    cli_mix *mix;
    FILE *f;                  /* the manifest */
    digest_list digests;
    uint64_t done, images;
    double t0;
} digest_run;

/* Batches until the stream ends or stop_after are done: each one's digest
 * (the pool's or the loader's; with --batch-mix the mixed batch's) into
 * the list and the manifest, the progress on a terminal. */
static int digest_batches(digest_run *r, uint64_t stop_after, sp_error *err) {
    int tty = isatty(2), rc = 0;
    uint64_t nb = cli_loader_info(r->ld).batches_per_epoch;
    double last = r->t0;
    while (rc == 0 && r->done < stop_after) {
        sp_batch view;
        rc = src_next(r->src, &view, err);
        if (rc == SP_END) {
            rc = 0;
            break;
        }
        if (rc != 0) break;
        sp_digest d = r->pool ? sp_pool_digest(r->pool, &view) : sp_batch_digest(r->ld, &view);
        if (r->mix->op) rc = mix_digest(r->mix, &view, &d, err);
        if (rc == 0) rc = digests_add(&r->digests, d, err);
        if (rc == 0) rc = sp_manifest_write_batch(r->f, &view, d, err);
        r->done++;
        r->images += view.count;
        double t = now_s();
        if (tty && t - last > 0.5) {
            last = t;
            fprintf(stderr, "\r  epoch %u batch %llu/%llu  %.0f images/s   ", view.epoch,
                    (unsigned long long)view.index + 1, (unsigned long long)nb,
                    (double)r->images / (t - r->t0));
        }
        src_release(r->src, &view);
    }
    if (tty && r->done) fputc('\n', stderr);
    return rc;
}

/* --save-state: the stream's state after the last batch taken. */
static int save_state(digest_src *src, const char *path, FILE *info, sp_error *err) {
    sp_loader_state state;
    int rc = src_state(src, &state, err);
    if (rc == 0) rc = sp_loader_state_save(path, &state, err);
    if (rc == 0)
        fprintf(info, "state: epoch %u batch %llu saved to %s\n", state.epoch,
                (unsigned long long)state.batch, path);
    return rc;
}

int cmd_digest(cli_args *a) {
    if (a->npos != 1) cli_usage_error(a, "usage: seedpipe digest DATASET ... --out FILE.jsonl");
    cli_trace_start(a);
    sp_loader_config cfg;
    cli_loader_config(a, a->pos[0], &cfg, CLI_BATCHES | CLI_FORMAT);
    int workers, ring;
    cli_pool_options(a, &cfg, &workers, &ring);
    uint32_t start;
    uint64_t epochs;
    cli_epoch_range(a, (uint64_t)UINT32_MAX + 1, &start, &epochs);
    const char *out = cli_str(a, "out", NULL);
    if (!out) cli_usage_error(a, "--out FILE.jsonl is required ('-' for stdout)");
    const char *resume_path = cli_str(a, "resume", NULL);
    const char *cache_dir = cli_str(a, "cache", NULL);
    const char *save_path = cli_str(a, "save-state", NULL);
    uint64_t stop_after = cli_uint(a, "stop-after", UINT64_MAX, 0, UINT64_MAX);
    if (cli_has(a, "stop-after") && !save_path)
        cli_usage_error(a, "--stop-after needs --save-state FILE");
    cli_mix mix;
    mix_parse(a, &cfg, &mix);
    cli_check_unused(a);

    sp_error err;
    sp_error_clear(&err);
    digest_src src;
    src_open(a, &src, &cfg, workers, ring, start, epochs, resume_path, cache_dir);
    sp_loader *ld = src.ld;
    cli_publish *pub = NULL;
    /* A pool hashes every batch as it computes it, the first one too (pool.h). */
    sp_pool *pool = src.stream ? sp_stream_pool(src.stream) : NULL;
    if (pool) sp_pool_digest(pool, NULL);
    FILE *f = open_manifest(a, out, &pub, src.stream);
    FILE *info = f == stdout ? stderr : stdout;
    digest_run r = {&src, ld, pool, &mix, f, {NULL, 0, 0}, 0, 0, now_s()};
    int rc = mix_open(&cfg, ld, &mix, &err);
    if (rc == 0)
        rc = sp_manifest_write_header(f, ld, (uint32_t)(epochs > UINT32_MAX ? UINT32_MAX : epochs),
                                      &err);
    if (rc == 0) rc = digest_batches(&r, stop_after, &err);
    if (rc == 0 && save_path) rc = save_state(&src, save_path, info, &err);
    mix_close(&mix);
    rc = close_manifest(f, out, pub, rc, &err);
    cli_print_failures(ld, stderr);
    if (rc != 0) {
        src_close(&src);
        free(r.digests.v);
        cli_fail(a, &err);
    }
    sp_digest sd = sp_stream_digest_of(r.digests.v, r.digests.n);
    free(r.digests.v);
    char hex[33];
    sp_digest_hex(sd, hex);
    double dt = now_s() - r.t0;
    fprintf(info, "digest: %llu batches, %llu images in %.2f s (%.0f images/s), stream %s\n",
            (unsigned long long)r.done, (unsigned long long)r.images, dt,
            dt > 0 ? (double)r.images / dt : 0.0, hex);
    cli_print_cache_stats(src.stream ? sp_stream_cache(src.stream) : NULL, info);
    src_close(&src);
    return 0;
}

int cmd_dump(cli_args *a) {
    if (a->npos != 1) cli_usage_error(a, "usage: seedpipe dump DATASET ... --out grid.png");
    sp_loader_config cfg;
    cli_loader_config(a, a->pos[0], &cfg, CLI_BATCHES);
    cfg.dtype = SP_DTYPE_UINT8;
    cfg.layout = SP_LAYOUT_NHWC;
    cfg.skip_normalize = 1;
    uint64_t epoch = cli_uint(a, "epoch", 0, 0, UINT32_MAX);
    uint64_t index = cli_uint(a, "batch", 0, 0, UINT64_MAX);
    const char *out = cli_str(a, "out", NULL);
    if (!out) cli_usage_error(a, "--out grid.png is required");
    cli_check_unused(a);
    sp_error err;
    sp_error_clear(&err);
    sp_loader *ld;
    if (sp_loader_create(&cfg, &ld, &err) != 0) cli_fail(a, &err);
    sp_batch b;
    if (sp_batch_alloc(ld, &b) != 0) {
        sp_error_set(&err, SP_ENOMEM, "out of memory for a batch");
        cli_fail(a, &err);
    }
    if (sp_loader_batch(ld, (uint32_t)epoch, index, &b, &err) != 0) cli_fail(a, &err);
    sp_loader_info li = cli_loader_info(ld);
    int c = li.c, h = li.h, w = li.w, cols = 1;
    while ((uint32_t)(cols * cols) < b.count) cols++;
    size_t ib = (size_t)c * h * w, sb = li.sample_bytes;   /* sb > ib: targets */
    for (uint32_t i = 1; sb > ib && i < b.count; i++)   /* the images alone, packed */
        memmove(b.images + i * ib, b.images + i * sb, ib);
    sp_image sheet;
    if (sp_contact_sheet(b.images, (int)b.count, h, w, c, cols, &sheet, &err) != 0 ||
        sp_image_write(out, &sheet, SP_IMAGE_PNG, 0, &err) != 0)
        cli_fail(a, &err);
    printf("wrote batch %llu of epoch %llu (%u images, %dx%dx%d) to %s\n",
           (unsigned long long)index, (unsigned long long)epoch, b.count, c, h, w, out);
    sp_image_free(&sheet);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    return 0;
}

int cmd_explain(cli_args *a) {
    if (a->npos != 1)
        cli_usage_error(a, "usage: seedpipe explain DATASET --pipeline P --seed S --epoch E "
                           "--sample I");
    sp_loader_config cfg;
    cli_loader_config(a, a->pos[0], &cfg, 0);
    cfg.skip_normalize = 1;   /* any pipeline with the default dtype; nothing is computed */
    uint64_t epoch = cli_uint(a, "epoch", 0, 0, UINT32_MAX);
    uint64_t index = cli_uint(a, "sample", 0, 0, UINT64_MAX);
    if (!cli_has(a, "sample"))
        cli_usage_error(a, "--sample I (a dataset index; a mixture's slot) is required");
    cli_check_unused(a);
    sp_error err;
    sp_error_clear(&err);
    sp_loader *ld;
    if (sp_loader_create(&cfg, &ld, &err) != 0) cli_fail(a, &err);
    static char text[1 << 19];   /* with targets, a line per box */
    if (sp_loader_explain(ld, (uint32_t)epoch, index, text, sizeof text, &err) != 0) {
        sp_loader_destroy(ld);
        cli_fail(a, &err);
    }
    sp_loader_info li = cli_loader_info(ld);
    const sp_dataset *ds = li.dataset;
    sp_mix_draw d;
    if (cli_ds_info(ds).kind == SP_DATASET_TOKENS) {
        printf("%s, epoch %llu, seed %llu: %s", li.spec, (unsigned long long)epoch,
               (unsigned long long)cfg.seed, text);
    } else if (sp_dataset_mix_draw(ds, cfg.seed, (uint32_t)epoch, index, &d) == 0) {
        const sp_dataset *src = cli_mix_source(ds, d.source).dataset;
        printf("slot %llu draws source %u (%s) sample %llu (%s, label %d there, %d here), its "
               "draw %llu of the epoch, pass %u; mixture sample %llu, epoch %llu, seed %llu:\n%s",
               (unsigned long long)index, d.source, cli_ds_info(src).root,
               (unsigned long long)d.local, sp_dataset_path(src, d.local),
               sp_dataset_label(src, d.local), sp_dataset_label(ds, d.index),
               (unsigned long long)d.draw, d.pass, (unsigned long long)d.index,
               (unsigned long long)epoch, (unsigned long long)cfg.seed, text);
    } else {
        printf("sample %llu (%s, label %d), epoch %llu, seed %llu:\n%s",
               (unsigned long long)index, sp_dataset_path(ds, index),
               sp_dataset_label(ds, index), (unsigned long long)epoch,
               (unsigned long long)cfg.seed, text);
    }
    sp_loader_destroy(ld);
    return 0;
}
