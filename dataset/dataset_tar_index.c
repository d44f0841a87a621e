/* dataset_tar_index.c - the table of a WebDataset shard's samples as they
 * are collected (sp__ds_tar_set, with the hash set of its keys,
 * sp__ds_tar_keys), and each shard's index file that keeps that table, so
 * a later open of an unchanged shard reads none of it (dataset_tar.h); and
 * the kind's state, sp__ds_tar(ds) (sp__ds_tar_new(), sp__ds_tar_free()).
 * dataset_tar.c reads the shards and calls down into this file; this file
 * calls only dataset_common.c (byte buffers, the atomic write) and
 * dataset_cache_dir.c (where the index files live).
 *
 * In the user's index cache folder (dataset_cache_dir.c), tar-<hex> per
 * shard (hex: of the shard's resolved path and its folder's identity)
 * holds what reading it found: its samples (member path, label, offset,
 * size, hash, or the reason it cannot be read), trusted again while the shard's (device,
 * inode, size, mtime ns, ctime ns), its name and max_file_bytes are those
 * recorded, so reopening unchanged shards reads none of them (the same
 * rule as the files' index, dataset_index.c; a sample is still re-hashed
 * when read). A shard changed within the last 2 s is not recorded (its
 * timestamps cannot tell a later change). Format, little-endian:
 * "SPTARIX\0", u32 version 2, u64 dev, ino, size, mtime, ctime,
 * max_file_bytes, u32 len + shard name, u32 n, then per sample u32 len +
 * member path, i32 label, u64 offset, size, hash hi, hash lo, the KEY.json
 * member's u64 offset, size (UINT64_MAX: none), hash hi, hash lo, u32 len
 * + reason (0: none); last an XXH3-64 of all the bytes before it (a
 * version 1 file, without the .json fields, is stale: the shard is read). A file
 * that does not check out is ignored and rewritten; writing is best
 * effort (temporary name + rename), and opening never fails because of it.
 * The .<shard name>.seedpipe-index older versions wrote beside each shard
 * is still read, under the same rules, when the cache has none; nothing is
 * written beside the shards anymore.
 */
#include "dataset/dataset_internal.h"
#include "dataset/dataset_tar.h"
#include "common/fileio_internal.h"
#include "common/le_internal.h"
#include "common/vec_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <xxhash.h>

typedef sp__ds_tar_sample tar_sample;
typedef sp__ds_tar_set tar_set;

/* ---- the table of samples ------------------------------------------------------------ */

tar_sample *sp__ds_tar_set_slot(tar_set *t) {
    if (SP__VEC_RESERVE(t->v, t->cap, t->n + 1, 1024) != 0) return NULL;
    tar_sample *s = &t->v[t->n];
    memset(s, 0, sizeof *s);
    return s;
}

void sp__ds_tar_set_free(tar_set *t) {
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].path);
        free(t->v[i].key);
        free(t->v[i].bad);
    }
    free(t->v);
    memset(t, 0, sizeof *t);
}

/* ---- the keys of one shard, for the "key seen before" check ---------------------------- */

/* Open addressing over XXH3-64 of the key, each slot a sample's index in
 * t->v plus one (0: empty), grown at half full: O(1) a member. */
static size_t keys_home(const sp__ds_tar_keys *ks, const char *key, size_t len) {
    return (size_t)XXH3_64bits(key, len) & (ks->cap - 1);
}

tar_sample *sp__ds_tar_keys_find(const sp__ds_tar_keys *ks, tar_set *t, const char *key,
                                 size_t len) {
    if (!ks->cap) return NULL;
    for (size_t i = keys_home(ks, key, len); ks->slot[i]; i = (i + 1) & (ks->cap - 1)) {
        tar_sample *s = &t->v[ks->slot[i] - 1];
        if (strlen(s->key) == len && memcmp(s->key, key, len) == 0) return s;
    }
    return NULL;
}

void sp__ds_tar_keys_put(sp__ds_tar_keys *ks, const tar_set *t, size_t index) {
    const char *key = t->v[index].key;
    size_t i = keys_home(ks, key, strlen(key));
    while (ks->slot[i]) i = (i + 1) & (ks->cap - 1);
    ks->slot[i] = index + 1;
    ks->n++;
}

