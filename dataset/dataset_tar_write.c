/* dataset_tar_write.c - writing a dataset as WebDataset tar shards: the
 * writer behind `seedpipe shard` (sp__dataset_write_shards(), dataset.h).
 *
 * It stores the samples of an encoded-file dataset in canonical order as
 * `%09llu.<ext>` + `%09llu.cls` members of ustar shards with fixed
 * metadata (mode 0644, uid/gid 0, mtime 0), so a shard's bytes depend only
 * on the samples, and the sharded dataset streams the same batches (the
 * batch bytes depend on indices, labels and pixels, not on paths). Each
 * shard is written under a temporary name, fsync'ed and renamed.
 *
 * With annotations (a COCO instances file, dataset_coco.c), each sample
 * also gets `%09llu.json`: the JSON array of its image's annotations, each
 * one's text copied byte for byte from the file in file order (iscrowd ones
 * too), "[]" for a sample without any; read back with --annotations @json
 * it gives the same targets as the file.
 *
 * It sits above the dispatcher: it reads the samples through
 * sp__dataset_read() (dataset_open.c), the annotations through
 * sp__coco_open() (dataset_coco.c), and checks the output folder with
 * sp__ds_dir_kind() (dataset_tar.c); nothing of the dataset code calls it.
 */
#include "dataset/dataset_internal.h"
#include "dataset/dataset_coco.h"
#include "common/fileio_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/common_internal.h"

#define TAR_BLOCK 512

