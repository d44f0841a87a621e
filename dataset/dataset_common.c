/* dataset_common.c - the helpers every dataset source shares, below all of
 * them: string copies and path joins, the collected (path, label) entries of
 * the encoded-file kinds, numeric class names, the sample arrays'
 * allocation, hashing a file descriptor's bytes, and the little-endian byte
 * buffers the two index formats are built in (dataset_internal.h; the
 * index files are published by common.h's sp_write_file_atomic()).
 *
 * Layering: the dispatcher (dataset_open.c) calls down into the per-kind files
 * (dataset_folder.c, dataset_idx.c, dataset_list.c, dataset_tar*.c), those
 * call down into dataset_index.c and this file; this file calls nothing of
 * the dataset code.
 */
#include "dataset/dataset_internal.h"
#include "common/fileio_internal.h"
#include "common/hash_internal.h"
#include "common/le_internal.h"
#include "common/vec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- strings and collected entries ------------------------------------------ */

char *sp__ds_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

char *sp__ds_join(const char *a, const char *b) {
    if (b[0] == '/') return sp__ds_strdup(b);
    size_t la = strlen(a), lb = strlen(b);
    int slash = la > 0 && a[la - 1] != '/';
    char *p = malloc(la + (size_t)slash + lb + 1);
    if (!p) return NULL;
    memcpy(p, a, la);
    if (slash) p[la] = '/';
    memcpy(p + la + (size_t)slash, b, lb + 1);
    return p;
}

int sp__ds_is_image_ext(const char *ext) {
    static const char *const EXTS[] = {"png", "jpg", "jpeg", "bmp", "webp", "tif", "tiff"};
    for (size_t e = 0; e < sizeof EXTS / sizeof *EXTS; e++) {
        const char *x = ext, *y = EXTS[e];
        while (*y && sp__ds_lower(*x) == *y) x++, y++;
        if (!*x && !*y) return 1;   /* ASCII only: no locale decides what is an image */
    }
    return 0;
}

int sp__ds_sample_path(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err) {
    out->full_path = sp__ds_join(ds->base, ds->pool + ds->path_off[i]);
    if (!out->full_path) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    out->src.path = out->full_path;
    return SP_OK;
}

int sp__ds_entries_push(sp__ds_entries *e, char *rel, int32_t label, int line) {
    if (SP__VEC_RESERVE(e->v, e->cap, e->n + 1, 256) != 0) { free(rel); return SP_ENOMEM; }
    e->v[e->n].rel = rel;
    e->v[e->n].label = label;
    e->v[e->n].line = line;
    e->n++;
    return SP_OK;
}

void sp__ds_entries_free(sp__ds_entries *e) {
    for (size_t i = 0; i < e->n; i++) free(e->v[i].rel);
    free(e->v);
    e->v = NULL;
    e->n = e->cap = 0;
}

/* ---- sample arrays and content hashes -------------------------------------- */

int sp__ds_numeric_classes(sp_dataset *ds, int k, sp_error *err) {
    ds->class_names = calloc((size_t)k, sizeof *ds->class_names);
    if (!ds->class_names) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    ds->num_classes = k;
    for (int c = 0; c < k; c++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%d", c);
        ds->class_names[c] = sp__ds_strdup(buf);
        if (!ds->class_names[c])
            return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    }
    return SP_OK;
}

int sp__ds_hash_fd(int fd, const char *path, uint64_t max_bytes,
                   uint64_t *size, sp_digest *digest, sp_error *err) {
    sp__hash hs, *st = &hs;
    sp__hash_init(st);
    enum { CHUNK = 1 << 16 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    uint64_t total = 0;
    int rc = SP_OK;
    for (;;) {
        ssize_t r = read(fd, buf, CHUNK);
        if (r < 0) {
            if (errno == EINTR) continue;
            rc = sp_error_set(err, SP_EIO, "%s: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        total += (uint64_t)r;
        if (total > max_bytes) {
            rc = sp_error_set(err, SP_ELIMIT, "%s: file larger than the limit of %llu bytes",
                              path, (unsigned long long)max_bytes);
            break;
        }
        sp__hash_bytes(st, buf, (size_t)r);
    }
    if (rc == SP_OK) {
        *size = total;
        *digest = sp__hash_digest(st);
    }
    free(buf);
    return rc;
}

int sp__ds_alloc_samples(sp_dataset *ds, size_t n, size_t pool_len, sp_error *err) {
    ds->n = n;
    ds->pool = malloc(pool_len ? pool_len : 1);
    ds->path_off = malloc(n * sizeof *ds->path_off);
    ds->labels = malloc(n * sizeof *ds->labels);
    ds->sizes = malloc(n * sizeof *ds->sizes);
    ds->hashes = malloc(n * sizeof *ds->hashes);
    ds->class_counts = calloc((size_t)ds->num_classes, sizeof *ds->class_counts);
    if (!ds->pool || !ds->path_off || !ds->labels || !ds->sizes || !ds->hashes ||
        !ds->class_counts)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory for %zu samples", ds->root, n);
    return SP_OK;
}

/* ---- little-endian fields of the index files --------------------------------- */

void sp__ds_buf_u32(sp__sbuf *b, uint32_t v) {
    uint8_t x[4];
    sp__le_put32(x, v);
    sp__sbuf_put(b, x, 4);
}

void sp__ds_buf_u64(sp__sbuf *b, uint64_t v) {
    uint8_t x[8];
    sp__le_put64(x, v);
    sp__sbuf_put(b, x, 8);
}

void sp__ds_buf_str(sp__sbuf *b, const char *s) {
    size_t l = s ? strlen(s) : 0;
    sp__ds_buf_u32(b, (uint32_t)l);
    if (l) sp__sbuf_put(b, s, l);
}


/* Absolute so that a later chdir() of the process (a daemon, a worker)
 * cannot change what a sample path means. */
int sp__ds_set_base(sp_dataset *ds, int is_dir, sp_error *err) {
    char *dir;
    if (is_dir) {
        dir = sp__ds_strdup(ds->root);
    } else {
        const char *slash = strrchr(ds->root, '/');
        dir = slash ? strndup(ds->root, (size_t)(slash - ds->root) + (slash == ds->root))
                    : sp__ds_strdup(".");
    }
    if (!dir) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    ds->base = realpath(dir, NULL);
    int rc = ds->base ? SP_OK : sp_error_set(err, SP_EIO, "%s: %s", dir, strerror(errno));
    free(dir);
    return rc;
}
