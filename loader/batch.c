/* batch.c - a batch's buffers and its digest (include/seedpipe/loader.h:
 * sp_batch_alloc(), sp_batch_free(), sp_batch_digest(); the digest's
 * parts for the pool and the client, loader_internal.h). On the loader's
 * public accessors only: what a batch is does not depend on how the loader
 * computes one.
 */
#include "seedpipe/loader.h"
#include "common/hash_internal.h"
#include "common/trace_internal.h"
#include "loader/loader_internal.h"

#include <stdlib.h>
#include <string.h>

int sp_batch_alloc(const sp_loader *ld, sp_batch *b) {
    memset(b, 0, sizeof *b);
    uint32_t cap = sp__loader_capacity(ld);
    b->capacity = cap;
    /* 64-byte aligned (as the pool's slots): the float32 writer's stores
     * are then whole, aligned cache lines (augment/pipeline_write.c). */
    size_t bytes = (size_t)cap * sp__loader_sample_bytes(ld);
    b->images = aligned_alloc(64, (bytes + 64) & ~(size_t)63);
    b->labels = malloc((size_t)cap * sizeof *b->labels);
    b->indices = malloc((size_t)cap * sizeof *b->indices);
    b->skipped = malloc((size_t)cap * sizeof *b->skipped);
    b->substituted = malloc((size_t)cap * 2 * sizeof *b->substituted);
    if (!b->images || !b->labels || !b->indices || !b->skipped || !b->substituted) {
        sp_batch_free(b);
        return SP_ENOMEM;
    }
    return SP_OK;
}

void sp_batch_free(sp_batch *b) {
    if (!b) return;
    if (b->flags & SP_BATCH_VIEW) {   /* borrowed: the owner gives it back */
        memset(b, 0, sizeof *b);
        return;
    }
    free(b->images);
    free(b->labels);
    free(b->indices);
    free(b->skipped);
    free(b->substituted);
    memset(b, 0, sizeof *b);
}

/* The batch digest's bytes before the images (loader.h: sp_batch_digest). */
static void digest_head(sp__hash *st, uint32_t count, int c, int h, int w, sp_dtype dtype,
                        const uint64_t *indices, const int32_t *labels) {
    sp__hash_init(st);
    sp__hash_u64(st, count);
    sp__hash_u64(st, (uint64_t)c);
    sp__hash_u64(st, (uint64_t)h);
    sp__hash_u64(st, (uint64_t)w);
    sp__hash_u64(st, (uint64_t)dtype);
    for (uint32_t s = 0; s < count; s++) sp__hash_u64(st, indices[s]);
    for (uint32_t s = 0; s < count; s++) sp__hash_u64(st, (uint64_t)(uint32_t)labels[s]);
}

sp_digest sp__batch_digest(const sp_batch *b, int c, int h, int w, sp_dtype dtype,
                           size_t sample_bytes) {
    sp__hash hs, *st = &hs;
    digest_head(st, b->count, c, h, w, dtype, b->indices, b->labels);
    sp__hash_bytes(st, b->images, (size_t)b->count * sample_bytes);
    return sp__hash_digest(st);
}

void sp__batch_digest_begin(const sp_loader *ld, sp__hash *st, uint32_t count,
                            const uint64_t *indices, const int32_t *labels) {
    int c, h, w;
    sp__loader_sample_dims(ld, &c, &h, &w);
    digest_head(st, count, c, h, w, sp__loader_config_of(ld)->dtype, indices, labels);
}

sp_digest sp_batch_digest(const sp_loader *ld, const sp_batch *b) {
    uint64_t t0 = sp__trace_t0();
    int c, h, w;
    sp__loader_sample_dims(ld, &c, &h, &w);
    sp_digest d = sp__batch_digest(b, c, h, w, sp__loader_config_of(ld)->dtype,
                                   sp__loader_sample_bytes(ld));
    if (t0) sp__trace_record(SP_TRACE_DIGEST, t0, b->epoch, b->index, SP__TRACE_NONE32,
                             SP__TRACE_NONE64);
    return d;
}
