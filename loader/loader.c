/* loader.c - the in-process loader (include/seedpipe/loader.h).
 *
 * HOW IT WORKS
 * A batch is a list of slots of the epoch (sampler.h): slot s is position
 * p = sp_batch_position(s) (itself in the default layout; strided for the
 * sequential order; padding wrapped). Each position p maps to a sample
 * index i = perm(p) (the identity for the sequential order, the block
 * order's sp_block_perm_at() through loader_order.c's epoch tables, then
 * through a split's or an index list's subset map; with a sampler,
 * samplers.c's sp__samp_at(): draws, rounds, copies, each with its own
 * augmentation address); sample i is read, decoded
 * and augmented into the batch buffer at offset (s - first) * sample_bytes.
 * A mixture's epoch is its L slots instead (dataset.h SP_DATASET_MIX):
 * position p is slot q = perm(p) (or p, sequential), and slot q draws the
 * mixture sample i = sp_dataset_mix_draw(q).index; its augmentation is
 * addressed by q, not i, so two draws of one image in an epoch are
 * augmented independently (docs/determinism.md section 10).
 * Threads (when cfg.threads > 1) claim positions from an atomic counter, so
 * the work is balanced dynamically, but each position's bytes depend only on
 * (i, epoch, seed, pipeline), never on the thread that computed it. Errors
 * are collected per position and the one with the smallest position is
 * reported: the outcome, message included, is the same for any thread count.
 *
 * A token corpus (dataset.h SP_DATASET_TOKENS) takes a token spec in place
 * of the pipeline: its samples are the epoch's windows (tokens.c,
 * tokens_docs.c; docs/determinism.md section 12), window i computed where
 * sample i would be read and augmented, and everything else (order,
 * slices, threads, the pool, on-error) is the same. A blend (a mixture of
 * token corpora) draws its slots as any mixture, each slot a window of its
 * source, but in schedule order (position p is slot p), so its weights may
 * change at a resume (state_blend.c, determinism.md section 12b).
 *
 * The per-position step (sp__loader_sample) and the batch assembly
 * (sp__batch_finalize, loader_failures.c) are shared with the worker pool
 * through loader_internal.h; they apply cfg.on_error (loader.h): skip
 * compacts the failed positions out after all positions are done,
 * substitute searches the next positions of the epoch order for a sample
 * that decodes. Both are decided from the samples only, so the pool and
 * the threads agree.
 */
#include "seedpipe/loader.h"
#include "seedpipe/env.h"
#include "common/hash_internal.h"
#include "common/trace_internal.h"
#include "augment/decode_internal.h"
#include "augment/pipeline_internal.h"
#include "dataset/dataset_api_internal.h"
#include "loader/loader_internal.h"
#include "loader/tokens_internal.h"
#include "loader/targets_internal.h"
#include "loader/loader_struct.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include "augment/targets_internal.h"
#include "dataset/dataset_internal.h"

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The dataset index at epoch position pos (< N): the Feistel order's, or
 * the canonical order's (sequential); for a mixture the sample that slot
 * draws. *addr (may be NULL) gets the sample's augmentation address: the
 * index itself, or a mixture's slot. */
static uint64_t index_at(const sp_loader *ld, const sp_perm *perm, uint64_t pos,
                         uint64_t *addr) {
    if (ld->samp) return sp__samp_at(ld->samp, perm, pos, ld->map, addr);
    /* A blend's slots stay in schedule order (section 12b). */
    uint64_t j = ld->cfg.order == SP_ORDER_SEQUENTIAL || (ld->mix && ld->tok) ? pos
                 : ld->block ? sp__order_at(ld->block, perm->epoch, pos)
                             : sp_perm_at(perm, pos);
    if (ld->mix) {
        sp_mix_draw d;
        if (addr) *addr = j;
        return sp_dataset_mix_draw(ld->ds, ld->cfg.seed, perm->epoch, j, &d) == 0 ? d.index
                                                                                   : UINT64_MAX;
    }
    j = ld->map ? ld->map[j] : j;
    if (addr) *addr = j;
    return j;
}