int sp__ds_tar_keys_reserve(sp__ds_tar_keys *ks, const tar_set *t) {
    if ((ks->n + 1) * 2 <= ks->cap) return SP_OK;
    size_t cap = ks->cap ? ks->cap * 2 : 64;
    sp__ds_tar_keys g = {calloc(cap, sizeof(size_t)), cap, 0};
    if (!g.slot) return SP_ENOMEM;
    for (size_t i = 0; i < ks->cap; i++)
        if (ks->slot[i]) sp__ds_tar_keys_put(&g, t, ks->slot[i] - 1);
    free(ks->slot);
    *ks = g;
    return SP_OK;
}

/* ---- the per-shard index file --------------------------------------------------------- */

#define TAR_IDX_MAGIC "SPTARIX"
#define TAR_IDX_VERSION 2u

char *sp__ds_tar_index_path(const sp_dataset *ds, const char *rel, int legacy) {
    const char *slash = strrchr(rel, '/');
    size_t dl = slash ? (size_t)(slash - rel) + 1 : 0;
    size_t n = strlen(ds->base) + strlen(rel) + 32;
    char *p = malloc(n > 4096 ? n : 4096);
    if (p && legacy)
        snprintf(p, n, "%s/%.*s.%s.seedpipe-index", ds->base, (int)dl, rel,
                 slash ? slash + 1 : rel);
    if (p && !legacy) {
        char dir[4096], *shard = sp__ds_join(ds->base, rel);
        if (!shard || sp__ds_cache_dir(dir, sizeof dir, NULL, 0) != 0 ||
            sp__ds_cache_entry(dir, "tar", shard, p, 4096) != 0)
            p[0] = '\0';
        free(shard);
    }
    return p;
}

static void stat_key(sp__sbuf *b, const struct stat *st, uint64_t max_file_bytes, const char *rel) {
    sp__sbuf_put(b, TAR_IDX_MAGIC, 8);
    sp__ds_buf_u32(b, TAR_IDX_VERSION);
    sp__ds_buf_u64(b, (uint64_t)st->st_dev);
    sp__ds_buf_u64(b, (uint64_t)st->st_ino);
    sp__ds_buf_u64(b, (uint64_t)st->st_size);
    sp__ds_buf_u64(b, sp__ds_ns(st->st_mtim));
    sp__ds_buf_u64(b, sp__ds_ns(st->st_ctim));
    sp__ds_buf_u64(b, max_file_bytes);
    sp__ds_buf_str(b, rel);
}

int sp__ds_tar_index_write(const sp_dataset *ds, const char *rel, const struct stat *st,
                       const tar_set *t, size_t first) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t racy = sp__ds_ns(now) - (uint64_t)SP_DS_RACY_NS;
    if (sp__ds_ns(st->st_mtim) >= racy || sp__ds_ns(st->st_ctim) >= racy) return 0;
    size_t rl = strlen(rel) + 1;
    sp__sbuf b = {0};
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
        sp__ds_buf_u64(&b, s->has_json ? s->json_offset : 0);
        sp__ds_buf_u64(&b, s->has_json ? s->json_size : UINT64_MAX);
        sp__ds_buf_u64(&b, s->json_hash.hi);
        sp__ds_buf_u64(&b, s->json_hash.lo);
        sp__ds_buf_str(&b, s->bad);
    }
    sp__ds_buf_u64(&b, XXH3_64bits(b.p, b.len));
    char *path = sp__ds_tar_index_path(ds, rel, 0);   /* the cache's, never beside */
    int ok = !b.oom && path && path[0] &&
             sp_write_file_atomic(path, b.p, b.len, 0, NULL) == SP_OK;
    free(path);
    free(b.p);
    return ok;
}

/* One sample's record at d + *pos (before end) appended to t; 0 when it
 * runs past the end or says what no shard could hold. */
