/* cache.c - the epoch cache: open/close, entry keys, readers and the batch
 * helper (include/seedpipe/cache.h); writers are in cache_writer.c, gc in
 * cache_gc.c, the file formats in cache_file.c and cache_manifest.c.
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
 * DIR/.locks/<key>; if another process holds it, sp_cache_writer_open()
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
#include "loader/cache/cache_internal.h"
#include "common/hash_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#include "seedpipe/pipeline.h"



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


void sp_cache_opts_default(sp_cache_opts *o) {
    memset(o, 0, sizeof *o);
    o->level = SP_CACHE_DEFAULT_LEVEL;
}

const char *sp_cache_dir(const sp_cache *c) { return c->dir; }
uint64_t sp__cache_max_size(const sp_cache *c) { return c->o.max_size; }
int sp__cache_read_only(const sp_cache *c) { return c->o.read_only; }
void sp_cache_stats_get(const sp_cache *c, sp_cache_stats *s) { *s = c->st; }

void sp__cache_warn(sp_cache *c, const char *msg) {
    if (c->o.warn) c->o.warn(c->o.warn_ud, msg);
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

sp_digest sp_cache_key(const sp_loader *ld, uint32_t epoch) {
    const sp_loader_config *cfg = sp_loader_config_of(ld);
    sp_digest fp = sp_loader_fingerprint(ld);
    sp__hash st;
    sp__hash_init(&st);
    sp__hash_str(&st, "seedpipe-cache-key");
    sp__hash_u64(&st, SP_CACHE_FORMAT_VERSION);
    sp__hash_u64(&st, fp.hi);
    sp__hash_u64(&st, fp.lo);
    sp__hash_u64(&st, cfg->seed);
    sp__hash_u64(&st, epoch);
    sp__hash_u64(&st, cfg->rank);
    sp__hash_u64(&st, cfg->world ? cfg->world : 1);
    return sp__hash_digest(&st);
}

/* The manifest fields a loader decides (everything but sizes and times). */
void sp__cache_info_from_loader(const sp_loader *ld, uint32_t epoch, sp_cache_entry_info *e) {
    const sp_loader_config *cfg = sp_loader_config_of(ld);
    e->fingerprint = sp_loader_fingerprint(ld);
    e->dataset_fingerprint = sp_dataset_fingerprint(sp_loader_dataset(ld));
    e->seed = cfg->seed;
    e->epoch = epoch;
    e->rank = cfg->rank;
    e->world = cfg->world ? cfg->world : 1;
    e->batch_size = cfg->batch_size;
    e->drop_last = cfg->drop_last ? 1 : 0;
    e->skip_normalize = cfg->skip_normalize ? 1 : 0;
    snprintf(e->dtype, sizeof e->dtype, "%s", sp_dtype_name(cfg->dtype));
    snprintf(e->layout, sizeof e->layout, "%s", sp_layout_name(cfg->layout));
    snprintf(e->on_error, sizeof e->on_error, "%s", sp_on_error_name(cfg->on_error));
    snprintf(e->rng_mode, sizeof e->rng_mode, "%s", sp_rng_mode_name(cfg->rng_mode));
    e->batches = sp_loader_batches_per_epoch(ld);
    e->sample_bytes = sp_loader_sample_bytes(ld);
}

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

