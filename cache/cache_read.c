/* cache_read.c - reading a cache entry: the reader, and the pool's side of
 * it (include/seedpipe/cache.h, cache_internal.h).
 *
 * In the cache's stack (cache/, bottom first): above whole batch
 * files (cache_batch.c), the manifest (cache_manifest.c), the POSIX helpers
 * (cache_fs.c) and the entry key (cache_key.c), the cache files it calls;
 * below the epoch helper (cache.c). It never calls the writer or gc.
 *
 * A reader opens DIR/<key> once (a directory fd), checks the MANIFEST
 * against the loader, and reads each batch through that fd: the protocol,
 * eviction and corruption handling are the HOW IT WORKS essay at the top of
 * cache.c. A bad file moves the entry aside into .corrupt/ (once); a file
 * missing because gc evicted the entry meanwhile is SP_EIO (recompute).
 */
#include "cache/cache_internal.h"
#include "loader/loader_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/common_internal.h"

struct sp_cache_reader {
    sp_cache *c;
    sp_loader *ld;
    int dirfd;
    int moved;
    char key[33];
    char path[PATH_CAP];       /* the entry directory (moves with it) */
    sp__cm m;
    size_t sample_bytes;
    sp__cb_io io;
};

/* ---- readers -------------------------------------------------------------------- */

void sp_cache_reader_close(sp_cache_reader *r) {
    if (!r) return;
    if (r->dirfd >= 0) close(r->dirfd);
    sp__cm_free(&r->m);
    sp__cb_io_free(&r->io);
    free(r);
}

/* Move the reader's entry aside (once) and finish err's message. */
static int reader_corrupt(sp_cache_reader *r, sp_error *err) {
    r->c->st.corrupt++;
    err->code = SP_EFORMAT;
    if (r->moved || r->c->o.read_only) return SP_EFORMAT;
    r->moved = 1;
    char dst[PATH_CAP];
    size_t n = strlen(err->msg);
    if (sp__move_aside(r->c->dir, r->key, dst, sizeof dst) == 0) {
        snprintf(err->msg + n, sizeof err->msg - n, " (entry moved to %s)", dst);
        snprintf(r->path, sizeof r->path, "%s", dst);
    } else {
        snprintf(err->msg + n, sizeof err->msg - n, " (entry not served)");
    }
    err->code = SP_EFORMAT;
    return SP_EFORMAT;
}

