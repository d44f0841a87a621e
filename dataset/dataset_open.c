/* dataset_open.c - the dataset index: kind detection, accessors, content hashes,
 * the fingerprint and sp_dataset_read() (include/seedpipe/dataset.h).
 *
 * An sp_dataset is built once by sp_dataset_open() and is immutable after:
 * every sample has a canonical index, a relative path, a label, a content
 * size and an XXH3-128 of its content. This file is the dispatcher on top
 * of the dataset sources: it detects the kind and calls down into the
 * per-kind opener (dataset_folder.c, dataset_idx.c, dataset_list.c,
 * dataset_tar.c, dataset_tokens.c), which fills those arrays with the helpers below it
 * (dataset_index.c, dataset_common.c); then it computes the fingerprint over
 * them and serves the samples through the kind's source table (ds->ops: the
 * opener sets it; dataset_files.c, dataset_idx.c, dataset_tar_read.c,
 * dataset_remote.c, dataset_mix.c). No source calls back up into this
 * file; only the shard writer (dataset_tar_write.c) and the mixture
 * (dataset_mix.c, which holds the public sp_dataset_open() and opens its
 * sources through sp__ds_open_plain() here), above it, read samples
 * through sp_dataset_read().
 *
 * FINGERPRINT LAYOUT (format version 1). XXH3-128 with seed 0, streamed
 * over these bytes, all integers little-endian:
 *
 *     "seedpipe.dataset.v1"            19 ASCII bytes, no NUL
 *     u32 kind                         0 imagefolder, 1 idx, 2 list, 3 webdataset,
 *                                      4 an in-memory sample list
 *     u64 n                            number of samples
 *     u32 num_classes
 *     num_classes times:  u32 len, len bytes of the class name
 *     u32 raw_w, u32 raw_h             IDX image size; 0, 0 otherwise
 *     n times, in canonical order:
 *         u32 len, len bytes of the relative path (sp_dataset_path())
 *         u32 label
 *         u64 content size in bytes
 *         u64 content hash hi, u64 content hash lo
 *
 * A token corpus (dataset_tokens.c) has no sample table: its source table's
 * fingerprint entry computes its own ("seedpipe.tokens.v1", described
 * there), which replaces this layout.
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
 * Every kind's read may run concurrently in threads and forked children; it
 * re-hashes the bytes and refuses a sample that changed.
 */
#include "dataset/dataset_internal.h"
#include "common/fileio_internal.h"
#include "common/hash_internal.h"
#include "common/le_internal.h"
#include "dataset/remote_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    put_u32(f, (uint32_t)ds->kind);
    put_u64(f, ds->n);
    put_u32(f, (uint32_t)ds->num_classes);
    for (int c = 0; c < ds->num_classes; c++) put_str(f, ds->class_names[c]);
    put_u32(f, (uint32_t)ds->raw_w);
    put_u32(f, (uint32_t)ds->raw_h);
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

/* ---- open / destroy ---------------------------------------------------------- */

/* 1 if `name` (a basename) is an IDX images file name. */
static int is_idx_name(const char *name) {
    static const char *const suffixes[] = {
        "images-idx3-ubyte", "images.idx3-ubyte",
        "images-idx3-ubyte.gz", "images.idx3-ubyte.gz",
        "images-idx4-ubyte", "images-idx4-ubyte.gz", NULL};
    size_t ln = strlen(name);
    for (int k = 0; suffixes[k]; k++) {
        size_t ls = strlen(suffixes[k]);
        if (ln >= ls && strcmp(name + ln - ls, suffixes[k]) == 0) return 1;
    }
    return 0;
}

/* ds->base: the absolute, resolved folder that sample paths are relative to:
 * the root itself for an ImageFolder, the folder holding the file (list or
 * IDX) otherwise. Absolute so that a later chdir() of the process (a
 * daemon, a worker) cannot change what a sample path means. */