/* The dataset index in slot `slot` (sampler.h "Slots") of the epoch. */
static uint64_t index_of_slot(const sp_loader *ld, const sp_perm *perm, uint64_t slot) {
    return index_at(ld, perm, sp_batch_position(&ld->bt, slot), NULL);
}

uint64_t sp__loader_index_at(const sp_loader *ld, uint32_t epoch, uint64_t slot) {
    sp_perm perm;
    sp_perm_init(&perm, ld->bt.n, ld->k_shuffle, epoch);
    return index_of_slot(ld, &perm, slot);
}

uint64_t sp__loader_padded_size(const sp_loader *ld) { return sp_batching_padded(&ld->bt); }

uint64_t sp__loader_size(const sp_loader *ld) { return ld->bt.n; }
uint64_t sp__loader_sample_index(const sp_loader *ld, uint64_t j) {
    return ld->map ? (j < ld->nmap ? ld->map[j] : UINT64_MAX) : j;
}

/* weighed 0: a blend's identity, its fingerprint less the weights and the
 * switch (state_blend.c). */
static sp_digest compute_fingerprint(const sp_loader *ld, int weighed) {
    sp__hash hs, *st = &hs;
    sp__hash_init(st);
    /* v2: the decoders' warning policy and dct=off by default (a pipeline
     * text without decode means other bytes than under v1) */
    sp__hash_str(st, "seedpipe-loader-v2");
    int blend = ld->mix && ld->tok;
    sp_digest dfp = blend && !weighed ? sp__ds_mix_sources_fp(ld->ds)
                                      : sp__dataset_fingerprint(ld->ds);
    if (blend && weighed) sp__ds_mix_hash_since(ld->ds, st);
    sp__hash_u64(st, dfp.hi);
    sp__hash_u64(st, dfp.lo);
    sp__hash_str(st, sp__loader_spec(ld));
    if (ld->targets) sp__ldt_hash(ld->targets, st);   /* the annotation file's bytes */
    sp__hash_u64(st, (uint64_t)ld->cfg.dtype);
    sp__hash_u64(st, (uint64_t)ld->cfg.layout);
    sp__hash_u64(st, (uint64_t)ld->cfg.skip_normalize);
    sp__hash_u64(st, ld->bt.batch_size);
    sp__hash_u64(st, (uint64_t)ld->bt.drop_last);
    /* v1 fingerprints stay valid for the defaults. */
    if (ld->cfg.on_error != SP_ON_ERROR_FAIL) {
        sp__hash_str(st, "on_error");
        sp__hash_u64(st, (uint64_t)ld->cfg.on_error);
    }
    if (ld->cfg.rng_mode != SP_RNG_PER_SAMPLE) {
        sp__hash_str(st, "rng_mode");
        sp__hash_u64(st, (uint64_t)ld->cfg.rng_mode);
    }
    if (ld->cfg.order != SP_ORDER_SHUFFLE) {
        sp__hash_str(st, "order");
        sp__hash_u64(st, (uint64_t)ld->cfg.order);
        if (ld->cfg.order == SP_ORDER_BLOCK) sp__hash_u64(st, ld->cfg.block_shards);
    }
    if (ld->cfg.pad_tail) {   /* the padded size decides the last batch */
        sp__hash_str(st, "pad_tail");
        sp__hash_u64(st, sp_batching_padded(&ld->bt));
    }
    if (ld->samp) sp__samp_hash(ld->samp, st);
    if (ld->cfg.split) {
        char canon[SP_SPLIT_MAX * (SP_SPLIT_NAME_MAX + 32)];
        sp_split_canonical(&ld->split, canon, sizeof canon);
        sp__hash_str(st, "split");
        sp__hash_str(st, canon);
        sp__hash_u64(st, ld->split.seed);
        sp__hash_str(st, ld->cfg.subset);
    }
    return sp__hash_digest(st);
}

/* The pipeline of an image dataset, or a token corpus's spec (tokens.c),
 * and the sample's shape. */