int sp_cache_reader_open(sp_cache *c, sp_loader *ld, uint32_t epoch, sp_cache_reader **out,
                         sp_error *err) {
    *out = NULL;
    sp_error_clear(err);
    sp_cache_reader *r = calloc(1, sizeof *r);
    if (!r) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    r->c = c;
    r->ld = ld;
    r->sample_bytes = sp_loader_sample_bytes(ld);
    sp_digest_hex(sp_cache_key(ld, epoch), r->key);
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
    if (rc == 0) {
        sp_cache_entry_info want;
        memset(&want, 0, sizeof want);
        sp__cache_info_from_loader(ld, epoch, &want);
        sp_cache_entry_info *e = &r->m.info;
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
        if (why[0]) rc = sp_error_set(err, SP_EFORMAT, "%s: entry does not match its key: %s",
                                      mpath, why);
    }
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

void sp__cb_io_free(sp__cb_io *io) {
    ZSTD_freeDCtx(io->dctx);
    ZSTD_freeCCtx(io->cctx);
    sp__buf_free(&io->file);
    sp__buf_free(&io->meta);
    sp__buf_free(&io->scratch);
    memset(io, 0, sizeof *io);
}

int sp__cb_read(int dirfd, const char *dirpath, const char *name, sp_digest key, uint32_t epoch,
                uint64_t index, size_t sample_bytes, uint32_t cap, const sp__cm_batch *line,
                sp__cb_io *io, sp_batch *out, sp__cb_header *h, int *enoent, sp_error *err) {
    char path[PATH_CAP + 40];
    snprintf(path, sizeof path, "%s/%s", dirpath, name);
    *enoent = 0;
    if (!io->dctx && !(io->dctx = ZSTD_createDCtx()))
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    size_t len;
    if (sp__read_file_at(dirfd, name, NULL, SP__CB_MAX_RAW, &io->file, &len, NULL) != 0) {
        int e = errno;
        if (e == ENOMEM) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
        *enoent = e == ENOENT;
        return sp_error_set(err, SP_EFORMAT, "%s: %s", path, e == ENOENT ? "missing" : strerror(e));
    }
    if (len != line->stored)
        return sp_error_set(err, SP_EFORMAT, "%s: %zu bytes, the manifest says %" PRIu64
                            " (truncated or extended)", path, len, line->stored);
    int rc = sp__cb_parse_header(io->file.p, len, path, h, err);
    if (rc == 0 && (h->key.hi != key.hi || h->key.lo != key.lo || h->epoch != epoch ||
                    h->index != index || h->sample_bytes != sample_bytes ||
                    h->file_hash != line->file_hash ||
                    h->meta_raw + (uint64_t)h->count * h->sample_bytes != line->raw))
        rc = sp_error_set(err, SP_EFORMAT, "%s: header does not match the entry's manifest",
                          path);
    /* A batch logs at most one failure per position and substitute try. */
    if (rc == 0 && (h->count > cap || h->nskipped > cap || h->nsubstituted > cap ||
                    h->nfailures > (uint64_t)cap * (SP_SUBSTITUTE_TRIES + 1) ||
                    h->meta_raw > (uint64_t)cap * 36 +
                                      (uint64_t)h->nfailures * (16 + SP_ERROR_MSG_MAX)))
        rc = sp_error_set(err, SP_EFORMAT, "%s: metadata larger than a batch of %u can have",
                          path, cap);
    if (rc == 0)
        rc = sp__cb_decode(io->dctx, io->file.p, len, path, h, out, &io->meta, &io->scratch, err);
    return rc;
}

const char *sp__cache_reader_key(const sp_cache_reader *r) { return r->key; }
const sp__cm_batch *sp__cache_reader_line(const sp_cache_reader *r, uint64_t index) {
    return index < r->m.info.batches ? &r->m.b[index] : NULL;
}
const sp_cache_opts *sp__cache_opts(const sp_cache *c) { return &c->o; }

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
    sp__cb_header h;
    sp_digest key;
    sp_digest_parse(r->key, &key);
    int enoent;
    int rc = sp__cb_read(r->dirfd, r->path, name, key, r->m.info.epoch, index, r->sample_bytes,
                         out->capacity, &r->m.b[index], &r->io, out, &h, &enoent, err);
    if (rc != 0) return sp__cache_reader_failed(r, enoent, err);
    sp__cb_replay_failures(r->ld, &h, r->io.meta.p);
    sp__cache_reader_count(r, index);
    return SP_OK;
}

/* ---- the helper --------------------------------------------------------------------- */

void sp_cache_flush(sp_cache *c) {
    if (!c) return;
    if (c->wr) {
        sp_error e;
        sp_error_clear(&e);
        if (sp_cache_writer_complete(c->wr)) {
            if (sp_cache_writer_commit(c->wr, &e) != 0) sp__cache_warn(c, e.msg);
        } else {
            sp_cache_writer_abort(c->wr);
        }
        c->wr = NULL;
    }
    sp_cache_reader_close(c->rd);
    c->rd = NULL;
    c->slot_on = 0;
    c->slot_ld = NULL;
}

int sp_cache_epoch_batch(sp_cache *c, sp_loader *ld, uint32_t epoch, uint64_t index,
                         sp_batch *out, sp_error *err) {
    sp_error e;
    sp_error_clear(&e);
    sp_digest key = sp_cache_key(ld, epoch);
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
            rc = sp_cache_writer_open(c, ld, epoch, &c->wr, &e);
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
        sp_cache_writer_abort(c->wr);
        c->wr = NULL;
        return rc;
    }
    if (c->wr) {
        sp_error_clear(&e);
        rc = sp_cache_writer_put(c->wr, out, &e);
        if (rc != 0) {
            char msg[SP_ERROR_MSG_MAX + 64];
            snprintf(msg, sizeof msg, "%s: epoch %u continues uncached", e.msg, epoch);
            sp__cache_warn(c, msg);
            sp_cache_writer_abort(c->wr);
            c->wr = NULL;
        } else if (sp_cache_writer_complete(c->wr)) {
            sp_cache_writer *w = c->wr;
            c->wr = NULL;
            sp_error_clear(&e);
            if (sp_cache_writer_commit(w, &e) != 0) {
                char msg[SP_ERROR_MSG_MAX + 64];
                snprintf(msg, sizeof msg, "%s: epoch %u continues uncached", e.msg, epoch);
                sp__cache_warn(c, msg);
            }
        }
    }
    return SP_OK;
}
