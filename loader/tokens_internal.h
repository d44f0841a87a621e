/* tokens_internal.h - a token corpus cut into samples: the loader's side of
 * a token dataset (dataset/dataset_tokens.h is the corpus's).
 *
 * A loader over a token corpus (SP_DATASET_TOKENS) takes, in place of an
 * augmentation pipeline, a token spec:
 *
 *     tokens seq_len=L packing=concat|docs [eod=ID|none] [pad=ID]
 *
 * and its samples are the epoch's windows (docs/determinism.md section 12
 * is the normative spec, docs/tokens.md the manual):
 *   concat  the epoch's shuffled documents, each followed by eod (when
 *           set), as one stream cut into windows of L + 1 tokens starting
 *           every L tokens (inputs and next-token targets); the last
 *           window padded with pad. One field: tokens[L + 1].
 *   docs    whole documents (pieces of L for longer ones) packed into
 *           windows of L tokens by a best-fit-decreasing layout of the
 *           corpus's piece lengths, fixed for the corpus; each epoch
 *           shuffles which piece fills each place. Fields: tokens[L],
 *           labels[L] (the document's next token, -100 at its end and on
 *           padding), segment_ids[L] (1.., 0 padding), position_ids[L]
 *           (within the piece), cu_seqlens[L + 1] (segment boundaries,
 *           the last repeated), num_segments[1].
 * The window count is a function of the corpus alone, so an epoch has the
 * same number of samples every time and the loader's order, batching,
 * ranks, state, pool, cache and service apply unchanged: a window index
 * is a sample index.
 *
 * Thread/fork safety: sp__tokl_window() may run on any number of threads
 * and in forked children; an epoch's table is built once per process, on
 * first use, under a lock (held only inside the calls).
 *
 * Not installed, not part of the API: names are sp__tokl_*.
 */
#ifndef SEEDPIPE_TOKENS_INTERNAL_H
#define SEEDPIPE_TOKENS_INTERNAL_H

#include "seedpipe/dataset.h"
#include "seedpipe/philox.h"
#include "dataset/dataset_tokens.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

enum { SP__TOK_CONCAT = 0, SP__TOK_DOCS = 1 };

/* The largest seq_len (2^20: the docs layout keeps a count per length). */
#define SP__TOK_MAX_SEQ_LEN (UINT64_C(1) << 20)
/* The label of a position with no next token in its document (docs). */
#define SP__TOK_IGNORE (-100)

typedef struct sp__tokl sp__tokl;

/*! sp__tokl_create() : parse `spec` (above) and lay out the corpus of ds
 *  (a token dataset) under `seed`. `what` names the dataset in messages.
 *  A mixture of token corpora (a blend, determinism.md section 12a) is
 *  laid out source by source and its schedule resized to their windows
 *  (sp__ds_mix_resize(): ds is changed, hence not const); its windows are
 *  then the schedule's slots.
 *  @return 0, SP_ESPEC (the spec: naming the key and why), SP_EINVAL (a
 *  corpus too small for one window), SP_ELIMIT, SP_ENOMEM. */
int sp__tokl_create(sp_dataset *ds, const char *spec, uint64_t seed, const char *what,
                    sp__tokl **out, sp_error *err);
void sp__tokl_destroy(sp__tokl *t);   /* accepts NULL */

/* The canonical spec ("tokens seq_len=2048 packing=docs eod=none pad=0"):
 * part of the loader's fingerprint. */
const char *sp__tokl_canonical(const sp__tokl *t);
/* Windows an epoch has (the loader's N). */
uint64_t sp__tokl_windows(const sp__tokl *t);
/* Integers a window holds: L + 1 (concat) or 5 L + 2 (docs). */
uint64_t sp__tokl_width(const sp__tokl *t);
/* Tokens of the corpus a whole epoch's windows carry, and the window
 * capacity they are in (N * L): their ratio is 1 - padding. */
void sp__tokl_fill(const sp__tokl *t, uint64_t *tokens, uint64_t *capacity);

