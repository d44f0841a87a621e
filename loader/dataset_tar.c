/* dataset_tar.c - the WebDataset source: POSIX tar shards, read in place, and
 * the writer behind `seedpipe shard`.
 *
 * A dataset is one `.tar` file, a folder whose entries are `.tar` shards (and
 * no class folder), or a brace pattern `dir/train-{000000..000099}.tar`. By
 * the WebDataset convention a sample is the run of adjacent members that
 * share a key (the member name up to the first '.' of its last component):
 * `KEY.jpg`, `KEY.jpeg` or `KEY.png` is its image, `KEY.cls` its integer
 * label (decimal text); other members (`KEY.json`, `KEY.txt`, ...) are
 * ignored. Canonical order: shards in byte-wise sorted name order, samples
 * in tar order. Classes are "0".."K-1", K = largest label + 1, as for list
 * files. A sample's path is "<shard name>/<image member name>".
 *
 * HOW IT WORKS: opening reads every shard once, sequentially, through a
 * tar reader written here for exact offsets (libarchive hides where a
 * member's data starts): 512-byte headers with their checksum verified,
 * octal or base-256 sizes, ustar prefixes, pax `x` records (path, size) and
 * GNU long names (`L`), each bounded. Image members are hashed (XXH3-128)
 * as they stream by and their (shard, offset, size) kept, so a worker later
 * reads one sample with one pread and re-checks its hash, never scanning
 * the tar again; the descriptor of each shard is opened once and kept. The
 * table of each shard is kept in an index file beside it (below), so a
 * later open of unchanged shards reads none of them. What cannot be a sample is recorded against the sample and
 * returned by sp_dataset_read() as that sample's SP_EFORMAT error, so the
 * loader's --on-error policy (fail / skip / substitute) decides: a member
 * that is a symlink, hard link, device or FIFO; a key without an image or
 * without a (valid) label; two images under one key; an image larger than
 * max_file_bytes; an image cut short by the end of the shard. A shard that
 * is not a tar (bad header checksum), that ends between members without
 * its end-of-archive block, or whose extended headers exceed their bounds
 * fails the open, naming the shard and the byte offset. Members of one key
 * that are not adjacent are an error, as in WebDataset.
 *
 * The writer stores the samples of an encoded-file dataset in canonical
 * order as `%09llu.<ext>` + `%09llu.cls` members of ustar shards with fixed
 * metadata (mode 0644, uid/gid 0, mtime 0), so a shard's bytes depend only
 * on the samples, and the sharded dataset streams the same batches (the
 * batch bytes depend on indices, labels and pixels, not on paths).
 */
#include "loader/dataset_internal.h"
#include "common/hash_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/le_internal.h"
#include "seedpipe/decode.h"

#define TAR_BLOCK 512
#define TAR_EXT_MAX (64u << 10)     /* one pax record set or GNU long name */
#define TAR_CLS_MAX 64              /* bytes of a .cls member */
#define TAR_READ_BUF (1u << 20)
#define TAR_MAX_SHARDS 1000000
#define TAR_FROM_INDEX 1              /* read_shard(): taken from the shard's index file */
#define TAR_MAX_OPEN 256             /* shards kept open for reading; more: open per read */

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

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
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        char **v = realloc(s->v, cap * sizeof *v);
        if (!v) { free(x); return SP_ENOMEM; }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
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

/* ---- a sequential tar reader ---------------------------------------------------------- */

typedef struct tar_rd {
    int fd;
    const char *path;      /* the shard, for messages */
    uint8_t *buf;
    size_t pos, len;       /* buf[pos..len) not consumed yet */
    uint64_t off;          /* shard offset of buf[pos] */
    int eof;
} tar_rd;

/* Consume up to n bytes: copied to dst (if any), hashed into st (if any).
 * Returns the bytes consumed (< n only at the end of the shard) or -1. */
static int64_t rd_take(tar_rd *r, uint64_t n, uint8_t *dst, sp__hash *st, sp_error *err) {
    uint64_t done = 0;
    while (done < n) {
        if (r->pos == r->len) {
            if (r->eof) break;
            ssize_t k;
            do k = read(r->fd, r->buf, TAR_READ_BUF); while (k < 0 && errno == EINTR);
            if (k < 0) {
                sp_error_set(err, SP_EIO, "%s: %s", r->path, strerror(errno));
                return -1;
            }
            if (k == 0) { r->eof = 1; break; }
            r->pos = 0;
            r->len = (size_t)k;
        }
        size_t m = r->len - r->pos;
        if (m > n - done) m = (size_t)(n - done);
        if (dst) memcpy(dst + done, r->buf + r->pos, m);
        if (st) sp__hash_bytes(st, r->buf + r->pos, m);
        r->pos += m;
        r->off += m;
        done += m;
    }
    return (int64_t)done;
}