static int open_spec(sp_loader *ld, sp_error *err) {
    sp_loader_config *cfg = &ld->cfg;
    const sp_dataset *first = sp__dataset_mix_sources(ld->ds) ? sp__dataset_mix_source(ld->ds, 0)
                                                            : ld->ds;
    if (sp__dataset_kind_of(first) == SP_DATASET_TOKENS) {   /* a corpus, or a blend of them */
        if (ld->map || cfg->order == SP_ORDER_BLOCK)
            return sp_error_set(err, SP_EINVAL, "%s: a token corpus takes no %s", ld->dataset_path,
                                ld->map ? "split" : "block order (it has no shards)");
        if (cfg->dtype == SP_DTYPE_UINT8) cfg->dtype = SP_DTYPE_INT32;   /* the default */
        if (cfg->dtype != SP_DTYPE_INT32 && cfg->dtype != SP_DTYPE_INT64)
            return sp_error_set(err, SP_EINVAL, "%s: a token corpus gives int32 or int64 "
                                "tokens, not %s", ld->dataset_path, sp_dtype_name(cfg->dtype));
        int rc = sp__tokl_create(ld->ds, ld->pipeline_spec, cfg->seed, ld->dataset_path,
                                 &ld->tok, err);
        ld->c = ld->h = 1;
        ld->w = rc == 0 ? (int)sp__tokl_width(ld->tok) : 0;
        return rc;
    }
    if (cfg->dtype == SP_DTYPE_INT32 || cfg->dtype == SP_DTYPE_INT64)
        return sp_error_set(err, SP_EINVAL, "%s: %s is the dtype of token corpora; images "
                            "are uint8, float32, bfloat16 or float16", ld->dataset_path,
                            sp_dtype_name(cfg->dtype));
    int rc = sp_pipeline_parse(ld->pipeline_spec, &ld->pl, err);
    if (rc == 0 && sp_pipeline_has_normalize(ld->pl) && cfg->dtype == SP_DTYPE_UINT8 &&
        !cfg->skip_normalize)
        rc = sp_error_set(err, SP_EINVAL,
                          "pipeline normalizes: it needs --dtype float32 (or bfloat16, "
                          "float16; uint8 output would lose the normalization)");
    if (rc == 0) {
        int rw = 0, rh = 0;
        if (sp__dataset_raw_dims(ld->ds, &rw, &rh) != 0) rw = rh = 0;
        rc = sp__pipeline_output_dims(ld->pl, rw, rh, &ld->h, &ld->w, &ld->c, err);
    }
    return rc;
}

/* The config's enums and required fields, before anything is opened. */
static int check_config(const sp_loader_config *cfg, sp_error *err) {
    if (!cfg || (!cfg->dataset && !cfg->samples) || !cfg->pipeline)
        return sp_error_set(err, SP_EINVAL, "loader: dataset (or samples) and pipeline must "
                            "be set");
    if ((unsigned)cfg->dtype > SP_DTYPE_INT64)
        return sp_error_set(err, SP_EINVAL, "loader: bad dtype %d", (int)cfg->dtype);
    if (cfg->layout != SP_LAYOUT_NCHW && cfg->layout != SP_LAYOUT_NHWC)
        return sp_error_set(err, SP_EINVAL, "loader: bad layout %d", (int)cfg->layout);
    if ((unsigned)cfg->on_error > SP_ON_ERROR_SUBSTITUTE)
        return sp_error_set(err, SP_EINVAL, "loader: bad on_error %d", (int)cfg->on_error);
    if ((unsigned)cfg->rng_mode > SP_RNG_PER_WORKER)
        return sp_error_set(err, SP_EINVAL, "loader: bad rng_mode %d", (int)cfg->rng_mode);
    if ((unsigned)cfg->order > SP_ORDER_BLOCK)
        return sp_error_set(err, SP_EINVAL, "loader: bad order %d", (int)cfg->order);
    return sp_env_check(err);   /* every SEEDPIPE_* value, by name (env.h) */
}

