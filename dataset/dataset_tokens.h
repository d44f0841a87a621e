/* dataset_tokens.h - the token-corpus kind (SP_DATASET_TOKENS): a Megatron
 * indexed dataset, PREFIX.idx + PREFIX.bin (the MMIDIDX format), local
 * (mmap) or remote (the .idx read whole, the .bin by byte ranges: remote.c).
 * What the loader's packing (loader/tokens.c) needs from a corpus: its
 * documents, their lengths and their tokens. docs/tokens.md is the manual,
 * dataset/dataset_tokens.c the reader and the HOW IT WORKS.
 *
 * A document is what the .idx's document index delimits: document d is the
 * sequences [document_indices[d], document_indices[d + 1]) concatenated in
 * order (for corpora written one sequence a document, sequence d).
 * sp__dataset_size() of a token corpus is its document count.
 *
 * Not installed, not part of the API: names are sp__tok_*.
 */
#ifndef SEEDPIPE_DATASET_TOKENS_H
#define SEEDPIPE_DATASET_TOKENS_H

#include "seedpipe/dataset.h"
#include "dataset/dataset_api_internal.h"   /* the accessors, read-ahead, verdicts */
#include "common/hash_internal.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sp__tok sp__tok;   /* ds->state of a token corpus (dataset_tokens.c) */

/*! sp__tok_of() : the corpus of a token dataset; NULL for any other kind. */
const sp__tok *sp__tok_of(const sp_dataset *ds);

/*! sp__tok_docs() : the number of documents D. */
uint64_t sp__tok_docs(const sp__tok *t);
/*! sp__tok_total() : the tokens of all documents (sum of the lengths). */
uint64_t sp__tok_total(const sp__tok *t);
/*! sp__tok_len() : the tokens of document d (< D; 0 for d >= D). O(1). */
uint64_t sp__tok_len(const sp__tok *t, uint64_t d);
/*! sp__tok_prefetch_len() : start loading what sp__tok_len(d) reads (a
 *  pass over the documents in a shuffled order asks some ahead). */
void sp__tok_prefetch_len(const sp__tok *t, uint64_t d);
/*! sp__tok_dtype_name() : the corpus's token type as numpy names it
 *  ("uint8", "int8", "int16", "int32", "int64", "uint16"). */
const char *sp__tok_dtype_name(const sp__tok *t);

/* One run of tokens to copy: tokens [off, off + n) of document doc, to
 * dst as n little-endian integers of out_bytes bytes each (4: int32, 8:
 * int64, sign-extended or zero-extended from the corpus's type). */
typedef struct sp__tok_span {
    uint64_t doc, off, n;
    void *dst;
} sp__tok_span;

/*! sp__tok_read() : copy the n spans (each within its document: off + n
 *  <= sp__tok_len(doc)). Local corpora copy from the mapped .bin; remote
 *  ones fetch the byte ranges at once (sp__rio_fetch_many()), adjacent
 *  ranges merged. Thread- and fork-safe.
 *  @return 0, SP_ERANGE (a span outside its document), SP_EFORMAT (out_bytes
 *  4 and an int64 token outside int32's range: naming the file, document
 *  and value), SP_EIO / SP_EMISMATCH (a remote read: naming the object),
 *  SP_ENOMEM. */
int sp__tok_read(const sp__tok *t, const sp__tok_span *spans, size_t n, int out_bytes,
                 sp_error *err);

/*! sp__ds_mix_resize() (dataset_mix.c) : a blend, a mixture of token
 *  corpora, counts windows, not documents: the loader gives each source's
 *  window count (sizes[s], its packing's), and the schedule, offsets and
 *  default length are made again from those sizes (determinism.md section
 *  12a). @return 0, SP_EINVAL (not a mixture of token corpora), the open's
 *  length and period bounds (SP_ELIMIT), SP_ENOMEM. */
int sp__ds_mix_resize(sp_dataset *ds, const uint64_t *sizes, sp_error *err);

/* A blend's weights changed mid-run (determinism.md section 12b), all in
 * dataset_mix.c. The loader uses them when it resumes a blend's state
 * (loader/state_blend.c); none is thread-safe: they run before any batch.
 *   sp__ds_mix_draws_at()   draws[s] = the number K of source s's next draw
 *                           at slot q (<= L) of epoch e: SP_ERANGE before
 *                           the switch in force.
 *   sp__ds_mix_reweight()   the schedule made again for other weights
 *                           (reduced integers, one a source, sum < 2^62),
 *                           the switch cleared; the fingerprint follows.
 *   sp__ds_mix_set_since()  from slot q of epoch e on, source s's draws
 *                           continue from draws[s] (NULL: no switch).
 *   sp__ds_mix_since()      the switch in force: 1 and its (e, q, draws),
 *                           or 0 (e = q = 0, draws zero).
 *   sp__ds_mix_hash_since() the switch in force into a loader's
 *                           fingerprint (nothing when none).
 *   sp__ds_mix_sources_fp() the mixture's identity less its weights. */
int sp__ds_mix_draws_at(const sp_dataset *ds, uint32_t epoch, uint64_t q, uint64_t *draws);
int sp__ds_mix_reweight(sp_dataset *ds, const uint64_t *weights, sp_error *err);
int sp__ds_mix_set_since(sp_dataset *ds, uint32_t epoch, uint64_t q, const uint64_t *draws,
                         sp_error *err);
int sp__ds_mix_since(const sp_dataset *ds, uint32_t *epoch, uint64_t *q, uint64_t *draws);
void sp__ds_mix_hash_since(const sp_dataset *ds, sp__hash *h);
sp_digest sp__ds_mix_sources_fp(const sp_dataset *ds);

#endif