/* A numeric header field: octal digits (leading spaces, ended by NUL or
 * space), or GNU base-256 (high bit of the first byte). -1 if malformed. */
static int tar_num(const uint8_t *p, size_t n, uint64_t *v) {
    *v = 0;
    if (p[0] & 0x80) {
        if (p[0] & 0x40) return -1;   /* negative */
        uint64_t x = p[0] & 0x3f;
        for (size_t i = 1; i < n; i++) {
            if (x >> 55) return -1;
            x = (x << 8) | p[i];
        }
        *v = x;
        return 0;
    }
    size_t i = 0;
    while (i < n && p[i] == ' ') i++;
    int digits = 0;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++, digits++) {
        if (*v >> 60) return -1;
        *v = (*v << 3) | (uint64_t)(p[i] - '0');
    }
    for (; i < n; i++)
        if (p[i] != ' ' && p[i] != '\0') return -1;
    return digits ? 0 : -1;
}

static int all_zero(const uint8_t *b) {
    for (int i = 0; i < TAR_BLOCK; i++)
        if (b[i]) return 0;
    return 1;
}

/* pax records "LEN key=value\n": path and size are used. */
static int pax_parse(const char *shard, uint64_t at, const uint8_t *d, size_t n, char **path,
                     uint64_t *size, int *has_size, sp_error *err) {
    size_t i = 0;
    while (i < n) {
        size_t j = i, len = 0;
        while (j < n && d[j] >= '0' && d[j] <= '9' && len < n) len = len * 10 + (d[j++] - '0');
        if (j >= n || d[j] != ' ' || len <= j - i + 1 || len > n - i || d[i + len - 1] != '\n')
            return sp_error_set(err, SP_EFORMAT, "%s: byte %llu: malformed pax header", shard,
                                (unsigned long long)at);
        const uint8_t *kv = d + j + 1, *e = d + i + len - 1;
        const uint8_t *eq = memchr(kv, '=', (size_t)(e - kv));
        if (!eq)
            return sp_error_set(err, SP_EFORMAT, "%s: byte %llu: malformed pax record", shard,
                                (unsigned long long)at);
        size_t kl = (size_t)(eq - kv), vl = (size_t)(e - eq - 1);
        if (kl == 4 && memcmp(kv, "path", 4) == 0) {
            free(*path);
            *path = strndup((const char *)eq + 1, vl);
            if (!*path) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", shard);
        } else if (kl == 4 && memcmp(kv, "size", 4) == 0) {
            char num[32];
            if (vl == 0 || vl >= sizeof num)
                return sp_error_set(err, SP_EFORMAT, "%s: byte %llu: bad pax size", shard,
                                    (unsigned long long)at);
            memcpy(num, eq + 1, vl);
            num[vl] = '\0';
            char *endp;
            errno = 0;
            *size = strtoull(num, &endp, 10);
            if (*endp || errno || num[0] == '-')
                return sp_error_set(err, SP_EFORMAT, "%s: byte %llu: bad pax size", shard,
                                    (unsigned long long)at);
            *has_size = 1;
        }
        i += len;
    }
    return SP_OK;
}

/* ---- samples as they are collected ------------------------------------------------------- */

typedef struct tar_sample {
    char *path;            /* "shard/member" (or "shard/key" without an image) */
    char *key;
    int32_t label;         /* -1 until a valid .cls */
    uint32_t shard;
    uint64_t offset, size;
    sp_digest hash;
    int has_image;
    char *bad;             /* the first reason it cannot be read, or NULL */
} tar_sample;

typedef struct tar_set {
    tar_sample *v;
    size_t n, cap;
} tar_set;

static void ts_free(tar_set *t) {
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].path);
        free(t->v[i].key);
        free(t->v[i].bad);
    }
    free(t->v);
    memset(t, 0, sizeof *t);
}

static void mark_bad(tar_sample *s, const char *fmt, const char *shard, const char *member,
                     const char *what) {
    if (s->bad) return;
    size_t n = strlen(shard) + strlen(member) + strlen(fmt) + strlen(what) + 64;
    s->bad = malloc(n);
    if (s->bad) snprintf(s->bad, n, fmt, shard, member, what);
}

static const char *member_ext(const char *name, char *ext, size_t n) {
    const char *slash = strrchr(name, '/');
    const char *dot = strchr(slash ? slash + 1 : name, '.');
    size_t k = 0;
    if (dot)
        for (const char *p = dot + 1; *p && k + 1 < n; p++) ext[k++] = (char)lower(*p);
    ext[k] = '\0';
    return dot;
}

static int is_image_ext(const char *e) {
    return strcmp(e, "jpg") == 0 || strcmp(e, "jpeg") == 0 || strcmp(e, "png") == 0;
}