static void tar_header(uint8_t h[TAR_BLOCK], const char *name, uint64_t size) {
    memset(h, 0, TAR_BLOCK);
    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 7);
    memcpy(h + 108, "0000000", 7);
    memcpy(h + 116, "0000000", 7);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    memcpy(h + 136, "00000000000", 11);
    h[156] = '0';
    memcpy(h + 257, "ustar\0" "00", 8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < TAR_BLOCK; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static int write_all(int fd, const void *p, size_t n, const char *path, sp_error *err) {
    if (sp__write_full(fd, p, n) != 0)
        return sp_error_set(err, SP_EIO, "%s: %s", path, strerror(errno));
    return SP_OK;
}

static int write_member(int fd, const char *path, const char *name, const void *data,
                        uint64_t size, sp_error *err) {
    uint8_t h[TAR_BLOCK], zero[TAR_BLOCK] = {0};
    tar_header(h, name, size);
    int rc = write_all(fd, h, TAR_BLOCK, path, err);
    if (rc == SP_OK) rc = write_all(fd, data, (size_t)size, path, err);
    if (rc == SP_OK && size % TAR_BLOCK)
        rc = write_all(fd, zero, TAR_BLOCK - (size_t)(size % TAR_BLOCK), path, err);
    return rc;
}

/* n bytes at offset off of fd: 0, or -1 (errno; 0 when the file is shorter). */
static int read_at(int fd, char *p, size_t n, uint64_t off) {
    while (n) {
        ssize_t k = pread(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = 0;
            return -1;
        }
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

/* Sample i's `%09llu.json` member: its annotations' text from the file
 * (descriptor afd, named path) as one JSON array. */
static int write_targets(int fd, const char *tmp, uint64_t i, const sp_coco *c, int afd,
                         const char *path, sp_error *err) {
    const uint64_t *off = NULL, *len = NULL;
    uint32_t n = sp__coco_raw(c, i, &off, &len);
    uint64_t total = 3;
    for (uint32_t a = 0; a < n; a++) total += len[a] + 2;
    char *b = malloc((size_t)total), name[64];
    if (!b) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    size_t at = 0;
    int rc = SP_OK;
    b[at++] = '[';
    for (uint32_t a = 0; a < n && rc == SP_OK; a++) {
        if (a) {
            b[at++] = ',';
            b[at++] = '\n';
        }
        if (read_at(afd, b + at, (size_t)len[a], off[a]) != 0)
            rc = sp_error_set(err, SP_EIO, "%s: cannot read it back: %s", path,
                              errno ? strerror(errno) : "the file became shorter");
        at += (size_t)len[a];
    }
    b[at++] = ']';
    b[at++] = '\n';
    snprintf(name, sizeof name, "%09llu.json", (unsigned long long)i);
    if (rc == SP_OK) rc = write_member(fd, tmp, name, b, at, err);
    free(b);
    return rc;
}

int sp__dataset_write_shards(const sp_dataset *ds, const char *out_dir, uint64_t max_count,
                             uint64_t *nshards, sp_error *err) {
    return sp_dataset_write_shards_annotated(ds, NULL, out_dir, max_count, nshards, err);
}

/* The shards after the checks (annotations: c and afd, or NULL and -1). */
static int write_shards(const sp_dataset *ds, const sp_coco *c, int afd, const char *apath,
                        const char *out_dir, uint64_t max_count, uint64_t *nshards,
                        sp_error *err);

int sp_dataset_write_shards_annotated(const sp_dataset *ds, const char *annotations,
                                      const char *out_dir, uint64_t max_count,
                                      uint64_t *nshards, sp_error *err) {
    if (nshards) *nshards = 0;
    if (!ds || !out_dir || max_count == 0)
        return sp_error_set(err, SP_EINVAL, "sp__dataset_write_shards: bad argument");
    if (sp__ds_kind(ds) == SP_DATASET_IDX)
        return sp_error_set(err, SP_EUNSUPP, "%s: an IDX dataset holds pixels, not image "
                            "files: shards hold files", ds->root);
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
        return sp_error_set(err, SP_EIO, "%s: %s", out_dir, strerror(errno));
    int shards = 0, folders = 0;
    int rc = sp__ds_dir_kind(out_dir, &shards, &folders, err);
    if (rc != SP_OK) return rc;
    if (shards)
        return sp_error_set(err, SP_EINVAL, "%s: already holds .tar shards; give an empty "
                            "or new folder", out_dir);
    if (!annotations) return write_shards(ds, NULL, -1, NULL, out_dir, max_count, nshards, err);
    sp_coco_limits lim = sp__coco_default_limits();
    lim.keep_segmentations = 0;
    lim.keep_raw = 1;
    sp_coco *c = NULL;
    rc = sp__coco_open(annotations, ds, &lim, &c, err);
    int afd = rc ? -1 : open(annotations, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (!rc && afd < 0) rc = sp_error_set(err, SP_EIO, "%s: %s", annotations, strerror(errno));
    if (!rc) rc = write_shards(ds, c, afd, annotations, out_dir, max_count, nshards, err);
    if (afd >= 0) close(afd);
    sp__coco_close(c);
    return rc;
}

static int write_shards(const sp_dataset *ds, const sp_coco *c, int afd, const char *apath,
                        const char *out_dir, uint64_t max_count, uint64_t *nshards,
                        sp_error *err) {
    int rc = SP_OK;
    uint64_t n = ds->n, made = 0;
    char tmp[4200], final[4096];
    int fd = -1;
    sp_publish *pub = NULL;   /* the shard being written (common.h: atomic publish) */
    for (uint64_t i = 0; rc == SP_OK && i < n; i++) {
        if (i % max_count == 0) {
            snprintf(final, sizeof final, "%s/shard-%06llu.tar", out_dir,
                     (unsigned long long)made);
            snprintf(tmp, sizeof tmp, "%s (being written)", final);
            rc = sp__publish_begin(final, &pub, err);
            if (rc != SP_OK) break;
            fd = sp__publish_fd(pub);
        }
        sp_sample_data sd;
        rc = sp__dataset_read(ds, i, &sd, err);
        if (rc != SP_OK) break;
        char e[16], name[64], cls[32];
        const char *dot = strrchr(sp_dataset_path(ds, i), '.');
        size_t k = 0;
        for (const char *p = dot ? dot + 1 : "img"; *p && k + 1 < sizeof e; p++)
            e[k++] = (char)sp__ds_lower(*p);
        e[k] = '\0';
        snprintf(name, sizeof name, "%09llu.%s", (unsigned long long)i, e);
        rc = write_member(fd, tmp, name, sd.src.bytes, sd.src.len, err);
        sp__sample_data_free(&sd);
        int cl = snprintf(cls, sizeof cls, "%d\n", sp_dataset_label(ds, i));
        snprintf(name, sizeof name, "%09llu.cls", (unsigned long long)i);
        if (rc == SP_OK) rc = write_member(fd, tmp, name, cls, (uint64_t)cl, err);
        if (rc == SP_OK && c) rc = write_targets(fd, tmp, i, c, afd, apath, err);
        if (rc == SP_OK && (i % max_count == max_count - 1 || i + 1 == n)) {
            uint8_t zero[2 * TAR_BLOCK] = {0};
            rc = write_all(fd, zero, sizeof zero, tmp, err);
            if (rc == SP_OK) rc = sp__publish_commit(pub, 1, err);
            else sp__publish_abort(pub);
            pub = NULL;
            fd = -1;
            if (rc == SP_OK) made++;
        }
    }
    sp__publish_abort(pub);
    if (nshards) *nshards = made;
    return rc;
}
