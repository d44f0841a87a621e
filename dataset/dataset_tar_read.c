/* dataset_tar_read.c - reading one sample of a WebDataset: the sample's
 * recorded error (what opening found it cannot be), else one pread of its
 * image member at the offset found when the shard was read
 * (dataset_tar.c), re-hashed and refused if it changed; and the shard
 * descriptors kept for those reads. Its source table, sp__ds_tar_ops, is
 * what dataset_open.c (sp__dataset_read(), sp_dataset_close()) calls for local
 * shards.
 */
#include "dataset/dataset_internal.h"
#include "dataset/dataset_tar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

static int cmp_bad(const void *k, const void *e) {
    uint64_t i = *(const uint64_t *)k, j = ((const sp__ds_bad *)e)->i;
    return (i > j) - (i < j);
}

const char *sp__ds_tar_bad(const sp_dataset *ds, uint64_t i) {
    if (!sp__ds_tar(ds)->nbad) return NULL;
    const sp__ds_bad *b = bsearch(&i, sp__ds_tar(ds)->bad, sp__ds_tar(ds)->nbad, sizeof *sp__ds_tar(ds)->bad, cmp_bad);
    return b ? b->msg : NULL;
}

/* The shard's descriptor, opened on first use and kept (O_CLOEXEC, read
 * with pread only, so threads and forked workers share it safely): a
 * sample read is one pread, not an open + pread + close. Two threads that
 * race to open it keep one descriptor and close the other. */
static int shard_fd(const sp_dataset *ds, uint32_t s, int *kept, sp_error *err) {
    *kept = sp__ds_tar(ds)->shard_fds != NULL;   /* else the caller closes it */
    int have = sp__ds_tar(ds)->shard_fds ? atomic_load(&sp__ds_tar(ds)->shard_fds[s]) : 0;
    if (have > 0) return have - 1;
    char *path = sp__ds_join(ds->base, sp__ds_tar(ds)->shards[s]);
    if (!path) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root), -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) sp_error_set(err, SP_EIO, "%s: %s", path, strerror(errno));
    free(path);
    if (fd < 0 || !sp__ds_tar(ds)->shard_fds) return fd;
    int expect = 0;
    if (!atomic_compare_exchange_strong(&sp__ds_tar(ds)->shard_fds[s], &expect, fd + 1)) {
        close(fd);
        return expect - 1;
    }
    return fd;
}

/* The source table's destroy: the kept descriptors, then the state. */
static void close_tar(sp_dataset *ds) {
    if (!ds->state) return;
    for (size_t s = 0; sp__ds_tar(ds)->shard_fds && s < sp__ds_tar(ds)->nshards; s++) {
        int v = atomic_load(&sp__ds_tar(ds)->shard_fds[s]);
        if (v > 0) close(v - 1);
    }
    free(sp__ds_tar(ds)->shard_fds);
    sp__ds_tar(ds)->shard_fds = NULL;
    sp__ds_tar_free(ds);
}

static int read_tar(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err) {
    int rc = sp__ds_sample_path(ds, i, out, err);
    if (rc != SP_OK) return rc;
    const char *bad = sp__ds_tar_bad(ds, i);
    if (bad) return sp_error_set(err, SP_EFORMAT, "%s/%s", ds->base, bad);
    const char *full = out->full_path;
    int kept;
    int fd = shard_fd(ds, sp__ds_tar(ds)->shard_of[i], &kept, err);
    if (fd < 0) return err->code ? err->code : SP_EIO;
    uint64_t want = ds->sizes[i], got = 0;
    out->owned = malloc(want ? (size_t)want : 1);
    if (!out->owned)
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory for %llu bytes", full,
                          (unsigned long long)want);
    while (rc == SP_OK && got < want) {
        ssize_t k = pread(fd, out->owned + got, (size_t)(want - got),
                          (off_t)(sp__ds_tar(ds)->offsets[i] + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) rc = sp_error_set(err, SP_EIO, "%s: %s", full, strerror(errno));
        if (k <= 0) break;
        got += (uint64_t)k;
    }
    if (!kept) close(fd);
    if (rc != SP_OK) return rc;
    XXH128_hash_t d = XXH3_128bits(out->owned, (size_t)got);
    if (got != want || d.high64 != ds->hashes[i].hi || d.low64 != ds->hashes[i].lo)
        return sp_error_set(err, SP_EMISMATCH,
                            "%s: file changed since the dataset was indexed (%s)", full,
                            got != want ? "the shard is shorter than indexed"
                                        : "content hash differs");
    out->src.bytes = out->owned;
    out->src.len = (size_t)want;
    return SP_OK;
}

const sp__ds_ops sp__ds_tar_ops = {
    .read = read_tar,
    .destroy = close_tar,
    .shard_count = sp__ds_tar_shard_count,
    .shard_of = sp__ds_tar_shard_of,
};

int sp__ds_tar_json(const sp_dataset *ds, uint64_t i, uint64_t max, uint8_t **bytes, size_t *len,
                    sp_error *err) {
    *bytes = NULL;
    *len = 0;
    if (!ds->state)
        return sp_error_set(err, SP_EINVAL, "%s: not WebDataset shards: no .json members to "
                            "read targets from", ds->root);
    if (sp__ds_tar(ds)->rio)   /* remote shards: sp__ds_remote_json() */
        return sp_error_set(err, SP_EINVAL, "%s: remote shards' .json members are read by "
                            "ranged requests, not here", ds->root);
    if (i >= ds->n || !sp__ds_tar(ds)->json_size || sp__ds_tar(ds)->json_size[i] == UINT64_MAX ||
        sp__ds_tar_bad(ds, i))
        return SP_OK;   /* none (a sample that cannot be read fails on its image) */
    const char *path = ds->pool + ds->path_off[i];
    uint64_t want = sp__ds_tar(ds)->json_size[i], got = 0;
    if (want > max)
        return sp_error_set(err, SP_ELIMIT, "%s/%s (.json): %llu bytes, more than %llu: not read",
                            ds->base, path, (unsigned long long)want, (unsigned long long)max);
    int kept, rc = SP_OK;
    int fd = shard_fd(ds, sp__ds_tar(ds)->shard_of[i], &kept, err);
    if (fd < 0) return err->code ? err->code : SP_EIO;
    uint8_t *b = malloc(want ? (size_t)want : 1);
    if (!b) rc = sp_error_set(err, SP_ENOMEM, "%s/%s (.json): out of memory", ds->base, path);
    while (rc == SP_OK && got < want) {
        ssize_t k = pread(fd, b + got, (size_t)(want - got),
                          (off_t)(sp__ds_tar(ds)->json_off[i] + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) rc = sp_error_set(err, SP_EIO, "%s/%s (.json): %s", ds->base, path,
                                     strerror(errno));
        if (k <= 0) break;
        got += (uint64_t)k;
    }
    if (!kept) close(fd);
    XXH128_hash_t d = XXH3_128bits(b, (size_t)got);
    if (rc == SP_OK && (got != want || d.high64 != sp__ds_tar(ds)->json_hash[i].hi ||
                        d.low64 != sp__ds_tar(ds)->json_hash[i].lo))
        rc = sp_error_set(err, SP_EMISMATCH, "%s/%s (.json): changed since the dataset was "
                          "indexed", ds->base, path);
    if (rc != SP_OK) {
        free(b);
        return rc;
    }
    *bytes = b;
    *len = (size_t)want;
    return SP_OK;
}
