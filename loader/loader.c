/* loader.c - the in-process loader (include/seedpipe/loader.h).
 *
 * HOW IT WORKS
 * A batch is a list of positions in the epoch order (sampler.h). Each
 * position p maps to a sample index i = perm(p); sample i is read, decoded
 * and augmented into the batch buffer at offset (p - first) * sample_bytes.
 * Threads (when cfg.threads > 1) claim positions from an atomic counter, so
 * the work is balanced dynamically, but each position's bytes depend only on
 * (i, epoch, seed, pipeline), never on the thread that computed it. Errors
 * are collected per position and the one with the smallest position is
 * reported: the outcome, message included, is the same for any thread count.
 */
#include "seedpipe/loader.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

struct sp_loader {
    sp_loader_config cfg;
    char *dataset_path;
    char *pipeline_spec;
    sp_dataset *ds;
    sp_pipeline *pl;
    sp_batching bt;
    sp_key k_shuffle, k_augment;
    int c, h, w;
    size_t sample_bytes;
    sp_digest fingerprint;
};

void sp_loader_config_default(sp_loader_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->pipeline = "shapes-train";
    cfg->batch_size = 32;
    cfg->world = 1;
    cfg->dtype = SP_DTYPE_UINT8;
    cfg->layout = SP_LAYOUT_NCHW;
    cfg->threads = 1;
}

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void hash_u64(XXH3_state_t *st, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    XXH3_128bits_update(st, b, 8);
}

static void hash_str(XXH3_state_t *st, const char *s) {
    size_t n = strlen(s);
    hash_u64(st, n);
    XXH3_128bits_update(st, s, n);
}

static sp_digest compute_fingerprint(const sp_loader *ld) {
    XXH3_state_t *st = XXH3_createState();
    sp_digest d = {0, 0};
    if (!st) return d;
    XXH3_128bits_reset(st);
    hash_str(st, "seedpipe-loader-v1");
    sp_digest dfp = sp_dataset_fingerprint(ld->ds);
    hash_u64(st, dfp.hi);
    hash_u64(st, dfp.lo);
    hash_str(st, sp_pipeline_canonical(ld->pl));
    hash_u64(st, (uint64_t)ld->cfg.dtype);
    hash_u64(st, (uint64_t)ld->cfg.layout);
    hash_u64(st, (uint64_t)ld->cfg.skip_normalize);
    hash_u64(st, ld->bt.batch_size);
    hash_u64(st, (uint64_t)ld->bt.drop_last);
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    d.hi = h.high64;
    d.lo = h.low64;
    return d;
}

