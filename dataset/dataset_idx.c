/* dataset_idx.c - the IDX source: MNIST / Fashion-MNIST image and label files.
 *
 * An IDX file is a 4-byte magic (0, 0, data type, number of dimensions), one
 * big-endian uint32 per dimension, then the data. Images are type 0x08
 * (unsigned byte) with 3 dimensions (count, rows, columns: grey, one
 * channel) or 4 (count, rows, columns, channels) with 1 or 3 channels (RGB,
 * interleaved, as numpy's (n, h, w, 3) uint8 arrays: how the torch drop-in
 * hands torchvision's CIFAR10/100 arrays to the C side); labels are type
 * 0x08 with 1 dimension (count). Both may be gzip'd (read through zlib;
 * gzread passes plain files through unchanged). The labels file is the
 * sibling whose name has "images-idx3" (or "images-idx4") replaced by
 * "labels-idx1" (or "images.idx3" by "labels.idx1"); if that exact name is missing, the same
 * name with ".gz" added or removed is tried.
 *
 * Hostile headers: declared dimensions are checked against the limits before
 * anything is allocated (count <= max_samples, rows * cols <= max_file_bytes,
 * pixels <= 4 GiB or SEEDPIPE_IDX_MAX_BYTES), and the pixel buffer grows with the
 * data actually read, so a 100-byte file that declares a terabyte costs a
 * few megabytes at most before it is refused as truncated. Every refusal is
 * SP_EFORMAT, SP_ELIMIT or SP_EUNSUPP with the file and the reason.
 *
 * Labels are 0..255; the classes are "0".."9", or "0".."L" where the largest
 * label L is over 9 (CIFAR100's 100 classes). Pixels stay in memory;
 * a sample's path is "<images file name>#<index>" with a ".gz" suffix
 * dropped, so a gzip'd and a plain copy of the same data have the same
 * fingerprint.
 *
 * The opener (idx_open_ds()) reads the header, checks the declared dimensions
 * (check_dims()), reads the pixels (read_pixels()) and the labels file
 * (read_labels()), then fills the index (fill_index()). Called by
 * dataset_open.c; calls down into dataset_common.c only.
 */
#include "dataset/dataset_internal.h"
#include "common/fileio_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#include <zlib.h>

/* Upper bound on the decoded pixel bytes of one IDX images file, by
 * default; SEEDPIPE_IDX_MAX_BYTES (a size as sp_parse_size() reads it:
 * bytes, or with a K, M, G or T suffix) sets another, up to SP_DS_MAX_IDX_CEIL. The pixels
 * stay in memory, so this is what one IDX dataset can cost. */
#define SP_DS_MAX_IDX_BYTES (UINT64_C(4) << 30)
#define SP_DS_MAX_IDX_CEIL (UINT64_C(1) << 40)

static int idx_limit(const char *path, uint64_t *lim, sp_error *err) {
    const char *v = getenv("SEEDPIPE_IDX_MAX_BYTES");
    *lim = SP_DS_MAX_IDX_BYTES;
    if (!v || !*v) return SP_OK;
    sp_error e;
    if (sp_parse_size(v, lim, &e) != SP_OK || *lim == 0 || *lim > SP_DS_MAX_IDX_CEIL)
        return sp_error_set(err, SP_EINVAL, "%s: SEEDPIPE_IDX_MAX_BYTES=\"%s\" is not a size in "
                            "1..%llu bytes (digits, optionally K, M, G or T)", path, v,
                            (unsigned long long)SP_DS_MAX_IDX_CEIL);
    return SP_OK;
}

static uint32_t be32(const uint8_t *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* zlib prefixes gzdopen()'d messages with "<fd:N>: "; we name the file. */
static const char *gz_msg(gzFile gz, int *zerr) {
    const char *m = gzerror(gz, zerr);
    if (m && strncmp(m, "<fd:", 4) == 0) {
        const char *c = strstr(m, ": ");
        if (c) m = c + 2;
    }
    return m ? m : "error";
}

/* Open an IDX file by the rule every reader follows (common/fileio_internal.h:
 * no blocking on a FIFO, a regular file only, its size within max). */
static int idx_open(const char *path, uint64_t max, gzFile *out, int *eno, sp_error *err) {
    struct stat st;
    int fd = sp__open_regular(AT_FDCWD, path, path, 0, max, &st, err);
    *eno = errno;
    if (fd < 0) return fd;
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    }
    gzbuffer(gz, 1u << 17);
    *out = gz;
    return SP_OK;
}

