/* cache_gc.c - cache maintenance: list entries, collect by size, verify,
 * and an entry's loader config for `verify --recompute`
 * (include/seedpipe/cache.h).
 *
 * In the cache's stack (cache/, bottom first): above whole batch
 * files (cache_batch.c), the manifest (cache_manifest.c), the POSIX helpers
 * (cache_fs.c) and the handle's accessors (cache_key.c), the cache files it
 * calls; below the writer (cache_writer.c), whose commit collects down to
 * opts.max_size. It never calls a reader or a writer.
 *
 * gc works in three steps, each safe against concurrent readers and writers
 * (the protocol is the HOW IT WORKS essay in cache.c):
 *  1. staging directories in .tmp/ whose writer is gone (their flock can be
 *     taken) and that are over a minute old are removed; a live writer holds
 *     its flock until it commits or aborts, so it is never touched;
 *  2. .corrupt/ is emptied (entries readers moved aside);
 *  3. committed entries are evicted, least recently used first (manifest
 *     mtime, then key, so the choice is reproducible), until the total size
 *     of entry files is <= max_size. An entry is first renamed into .tmp/
 *     (atomic: a reader that opens it afterwards misses) and then deleted.
 * Sizes are apparent sizes (st_size) of the entries' files, the number
 * `cache ls` shows; bookkeeping directories are not counted.
 *
 * verify re-reads every file of an entry through the same code as the read
 * path (sp__cb_read: the checks, then sp__cb_decode) with no batch to fill,
 * so it checks exactly what a reader would check; it never moves anything.
 */
#include "cache/cache_internal.h"
#include "seedpipe/pipeline.h"

#include "common/vec_internal.h"

#include <dirent.h>
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
#include "augment/pipeline_internal.h"

#define STALE_AGE_S 60

void sp_cache_list_free(sp_cache_entry_info *e, size_t n) {
    if (!e) return;
    for (size_t i = 0; i < n; i++) {
        free(e[i].dataset);
        free(e[i].pipeline);
        free(e[i].split);
        free(e[i].subset);
    }
    free(e);
}

static int by_recent(const void *a, const void *b) {
    const sp_cache_entry_info *x = a, *y = b;
    if (x->last_use_ns != y->last_use_ns) return x->last_use_ns > y->last_use_ns ? -1 : 1;
    return strcmp(x->key, y->key);
}

int sp_cache_list(sp_cache *c, sp_cache_entry_info **out, size_t *n, sp_error *err) {
    *out = NULL;
    *n = 0;
    const char *dir = sp_cache_dir(c);
    DIR *d = opendir(dir);
    if (!d) return sp_error_set(err, SP_EIO, "%s: %s", dir, strerror(errno));
    sp_cache_entry_info *v = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    int rc = SP_OK;
    while ((de = readdir(d)) != NULL) {
        if (!sp__is_key_name(de->d_name)) continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;   /* evicted meanwhile, or not a directory */
        if (SP__VEC_RESERVE(v, cap, cnt + 1, 16) != 0) {
            close(fd);
            rc = sp_error_set(err, SP_ENOMEM, "cache: out of memory");
            break;
        }
        sp__cm m;
        int enoent;
        char mpath[PATH_CAP];
        snprintf(mpath, sizeof mpath, "%s/%s/%s", dir, de->d_name, SP__CM_NAME);
        sp_error e;
        sp_error_clear(&e);
        if (sp__cm_read(fd, mpath, &m, &enoent, &e) == 0) {
            v[cnt] = m.info;
            free(m.b);
        } else {
            memset(&v[cnt], 0, sizeof v[cnt]);
            size_t k = strlen(e.msg);
            if (k >= sizeof v[cnt].problem) k = sizeof v[cnt].problem - 1;
            memcpy(v[cnt].problem, e.msg, k);
            v[cnt].problem[k] = '\0';
        }
        memcpy(v[cnt].key, de->d_name, 33);   /* 32 hex digits and the NUL */
        struct stat st;
        if (fstatat(fd, SP__CM_NAME, &st, 0) == 0 || fstat(fd, &st) == 0)
        {
            v[cnt].last_use = (int64_t)st.st_mtim.tv_sec;
            v[cnt].last_use_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
        v[cnt].disk_bytes = sp__dir_bytes(fd);
        close(fd);
        cnt++;
    }
    closedir(d);
    if (rc) {
        sp_cache_list_free(v, cnt);
        return rc;
    }
    if (cnt) qsort(v, cnt, sizeof *v, by_recent);
    *out = v;
    *n = cnt;
    return SP_OK;
}

/* Step 1 and 2: stale staging directories and moved-aside entries. */
static void sweep(const char *dir, uint32_t *stale, uint32_t *corrupt) {
    char p[PATH_CAP];
    snprintf(p, sizeof p, "%s/.tmp", dir);
    DIR *d = opendir(p);
    time_t now = time(NULL);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) continue;
            struct stat st;
            int old = fstat(fd, &st) == 0 && now - st.st_mtime > STALE_AGE_S;
            if (old && flock(fd, LOCK_EX | LOCK_NB) == 0) {   /* its writer is gone */
                if (sp__rmtree_at(dirfd(d), de->d_name) == 0) (*stale)++;
            }
            close(fd);
        }
        closedir(d);
    }
    snprintf(p, sizeof p, "%s/.corrupt", dir);
    d = opendir(p);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            if (sp__rmtree_at(dirfd(d), de->d_name) == 0) (*corrupt)++;
        }
        closedir(d);
    }
}

