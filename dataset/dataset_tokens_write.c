/* dataset_tokens_write.c - the token-corpus writer (include/seedpipe/tokens.h):
 * PREFIX.bin and PREFIX.idx in megatron-core's MMIDIDX format, version 1
 * (dataset_tokens.c describes the layout and reads it back).
 *
 * HOW IT WORKS. sp_tokens_writer_open() starts the .bin as a temporary
 * file (common's atomic publish); each sp_tokens_writer_add() appends the
 * document's tokens to it through a 1 MiB buffer and remembers its length
 * (4 bytes a document: the only memory that grows). Close flushes the .bin,
 * then streams the .idx through the same buffer into its own temporary
 * file: the 34-byte header, the lengths (int32), the pointers (int64, the
 * running byte sum of the lengths: the sequences back to back, which is
 * what megatron-core writes and what our reader requires) and the document
 * index 0, 1, ..., D (one sequence a document). The .bin is published
 * first (fsync, rename), the .idx last (fsync, rename, folder fsync), so a
 * PREFIX.idx names a complete .bin. Tokens are taken in host order, which
 * must be little-endian (the format's; checked when compiling).
 */
#include "seedpipe/tokens.h"
#include "common/fileio_internal.h"
#include "common/le_internal.h"
#include "common/vec_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the token writer copies host-order tokens: a little-endian host is required"
#endif

#define TW_BUF (1u << 20)

struct sp_tokens_writer {
    char *bin_path, *idx_path;
    sp_publish *bin, *idx;
    int code, itemsize;
    int failed;              /* an add failed: the writer can only be aborted */
    int32_t *lens;           /* one a document */
    uint64_t n;
    size_t cap;              /* room in lens */
    uint8_t *buf;
    size_t used;
};

static const struct {
    const char *name;
    int code, size;
} tw_types[] = {
    {"uint8", 1, 1}, {"int8", 2, 1}, {"int16", 3, 2}, {"int32", 4, 4},
    {"int64", 5, 8}, {"uint16", 8, 2},
};

/* Write the buffer out to fd (the file being written). */
static int tw_flush(sp_tokens_writer *w, int fd, const char *path, sp_error *err) {
    if (w->used && sp__write_full(fd, w->buf, w->used) != 0)
        return sp_error_set(err, SP_EIO, "%s: write: %s", path, strerror(errno));
    w->used = 0;
    return SP_OK;
}

/* Append n bytes to the file behind fd through the buffer. */
static int tw_put(sp_tokens_writer *w, int fd, const char *path, const void *p, size_t n,
                  sp_error *err) {
    if (!n) return SP_OK;   /* an empty document: p may be NULL */
    if (w->used + n > TW_BUF) {
        int rc = tw_flush(w, fd, path, err);
        if (rc != SP_OK) return rc;
        if (n > TW_BUF) {
            if (sp__write_full(fd, p, n) != 0)
                return sp_error_set(err, SP_EIO, "%s: write: %s", path, strerror(errno));
            return SP_OK;
        }
    }
    memcpy(w->buf + w->used, p, n);
    w->used += n;
    return SP_OK;
}

void sp_tokens_writer_abort(sp_tokens_writer *w) {
    if (!w) return;
    sp__publish_abort(w->bin);
    sp__publish_abort(w->idx);
    free(w->bin_path);
    free(w->idx_path);
    free(w->lens);
    free(w->buf);
    free(w);
}

int sp_tokens_writer_open(const char *prefix, const char *dtype, sp_tokens_writer **out,
                          sp_error *err) {
    if (!out) return sp_error_set(err, SP_EINVAL, "sp_tokens_writer_open: out is NULL");
    *out = NULL;
    if (!prefix || !prefix[0])
        return sp_error_set(err, SP_EINVAL, "sp_tokens_writer_open: empty prefix");
    int k = -1;
    for (size_t i = 0; dtype && i < sizeof tw_types / sizeof tw_types[0]; i++)
        if (strcmp(dtype, tw_types[i].name) == 0) k = (int)i;
    if (k < 0)
        return sp_error_set(err, SP_EINVAL, "%s: token dtype \"%s\": expected uint8, int8, "
                            "int16, uint16, int32 or int64", prefix, dtype ? dtype : "(null)");
    sp_tokens_writer *w = calloc(1, sizeof *w);
    size_t l = strlen(prefix) + 5;
    if (w) {
        w->bin_path = malloc(l);
        w->idx_path = malloc(l);
        w->buf = malloc(TW_BUF);
    }
    if (!w || !w->bin_path || !w->idx_path || !w->buf) {
        sp_tokens_writer_abort(w);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", prefix);
    }
    snprintf(w->bin_path, l, "%s.bin", prefix);
    snprintf(w->idx_path, l, "%s.idx", prefix);
    w->code = tw_types[k].code;
    w->itemsize = tw_types[k].size;
    int rc = sp__publish_begin(w->bin_path, &w->bin, err);
    if (rc != SP_OK) {
        sp_tokens_writer_abort(w);
        return rc;
    }
    *out = w;
    return SP_OK;
}

