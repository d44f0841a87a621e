/* dataset_open.c - sp_dataset_open(): kind detection over the driver table,
 * the fingerprint, and sp_dataset_open_list() (include/seedpipe/dataset.h).
 *
 * An sp_dataset is built once by sp_dataset_open() and is immutable after:
 * every sample has a canonical index, a relative path, a label, a content
 * size and an XXH3-128 of its content. This file is the dispatcher on top
 * of the dataset kinds: it walks the driver table (dataset_drivers.c, each
 * entry a kind's sp__ds_driver in the kind's own file) and opens the path
 * with the first driver whose probe claims it; the kind's opener fills the
 * sample table with the helpers below it (dataset_index.c,
 * dataset_common.c) and sets its source table (ds->ops); then this file
 * computes the fingerprint over the sample table (or the kind's own
 * fingerprint entry computes it). Nothing here names a kind: adding one is
 * a new file and one line in dataset_drivers.c. What an open dataset
 * answers (accessors, sp__dataset_read(), close) is dataset_access.c's,
 * below every kind; a kind made of other datasets (a mixture) opens them
 * through the req->open pointer it is given, so no kind calls up here.
 *
 * DETECTION: two rounds over the table, in its order. The first asks the
 * drivers that look at the path alone (a .mix name, "fakedata:", a token
 * corpus's PREFIX, URLs, a brace pattern); then the path must be an
 * existing folder or regular file (SP_EIO or SP_EFORMAT naming it), whose
 * folder becomes ds->base and, for a folder, its .tar files and
 * sub-folders are counted; the second round asks the drivers of local
 * files and folders (shards, ImageFolder, IDX, list: a list file takes any
 * regular file, an ImageFolder any folder, so the walk always ends).
 *
 * FINGERPRINT LAYOUT (format version 1). XXH3-128 with seed 0, streamed
 * over these bytes, all integers little-endian:
 *
 *     "seedpipe.dataset.v1"            19 ASCII bytes, no NUL
 *     u32 kind                         the driver's number: 0 imagefolder, 1 idx,
 *                                      2 list, 3 webdataset, 4 an in-memory
 *                                      sample list (sp_dataset_kind)
 *     u64 n                            number of samples
 *     u32 num_classes
 *     num_classes times:  u32 len, len bytes of the class name
 *     u32 raw_w, u32 raw_h             IDX image size (ops->raw_dims); 0, 0 otherwise
 *     n times, in canonical order:
 *         u32 len, len bytes of the relative path (sp_dataset_path())
 *         u32 label
 *         u64 content size in bytes
 *         u64 content hash hi, u64 content hash lo
 *
 * A kind with a fingerprint entry in its source table (a token corpus, a
 * mixture, generated images) computes its own instead, described there.
 *
 * The content hash is XXH3-128 (seed 0) of the file's bytes (IDX: of the
 * image's raw_h * raw_w * channels pixel bytes, row-major, channels
 * interleaved). The digest's `hi` is
 * XXH128_hash_t.high64 and `lo` its low64, so the hex form is XXH128's
 * canonical big-endian form. The root path is NOT hashed: a dataset copied
 * elsewhere keeps its fingerprint.
 *
 * Sample files are found under ds->base, the resolved absolute folder of the
 * root (ImageFolder) or of the list / IDX file, taken once at open: a later
 * chdir() or a swapped symlink does not change what a sample path means.
 */
#include "dataset/dataset_internal.h"
#include "common/hash_internal.h"
#include "common/le_internal.h"
#include "dataset/remote_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- fingerprint -------------------------------------------------------------- */

/* The fingerprint's fields go through a small buffer: XXH3 over the pieces
 * is XXH3 over their concatenation, and a few million 4-byte updates cost
 * more than the hashing. */
typedef struct fp_buf {
    sp__hash *st;
    size_t n;
    uint8_t b[4096];
} fp_buf;

static void fp_bytes(fp_buf *f, const void *p, size_t len) {
    if (f->n + len > sizeof f->b) {
        sp__hash_bytes(f->st, f->b, f->n);
        f->n = 0;
    }
    if (len > sizeof f->b) {
        sp__hash_bytes(f->st, p, len);
        return;
    }
    memcpy(f->b + f->n, p, len);
    f->n += len;
}

