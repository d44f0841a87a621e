/* loader_internal.h - the loader's per-sample step, shared with the worker
 * pool, and what the loader offers the layers above it.
 *
 * Not a public header. The in-process loader (loader.c) and the worker
 * processes of the pool (pool.c) compute one batch position with the same
 * function, sp__loader_sample(), and turn the positions' outcomes into a
 * batch with the same function, sp__batch_finalize(), so both paths apply
 * the on-error policy identically and give the same manifest. sp__item is
 * plain data (no pointers): the pool keeps an array of them in each
 * shared-memory slot.
 */
#ifndef SEEDPIPE_LOADER_INTERNAL_H
#define SEEDPIPE_LOADER_INTERNAL_H

#include "seedpipe/loader.h"
#include "seedpipe/sampler.h"
#include "seedpipe/split.h"

/* The outcome of one position. */
enum {
    SP__ITEM_OK = 0,           /* dst holds the sample at this position */
    SP__ITEM_SKIPPED = 1,      /* failed; left out of the batch (skip) */
    SP__ITEM_SUBSTITUTED = 2,  /* failed; dst holds a substitute */
    SP__ITEM_FAILED = 3        /* failed; the batch fails (fail, or no substitute) */
};

typedef struct sp__item {
    int32_t status;           /* SP__ITEM_* */
    int32_t code;             /* the failing sample's error code, 0 if OK */
    uint64_t failed;          /* the failing sample's index (status != OK) */
    char msg[SP_ERROR_MSG_MAX];   /* "path: reason" of that failure */
} sp__item;

/* Where the augmentation draws of a sample come from (sp_rng_mode). In
 * per-sample mode only epoch and the sample index matter; in per-worker
 * mode key = K_worker(w) and counter = samples that worker did before. */
typedef struct sp__rng {
    sp_rng_mode mode;
    sp_key key;
    uint32_t counter;
} sp__rng;

/* sp__rng for in-process use: per-sample mode, or worker 0 at `counter`. */
sp__rng sp__loader_rng(const sp_loader *ld, uint32_t counter);
/* The worker key K_worker(w) of the loader's seed. */
sp_key sp__loader_worker_key(const sp_loader *ld, uint32_t w);

/*! sp__loader_sample() : compute the sample in slot `pos` of epoch
 *  `epoch` (sp__loader_slice(); its epoch position is sp_batch_position()
 *  of it) into dst (sample_bytes), applying cfg.on_error.
 *  `forced` (may be NULL) makes the sample at `pos` fail with that reason
 *  without being run (the pool uses it for a sample that killed workers).
 *  Fills *it, *index and *label (the sample actually in dst).
 *  @return 0 unless it->status == SP__ITEM_FAILED (then it->code). */
int sp__loader_sample(const sp_loader *ld, uint32_t epoch, uint64_t pos, sp__rng rng,
                      const char *forced, void *dst, sp__item *it, uint64_t *index,
                      int32_t *label);

/*! sp__batch_finalize() : given b->count positions with their outcomes in
 *  items[] (b->images/indices/labels already written), log the failures
 *  in the loader (once per sample), then either fail with the first
 *  FAILED position's error, or fill b->skipped / b->substituted and
 *  compact skipped positions out of images/indices/labels (memmove within
 *  the buffers). @return 0 or the failing position's code (err filled). */
int sp__batch_finalize(sp_loader *ld, sp_batch *b, const sp__item *items, sp_error *err);

/*! sp__batch_digest() : the batch digest, from the sample geometry: what
 *  sp_batch_digest() (a loader) and sp__client_batch_digest() (a client of
 *  the service, which has no loader) both return. {0, 0} when out of
 *  memory. */
sp_digest sp__batch_digest(const sp_batch *b, int c, int h, int w, sp_dtype dtype,
                           size_t sample_bytes);
/*! sp__batch_digest_begin() : the batch digest of a batch of `count`
 *  samples with these indices and labels, up to its images: *st then takes
 *  the images (sp__hash_bytes, in any pieces, in order) and
 *  sp__hash_digest() gives what sp_batch_digest() gives for the batch
 *  (the pool hashes a batch sample by sample as they complete: pool.h,
 *  sp_pool_digest). */
struct sp__hash;
void sp__batch_digest_begin(const sp_loader *ld, struct sp__hash *st, uint32_t count,
                            const uint64_t *indices, const int32_t *labels);

/* The loader's one-value getters, for the layers above it (the cache, the
 * pool, the service, the stream): what sp_loader_info_get() (loader.h)
 * gives users in one struct, field by field (info.config, .dataset,
 * .pipeline, .spec, .size, .padded_size, .batches_per_epoch, .c/.h/.w,
 * .sample_bytes, .fingerprint, .pipeline_hash). Not exported (ABI 7). */
