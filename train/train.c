/* train.c - the trainer: backend selection, step/eval, digest, checkpoints.
 *
 * A trainer owns the model layout, the hyperparameters, the step counter
 * and one backend (nn_backend.h): the CPU reference always, CUDA when the
 * library was built with SEEDPIPE_HAVE_CUDA (loaded at run time, on the
 * first CUDA trainer: train/cuda_plugin.h). The initial parameters are
 * computed here, on the host, by sp__model_init, and handed to the backend,
 * so every backend starts from the same bits; momentum starts at 0.
 * Checkpoints (format in seedpipe/train.h) carry weights, momentum, the
 * step count, the hyperparameters and an opaque caller blob (the CLI's
 * loader state), are checksummed with XXH3-128 and written atomically
 * (temporary file, fsync, rename). Loading refuses a checkpoint made for
 * another seed, shape or set of hyperparameters, listing every difference.
 */
#include "seedpipe/train.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "train/cuda_plugin.h"
#include "common/le_internal.h"
#include "train/nn_backend.h"
#include "train/model_internal.h"
#include "train/train_internal.h"

struct sp_trainer {
    sp_train_config cfg;
    sp_model_layout l;
    const sp__nn_backend *be;
    void *ctx;
    uint64_t steps;
    float *xbuf;            /* uint8 batch converted to float */
    size_t xcap;
    int have_comm;          /* data-parallel (sp_trainer_set_comm) */
    sp_train_comm comm;
    uint32_t last_samples;
};

void sp_train_config_default(sp_train_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->lr = 0.02f;
    cfg->momentum = 0.9f;
    cfg->weight_decay = 5e-4f;
    cfg->device = SP_DEVICE_CPU;
    cfg->threads = 1;
    cfg->strict = 1;
    cfg->conv_fwd_algo = cfg->conv_bwd_data_algo = cfg->conv_bwd_filter_algo = SP_ALGO_DEFAULT;
}

int sp_device_parse(const char *s, sp_device *out, sp_error *err) {
    if (s && !strcmp(s, "cpu")) *out = SP_DEVICE_CPU;
    else if (s && !strcmp(s, "cuda")) *out = SP_DEVICE_CUDA;
    else return sp_error_set(err, SP_EINVAL, "device must be cpu or cuda (got \"%s\")", s ? s : "");
    return 0;
}

const char *sp_device_name(sp_device d) { return d == SP_DEVICE_CUDA ? "cuda" : "cpu"; }

int sp_trainer_create(const sp_train_config *cfg, sp_trainer **out, sp_error *err) {
    *out = NULL;
    sp_model_layout l;
    int rc = sp_model_layout_of(&cfg->shape, &l, err);
    if (rc) return rc;
    if (!(cfg->lr > 0.0f && cfg->lr < 1e3f) || !(cfg->momentum >= 0.0f && cfg->momentum < 1.0f) ||
        !(cfg->weight_decay >= 0.0f && cfg->weight_decay < 1.0f))
        return sp_error_set(err, SP_EINVAL,
                            "train: need 0 < lr < 1000, 0 <= momentum < 1, 0 <= weight decay < 1 "
                            "(got lr %g, momentum %g, weight decay %g)",
                            (double)cfg->lr, (double)cfg->momentum, (double)cfg->weight_decay);
    if (cfg->threads > 64) return sp_error_set(err, SP_EINVAL, "train: threads must be <= 64");
    const sp__nn_backend *be = &sp__nn_cpu_backend;
    if (cfg->device == SP_DEVICE_CUDA) {
        const sp__cuda_plugin *cuda = sp__cuda_plugin_load(err);   /* dlopen, once */
        if (!cuda) return SP_EUNSUPP;
        be = cuda->nn;
    }
    sp_trainer *tr = (sp_trainer *)calloc(1, sizeof *tr);
    float *p = (float *)malloc(l.nparams * sizeof(float));
    float *m = (float *)calloc(l.nparams, sizeof(float));
    if (!tr || !p || !m) {
        free(tr);
        free(p);
        free(m);
        return sp_error_set(err, SP_ENOMEM, "train: out of memory");
    }
    tr->cfg = *cfg;
    tr->l = l;
    tr->be = be;
    sp__model_init(&l, cfg->seed, p);
    rc = be->create(&l, cfg, p, m, &tr->ctx, err);
    free(p);
    free(m);
    if (rc) {
        free(tr);
        return rc;
    }
    *out = tr;
    return 0;
}

