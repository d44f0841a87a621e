/* dataset_tar_open.c - the local WebDataset shards' drivers: which paths
 * are shard datasets, the shard list, and the opener, which reads every
 * shard once (dataset_tar.c's reader) or takes its table from the shard's
 * index file (dataset_tar_index.c).
 *
 * A dataset is one `.tar` file, a folder whose entries are `.tar` shards
 * (and no class folder: a folder holding both is SP_EFORMAT), or a brace
 * pattern `dir/train-{000000..000099}.tar` (dataset.h). Two drivers: the
 * pattern's, asked in the first round (the pattern names no file), and
 * the file's and folder's, asked after the dispatcher's stat. Both open
 * the same kind, "webdataset", as dataset_remote.c's driver does.
 */
#include "dataset/dataset_internal.h"
#include "dataset/dataset_tar.h"
#include "common/vec_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TAR_READ_BUF SP_DS_TAR_READ_BUF
#define TAR_MAX_SHARDS 1000000
#define TAR_FROM_INDEX 1              /* read_shard(): taken from the shard's index file */
#define TAR_MAX_OPEN 256             /* shards kept open for reading; more: open per read */

typedef sp__ds_tar_set tar_set;

static int ends_with(const char *s, const char *suf) {
    size_t ls = strlen(s), lf = strlen(suf);
    return ls > lf && strcmp(s + ls - lf, suf) == 0;
}

/* ---- which paths are shard datasets ------------------------------------------ */

int sp__ds_is_shard_pattern(const char *path) {
    const char *o = strchr(path, '{');
    const char *dots = o ? strstr(o, "..") : NULL;
    return dots && strchr(dots, '}') && ends_with(path, ".tar");
}

int sp__ds_dir_kind(const char *dir, int *shards, int *folders, sp_error *err) {
    *shards = *folders = 0;
    DIR *d = opendir(dir);
    if (!d) return sp_error_set(err, SP_EIO, "%s: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        struct stat st;
        char *full = sp__ds_join(dir, de->d_name);
        if (!full) {
            closedir(d);
            return sp_error_set(err, SP_ENOMEM, "%s: out of memory", dir);
        }
        if (stat(full, &st) == 0) {
            if (S_ISDIR(st.st_mode)) (*folders)++;
            else if (S_ISREG(st.st_mode) && ends_with(de->d_name, ".tar")) (*shards)++;
        }
        free(full);
    }
    closedir(d);
    return SP_OK;
}

/* ---- the shard list ---------------------------------------------------------------- */

typedef struct strvec { char **v; size_t n, cap; } strvec;

static int sv_push(strvec *s, char *x) {
    if (!x) return SP_ENOMEM;
    if (SP__VEC_PUSH(s->v, s->n, s->cap, 16, x) != 0) { free(x); return SP_ENOMEM; }
    return SP_OK;
}