static const char *type_name(int t) {
    switch (t) {
    case '1': return "a hard link";
    case '2': return "a symbolic link";
    case '3': return "a character device";
    case '4': return "a block device";
    case '6': return "a FIFO";
    default: return "not a regular file";
    }
}

/* The sample a member belongs to: the last one if its key matches, else a
 * new one (a key seen before in this shard is an error). */
static tar_sample *sample_for(tar_set *t, size_t first, const char *shard_rel, uint32_t shard,
                              const char *key, size_t keylen, uint64_t max_samples,
                              int *rc, sp_error *err) {
    if (t->n > first && strlen(t->v[t->n - 1].key) == keylen &&
        memcmp(t->v[t->n - 1].key, key, keylen) == 0)
        return &t->v[t->n - 1];
    for (size_t i = first; i < t->n; i++)
        if (strlen(t->v[i].key) == keylen && memcmp(t->v[i].key, key, keylen) == 0) {
            *rc = sp_error_set(err, SP_EFORMAT,
                               "%s: key \"%.*s\" appears again after other keys (the members "
                               "of a sample must be adjacent)", shard_rel, (int)keylen, key);
            return NULL;
        }
    if (t->n >= max_samples) {
        *rc = sp_error_set(err, SP_ELIMIT, "%s: more than %llu samples", shard_rel,
                           (unsigned long long)max_samples);
        return NULL;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        tar_sample *v = realloc(t->v, cap * sizeof *v);
        if (!v) {
            *rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", shard_rel);
            return NULL;
        }
        t->v = v;
        t->cap = cap;
    }
    tar_sample *s = &t->v[t->n];
    memset(s, 0, sizeof *s);
    s->key = strndup(key, keylen);
    s->label = -1;
    s->shard = shard;
    if (!s->key) {
        *rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", shard_rel);
        return NULL;
    }
    t->n++;
    return s;
}

/* ---- the per-shard index ------------------------------------------------------------ */

/* Beside each shard, .<shard name>.seedpipe-index holds what reading it
 * found: its samples (member path, label, offset, size, hash, or the
 * reason it cannot be read), trusted again while the shard's (device,
 * inode, size, mtime ns, ctime ns), its name and max_file_bytes are those
 * recorded, so reopening unchanged shards reads none of them (the same
 * rule as the files' index, dataset_index.c; a sample is still re-hashed
 * when read). A shard changed within the last 2 s is not recorded (its
 * timestamps cannot tell a later change). Format, little-endian:
 * "SPTARIX\0", u32 version 1, u64 dev, ino, size, mtime, ctime,
 * max_file_bytes, u32 len + shard name, u32 n, then per sample u32 len +
 * member path, i32 label, u64 offset, size, hash hi, hash lo, u32 len +
 * reason (0: none); last an XXH3-64 of all the bytes before it. A file
 * that does not check out is ignored and rewritten; writing is best
 * effort (temporary name + rename), and opening never fails because of it. */
#define TAR_IDX_MAGIC "SPTARIX"
#define TAR_IDX_VERSION 1u

static char *index_path(const sp_dataset *ds, const char *rel) {
    const char *slash = strrchr(rel, '/');
    size_t dl = slash ? (size_t)(slash - rel) + 1 : 0;
    size_t n = strlen(ds->base) + strlen(rel) + 32;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%.*s.%s.seedpipe-index", ds->base, (int)dl, rel,
                 slash ? slash + 1 : rel);
    return p;
}

static void stat_key(sp__ds_buf *b, const struct stat *st, uint64_t max_file_bytes, const char *rel) {
    sp__ds_buf_put(b, TAR_IDX_MAGIC, 8);
    sp__ds_buf_u32(b, TAR_IDX_VERSION);
    sp__ds_buf_u64(b, (uint64_t)st->st_dev);
    sp__ds_buf_u64(b, (uint64_t)st->st_ino);
    sp__ds_buf_u64(b, (uint64_t)st->st_size);
    sp__ds_buf_u64(b, sp__ds_ns(st->st_mtim));
    sp__ds_buf_u64(b, sp__ds_ns(st->st_ctim));
    sp__ds_buf_u64(b, max_file_bytes);
    sp__ds_buf_str(b, rel);
}