static int set_base(sp_dataset *ds, int is_dir, sp_error *err) {
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

int sp_dataset_open_list(const char *base, const sp_sample_list *list,
                         const sp_dataset_limits *limits, sp_dataset **out, sp_error *err) {
    if (!out) return sp_error_set(err, SP_EINVAL, "sp_dataset_open_list: out is NULL");
    *out = NULL;
    if (!list) return sp_error_set(err, SP_EINVAL, "sp_dataset_open_list: list is NULL");
    const char *dir = base && base[0] ? base : ".";
    sp_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return sp_error_set(err, SP_ENOMEM, "sample list: out of memory");
    ds->kind = SP_DATASET_SAMPLES;
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
    if (rc == SP_OK) rc = compute_fingerprint(ds, err);
    if (rc != SP_OK) {
        sp_dataset_close(ds);
        return rc;
    }
    *out = ds;
    return SP_OK;
}

sp_dataset *sp__ds_new(const char *path, const sp_dataset_limits *limits) {
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

/* 1 if a URL names a token corpus: it ends in .idx or .bin, or its last
 * path component is neither empty (a folder), a .tar shard nor a brace
 * pattern of shards (then it is the corpus's prefix). */
static int is_token_url(const char *url) {
    size_t l = strlen(url);
    if (l > 4 && (strcmp(url + l - 4, ".idx") == 0 || strcmp(url + l - 4, ".bin") == 0))
        return 1;
    const char *host = strstr(url, "://");
    const char *path = host ? strchr(host + 3, '/') : NULL;
    if (!path) return 0;   /* a bucket or a server alone */
    const char *leaf = strrchr(path, '/') + 1;
    size_t ll = strlen(leaf);
    return ll && !(ll > 4 && strcmp(leaf + ll - 4, ".tar") == 0) && !strchr(leaf, '{');
}

/* sp_dataset_open() of every kind but a mixture (dataset_mix.c holds the
 * public entry point and calls this for anything that is not a .mix file). */
int sp__ds_open_plain(const char *path, const sp_dataset_limits *limits,
                      sp_dataset **out, sp_error *err) {
    if (!out) return sp_error_set(err, SP_EINVAL, "sp_dataset_open: out is NULL");
    *out = NULL;
    if (!path || !path[0]) return sp_error_set(err, SP_EINVAL, "sp_dataset_open: empty path");
    sp_dataset *ds = sp__ds_new(path, limits);
    if (!ds) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);

    int rc;
    struct stat st;
    int shards = 0, folders = 0;
    char *prefix = NULL;
    if (sp__ds_is_fake(path)) {
        ds->kind = SP_DATASET_FAKE;
        rc = sp__ds_open_fake(ds, err);
    } else if (!sp__rio_is_url(path) && sp__ds_tokens_prefix(ds->root, &prefix) != SP_OK) {
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    } else if (prefix) {
        ds->kind = SP_DATASET_TOKENS;
        rc = sp__ds_open_tokens(ds, prefix, err);
        free(prefix);
    } else if (sp__rio_is_url(path) && is_token_url(path)) {
        ds->kind = SP_DATASET_TOKENS;
        rc = sp__ds_open_tokens(ds, NULL, err);
    } else if (sp__rio_is_url(path)) {
        ds->kind = SP_DATASET_WEBDATASET;
        rc = sp__ds_open_remote(ds, err);
    } else if (sp__ds_is_shard_pattern(ds->root)) {
        ds->kind = SP_DATASET_WEBDATASET;
        rc = set_base(ds, 0, err);
        if (rc == SP_OK) rc = sp__ds_open_tar(ds, err);
    } else if (stat(ds->root, &st) != 0) {
        rc = sp_error_set(err, SP_EIO, "%s: %s", ds->root, strerror(errno));
    } else if (!(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
        rc = sp_error_set(err, SP_EFORMAT, "%s: not a directory or a regular file", ds->root);
    } else if ((rc = set_base(ds, S_ISDIR(st.st_mode), err)) != SP_OK) {
        /* err is set */
    } else if (S_ISDIR(st.st_mode) &&
               (rc = sp__ds_dir_kind(ds->root, &shards, &folders, err)) != SP_OK) {
        /* err is set */
    } else if (S_ISDIR(st.st_mode) && shards && folders) {
        rc = sp_error_set(err, SP_EFORMAT,
                          "%s: holds both class folders (an ImageFolder) and .tar shards (a "
                          "WebDataset); give the shards their own folder", ds->root);
    } else if (S_ISDIR(st.st_mode) && shards) {
        ds->kind = SP_DATASET_WEBDATASET;
        rc = sp__ds_open_tar(ds, err);
    } else if (S_ISDIR(st.st_mode)) {
        ds->kind = SP_DATASET_IMAGEFOLDER;
        rc = sp__ds_open_folder(ds, err);
    } else {
        const char *slash = strrchr(ds->root, '/');
        const char *base = slash ? slash + 1 : ds->root;
        size_t bl = strlen(base);
        if (is_idx_name(base)) {
            ds->kind = SP_DATASET_IDX;
            rc = sp__ds_open_idx(ds, err);
        } else if (bl > 4 && strcmp(base + bl - 4, ".tar") == 0) {
            ds->kind = SP_DATASET_WEBDATASET;
            rc = sp__ds_open_tar(ds, err);
        } else {
            ds->kind = SP_DATASET_LIST;
            rc = sp__ds_open_list(ds, err);
        }
    }
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

void sp_dataset_close(sp_dataset *ds) {
    if (!ds) return;
    if (ds->ops && ds->ops->destroy) ds->ops->destroy(ds);
    if (ds->class_names)
        for (int c = 0; c < ds->num_classes; c++) free(ds->class_names[c]);
    free(ds->class_names);
    free(ds->class_counts);
    free(ds->pool);
    free(ds->path_off);
    free(ds->labels);
    free(ds->sizes);
    free(ds->hashes);
    free(ds->verdicts);
    free(ds->base);
    free(ds->root);
    free(ds);
}

/* ---- accessors ------------------------------------------------------------------ */

sp_dataset_kind sp_dataset_kind_of(const sp_dataset *ds) { return ds->kind; }

const char *sp_dataset_kind_name(sp_dataset_kind k) {
    switch (k) {
    case SP_DATASET_IMAGEFOLDER: return "imagefolder";
    case SP_DATASET_IDX: return "idx";
    case SP_DATASET_LIST: return "list";
    case SP_DATASET_WEBDATASET: return "webdataset";
    case SP_DATASET_SAMPLES: return "samples";
    case SP_DATASET_MIX: return "mixture";
    case SP_DATASET_TOKENS: return "tokens";
    case SP_DATASET_FAKE: return "fakedata";
    }
    return "unknown";
}

const char *sp_dataset_root(const sp_dataset *ds) { return ds->root; }
uint64_t sp_dataset_size(const sp_dataset *ds) { return ds->n; }

/* Only the WebDataset kinds (local, remote) have shards (their source
 * tables answer); a mixture keeps its sources' shards to itself. */
uint32_t sp_dataset_shard_count(const sp_dataset *ds) {
    return ds->ops->shard_count ? ds->ops->shard_count(ds) : 0;
}

uint32_t sp_dataset_shard_of(const sp_dataset *ds, uint64_t i) {
    return sp_dataset_shard_count(ds) && i < ds->n ? ds->ops->shard_of(ds, i) : UINT32_MAX;
}
int sp_dataset_num_classes(const sp_dataset *ds) { return ds->num_classes; }

const char *sp_dataset_class_name(const sp_dataset *ds, int cls) {
    if (cls < 0 || cls >= ds->num_classes) return NULL;
    return ds->class_names[cls];
}

uint64_t sp_dataset_class_count(const sp_dataset *ds, int cls) {
    if (cls < 0 || cls >= ds->num_classes) return 0;
    return ds->class_counts[cls];
}

int sp_dataset_label(const sp_dataset *ds, uint64_t i) {
    if (i >= ds->n) return -1;
    if (ds->ops->label) return ds->ops->label(ds, i);
    return ds->labels[i];
}

const char *sp_dataset_path(const sp_dataset *ds, uint64_t i) {
    if (i >= ds->n) return NULL;
    if (ds->ops->path) return ds->ops->path(ds, i);
    return ds->pool + ds->path_off[i];
}

sp_digest sp_dataset_fingerprint(const sp_dataset *ds) { return ds->fingerprint; }

sp_digest sp_dataset_content_hash(const sp_dataset *ds, uint64_t i) {
    sp_digest z = {0, 0};
    if (i >= ds->n) return z;
    if (ds->ops->content_hash) return ds->ops->content_hash(ds, i);
    return ds->hashes[i];
}

int sp_dataset_raw_dims(const sp_dataset *ds, int *w, int *h) {
    if (ds->kind != SP_DATASET_IDX && ds->kind != SP_DATASET_FAKE) return SP_EINVAL;
    if (w) *w = ds->raw_w;
    if (h) *h = ds->raw_h;
    return SP_OK;
}

/* ---- reading a sample -------------------------------------------------------------- */

int sp_dataset_read(const sp_dataset *ds, uint64_t i, sp_sample_data *out,
                    sp_error *err) {
    if (!ds || !out) return sp_error_set(err, SP_EINVAL, "sp_dataset_read: NULL argument");
    memset(out, 0, sizeof *out);
    if (i >= ds->n)
        return sp_error_set(err, SP_ERANGE, "%s: sample %llu out of range (dataset has %llu)",
                            ds->root, (unsigned long long)i, (unsigned long long)ds->n);
    int rc = ds->ops->read(ds, i, out, err);
    if (rc != SP_OK) sp_sample_data_free(out);
    return rc;
}

void sp__ds_prefetch(const sp_dataset *ds, const uint64_t *idx, size_t n) {
    if (ds && ds->ops->prefetch) ds->ops->prefetch(ds, idx, n);
}

int sp__ds_is_remote(const sp_dataset *ds) {
    return ds && ds->ops->is_remote ? ds->ops->is_remote(ds) : 0;
}

int sp__ds_validated(const sp_dataset *ds, uint64_t i) {
    if (ds->ops->validated) return ds->ops->validated(ds, i);
    return ds->verdicts && i < ds->n && (ds->verdicts[i] & SP_DS_CLEAN);
}

void sp_sample_data_free(sp_sample_data *s) {
    if (!s) return;
    free(s->full_path);
    free(s->owned);
    memset(s, 0, sizeof *s);
}