void sp_trainer_destroy(sp_trainer *tr) {
    if (!tr) return;
    tr->be->destroy(tr->ctx);
    free(tr->xbuf);
    free(tr);
}

const sp_train_config *sp_trainer_config_of(const sp_trainer *tr) { return &tr->cfg; }
const sp_model_layout *sp_trainer_layout(const sp_trainer *tr) { return &tr->l; }
uint64_t sp_trainer_steps(const sp_trainer *tr) { return tr->steps; }

static int check_labels(const sp_trainer *tr, const int32_t *labels, uint32_t n, sp_error *err) {
    if (n == 0) return sp_error_set(err, SP_EINVAL, "train: empty batch");
    for (uint32_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= tr->l.in.classes)
            return sp_error_set(err, SP_EINVAL,
                                "train: label %d of sample %u is outside 0..%d (the model has %d "
                                "classes)",
                                (int)labels[i], i, tr->l.in.classes - 1, tr->l.in.classes);
    return 0;
}

int sp_trainer_set_comm(sp_trainer *tr, const sp_train_comm *comm, sp_error *err) {
    if (!comm) {
        tr->have_comm = 0;
        return 0;
    }
    if (comm->world < 1 || comm->rank >= comm->world || comm->world > (1u << 20) || !comm->allgather)
        return sp_error_set(err, SP_EINVAL, "train: communicator with rank %u of world %u (need "
                            "rank < world, 1 <= world <= 2^20, an allgather)", comm->rank, comm->world);
    if (!tr->be->step_part)
        return sp_error_set(err, SP_EUNSUPP, "train: the %s backend does not train data-parallel "
                            "(use the cpu backend)", tr->be->name);
    tr->comm = *comm;
    tr->have_comm = 1;
    return 0;
}

uint32_t sp_trainer_last_samples(const sp_trainer *tr) { return tr->last_samples; }

/* A data-parallel step: trade the slice sizes, then let the backend trade
 * its partial sums (nn_backend.h, sp__nn_part). */
