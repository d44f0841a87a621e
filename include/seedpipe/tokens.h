/* seedpipe/tokens.h - writing a token corpus: a Megatron indexed dataset
 * (PREFIX.idx + PREFIX.bin, megatron-core's MMIDIDX format, version 1).
 *
 * What it writes, megatron-core's IndexedDataset reads (and seedpipe opens
 * as a dataset of kind "tokens", dataset.h; docs/tokens.md is the manual):
 * one document per sp_tokens_writer_add(), each one sequence, the sequences
 * back to back in PREFIX.bin, then PREFIX.idx (the header, the sequence
 * lengths, pointers and the document index) at close.
 *
 *   sp_tokens_writer *w;
 *   sp_tokens_writer_open("corpus/train", "uint16", &w, &err);
 *   sp_tokens_writer_add(w, doc0, n0, &err);     (uint16_t tokens)
 *   sp_tokens_writer_add(w, doc1, n1, &err);
 *   sp_tokens_writer_close(w, &err);             (or sp_tokens_writer_abort(w))
 *
 * Crash safety: both files are written to temporary names beside PREFIX
 * (common.h's atomic publish) and appear only at close: the .bin renamed
 * into place after an fsync, then the .idx after its own fsync and with the
 * folder fsync'd. A crash before close leaves at most temporary files
 * (".train.bin.tmp-..."), never a half corpus under PREFIX; a crash between
 * the two renames leaves a new .bin beside an old .idx (or none), which the
 * reader refuses (the .idx's sequences must end at the .bin's size).
 *
 * A writer is one thread's; writers of different prefixes are independent.
 */
#ifndef SEEDPIPE_TOKENS_H
#define SEEDPIPE_TOKENS_H

#include "seedpipe/common.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_tokens_writer sp_tokens_writer;

/*! sp_tokens_writer_open() : start a corpus at PREFIX (PREFIX.bin and
 *  PREFIX.idx are written at close; their folder must exist). dtype, as
 *  numpy names it: "uint8", "int8", "int16", "uint16", "int32" or "int64"
 *  (Megatron's codes 1, 2, 3, 8, 4, 5; the float types are refused).
 *  @return 0 with *out set, SP_EINVAL (NULL or empty prefix, unknown
 *  dtype: naming it), SP_EIO (the temporary file: naming the path),
 *  SP_ENOMEM. */
SP_API int sp_tokens_writer_open(const char *prefix, const char *dtype, sp_tokens_writer **out,
                                 sp_error *err);

/*! sp_tokens_writer_add() : append one document of n tokens (n may be 0),
 *  `tokens` an array of n integers of the corpus's dtype in host byte
 *  order (uint16_t for "uint16", ...); written as one sequence.
 *  @return 0, SP_EINVAL (tokens NULL with n > 0), SP_ELIMIT (n above
 *  2^31 - 1, the format's sequence length; more than 2^32 - 1 documents),
 *  SP_EIO (a write: ENOSPC and the like named), SP_ENOMEM. After a
 *  failure the writer can only be aborted. */
SP_API int sp_tokens_writer_add(sp_tokens_writer *w, const void *tokens, size_t n, sp_error *err);

/*! sp_tokens_writer_close() : write PREFIX.idx and publish both files
 *  (above); frees w whatever happens (on failure nothing new appears under
 *  PREFIX but possibly the .bin, which no .idx matches). A corpus with no
 *  document is written (megatron-core reads it) but seedpipe's reader
 *  refuses it (SP_EFORMAT "no documents"). @return 0, SP_EIO, SP_ENOMEM, or
 *  the error of an earlier add. */
SP_API int sp_tokens_writer_close(sp_tokens_writer *w, sp_error *err);

/*! sp_tokens_writer_abort() : remove the temporary files and free w;
 *  PREFIX's files are left as they were. Accepts NULL. */
SP_API void sp_tokens_writer_abort(sp_tokens_writer *w);

#ifdef __cplusplus
}
#endif
#endif
