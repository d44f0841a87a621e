/* dataset_tar.c - the WebDataset source's tar reader: each shard read once,
 * at open, into the sample table (POSIX tar shards, read in place).
 *
 * A dataset is one `.tar` file, a folder whose entries are `.tar` shards (and
 * no class folder), or a brace pattern `dir/train-{000000..000099}.tar`. By
 * the WebDataset convention a sample is the run of adjacent members that
 * share a key (the member name up to the first '.' of its last component):
 * `KEY.jpg`, `KEY.jpeg` or `KEY.png` is its image, `KEY.cls` its integer
 * label (decimal text), `KEY.json` its targets (where it lies and its hash
 * are kept; dataset_coco.c reads it for --annotations @json); other
 * members (`KEY.txt`, ...) are ignored. Canonical order: shards in byte-wise sorted name order, samples
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
 * table of each shard is kept in an index file in the user's cache folder
 * (dataset_tar_index.c), so a later open of unchanged shards reads none of
 * them. What cannot be a sample is recorded against the sample and
 * returned by sp__dataset_read() as that sample's SP_EFORMAT error, so the
 * loader's --on-error policy (fail / skip / substitute) decides: a member
 * that is a symlink, hard link, device or FIFO; a key without an image or
 * without a (valid) label; two images under one key; an image larger than
 * max_file_bytes; an image cut short by the end of the shard. A shard that
 * is not a tar (bad header checksum), that ends between members without
 * its end-of-archive block, or whose extended headers exceed their bounds
 * fails the open, naming the shard and the byte offset. Members of one key
 * that are not adjacent are an error, as in WebDataset.
 *
 * Layering: the local shards' driver (dataset_tar_open.c: which paths are
 * shard datasets, the shard list, the opener) and the remote one
 * (dataset_remote.c) call sp__ds_tar_scan_fd() here; it calls down into
 * dataset_tar_index.c (the sample table and the per-shard index file) and
 * dataset_common.c. One sample's read is in dataset_tar_read.c, the
 * writer behind `seedpipe shard` in dataset_tar_write.c.
 */
#include "dataset/dataset_internal.h"
#include "dataset/dataset_tar.h"
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

#define TAR_BLOCK 512
#define TAR_EXT_MAX (64u << 10)     /* one pax record set or GNU long name */
#define TAR_CLS_MAX 64              /* bytes of a .cls member */
#define TAR_READ_BUF SP_DS_TAR_READ_BUF

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