/* ld->cfg: the caller's config with the loader's own copies of its strings
 * (the caller's need not outlive the call) and the defaults filled. */
static int own_config(sp_loader *ld, const sp_loader_config *cfg, sp_error *err) {
    ld->cfg = *cfg;
    ld->dataset_path = dupstr(cfg->dataset ? cfg->dataset : "(sample list)");
    ld->pipeline_spec = dupstr(cfg->pipeline);
    if (!ld->dataset_path || !ld->pipeline_spec)
        return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    ld->cfg.dataset = ld->dataset_path;
    ld->cfg.samples = NULL;   /* the caller's list is not kept: see sp__loader_own_list() */
    ld->cfg.pad_tail = cfg->pad_tail ? 1 : 0;
    if (cfg->order != SP_ORDER_BLOCK) ld->cfg.block_shards = 0;   /* K only means something there */
    ld->cfg.pipeline = ld->pipeline_spec;
    if ((cfg->split && !(ld->split_spec = dupstr(cfg->split))) ||
        (cfg->subset && !(ld->subset_name = dupstr(cfg->subset))) ||
        (cfg->annotations && !(ld->annotations = dupstr(cfg->annotations))))
        return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    ld->cfg.split = ld->split_spec;
    ld->cfg.subset = ld->subset_name;
    ld->cfg.annotations = ld->annotations;
    if (ld->cfg.world == 0) ld->cfg.world = 1;
    return SP_OK;
}

/* The dataset (or the list), the subset, the sampler, the block order, the
 * pipeline (or a corpus's spec) and the targets, in that order. */
static int open_sources(sp_loader *ld, const sp_loader_config *cfg, sp_error *err) {
    int rc = cfg->samples ? sp_dataset_open_list(cfg->dataset, cfg->samples, NULL, &ld->ds, err)
                          : sp_dataset_open(ld->dataset_path, NULL, &ld->ds, err);
    if (rc == 0 && cfg->samples) rc = sp__loader_own_list(ld, err);
    if (rc == 0) rc = sp__loader_build_subset(ld, err);
    if (rc == 0)
        rc = sp__samp_create(&ld->cfg, ld->ds, ld->dataset_path, &ld->map, &ld->nmap, &ld->samp,
                             err);
    if (rc == 0 && cfg->order == SP_ORDER_BLOCK)
        rc = sp__order_create(ld->ds, ld->map, ld->map ? ld->nmap : sp__dataset_size(ld->ds),
                              cfg->block_shards, cfg->seed, ld->dataset_path, &ld->block, err);
    if (rc == 0) rc = open_spec(ld, err);
    if (rc == 0)
        rc = sp__ldt_open(ld->annotations, ld->pl, ld->ds, sp__dataset_mix_sources(ld->ds) > 0,
                          ld->tok != NULL, ld->h, ld->w, &ld->targets, err);
    return rc;
}

/* The epoch's geometry (sampler.h): N positions, batches, rank slices. */
static int set_batching(sp_loader *ld, const sp_loader_config *cfg, sp_error *err) {
    ld->mix = sp__dataset_mix_sources(ld->ds) > 0;
    ld->bt.n = ld->samp ? sp__samp_length(ld->samp) : ld->tok ? sp__tokl_windows(ld->tok)
               : ld->map ? ld->nmap : sp__dataset_mix_length(ld->ds);
    ld->bt.batch_size = cfg->batch_size;
    ld->bt.drop_last = cfg->drop_last;
    ld->bt.rank = cfg->rank;
    ld->bt.world = ld->cfg.world;
    ld->bt.pad_tail = ld->cfg.pad_tail;
    ld->bt.strided = cfg->order == SP_ORDER_SEQUENTIAL ||
                     (ld->samp && sp__samp_strided(ld->samp));   /* repeat's copies */
    int rc = sp_batching_check(&ld->bt, err);
    if (rc == 0 && ld->bt.n > (1ull << 32))
        rc = sp_error_set(err, SP_ELIMIT, "%s: %llu samples: at most 2^32 are supported "
                          "(the sample index is a 32-bit Philox counter word)",
                          ld->dataset_path, (unsigned long long)ld->bt.n);
    if (rc == 0 && sp_batches_per_epoch(&ld->bt) == 0)
        rc = sp_error_set(err, SP_EINVAL,
                          "%s: %llu samples make no batch of %u with drop_last",
                          ld->dataset_path, (unsigned long long)ld->bt.n, cfg->batch_size);
    return rc;
}

