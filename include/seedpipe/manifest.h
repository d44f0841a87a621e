/* seedpipe/manifest.h - digest manifests: one JSON line per batch.
 *
 * A manifest is JSON Lines. The first line describes the stream:
 *   {"seedpipe_manifest":1,"fingerprint":"<32 hex>","dataset_fingerprint":..,
 *    "dataset":"path","samples":N,"pipeline":"<canonical>","seed":S,
 *    "batch_size":B,"drop_last":false,"rank":0,"world":1,"dtype":"uint8",
 *    "layout":"nchw","sample_shape":[C,H,W],"epochs":E,"versions":{...}}
 * then one line per batch, in (epoch, batch) order:
 *   {"epoch":0,"batch":3,"count":32,"indices":[..],"labels":[..],
 *    "digest":"<32 hex>"}
 * where digest is sp_batch_digest(). A batch line gets "skipped":[i,..] and
 * "substituted":[[failed,substitute],..] when the on-error policy acted,
 * and the header gets "on_error" / "rng_mode" / "order" ("sequential",
 * "block:K") when they are not the defaults. Two runs of the same configuration on
 * any machine must produce identical batch lines; the header's versions may
 * differ. Writing goes to a caller's FILE *; nothing is printed elsewhere.
 */
#ifndef SEEDPIPE_MANIFEST_H
#define SEEDPIPE_MANIFEST_H

#include <stdio.h>

#include "seedpipe/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp_manifest_write_header() : @return 0 or SP_EIO. */
SP_API int sp_manifest_write_header(FILE *f, const sp_loader *ld, uint32_t epochs, sp_error *err);
/*! sp_manifest_write_batch() : one batch line. @return 0 or SP_EIO. */
SP_API int sp_manifest_write_batch(FILE *f, const sp_batch *b, sp_digest digest, sp_error *err);
/* ---- reading ---------------------------------------------------------------
 * sp_manifest_read() is strict and bounded (a manifest may come from another
 * machine): a line is at most 64 MiB, a batch at most 2^20 samples, every
 * batch line needs epoch, batch, count, indices, labels and digest with
 * count == the arrays' lengths; anything else is SP_EFORMAT "path:line:
 * reason". */
typedef struct sp_manifest_batch {
    uint32_t epoch;
    uint64_t batch;
    uint32_t count;
    uint64_t *indices;         /* count */
    int32_t *labels;           /* count */
    uint32_t nskipped;
    uint64_t *skipped;
    uint32_t nsubstituted;
    uint64_t *substituted;     /* pairs */
    sp_digest digest;
    uint64_t line;             /* 1-based line number in the file */
} sp_manifest_batch;

typedef struct sp_manifest {
    sp_digest fingerprint, dataset_fingerprint;
    char *dataset, *pipeline;
    uint64_t seed, samples;
    uint32_t batch_size, epochs, rank, world;
    int drop_last;
    char dtype[16], layout[16], on_error[16], rng_mode[16];
    size_t nbatches;
    sp_manifest_batch *batches;
    char order[32];            /* ABI 4: "shuffle" (absent), "sequential", "block:K" */
} sp_manifest;

/*! sp_manifest_read() : @return 0, SP_EIO, SP_EFORMAT, SP_ELIMIT, SP_ENOMEM. */
SP_API int sp_manifest_read(const char *path, sp_manifest **out, sp_error *err);
SP_API void sp_manifest_free(sp_manifest *m);   /* accepts NULL */

/* The first difference between two manifests. */
typedef struct sp_manifest_divergence {
    int equal;                 /* 1: headers' stream fields and all batch lines equal */
    char header[256];          /* "" or which stream fields differ */
    int batch_found;           /* a differing batch line (or a missing one) */
    size_t line;               /* its 0-based batch-line number */
    uint32_t epoch;
    uint64_t batch;
    int64_t position;          /* first differing position, -1 if unknown */
    uint64_t index_a, index_b; /* sample indices there (when position >= 0) */
    char what[256];            /* human-readable reason */
} sp_manifest_divergence;

/*! sp_manifest_compare() : fill *d (versions are not compared). */
SP_API void sp_manifest_compare(const sp_manifest *a, const sp_manifest *b, sp_manifest_divergence *d);

#ifdef __cplusplus
}
#endif
#endif