typedef sp__ds_tar_sample tar_sample;
typedef sp__ds_tar_set tar_set;

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
        for (const char *p = dot + 1; *p && k + 1 < n; p++) ext[k++] = (char)sp__ds_lower(*p);
    ext[k] = '\0';
    return dot;
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
static tar_sample *sample_for(tar_set *t, sp__ds_tar_keys *ks, const char *shard_rel, uint32_t shard,
                              const char *key, size_t keylen, uint64_t max_samples,
                              int *rc, sp_error *err) {
    if (ks->n && strlen(t->v[t->n - 1].key) == keylen &&
        memcmp(t->v[t->n - 1].key, key, keylen) == 0)
        return &t->v[t->n - 1];
    if (sp__ds_tar_keys_find(ks, t, key, keylen)) {
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
    tar_sample *s = sp__ds_tar_keys_reserve(ks, t) ? NULL : sp__ds_tar_set_slot(t);
    if (!s) {
        *rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", shard_rel);
        return NULL;
    }
    s->key = strndup(key, keylen);
    s->label = -1;
    s->shard = shard;
    if (!s->key) {
        *rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", shard_rel);
        return NULL;
    }
    t->n++;
    sp__ds_tar_keys_put(ks, t, t->n - 1);
    return s;
}

/* ---- reading one shard ------------------------------------------------------------------ */

/* One shard as it is read: where the reader is, the samples collected from
 * it (t->v[first ..]) and what a pax 'x' or GNU 'L' header said about the
 * next member. */
typedef struct shard_rd {
    sp_dataset *ds;
    uint32_t shard;
    const char *rel;       /* the shard relative to ds->base, for sample paths */
    const char *full;      /* the shard's path, for messages */
    tar_set *t;
    size_t first;          /* the shard's first sample in t */
    sp__ds_tar_keys keys;  /* the keys of t->v[first ..] */
    tar_rd r;
    sp__hash hs;           /* an image member's hash as it streams by */
    char *xpath;           /* from a pax 'x' or GNU 'L' header, for the next member */
    uint64_t xsize;
    int has_xsize;
    uint8_t *ext;          /* the last extended header's bytes */
} shard_rd;

/* The next 512-byte header at shard offset `at`, checked: its checksum,
 * its size field (or the pax size before it). *end: the end-of-archive
 * block came. */
static int read_header(shard_rd *p, uint8_t h[TAR_BLOCK], uint64_t at, uint64_t *size,
                       int *end, sp_error *err) {
    const char *full = p->full;
    int64_t got = rd_take(&p->r, TAR_BLOCK, h, NULL, err);
    if (got < 0) return SP_EIO;
    if (got == 0 && !p->xpath && !p->has_xsize)
        return sp_error_set(err, SP_EFORMAT,
                            "%s: ends at byte %llu without the end-of-archive block "
                            "(truncated)", full, (unsigned long long)at);
    if (got < TAR_BLOCK)
        return sp_error_set(err, SP_EFORMAT, "%s: ends inside the header at byte %llu "
                            "(truncated)", full, (unsigned long long)at);
    if (all_zero(h)) {   /* end of archive */
        *end = 1;
        return SP_OK;
    }
    uint64_t sum = 0, want;
    for (int i = 0; i < TAR_BLOCK; i++) sum += (i >= 148 && i < 156) ? ' ' : h[i];
    if (tar_num(h + 148, 8, &want) != 0 || want != sum)
        return sp_error_set(err, SP_EFORMAT,
                            "%s: byte %llu: not a tar header (checksum %llu, computed %llu)",
                            full, (unsigned long long)at, (unsigned long long)want,
                            (unsigned long long)sum);
    if (tar_num(h + 124, 12, size) != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: byte %llu: bad size field", full,
                            (unsigned long long)at);
    if (p->has_xsize) *size = p->xsize;
    return SP_OK;
}

/* An extended header (pax 'x' / 'g', GNU 'L' / 'K') of `size` bytes:
 * bounded, read whole; 'x' and 'L' set the next member's path (and size). */
static int read_ext(shard_rd *p, int type, uint64_t at, uint64_t size, uint64_t padded,
                    sp_error *err) {
    const char *full = p->full;
    if (size > TAR_EXT_MAX)
        return sp_error_set(err, SP_ELIMIT,
                            "%s: byte %llu: extended header of %llu bytes (limit %u)", full,
                            (unsigned long long)at, (unsigned long long)size, TAR_EXT_MAX);
    free(p->ext);
    p->ext = malloc(padded ? (size_t)padded : 1);
    if (!p->ext) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", full);
    int64_t got = rd_take(&p->r, padded, p->ext, NULL, err);
    if (got < 0) return SP_EIO;
    if ((uint64_t)got < padded)
        return sp_error_set(err, SP_EFORMAT, "%s: ends inside the extended header at "
                            "byte %llu (truncated)", full, (unsigned long long)at);
    if (type == 'x')
        return pax_parse(full, at, p->ext, (size_t)size, &p->xpath, &p->xsize, &p->has_xsize,
                         err);
    if (type == 'L') {
        free(p->xpath);
        p->xpath = strndup((const char *)p->ext, (size_t)size);
        if (!p->xpath) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", full);
    }
    return SP_OK;
}

/* The member's name: pax path, GNU long name, or ustar prefix/name. What
 * the extended headers said is used up. */
static void member_name(shard_rd *p, const uint8_t *h, char name[4096]) {
    if (p->xpath) {
        snprintf(name, 4096, "%s", p->xpath);
    } else {
        char nm[101], pre[156];
        memcpy(nm, h, 100);
        nm[100] = '\0';
        memcpy(pre, h + 345, 155);
        pre[155] = '\0';
        if (memcmp(h + 257, "ustar\0", 6) == 0 && pre[0])
            snprintf(name, 4096, "%s/%s", pre, nm);
        else
            snprintf(name, 4096, "%s", nm);
    }
    free(p->xpath);
    p->xpath = NULL;
    p->has_xsize = 0;
}

/* A `.cls` member of `size` bytes: the sample's label. *consumed: its data
 * was read; *cut: the shard ended inside it. */
static int read_cls(shard_rd *p, tar_sample *s, const char *nmp, uint64_t size, int *consumed,
                    int *cut, sp_error *err) {
    const char *rel = p->rel;
    char lb[TAR_CLS_MAX + 1];
    if (size > TAR_CLS_MAX) {
        mark_bad(s, "%s/%s: %s", rel, nmp, "label member longer than 64 bytes");
        return SP_OK;
    }
    int64_t got = rd_take(&p->r, size, (uint8_t *)lb, NULL, err);
    if (got < 0) return SP_EIO;
    *consumed = 1;
    lb[got] = '\0';
    char *endp;
    errno = 0;
    long v = strtol(lb, &endp, 10);
    while (*endp == ' ' || *endp == '\n' || *endp == '\r' || *endp == '\t')
        endp++;
    if ((uint64_t)got < size) {
        *cut = 1;
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
    return SP_OK;
}

/* An image member (json 0) or a KEY.json (json 1) of `size` bytes at
 * shard offset data_at: where it lies and its hash, read as it streams by.
 * *consumed, *cut: as read_cls(). */
static int read_image(shard_rd *p, tar_sample *s, const char *nmp, uint64_t size,
                      uint64_t data_at, int json, int *consumed, int *cut, sp_error *err) {
    const char *rel = p->rel;
    if (json ? s->has_json : s->has_image) {
        mark_bad(s, "%s/%s: %s", rel, nmp, json ? "a second .json member under the same key"
                                                : "a second image under the same key");
        return SP_OK;
    }
    if (json) {
        s->has_json = 1;
        s->json_offset = data_at;
        s->json_size = size;
    } else {
        s->has_image = 1;
        size_t pl = strlen(rel) + strlen(nmp) + 2;
        free(s->path);
        s->path = malloc(pl);
        if (!s->path) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", p->full);
        snprintf(s->path, pl, "%s/%s", rel, nmp);
        s->offset = data_at;
        s->size = size;
    }
    if (size > p->ds->max_file_bytes) {
        char lim[96];
        snprintf(lim, sizeof lim, "%llu bytes, above the limit of %llu",
                 (unsigned long long)size, (unsigned long long)p->ds->max_file_bytes);
        mark_bad(s, "%s/%s: %s", rel, nmp, lim);
        return SP_OK;
    }
    sp__hash *st = &p->hs;
    sp__hash_init(st);
    int64_t got = rd_take(&p->r, size, NULL, st, err);
    if (got < 0) return SP_EIO;
    *consumed = 1;
    if ((uint64_t)got < size) {
        *cut = 1;
        char why[96];
        snprintf(why, sizeof why, "declares %llu bytes, the shard ends "
                 "after %llu (truncated)", (unsigned long long)size,
                 (unsigned long long)got);
        mark_bad(s, "%s/%s: %s", rel, nmp, why);
    }
    *(json ? &s->json_hash : &s->hash) = sp__hash_digest(st);
    return SP_OK;
}

/* A member (not an extended header) named `name`: an image or label of a
 * sample is taken, anything else read past. *end: nothing follows (the
 * shard ended inside the member). */
static int read_member(shard_rd *p, int type, const char *name, uint64_t size,
                       uint64_t padded, int *end, sp_error *err) {
    tar_set *t = p->t;
    const char *rel = p->rel;
    const char *nmp = name;
    while (nmp[0] == '.' && nmp[1] == '/') nmp += 2;
    int regular = type == '0' || type == '\0' || type == '7';
    char e[16];
    const char *dot = member_ext(nmp, e, sizeof e);
    uint64_t data_at = p->r.off;
    int consumed = 0;
    int cut = 0;   /* the shard ended inside this member's data */
    if (type != '5' && dot && dot != nmp && dot[-1] != '/' &&
        (sp__ds_is_image_ext(e) || strcmp(e, "cls") == 0 || strcmp(e, "json") == 0)) {
        int rc = SP_OK;
        tar_sample *s = sample_for(t, &p->keys, p->full, p->shard, nmp, (size_t)(dot - nmp),
                                   p->ds->max_samples, &rc, err);
        if (!s) return rc;
        if (!regular)
            mark_bad(s, "%s/%s: the member is %s: only regular members are read", rel, nmp,
                     type_name(type));
        else if (strcmp(e, "cls") == 0)
            rc = read_cls(p, s, nmp, size, &consumed, &cut, err);
        else
            rc = read_image(p, s, nmp, size, data_at, strcmp(e, "json") == 0, &consumed, &cut,
                            err);
        if (rc) return rc;
        if (consumed) padded -= size;
    }
    if (cut) {   /* its sample carries the error; nothing follows */
        *end = 1;
        return SP_OK;
    }
    int64_t got = rd_take(&p->r, padded, NULL, NULL, err);   /* the rest of the member */
    if (got < 0) return SP_EIO;
    if ((uint64_t)got < padded) {
        /* cut inside the data of a member read past or its padding: the
         * sample it belongs to (if any) carries the error */
        if (t->n > p->first && !consumed && dot &&
            strlen(t->v[t->n - 1].key) == (size_t)(dot - nmp) &&
            memcmp(t->v[t->n - 1].key, nmp, (size_t)(dot - nmp)) == 0)
            mark_bad(&t->v[t->n - 1], "%s/%s: %s", rel, nmp,
                     "the shard ends inside this member (truncated)");
        *end = 1;
    }
    return SP_OK;
}

/* One header and what follows it. *end: the shard is done. */
static int read_entry(shard_rd *p, int *end, sp_error *err) {
    uint8_t h[TAR_BLOCK];
    uint64_t at = p->r.off, size = 0;
    int rc = read_header(p, h, at, &size, end, err);
    if (rc != SP_OK || *end) return rc;
    int type = h[156];
    uint64_t padded = size + ((TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK);
    if (size > UINT64_MAX / 2)
        return sp_error_set(err, SP_EFORMAT, "%s: byte %llu: size out of range", p->full,
                            (unsigned long long)at);
    if (type == 'x' || type == 'g' || type == 'L' || type == 'K')
        return read_ext(p, type, at, size, padded, err);
    char name[4096];
    member_name(p, h, name);
    return read_member(p, type, name, size, padded, end, err);
}

/* Keys without an image or a label are samples that fail when read; a key
 * with only a KEY.json is not a sample (metadata, as any member not read:
 * like a COCO file's image that no sample has, its targets are ignored). */
static int finish_keys(const sp_dataset *ds, const char *rel, tar_set *t, size_t first,
                       sp_error *err) {
    size_t w = first;
    for (size_t i = first; i < t->n; i++) {
        tar_sample *s = &t->v[i];
        if (!s->has_image && s->label < 0 && s->has_json) {
            free(s->path);
            free(s->key);
            free(s->bad);
            continue;
        }
        if (w != i) t->v[w] = *s;
        s = &t->v[w++];
        if (!s->has_image) {
            size_t pl = strlen(rel) + strlen(s->key) + 2;
            s->path = malloc(pl);
            if (!s->path) {
                t->n = w;
                return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
            }
            snprintf(s->path, pl, "%s/%s", rel, s->key);
            mark_bad(s, "%s/%s: %s", rel, s->key, "a key without an image (.jpg, .jpeg or .png)");
        } else if (s->label < 0) {
            mark_bad(s, "%s/%s: %s", rel, s->key, "no .cls label member");
        }
    }
    t->n = w;
    return SP_OK;
}

int sp__ds_tar_scan_fd(sp_dataset *ds, uint32_t shard, const char *rel, const char *full,
                       int fd, sp__ds_tar_set *t, uint8_t *buf, sp_error *err) {
    shard_rd p = {.ds = ds, .shard = shard, .rel = rel, .full = full, .t = t, .first = t->n,
                  .r = {fd, full, buf, 0, 0, 0, 0}};
    int rc = SP_OK, end = 0;
    while (rc == SP_OK && !end) rc = read_entry(&p, &end, err);
    free(p.keys.slot);
    free(p.xpath);
    free(p.ext);
    if (rc == SP_OK) rc = finish_keys(ds, rel, t, p.first, err);
    return rc;
}