/* What follows from an opened loader: sample bytes, keys, fingerprints. */
static void derive(sp_loader *ld) {
    ld->span = 1;
    ld->image_bytes = ld->sample_bytes =
        (size_t)ld->c * (size_t)ld->h * (size_t)ld->w * sp__dtype_size(ld->cfg.dtype);
    if (ld->targets)
        ld->sample_bytes = sp__targets_image_span(ld->image_bytes) + sp__ldt_bytes(ld->targets);
    ld->k_shuffle = sp_rng_key(ld->cfg.seed, SP_RNG_SHUFFLE);
    ld->k_augment = sp_rng_key(ld->cfg.seed, SP_RNG_AUGMENT);
    ld->fingerprint = compute_fingerprint(ld, 1);
    const char *canon = sp__loader_spec(ld);
    XXH128_hash_t ph = XXH3_128bits(canon, strlen(canon));
    ld->pipeline_hash.hi = ph.high64;
    ld->pipeline_hash.lo = ph.low64;
}

int sp_loader_create(const sp_loader_config *cfg, sp_loader **out, sp_error *err) {
    *out = NULL;
    int rc = check_config(cfg, err);
    if (rc != SP_OK) return rc;
    uint64_t t_open = sp__trace_t0();
    sp_loader *ld = calloc(1, sizeof *ld);
    if (!ld) return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    pthread_mutex_init(&ld->log_lock, NULL);
    rc = own_config(ld, cfg, err);
    if (rc == 0) rc = open_sources(ld, cfg, err);
    if (rc == 0) rc = set_batching(ld, cfg, err);
    if (rc != 0) {
        sp_loader_destroy(ld);
        return rc;
    }
    derive(ld);
    sp__trace_end(SP_TRACE_OPEN, t_open);
    *out = ld;
    return SP_OK;
}

void sp_loader_destroy(sp_loader *ld) {
    if (!ld) return;
    sp_pipeline_destroy(ld->pl);
    sp__ldt_close(ld->targets);
    free(ld->annotations);
    sp__tokl_destroy(ld->tok);
    sp__order_destroy(ld->block);
    sp__samp_destroy(ld->samp);
    sp_dataset_close(ld->ds);
    free(ld->dataset_path);
    free(ld->pipeline_spec);
    free(ld->failures);
    free(ld->split_spec);
    free(ld->subset_name);
    free(ld->map);
    free(ld->list_paths);
    free(ld->list_labels);
    pthread_mutex_destroy(&ld->log_lock);
    free(ld);
}

sp_digest sp__loader_pipeline_hash(const sp_loader *ld) { return ld->pipeline_hash; }
const sp_batching *sp__loader_batching(const sp_loader *ld) { return &ld->bt; }

sp_key sp__loader_worker_key(const sp_loader *ld, uint32_t w) {
    return sp_worker_key(ld->cfg.seed, w);
}

sp__rng sp__loader_rng(const sp_loader *ld, uint32_t counter) {
    sp__rng r;
    r.mode = ld->cfg.rng_mode;
    r.key = r.mode == SP_RNG_PER_WORKER ? sp__loader_worker_key(ld, 0) : ld->k_augment;
    r.counter = counter;
    return r;
}