/* Samples [first, t->n) of shard `rel` into its index file. */
static int index_write(const sp_dataset *ds, const char *rel, const struct stat *st,
                       const tar_set *t, size_t first) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t racy = sp__ds_ns(now) - (uint64_t)SP_DS_RACY_NS;
    if (sp__ds_ns(st->st_mtim) >= racy || sp__ds_ns(st->st_ctim) >= racy) return 0;
    size_t rl = strlen(rel) + 1;
    sp__ds_buf b = {0};
    stat_key(&b, st, ds->max_file_bytes, rel);
    sp__ds_buf_u32(&b, (uint32_t)(t->n - first));
    for (size_t i = first; i < t->n; i++) {
        const tar_sample *s = &t->v[i];
        sp__ds_buf_str(&b, s->path + rl);   /* the member part of "rel/member" */
        sp__ds_buf_u32(&b, (uint32_t)s->label);
        sp__ds_buf_u64(&b, s->offset);
        sp__ds_buf_u64(&b, s->size);
        sp__ds_buf_u64(&b, s->hash.hi);
        sp__ds_buf_u64(&b, s->hash.lo);
        sp__ds_buf_str(&b, s->bad);
    }
    sp__ds_buf_u64(&b, XXH3_64bits(b.p, b.len));
    char *path = index_path(ds, rel);
    int ok = !b.oom && path && sp__ds_write_file(path, b.p, b.len) == 0;
    free(path);
    free(b.p);
    return ok;
}

/* 1: the shard's samples were taken from its index file (appended to t). */
static int index_read(sp_dataset *ds, uint32_t shard, const char *rel, const struct stat *st,
                      tar_set *t) {
    char *path = index_path(ds, rel);
    if (!path) return 0;
    uint8_t *d = NULL;
    size_t n = 0;
    sp_error e;
    int ok = sp_read_file(path, 1u << 30, &d, &n, &e) == 0;
    free(path);
    sp__ds_buf key = {0};
    stat_key(&key, st, ds->max_file_bytes, rel);
    size_t first = t->n, pos = key.len, rl = strlen(rel);
    ok = ok && !key.oom && n >= key.len + 12 && memcmp(d, key.p, key.len) == 0 &&
         XXH3_64bits(d, n - 8) == sp__le_get64(d + n - 8);
    free(key.p);
    size_t end = n - 8;
#define NEED(k) do { if (end - pos < (size_t)(k)) { ok = 0; break; } } while (0)
    uint32_t count = 0;
    if (ok) { count = sp__le_get32(d + pos); pos += 4; }
    if (ok && t->n + count > ds->max_samples) ok = 0;   /* let the reader name it */
    for (uint32_t k = 0; ok && k < count; k++) {
        NEED(4);
        if (!ok) break;
        uint32_t ml = sp__le_get32(d + pos);
        pos += 4;
        NEED((uint64_t)ml + 40);
        if (!ok) break;
        const char *member = (const char *)d + pos;
        pos += ml;
        int32_t label = (int32_t)sp__le_get32(d + pos);
        uint64_t off = sp__le_get64(d + pos + 4), size = sp__le_get64(d + pos + 12);
        sp_digest h = {sp__le_get64(d + pos + 20), sp__le_get64(d + pos + 28)};
        uint32_t bl = sp__le_get32(d + pos + 36);
        pos += 40;
        NEED(bl);
        if (!ok || label < -1 || label >= SP_DS_MAX_CLASSES || ml == 0) { ok = 0; break; }
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 1024;
            tar_sample *v = realloc(t->v, cap * sizeof *v);
            if (!v) { ok = 0; break; }
            t->v = v;
            t->cap = cap;
        }
        tar_sample *s = &t->v[t->n];
        memset(s, 0, sizeof *s);
        s->path = malloc(rl + ml + 2);
        s->key = sp__ds_strdup("");
        s->bad = bl ? strndup((const char *)d + pos, bl) : NULL;
        if (!s->path || !s->key || (bl && !s->bad)) {
            free(s->path); free(s->key); free(s->bad);
            ok = 0;
            break;
        }
        snprintf(s->path, rl + ml + 2, "%s/%.*s", rel, (int)ml, member);
        pos += bl;
        s->label = label;
        s->shard = shard;
        s->offset = off;
        s->size = size;
        s->hash = h;
        s->has_image = 1;
        t->n++;
    }
#undef NEED
    if (ok && pos != end) ok = 0;
    if (!ok) {   /* drop what was appended; the shard is read instead */
        for (size_t i = first; i < t->n; i++) {
            free(t->v[i].path); free(t->v[i].key); free(t->v[i].bad);
        }
        t->n = first;
    }
    free(d);
    return ok;
}

