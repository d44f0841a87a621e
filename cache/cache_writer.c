/* cache_writer.c - writing a cache entry: the per-key lock, staging, commit,
 * and the pool's side of a writer (include/seedpipe/cache.h,
 * cache_internal.h).
 *
 * In the cache's stack (cache/, bottom first): above whole batch
 * files (cache_batch.c), the manifest (cache_manifest.c), the POSIX helpers
 * (cache_fs.c), the entry key (cache_key.c) and gc (cache_gc.c: a commit
 * collects down to opts.max_size), the cache files it calls; below the
 * epoch helper (cache.c).
 *
 * A writer fills a private staging directory DIR/.tmp/<key>.<pid>.<n>/ (it
 * holds flock on it, so gc knows it is alive), one O_EXCL file per batch,
 * then the MANIFEST, and renames the directory to DIR/<key>: the protocol,
 * and why it is atomic and safe against concurrent writers, is the HOW IT
 * WORKS essay at the top of cache.c. Any write error removes the file and
 * spoils the writer; abort removes the staging directory, so a full disk
 * leaves nothing behind.
 */
#include "cache/cache_internal.h"
#include "loader/loader_internal.h"

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
#include "augment/pipeline_internal.h"

struct sp_cache_writer {
    sp_cache *c;
    const sp_loader *ld;
    uint32_t epoch;
    char key[33];
    int lockfd, tmpfd, stagefd;
    char stage[128];           /* name under DIR/.tmp */
    int filter, spoiled;
    size_t sample_bytes;
    sp__cb_io io;
    sp__cm m;
    uint8_t *have;
    uint64_t nput;
};

/* ---- the per-key writer lock ------------------------------------------------------ */

static void lock_path(const sp_cache *c, const char *key, char *p, size_t cap) {
    snprintf(p, cap, "%s/.locks/%s", c->dir, key);
}