const sp_dataset *sp__loader_dataset(const sp_loader *ld) { return ld->ds; }
const sp_pipeline *sp__loader_pipeline(const sp_loader *ld) { return ld->pl; }
const char *sp__loader_spec(const sp_loader *ld) {
    return ld->tok ? sp__tokl_canonical(ld->tok) : sp__pipeline_canonical(ld->pl);
}
int32_t sp__loader_label(const sp_loader *ld, uint64_t idx) {
    return ld->tok ? 0 : sp_dataset_label(ld->ds, idx);
}
const sp_loader_config *sp__loader_config_of(const sp_loader *ld) { return &ld->cfg; }
uint64_t sp__loader_batches_per_epoch(const sp_loader *ld) { return sp_batches_per_epoch(&ld->bt); }
size_t sp__loader_sample_bytes(const sp_loader *ld) { return ld->sample_bytes; }
sp_digest sp__loader_fingerprint(const sp_loader *ld) { return ld->fingerprint; }
sp_digest sp__loader_blend_identity(const sp_loader *ld) { return compute_fingerprint(ld, 0); }
sp_dataset *sp__loader_blend(sp_loader *ld) { return ld->mix && ld->tok ? ld->ds : NULL; }
void sp__loader_refingerprint(sp_loader *ld) { ld->fingerprint = compute_fingerprint(ld, 1); }

void sp__loader_sample_dims(const sp_loader *ld, int *c, int *h, int *w) {
    if (c) *c = ld->c;
    if (h) *h = ld->h;
    if (w) *w = ld->w;
}

/* The first version's size (ABI 7): every field through pipeline_hash. */
#define SP__LOADER_INFO_V1 (offsetof(sp_loader_info, pipeline_hash) + sizeof(sp_digest))

int sp_loader_info_get(const sp_loader *ld, sp_loader_info *info) {
    if (!ld || !info || info->struct_size < SP__LOADER_INFO_V1) return SP_EINVAL;
    sp_loader_info in;
    memset(&in, 0, sizeof in);
    in.config = &ld->cfg;
    in.dataset = ld->ds;
    in.pipeline = ld->pl;
    in.spec = sp__loader_spec(ld);
    in.size = ld->bt.n;
    in.padded_size = sp_batching_padded(&ld->bt);
    in.batches_per_epoch = sp_batches_per_epoch(&ld->bt);
    in.c = ld->c;
    in.h = ld->h;
    in.w = ld->w;
    in.sample_bytes = ld->sample_bytes;
    in.fingerprint = ld->fingerprint;
    in.pipeline_hash = ld->pipeline_hash;
    /* a caller built against a longer struct keeps what we do not know */
    size_t n = info->struct_size < sizeof in ? info->struct_size : sizeof in;
    in.struct_size = info->struct_size;
    memcpy(info, &in, n);
    return SP_OK;
}

/* One sample through read + pipeline; addr: its augmentation address. */
static int run_one(const sp_loader *ld, uint32_t epoch, uint64_t idx, uint64_t addr, sp__rng rng,
                   void *dst, sp_error *err) {
    if (ld->tok)   /* a window; a blend's: the slot's (addr) */
        return sp__tokl_window(ld->tok, epoch, ld->mix ? addr : idx, dst,
                               ld->cfg.dtype == SP_DTYPE_INT64 ? 8 : 4, err);
    sp_sample_data sd;
    uint64_t t0 = sp__trace_t0();
    int rc = sp__dataset_read(ld->ds, idx, &sd, err);
    sp__trace_end(SP_TRACE_READ, t0);
    if (rc != 0) return rc;
    sp_sample_ctx ctx = {ld->k_augment, epoch, (uint32_t)addr};
    if (rng.mode == SP_RNG_PER_WORKER) {
        ctx.k_augment = rng.key;
        ctx.sample = rng.counter;
    }
    sp_run_opts opts = {ld->cfg.dtype, ld->cfg.layout, ld->cfg.skip_normalize, NULL};
    sp_out_shape shape = {ld->h, ld->w, ld->c};
    /* the dataset's verdict: a validated JPEG's crop stops after its last
     * row and starts at its entropy checkpoint (decode_internal.h) */
    sp__decode_hint hint = {0, NULL, 0};
    if (sp__ds_verdict(ld->ds, idx, &hint.ckpt, &hint.ckpt_len))
        hint.flags = SP__DECODE_VALIDATED;
    rc = sp__ldt_run(ld->targets, ld->pl, &ctx, &sd.src, &opts, &shape, idx, dst,
                     ld->image_bytes, ld->sample_bytes, &hint, err);
    sp__sample_data_free(&sd);
    return rc;
}