/* One shard, read from start to end-of-archive. */
static int read_shard(sp_dataset *ds, uint32_t shard, const char *rel, tar_set *t,
                      uint8_t *buf, sp_error *err) {
    char *full = sp__ds_join(ds->base, rel);
    if (!full) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    int fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int rc = sp_error_set(err, SP_EIO, "%s: %s", full, strerror(errno));
        free(full);
        return rc;
    }
    struct stat fst;
    int use_index = ds->index_mode != SP_INDEX_OFF && fstat(fd, &fst) == 0;
    if (use_index && ds->index_mode != SP_INDEX_REBUILD &&
        index_read(ds, shard, rel, &fst, t)) {
        close(fd);
        free(full);
        return TAR_FROM_INDEX;
    }
    tar_rd r = {fd, full, buf, 0, 0, 0, 0};
    sp__hash hs, *st = &hs;
    char *xpath = NULL;    /* from a pax 'x' or GNU 'L' header, for the next member */
    uint64_t xsize = 0;
    int has_xsize = 0, rc = SP_OK;
    size_t first = t->n;
    uint8_t *ext = NULL;
    while (rc == SP_OK) {
        uint8_t h[TAR_BLOCK];
        uint64_t at = r.off;
        int64_t got = rd_take(&r, TAR_BLOCK, h, NULL, err);
        if (got < 0) { rc = SP_EIO; break; }
        if (got == 0 && !xpath && !has_xsize) {
            rc = sp_error_set(err, SP_EFORMAT,
                              "%s: ends at byte %llu without the end-of-archive block "
                              "(truncated)", full, (unsigned long long)at);
            break;
        }
        if (got < TAR_BLOCK) {
            rc = sp_error_set(err, SP_EFORMAT, "%s: ends inside the header at byte %llu "
                              "(truncated)", full, (unsigned long long)at);
            break;
        }
        if (all_zero(h)) break;   /* end of archive */
        uint64_t sum = 0, want;
        for (int i = 0; i < TAR_BLOCK; i++) sum += (i >= 148 && i < 156) ? ' ' : h[i];
        if (tar_num(h + 148, 8, &want) != 0 || want != sum) {
            rc = sp_error_set(err, SP_EFORMAT,
                              "%s: byte %llu: not a tar header (checksum %llu, computed %llu)",
                              full, (unsigned long long)at, (unsigned long long)want,
                              (unsigned long long)sum);
            break;
        }
        uint64_t size;
        if (tar_num(h + 124, 12, &size) != 0) {
            rc = sp_error_set(err, SP_EFORMAT, "%s: byte %llu: bad size field", full,
                              (unsigned long long)at);
            break;
        }
        if (has_xsize) size = xsize;
        int type = h[156];
        uint64_t padded = size + ((TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK);
        if (size > UINT64_MAX / 2) {
            rc = sp_error_set(err, SP_EFORMAT, "%s: byte %llu: size out of range", full,
                              (unsigned long long)at);
            break;
        }
        if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
            if (size > TAR_EXT_MAX) {
                rc = sp_error_set(err, SP_ELIMIT,
                                  "%s: byte %llu: extended header of %llu bytes (limit %u)", full,
                                  (unsigned long long)at, (unsigned long long)size, TAR_EXT_MAX);
                break;
            }
            free(ext);
            ext = malloc(padded ? (size_t)padded : 1);
            if (!ext) { rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", full); break; }
            got = rd_take(&r, padded, ext, NULL, err);
            if (got < 0) { rc = SP_EIO; break; }
            if ((uint64_t)got < padded) {
                rc = sp_error_set(err, SP_EFORMAT, "%s: ends inside the extended header at "
                                  "byte %llu (truncated)", full, (unsigned long long)at);
                break;
            }
            if (type == 'x')
                rc = pax_parse(full, at, ext, (size_t)size, &xpath, &xsize, &has_xsize, err);
            else if (type == 'L') {
                free(xpath);
                xpath = strndup((const char *)ext, (size_t)size);
                if (!xpath) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", full);
            }
            continue;
        }
        /* The member's name: pax path, GNU long name, or ustar prefix/name. */
        char name[4096];
        if (xpath) {
            snprintf(name, sizeof name, "%s", xpath);
        } else {
            char nm[101], pre[156];
            memcpy(nm, h, 100);
            nm[100] = '\0';
            memcpy(pre, h + 345, 155);
            pre[155] = '\0';
            if (memcmp(h + 257, "ustar\0", 6) == 0 && pre[0])
                snprintf(name, sizeof name, "%s/%s", pre, nm);
            else
                snprintf(name, sizeof name, "%s", nm);
        }
        free(xpath);
        xpath = NULL;
        has_xsize = 0;
        const char *nmp = name;
        while (nmp[0] == '.' && nmp[1] == '/') nmp += 2;
        int regular = type == '0' || type == '\0' || type == '7';
        char e[16];
        const char *dot = member_ext(nmp, e, sizeof e);
        uint64_t data_at = r.off;
        int consumed = 0;
        int cut = 0;   /* the shard ended inside this member's data */
        if (type != '5' && dot && dot != nmp && dot[-1] != '/' &&
            (is_image_ext(e) || strcmp(e, "cls") == 0)) {
            tar_sample *s = sample_for(t, first, full, shard, nmp, (size_t)(dot - nmp),
                                       ds->max_samples, &rc, err);
            if (!s) break;
            if (!regular) {
                mark_bad(s, "%s/%s: the member is %s: only regular members are read", rel, nmp,
                         type_name(type));
            } else if (strcmp(e, "cls") == 0) {
                char lb[TAR_CLS_MAX + 1];
                if (size > TAR_CLS_MAX) {
                    mark_bad(s, "%s/%s: %s", rel, nmp, "label member longer than 64 bytes");
                } else {
                    got = rd_take(&r, size, (uint8_t *)lb, NULL, err);
                    if (got < 0) { rc = SP_EIO; break; }
                    consumed = 1;
                    lb[got] = '\0';
                    char *endp;
                    errno = 0;
                    long v = strtol(lb, &endp, 10);
                    while (*endp == ' ' || *endp == '\n' || *endp == '\r' || *endp == '\t')
                        endp++;
                    if ((uint64_t)got < size) {
                        cut = 1;
                        mark_bad(s, "%s/%s: %s", rel, nmp,
                                 "the shard ends inside this member (truncated)");
                    }
                    else if (endp == lb || *endp || errno || v < 0 || v >= SP_DS_MAX_CLASSES ||
                             lb[0] == '-' || lb[0] == '+' || lb[0] == ' ')
                        mark_bad(s, "%s/%s: %s", rel, nmp,
                                 "label is not an integer in 0..65535");
                    else if (s->label >= 0)
                        mark_bad(s, "%s/%s: %s", rel, nmp, "a second label");
                    else
                        s->label = (int32_t)v;
                }
            } else {   /* the image */
                if (s->has_image) {
                    mark_bad(s, "%s/%s: %s", rel, nmp, "a second image under the same key");
                } else {
                    s->has_image = 1;
                    size_t pl = strlen(rel) + strlen(nmp) + 2;
                    free(s->path);
                    s->path = malloc(pl);
                    if (!s->path) { rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", full); break; }
                    snprintf(s->path, pl, "%s/%s", rel, nmp);
                    s->offset = data_at;
                    s->size = size;
                    if (size > ds->max_file_bytes) {
                        char lim[96];
                        snprintf(lim, sizeof lim, "%llu bytes, above the limit of %llu",
                                 (unsigned long long)size, (unsigned long long)ds->max_file_bytes);
                        mark_bad(s, "%s/%s: %s", rel, nmp, lim);
                    } else {
                        sp__hash_init(st);
                        got = rd_take(&r, size, NULL, st, err);
                        if (got < 0) { rc = SP_EIO; break; }
                        consumed = 1;
                        if ((uint64_t)got < size) {
                            cut = 1;
                            char why[96];
                            snprintf(why, sizeof why, "declares %llu bytes, the shard ends "
                                     "after %llu (truncated)", (unsigned long long)size,
                                     (unsigned long long)got);
                            mark_bad(s, "%s/%s: %s", rel, nmp, why);
                        }
                        s->hash = sp__hash_digest(st);
                    }
                }
            }
            if (consumed) padded -= size;
        }
        if (cut) break;   /* its sample carries the error; nothing follows */
        got = rd_take(&r, padded, NULL, NULL, err);   /* the rest of the member */
        if (got < 0) { rc = SP_EIO; break; }
        if ((uint64_t)got < padded) {
            /* cut inside the data of a member read past or its padding: the
             * sample it belongs to (if any) carries the error */
            if (t->n > first && !consumed && dot &&
                strlen(t->v[t->n - 1].key) == (size_t)(dot - nmp) &&
                memcmp(t->v[t->n - 1].key, nmp, (size_t)(dot - nmp)) == 0)
                mark_bad(&t->v[t->n - 1], "%s/%s: %s", rel, nmp,
                         "the shard ends inside this member (truncated)");
            break;
        }
    }
    free(xpath);
    free(ext);
    close(fd);
    free(full);
    /* Keys without an image or a label are samples that fail when read. */
    for (size_t i = first; rc == SP_OK && i < t->n; i++) {
        tar_sample *s = &t->v[i];
        if (!s->has_image) {
            size_t pl = strlen(rel) + strlen(s->key) + 2;
            s->path = malloc(pl);
            if (!s->path) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
            snprintf(s->path, pl, "%s/%s", rel, s->key);
            mark_bad(s, "%s/%s: %s", rel, s->key, "a key without an image (.jpg, .jpeg or .png)");
        } else if (s->label < 0) {
            mark_bad(s, "%s/%s: %s", rel, s->key, "no .cls label member");
        }
    }
    if (rc == SP_OK && use_index && index_write(ds, rel, &fst, t, first)) ds->index.written = 1;
    return rc;
}

int sp__ds_open_tar(sp_dataset *ds, sp_error *err) {
    strvec rel = {0};
    tar_set t = {0};
    uint8_t *buf = malloc(TAR_READ_BUF);
    int rc = buf ? list_shards(ds, &rel, err)
                 : sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    const char *env = getenv("SEEDPIPE_INDEX");
    if (env && strcmp(env, "off") == 0) ds->index_mode = SP_INDEX_OFF;
    ds->index.used = ds->index_mode != SP_INDEX_OFF;
    for (size_t i = 0; rc == SP_OK && i < rel.n; i++) {
        size_t before = t.n;
        rc = read_shard(ds, (uint32_t)i, rel.v[i], &t, buf, err);
        if (rc == TAR_FROM_INDEX) ds->index.reused += t.n - before;
        else if (rc == SP_OK) ds->index.hashed += t.n - before;
        if (rc == TAR_FROM_INDEX) rc = SP_OK;
    }
    if (ds->index.used && rel.n) {
        char *ip = index_path(ds, rel.v[0]);
        if (ip) snprintf(ds->index.path, sizeof ds->index.path, "%s%s", ip,
                         rel.n > 1 ? " (one per shard)" : "");
        free(ip);
    }
    free(buf);
    if (rc == SP_OK && t.n == 0) rc = sp_error_set(err, SP_EFORMAT, "%s: no samples", ds->root);
    int32_t maxl = -1;
    for (size_t i = 0; i < t.n; i++)
        if (t.v[i].label > maxl) maxl = t.v[i].label;
    if (rc == SP_OK) rc = sp__ds_numeric_classes(ds, maxl + 1 > 0 ? maxl + 1 : 1, err);
    size_t pool_len = 0, nbad = 0;
    for (size_t i = 0; rc == SP_OK && i < t.n; i++) {
        pool_len += strlen(t.v[i].path) + 1;
        nbad += t.v[i].bad != NULL;
    }
    if (rc == SP_OK) rc = sp__ds_alloc_samples(ds, t.n, pool_len, err);
    if (rc == SP_OK) {
        ds->shard_of = malloc(t.n * sizeof *ds->shard_of);
        ds->offsets = malloc(t.n * sizeof *ds->offsets);
        ds->bad = nbad ? calloc(nbad, sizeof *ds->bad) : NULL;
        if (!ds->shard_of || !ds->offsets || (nbad && !ds->bad))
            rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory for %zu samples", ds->root,
                              t.n);
    }
    if (rc == SP_OK) {
        size_t off = 0;
        for (size_t i = 0; i < t.n; i++) {
            tar_sample *s = &t.v[i];
            size_t len = strlen(s->path) + 1;
            memcpy(ds->pool + off, s->path, len);
            ds->path_off[i] = off;
            off += len;
            ds->labels[i] = s->label >= 0 ? s->label : 0;
            ds->class_counts[ds->labels[i]]++;   /* a bad sample under its label, or 0 */
            ds->sizes[i] = s->bad ? 0 : s->size;
            ds->hashes[i] = s->bad ? (sp_digest){0, 0} : s->hash;
            ds->shard_of[i] = s->shard;
            ds->offsets[i] = s->offset;
            if (s->bad) {
                ds->bad[ds->nbad].i = i;
                ds->bad[ds->nbad].msg = s->bad;
                ds->nbad++;
                s->bad = NULL;
            }
        }
        ds->shards = rel.v;
        ds->nshards = rel.n;
        ds->shard_fds = rel.n <= TAR_MAX_OPEN ? calloc(rel.n, sizeof *ds->shard_fds) : NULL;
        rel.v = NULL;
        rel.n = 0;
    }
    sv_free(&rel);
    ts_free(&t);
    return rc;
}