/* Read up to `want` bytes; *got says how many came. A zlib or read error is
 * an error; a short read (end of data) is not, the caller reports it. */
static int idx_read(gzFile gz, const char *path, uint8_t *buf, uint64_t want,
                    uint64_t *got, sp_error *err) {
    *got = 0;
    while (*got < want) {
        uint64_t left = want - *got;
        unsigned chunk = left > (1u << 30) ? (1u << 30) : (unsigned)left;
        int r = gzread(gz, buf + *got, chunk);
        if (r < 0) {
            int zerr;
            const char *msg = gz_msg(gz, &zerr);
            if (zerr == Z_ERRNO)
                return sp_error_set(err, SP_EIO, "%s: %s", path, strerror(errno));
            return sp_error_set(err, SP_EFORMAT, "%s: gzip: %s", path, msg);
        }
        if (r == 0) break;
        *got += (uint64_t)r;
    }
    if (*got < want) {
        /* zlib reports a cut-off gzip stream as an error after a short read */
        int zerr;
        const char *msg = gz_msg(gz, &zerr);
        if (zerr != Z_OK && zerr != Z_BUF_ERROR)
            return sp_error_set(err, SP_EFORMAT, "%s: gzip: %s", path, msg);
    }
    return SP_OK;
}

/* Refuse bytes after the declared data. */
static int idx_expect_end(gzFile gz, const char *path, const char *what, sp_error *err) {
    uint8_t extra[16];
    uint64_t got;
    int rc = idx_read(gz, path, extra, sizeof extra, &got, err);
    if (rc) return rc;
    if (got)
        return sp_error_set(err, SP_EFORMAT, "%s: trailing data after the %s", path, what);
    return SP_OK;
}

static int check_magic(const uint8_t *h, const char *path, int want_dims, const char *what,
                       sp_error *err) {
    uint32_t magic = be32(h);
    uint32_t expect = 0x800u | (uint32_t)want_dims;
    if (h[0] != 0 || h[1] != 0)
        return sp_error_set(err, SP_EFORMAT,
                            "%s: bad magic 0x%08x, not an IDX file (expected 0x%08x for %s)",
                            path, magic, expect, what);
    if (h[2] != 0x08) {
        int known = h[2] == 0x09 || (h[2] >= 0x0B && h[2] <= 0x0E);
        return sp_error_set(err, known ? SP_EUNSUPP : SP_EFORMAT,
                            "%s: %s IDX data type 0x%02x (magic 0x%08x; only 0x08, unsigned "
                            "byte, is supported)",
                            path, known ? "unsupported" : "unknown", h[2], magic);
    }
    if (h[3] != want_dims)
        return sp_error_set(err, SP_EFORMAT,
                            "%s: bad magic 0x%08x: %u dimensions, expected %d for %s", path,
                            magic, h[3], want_dims, what);
    return SP_OK;
}

/* The images file's sibling labels file name(s). */
static char *labels_name(const char *images) {
    char *s = sp__ds_strdup(images);
    if (!s) return NULL;
    const char *base = strrchr(s, '/');
    base = base ? base + 1 : s;
    char *hit = NULL;
    for (char *p = (char *)base; *p; p++)
        if (strncmp(p, "images-idx3", 11) == 0 || strncmp(p, "images.idx3", 11) == 0 ||
            strncmp(p, "images-idx4", 11) == 0)
            hit = p;
    if (hit) {
        memcpy(hit, "labels", 6);
        hit[10] = '1';
    }
    return s;
}

static char *toggle_gz(const char *path) {
    size_t l = strlen(path);
    char *s = malloc(l + 4);
    if (!s) return NULL;
    memcpy(s, path, l + 1);
    if (l > 3 && strcmp(path + l - 3, ".gz") == 0) s[l - 3] = '\0';
    else memcpy(s + l, ".gz", 4);
    return s;
}