int sp__loader_sample(const sp_loader *ld, uint32_t epoch, uint64_t pos, sp__rng rng,
                      const char *forced, void *dst, sp__item *it, uint64_t *index,
                      int32_t *label) {
    sp_perm perm;
    sp_perm_init(&perm, ld->bt.n, ld->k_shuffle, epoch);
    pos = sp_batch_position(&ld->bt, pos);   /* the slot's epoch position, in [0, N) */
    uint64_t addr;
    uint64_t idx = index_at(ld, &perm, pos, &addr);
    sp__trace_ctx_sample(idx);
    *index = idx;
    *label = sp__loader_label(ld, idx);
    it->status = SP__ITEM_OK;
    it->code = 0;
    it->failed = idx;
    it->msg[0] = '\0';
    sp_error e;
    sp_error_clear(&e);
    int rc;
    if (forced)
        rc = sp_error_set(&e, SP_EIO, "%s/%s: %s", sp__dataset_root(ld->ds),
                          ld->tok ? "(window)" : sp_dataset_path(ld->ds, idx), forced);
    else
        rc = run_one(ld, epoch, idx, addr, rng, dst, &e);
    if (rc == 0) return SP_OK;
    it->code = rc;
    snprintf(it->msg, sizeof it->msg, "%s", e.msg[0] ? e.msg : sp_strerror(rc));
    switch (ld->cfg.on_error) {
    case SP_ON_ERROR_SKIP:
        it->status = SP__ITEM_SKIPPED;
        memset(dst, 0, ld->sample_bytes);
        return SP_OK;
    case SP_ON_ERROR_SUBSTITUTE:
        for (uint64_t t = 1; t <= SP_SUBSTITUTE_TRIES && t < ld->bt.n; t++) {
            uint64_t cand_addr;
            uint64_t cand = index_at(ld, &perm, (pos + t) % ld->bt.n, &cand_addr);
            sp_error_clear(&e);
            if (run_one(ld, epoch, cand, cand_addr, rng, dst, &e) == 0) {
                it->status = SP__ITEM_SUBSTITUTED;
                *index = cand;
                *label = sp__loader_label(ld, cand);
                return SP_OK;
            }
        }
        it->status = SP__ITEM_FAILED;
        return rc;
    default:
        it->status = SP__ITEM_FAILED;
        return rc;
    }
}

/* One batch's shared work state. */
typedef struct batch_job {
    sp_loader *ld;
    sp_batch *out;
    uint32_t epoch;
    uint64_t pos0;         /* epoch position of slot 0 */
    uint64_t counter0;     /* per-worker mode: counter of slot 0 */
    atomic_uint next;      /* next slot to claim */
    uint32_t chunk;        /* slots a claim (sp__loader_prefetch_chunk(), or 1) */
    sp__item *items;       /* per-slot outcome */
} batch_job;

static void batch_slot(batch_job *job, unsigned s) {
    uint8_t *dst = job->out->images + (size_t)s * job->ld->sample_bytes;
    sp__rng rng = sp__loader_rng(job->ld, (uint32_t)(job->counter0 + s));
    int32_t label;
    uint64_t t0 = sp__trace_t0();
    sp__trace_ctx(job->epoch, job->out->index, s, SP__TRACE_NONE64);
    sp__loader_sample(job->ld, job->epoch, job->pos0 + s, rng, NULL, dst, &job->items[s],
                      &job->out->indices[s], &label);
    sp__trace_end(SP_TRACE_SAMPLE, t0);
    job->out->labels[s] = label;
}

/* Claims `chunk` slots at a time; with a remote dataset the next claim's
 * samples are read ahead (on this thread) while this one's are computed. */