const sp_loader_config *sp__loader_config_of(const sp_loader *ld);
const sp_dataset *sp__loader_dataset(const sp_loader *ld);
const sp_pipeline *sp__loader_pipeline(const sp_loader *ld);   /* NULL: a token corpus */
const char *sp__loader_spec(const sp_loader *ld);
uint64_t sp__loader_size(const sp_loader *ld);
uint64_t sp__loader_padded_size(const sp_loader *ld);
uint64_t sp__loader_batches_per_epoch(const sp_loader *ld);
void sp__loader_sample_dims(const sp_loader *ld, int *c, int *h, int *w);
size_t sp__loader_sample_bytes(const sp_loader *ld);
sp_digest sp__loader_fingerprint(const sp_loader *ld);
sp_digest sp__loader_pipeline_hash(const sp_loader *ld);

/* The label of dataset sample idx in a batch: the dataset's, or 0 for a
 * token corpus's window. */
int32_t sp__loader_label(const sp_loader *ld, uint64_t idx);

/* Log a failure (deduplicated by sample index). Thread-safe. */
void sp__loader_log_failure(sp_loader *ld, uint64_t sample, int code, const char *msg);

/* The loader's batching geometry (sampler.h) and keys. */
const sp_batching *sp__loader_batching(const sp_loader *ld);

/*! sp__loader_set_span() : make every batch of ld the span of `span`
 *  consecutive ranks cfg.rank .. cfg.rank + span - 1 of cfg.world
 *  (sp__batch_span(): their slices concatenated in rank order), instead of
 *  the one rank cfg.rank; call it before the first batch or sp_batch_alloc.
 *  The service (one per node) computes its local ranks with it; a span is
 *  not part of the fingerprint, of a state or of a cache key (like rank and
 *  world), so its bytes must not be cached as cfg.rank's. Default 1.
 *  @return 0 or SP_EINVAL (span 0, or past the world). */
int sp__loader_set_span(sp_loader *ld, uint32_t span, sp_error *err);
/* Positions per batch buffer: B / world * span. */
uint32_t sp__loader_capacity(const sp_loader *ld);
/* The loader's slots of global batch b (its rank, or its span): [*pos,
 * *pos + *count), each mapped to its epoch position by sp_batch_position()
 * (sampler.h "Slots"; in the default layout a slot is its position).
 * sp__loader_sample() takes a slot. */
void sp__loader_slice(const sp_loader *ld, uint64_t b, uint64_t *pos, uint32_t *count);
/*! sp__loader_span_part() : where local rank k (0 .. nranks-1) of the
 *  nranks ranks a loader's batch b holds lies in its buffer: *count slots
 *  from *off. nranks is the loader's span (then k * B/world in the default
 *  layout while the batch is full; with pad_tail or the strided layout a
 *  short last batch is split evenly, so the offsets move), or, for a loader
 *  of one rank of world K/nranks standing for nranks ranks of world K (the
 *  default layout only), its batch cut into nranks contiguous slices. The
 *  service spreads the slices to k * capacity/nranks for its clients. */
void sp__loader_span_part(const sp_loader *ld, uint64_t b, uint32_t nranks, uint32_t k,
                          uint32_t *off, uint32_t *count);
/*! sp__spread_slices() : move each local rank k's slice of the span's
 *  batch b (at sp__loader_span_part()'s offset) to k * rank_cap, in place
 *  (images of sample_bytes each, labels, indices, items; last rank first,
 *  as a slice only moves up). A no-op for full batches and for the default
 *  layout. Call once per batch, before sp__batch_finalize(). */
void sp__spread_slices(const sp_loader *ld, uint64_t b, uint32_t nranks, uint32_t rank_cap,
                       uint8_t *images, size_t sample_bytes, int32_t *labels,
                       uint64_t *indices, sp__item *items);
/*! sp__loader_index_at() : the dataset index in slot `slot` of epoch
 *  `epoch` (the one sp__loader_sample() computes, before any substitute). */
uint64_t sp__loader_index_at(const sp_loader *ld, uint32_t epoch, uint64_t slot);

/* A blend (a mixture of token corpora) resumed with other weights
 * (state_blend.c, determinism.md section 12b): its mixture (NULL: ld is no
 * blend), its identity (the fingerprint less the weights and the switch),
 * and the fingerprint made again once the mixture's weights or switch
 * changed. */
sp_dataset *sp__loader_blend(sp_loader *ld);
sp_digest sp__loader_blend_identity(const sp_loader *ld);
void sp__loader_refingerprint(sp_loader *ld);