static int read_labels(sp_dataset *ds, uint32_t n, uint8_t **labels_out, sp_error *err) {
    char *lpath = labels_name(ds->root);
    if (!lpath) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    gzFile gz = NULL;
    int eno = 0;
    /* n labels and a header (gzip's own header and trailer fit in the slack) */
    int rc = idx_open(lpath, (uint64_t)n + (1u << 20), &gz, &eno, err);
    if (rc == SP_EIO && eno == ENOENT) {
        char *alt = toggle_gz(lpath);
        if (!alt) { free(lpath); return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root); }
        sp_error e2;
        if (idx_open(alt, (uint64_t)n + (1u << 20), &gz, &eno, &e2) == SP_OK) {
            free(lpath);
            lpath = alt;
            rc = SP_OK;
        } else {
            free(alt);
            rc = sp_error_set(err, SP_EIO, "%s: %s (the labels file for %s)", lpath,
                              strerror(ENOENT), ds->root);
        }
    }
    if (rc) { free(lpath); return rc; }

    uint8_t *lab = NULL;
    uint8_t h[8];
    uint64_t got;
    rc = idx_read(gz, lpath, h, sizeof h, &got, err);
    if (!rc && got < sizeof h)
        rc = sp_error_set(err, SP_EFORMAT, "%s: truncated header (%llu of 8 bytes)", lpath,
                          (unsigned long long)got);
    if (!rc) rc = check_magic(h, lpath, 1, "labels: unsigned bytes in 1 dimension", err);
    if (!rc && be32(h + 4) != n)
        rc = sp_error_set(err, SP_EFORMAT, "%s: %u labels, but %s has %u images", lpath,
                          be32(h + 4), ds->root, n);
    if (!rc) {
        lab = malloc(n);
        if (!lab) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", lpath);
    }
    if (!rc) rc = idx_read(gz, lpath, lab, n, &got, err);
    if (!rc && got < n)
        rc = sp_error_set(err, SP_EFORMAT, "%s: truncated: %llu of %u labels", lpath,
                          (unsigned long long)got, n);
    if (!rc) rc = idx_expect_end(gz, lpath, "declared labels", err);
    gzclose(gz);
    free(lpath);
    if (rc) { free(lab); return rc; }
    *labels_out = lab;
    return SP_OK;
}

/* The declared dimensions against the limits, before anything is allocated. */
static int check_dims(const sp_dataset *ds, const char *path, uint32_t n, uint32_t rows,
                      uint32_t cols, uint64_t plane, uint64_t total, uint64_t lim,
                      sp_error *err) {
    if (n == 0)
        return sp_error_set(err, SP_EFORMAT, "%s: declares 0 images", path);
    if (rows == 0 || cols == 0)
        return sp_error_set(err, SP_EFORMAT, "%s: declares images of %u x %u pixels", path,
                            rows, cols);
    if (n > ds->max_samples)
        return sp_error_set(err, SP_ELIMIT, "%s: declares %u images, more than the limit of %llu",
                            path, n, (unsigned long long)ds->max_samples);
    if (plane > ds->max_file_bytes || rows > 65535 || cols > 65535)
        return sp_error_set(err, SP_ELIMIT,
                            "%s: declares images of %u x %u pixels, over the limit (65535 per "
                            "side, %llu bytes per sample)",
                            path, rows, cols, (unsigned long long)ds->max_file_bytes);
    if (total > lim || total > SIZE_MAX / 2)
        return sp_error_set(err, SP_ELIMIT,
                            "%s: declares %u images of %u x %u (%llu bytes), over the limit of "
                            "%llu bytes (SEEDPIPE_IDX_MAX_BYTES)",
                            path, n, rows, cols, (unsigned long long)total,
                            (unsigned long long)lim);
    return SP_OK;
}

/* The `total` pixel bytes after the header, into *px (malloc'd; the
 * caller frees it, also on failure). The buffer grows with the data
 * actually present, never with the declared size. */
