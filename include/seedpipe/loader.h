/* seedpipe/loader.h - the in-process loader: any batch, directly, by number.
 *
 * A loader binds a dataset, a pipeline, a seed, an output format and a batch
 * geometry. sp_loader_batch() computes batch b of epoch e for this rank:
 * the sample indices are positions [slice] of the epoch's Feistel order
 * (sampler.h); each sample is read, decoded and augmented with randomness
 * addressed by (epoch, sample index), and written straight to its place in
 * the batch buffer. With cfg.threads > 1 the samples of a batch are claimed
 * dynamically by threads (an atomic counter); who computes which sample
 * never changes a byte, and an error is reported for the failing sample
 * with the smallest position, so even the error message is deterministic.
 *
 * Determinism contract (DESIGN.md section 1): the bytes of a batch are a
 * pure function of (dataset fingerprint, canonical pipeline, seed, epoch,
 * batch index, dtype, layout, batch size, drop_last, rank, world).
 *
 * Thread safety: one sp_loader may be used by one thread at a time per
 * sp_batch; sp_loader_batch() calls on distinct sp_batch buffers may run
 * concurrently. Fork-safe: a child may keep using a loader created before
 * fork() (it holds no locks between calls).
 */
#ifndef SEEDPIPE_LOADER_H
#define SEEDPIPE_LOADER_H

#include "seedpipe/common.h"
#include "seedpipe/dataset.h"
#include "seedpipe/pipeline.h"
#include "seedpipe/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_loader_config {
    const char *dataset;     /* dataset path (dataset.h) */
    const char *pipeline;    /* spec, preset name or "@file" (pipeline.h) */
    uint64_t seed;
    uint32_t batch_size;     /* global batch size B */
    int drop_last;
    uint32_t rank, world;    /* world >= 1; B % world == 0 */
    sp_dtype dtype;
    sp_layout layout;
    int threads;             /* <= 1: the calling thread only */
    int skip_normalize;      /* uint8 preview of a normalizing pipeline */
} sp_loader_config;

/*! sp_loader_config_default() : seed 0, B 32, world 1, uint8, NCHW,
 *  1 thread, pipeline "shapes-train". dataset must be set. */
void sp_loader_config_default(sp_loader_config *cfg);

typedef struct sp_loader sp_loader;

/*! sp_loader_create() : open the dataset, parse the pipeline, check the
 *  geometry. @return 0 or the failing module's code with its message
 *  (e.g. SP_ESPEC: "pipeline op 2 ..."; SP_EINVAL: "normalize needs
 *  --dtype float32"). */
int sp_loader_create(const sp_loader_config *cfg, sp_loader **out, sp_error *err);
void sp_loader_destroy(sp_loader *ld);   /* accepts NULL */

const sp_dataset *sp_loader_dataset(const sp_loader *ld);
const sp_pipeline *sp_loader_pipeline(const sp_loader *ld);
const sp_loader_config *sp_loader_config_of(const sp_loader *ld);
uint64_t sp_loader_batches_per_epoch(const sp_loader *ld);
/*! sp_loader_sample_dims() : channels, height, width of one sample. */
void sp_loader_sample_dims(const sp_loader *ld, int *c, int *h, int *w);
/*! sp_loader_sample_bytes() : c * h * w * sizeof(dtype). */
size_t sp_loader_sample_bytes(const sp_loader *ld);
/*! sp_loader_fingerprint() : XXH3-128 of everything but the seed that
 *  decides the global batches: dataset fingerprint, canonical pipeline,
 *  dtype, layout, batch size, drop_last. Rank and world are left out on
 *  purpose: the global stream does not depend on them, so a loader state
 *  can be resumed with another world size. */
sp_digest sp_loader_fingerprint(const sp_loader *ld);

/* A batch buffer for one rank's slice: capacity = B / world samples. */
typedef struct sp_batch {
    uint32_t capacity;
    uint32_t count;       /* samples in this batch (last one may be short) */
    uint32_t epoch;
    uint64_t index;       /* batch index within the epoch */
    uint8_t *images;      /* count * sample_bytes, NCHW or NHWC */
    int32_t *labels;      /* count */
    uint64_t *indices;    /* count global sample indices */
} sp_batch;

/*! sp_batch_alloc() : buffers sized for ld. @return 0 or SP_ENOMEM. */
int sp_batch_alloc(const sp_loader *ld, sp_batch *b);
void sp_batch_free(sp_batch *b);   /* accepts NULL */

/*! sp_loader_batch() : compute batch `index` of `epoch` into out.
 *  @return 0, SP_ERANGE (index >= batches per epoch), or the first (by
 *  position) failing sample's error, naming its file. */
int sp_loader_batch(sp_loader *ld, uint32_t epoch, uint64_t index, sp_batch *out,
                    sp_error *err);

/*! sp_batch_digest() : XXH3-128 of (count, sample dims, dtype, indices,
 *  labels, image bytes), all integers little-endian. */
sp_digest sp_batch_digest(const sp_loader *ld, const sp_batch *b);

#ifdef __cplusplus
}
#endif
#endif
