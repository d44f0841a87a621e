/* dataset_shard_cache.c - a local copy of whole remote shards, bounded in
 * size, shared by every process that reads them (docs/remote.md "Shard
 * cache"): SEEDPIPE_SHARD_CACHE=DIR, SEEDPIPE_SHARD_CACHE_SIZE=SIZE (default
 * 10G; `seedpipe ... --shard-cache DIR --shard-cache-size SIZE` set them).
 *
 * HOW IT WORKS
 * A shard is kept as DIR/<key>.tar, key = XXH3-128 of (the shard's display
 * URL, its indexed size, the XXH3-128 of its samples' member offsets, sizes
 * and hashes): a shard rewritten and re-indexed gets a new name, never the
 * old bytes. The first read of a sample of a shard not there downloads the
 * whole shard into a temporary file in DIR (common's atomic publish:
 * mode 0600, no fsync, see download()), checks its size against the index,
 * and renames it into place: several processes may race to do so, each
 * rename installs a complete, identical file. A read is an
 * open (O_NOFOLLOW, a regular file of the indexed size), one pread and the
 * sample's hash check; a copy that fails it is removed and the sample read
 * from the store instead, so a damaged copy costs a download, never a byte.
 * A use sets the file's mtime (utimensat), and after each download the
 * oldest copies are removed until DIR's .tar files fit the size (the one
 * just written stays): least recently used first. A copy removed while
 * another process reads it stays readable to that process (POSIX).
 *
 * dataset_remote.c calls down into this file; it calls remote.c and
 * dataset_common.c.
 */
#include "dataset/dataset_internal.h"
#include "dataset/dataset_tar.h"
#include "dataset/remote_internal.h"
#include "common/fileio_internal.h"   /* sp__publish_begin/commit */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#define DEFAULT_CACHE_BYTES (UINT64_C(10) << 30)

static int make_keys(sp_dataset *ds, sp_error *err);

int sp__ds_shard_cache_setup(sp_dataset *ds, sp_error *err) {
    const char *dir = getenv("SEEDPIPE_SHARD_CACHE");
    if (!dir || !dir[0]) return SP_OK;
    const char *size = getenv("SEEDPIPE_SHARD_CACHE_SIZE");
    uint64_t cap = DEFAULT_CACHE_BYTES;
    if (size && size[0] && sp_parse_size(size, &cap, err) != SP_OK)
        return sp_error_set(err, SP_EINVAL, "SEEDPIPE_SHARD_CACHE_SIZE=%s: %s", size, err->msg);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return sp_error_set(err, SP_EIO, "shard cache %s: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sp_error_set(err, SP_EIO, "shard cache %s: not a folder", dir);
    ds->tar->shard_cache = realpath(dir, NULL);
    if (!ds->tar->shard_cache) return sp_error_set(err, SP_EIO, "shard cache %s: %s", dir, strerror(errno));
    ds->tar->shard_cache_bytes = cap;
    return make_keys(ds, err);
}

/* The shards' keys, once at open: O(samples). */
static int make_keys(sp_dataset *ds, sp_error *err) {
    ds->tar->shard_cache_keys = calloc(ds->tar->nshards ? ds->tar->nshards : 1, sizeof *ds->tar->shard_cache_keys);
    XXH3_state_t **st = calloc(ds->tar->nshards ? ds->tar->nshards : 1, sizeof *st);
    int rc = ds->tar->shard_cache_keys && st ? SP_OK
                                        : sp_error_set(err, SP_ENOMEM, "shard cache: out of memory");
    for (size_t s = 0; rc == SP_OK && s < ds->tar->nshards; s++) {
        char *what = sp__rio_display(ds->tar->rio, ds->tar->shards[s]);
        if (!what || !(st[s] = XXH3_createState())) {
            free(what);
            rc = sp_error_set(err, SP_ENOMEM, "shard cache: out of memory");
            break;
        }
        XXH3_128bits_reset(st[s]);
        XXH3_128bits_update(st[s], what, strlen(what) + 1);
        XXH3_128bits_update(st[s], &ds->tar->shard_sizes[s], sizeof ds->tar->shard_sizes[s]);
        free(what);
    }
    for (uint64_t i = 0; rc == SP_OK && i < ds->n; i++) {   /* each shard's samples, as indexed */
        uint64_t f[4] = {ds->tar->offsets[i], ds->sizes[i], ds->hashes[i].hi, ds->hashes[i].lo};
        XXH3_128bits_update(st[ds->tar->shard_of[i]], f, sizeof f);
    }
    for (size_t s = 0; st && s < ds->tar->nshards; s++) {
        if (!st[s]) continue;
        if (rc == SP_OK) {
            XXH128_hash_t h = XXH3_128bits_digest(st[s]);
            ds->tar->shard_cache_keys[s] = (sp_digest){h.high64, h.low64};
        }
        XXH3_freeState(st[s]);
    }
    free(st);
    return rc;
}

/* DIR/<key>.tar for shard s (malloc'd). */
static char *copy_path(const sp_dataset *ds, uint32_t s) {
    size_t n = strlen(ds->tar->shard_cache) + 48;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%016llx%016llx.tar", ds->tar->shard_cache,
                 (unsigned long long)ds->tar->shard_cache_keys[s].hi,
                 (unsigned long long)ds->tar->shard_cache_keys[s].lo);
    return p;
}