static int read_pixels(gzFile gz, const char *path, uint32_t n, uint32_t rows, uint32_t cols,
                       uint64_t total, uint8_t **px, sp_error *err) {
    int rc = SP_OK;
    uint64_t have = 0, cap = 0, got;
    while (!rc && have < total) {
        if (have == cap) {
            cap = cap ? cap * 2 : (UINT64_C(1) << 22);
            if (cap > total) cap = total;
            uint8_t *np = realloc(*px, (size_t)cap);
            if (!np) { rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", path); break; }
            *px = np;
        }
        rc = idx_read(gz, path, *px + have, cap - have, &got, err);
        if (rc) break;
        have += got;
        if (have < cap) break;   /* end of data */
    }
    if (!rc && have < total)
        rc = sp_error_set(err, SP_EFORMAT,
                          "%s: truncated: %llu of %llu pixel bytes (%u images of %u x %u declared)",
                          path, (unsigned long long)have, (unsigned long long)total, n, rows,
                          cols);
    return rc;
}

/* The kind's state (ds->state): the images, n of h x w pixels one after
 * another, and the images file as opened (for messages). */
struct sp__ds_idx {
    uint8_t *pixels;
    char *file;
    int channels;   /* 1 (grey) or 3 (RGB, interleaved) */
    int w, h;       /* the images' size (in the fingerprint: ops.raw_dims) */
};

static struct sp__ds_idx *idx_of(const sp_dataset *ds) { return ds->state; }

/* A sample is a view of its pixels, path "<file>#<i>": nothing is read. */
static int read_idx(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err) {
    const struct sp__ds_idx *x = idx_of(ds);
    char buf[32];
    snprintf(buf, sizeof buf, "#%llu", (unsigned long long)i);
    size_t lf = strlen(x->file), lb = strlen(buf);
    out->full_path = malloc(lf + lb + 1);
    if (!out->full_path) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    memcpy(out->full_path, x->file, lf);
    memcpy(out->full_path + lf, buf, lb + 1);
    size_t row = (size_t)x->w * (size_t)x->channels;
    size_t plane = row * (size_t)x->h;
    out->raw_view.width = x->w;
    out->raw_view.height = x->h;
    out->raw_view.channels = x->channels;
    out->raw_view.stride = row;
    out->raw_view.data = x->pixels + (size_t)i * plane;   /* a view: never written */
    out->src.path = out->full_path;
    out->src.raw = &out->raw_view;
    return SP_OK;
}

static void close_idx(sp_dataset *ds) {
    struct sp__ds_idx *x = idx_of(ds);
    if (!x) return;
    free(x->pixels);
    free(x->file);
    free(x);
    ds->state = NULL;
}

static void idx_raw_dims(const sp_dataset *ds, int *w, int *h) {
    *w = idx_of(ds)->w;
    *h = idx_of(ds)->h;
}

static const sp__ds_ops idx_ops = {.read = read_idx, .destroy = close_idx,
                                   .raw_dims = idx_raw_dims};

/* The index of n images of rows x cols x channels (px, taken by
 * ds) with labels lab: paths "<base>#<i>", the pixels' hashes, the classes
 * "0".."9" or up to the largest label. lab stays the caller's. */
static int fill_index(sp_dataset *ds, const char *path, uint8_t *px, const uint8_t *lab,
                      uint32_t n, uint32_t rows, uint32_t cols, sp_error *err) {
    uint64_t plane = (uint64_t)rows * cols * (uint64_t)idx_of(ds)->channels;
    int ncls = SP_DS_IDX_CLASSES;
    for (uint32_t i = 0; i < n; i++)
        if (lab[i] >= ncls) ncls = lab[i] + 1;
    idx_of(ds)->pixels = px;
    idx_of(ds)->w = (int)cols;
    idx_of(ds)->h = (int)rows;
    ds->n = n;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t lb = strlen(base);
    if (lb > 3 && strcmp(base + lb - 3, ".gz") == 0) lb -= 3;
    int rc = sp__ds_numeric_classes(ds, ncls, err);
    ds->class_counts = calloc((size_t)ncls, sizeof *ds->class_counts);
    ds->pool = malloc((size_t)n * (lb + 12));
    ds->path_off = malloc((size_t)n * sizeof *ds->path_off);
    ds->labels = malloc((size_t)n * sizeof *ds->labels);
    ds->sizes = malloc((size_t)n * sizeof *ds->sizes);
    ds->hashes = malloc((size_t)n * sizeof *ds->hashes);
    if (!rc && (!ds->class_counts || !ds->pool || !ds->path_off || !ds->labels || !ds->sizes ||
                !ds->hashes))
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    if (rc) return rc;
    size_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        ds->path_off[i] = off;
        memcpy(ds->pool + off, base, lb);
        off += lb;
        off += (size_t)snprintf(ds->pool + off, 12, "#%u", i) + 1;
        ds->labels[i] = lab[i];
        ds->class_counts[lab[i]]++;
        ds->sizes[i] = plane;
        XXH128_hash_t hh = XXH3_128bits(px + (size_t)i * (size_t)plane, (size_t)plane);
        ds->hashes[i].hi = hh.high64;
        ds->hashes[i].lo = hh.low64;
    }
    return SP_OK;
}