static int read_record(const sp_dataset *ds, const uint8_t *d, size_t *at, size_t end,
                       const struct stat *st, const char *rel, uint32_t shard, tar_set *t) {
    size_t pos = *at, rl = strlen(rel);
    if (end - pos < 4) return 0;
    uint32_t ml = sp__le_get32(d + pos);
    pos += 4;
    if (end - pos < (uint64_t)ml + 72) return 0;
    const char *member = (const char *)d + pos;
    pos += ml;
    int32_t label = (int32_t)sp__le_get32(d + pos);
    uint64_t off = sp__le_get64(d + pos + 4), size = sp__le_get64(d + pos + 12);
    sp_digest h = {sp__le_get64(d + pos + 20), sp__le_get64(d + pos + 28)};
    uint64_t joff = sp__le_get64(d + pos + 36), jsize = sp__le_get64(d + pos + 44);
    sp_digest jh = {sp__le_get64(d + pos + 52), sp__le_get64(d + pos + 60)};
    uint32_t bl = sp__le_get32(d + pos + 68);
    pos += 72;
    if (end - pos < (size_t)bl) return 0;
    /* Sizes are never taken on trust: the member lies inside the shard,
     * where a tar member's data can start, within the per-file limit. */
    if (label < -1 || label >= SP_DS_MAX_CLASSES || ml == 0 || off % 512 != 0 ||
        size > ds->max_file_bytes || off > (uint64_t)st->st_size ||
        size > (uint64_t)st->st_size - off ||
        (jsize != UINT64_MAX && (joff % 512 != 0 || jsize > ds->max_file_bytes ||
                                 joff > (uint64_t)st->st_size ||
                                 jsize > (uint64_t)st->st_size - joff)))
        return 0;
    tar_sample *s = sp__ds_tar_set_slot(t);
    if (!s) return 0;
    s->path = malloc(rl + ml + 2);
    s->key = sp__ds_strdup("");
    s->bad = bl ? strndup((const char *)d + pos, bl) : NULL;
    if (!s->path || !s->key || (bl && !s->bad)) {
        free(s->path); free(s->key); free(s->bad);
        return 0;
    }
    snprintf(s->path, rl + ml + 2, "%s/%.*s", rel, (int)ml, member);
    pos += bl;
    sp__ds_tar_sample_place(s, label, shard, off, size, h, joff, jsize, jh);
    t->n++;
    *at = pos;
    return 1;
}

/* Read the index of shard rel from the cache (legacy 0) or from beside the
 * shard, where older versions wrote it (legacy 1): sp__ds_tar_index_read(). */
