/* seedpipe/state.h - loader state: where a stream stands, saved and resumed exactly.
 *
 * A loader state names the next batch to deliver (epoch, batch) of one
 * stream, plus everything needed to refuse a state that belongs to another
 * stream: the loader fingerprint and, separately, the dataset fingerprint,
 * the pipeline hash (XXH3-128 of the canonical pipeline), the seed, the
 * output format and the batch geometry, so a refusal can say what differs.
 * Because every batch is a pure function of its (epoch, batch) (DESIGN.md
 * section 1), resuming from a state gives the bytes an uninterrupted run
 * would have given, with any worker count.
 *
 * File format: one JSON object on one line, e.g.
 *   {"seedpipe_state":1,"fingerprint":"<32 hex>","dataset_fingerprint":"..",
 *    "pipeline_hash":"..","seed":42,"epoch":1,"batch":7,"samples":90,
 *    "batch_size":8,"drop_last":false,"dtype":"uint8","layout":"nchw",
 *    "sample_shape":[3,32,32],"on_error":"fail","rng_mode":"per-sample"}
 * and, only when set, "order":"sequential" (or "block:K") and "pad_tail":N' (the padded
 * epoch size; optional keys: a state without them is shuffled, unpadded),
 * and for a blend the four "blend_" keys (all or none).
 * The reader is strict and bounded (at most 64 KiB, nesting depth 4, every
 * key but the optional two required once, unknown keys refused, integers
 * range-checked): any
 * input gives 0 or an SP_EFORMAT message, never a crash.
 *
 * Thread safety: pure functions on caller-owned structs.
 */
#ifndef SEEDPIPE_STATE_H
#define SEEDPIPE_STATE_H

#include "seedpipe/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_loader_state {
    sp_digest fingerprint;          /* the loader's (sp_loader_info_get()) */
    sp_digest dataset_fingerprint;  /* the dataset's (sp_dataset_info_get()) */
    sp_digest pipeline_hash;        /* the loader's (sp_loader_info_get()) */
    uint64_t seed;
    uint32_t epoch;                 /* the next batch to deliver ... */
    uint64_t batch;                 /* ... is batch `batch` of epoch `epoch` */
    uint64_t samples;               /* dataset size */
    uint32_t batch_size;
    int drop_last;
    sp_dtype dtype;
    sp_layout layout;
    int c, h, w;                    /* sample shape */
    sp_on_error on_error;
    sp_rng_mode rng_mode;
    /* Added in ABI 2; written only when not the default, so a default
     * state's text is what ABI 1 wrote, and an ABI 1 state reads as shuffle,
     * no padding. */
    sp_order order;                 /* "order":"sequential" */
    uint64_t pad_tail;              /* "pad_tail":N' (the padded size); 0: none */
    /* Added in ABI 4: a block order's K ("order":"block:K"); 0 otherwise. */
    uint32_t block_shards;
    /* Added in ABI 6: a blend (a mixture of token corpora) whose weights
     * may change at a resume (docs/determinism.md section 12b). Written
     * only for a blend ("blend_identity", "blend_since":[E,Q],
     * "blend_weights":[..], "blend_draws":[..]); blend_sources 0 otherwise. */
    uint32_t blend_sources;         /* S (<= SP_STATE_MAX_SOURCES) */
    sp_digest blend_identity;       /* the loader's fingerprint less weights and switch */
    uint32_t blend_epoch;           /* the weights below are in force from slot ... */
    uint64_t blend_slot;            /* ... blend_slot of epoch blend_epoch (0, 0: the start) */
    uint64_t blend_weights[256];    /* W_s, the reduced integer weights */
    uint64_t blend_draws[256];      /* source s's draws before that slot */
} sp_loader_state;

#define SP_STATE_MAX_SOURCES 256
#define SP_STATE_MAX_BYTES 65536
/* A buffer that holds any state's text (a blend of 256 sources included). */
#define SP_STATE_TEXT_MAX 16384

/*! sp_loader_state_at() : the state of ld's stream positioned before batch
 *  `batch` of epoch `epoch`; a batch equal to the batches per epoch is
 *  normalised to (epoch + 1, 0). */
SP_API void sp_loader_state_at(const sp_loader *ld, uint32_t epoch, uint64_t batch,
                               sp_loader_state *st);

/*! sp_loader_state_check() : may ld resume from st?
 *  @return 0, or SP_EMISMATCH with a message listing every difference, e.g.
 *  "state is for another stream: seed 5 in the state, 7 here; dataset
 *  fingerprint 1a2b.. in the state, 3c4d.. here", or SP_ERANGE if the batch
 *  is past the end of an epoch. */
SP_API int sp_loader_state_check(const sp_loader *ld, const sp_loader_state *st, sp_error *err);

/*! sp_loader_resume() : prepare ld to continue the stream of st: the
 *  check of sp_loader_state_check(), and for a blend the state's weights
 *  and switch adopted, or, where the blend's weights (its .mix file) now
 *  differ from the state's, a switch at the state's position: from there
 *  each source continues its own order where it stopped (section 12b), and
 *  ld's fingerprint and later states record the switch. Call it once,
 *  before ld delivers a batch (streams and pools do, given sc.resume).
 *  @return 0, or what sp_loader_state_check() returns (a blend's sources,
 *  spec, seed or geometry that differ are SP_EMISMATCH as before),
 *  SP_EUNSUPP (a switch under pad_tail), SP_ENOMEM. */
SP_API int sp_loader_resume(sp_loader *ld, const sp_loader_state *st, sp_error *err);

/*! sp_loader_state_format() : the JSON line (with '\n'). @return the
 *  length needed, snprintf-style. */
SP_API int sp_loader_state_format(const sp_loader_state *st, char *buf, size_t size);
/*! sp_loader_state_parse() : parse `len` bytes (need not be NUL-terminated).
 *  @return 0 or SP_EFORMAT naming the key or offset at fault. */
SP_API int sp_loader_state_parse(const char *text, size_t len, sp_loader_state *st, sp_error *err);

/*! sp_loader_state_save() : write to path through a temporary file and a
 *  rename, so a reader sees the old or the new state, never half of one.
 *  @return 0 or SP_EIO. */
SP_API int sp_loader_state_save(const char *path, const sp_loader_state *st, sp_error *err);
/*! sp_loader_state_load() : @return 0, SP_EIO, SP_EFORMAT (messages start
 *  with the path). */
SP_API int sp_loader_state_load(const char *path, sp_loader_state *st, sp_error *err);

#ifdef __cplusplus
}
#endif
#endif