/*! sp__loader_prefetch_chunk() : 0 for a local dataset (nothing to
 *  prefetch: workers and threads claim one position at a time); for a
 *  remote one the positions a worker or thread claims at once and reads
 *  ahead (SEEDPIPE_PREFETCH, 1..256, default 16; 0 turns it off). */
uint32_t sp__loader_prefetch_chunk(const sp_loader *ld);
/*! sp__loader_prefetch() : start reading dataset samples idx[0..n) on the
 *  calling thread (dataset_remote.c); never changes a byte of a batch. */
void sp__loader_prefetch(const sp_loader *ld, const uint64_t *idx, size_t n);

/* ---- the block order (loader_order.c) ---------------------------------------------- */
typedef struct sp__order sp__order;
/*! sp__order_create() : the block:k order of a loader's n samples (sample
 *  j is dataset index map[j], or j without a map) of ds under `seed`;
 *  `what` names the dataset in messages. @return 0, or SP_EINVAL naming
 *  why ds has no shards (a mixture, a kind without shards) or k 0,
 *  SP_ENOMEM. */
int sp__order_create(const sp_dataset *ds, const uint64_t *map, uint64_t n, uint32_t k,
                     uint64_t seed, const char *what, sp__order **out, sp_error *err);
void sp__order_destroy(sp__order *o);   /* accepts NULL */
/*! sp__order_at() : the loader's sample j at position pos (< n) of epoch
 *  `epoch`; UINT64_MAX only when out of memory. Thread-safe. */
uint64_t sp__order_at(sp__order *o, uint32_t epoch, uint64_t pos);

/* ---- the samplers (samplers.c; loader.h "Samplers") -------------------------------- */
typedef struct sp__samp sp__samp;
struct sp__hash;
/*! sp__samp_create() : the sampler cfg asks for (*out NULL when none: every
 *  sample once, in cfg->order), checked against ds (`what` names it in
 *  messages); cfg's indices and weights then point at the sampler's copies.
 *  An index list makes *map / *nmap (malloc'd, the caller's to free).
 *  @return 0, or SP_EINVAL naming the field and the reason, SP_ELIMIT,
 *  SP_ENOMEM. */
int sp__samp_create(sp_loader_config *cfg, const sp_dataset *ds, const char *what,
                    uint64_t **map, uint64_t *nmap, sp__samp **out, sp_error *err);
void sp__samp_destroy(sp__samp *s);   /* accepts NULL */
uint64_t sp__samp_length(const sp__samp *s);   /* positions an epoch */
int sp__samp_strided(const sp__samp *s);       /* ranks take strided slices (repeat) */
/*! sp__samp_at() : the dataset index at epoch position pos (< the length) of
 *  perm->epoch, with map the loader's subset map (or NULL); *addr (may be
 *  NULL) its augmentation address. Pure; thread-safe. */
uint64_t sp__samp_at(const sp__samp *s, const sp_perm *perm, uint64_t pos, const uint64_t *map,
                     uint64_t *addr);
void sp__samp_hash(const sp__samp *s, struct sp__hash *st);   /* into the fingerprint */

/* ---- the weighted draws' arithmetic (samplers_wor.c) -------------------------------- */
/*! sp__draw_below() : an exactly uniform integer below S (>= 1) from the
 *  Philox blocks (pos lo, pos hi, epoch, j) under key (section 13). */
uint64_t sp__draw_below(sp_key key, uint32_t epoch, uint64_t pos, uint64_t S);
typedef struct sp__wor sp__wor;
/*! sp__wor_create() : weighted draws without replacement of m positions from
 *  the n samples of prefix sums cum[] (section 13). @return 0, SP_EINVAL
 *  when fewer than m samples have a weight above 0 (`what` names the
 *  dataset), SP_ENOMEM. */
int sp__wor_create(const uint64_t *cum, uint64_t n, uint64_t m, sp_key key, const char *what,
                   sp__wor **out, sp_error *err);
void sp__wor_destroy(sp__wor *w);   /* accepts NULL */
/*! sp__wor_at() : the loader sample at position pos (< m) of `epoch`;
 *  UINT64_MAX only when out of memory. Thread-safe. */
uint64_t sp__wor_at(sp__wor *w, uint32_t epoch, uint64_t pos);

/* ---- Internal to the library: once seedpipe/loader.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__loader_sample_index() : the dataset index of the loader's j-th
 *  sample (j below the samples it draws from; the identity without a split
 *  or an index list). */
uint64_t sp__loader_sample_index(const sp_loader *ld, uint64_t j);

const char *sp__rng_mode_name(sp_rng_mode m);

#ifdef __cplusplus
}
#endif

#endif