static void put_u32(fp_buf *f, uint32_t v) {
    uint8_t b[4];
    sp__le_put32(b, v);
    fp_bytes(f, b, 4);
}

static void put_u64(fp_buf *f, uint64_t v) {
    uint8_t b[8];
    sp__le_put64(b, v);
    fp_bytes(f, b, 8);
}

static void put_str(fp_buf *f, const char *s) {
    size_t len = strlen(s);
    put_u32(f, (uint32_t)len);
    fp_bytes(f, s, len);
}

static int compute_fingerprint(sp_dataset *ds, sp_error *err) {
    fp_buf *f = malloc(sizeof *f);
    if (!f) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    sp__hash hs, *st = &hs;
    sp__hash_init(st);
    f->st = st;
    f->n = 0;
    static const char tag[] = "seedpipe.dataset.v1";
    fp_bytes(f, tag, sizeof tag - 1);
    put_u32(f, sp__ds_kind(ds));
    put_u64(f, ds->n);
    put_u32(f, (uint32_t)ds->num_classes);
    for (int c = 0; c < ds->num_classes; c++) put_str(f, ds->class_names[c]);
    int raw_w = 0, raw_h = 0;   /* IDX's image size; 0, 0 otherwise */
    if (ds->ops->raw_dims) ds->ops->raw_dims(ds, &raw_w, &raw_h);
    put_u32(f, (uint32_t)raw_w);
    put_u32(f, (uint32_t)raw_h);
    for (uint64_t i = 0; i < ds->n; i++) {
        put_str(f, ds->pool + ds->path_off[i]);
        put_u32(f, (uint32_t)ds->labels[i]);
        put_u64(f, ds->sizes[i]);
        put_u64(f, ds->hashes[i].hi);
        put_u64(f, ds->hashes[i].lo);
    }
    sp__hash_bytes(st, f->b, f->n);
    free(f);
    ds->fingerprint = sp__hash_digest(st);
    return SP_OK;
}

/* ---- open ------------------------------------------------------------------------ */

/* The bounds of sp_dataset_limits, defaults for zero fields. */
static void apply_limits(sp_dataset *ds, const sp_dataset_limits *limits) {
    ds->max_samples = limits && limits->max_samples ? limits->max_samples
                                                    : SP_DS_DEFAULT_MAX_SAMPLES;
    ds->max_file_bytes = limits && limits->max_file_bytes ? limits->max_file_bytes
                                                          : SP_DS_DEFAULT_MAX_FILE_BYTES;
    ds->index_mode = limits ? limits->index : SP_INDEX_AUTO;
    ds->hash_threads = limits ? limits->hash_threads : 0;
    /* Sample indices are 32-bit in the sampler and the Philox counters. */
    if (ds->max_samples > UINT32_MAX) ds->max_samples = UINT32_MAX;
}

/* ds: its fingerprint, or closed on failure. */
static int finish(sp_dataset *ds, int rc, sp_dataset **out, sp_error *err) {
    if (rc == SP_OK && ds->ops->fingerprint)
        rc = ds->ops->fingerprint(ds, &ds->fingerprint, err);
    else if (rc == SP_OK)
        rc = compute_fingerprint(ds, err);
    if (rc != SP_OK) {
        sp_dataset_close(ds);
        return rc;
    }
    *out = ds;
    return SP_OK;
}

int sp_dataset_open_list(const char *base, const sp_sample_list *list,
                         const sp_dataset_limits *limits, sp_dataset **out, sp_error *err) {
    if (!out) return sp_error_set(err, SP_EINVAL, "sp_dataset_open_list: out is NULL");
    *out = NULL;
    if (!list) return sp_error_set(err, SP_EINVAL, "sp_dataset_open_list: list is NULL");
    const char *dir = base && base[0] ? base : ".";
    sp_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return sp_error_set(err, SP_ENOMEM, "sample list: out of memory");
    ds->driver = &sp__ds_driver_samples;
    ds->ops = sp__ds_driver_samples.ops;
    apply_limits(ds, limits);
    int rc = SP_OK;
    struct stat st;
    /* root and base: the folder relative paths are under, resolved now */
    ds->base = realpath(dir, NULL);
    if (!ds->base)
        rc = sp_error_set(err, SP_EIO, "sample list: base folder %s: %s", dir, strerror(errno));
    else if (stat(ds->base, &st) != 0 || !S_ISDIR(st.st_mode))
        rc = sp_error_set(err, SP_EINVAL, "sample list: base %s is not a folder", dir);
    else if (!(ds->root = sp__ds_strdup(ds->base)))
        rc = sp_error_set(err, SP_ENOMEM, "sample list: out of memory");
    if (rc == SP_OK) rc = sp__ds_open_samples(ds, list, err);
    return finish(ds, rc, out, err);
}