/* ---- reading one sample -------------------------------------------------------------- */

static int cmp_bad(const void *k, const void *e) {
    uint64_t i = *(const uint64_t *)k, j = ((const sp__ds_bad *)e)->i;
    return (i > j) - (i < j);
}

const char *sp__ds_tar_bad(const sp_dataset *ds, uint64_t i) {
    if (!ds->nbad) return NULL;
    const sp__ds_bad *b = bsearch(&i, ds->bad, ds->nbad, sizeof *ds->bad, cmp_bad);
    return b ? b->msg : NULL;
}

/* The shard's descriptor, opened on first use and kept (O_CLOEXEC, read
 * with pread only, so threads and forked workers share it safely): a
 * sample read is one pread, not an open + pread + close. Two threads that
 * race to open it keep one descriptor and close the other. */
static int shard_fd(const sp_dataset *ds, uint32_t s, int *kept, sp_error *err) {
    *kept = ds->shard_fds != NULL;   /* else the caller closes it */
    int have = ds->shard_fds ? atomic_load(&ds->shard_fds[s]) : 0;
    if (have > 0) return have - 1;
    char *path = sp__ds_join(ds->base, ds->shards[s]);
    if (!path) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root), -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) sp_error_set(err, SP_EIO, "%s: %s", path, strerror(errno));
    free(path);
    if (fd < 0 || !ds->shard_fds) return fd;
    int expect = 0;
    if (!atomic_compare_exchange_strong(&ds->shard_fds[s], &expect, fd + 1)) {
        close(fd);
        return expect - 1;
    }
    return fd;
}