static void sv_free(strvec *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "pre{A..B}post": every number from A to B, zero-padded to A's width when
 * A has a leading zero (WebDataset's braceexpand). One brace group. */
static int expand_pattern(const char *pat, strvec *out, sp_error *err) {
    const char *o = strchr(pat, '{'), *dots = strstr(o, ".."), *c = strchr(dots, '}');
    char *end;
    errno = 0;
    unsigned long long a = strtoull(o + 1, &end, 10);
    if (end != dots || o + 1 == dots || errno)
        return sp_error_set(err, SP_EINVAL, "%s: brace pattern: expected {FIRST..LAST}", pat);
    unsigned long long b = strtoull(dots + 2, &end, 10);
    if (end != c || dots + 2 == c || errno || b < a || b - a >= TAR_MAX_SHARDS)
        return sp_error_set(err, SP_EINVAL,
                            "%s: brace pattern: expected {FIRST..LAST} with FIRST <= LAST and "
                            "at most %d shards", pat, TAR_MAX_SHARDS);
    int width = (o[1] == '0') ? (int)(dots - o - 1) : 0;
    for (unsigned long long k = a; k <= b; k++) {
        size_t n = strlen(pat) + 32;
        char *p = malloc(n);
        if (!p) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", pat);
        snprintf(p, n, "%.*s%0*llu%s", (int)(o - pat), pat, width, k, c + 1);
        if (sv_push(out, p) != SP_OK) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", pat);
    }
    return SP_OK;
}

int sp__ds_expand_pattern(const char *pat, char ***names, size_t *n, sp_error *err) {
    strvec v = {0};
    int rc = expand_pattern(pat, &v, err);
    if (rc != SP_OK) {
        sv_free(&v);
        return rc;
    }
    *names = v.v;
    *n = v.n;
    return SP_OK;
}

/* Shard paths relative to ds->base (their folder), sorted. */
static int list_shards(sp_dataset *ds, strvec *rel, sp_error *err) {
    int rc = SP_OK;
    if (sp__ds_is_shard_pattern(ds->root)) {
        strvec full = {0};
        rc = expand_pattern(ds->root, &full, err);
        for (size_t i = 0; rc == SP_OK && i < full.n; i++) {
            struct stat st;
            if (stat(full.v[i], &st) != 0)
                rc = sp_error_set(err, SP_EIO, "%s: %s (named by the pattern %s)", full.v[i],
                                  strerror(errno), ds->root);
            else if (!S_ISREG(st.st_mode))
                rc = sp_error_set(err, SP_EFORMAT, "%s: not a regular file", full.v[i]);
            else {
                const char *s = strrchr(full.v[i], '/');
                if (sv_push(rel, sp__ds_strdup(s ? s + 1 : full.v[i])) != SP_OK)
                    rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
            }
        }
        sv_free(&full);
    } else {
        struct stat st;
        if (stat(ds->root, &st) == 0 && S_ISREG(st.st_mode)) {
            const char *s = strrchr(ds->root, '/');
            if (sv_push(rel, sp__ds_strdup(s ? s + 1 : ds->root)) != SP_OK)
                rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
        } else {
            DIR *d = opendir(ds->base);
            if (!d) return sp_error_set(err, SP_EIO, "%s: %s", ds->root, strerror(errno));
            struct dirent *de;
            while (rc == SP_OK && (de = readdir(d)) != NULL) {
                if (de->d_name[0] == '.' || !ends_with(de->d_name, ".tar")) continue;
                char *full = sp__ds_join(ds->base, de->d_name);
                struct stat fst;
                int reg = full && stat(full, &fst) == 0 && S_ISREG(fst.st_mode);
                free(full);
                if (reg && sv_push(rel, sp__ds_strdup(de->d_name)) != SP_OK)
                    rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
            }
            closedir(d);
        }
    }
    if (rc == SP_OK && rel->n == 0)
        rc = sp_error_set(err, SP_EFORMAT, "%s: no .tar shards", ds->root);
    if (rc == SP_OK) qsort(rel->v, rel->n, sizeof *rel->v, cmp_str);
    for (size_t i = 1; rc == SP_OK && i < rel->n; i++)
        if (strcmp(rel->v[i - 1], rel->v[i]) == 0)
            rc = sp_error_set(err, SP_EINVAL, "%s: shard %s named twice", ds->root, rel->v[i]);
    return rc;
}


/* One shard, read from start to end-of-archive, or taken from its index
 * file (TAR_FROM_INDEX). Its samples are appended to t, its size to *size. */
static int read_shard(sp_dataset *ds, uint32_t shard, const char *rel, tar_set *t,
                      uint8_t *buf, uint64_t *size, sp_error *err) {
    char *full = sp__ds_join(ds->base, rel);
    if (!full) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    int fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int rc = sp_error_set(err, SP_EIO, "%s: %s", full, strerror(errno));
        free(full);
        return rc;
    }
    struct stat fst;
    int have_stat = fstat(fd, &fst) == 0;
    *size = have_stat ? (uint64_t)fst.st_size : 0;
    int use_index = ds->index_mode != SP_INDEX_OFF && have_stat;
    if (use_index && ds->index_mode != SP_INDEX_REBUILD &&
        sp__ds_tar_index_read(ds, shard, rel, &fst, t)) {
        close(fd);
        free(full);
        return TAR_FROM_INDEX;
    }
    size_t first = t->n;
    int rc = sp__ds_tar_scan_fd(ds, shard, rel, full, fd, t, buf, err);
    close(fd);
    free(full);
    if (rc == SP_OK && use_index && sp__ds_tar_index_write(ds, rel, &fst, t, first))
        ds->index.written = 1;
    return rc;
}

static int tar_open(sp_dataset *ds, const sp__ds_req *rq, sp_error *err) {
    (void)rq;
    strvec rel = {0};
    tar_set t = {0};
    int rc = sp__ds_tar_new(ds, err);
    if (rc != SP_OK) return rc;
    ds->ops = &sp__ds_tar_ops;
    uint8_t *buf = malloc(TAR_READ_BUF);
    rc = buf ? list_shards(ds, &rel, err) : sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    uint64_t *sizes = rc == SP_OK ? calloc(rel.n ? rel.n : 1, sizeof *sizes) : NULL;
    if (rc == SP_OK && !sizes) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    const char *env = getenv("SEEDPIPE_INDEX");
    if (env && strcmp(env, "off") == 0) ds->index_mode = SP_INDEX_OFF;
    ds->index.used = ds->index_mode != SP_INDEX_OFF;
    for (size_t i = 0; rc == SP_OK && i < rel.n; i++) {
        size_t before = t.n;
        rc = read_shard(ds, (uint32_t)i, rel.v[i], &t, buf, &sizes[i], err);
        if (rc == TAR_FROM_INDEX) ds->index.reused += t.n - before;
        else if (rc == SP_OK) ds->index.hashed += t.n - before;
        if (rc == TAR_FROM_INDEX) rc = SP_OK;
    }
    if (ds->index.used && rel.n) {
        char *ip = sp__ds_tar_index_path(ds, rel.v[0], 0), dir[4096];
        char *old = ip && ip[0] && access(ip, F_OK) != 0 ? sp__ds_tar_index_path(ds, rel.v[0], 1)
                                                          : NULL;
        if (old && access(old, F_OK) == 0) {   /* an older version's, beside the shard */
            free(ip);
            ip = old;
            old = NULL;
        }
        free(old);
        if (ip && ip[0]) snprintf(ds->index.path, sizeof ds->index.path, "%s%s", ip,
                                  rel.n > 1 ? " (one per shard)" : "");
        if (ip && !ip[0] && ds->index.hashed) {   /* why the shards will be read again */
            char why[512] = "a shard's path cannot be resolved";
            (void)sp__ds_cache_dir(dir, sizeof dir, why, sizeof why);
            snprintf(ds->index.warning, sizeof ds->index.warning, "%s; no index kept: every "
                     "shard is read at each open", why);
        }
        free(ip);
    }
    free(buf);
    if (rc == SP_OK) {
        rc = sp__ds_tar_pack(ds, rel.v, rel.n, sizes, &t, err);   /* takes rel.v and sizes */
        rel.v = NULL;
        rel.n = 0;
        sizes = NULL;
        if (rc == SP_OK)
            sp__ds_tar(ds)->shard_fds = sp__ds_tar(ds)->nshards <= TAR_MAX_OPEN
                                     ? calloc(sp__ds_tar(ds)->nshards, sizeof *sp__ds_tar(ds)->shard_fds)
                                     : NULL;
    }
    free(sizes);
    sv_free(&rel);
    sp__ds_tar_set_free(&t);
    return rc;
}

/* ---- the drivers ---------------------------------------------------------------- */

static int pattern_probe(const sp__ds_req *rq, sp_error *err) {
    (void)err;
    return !rq->url && sp__ds_is_shard_pattern(rq->root);
}

/* The pattern's folder is the samples' base (no stat of the pattern). */
static int pattern_open(sp_dataset *ds, const sp__ds_req *rq, sp_error *err) {
    int rc = sp__ds_set_base(ds, 0, err);
    return rc == SP_OK ? tar_open(ds, rq, err) : rc;
}

/* A folder of shards (without class folders), or a .tar file. */
static int tar_probe(const sp__ds_req *rq, sp_error *err) {
    if (rq->is_dir && rq->shards && rq->folders)
        return sp_error_set(err, SP_EFORMAT, "%s: holds both class folders (an ImageFolder) "
                            "and .tar shards (a WebDataset); give the shards their own folder",
                            rq->root);
    return rq->is_dir ? rq->shards > 0 : ends_with(rq->leaf, ".tar");
}

const sp__ds_driver sp__ds_driver_tar_pattern = {
    .name = "webdataset", .code = SP_DATASET_WEBDATASET, .probe = pattern_probe,
    .open = pattern_open, .ops = &sp__ds_tar_ops,
};

const sp__ds_driver sp__ds_driver_tar = {
    .name = "webdataset", .code = SP_DATASET_WEBDATASET, .local = 1, .probe = tar_probe,
    .open = tar_open, .ops = &sp__ds_tar_ops,
};