/* A zeroed dataset with root = path (trailing '/' removed) and the limits
 * applied (NULL on out of memory). */
static sp_dataset *new_dataset(const char *path, const sp_dataset_limits *limits) {
    sp_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return NULL;
    ds->root = sp__ds_strdup(path);
    if (!ds->root) {
        free(ds);
        return NULL;
    }
    int remote = sp__rio_is_url(path);   /* a folder URL keeps its '/' */
    for (size_t l = strlen(ds->root); !remote && l > 1 && ds->root[l - 1] == '/'; l--)
        ds->root[l - 1] = '\0';
    apply_limits(ds, limits);
    return ds;
}

/* One round of the walk: the first driver of this round whose probe
 * claims the path (*found stays NULL when none does). */
static int probe_round(const sp__ds_req *rq, int local, const sp__ds_driver **found,
                       sp_error *err) {
    for (const sp__ds_driver *const *d = sp__ds_drivers; *d; d++) {
        if ((*d)->local != local || !(*d)->probe) continue;
        int r = (*d)->probe(rq, err);
        if (r < 0) return r;
        if (r > 0) {
            *found = *d;
            return SP_OK;
        }
    }
    return SP_OK;
}

/* Between the rounds: the path must be a local folder or regular file. */
static int stat_local(sp_dataset *ds, sp__ds_req *rq, sp_error *err) {
    struct stat st;
    if (stat(ds->root, &st) != 0)
        return sp_error_set(err, SP_EIO, "%s: %s", ds->root, strerror(errno));
    if (!(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
        return sp_error_set(err, SP_EFORMAT, "%s: not a directory or a regular file", ds->root);
    rq->is_dir = S_ISDIR(st.st_mode);
    int rc = sp__ds_set_base(ds, rq->is_dir, err);
    if (rc == SP_OK && rq->is_dir)
        rc = sp__ds_dir_kind(ds->root, &rq->shards, &rq->folders, err);
    return rc;
}

static int open_path(const char *path, const sp_dataset_limits *limits, sp_dataset **out,
                     sp_error *err) {
    if (!out) return sp_error_set(err, SP_EINVAL, "sp_dataset_open: out is NULL");
    *out = NULL;
    if (!path || !path[0]) return sp_error_set(err, SP_EINVAL, "sp_dataset_open: empty path");
    sp_dataset *ds = new_dataset(path, limits);
    if (!ds) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    const char *slash = strrchr(ds->root, '/');
    sp__ds_req rq = {.path = path, .root = ds->root, .leaf = slash ? slash + 1 : ds->root,
                     .url = sp__rio_is_url(path), .limits = limits, .open = open_path};
    const sp__ds_driver *drv = NULL;
    int rc = probe_round(&rq, 0, &drv, err);
    if (rc == SP_OK && !drv) rc = stat_local(ds, &rq, err);
    if (rc == SP_OK && !drv) rc = probe_round(&rq, 1, &drv, err);
    if (rc == SP_OK && !drv)
        rc = sp_error_set(err, SP_EFORMAT, "%s: no dataset kind takes it", ds->root);
    if (rc == SP_OK) {
        ds->driver = drv;
        ds->ops = drv->ops;
        rc = drv->open(ds, &rq, err);
    }
    return finish(ds, rc, out, err);
}

int sp_dataset_open(const char *path, const sp_dataset_limits *limits, sp_dataset **out,
                    sp_error *err) {
    return open_path(path, limits, out, err);
}

/* The name of the first driver with kind number k (the table names every
 * kind; several drivers may open one kind: local and remote shards). */
const char *sp__dataset_kind_name(sp_dataset_kind k) {
    for (const sp__ds_driver *const *d = sp__ds_drivers; *d; d++)
        if ((*d)->code == (uint32_t)k) return (*d)->name;
    return "unknown";
}