static int index_read_at(sp_dataset *ds, uint32_t shard, const char *rel, const struct stat *st,
                         tar_set *t, int legacy) {
    char *path = sp__ds_tar_index_path(ds, rel, legacy);
    if (!path || !path[0]) {
        free(path);
        return 0;
    }
    /* Seedpipe's own name (no symlink followed), a regular file only, and
     * no larger than its shard (each entry describes at least a 512-byte
     * header of it) plus a margin: refused before a byte is read. */
    sp__buf buf = {NULL, 0};
    size_t n = 0;
    sp_error e;
    int ok = sp__read_regular(AT_FDCWD, path, path, 1, (uint64_t)st->st_size + (1u << 20), &buf,
                              &n, &e) == 0;
    uint8_t *d = buf.p;
    free(path);
    sp__sbuf key = {0};
    stat_key(&key, st, ds->max_file_bytes, rel);
    size_t first = t->n, pos = key.len;
    ok = ok && !key.oom && n >= key.len + 12 && memcmp(d, key.p, key.len) == 0 &&
         XXH3_64bits(d, n - 8) == sp__le_get64(d + n - 8);
    free(key.p);
    size_t end = n - 8;
    uint32_t count = 0;
    if (ok) { count = sp__le_get32(d + pos); pos += 4; }
    if (ok && t->n + count > ds->max_samples) ok = 0;   /* let the reader name it */
    for (uint32_t k = 0; ok && k < count; k++)
        ok = read_record(ds, d, &pos, end, st, rel, shard, t);
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


/* The cache's index first, then an old one beside the shard (read, never
 * written). */
int sp__ds_tar_index_read(sp_dataset *ds, uint32_t shard, const char *rel, const struct stat *st,
                      tar_set *t) {
    return index_read_at(ds, shard, rel, st, t, 0) || index_read_at(ds, shard, rel, st, t, 1);
}

/* ---- packing the table into the dataset ------------------------------------------------ */

int sp__ds_tar_pack(sp_dataset *ds, char **names, size_t nnames, uint64_t *sizes, tar_set *t,
                    sp_error *err) {
    sp__ds_tar(ds)->shards = names;   /* owned by ds from here on, freed by destroy */
    sp__ds_tar(ds)->nshards = nnames;
    sp__ds_tar(ds)->shard_sizes = sizes;
    if (t->n == 0) return sp_error_set(err, SP_EFORMAT, "%s: no samples", ds->root);
    int32_t maxl = -1;
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].label > maxl) maxl = t->v[i].label;
    int rc = sp__ds_numeric_classes(ds, maxl + 1 > 0 ? maxl + 1 : 1, err);
    size_t pool_len = 0, nbad = 0, njson = 0;
    for (size_t i = 0; rc == SP_OK && i < t->n; i++) {
        pool_len += strlen(t->v[i].path) + 1;
        nbad += t->v[i].bad != NULL;
        njson += t->v[i].has_json != 0;
    }
    if (rc == SP_OK) rc = sp__ds_alloc_samples(ds, t->n, pool_len, err);
    if (rc == SP_OK) {
        sp__ds_tar(ds)->shard_of = malloc(t->n * sizeof *sp__ds_tar(ds)->shard_of);
        sp__ds_tar(ds)->offsets = malloc(t->n * sizeof *sp__ds_tar(ds)->offsets);
        sp__ds_tar(ds)->bad = nbad ? calloc(nbad, sizeof *sp__ds_tar(ds)->bad) : NULL;
        if (njson) {
            sp__ds_tar(ds)->json_off = malloc(t->n * sizeof *sp__ds_tar(ds)->json_off);
            sp__ds_tar(ds)->json_size = malloc(t->n * sizeof *sp__ds_tar(ds)->json_size);
            sp__ds_tar(ds)->json_hash = malloc(t->n * sizeof *sp__ds_tar(ds)->json_hash);
        }
        if (!sp__ds_tar(ds)->shard_of || !sp__ds_tar(ds)->offsets || (nbad && !sp__ds_tar(ds)->bad) ||
            (njson && (!sp__ds_tar(ds)->json_off || !sp__ds_tar(ds)->json_size || !sp__ds_tar(ds)->json_hash)))
            rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory for %zu samples", ds->root,
                              t->n);
    }
    if (rc != SP_OK) return rc;
    size_t off = 0;
    for (size_t i = 0; i < t->n; i++) {
        tar_sample *s = &t->v[i];
        size_t len = strlen(s->path) + 1;
        memcpy(ds->pool + off, s->path, len);
        ds->path_off[i] = off;
        off += len;
        ds->labels[i] = s->label >= 0 ? s->label : 0;
        ds->class_counts[ds->labels[i]]++;   /* a bad sample under its label, or 0 */
        ds->sizes[i] = s->bad ? 0 : s->size;
        ds->hashes[i] = s->bad ? (sp_digest){0, 0} : s->hash;
        sp__ds_tar(ds)->shard_of[i] = s->shard;
        sp__ds_tar(ds)->offsets[i] = s->offset;
        if (njson) {
            sp__ds_tar(ds)->json_off[i] = s->json_offset;
            sp__ds_tar(ds)->json_size[i] = s->has_json ? s->json_size : UINT64_MAX;
            sp__ds_tar(ds)->json_hash[i] = s->json_hash;
        }
        if (s->bad) {
            sp__ds_tar(ds)->bad[sp__ds_tar(ds)->nbad].i = i;
            sp__ds_tar(ds)->bad[sp__ds_tar(ds)->nbad].msg = s->bad;
            sp__ds_tar(ds)->nbad++;
            s->bad = NULL;
        }
    }
    return SP_OK;
}

int sp__ds_tar_new(sp_dataset *ds, sp_error *err) {
    ds->state = calloc(1, sizeof(struct sp__ds_tar));
    return ds->state ? SP_OK : sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
}

void sp__ds_tar_free(sp_dataset *ds) {
    struct sp__ds_tar *t = sp__ds_tar(ds);
    if (!t) return;
    for (size_t i = 0; t->shards && i < t->nshards; i++) free(t->shards[i]);
    free(t->shards);
    free(t->shard_sizes);
    free(t->shard_of);
    free(t->offsets);
    free(t->json_off);
    free(t->json_size);
    free(t->json_hash);
    for (size_t i = 0; i < t->nbad; i++) free(t->bad[i].msg);
    free(t->bad);
    free(t);
    ds->state = NULL;
}

uint32_t sp__ds_tar_shard_count(const sp_dataset *ds) {
    const struct sp__ds_tar *t = sp__ds_tar(ds);
    return t && t->shard_of && t->nshards <= UINT32_MAX ? (uint32_t)t->nshards : 0;
}

uint32_t sp__ds_tar_shard_of(const sp_dataset *ds, uint64_t i) { return sp__ds_tar(ds)->shard_of[i]; }