/* The images header: 3 dimensions (grey) or 4 with 1 or 3 channels last. */
static int read_header(gzFile gz, const char *path, uint32_t *n, uint32_t *rows,
                       uint32_t *cols, int *channels, sp_error *err) {
    uint8_t h[20];
    uint64_t got;
    int rc = idx_read(gz, path, h, 16, &got, err);
    if (!rc && got < 16)
        rc = sp_error_set(err, SP_EFORMAT, "%s: truncated header (%llu of 16 bytes)", path,
                          (unsigned long long)got);
    if (rc) return rc;
    int dims = h[3] == 4 ? 4 : 3;
    rc = check_magic(h, path, dims, "images: unsigned bytes in 3 dimensions, or 4 with the "
                     "channels last", err);
    if (!rc && dims == 4) {
        rc = idx_read(gz, path, h + 16, 4, &got, err);
        if (!rc && got < 4)
            rc = sp_error_set(err, SP_EFORMAT, "%s: truncated header (%llu of 20 bytes)", path,
                              (unsigned long long)(16 + got));
        if (!rc && be32(h + 16) != 1 && be32(h + 16) != 3)
            rc = sp_error_set(err, SP_EUNSUPP, "%s: images of %u channels (only 1, grey, or "
                              "3, RGB, are read)", path, be32(h + 16));
    }
    if (rc) return rc;
    *n = be32(h + 4);
    *rows = be32(h + 8);
    *cols = be32(h + 12);
    *channels = dims == 4 ? (int)be32(h + 16) : 1;
    return SP_OK;
}

static int idx_open_ds(sp_dataset *ds, const sp__ds_req *rq, sp_error *err) {
    (void)rq;
    const char *path = ds->root;
    ds->state = calloc(1, sizeof(struct sp__ds_idx));
    if (!ds->state) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    idx_of(ds)->file = sp__ds_strdup(path);
    if (!idx_of(ds)->file) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);

    gzFile gz = NULL;
    int eno;
    uint64_t lim;
    int rc = idx_limit(path, &lim, err);
    if (rc == SP_OK) rc = idx_open(path, lim + (1u << 20), &gz, &eno, err);
    if (rc) return rc;
    uint32_t n = 0, rows = 0, cols = 0;
    uint8_t *px = NULL, *lab = NULL;
    rc = read_header(gz, path, &n, &rows, &cols, &idx_of(ds)->channels, err);
    uint64_t total = 0;
    if (!rc) {
        uint64_t plane = (uint64_t)rows * cols * (uint64_t)idx_of(ds)->channels;
        total = plane * n;
        rc = check_dims(ds, path, n, rows, cols, plane, total, lim, err);
    }
    if (!rc) rc = read_pixels(gz, path, n, rows, cols, total, &px, err);
    if (!rc) rc = idx_expect_end(gz, path, "declared images", err);
    gzclose(gz);
    if (!rc) rc = read_labels(ds, n, &lab, err);
    if (rc) { free(px); free(lab); return rc; }
    rc = fill_index(ds, path, px, lab, n, rows, cols, err);
    free(lab);
    return rc;
}

/* An images file: a regular file whose name ends in one of these. */
static int idx_probe(const sp__ds_req *rq, sp_error *err) {
    static const char *const suffixes[] = {
        "images-idx3-ubyte", "images.idx3-ubyte",
        "images-idx3-ubyte.gz", "images.idx3-ubyte.gz",
        "images-idx4-ubyte", "images-idx4-ubyte.gz", NULL};
    (void)err;
    size_t ln = strlen(rq->leaf);
    for (int k = 0; !rq->is_dir && suffixes[k]; k++) {
        size_t ls = strlen(suffixes[k]);
        if (ln >= ls && strcmp(rq->leaf + ln - ls, suffixes[k]) == 0) return 1;
    }
    return 0;
}

const sp__ds_driver sp__ds_driver_idx = {
    .name = "idx", .code = SP_DATASET_IDX, .local = 1, .probe = idx_probe,
    .open = idx_open_ds, .ops = &idx_ops,
};