void sp__ds_close_shards(sp_dataset *ds) {
    for (size_t s = 0; ds->shard_fds && s < ds->nshards; s++) {
        int v = atomic_load(&ds->shard_fds[s]);
        if (v > 0) close(v - 1);
    }
    free(ds->shard_fds);
    ds->shard_fds = NULL;
}

int sp__ds_read_tar(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err) {
    const char *bad = sp__ds_tar_bad(ds, i);
    if (bad) return sp_error_set(err, SP_EFORMAT, "%s/%s", ds->base, bad);
    const char *full = out->full_path;
    int kept;
    int fd = shard_fd(ds, ds->shard_of[i], &kept, err);
    if (fd < 0) return err->code ? err->code : SP_EIO;
    uint64_t want = ds->sizes[i], got = 0;
    int rc = SP_OK;
    out->owned = malloc(want ? (size_t)want : 1);
    if (!out->owned)
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory for %llu bytes", full,
                          (unsigned long long)want);
    while (rc == SP_OK && got < want) {
        ssize_t k = pread(fd, out->owned + got, (size_t)(want - got),
                          (off_t)(ds->offsets[i] + got));
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

/* ---- writing shards --------------------------------------------------------------------- */

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
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return sp_error_set(err, SP_EIO, "%s: %s", path, strerror(errno));
        b += k;
        n -= (size_t)k;
    }
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