/* Remove the least recently used copies until DIR's .tar files fit (keep
 * `keep`). Best effort: a file another process removed first is skipped. */
static void evict(const sp_dataset *ds, const char *keep) {
    DIR *d = opendir(ds->tar->shard_cache);
    if (!d) return;
    typedef struct { char *path; uint64_t size, mtime; } ent;
    ent *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".tar") != 0) continue;
        char *p = sp__ds_join(ds->tar->shard_cache, de->d_name);
        struct stat st;
        if (!p || lstat(p, &st) != 0 || !S_ISREG(st.st_mode)) { free(p); continue; }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            ent *w = realloc(v, cap * sizeof *v);
            if (!w) { free(p); break; }
            v = w;
        }
        v[n++] = (ent){p, (uint64_t)st.st_size, sp__ds_ns(st.st_mtim)};
        total += (uint64_t)st.st_size;
    }
    closedir(d);
    while (total > ds->tar->shard_cache_bytes) {   /* the oldest other copy goes */
        size_t best = n;
        for (size_t k = 0; k < n; k++)
            if (v[k].path && strcmp(v[k].path, keep) != 0 &&
                (best == n || v[k].mtime < v[best].mtime))
                best = k;
        if (best == n) break;
        unlink(v[best].path);
        total -= v[best].size;
        free(v[best].path);
        v[best].path = NULL;
    }
    for (size_t k = 0; k < n; k++) free(v[k].path);
    free(v);
}

/* Download shard s whole into `path`, published by common's atomic publish
 * (a temporary file beside it, renamed into place) with mode 0600 and no
 * fsync (SP__SYNC_NONE): every read of a copy checks its size and the
 * sample's hash, so a copy damaged by a power cut costs a download, never
 * a byte, and is not worth an fsync of a whole shard. */
static int download(const sp_dataset *ds, uint32_t s, const char *path, sp_error *err) {
    sp_publish *pub;
    int rc = sp__publish_begin(path, 0600, &pub, err);
    if (rc != SP_OK) return rc;
    uint64_t got = 0;
    rc = sp__rio_fetch_fd(ds->tar->rio, ds->tar->shards[s], sp_publish_fd(pub), ds->tar->shard_sizes[s], &got,
                          err);
    if (rc == SP_OK && got != ds->tar->shard_sizes[s]) {
        char *what = sp__rio_display(ds->tar->rio, ds->tar->shards[s]);
        rc = sp_error_set(err, SP_EMISMATCH, "%s: the object changed since the dataset was "
                          "indexed (%llu bytes, indexed %llu)", what ? what : ds->tar->shards[s],
                          (unsigned long long)got, (unsigned long long)ds->tar->shard_sizes[s]);
        free(what);
    }
    if (rc == SP_OK) rc = sp__publish_commit(pub, SP__SYNC_NONE, err);
    else sp_publish_abort(pub);
    if (rc == SP_OK) evict(ds, path);
    return rc;
}

/* Sample i from the copy at path: 1 served (bytes in out, hash checked),
 * 0 not there or not sound (removed if unsound), < 0 an error. */
static int from_copy(const sp_dataset *ds, uint64_t i, const char *path, sp_sample_data *out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return 0;
    struct stat st;
    uint32_t s = ds->tar->shard_of[i];
    uint64_t want = ds->sizes[i], got = 0;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
             (uint64_t)st.st_size == ds->tar->shard_sizes[s];
    uint8_t *buf = ok ? malloc(want ? (size_t)want : 1) : NULL;
    while (buf && got < want) {
        ssize_t k = pread(fd, buf + got, (size_t)(want - got), (off_t)(ds->tar->offsets[i] + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (uint64_t)k;
    }
    XXH128_hash_t h = XXH3_128bits(buf ? buf : (const uint8_t *)"", (size_t)got);
    ok = buf && got == want && h.high64 == ds->hashes[i].hi && h.low64 == ds->hashes[i].lo;
    if (ok) (void)futimens(fd, NULL);   /* used: the LRU's clock */
    close(fd);
    if (!ok) {
        free(buf);
        unlink(path);   /* unsound: the next reader downloads it again */
        return 0;
    }
    out->owned = buf;
    out->src.bytes = buf;
    out->src.len = (size_t)want;
    return 1;
}

int sp__ds_shard_cache_read(const sp_dataset *ds, uint64_t i, sp_sample_data *out,
                            sp_error *err) {
    char *path = copy_path(ds, ds->tar->shard_of[i]);
    if (!path) return sp_error_set(err, SP_ENOMEM, "shard cache: out of memory");
    int rc = from_copy(ds, i, path, out);
    if (rc == 0) {
        rc = download(ds, ds->tar->shard_of[i], path, err);
        if (rc == SP_OK) rc = from_copy(ds, i, path, out) ? 1 : 0;
    }
    free(path);
    return rc;
}