int sp_loader_create(const sp_loader_config *cfg, sp_loader **out, sp_error *err) {
    *out = NULL;
    if (!cfg || !cfg->dataset || !cfg->pipeline)
        return sp_error_set(err, SP_EINVAL, "loader: dataset and pipeline must be set");
    if (cfg->dtype != SP_DTYPE_UINT8 && cfg->dtype != SP_DTYPE_FLOAT32)
        return sp_error_set(err, SP_EINVAL, "loader: bad dtype %d", (int)cfg->dtype);
    if (cfg->layout != SP_LAYOUT_NCHW && cfg->layout != SP_LAYOUT_NHWC)
        return sp_error_set(err, SP_EINVAL, "loader: bad layout %d", (int)cfg->layout);
    sp_loader *ld = calloc(1, sizeof *ld);
    if (!ld) return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    ld->cfg = *cfg;
    ld->dataset_path = dupstr(cfg->dataset);
    ld->pipeline_spec = dupstr(cfg->pipeline);
    if (!ld->dataset_path || !ld->pipeline_spec) {
        sp_loader_destroy(ld);
        return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    }
    ld->cfg.dataset = ld->dataset_path;
    ld->cfg.pipeline = ld->pipeline_spec;
    if (ld->cfg.world == 0) ld->cfg.world = 1;

    int rc = sp_dataset_open(ld->dataset_path, NULL, &ld->ds, err);
    if (rc == 0) rc = sp_pipeline_parse(ld->pipeline_spec, &ld->pl, err);
    if (rc == 0 && sp_pipeline_has_normalize(ld->pl) && cfg->dtype != SP_DTYPE_FLOAT32 &&
        !cfg->skip_normalize)
        rc = sp_error_set(err, SP_EINVAL,
                          "pipeline normalizes: it needs --dtype float32 (uint8 output "
                          "would lose the normalization)");
    if (rc == 0) {
        int rw = 0, rh = 0;
        if (sp_dataset_raw_dims(ld->ds, &rw, &rh) != 0) rw = rh = 0;
        rc = sp_pipeline_output_dims(ld->pl, rw, rh, &ld->h, &ld->w, &ld->c, err);
    }
    if (rc == 0) {
        ld->bt.n = sp_dataset_size(ld->ds);
        ld->bt.batch_size = cfg->batch_size;
        ld->bt.drop_last = cfg->drop_last;
        ld->bt.rank = cfg->rank;
        ld->bt.world = ld->cfg.world;
        rc = sp_batching_check(&ld->bt, err);
    }
    if (rc == 0 && ld->bt.n > (1ull << 32))
        rc = sp_error_set(err, SP_ELIMIT, "%s: %llu samples: at most 2^32 are supported "
                          "(the sample index is a 32-bit Philox counter word)",
                          ld->dataset_path, (unsigned long long)ld->bt.n);
    if (rc == 0 && sp_batches_per_epoch(&ld->bt) == 0)
        rc = sp_error_set(err, SP_EINVAL,
                          "%s: %llu samples make no batch of %u with drop_last",
                          ld->dataset_path, (unsigned long long)ld->bt.n, cfg->batch_size);
    if (rc != 0) {
        sp_loader_destroy(ld);
        return rc;
    }
    ld->sample_bytes = (size_t)ld->c * (size_t)ld->h * (size_t)ld->w * sp_dtype_size(cfg->dtype);
    ld->k_shuffle = sp_stream_key(cfg->seed, SP_STREAM_SHUFFLE);
    ld->k_augment = sp_stream_key(cfg->seed, SP_STREAM_AUGMENT);
    ld->fingerprint = compute_fingerprint(ld);
    *out = ld;
    return SP_OK;
}

void sp_loader_destroy(sp_loader *ld) {
    if (!ld) return;
    sp_pipeline_destroy(ld->pl);
    sp_dataset_destroy(ld->ds);
    free(ld->dataset_path);
    free(ld->pipeline_spec);
    free(ld);
}

const sp_dataset *sp_loader_dataset(const sp_loader *ld) { return ld->ds; }
const sp_pipeline *sp_loader_pipeline(const sp_loader *ld) { return ld->pl; }
const sp_loader_config *sp_loader_config_of(const sp_loader *ld) { return &ld->cfg; }
uint64_t sp_loader_batches_per_epoch(const sp_loader *ld) { return sp_batches_per_epoch(&ld->bt); }
size_t sp_loader_sample_bytes(const sp_loader *ld) { return ld->sample_bytes; }
sp_digest sp_loader_fingerprint(const sp_loader *ld) { return ld->fingerprint; }

void sp_loader_sample_dims(const sp_loader *ld, int *c, int *h, int *w) {
    if (c) *c = ld->c;
    if (h) *h = ld->h;
    if (w) *w = ld->w;
}

int sp_batch_alloc(const sp_loader *ld, sp_batch *b) {
    memset(b, 0, sizeof *b);
    uint32_t cap = ld->bt.batch_size / ld->bt.world;
    b->capacity = cap;
    b->images = malloc((size_t)cap * ld->sample_bytes);
    b->labels = malloc((size_t)cap * sizeof *b->labels);
    b->indices = malloc((size_t)cap * sizeof *b->indices);
    if (!b->images || !b->labels || !b->indices) {
        sp_batch_free(b);
        return SP_ENOMEM;
    }
    return SP_OK;
}

void sp_batch_free(sp_batch *b) {
    if (!b) return;
    free(b->images);
    free(b->labels);
    free(b->indices);
    memset(b, 0, sizeof *b);
}

/* One batch's shared work state. */
typedef struct batch_job {
    sp_loader *ld;
    sp_batch *out;
    uint32_t epoch;
    atomic_uint next;      /* next slot to claim */
    int *codes;            /* per-slot result */
    sp_error *errs;        /* per-slot message, only on failure */
} batch_job;

