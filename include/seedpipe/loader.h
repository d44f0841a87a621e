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
 * A token corpus (dataset.h SP_DATASET_TOKENS, docs/tokens.md) takes a
 * token spec in cfg.pipeline ("tokens seq_len=2048 packing=docs"): its
 * samples are the epoch's windows of int32 or int64 tokens (cfg.dtype
 * SP_DTYPE_INT32, the default for a corpus, or SP_DTYPE_INT64), one
 * window a sample, 1 x 1 x width integers (sp_loader_info_get()), and
 * everything below holds for windows as for images (docs/determinism.md
 * section 12).
 *
 * Determinism contract (DESIGN.md section 1): the bytes of a batch are a
 * pure function of (dataset fingerprint, canonical pipeline, seed, epoch,
 * batch index, dtype, layout, batch size, drop_last, order (with a block
 * order's K), pad_tail, rank, world).
 *
 * Order and rank layout (sampler.h): cfg.order picks the keyed shuffle
 * (default; each rank a contiguous slice of the global batch), the
 * shard-local block order (block:K, contiguous slices too) or the
 * canonical order (each rank a strided slice: rank r takes positions
 * b*B + r + world*j); cfg.pad_tail pads the epoch to ceil(N / world) *
 * world positions by wrapping around the epoch's own order, so every rank
 * gets the same number of samples in every batch (DistributedSampler). A
 * batch's indices are always the real dataset indices of its samples,
 * padding included.
 *
 * Failing samples (a corrupt file, a decoder error) follow cfg.on_error,
 * decided from the sample alone, never from timing:
 *   fail        the batch fails with the error of the failing sample of
 *               smallest position ("path: reason");
 *   skip        the sample is left out: the batch is shorter, its index is
 *               listed in sp_batch.skipped (manifest: "skipped");
 *   substitute  the sample at epoch position p is replaced by the first of
 *               the samples at positions p+1, p+2, ... (mod N) of the same
 *               epoch order that decodes, at most SP_SUBSTITUTE_TRIES
 *               tries (then the batch fails); the substitute keeps its own
 *               index, label and augmentation draws; sp_batch.substituted
 *               lists (failed, substitute) pairs (manifest: "substituted").
 * Every failure is logged once per sample index (sp_loader_failure_count(),
 * sp_loader_failure_get()), in
 * stream order, so the log is also the same for any thread/worker count.
 * The worker pool (pool.h) applies exactly the same rules.
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

#ifdef __cplusplus
extern "C" {
#endif

/* What to do with a sample that fails to read or decode (see above). */
typedef enum {
    SP_ON_ERROR_FAIL = 0,
    SP_ON_ERROR_SKIP = 1,
    SP_ON_ERROR_SUBSTITUTE = 2
} sp_on_error;
#define SP_SUBSTITUTE_TRIES 16

/* Where augmentation draws come from.
 *  SP_RNG_PER_SAMPLE  (default) philox((j, k, sample, epoch), K_augment):
 *                     worker-count invariant by construction.
 *  SP_RNG_PER_WORKER  a DEMONSTRATION of the classic PyTorch scheme: the
 *                     draws of a sample come from the generator of the
 *                     worker that computes it, key K_worker(w), counter =
 *                     the number of samples that worker has processed
 *                     before (sp_sample_ctx{K_worker(w), epoch, counter}).
 *                     The bytes then depend on scheduling; `seedpipe
 *                     verify --rng-mode per-worker` shows it. In-process,
 *                     the loader acts as worker 0 processing the batches in
 *                     the order they are asked for (a stateful counter). */
typedef enum { SP_RNG_PER_SAMPLE = 0, SP_RNG_PER_WORKER = 1 } sp_rng_mode;

/* The epoch order (docs/determinism.md sections 6, 6a and 7a).
 *  SP_ORDER_SHUFFLE     (default; "global", also spelt "shuffle") the keyed
 *                       Feistel permutation of each epoch over all samples
 *                       (sampler.h); ranks take contiguous slices.
 *  SP_ORDER_SEQUENTIAL  the canonical order of the loader's samples (the
 *                       identity on [0, N): the dataset's order, or the
 *                       subset's with a split), the same every epoch; ranks
 *                       take strided slices (rank r: positions b*B + r +
 *                       world*j), as DistributedSampler(shuffle=False)
 *                       with a DataLoader of batch_size B/world gives.
 *  SP_ORDER_BLOCK       ("block:K", cfg.block_shards = K >= 1) shard-local:
 *                       the shards permuted, then the samples of each block
 *                       of K consecutive shards permuted within the block
 *                       (sp_block_perm_at(); the stream reads K shards at a
 *                       time); ranks take contiguous slices, as with the
 *                       global order, so worker count, world size and
 *                       resume change nothing. Only a dataset of WebDataset
 *                       shards (local or remote) has shards: any other kind
 *                       is refused at create (SP_EINVAL naming the kind). A
 *                       split's subset keeps each shard's members of the
 *                       subset as that shard. */
typedef enum {
    SP_ORDER_SHUFFLE = 0,
    SP_ORDER_SEQUENTIAL = 1,
    SP_ORDER_BLOCK = 2       /* ABI 4 */
} sp_order;

/*! sp_on_error_parse() / sp_rng_mode_parse() : "fail" | "skip" |
 *  "substitute", "per-sample" | "per-worker". @return 0 or SP_EINVAL. */
SP_API int sp_on_error_parse(const char *s, sp_on_error *out, sp_error *err);
SP_API int sp_rng_mode_parse(const char *s, sp_rng_mode *out, sp_error *err);
SP_API const char *sp_on_error_name(sp_on_error p);
/*! sp_order_spec_parse() : an order as the tool and the bindings take it:
 *  "global" or "shuffle", "sequential", or "block:K" with K decimal digits
 *  in 1..4294967295 (no sign, space or leading zero); the one parser of an
 *  order (ABI 7: sp_order_parse() is gone). *block_shards gets K
 *  (0 for the other orders). @return 0 or SP_EINVAL with a message naming
 *  the value and what is wrong ("order \"block:0\": K, the shards a
 *  block, must be at least 1"). */
SP_API int sp_order_spec_parse(const char *s, sp_order *order, uint32_t *block_shards,
                               sp_error *err);
/*! sp_order_spec_format() : "shuffle", "sequential" or "block:K" into buf
 *  (NUL-terminated, truncated to n; "?" for a value outside sp_order): the
 *  one name of an order (ABI 7: sp_order_name() is gone). @return the
 *  length needed. */
SP_API int sp_order_spec_format(sp_order order, uint32_t block_shards, char *buf, size_t n);

typedef struct sp_loader_config {
    const char *dataset;     /* dataset path (dataset.h); with `samples`: the
                                folder relative paths are under, or NULL */
    const char *pipeline;    /* spec, preset name or "@file" (pipeline.h) */
    uint64_t seed;
    uint32_t batch_size;     /* global batch size B */
    int drop_last;
    uint32_t rank, world;    /* world >= 1; B % world == 0 */
    sp_dtype dtype;
    sp_layout layout;
    int threads;             /* <= 1: the calling thread only */
    int skip_normalize;      /* uint8 preview of a normalizing pipeline */
    sp_on_error on_error;    /* default SP_ON_ERROR_FAIL */
    sp_rng_mode rng_mode;    /* default SP_RNG_PER_SAMPLE */
    /* Deterministic split (see "Splits" below). NULL/NULL: the whole
     * dataset. Both or neither must be set. */
    const char *split;       /* "train=0.9,val=0.1" */
    const char *subset;      /* "train" */
    uint64_t split_seed;     /* key of the path hash; default 0, independent of seed */
    /* Added in ABI 2. */
    sp_order order;          /* default SP_ORDER_SHUFFLE */
    int pad_tail;            /* pad the epoch to a multiple of world (sampler.h) */
    const sp_sample_list *samples;   /* NULL: open `dataset`; else this list
                                        (dataset.h; copied at create: it need
                                        not outlive the call) */
    /* Added in ABI 4. */
    uint32_t block_shards;   /* SP_ORDER_BLOCK: K, the shards a block (>= 1); else ignored */
    /* Added in ABI 6. */
    const char *annotations; /* a COCO-style instances JSON for the dataset's images, or
                                NULL; the pipeline must end with a targets op
                                (targets.h, docs/targets.md) */
    /* Also ABI 6: the sampler (see "Samplers" below; docs/determinism.md
     * section 13). All zero: every sample once an epoch, in cfg.order. */
    const uint64_t *indices; /* NULL, or the loader's samples are these dataset indices, in
                                this order (SubsetRandomSampler; with the sequential order a
                                list of indices); copied at create */
    uint64_t nindices;
    uint64_t num_samples;    /* positions an epoch; 0: the loader's samples (times repeat) */
    int replacement;         /* 1: each position drawn with replacement (uniform, or by weights) */
    const double *weights;   /* NULL, or one weight per loader sample (WeightedRandomSampler;
                                without replacement: each sample at most once an epoch);
                                copied at create */
    uint64_t nweights;
    uint32_t repeat;         /* 0 or 1: none; r >= 2: each sample r times in a row (RASampler) */
} sp_loader_config;

/* Samplers (docs/determinism.md section 13; torch's samplers the drop-in maps
 * to them, docs/python.md). Position p of an epoch of M positions (M =
 * num_samples, or the loader's n samples times repeat) holds:
 *  replacement, no weights  sample uniform_int(philox((p lo, p hi, e, 0),
 *                           K_sampler)[0], n) (RandomSampler(replacement=True),
 *                           the Python backend's definition);
 *  replacement, weights     the inverse-CDF draw of section 13 under
 *                           K_weighted, exact integer arithmetic;
 *  weights only             the same draws without replacement: each drawn
 *                           sample's weight removed, M <= the samples of
 *                           weight above 0;
 *  neither, M > n           round q = p / n of the order (round 0 the epoch's
 *                           order, round q >= 1 a permutation under a key
 *                           derived from K_shuffle), M < n its first M;
 *  repeat r                 copy p % r of the order's position p / r; the
 *                           copies of a sample are consecutive positions, and
 *                           ranks take strided slices so that they land on
 *                           different ranks (RASampler).
 * The augmentation address of a drawn position is p (two draws of a sample
 * are augmented independently, as a mixture's slots are); copy c >= 1 of
 * dataset sample i (repeat, or round c) is addressed c * D + i (D the
 * dataset's size; c * D + i < 2^32, else SP_ELIMIT). Every field is part of
 * the fingerprint (the quantized weights and the indices by their hash), so
 * a state resumes only under the same sampler. Refused (SP_EINVAL, by name):
 * more draws without replacement than samples of weight above 0, a sampler
 * with a mixture, a token corpus or the block order, indices with a split, a
 * repeated index, an index past the dataset, a negative, NaN or infinite
 * weight, weights that are all 0, repeat with weights or replacement. */

/* Splits (train/val subsets by path hash): see split.h. */

/*! sp_loader_config_default() : seed 0, B 32, world 1, uint8, NCHW,
 *  1 thread, pipeline "shapes-train", shuffled, no padding, no sample list.
 *  dataset (or samples) must be set. */
SP_API void sp_loader_config_default(sp_loader_config *cfg);

typedef struct sp_loader sp_loader;

/*! sp_loader_create() : open the dataset (cfg->samples: the list, through
 *  sp_dataset_open_list(); else cfg->dataset), parse the pipeline, check
 *  the geometry. @return 0 or the failing module's code with its message
 *  (e.g. SP_ESPEC: "pipeline op 2 ..."; SP_EINVAL: "normalize needs
 *  --dtype float32"; a sample list's missing file: SP_EIO naming it; a
 *  SEEDPIPE_* environment value outside its set: SP_EINVAL naming the
 *  variable, sp_env_check() in env.h). */
SP_API int sp_loader_create(const sp_loader_config *cfg, sp_loader **out, sp_error *err);
SP_API void sp_loader_destroy(sp_loader *ld);   /* accepts NULL */

/* What a loader is, read in one call (sp_loader_info_get()); every pointer
 * is owned by the loader and valid while it lives. ABI 7 (it replaces the
 * one-value getters sp__loader_size(), _padded_size(), _batches_per_epoch(),
 * _sample_dims(), _sample_bytes(), _fingerprint(), _pipeline_hash(),
 * _spec(), _dataset(), _pipeline() and _config_of()). New fields are only
 * ever added at the end: struct_size says how much of it the caller knows. */
typedef struct sp_loader_info {
    size_t struct_size;             /* in: sizeof(sp_loader_info) as the caller was built */
    const sp_loader_config *config; /* the loader's copy of the config: the defaults filled
                                       (world >= 1, a corpus's dtype), its strings the
                                       loader's; it may be given to sp_loader_create() again */
    const sp_dataset *dataset;
    const sp_pipeline *pipeline;    /* the parsed pipeline; NULL for a token corpus (dataset.h
                                       SP_DATASET_TOKENS), which takes a token spec instead */
    const char *spec;               /* the canonical form of what cfg.pipeline said: the
                                       pipeline's (sp__pipeline_canonical()) or a token corpus's
                                       spec ("tokens seq_len=2048 packing=docs eod=none pad=0",
                                       docs/tokens.md); part of the fingerprint */
    uint64_t size;                  /* the positions of an epoch before padding: the samples
                                       the loader draws from (the subset's size with a split
                                       or an index list, else the dataset's), or with a
                                       sampler ("Samplers" above) its num_samples, or repeat
                                       times the samples */
    uint64_t padded_size;           /* N', the positions of an epoch: size, or with pad_tail
                                       ceil(N / world) * world */
    uint64_t batches_per_epoch;
    int c, h, w;                    /* channels, height, width of one sample */
    size_t sample_bytes;            /* c * h * w * sizeof(dtype); with targets
                                       (cfg.annotations), that rounded up to a multiple of 8
                                       plus the target fields (targets.h: the sample record) */
    sp_digest fingerprint;          /* see below */
    sp_digest pipeline_hash;        /* XXH3-128 of spec (stored in loader states to name a
                                       pipeline mismatch) */
} sp_loader_info;

/*! sp_loader_info_get() : fill *info. The caller sets info->struct_size
 *  (sizeof(sp_loader_info)) first; the fields past it are not written, so
 *  a program built against this header keeps working with a library whose
 *  struct has grown. Thread-safe.
 *
 *  The fingerprint is XXH3-128 of everything but the seed that decides the
 *  global batches: dataset fingerprint, canonical pipeline, dtype, layout,
 *  skip_normalize, batch size, drop_last. Rank and world are left out on
 *  purpose: the global stream does not depend on them, so a loader state
 *  can be resumed with another world size. A non-default on_error,
 *  rng_mode or order is hashed too (the default leaves the v1 value
 *  unchanged; a block order with its K), and so are a split's canonical
 *  spec, split seed and subset, and pad_tail when set, with the padded
 *  size N' (a state resumes with another world size exactly when N' is
 *  the same).
 *  @return 0, or SP_EINVAL (ld or info NULL, or struct_size smaller than
 *  the first version of the struct; then nothing is written). */
SP_API int sp_loader_info_get(const sp_loader *ld, sp_loader_info *info);

/* One logged failure: the sample, its error code and "path: reason". */
typedef struct sp_failure {
    uint64_t sample;
    int code;
    char msg[SP_ERROR_MSG_MAX];
} sp_failure;

/*! sp_loader_failure_count() / sp_loader_failure_get() : the failure log,
 *  one entry per failing sample index, in the order the stream met them.
 *  sp_loader_failure_get() copies entry i into *out under the log's lock,
 *  so it is safe while other threads' batches are logging failures (the
 *  log grows; no pointer into it is ever handed out). Thread-safe.
 *  @return 0, or SP_ERANGE for i >= the count. */
SP_API size_t sp_loader_failure_count(const sp_loader *ld);
SP_API int sp_loader_failure_get(const sp_loader *ld, size_t i, sp_failure *out);

/* A batch for one rank's slice: capacity = B / world samples. Either owned
 * (sp_batch_alloc: the caller frees it with sp_batch_free) or a view that
 * borrows the memory of a pool, a service or a client (flags has
 * SP_BATCH_VIEW; it is valid until given back, and sp_batch_free() on it
 * only clears the struct, never frees what it points to). */
#define SP_BATCH_VIEW 1u
typedef struct sp_batch {
    uint32_t capacity;
    uint32_t count;       /* samples in this batch (last one may be short) */
    uint32_t epoch;
    uint64_t index;       /* batch index within the epoch */
    uint8_t *images;      /* count * sample_bytes, NCHW or NHWC */
    int32_t *labels;      /* count */
    uint64_t *indices;    /* count global sample indices */
    uint32_t nskipped;        /* on_error skip: samples left out */
    uint64_t *skipped;        /* nskipped sample indices, by position */
    uint32_t nsubstituted;    /* on_error substitute: replaced samples */
    uint64_t *substituted;    /* nsubstituted (failed, substitute) pairs */
    uint32_t flags;           /* SP_BATCH_VIEW: borrowed memory (0: owned) */
} sp_batch;

/*! sp_batch_alloc() : buffers sized for ld. @return 0 or SP_ENOMEM. */
SP_API int sp_batch_alloc(const sp_loader *ld, sp_batch *b);
/*! sp_batch_free() : free an owned batch's buffers; a view (SP_BATCH_VIEW)
 *  is only cleared. Accepts NULL. */
SP_API void sp_batch_free(sp_batch *b);

/*! sp_loader_batch() : compute batch `index` of `epoch` into out.
 *  @return 0, SP_ERANGE (index >= batches per epoch), or (on_error fail, or
 *  no substitute found) the first (by position) failing sample's error,
 *  naming its file. */
SP_API int sp_loader_batch(sp_loader *ld, uint32_t epoch, uint64_t index, sp_batch *out,
                           sp_error *err);

/*! sp_batch_digest() : XXH3-128 of (count, sample dims, dtype, indices,
 *  labels, image bytes), all integers little-endian. */
SP_API sp_digest sp_batch_digest(const sp_loader *ld, const sp_batch *b);

/*! sp_loader_explain() : what the pipeline draws for dataset sample `index`
 *  in `epoch` (sp__pipeline_explain(): the crop box, flips, jitter factors
 *  and order), from the sample's own header. For a mixture (dataset.h)
 *  `index` is a slot of the epoch's schedule, in [0, its length): what
 *  that draw reads (sp_dataset_mix_draw()) and how it is augmented (a
 *  mixture's augmentation is addressed by the slot). Per-sample mode only (in the
 *  per-worker mode the draws depend on scheduling). The text goes to buf
 *  (NUL-terminated; truncated if n is too small).
 *  @return 0, SP_ERANGE (index), SP_EINVAL (per-worker mode), or the
 *  sample's read / probe error. */
SP_API int sp_loader_explain(const sp_loader *ld, uint32_t epoch, uint64_t index, char *buf,
                             size_t n, sp_error *err);

#ifdef __cplusplus
}
#endif
#endif