static int step_part(sp_trainer *tr, const float *x, const int32_t *labels, uint32_t n, float *l,
                     uint32_t *c, sp_error *err) {
    uint32_t W = tr->comm.world;
    uint32_t *counts = (uint32_t *)malloc(W * sizeof *counts);
    size_t *four = (size_t *)malloc(W * sizeof *four);
    int rc = 0;
    if (!counts || !four) {
        rc = sp_error_set(err, SP_ENOMEM, "train: out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < W; k++) four[k] = 4;
    rc = tr->comm.allgather(tr->comm.ctx, &n, 4, counts, four, err);
    if (rc) goto out;
    uint64_t total = 0, offset = 0;
    for (uint32_t k = 0; k < W; k++) {
        if (k == tr->comm.rank) offset = total;
        total += counts[k];
    }
    if (counts[tr->comm.rank] != n) {
        rc = sp_error_set(err, SP_EIO, "train: the exchange of slice sizes returned %u for this "
                          "rank, which has %u samples", counts[tr->comm.rank], n);
        goto out;
    }
    if (total == 0 || total > UINT32_MAX) {
        rc = sp_error_set(err, SP_EINVAL, "train: the global batch has %llu samples",
                          (unsigned long long)total);
        goto out;
    }
    sp__nn_part part = {&tr->comm, counts, (uint32_t)offset, (uint32_t)total};
    rc = tr->be->step_part(tr->ctx, x, labels, &part, l, c, err);
    if (rc == 0) tr->last_samples = (uint32_t)total;
out:
    free(counts);
    free(four);
    return rc;
}

int sp__trainer_step(sp_trainer *tr, const float *x, const int32_t *labels, uint32_t n,
                     float *loss, uint32_t *correct, sp_error *err) {
    int rc = tr->have_comm && n == 0 ? 0 : check_labels(tr, labels, n, err);
    if (rc) return rc;
    float l = 0.0f;
    uint32_t c = 0;
    if (tr->have_comm) {
        rc = step_part(tr, x, labels, n, &l, &c, err);
    } else {
        rc = tr->be->step(tr->ctx, x, labels, n, &l, &c, err);
        tr->last_samples = n;
    }
    if (rc) return rc;
    tr->steps++;
    if (loss) *loss = l;
    if (correct) *correct = c;
    return 0;
}

int sp__trainer_eval(sp_trainer *tr, const float *x, const int32_t *labels, uint32_t n,
                     float *loss, uint32_t *correct, sp_error *err) {
    int rc = check_labels(tr, labels, n, err);
    if (rc) return rc;
    uint32_t c = 0;
    float l = 0.0f;
    rc = tr->be->eval(tr->ctx, x, labels, n, &l, &c, err);
    if (rc) return rc;
    if (correct) *correct = c;
    if (loss) *loss = l;
    return 0;
}

/* The batch's images as float32 NCHW of the model's input shape (*x is
 * NULL on failure). */
static int batch_floats(sp_trainer *tr, const sp_loader *ld, const sp_batch *b, const float **x,
                        sp_error *err) {
    *x = NULL;
    sp_loader_info li = {.struct_size = sizeof li};
    sp_loader_info_get(ld, &li);
    const sp_loader_config *lc = li.config;
    int c = li.c, h = li.h, w = li.w;
    if (c != tr->l.in.c || h != tr->l.in.h || w != tr->l.in.w)
        return sp_error_set(err, SP_EINVAL,
                            "train: loader gives %dx%dx%d samples, the model expects %dx%dx%d "
                            "(channels x height x width)",
                            c, h, w, tr->l.in.c, tr->l.in.h, tr->l.in.w);
    if (lc->layout != SP_LAYOUT_NCHW)
        return sp_error_set(err, SP_EINVAL, "train: the model needs --layout nchw batches");
    if (lc->dtype == SP_DTYPE_FLOAT32) {
        *x = (const float *)(const void *)b->images;
        return 0;
    }
    size_t n = (size_t)b->count * (size_t)c * (size_t)h * (size_t)w;
    if (n > tr->xcap) {
        float *nb = (float *)realloc(tr->xbuf, n * sizeof *nb);
        if (!nb) return sp_error_set(err, SP_ENOMEM, "train: out of memory");
        tr->xbuf = nb;
        tr->xcap = n;
    }
    for (size_t i = 0; i < n; i++) tr->xbuf[i] = (float)b->images[i] / 255.0f;
    *x = tr->xbuf;
    return 0;
}

int sp_trainer_step_batch(sp_trainer *tr, const sp_loader *ld, const sp_batch *b, float *loss,
                          uint32_t *correct, sp_error *err) {
    const float *x;
    int rc = batch_floats(tr, ld, b, &x, err);
    return rc ? rc : sp__trainer_step(tr, x, b->labels, b->count, loss, correct, err);
}

int sp_trainer_eval_batch(sp_trainer *tr, const sp_loader *ld, const sp_batch *b,
                          float *loss, uint32_t *correct, sp_error *err) {
    const float *x;
    int rc = batch_floats(tr, ld, b, &x, err);
    return rc ? rc : sp__trainer_eval(tr, x, b->labels, b->count, loss, correct, err);
}

int sp_trainer_get_params(sp_trainer *tr, float *params, float *momentum, sp_error *err) {
    return tr->be->get(tr->ctx, params, momentum, err);
}

int sp_trainer_weights_digest(sp_trainer *tr, sp_digest *out, sp_error *err) {
    float *p = (float *)malloc(tr->l.nparams * sizeof(float));
    if (!p) return sp_error_set(err, SP_ENOMEM, "train: out of memory");
    int rc = tr->be->get(tr->ctx, p, NULL, err);
    if (rc == 0) {
        /* float32 bytes in memory order: little-endian on every supported host. */
        XXH128_hash_t h = XXH3_128bits(p, tr->l.nparams * sizeof(float));
        out->hi = h.high64;
        out->lo = h.low64;
    }
    free(p);
    return rc;
}

int sp_trainer_describe(sp_trainer *tr, char *buf, size_t size) {
    char inner[2048];
    tr->be->describe(tr->ctx, inner, sizeof inner);
    return snprintf(buf, size, "{%s}", inner);
}

/* ---- checkpoints ------------------------------------------------------------ */

#define CKPT_MAGIC "SPCKPT01"
#define CKPT_VERSION 1u
#define CKPT_HEADER 72u       /* bytes up to and including the blob length */
#define CKPT_BLOB_MAX (1u << 20)

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void put_floats(uint8_t *p, const float *v, size_t n) {
    for (size_t i = 0; i < n; i++) sp__le_put32(p + 4 * i, fbits(v[i]));
}
static void get_floats(const uint8_t *p, float *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = bitsf(sp__le_get32(p + 4 * i));
}

int sp_trainer_save(sp_trainer *tr, const char *path, const void *blob, size_t blob_len,
                    sp_error *err) {
    if (blob_len > CKPT_BLOB_MAX)
        return sp_error_set(err, SP_EINVAL, "%s: checkpoint blob of %zu bytes is too large", path,
                            blob_len);
    size_t P = tr->l.nparams;
    size_t total = CKPT_HEADER + blob_len + 8 * P + 16;
    uint8_t *buf = (uint8_t *)malloc(total);
    float *w = (float *)malloc(2 * P * sizeof(float));
    if (!buf || !w) {
        free(buf);
        free(w);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    }
    int rc = tr->be->get(tr->ctx, w, w + P, err);
    if (rc) {
        free(buf);
        free(w);
        return rc;
    }
    uint8_t *p = buf;
    memcpy(p, CKPT_MAGIC, 8);
    sp__le_put32(p + 8, CKPT_VERSION);
    sp__le_put32(p + 12, CKPT_HEADER);
    sp__le_put64(p + 16, tr->cfg.seed);
    sp__le_put32(p + 24, (uint32_t)tr->l.in.c);
    sp__le_put32(p + 28, (uint32_t)tr->l.in.h);
    sp__le_put32(p + 32, (uint32_t)tr->l.in.w);
    sp__le_put32(p + 36, (uint32_t)tr->l.in.classes);
    sp__le_put32(p + 40, fbits(tr->cfg.lr));
    sp__le_put32(p + 44, fbits(tr->cfg.momentum));
    sp__le_put32(p + 48, fbits(tr->cfg.weight_decay));
    sp__le_put64(p + 52, tr->steps);
    sp__le_put64(p + 60, (uint64_t)P);
    sp__le_put32(p + 68, (uint32_t)blob_len);
    p += CKPT_HEADER;
    if (blob_len) memcpy(p, blob, blob_len);
    p += blob_len;
    put_floats(p, w, 2 * P);
    p += 8 * P;
    XXH128_hash_t h = XXH3_128bits(buf, (size_t)(p - buf));
    sp__le_put64(p, h.high64);
    sp__le_put64(p + 8, h.low64);
    free(w);

    /* Published atomically and durably (an unpredictable temporary name
     * beside it, O_EXCL | O_NOFOLLOW, fsync, rename, directory fsync). */
    sp_error e;
    rc = sp_write_file_atomic(path, buf, total, 1, &e);
    free(buf);
    if (rc) return sp_error_set(err, SP_EIO, "cannot write checkpoint: %s", e.msg);
    return 0;
}

/* A checkpoint's frame (magic, version, sizes, checksum): 0 with its blob
 * length *bl and float count *fp, or SP_EFORMAT naming the path. */
static int ckpt_frame(const uint8_t *b, size_t n, const char *path, uint32_t *bl, uint64_t *fp,
                      sp_error *err) {
    if (n < CKPT_HEADER + 16 || memcmp(b, CKPT_MAGIC, 8) != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: not a seedpipe checkpoint (bad magic or truncated)",
                            path);
    if (sp__le_get32(b + 8) != CKPT_VERSION || sp__le_get32(b + 12) != CKPT_HEADER)
        return sp_error_set(err, SP_EFORMAT, "%s: checkpoint version %u is not supported (expected %u)",
                            path, sp__le_get32(b + 8), CKPT_VERSION);
    *bl = sp__le_get32(b + 68);
    *fp = sp__le_get64(b + 60);
    if (*bl > CKPT_BLOB_MAX || *fp > (uint64_t)(SIZE_MAX / 16) ||
        n != CKPT_HEADER + *bl + 8 * (size_t)*fp + 16)
        return sp_error_set(err, SP_EFORMAT, "%s: checkpoint is truncated or has trailing bytes", path);
    XXH128_hash_t h = XXH3_128bits(b, n - 16);
    if (sp__le_get64(b + n - 16) != h.high64 || sp__le_get64(b + n - 8) != h.low64)
        return sp_error_set(err, SP_EFORMAT, "%s: checkpoint checksum mismatch (corrupt file)", path);
    return 0;
}

/* Every difference between the checkpoint's run (seed, input, classes,
 * optimizer) and tr's, each as "; ..." into msg (cap bytes). @return the
 * length written (0: the same run). */
static size_t ckpt_differences(const sp_trainer *tr, const uint8_t *b, char *msg, size_t cap) {
    size_t m = 0;
    msg[0] = 0;
#define DIFF(...) do { if (m < cap) m += (size_t)snprintf(msg + m, cap - m, __VA_ARGS__); } while (0)
    if (sp__le_get64(b + 16) != tr->cfg.seed)
        DIFF("; seed %llu in the checkpoint, %llu here", (unsigned long long)sp__le_get64(b + 16),
             (unsigned long long)tr->cfg.seed);
    int fc = (int)sp__le_get32(b + 24), fh = (int)sp__le_get32(b + 28), fw = (int)sp__le_get32(b + 32),
        fk = (int)sp__le_get32(b + 36);
    if (fc != tr->l.in.c || fh != tr->l.in.h || fw != tr->l.in.w)
        DIFF("; input %dx%dx%d in the checkpoint, %dx%dx%d here", fc, fh, fw, tr->l.in.c,
             tr->l.in.h, tr->l.in.w);
    if (fk != tr->l.in.classes) DIFF("; %d classes in the checkpoint, %d here", fk, tr->l.in.classes);
    const char *hp[3] = {"lr", "momentum", "weight decay"};
    float mine[3] = {tr->cfg.lr, tr->cfg.momentum, tr->cfg.weight_decay};
    for (int i = 0; i < 3; i++)
        if (sp__le_get32(b + 40 + 4 * i) != fbits(mine[i]))
            DIFF("; %s %.9g in the checkpoint, %.9g here", hp[i], (double)bitsf(sp__le_get32(b + 40 + 4 * i)),
                 (double)mine[i]);
#undef DIFF
    return m;
}

int sp_trainer_load(sp_trainer *tr, const char *path, char **blob, size_t *blob_len,
                    sp_error *err) {
    size_t P = tr->l.nparams;
    size_t max = CKPT_HEADER + CKPT_BLOB_MAX + 8 * P + 16;
    uint8_t *b = NULL;
    size_t n = 0;
    int rc = sp_read_file(path, max, &b, &n, err);
    if (rc == SP_ELIMIT)
        return sp_error_set(err, SP_EFORMAT, "%s: not a checkpoint of this model (too large)", path);
    if (rc) return rc;
    uint32_t bl = 0;
    uint64_t fp = 0;
    rc = ckpt_frame(b, n, path, &bl, &fp, err);
    if (rc) goto out;
    rc = SP_EFORMAT;
    /* Refuse another model or optimizer, naming every difference. */
    char msg[SP_ERROR_MSG_MAX];
    size_t m = ckpt_differences(tr, b, msg, sizeof msg);
    if (m) {
        rc = sp_error_set(err, SP_EMISMATCH, "%s: checkpoint is for another run: %s", path, msg + 2);
        goto out;
    }
    if (fp != P) {
        sp_error_set(err, rc, "%s: %llu parameters in the checkpoint, %zu here", path,
                     (unsigned long long)fp, P);
        goto out;
    }
    float *w = (float *)malloc(2 * P * sizeof(float));
    char *bb = blob ? (char *)malloc((size_t)bl + 1) : NULL;
    if (!w || (blob && !bb)) {
        free(w);
        free(bb);
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    get_floats(b + CKPT_HEADER + bl, w, 2 * P);
    rc = tr->be->set(tr->ctx, w, w + P, err);
    free(w);
    if (rc) {
        free(bb);
        goto out;
    }
    tr->steps = sp__le_get64(b + 52);
    if (blob) {
        memcpy(bb, b + CKPT_HEADER, bl);
        bb[bl] = 0;
        *blob = bb;
    }
    if (blob_len) *blob_len = bl;
    rc = 0;
out:
    free(b);
    return rc;
}
