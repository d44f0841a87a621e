/* cache.c - the epoch cache: open/close and the epoch helper that reads a
 * committed entry or builds one as batches are computed
 * (include/seedpipe/cache.h).
 *
 * The top of the cache's one-way stack (cache/; each file calls only
 * files below it, bottom first):
 *
 *   cache_filter.c   the byte shuffle and the float32 dictionary
 *   cache_file.c     the batch file format: encode, parse, decode (its
 *                    checksums: common/hash.c's XXH3 at the CPU's level)
 *   cache_fs.c       POSIX helpers: write a new file, remove a tree, move
 *                    aside (and, in test builds, the write-failure hook)
 *   cache_manifest.c an entry's MANIFEST: format and strict parse
 *   cache_key.c      the entry key, the manifest fields a loader decides,
 *                    the handle's accessors
 *   cache_batch.c    whole batch files: read + check, encode + write
 *   cache_read.c     readers
 *   cache_gc.c       list, gc, verify
 *   cache_writer.c   writers: lock, staging, commit (then gc to max_size)
 *   cache_commit.c   an epoch's commit and gc on a thread of its own (the pool's)
 *   cache.c          open/close, the epoch helper
 *
 * The formats are described in cache_internal.h; the worker pool
 * (pool/) uses whole batch files and the reader's and writer's pool
 * side (cache_internal.h) from above.
 *
 * A cache directory holds one subdirectory per committed entry, named by the
 * entry key, plus three bookkeeping directories:
 *
 *   DIR/<key hex>/MANIFEST       the entry, what it is and every file's hash
 *   DIR/<key hex>/b00000000 ...  one file per batch (cache_internal.h)
 *   DIR/.tmp/<key>.<pid>.<n>/    a writer's private staging directory
 *   DIR/.locks/<key hex>         the per-key writer lock (flock)
 *   DIR/.corrupt/<key>.<pid>.<n> entries moved aside by a reader
 *
 * HOW IT WORKS: atomicity
 * A writer never writes under DIR/<key>. It creates a fresh staging
 * directory (mkdir is exclusive; the name carries pid and a counter), writes
 * every batch file there (O_CREAT|O_EXCL, fsync unless opts.no_fsync),
 * then the MANIFEST, fsyncs the staging directory, and renames the whole
 * directory to DIR/<key> in one rename(2), then fsyncs DIR. rename of a
 * directory onto a name that does not exist is atomic, so DIR/<key> either
 * does not exist or holds a complete entry whose manifest was written last;
 * there is no "partially visible" state for a reader to reason about, and a
 * writer that dies at any point leaves only a staging directory behind
 * (collected by gc). A write error (ENOSPC, EFBIG from RLIMIT_FSIZE, EIO)
 * removes that file and spoils the writer; abort removes the staging
 * directory. The fsyncs buy durability only: correctness never rests on
 * them, since every read is checked against two checksums and a damaged
 * file after a power loss is just a corrupt file (moved aside, recomputed).
 *
 * HOW IT WORKS: concurrency
 * Two writers of one key are safe without any lock: each fills its own
 * staging directory, and the second rename fails (EEXIST/ENOTEMPTY) because
 * DIR/<key> then exists and is not empty; the loser deletes its staging
 * directory and reports success (the entry is there, and it has the same
 * bytes: the key decides them). The per-key lock is only there to avoid
 * doing the work twice: a writer takes flock(LOCK_EX|LOCK_NB) on
 * DIR/.locks/<key>; if another process holds it, sp__cache_writer_open()
 * returns SP_CACHE_SKIP and that stream runs uncached. flock is released by
 * the kernel when its holder dies, so a crash never leaves a stale lock (no
 * pid files, no timeouts). The holder unlinks the lock file before closing
 * it; a process that locked an unlinked file notices (fstat vs stat) and
 * retries, the classic lock-file protocol. Each writer also holds flock on
 * its staging directory: gc removes a staging directory only if it can take
 * that lock (its writer is gone) and it is more than a minute old (a writer
 * between mkdir and flock).
 *
 * Readers open DIR/<key> once (a directory fd) and read every batch with
 * openat() through it. gc evicts an entry by renaming it into .tmp/ first
 * and deleting it there, so a reader never sees a half-deleted entry under
 * the key's name: it sees the whole entry or, once files are unlinked, a
 * missing file, which is SP_EIO (recompute), distinguished from a
 * damaged-entry ENOENT by checking whether DIR/<key> is still its directory.
 * A reader that finds a bad file moves the entry aside into .corrupt/ (once;
 * a rename, so concurrent readers agree on who did it) and returns
 * SP_EFORMAT; the remaining batches are still read through its directory fd,
 * each verified on its own, and the next run misses and rebuilds the entry.
 *
 * LRU: a hit sets the manifest's mtime to now (utimensat: atomic, no
 * rewrite, independent of noatime). gc sorts by it.
 *
 * LIMITATIONS: the lock and the rename protocol need POSIX rename and flock
 * semantics (local file systems; NFS v4 emulates flock with byte-range
 * locks, which suffices). Per-worker rng mode is never cached.
 */
#include "cache/cache_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void sp_cache_opts_default(sp_cache_opts *o) {
    memset(o, 0, sizeof *o);
    o->level = SP_CACHE_DEFAULT_LEVEL;
}