/*! sp__tokl_window() : window w (< windows) of epoch `epoch` into dst:
 *  width integers of out_bytes (4 or 8) each.
 *  @return 0, SP_ERANGE, SP_ENOMEM, or the corpus's read error. */
int sp__tokl_window(const sp__tokl *t, uint32_t epoch, uint64_t w, void *dst, int out_bytes,
                    sp_error *err);

/*! sp__tokl_explain() : which documents and offsets window w of epoch
 *  `epoch` holds, one line each, into buf (NUL-terminated, truncated).
 *  @return 0, SP_ERANGE, SP_ENOMEM. */
int sp__tokl_explain(const sp__tokl *t, uint32_t epoch, uint64_t w, char *buf, size_t n,
                     sp_error *err);

/* ---- shared by tokens.c and tokens_docs.c ------------------------------------------- */

/* One epoch's table, built on first use (tokens.c keeps the last few):
 * concat: the document order (order[k] = the k-th document) and the
 * stream offset of every SP__TOKL_STRIDE-th document (c[b] = offset of
 * document order[b * stride]); docs: the pieces each place holds
 * (tokens_docs.c). */
#define SP__TOKL_STRIDE 16
#define SP__TOKL_EPOCHS 4
typedef struct sp__tokl_epoch {
    uint32_t epoch;
    int refs;             /* callers using it now (under the lock) */
    uint64_t used;        /* the lock's clock at its last use: the oldest idle one goes */
    uint32_t *order;      /* D (concat) or the pieces (docs) */
    uint64_t *c;          /* concat: ceil(D / stride) + 1 offsets */
} sp__tokl_epoch;

struct sp__tokl_docs;     /* the docs layout (tokens_docs.c) */

struct sp__tokl {
    const sp_dataset *ds;
    const sp__tok *tok;
    int packing;          /* SP__TOK_CONCAT, SP__TOK_DOCS */
    uint64_t L;
    int64_t eod, pad;     /* eod < 0: none */
    sp_key key;           /* K_tokens = sp_rng_key(seed, SP_RNG_TOKENS) */
    uint64_t D, T, N;     /* documents, their tokens, windows */
    uint64_t width;
    uint64_t used_tokens; /* corpus tokens (and eods) an epoch's windows carry */
    char what[256];
    char canon[160];
    struct sp__tokl_docs *docs;
    /* A blend (a mixture of token corpora): one layout per source; a
     * window index is then a slot of the mixture's schedule. */
    sp_dataset *mix;
    uint64_t seed;
    uint32_t nsrc;
    struct sp__tokl **src;
    pthread_mutex_t lock;
    uint64_t clock;
    sp__tokl_epoch *cache[SP__TOKL_EPOCHS];
};

/*! sp__tokl_shuffle() : the keyed Fisher-Yates shuffle of a[0..n) (n <
 *  2^32) in place: for i = n-1 down to 1, x = the low 64 bits of
 *  philox((i, epoch, stream, 0), K_tokens), j = (x * (i + 1)) >> 64, swap
 *  a[i] and a[j] (determinism.md section 12). */
void sp__tokl_shuffle(uint32_t *a, uint64_t n, sp_key k, uint32_t epoch, uint32_t stream);

/* tokens_docs.c: the docs layout of t's corpus (sets t->N, t->used_tokens),
 * an epoch's table, a window, its explanation. */
int sp__tokl_docs_create(sp__tokl *t, sp_error *err);
void sp__tokl_docs_destroy(struct sp__tokl_docs *d);
int sp__tokl_docs_epoch(const sp__tokl *t, uint32_t epoch, sp__tokl_epoch *e, sp_error *err);
int sp__tokl_docs_window(const sp__tokl *t, const sp__tokl_epoch *e, uint64_t w, void *dst,
                         int out_bytes, sp_error *err);
int sp__tokl_docs_explain(const sp__tokl *t, const sp__tokl_epoch *e, uint64_t w, char *buf,
                          size_t n);

#endif