/* @return 0 locked (*fd), 1 busy, -1 error (errno). */
static int lock_key(const sp_cache *c, const char *key, int *fd) {
    char p[PATH_CAP];
    lock_path(c, key, p, sizeof p);
    for (int tries = 0; tries < 16; tries++) {
        int f = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (f < 0) return -1;
        if (flock(f, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            close(f);
            if (e == EWOULDBLOCK) return 1;
            errno = e;
            return -1;
        }
        struct stat a, b;
        if (fstat(f, &a) == 0 && stat(p, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            *fd = f;
            return 0;
        }
        close(f);   /* locked a file its holder had just unlinked: retry */
    }
    errno = EAGAIN;
    return -1;
}

static void unlock_key(const sp_cache *c, const char *key, int fd) {
    if (fd < 0) return;
    char p[PATH_CAP];
    lock_path(c, key, p, sizeof p);
    unlink(p);   /* while still holding it: see HOW IT WORKS */
    close(fd);
}

/* ---- writers --------------------------------------------------------------------- */

static void writer_free(sp_cache_writer *w) {
    unlock_key(w->c, w->key, w->lockfd);
    if (w->stagefd >= 0) close(w->stagefd);
    if (w->tmpfd >= 0) close(w->tmpfd);
    sp__cb_io_free(&w->io);
    sp__cm_free(&w->m);
    free(w->have);
    free(w);
}

void sp__cache_writer_abort(sp_cache_writer *w) {
    if (!w) return;
    if (w->tmpfd >= 0 && w->stage[0]) sp__rmtree_at(w->tmpfd, w->stage);
    writer_free(w);
}

static int entry_exists(const sp_cache *c, const char *key) {
    char p[PATH_CAP];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", c->dir, key);
    return lstat(p, &st) == 0;
}

/* The manifest w will commit, but for its sizes and batch lines (pl: the
 * canonical pipeline), and the table of batches put. @return 0 or -1 (out
 * of memory; w is left for sp__cache_writer_abort()). */
static int writer_manifest(sp_cache_writer *w, sp_digest key, const char *pl) {
    const sp_loader_config *cfg = sp__loader_config_of(w->ld);
    sp__cache_info_from_loader(w->ld, w->epoch, &w->m.info);
    w->m.version = SP_CACHE_FORMAT_VERSION;
    w->m.key = key;
    w->m.info.level = w->c->o.level;
    char *abs = realpath(cfg->dataset, NULL);   /* for `cache verify --recompute` */
    const char *ds = abs && !strchr(abs, '\n') ? abs : cfg->dataset;
    w->m.info.dataset = malloc(strlen(ds) + 1);
    if (w->m.info.dataset) strcpy(w->m.info.dataset, ds);
    free(abs);
    w->m.info.pipeline = malloc(strlen(pl) + 1);
    w->m.b = calloc((size_t)w->m.info.batches, sizeof *w->m.b);
    w->have = calloc((size_t)w->m.info.batches, 1);
    if (!w->m.info.dataset || !w->m.info.pipeline || !w->m.b || !w->have) return -1;
    strcpy(w->m.info.pipeline, pl);
    if (cfg->split && cfg->subset && *cfg->split && *cfg->subset) {   /* for --recompute */
        w->m.info.split = strdup(cfg->split);
        w->m.info.subset = strdup(cfg->subset);
        w->m.info.split_seed = cfg->split_seed;
        if (!w->m.info.split || !w->m.info.subset) return -1;
    }
    return 0;
}

int sp__cache_writer_open(sp_cache *c, const sp_loader *ld, uint32_t epoch,
                          sp_cache_writer **out, sp_error *err) {
    *out = NULL;
    const sp_loader_config *cfg = sp__loader_config_of(ld);
    if (cfg->rng_mode == SP_RNG_PER_WORKER)
        return sp_error_set(err, SP_EUNSUPP, "cache: per-worker rng mode is not cacheable "
                            "(its bytes depend on the order batches are asked for)");
    const char *pl = sp__loader_spec(ld);
    if (strchr(cfg->dataset, '\n') || strchr(pl, '\n') ||
        (cfg->split && cfg->subset && (strchr(cfg->split, '\n') || strchr(cfg->subset, '\n'))))
        return sp_error_set(err, SP_EUNSUPP, "cache: a newline in the dataset path, pipeline "
                            "or split");
    if (c->o.read_only)
        return sp_error_set(err, SP_CACHE_SKIP, "%s: read-only cache", c->dir);
    sp_cache_writer *w = calloc(1, sizeof *w);
    if (!w) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    w->c = c;
    w->ld = ld;
    w->epoch = epoch;
    w->lockfd = w->tmpfd = w->stagefd = -1;
    w->sample_bytes = sp__loader_sample_bytes(ld);
    sp_digest key = sp__cache_key(ld, epoch);
    char hex[33];   /* messages below outlive w */
    sp_digest_hex(key, hex);
    memcpy(w->key, hex, sizeof hex);
    int half = sp__dtype_size(cfg->dtype) == 2;   /* bfloat16, float16: unfiltered */
    w->filter = c->o.filter == 2 || half ? SP__FILTER_NONE
                : c->o.filter == 1 ? SP__FILTER_SHUFFLE4
                : cfg->dtype == SP_DTYPE_FLOAT32 ? SP__FILTER_DICT8_NCHW : SP__FILTER_NONE;
    if (entry_exists(c, w->key)) {
        writer_free(w);
        return sp_error_set(err, SP_CACHE_SKIP, "%s/%s: entry exists", c->dir, hex);
    }
    if (!c->o.no_lock) {
        int lr = lock_key(c, w->key, &w->lockfd);
        if (lr != 0) {
            int e = errno;
            writer_free(w);
            if (lr == 1)
                return sp_error_set(err, SP_CACHE_SKIP, "%s/.locks/%s: being written by another "
                                    "process", c->dir, hex);
            return sp_error_set(err, SP_EIO, "%s/.locks/%s: %s", c->dir, hex, strerror(e));
        }
        if (entry_exists(c, w->key)) {   /* committed while we waited for nothing */
            writer_free(w);
            return sp_error_set(err, SP_CACHE_SKIP, "%s/%s: entry exists", c->dir, hex);
        }
    }
    char p[PATH_CAP];
    snprintf(p, sizeof p, "%s/.tmp", c->dir);
    w->tmpfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    snprintf(w->stage, sizeof w->stage, "%s.%ld.%lu", w->key, (long)getpid(), sp__cache_seq());
    if (w->tmpfd < 0 || mkdirat(w->tmpfd, w->stage, 0755) != 0) {
        int e = errno;
        w->stage[0] = '\0';
        writer_free(w);
        return sp_error_set(err, SP_EIO, "%s: cannot create a staging directory: %s", p,
                            strerror(e));
    }
    w->stagefd = openat(w->tmpfd, w->stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (w->stagefd < 0 || flock(w->stagefd, LOCK_EX | LOCK_NB) != 0) {
        sp_error_set(err, SP_EIO, "%s/%s: %s", p, w->stage, strerror(errno));
        sp__cache_writer_abort(w);
        return SP_EIO;
    }
    if (writer_manifest(w, key, pl) != 0) {
        sp__cache_writer_abort(w);
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    }
    *out = w;
    return SP_OK;
}

int sp__cache_writer_complete(const sp_cache_writer *w) {
    return w && !w->spoiled && w->nput == w->m.info.batches;
}

const char *sp__cache_writer_stage(const sp_cache_writer *w) { return w->stage; }
sp_digest sp__cache_writer_key(const sp_cache_writer *w) { return w->m.key; }
int sp__cache_writer_filter(const sp_cache_writer *w) { return w->filter; }

void sp__cache_writer_discard(sp_cache_writer *w, uint64_t index) {
    if (w->stagefd < 0 || index >= w->m.info.batches || w->have[index]) return;
    char name[32];
    snprintf(name, sizeof name, "b%08" PRIu64, index);
    (void)unlinkat(w->stagefd, name, 0);   /* ENOENT: nothing was written */
}

void sp__cache_writer_spoil(sp_cache_writer *w) {
    if (!w->spoiled) w->c->st.write_failures++;
    w->spoiled = 1;
}

static int put_check(const sp_cache_writer *w, const sp_batch *b, sp_error *err) {
    if (w->spoiled)
        return sp_error_set(err, SP_EIO, "%s/.tmp/%s: writer spoiled by an earlier error",
                            w->c->dir, w->stage);
    if (b->epoch != w->epoch || b->index >= w->m.info.batches || w->have[b->index] ||
        b->count > b->capacity)
        return sp_error_set(err, SP_EINVAL, "cache: batch %" PRIu64 " of epoch %u: wrong epoch, "
                            "out of range or put twice", b->index, b->epoch);
    return SP_OK;
}

int sp__cache_writer_record(sp_cache_writer *w, const sp_batch *b, const sp__cm_batch *line,
                            sp_error *err) {
    int rc = put_check(w, b, err);
    if (rc) return rc;
    w->have[b->index] = 1;
    w->nput++;
    w->m.b[b->index] = *line;
    w->c->st.batches_written++;
    w->c->st.bytes_written += line->stored;
    w->c->st.raw_written += line->raw;
    return SP_OK;
}

int sp__cache_writer_put(sp_cache_writer *w, const sp_batch *b, sp_error *err) {
    int rc = put_check(w, b, err);
    if (rc) return rc;
    char dirpath[PATH_CAP];
    snprintf(dirpath, sizeof dirpath, "%s/.tmp/%s", w->c->dir, w->stage);
    sp__cb_write_req rq = {.dirfd = w->stagefd, .dirpath = dirpath, .key = w->m.key,
                           .sample_bytes = w->sample_bytes, .filter = w->filter,
                           .level = w->c->o.level, .no_fsync = w->c->o.no_fsync, .ld = w->ld};
    sp__cm_batch line;
    rc = sp__cb_write(&rq, b, &w->io, &line, err);
    if (rc == SP_EIO) sp__cache_writer_spoil(w);
    if (rc) return rc;
    return sp__cache_writer_record(w, b, &line, err);
}

/* The commit's steps (manifest, fsync, rename, fsync DIR), counting
 * nothing in c's stats: *o says what happened. w is freed either way. */
int sp__cache_writer_commit_quiet(sp_cache_writer *w, sp__commit_outcome *o, sp_error *err) {
    memset(o, 0, sizeof *o);
    if (!sp__cache_writer_complete(w)) {
        uint64_t n = w->nput, nb = w->m.info.batches;
        int spoiled = w->spoiled;
        sp__cache_writer_abort(w);
        return sp_error_set(err, spoiled ? SP_EIO : SP_EINVAL, "cache: entry incomplete (%" PRIu64
                            " of %" PRIu64 " batches%s): not committed", n, nb,
                            spoiled ? ", a write failed" : "");
    }
    sp_cache *c = w->c;
    sp_cache_entry_info *e = &w->m.info;
    e->raw_bytes = e->stored_bytes = 0;
    for (uint64_t i = 0; i < e->batches; i++) {
        e->raw_bytes += w->m.b[i].raw;
        e->stored_bytes += w->m.b[i].stored;
    }
    e->created = (int64_t)time(NULL);   /* metadata only, never batch bytes */
    char *text;
    size_t len;
    if (sp__cm_format(&w->m, &text, &len) != 0) {
        sp__cache_writer_abort(w);
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    }
    int ev = sp__write_new(w->stagefd, c->o.no_fsync, SP__CM_NAME, text, len);
    free(text);
    if (!ev && !c->o.no_fsync && fsync(w->stagefd) != 0) ev = errno;
    if (ev) {
        o->write_failure = 1;
        sp_error_set(err, SP_EIO, "%s/.tmp/%s/%s: %s", c->dir, w->stage, SP__CM_NAME,
                     strerror(ev));
        sp__cache_writer_abort(w);
        return SP_EIO;
    }
    char from[PATH_CAP], to[PATH_CAP];
    snprintf(from, sizeof from, "%s/.tmp/%s", c->dir, w->stage);
    snprintf(to, sizeof to, "%s/%s", c->dir, w->key);
    if (rename(from, to) != 0) {
        int re = errno;
        sp__cache_writer_abort(w);
        if (re == EEXIST || re == ENOTEMPTY) {   /* a concurrent writer won: same bytes */
            o->lost_race = 1;
            return SP_OK;
        }
        return sp_error_set(err, SP_EIO, "%s: rename to %s: %s", from, to, strerror(re));
    }
    w->stage[0] = '\0';
    if (!c->o.no_fsync) {
        int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    o->committed = 1;
    writer_free(w);
    return SP_OK;
}

void sp__cache_commit_count(sp_cache *c, const sp__commit_outcome *o) {
    c->st.committed += o->committed;
    c->st.lost_races += o->lost_race;
    c->st.write_failures += o->write_failure;
}

int sp__cache_writer_commit(sp_cache_writer *w, sp_error *err) {
    sp_cache *c = w ? w->c : NULL;
    sp__commit_outcome o;
    int rc = sp__cache_writer_commit_quiet(w, &o, err);
    if (c) sp__cache_commit_count(c, &o);
    if (rc == 0 && o.committed && c->o.max_size) {
        sp_error ge;
        if (sp_cache_gc(c, c->o.max_size, NULL, &ge) != 0) sp__cache_warn(c, ge.msg);
    }
    return rc;
}