static void *batch_worker(void *arg) {
    batch_job *job = arg;
    uint32_t n = job->out->count, c = job->chunk;
    unsigned cur = atomic_fetch_add(&job->next, c);
    if (c > 1 && cur < n) sp__loader_prefetch(job->ld, job->out->indices + cur, cur + c <= n ? c : n - cur);
    while (cur < n) {
        unsigned nxt = atomic_fetch_add(&job->next, c);
        if (c > 1 && nxt < n)
            sp__loader_prefetch(job->ld, job->out->indices + nxt, nxt + c <= n ? c : n - nxt);
        for (unsigned s = cur; s < cur + c && s < n; s++) batch_slot(job, s);
        cur = nxt;
    }
    return NULL;
}

uint32_t sp__loader_prefetch_chunk(const sp_loader *ld) {
    if (!sp__ds_is_remote(ld->ds)) return 0;
    const char *e = getenv("SEEDPIPE_PREFETCH");
    if (e && e[0]) {
        char *end;
        unsigned long v = strtoul(e, &end, 10);
        if (!*end && v <= 256) return (uint32_t)v;
    }
    return 16;
}

void sp__loader_prefetch(const sp_loader *ld, const uint64_t *idx, size_t n) {
    sp__ds_prefetch(ld->ds, idx, n);
}

int sp_loader_batch(sp_loader *ld, uint32_t epoch, uint64_t index, sp_batch *out,
                    sp_error *err) {
    uint64_t nb = sp_batches_per_epoch(&ld->bt);
    if (index >= nb)
        return sp_error_set(err, SP_ERANGE, "batch %llu out of range: epoch has %llu batches",
                            (unsigned long long)index, (unsigned long long)nb);
    uint64_t pos;
    uint32_t count;
    sp__loader_slice(ld, index, &pos, &count);
    if (count > out->capacity)
        return sp_error_set(err, SP_EINVAL, "batch buffer holds %u samples, slice needs %u",
                            out->capacity, count);
    sp_perm perm;
    sp_perm_init(&perm, ld->bt.n, ld->k_shuffle, epoch);
    out->count = count;
    out->epoch = epoch;
    out->index = index;
    out->nskipped = 0;
    out->nsubstituted = 0;
    for (uint32_t s = 0; s < count; s++) {
        out->indices[s] = index_of_slot(ld, &perm, pos + s);
        out->labels[s] = sp__loader_label(ld, out->indices[s]);
    }
    if (count == 0) return SP_OK;

    batch_job job;
    job.ld = ld;
    job.out = out;
    job.epoch = epoch;
    job.pos0 = pos;
    job.counter0 = ld->worker_counter;
    if (ld->cfg.rng_mode == SP_RNG_PER_WORKER) ld->worker_counter += count;
    atomic_init(&job.next, 0u);
    job.chunk = sp__loader_prefetch_chunk(ld);
    if (job.chunk == 0) job.chunk = 1;
    job.items = calloc(count, sizeof *job.items);
    if (!job.items) return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    int nthreads = ld->cfg.threads > 1 ? ld->cfg.threads : 1;
    if ((uint32_t)nthreads > count) nthreads = (int)count;
    pthread_t tids[64];
    if (nthreads > 64) nthreads = 64;
    int started = 0;
    for (int t = 1; t < nthreads; t++) {
        if (pthread_create(&tids[started], NULL, batch_worker, &job) != 0) break;
        started++;
    }
    uint64_t t0 = sp__trace_t0();
    batch_worker(&job);   /* the calling thread works too */
    for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
    if (t0) sp__trace_record(SP_TRACE_BATCH, t0, epoch, index, SP__TRACE_NONE32, SP__TRACE_NONE64);

    int rc = sp__batch_finalize(ld, out, job.items, err);
    free(job.items);
    return rc;
}

/* The dataset index keeps each file's full-decode verdict (dataset_index.c,
 * "Verdicts"); the decoder is augment's, which the dataset layer may not
 * call, so this layer, above both, hands it down when the library loads. */
__attribute__((constructor)) static void wire_checker(void) {
    sp__ds_set_checker(sp__image_check);
}