/* 1 if the reader's directory is still DIR/<key> (not evicted). */
static int reader_in_place(const sp_cache_reader *r) {
    char p[PATH_CAP];
    struct stat a, b;
    snprintf(p, sizeof p, "%s/%s", r->c->dir, r->key);
    return fstat(r->dirfd, &a) == 0 && stat(p, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* The entry's manifest (read into r->m) against what the loader decides.
 * @return 0 or SP_EFORMAT "MANIFEST path: entry does not match its key: what". */
static int check_entry(const sp_cache_reader *r, const sp_loader *ld, uint32_t epoch,
                       const char *mpath, sp_error *err) {
    sp_cache_entry_info want;
    memset(&want, 0, sizeof want);
    sp__cache_info_from_loader(ld, epoch, &want);
    const sp_cache_entry_info *e = &r->m.info;
    char why[128] = "";
    if (strcmp(e->key, r->key) != 0) snprintf(why, sizeof why, "key %s", e->key);
    else if (e->fingerprint.hi != want.fingerprint.hi ||
             e->fingerprint.lo != want.fingerprint.lo)
        snprintf(why, sizeof why, "loader fingerprint");
    else if (e->seed != want.seed || e->epoch != want.epoch || e->rank != want.rank ||
             e->world != want.world)
        snprintf(why, sizeof why, "seed/epoch/rank/world");
    else if (e->batches != want.batches || e->sample_bytes != want.sample_bytes)
        snprintf(why, sizeof why, "geometry (%" PRIu64 " batches of %" PRIu64
                 "-byte samples)", e->batches, e->sample_bytes);
    if (why[0])
        return sp_error_set(err, SP_EFORMAT, "%s: entry does not match its key: %s", mpath, why);
    return SP_OK;
}

int sp_cache_reader_open(sp_cache *c, sp_loader *ld, uint32_t epoch, sp_cache_reader **out,
                         sp_error *err) {
    *out = NULL;
    sp_error_clear(err);
    sp_cache_reader *r = calloc(1, sizeof *r);
    if (!r) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    r->c = c;
    r->ld = ld;
    r->sample_bytes = sp__loader_sample_bytes(ld);
    sp_digest_hex(sp__cache_key(ld, epoch), r->key);
    snprintf(r->path, sizeof r->path, "%s/%s", c->dir, r->key);
    r->dirfd = open(r->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (r->dirfd < 0) {
        int e = errno;
        if (e != ENOENT) sp_error_set(err, SP_EIO, "%s: %s", r->path, strerror(e));
        sp_cache_reader_close(r);
        c->st.misses++;
        return SP_CACHE_MISS;
    }
    char mpath[PATH_CAP + 16];
    snprintf(mpath, sizeof mpath, "%s/%s", r->path, SP__CM_NAME);
    int enoent;
    int rc = sp__cm_read(r->dirfd, mpath, &r->m, &enoent, err);
    if (rc == SP_ENOMEM) {
        sp_cache_reader_close(r);
        return rc;
    }
    if (rc != 0 && enoent && !reader_in_place(r)) {   /* evicted as we opened it: a miss */
        sp_error_clear(err);
        sp_cache_reader_close(r);
        c->st.misses++;
        return SP_CACHE_MISS;
    }
    if (rc == 0) rc = check_entry(r, ld, epoch, mpath, err);
    if (rc != 0) {
        reader_corrupt(r, err);
        sp_cache_reader_close(r);
        c->st.misses++;
        return SP_CACHE_MISS;
    }
    if (!c->o.read_only)
        (void)utimensat(r->dirfd, SP__CM_NAME, NULL, 0);   /* LRU; best effort */
    r->io.dctx = ZSTD_createDCtx();
    if (!r->io.dctx) {
        sp_cache_reader_close(r);
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    }
    c->st.hits++;
    *out = r;
    return SP_OK;
}

const char *sp__cache_reader_key(const sp_cache_reader *r) { return r->key; }
const sp__cm_batch *sp__cache_reader_line(const sp_cache_reader *r, uint64_t index) {
    return index < r->m.info.batches ? &r->m.b[index] : NULL;
}

void sp__cache_reader_count(sp_cache_reader *r, uint64_t index) {
    r->c->st.batches_read++;
    r->c->st.bytes_read += r->m.b[index].stored;
    r->c->st.raw_read += r->m.b[index].raw;
}

int sp__cache_reader_failed(sp_cache_reader *r, int enoent, sp_error *err) {
    if (err->code == SP_ENOMEM) return SP_ENOMEM;
    if (enoent && !r->moved && !reader_in_place(r)) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, " (entry evicted while reading)");
        err->code = SP_EIO;
        return SP_EIO;
    }
    return reader_corrupt(r, err);
}

int sp_cache_reader_batch(sp_cache_reader *r, uint64_t index, sp_batch *out, sp_error *err) {
    if (index >= r->m.info.batches)
        return sp_error_set(err, SP_ERANGE, "%s: batch %" PRIu64 " out of range (%" PRIu64 ")",
                            r->path, index, r->m.info.batches);
    char name[32];
    snprintf(name, sizeof name, "b%08" PRIu64, index);
    sp__cb_read_req rq = {.dirfd = r->dirfd, .dirpath = r->path, .name = name,
                          .epoch = r->m.info.epoch, .index = index,
                          .sample_bytes = r->sample_bytes, .cap = out->capacity,
                          .line = &r->m.b[index]};
    sp__digest_parse(r->key, &rq.key);
    sp__cb_header h;
    int enoent;
    int rc = sp__cb_read(&rq, &r->io, out, &h, &enoent, err);
    if (rc != 0) return sp__cache_reader_failed(r, enoent, err);
    sp__cb_replay_failures(r->ld, &h, r->io.meta.p);
    sp__cache_reader_count(r, index);
    return SP_OK;
}