int sp_tokens_writer_add(sp_tokens_writer *w, const void *tokens, size_t n, sp_error *err) {
    if (!w || (n && !tokens))
        return sp_error_set(err, SP_EINVAL, "sp_tokens_writer_add: NULL argument");
    if (w->failed)
        return sp_error_set(err, SP_EINVAL, "%s: an earlier add failed; abort the writer",
                            w->bin_path);
    if (n > INT32_MAX)
        return sp_error_set(err, SP_ELIMIT, "%s: document %llu: %zu tokens, a sequence holds "
                            "at most 2^31-1", w->bin_path, (unsigned long long)w->n, n);
    if (w->n >= UINT32_MAX)
        return sp_error_set(err, SP_ELIMIT, "%s: more than 2^32-1 documents", w->bin_path);
    if (SP__VEC_RESERVE(w->lens, w->cap, (size_t)w->n + 1, 1024) != 0)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", w->bin_path);
    int rc = tw_put(w, sp__publish_fd(w->bin), w->bin_path, tokens, n * (size_t)w->itemsize,
                    err);
    if (rc != SP_OK) {
        w->failed = 1;
        return rc;
    }
    w->lens[w->n++] = (int32_t)n;
    return SP_OK;
}

/* The .idx, streamed into its temporary file. */
static int write_idx(sp_tokens_writer *w, sp_error *err) {
    int fd = sp__publish_fd(w->idx);
    uint8_t h[34] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
    sp__le_put64(h + 9, 1);
    h[17] = (uint8_t)w->code;
    sp__le_put64(h + 18, w->n);       /* sequences */
    sp__le_put64(h + 26, w->n + 1);   /* document index entries */
    int rc = tw_put(w, fd, w->idx_path, h, sizeof h, err);
    uint8_t b[8];
    for (uint64_t i = 0; rc == SP_OK && i < w->n; i++) {
        sp__le_put32(b, (uint32_t)w->lens[i]);
        rc = tw_put(w, fd, w->idx_path, b, 4, err);
    }
    uint64_t at = 0;
    for (uint64_t i = 0; rc == SP_OK && i < w->n; i++) {
        sp__le_put64(b, at);
        at += (uint64_t)w->lens[i] * (uint64_t)w->itemsize;
        rc = tw_put(w, fd, w->idx_path, b, 8, err);
    }
    for (uint64_t d = 0; rc == SP_OK && d <= w->n; d++) {
        sp__le_put64(b, d);
        rc = tw_put(w, fd, w->idx_path, b, 8, err);
    }
    if (rc == SP_OK) rc = tw_flush(w, fd, w->idx_path, err);
    return rc;
}

int sp_tokens_writer_close(sp_tokens_writer *w, sp_error *err) {
    if (!w) return sp_error_set(err, SP_EINVAL, "sp_tokens_writer_close: writer is NULL");
    int rc = w->failed ? sp_error_set(err, SP_EINVAL, "%s: an earlier add failed; nothing "
                                      "written", w->bin_path)
                       : tw_flush(w, sp__publish_fd(w->bin), w->bin_path, err);
    if (rc == SP_OK) rc = sp__publish_begin(w->idx_path, &w->idx, err);
    if (rc == SP_OK) rc = write_idx(w, err);
    if (rc == SP_OK) {
        rc = sp__publish_commit_ex(w->bin, SP__SYNC_FILE, err);
        w->bin = NULL;
    }
    if (rc == SP_OK) {
        rc = sp__publish_commit_ex(w->idx, SP__SYNC_DIR, err);
        w->idx = NULL;
    }
    sp_tokens_writer_abort(w);
    return rc;
}
