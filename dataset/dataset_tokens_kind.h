/* dataset_tokens_kind.h - the token-corpus kind's state (ds->state), shared
 * by its two files: dataset_tokens.c (the checks at open, the source table,
 * the drivers) and dataset_tokens_read.c (sp__tok_read()). The rest of the
 * library sees a corpus through dataset_tokens.h only.
 *
 * Not installed, not part of the API: names are sp__tok_*.
 */
#ifndef SEEDPIPE_DATASET_TOKENS_KIND_H
#define SEEDPIPE_DATASET_TOKENS_KIND_H

#include "dataset/dataset_tokens.h"
#include "dataset/dataset_internal.h"
#include "common/le_internal.h"
#include "dataset/remote_internal.h"

#define TOK_HEADER 34   /* 9 magic + 8 version + 1 dtype + 8 S + 8 N */

struct sp__tok {
    char *idx_path, *bin_path;      /* PREFIX.idx, PREFIX.bin: messages */
    const uint8_t *idx;             /* the mapped .idx */
    size_t idx_size;
    const uint8_t *bin;             /* the mapped .bin (NULL when empty) */
    size_t bin_size;
    int code, itemsize, is_signed;  /* dtype code, bytes a token, signedness */
    uint64_t S, D, total;
    const uint8_t *lengths, *pointers, *docs;   /* into idx: i32[S], i64[S], i64[D+1] */
    int one_seq;                    /* every document is one sequence (document d = sequence d):
                                     * its length is lengths[d], one read */
    int shift;                      /* log2 of itemsize */
    /* remote: the store, the objects' names in it; idx is then malloc'd, bin NULL */
    sp__rio *rio;
    char *idx_name, *bin_name;
};

static inline uint64_t sp__tok_seq_ptr(const sp__tok *t, uint64_t s) {
    return sp__le_get64(t->pointers + 8 * s);
}

/* The first token of document d (d <= D): the tiling makes it a pointer. */
static inline uint64_t sp__tok_doc_start(const sp__tok *t, uint64_t d) {
    uint64_t s = t->one_seq ? d : sp__le_get64(t->docs + 8 * d);
    return s < t->S ? sp__tok_seq_ptr(t, s) >> t->shift : t->total;
}

#endif