static int by_lru(const void *a, const void *b) { return -by_recent(a, b); }

int sp_cache_gc(sp_cache *c, uint64_t max_size, sp_cache_gc_report *rep, sp_error *err) {
    sp_cache_gc_report r;
    memset(&r, 0, sizeof r);
    const char *dir = sp_cache_dir(c);
    if (sp__cache_read_only(c)) return sp_error_set(err, SP_EINVAL, "%s: read-only cache", dir);
    sweep(dir, &r.stale_removed, &r.corrupt_removed);
    sp_cache_entry_info *v;
    size_t n;
    int rc = sp_cache_list(c, &v, &n, err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) r.bytes_before += v[i].disk_bytes;
    r.entries_before = (uint32_t)n;
    r.bytes_after = r.bytes_before;
    if (n) qsort(v, n, sizeof *v, by_lru);
    for (size_t i = 0; i < n && r.bytes_after > max_size; i++) {
        char from[PATH_CAP], to[PATH_CAP], name[128];
        snprintf(from, sizeof from, "%s/%s", dir, v[i].key);
        snprintf(name, sizeof name, "gc.%s.%ld.%lu", v[i].key, (long)getpid(), sp__cache_seq());
        snprintf(to, sizeof to, "%s/.tmp/%s", dir, name);
        if (rename(from, to) != 0) continue;   /* evicted by someone else */
        char tmp[PATH_CAP];
        snprintf(tmp, sizeof tmp, "%s/.tmp", dir);
        int tfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tfd >= 0) {
            sp__rmtree_at(tfd, name);
            close(tfd);
        }
        r.bytes_after -= v[i].disk_bytes;
        r.evicted++;
    }
    sp_cache_list_free(v, n);
    if (rep) *rep = r;
    return SP_OK;
}

/* ---- verify ----------------------------------------------------------------------- */

static void problem(void (*report)(void *, const char *), void *ud, uint64_t *bad,
                    const sp_error *e) {
    (*bad)++;
    if (report) report(ud, e->msg);
}