int sp_dataset_write_shards(const sp_dataset *ds, const char *out_dir, uint64_t max_count,
                            uint64_t *nshards, sp_error *err) {
    if (nshards) *nshards = 0;
    if (!ds || !out_dir || max_count == 0)
        return sp_error_set(err, SP_EINVAL, "sp_dataset_write_shards: bad argument");
    if (ds->kind == SP_DATASET_IDX)
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
    uint64_t n = ds->n, made = 0;
    char tmp[4096], final[4096];
    int fd = -1;
    for (uint64_t i = 0; rc == SP_OK && i < n; i++) {
        if (i % max_count == 0) {
            snprintf(tmp, sizeof tmp, "%s/.shard-%06llu.tar.tmp", out_dir,
                     (unsigned long long)made);
            snprintf(final, sizeof final, "%s/shard-%06llu.tar", out_dir,
                     (unsigned long long)made);
            fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0) {
                rc = sp_error_set(err, SP_EIO, "%s: %s", tmp, strerror(errno));
                break;
            }
        }
        sp_sample_data sd;
        rc = sp_dataset_read(ds, i, &sd, err);
        if (rc != SP_OK) break;
        char e[16], name[64], cls[32];
        const char *dot = strrchr(sp_dataset_path(ds, i), '.');
        size_t k = 0;
        for (const char *p = dot ? dot + 1 : "img"; *p && k + 1 < sizeof e; p++)
            e[k++] = (char)lower(*p);
        e[k] = '\0';
        snprintf(name, sizeof name, "%09llu.%s", (unsigned long long)i, e);
        rc = write_member(fd, tmp, name, sd.src.bytes, sd.src.len, err);
        sp_sample_data_free(&sd);
        int cl = snprintf(cls, sizeof cls, "%d\n", sp_dataset_label(ds, i));
        snprintf(name, sizeof name, "%09llu.cls", (unsigned long long)i);
        if (rc == SP_OK) rc = write_member(fd, tmp, name, cls, (uint64_t)cl, err);
        if (rc == SP_OK && (i % max_count == max_count - 1 || i + 1 == n)) {
            uint8_t zero[2 * TAR_BLOCK] = {0};
            rc = write_all(fd, zero, sizeof zero, tmp, err);
            if (rc == SP_OK && fsync(fd) != 0)
                rc = sp_error_set(err, SP_EIO, "%s: %s", tmp, strerror(errno));
            if (close(fd) != 0 && rc == SP_OK)
                rc = sp_error_set(err, SP_EIO, "%s: %s", tmp, strerror(errno));
            fd = -1;
            if (rc == SP_OK && rename(tmp, final) != 0)
                rc = sp_error_set(err, SP_EIO, "%s: %s", final, strerror(errno));
            if (rc == SP_OK) made++;
        }
    }
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    if (nshards) *nshards = made;
    return rc;
}