static int run_sample(sp_loader *ld, uint32_t epoch, uint64_t idx, void *dst, sp_error *err) {
    sp_sample_data sd;
    int rc = sp_dataset_read(ld->ds, idx, &sd, err);
    if (rc != 0) return rc;
    sp_sample_ctx ctx = {ld->k_augment, epoch, (uint32_t)idx};
    sp_run_opts opts = {ld->cfg.dtype, ld->cfg.layout, ld->cfg.skip_normalize, NULL};
    rc = sp_pipeline_run(ld->pl, &ctx, &sd.src, &opts, dst, err);
    sp_sample_data_free(&sd);
    return rc;
}

static void *batch_worker(void *arg) {
    batch_job *job = arg;
    for (;;) {
        unsigned s = atomic_fetch_add(&job->next, 1u);
        if (s >= job->out->count) break;
        uint8_t *dst = job->out->images + (size_t)s * job->ld->sample_bytes;
        job->codes[s] = run_sample(job->ld, job->epoch, job->out->indices[s], dst, &job->errs[s]);
    }
    return NULL;
}

int sp_loader_batch(sp_loader *ld, uint32_t epoch, uint64_t index, sp_batch *out,
                    sp_error *err) {
    uint64_t nb = sp_batches_per_epoch(&ld->bt);
    if (index >= nb)
        return sp_error_set(err, SP_ERANGE, "batch %llu out of range: epoch has %llu batches",
                            (unsigned long long)index, (unsigned long long)nb);
    uint64_t pos;
    uint32_t count;
    sp_batch_slice(&ld->bt, index, &pos, &count);
    if (count > out->capacity)
        return sp_error_set(err, SP_EINVAL, "batch buffer holds %u samples, slice needs %u",
                            out->capacity, count);
    sp_perm perm;
    sp_perm_init(&perm, ld->bt.n, ld->k_shuffle, epoch);
    out->count = count;
    out->epoch = epoch;
    out->index = index;
    for (uint32_t s = 0; s < count; s++) {
        out->indices[s] = sp_perm_at(&perm, pos + s);
        out->labels[s] = sp_dataset_label(ld->ds, out->indices[s]);
    }
    if (count == 0) return SP_OK;

    batch_job job;
    job.ld = ld;
    job.out = out;
    job.epoch = epoch;
    atomic_init(&job.next, 0u);
    job.codes = calloc(count, sizeof *job.codes);
    job.errs = calloc(count, sizeof *job.errs);
    if (!job.codes || !job.errs) {
        free(job.codes);
        free(job.errs);
        return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    }
    int nthreads = ld->cfg.threads > 1 ? ld->cfg.threads : 1;
    if ((uint32_t)nthreads > count) nthreads = (int)count;
    pthread_t tids[64];
    if (nthreads > 64) nthreads = 64;
    int started = 0;
    for (int t = 1; t < nthreads; t++) {
        if (pthread_create(&tids[started], NULL, batch_worker, &job) != 0) break;
        started++;
    }
    batch_worker(&job);   /* the calling thread works too */
    for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);

    int rc = SP_OK;
    for (uint32_t s = 0; s < count; s++)
        if (job.codes[s] != 0) {
            rc = job.codes[s];
            if (err) *err = job.errs[s];
            break;
        }
    free(job.codes);
    free(job.errs);
    return rc;
}

sp_digest sp_batch_digest(const sp_loader *ld, const sp_batch *b) {
    XXH3_state_t *st = XXH3_createState();
    sp_digest d = {0, 0};
    if (!st) return d;
    XXH3_128bits_reset(st);
    hash_u64(st, b->count);
    hash_u64(st, (uint64_t)ld->c);
    hash_u64(st, (uint64_t)ld->h);
    hash_u64(st, (uint64_t)ld->w);
    hash_u64(st, (uint64_t)ld->cfg.dtype);
    for (uint32_t s = 0; s < b->count; s++) hash_u64(st, b->indices[s]);
    for (uint32_t s = 0; s < b->count; s++) hash_u64(st, (uint64_t)(uint32_t)b->labels[s]);
    XXH3_128bits_update(st, b->images, (size_t)b->count * ld->sample_bytes);
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    d.hi = h.high64;
    d.lo = h.low64;
    return d;
}