int sp_cache_verify_entry(sp_cache *c, const char *key, void (*report)(void *, const char *),
                          void *ud, uint64_t *bad, sp_error *err) {
    *bad = 0;
    const char *dir = sp_cache_dir(c);
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s", dir, key);
    sp_error e;
    sp_error_clear(&e);
    if (!sp__is_key_name(key)) {
        sp_error_set(&e, SP_EFORMAT, "%s: not an entry name", path);
        problem(report, ud, bad, &e);
        return SP_OK;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        sp_error_set(&e, SP_EIO, "%s: %s", path, strerror(errno));
        problem(report, ud, bad, &e);
        return SP_OK;
    }
    sp__cm m;
    int enoent;
    char mpath[PATH_CAP + 16];
    snprintf(mpath, sizeof mpath, "%s/%s", path, SP__CM_NAME);
    int rc = sp__cm_read(fd, mpath, &m, &enoent, &e);
    if (rc == SP_ENOMEM) {
        close(fd);
        return sp_error_set(err, rc, "%s", e.msg);
    }
    if (rc == 0 && strcmp(m.info.key, key) != 0)
        rc = sp_error_set(&e, SP_EFORMAT, "%s: manifest key %s", mpath, m.info.key);
    if (rc != 0) {
        problem(report, ud, bad, &e);
        sp__cm_free(&m);
        close(fd);
        return SP_OK;
    }
    sp__cb_io io;
    memset(&io, 0, sizeof io);
    int out_rc = SP_OK;
    /* The manifest records the global batch size: a bound for any rank's. */
    uint32_t cap = m.info.batch_size;
    for (uint64_t i = 0; out_rc == 0 && i < m.info.batches; i++) {
        char name[32];
        snprintf(name, sizeof name, "b%08" PRIu64, i);
        sp_error_clear(&e);
        sp__cb_read_req rq = {.dirfd = fd, .dirpath = path, .name = name, .key = m.key,
                              .epoch = m.info.epoch, .index = i,
                              .sample_bytes = (size_t)m.info.sample_bytes, .cap = cap,
                              .line = &m.b[i]};
        sp__cb_header h;
        int enoent;
        rc = sp__cb_read(&rq, &io, NULL, &h, &enoent, &e);
        if (rc == SP_ENOMEM) out_rc = sp_error_set(err, rc, "%s", e.msg);
        else if (rc != 0) problem(report, ud, bad, &e);
    }
    sp__cb_io_free(&io);
    sp__cm_free(&m);
    close(fd);
    return out_rc;
}

int sp_cache_entry_config(const sp_cache_entry_info *e, const char *dataset,
                          sp_loader_config *cfg, sp_error *err) {
    sp_loader_config_default(cfg);
    if (!e->ok || !e->pipeline || (!dataset && (!e->dataset || !*e->dataset)))
        return sp_error_set(err, SP_EFORMAT, "cache entry %s: no usable manifest", e->key);
    /* The manifest's pipeline is data: the canonical spec the writer
     * recorded, never a preset or an "@file" to open (a forged manifest
     * must not make `cache verify` read a file it names). */
    const char *pl = e->pipeline;
    while (*pl == ' ' || *pl == '\t' || *pl == '\n') pl++;
    sp_pipeline *parsed = NULL;
    int canon = *pl != '@' && sp_pipeline_parse(e->pipeline, &parsed, NULL) == SP_OK &&
                strcmp(sp__pipeline_canonical(parsed), e->pipeline) == 0;
    sp_pipeline_destroy(parsed);
    if (!canon)
        return sp_error_set(err, SP_EFORMAT, "cache entry %s: the manifest's pipeline is not a "
                            "canonical spec (a preset, a file or a malformed spec): refused",
                            e->key);
    cfg->dataset = dataset ? dataset : e->dataset;
    cfg->pipeline = e->pipeline;
    cfg->seed = e->seed;
    cfg->batch_size = e->batch_size;
    cfg->drop_last = e->drop_last;
    cfg->rank = e->rank;
    cfg->world = e->world;
    cfg->skip_normalize = e->skip_normalize;
    cfg->split = e->split;
    cfg->subset = e->subset;
    cfg->split_seed = e->split_seed;
    cfg->threads = 1;
    if (sp_dtype_parse(e->dtype, &cfg->dtype, err) != 0 ||
        sp_layout_parse(e->layout, &cfg->layout, err) != 0 ||
        sp_on_error_parse(e->on_error, &cfg->on_error, err) != 0 ||
        sp_rng_mode_parse(e->rng_mode, &cfg->rng_mode, err) != 0)
        return SP_EFORMAT;
    return SP_OK;
}

