/* cache_batch.c - whole batch files on disk: read one and check it against
 * its entry, encode one and write it as a new file (cache_internal.h).
 *
 * In the cache's stack (cache/, bottom first): above the file format
 * (cache_file.c: encode, parse, decode) and the POSIX helpers (cache_fs.c),
 * the only cache files it calls; below everything that reads or writes an
 * entry. Readers (cache_read.c), `cache verify` (cache_gc.c), writers
 * (cache_writer.c) and the pool's workers (pool/, in their own
 * processes) all read and write batch files through here, each with its own
 * codec state (sp__cb_io), so a batch is checked the same way whoever reads
 * it.
 */
#include "cache/cache_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "seedpipe/loader.h"

void sp__cb_io_free(sp__cb_io *io) {
    ZSTD_freeDCtx(io->dctx);
    ZSTD_freeCCtx(io->cctx);
    sp__buf_free(&io->file);
    sp__buf_free(&io->meta);
    sp__buf_free(&io->scratch);
    memset(io, 0, sizeof *io);
}

/* The header of a file read for rq against rq's entry and manifest line,
 * and what its metadata claims against a batch of rq->cap samples.
 * @return 0 or SP_EFORMAT "path: reason". */
static int check_header(const sp__cb_read_req *rq, const sp__cb_header *h, const char *path,
                        sp_error *err) {
    const sp__cm_batch *line = rq->line;
    uint32_t cap = rq->cap;
    if (h->key.hi != rq->key.hi || h->key.lo != rq->key.lo || h->epoch != rq->epoch ||
        h->index != rq->index || h->sample_bytes != rq->sample_bytes ||
        h->file_hash != line->file_hash ||
        h->meta_raw + (uint64_t)h->count * h->sample_bytes != line->raw)
        return sp_error_set(err, SP_EFORMAT, "%s: header does not match the entry's manifest",
                            path);
    /* A batch logs at most one failure per position and substitute try. */
    if (h->count > cap || h->nskipped > cap || h->nsubstituted > cap ||
        h->nfailures > (uint64_t)cap * (SP_SUBSTITUTE_TRIES + 1) ||
        h->meta_raw > (uint64_t)cap * 36 + (uint64_t)h->nfailures * (16 + SP_ERROR_MSG_MAX))
        return sp_error_set(err, SP_EFORMAT, "%s: metadata larger than a batch of %u can have",
                            path, cap);
    return SP_OK;
}

int sp__cb_read(const sp__cb_read_req *rq, sp__cb_io *io, sp_batch *out, sp__cb_header *h,
                int *enoent, sp_error *err) {
    char path[PATH_CAP + 40];
    snprintf(path, sizeof path, "%s/%s", rq->dirpath, rq->name);
    *enoent = 0;
    if (!io->dctx && !(io->dctx = ZSTD_createDCtx()))
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    size_t len;
    /* Bounded by the size the manifest records, compared before a byte is
     * read: a file grown (or made sparse) under the entry costs nothing. */
    uint64_t want = rq->line->stored < SP__CB_MAX_RAW ? rq->line->stored : SP__CB_MAX_RAW;
    if (sp__read_file_at(rq->dirfd, rq->name, NULL, want, &io->file, &len, NULL) != 0) {
        int e = errno;
        if (e == ENOMEM) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
        *enoent = e == ENOENT;
        if (e == EFBIG)
            return sp_error_set(err, SP_EFORMAT, "%s: larger than the %" PRIu64 " bytes the "
                                "manifest says (extended)", path, rq->line->stored);
        return sp_error_set(err, SP_EFORMAT, "%s: %s", path, e == ENOENT ? "missing" : strerror(e));
    }
    if (len != rq->line->stored)
        return sp_error_set(err, SP_EFORMAT, "%s: %zu bytes, the manifest says %" PRIu64
                            " (truncated or extended)", path, len, rq->line->stored);
    int rc = sp__cb_parse_header(io->file.p, len, path, h, err);
    if (rc == 0) rc = check_header(rq, h, path, err);
    if (rc == 0)
        rc = sp__cb_decode_digest(io->dctx, io->file.p, len, path, h, out, &io->meta,
                                  &io->scratch, rq->digest, err);
    return rc;
}

int sp__cb_write(const sp__cb_write_req *rq, const sp_batch *b, sp__cb_io *io,
                 sp__cm_batch *line, sp_error *err) {
    if (!io->cctx) {
        io->cctx = ZSTD_createCCtx();
        if (!io->cctx ||
            ZSTD_isError(ZSTD_CCtx_setParameter(io->cctx, ZSTD_c_compressionLevel, rq->level)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(io->cctx, ZSTD_c_contentSizeFlag, 1))) {
            ZSTD_freeCCtx(io->cctx);
            io->cctx = NULL;
            return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
        }
    }
    sp__cb_header h;
    size_t len;
    sp__cb_encode_req eq = {.key = rq->key, .sample_bytes = rq->sample_bytes,
                            .filter = rq->filter, .ld = rq->ld, .ctx = io->cctx,
                            .scratch = &io->scratch};
    int rc = sp__cb_encode(&eq, b, &io->file, &len, &h, err);
    if (rc) return rc;
    char name[32];
    snprintf(name, sizeof name, "b%08" PRIu64, b->index);
    int e = sp__write_new(rq->dirfd, rq->no_fsync, name, io->file.p, len);
    if (e) return sp_error_set(err, SP_EIO, "%s/%s: %s", rq->dirpath, name, strerror(e));
    line->stored = len;
    line->raw = h.meta_raw + (uint64_t)b->count * rq->sample_bytes;
    line->file_hash = h.file_hash;
    return SP_OK;
}