/* mkdir -p for the cache directory itself. */
static int mkdirs(const char *path) {
    char buf[PATH_CAP];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (buf[i] == '/' || buf[i] == '\0') {
            char ch = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
            buf[i] = ch;
        }
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int sp_cache_open(const char *dir, const sp_cache_opts *opts, sp_cache **out, sp_error *err) {
    *out = NULL;
    sp_cache_opts o;
    if (opts) o = *opts;
    else sp_cache_opts_default(&o);
    if (o.level == 0) o.level = SP_CACHE_DEFAULT_LEVEL;
    if (o.level < ZSTD_minCLevel() || o.level > ZSTD_maxCLevel())
        return sp_error_set(err, SP_EINVAL, "cache: zstd level %d out of range %d..%d", o.level,
                            ZSTD_minCLevel(), ZSTD_maxCLevel());
    if (o.filter < 0 || o.filter > 2)
        return sp_error_set(err, SP_EINVAL, "cache: bad filter %d", o.filter);
    if (!dir || !*dir || strlen(dir) > PATH_CAP - 200)
        return sp_error_set(err, SP_EINVAL, "cache: bad directory name");
    struct stat dst;
    if (o.read_only && (stat(dir, &dst) != 0 || !S_ISDIR(dst.st_mode)))
        return sp_error_set(err, SP_EIO, "%s: not a cache directory", dir);
    if (!o.read_only && mkdirs(dir) != 0)
        return sp_error_set(err, SP_EIO, "%s: cannot create cache directory: %s", dir,
                            strerror(errno));
    static const char *const subs[] = {".tmp", ".corrupt", ".locks"};
    for (int i = 0; i < 3 && !o.read_only; i++) {
        char p[PATH_CAP];
        snprintf(p, sizeof p, "%s/%s", dir, subs[i]);
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return sp_error_set(err, SP_EIO, "%s: %s", p, strerror(errno));
    }
    sp_cache *c = calloc(1, sizeof *c);
    if (c) c->dir = malloc(strlen(dir) + 1);
    if (!c || !c->dir) {
        free(c);
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    }
    strcpy(c->dir, dir);
    c->o = o;
    *out = c;
    return SP_OK;
}

void sp_cache_close(sp_cache *c) {
    if (!c) return;
    sp_cache_flush(c);
    free(c->dir);
    free(c);
}

/* ---- the helper --------------------------------------------------------------------- */

void sp_cache_flush(sp_cache *c) {
    if (!c) return;
    sp__cache_commit_wait(c);   /* a pool's epoch commit still running (cache_commit.c) */
    if (c->wr) {
        sp_error e;
        sp_error_clear(&e);
        if (sp__cache_writer_complete(c->wr)) {
            if (sp__cache_writer_commit(c->wr, &e) != 0) sp__cache_warn(c, e.msg);
        } else {
            sp__cache_writer_abort(c->wr);
        }
        c->wr = NULL;
    }
    sp_cache_reader_close(c->rd);
    c->rd = NULL;
    c->slot_on = 0;
    c->slot_ld = NULL;
}

int sp__cache_epoch_batch(sp_cache *c, sp_loader *ld, uint32_t epoch, uint64_t index,
                          sp_batch *out, sp_error *err) {
    sp_error e;
    sp_error_clear(&e);
    sp_digest key = sp__cache_key(ld, epoch);
    if (!c->slot_on || c->slot_ld != ld || c->slot_epoch != epoch ||
        c->slot_key.hi != key.hi || c->slot_key.lo != key.lo) {
        sp_cache_flush(c);
        c->slot_on = 1;
        c->slot_ld = ld;
        c->slot_epoch = epoch;
        c->slot_key = key;
        int rc = sp_cache_reader_open(c, ld, epoch, &c->rd, &e);
        if (rc == SP_ENOMEM) return sp_error_set(err, rc, "%s", e.msg);
        if (rc == SP_CACHE_MISS && e.code) sp__cache_warn(c, e.msg);
        if (rc == SP_CACHE_MISS && index == 0) {
            sp_error_clear(&e);
            rc = sp__cache_writer_open(c, ld, epoch, &c->wr, &e);
            if (rc != 0 && rc != SP_CACHE_SKIP && rc != SP_EUNSUPP) sp__cache_warn(c, e.msg);
        }
    }
    if (c->rd) {
        sp_error_clear(&e);
        int rc = sp_cache_reader_batch(c->rd, index, out, &e);
        if (rc == 0) return SP_OK;
        if (rc == SP_ERANGE) return sp_error_set(err, rc, "%s", e.msg);
        sp__cache_warn(c, e.msg);
        if (rc != SP_EFORMAT) {   /* evicted, or out of memory: stop reading this entry */
            sp_cache_reader_close(c->rd);
            c->rd = NULL;
        }
    }
    int rc = sp_loader_batch(ld, epoch, index, out, err);
    c->st.batches_computed++;
    if (rc != 0) {
        sp__cache_writer_abort(c->wr);
        c->wr = NULL;
        return rc;
    }
    if (c->wr) {
        sp_error_clear(&e);
        rc = sp__cache_writer_put(c->wr, out, &e);
        if (rc != 0) {
            char msg[SP_ERROR_MSG_MAX + 64];
            snprintf(msg, sizeof msg, "%s: epoch %u continues uncached", e.msg, epoch);
            sp__cache_warn(c, msg);
            sp__cache_writer_abort(c->wr);
            c->wr = NULL;
        } else if (sp__cache_writer_complete(c->wr)) {
            sp_cache_writer *w = c->wr;
            c->wr = NULL;
            sp_error_clear(&e);
            if (sp__cache_writer_commit(w, &e) != 0) {
                char msg[SP_ERROR_MSG_MAX + 64];
                snprintf(msg, sizeof msg, "%s: epoch %u continues uncached", e.msg, epoch);
                sp__cache_warn(c, msg);
            } else {
                c->slot_on = 0;   /* committed: the epoch again is read from its entry */
            }
        }
    }
    return SP_OK;
}
