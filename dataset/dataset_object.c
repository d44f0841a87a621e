/* dataset_object.c - the dataset index object: one file beside a
 * WebDataset's shards, `seedpipe.index`, that holds everything opening the
 * shards finds in them, so a remote dataset opens with one request and
 * never reads a shard (dataset.h, sp_dataset_write_index()).
 *
 * FORMAT (version 2), all integers little-endian, strings u32 length + bytes:
 *
 *     "SPDSIDX\0"                 8 bytes
 *     u32 version                 2
 *     u64 max_file_bytes          the per-member limit the shards were read with
 *     u32 nshards
 *     nshards times:
 *         str  shard name         no '/', as in sample paths "<shard>/<member>"
 *         u64  shard size         bytes (a remote read checks the object's size)
 *         u32  nsamples
 *         nsamples times, in tar order:
 *             str  member         the image member (or the key, for a sample without one)
 *             i32  label          -1: none
 *             u64  offset, size   where the member's data lies in the shard
 *             u64  hash hi, lo    XXH3-128 of those bytes
 *             u64  json offset, size   its KEY.json member (size UINT64_MAX: none)
 *             u64  json hash hi, lo    XXH3-128 of the member's bytes
 *             str  reason         why the sample cannot be read ("" : it can)
 *     u64 XXH3-64 of every byte before it
 *
 * Decoding never takes a field on trust: every length is checked against
 * what is left, a label lies in -1..65535, a member starts on a 512-byte
 * boundary and ends inside its shard, sizes above the reader's own
 * max_file_bytes make the sample fail as a local open would, and the
 * checksum covers the whole object. The table decoded is exactly the one a
 * local open of the same shards builds, so the fingerprint is the same.
 * A KEY.json member is checked as the image (512-byte boundary, inside its
 * shard, above max_file_bytes the sample fails, naming it). Version 1 (no
 * .json fields) is still read: its dataset reads images, and refuses
 * annotations "@json" by name (sp__ds_tar(ds)->json_unindexed: rebuild it).
 *
 * NAMES ARE DATA. A shard name becomes a request URL (store/NAME) and a
 * member name half of a sample's path ("<shard>/<member>"), both printed:
 * before either is used, every shard name of the object and every member
 * name (and sample error) of a shard opened is checked by name_fault():
 * not empty, at most SP_DS_OBJ_NAME_MAX bytes, no control byte (below 0x20,
 * 0x7f), no leading '/', no empty, "." or ".." segment, and a shard name
 * no '/' at all. A violation fails the open naming the object, the shard
 * (its place in the object) and the name, escaped (common/escape_internal.h):
 *     http://h/data/seedpipe.index: shard 3: name "\x1b[2J.tar" contains a control byte
 * so a forged object can neither send a request outside the store's folder
 * nor write to the terminal.
 *
 * dataset_remote.c calls down into this file (decode); the public
 * sp_dataset_write_index() is here too, writing to a local file or, for a
 * remote dataset, uploading beside its shards (remote.c).
 */
#include "dataset/dataset_internal.h"
#include "dataset/dataset_tar.h"
#include "common/escape_internal.h"
#include "common/fileio_internal.h"
#include "common/le_internal.h"
#include "dataset/remote_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#define OBJ_MAGIC "SPDSIDX"
#define OBJ_VERSION 2u
#define SP_DS_OBJ_NAME_MAX 1024u     /* a shard or member name, bytes */
#define SP_DS_OBJ_REASON_MAX 4096u   /* a sample's error as the object gives it */
#define SHOW_MAX 160                 /* bytes of a bad name a message shows, escaped */

typedef sp__ds_tar_sample tar_sample;

int sp__ds_object_encode(const sp_dataset *ds, sp__sbuf *b, sp_error *err) {
    if (sp__ds_kind(ds) != SP_DATASET_WEBDATASET || !sp__ds_tar(ds)->shards || !sp__ds_tar(ds)->shard_sizes)
        return sp_error_set(err, SP_EUNSUPP, "%s: a dataset index object describes tar shards "
                            "(a WebDataset); this dataset is not one", ds->root);
    sp__sbuf_put(b, OBJ_MAGIC, 8);
    sp__ds_buf_u32(b, OBJ_VERSION);
    sp__ds_buf_u64(b, ds->max_file_bytes);
    sp__ds_buf_u32(b, (uint32_t)sp__ds_tar(ds)->nshards);
    uint64_t i = 0;
    for (size_t s = 0; s < sp__ds_tar(ds)->nshards; s++) {
        uint64_t first = i;
        while (i < ds->n && sp__ds_tar(ds)->shard_of[i] == s) i++;
        sp__ds_buf_str(b, sp__ds_tar(ds)->shards[s]);
        sp__ds_buf_u64(b, sp__ds_tar(ds)->shard_sizes[s]);
        sp__ds_buf_u32(b, (uint32_t)(i - first));
        size_t rl = strlen(sp__ds_tar(ds)->shards[s]) + 1;
        for (uint64_t k = first; k < i; k++) {
            const char *bad = sp__ds_tar_bad(ds, k);
            sp__ds_buf_str(b, ds->pool + ds->path_off[k] + rl);
            sp__ds_buf_u32(b, (uint32_t)ds->labels[k]);
            sp__ds_buf_u64(b, sp__ds_tar(ds)->offsets[k]);
            sp__ds_buf_u64(b, ds->sizes[k]);
            sp__ds_buf_u64(b, ds->hashes[k].hi);
            sp__ds_buf_u64(b, ds->hashes[k].lo);
            int js = sp__ds_tar(ds)->json_size && sp__ds_tar(ds)->json_size[k] != UINT64_MAX;
            sp__ds_buf_u64(b, js ? sp__ds_tar(ds)->json_off[k] : 0);
            sp__ds_buf_u64(b, js ? sp__ds_tar(ds)->json_size[k] : UINT64_MAX);
            sp__ds_buf_u64(b, js ? sp__ds_tar(ds)->json_hash[k].hi : 0);
            sp__ds_buf_u64(b, js ? sp__ds_tar(ds)->json_hash[k].lo : 0);
            sp__ds_buf_str(b, bad);
        }
    }
    if (i != ds->n)
        return sp_error_set(err, SP_EINVAL, "%s: samples out of shard order", ds->root);
    sp__ds_buf_u64(b, XXH3_64bits(b->p, b->len));
    if (b->oom) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    return SP_OK;
}

/* ---- decoding ---------------------------------------------------------------------- */

typedef struct obj_shard {
    const char *name;     /* into the object (not NUL-terminated) */
    uint32_t name_len;
    uint64_t size;
    uint32_t count;
    size_t at;            /* offset of its first sample */
} obj_shard;

typedef struct obj_rd {
    const uint8_t *d;
    size_t pos, end;
    int bad;
} obj_rd;

static const uint8_t *take(obj_rd *r, size_t n) {
    if (r->bad || r->end - r->pos < n) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *p = r->d + r->pos;
    r->pos += n;
    return p;
}

static uint32_t get32(obj_rd *r) {
    const uint8_t *p = take(r, 4);
    return p ? sp__le_get32(p) : 0;
}

static uint64_t get64(obj_rd *r) {
    const uint8_t *p = take(r, 8);
    return p ? sp__le_get64(p) : 0;
}

static const char *get_str(obj_rd *r, uint32_t *len) {
    *len = get32(r);
    const uint8_t *p = take(r, *len);
    if (p && memchr(p, '\0', *len)) r->bad = 1;
    return (const char *)p;
}

/* Why the name p[0 .. len) may not build a URL or a path (shard: also no
 * '/' at all), or NULL when it may. */
static const char *name_fault(const char *p, uint32_t len, int shard) {
    if (len == 0) return "is empty";
    if (len > SP_DS_OBJ_NAME_MAX) return "is longer than 1024 bytes";
    for (uint32_t i = 0; i < len; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) return "contains a control byte";
    if (p[0] == '/') return "starts with '/'";
    if (shard && memchr(p, '/', len)) return "contains '/'";
    for (uint32_t a = 0; a <= len;) {   /* each '/'-separated segment */
        uint32_t b = a;
        while (b < len && p[b] != '/') b++;
        if (b == a) return "has an empty path segment";
        if (b - a == 1 && p[a] == '.') return "has a '.' path segment";
        if (b - a == 2 && p[a] == '.' && p[a + 1] == '.') return "has a '..' path segment";
        a = b + 1;
    }
    return NULL;
}

/* p[0 .. len) as a message shows it: escaped, at most SHOW_MAX bytes of it. */
static void show(char *dst, size_t n, const char *p, uint32_t len) {
    uint32_t k = len > SHOW_MAX ? SHOW_MAX : len;
    sp__escape_copy(dst, n, p, k);
    if (k < len && strlen(dst) + 4 < n) strcat(dst, "...");
}

static int cmp_shard(const void *a, const void *b) {
    const obj_shard *x = a, *y = b;
    uint32_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* s->bad for a KEY.json member above this open's max_file_bytes, as a
 * local open words it ("shard/KEY.json: N bytes, above the limit of M"):
 * the key is the member name up to the first '.' of its last component.
 * 1 (NULL s->bad: out of memory, which the caller reports). */
static int json_too_big(const sp_dataset *ds, tar_sample *s, const char *rel, const char *member,
                        uint32_t ml, uint64_t jsize) {
    const char *b = member;
    for (uint32_t k = 0; k < ml; k++)
        if (member[k] == '/') b = member + k + 1;
    const char *dot = memchr(b, '.', ml - (size_t)(b - member));
    int kl = dot ? (int)(dot - member) : (int)ml;
    size_t n = strlen(rel) + ml + 112;
    if ((s->bad = malloc(n)))
        snprintf(s->bad, n, "%s/%.*s.json: %llu bytes, above the limit of %llu", rel, kl, member,
                 (unsigned long long)jsize, (unsigned long long)ds->max_file_bytes);
    return 1;
}

/* The samples of one shard of the object, appended to t as shard `shard`. */
static int decode_shard(sp_dataset *ds, const char *what, const uint8_t *d, size_t end,
                        const obj_shard *sh, uint32_t shard, const char *rel, uint32_t version,
                        sp__ds_tar_set *t, sp_error *err) {
    obj_rd r = {d, sh->at, end, 0};
    size_t rl = strlen(rel);
    char relx[SHOW_MAX * 4 + 8];   /* rel as messages show it (checked, maybe not printable) */
    show(relx, sizeof relx, rel, (uint32_t)rl);
    for (uint32_t k = 0; k < sh->count; k++) {
        uint32_t ml, bl;
        const char *member = get_str(&r, &ml);
        int32_t label = (int32_t)get32(&r);
        uint64_t off = get64(&r), size = get64(&r);
        sp_digest h = {get64(&r), 0};
        h.lo = get64(&r);
        uint64_t joff = version > 1 ? get64(&r) : 0, jsize = version > 1 ? get64(&r) : UINT64_MAX;
        sp_digest jh = {version > 1 ? get64(&r) : 0, 0};
        jh.lo = version > 1 ? get64(&r) : 0;
        const char *bad = get_str(&r, &bl);
        int has_json = jsize != UINT64_MAX;
        if (r.bad || ml == 0 || label < -1 || label >= SP_DS_MAX_CLASSES ||
            (!bl && (off % 512 != 0 || off > sh->size || size > sh->size - off)) ||
            (!bl && has_json && (joff % 512 != 0 || joff > sh->size || jsize > sh->size - joff)))
            return sp_error_set(err, SP_EFORMAT, "%s: shard %s, sample %u: malformed entry", what,
                                relx, k);
        const char *fault = name_fault(member, ml, 0);
        const char *bad_fault = bl > SP_DS_OBJ_REASON_MAX ? "is longer than 4096 bytes" : NULL;
        for (uint32_t j = 0; j < bl && !bad_fault; j++)
            if ((unsigned char)bad[j] < 0x20 || bad[j] == 0x7f)
                bad_fault = "contains a control byte";
        if (fault || bad_fault) {
            char nm[SHOW_MAX * 4 + 8];
            show(nm, sizeof nm, fault ? member : bad, fault ? ml : bl);
            return sp_error_set(err, SP_EFORMAT, "%s: shard %s, sample %u: %s \"%s\" %s", what,
                                relx, k, fault ? "member name" : "error text", nm,
                                fault ? fault : bad_fault);
        }
        if (t->n >= ds->max_samples)
            return sp_error_set(err, SP_ELIMIT, "%s: more than %llu samples", what,
                                (unsigned long long)ds->max_samples);
        tar_sample *s = sp__ds_tar_set_slot(t);
        if (!s) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", what);
        s->path = malloc(rl + ml + 2);
        s->key = calloc(1, 1);
        if (s->path) snprintf(s->path, rl + ml + 2, "%s/%.*s", rel, (int)ml, member);
        if (bl) s->bad = strndup(bad, bl);
        if (!bl && size > ds->max_file_bytes) {   /* the limit of this open, as a local one */
            size_t n = rl + ml + 96;
            if ((s->bad = malloc(n)))
                snprintf(s->bad, n, "%s/%.*s: %llu bytes, above the limit of %llu", rel, (int)ml,
                         member, (unsigned long long)size, (unsigned long long)ds->max_file_bytes);
            bl = 1;
        }
        if (!bl && has_json && jsize > ds->max_file_bytes)   /* the member, as a local open */
            bl = json_too_big(ds, s, rel, member, ml, jsize);
        t->n++;   /* counted even when incomplete: the set's free handles NULLs */
        if (!s->path || !s->key || (bl && !s->bad))
            return sp_error_set(err, SP_ENOMEM, "%s: out of memory", what);
        sp__ds_tar_sample_place(s, label, shard, off, size, h, joff, jsize, jh);
    }
    return SP_OK;
}

/* The shard table (the samples skipped) into sh[0..ns). */
static int shard_table(obj_rd *r, obj_shard *sh, uint32_t ns, uint32_t version, const char *what,
                       sp_error *err) {
    for (uint32_t s = 0; s < ns && !r->bad; s++) {
        sh[s].name = get_str(r, &sh[s].name_len);
        sh[s].size = get64(r);
        sh[s].count = get32(r);
        sh[s].at = r->pos;
        const char *fault = r->bad ? NULL : name_fault(sh[s].name, sh[s].name_len, 1);
        if (fault) {   /* before the name builds a URL or a path */
            char nm[SHOW_MAX * 4 + 8];
            show(nm, sizeof nm, sh[s].name, sh[s].name_len);
            return sp_error_set(err, SP_EFORMAT, "%s: shard %u: name \"%s\" %s", what, s, nm,
                                fault);
        }
        for (uint32_t k = 0; k < sh[s].count && !r->bad; k++) {
            uint32_t l;
            get_str(r, &l);
            take(r, 4 + 32 + (version > 1 ? 32 : 0));
            get_str(r, &l);
        }
    }
    if (r->bad || r->pos != r->end)
        return sp_error_set(err, SP_EFORMAT, "%s: malformed shard table", what);
    return SP_OK;
}

int sp__ds_object_decode(sp_dataset *ds, const char *what, const uint8_t *d, size_t n,
                         char **want, size_t nwant, char ***all, size_t *nall,
                         uint64_t **sizes, sp__ds_tar_set *t, sp_error *err) {
    *sizes = NULL;
    if (all) { *all = NULL; *nall = 0; }
    if (n < 32 || memcmp(d, OBJ_MAGIC, 8) != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: not a seedpipe dataset index object", what);
    if (XXH3_64bits(d, n - 8) != sp__le_get64(d + n - 8))
        return sp_error_set(err, SP_EFORMAT, "%s: checksum mismatch (damaged or cut short)", what);
    obj_rd r = {d, 8, n - 8, 0};
    uint32_t version = get32(&r);
    if (version != OBJ_VERSION && version != 1)
        return sp_error_set(err, SP_EUNSUPP, "%s: format version %u (this library reads 1 "
                            "and %u)", what, version, OBJ_VERSION);
    sp__ds_tar(ds)->json_unindexed = version == 1;
    get64(&r);   /* max_file_bytes of the writer: the reader applies its own */
    uint32_t ns = get32(&r);
    if (r.bad || ns > (n - r.pos) / 16)
        return sp_error_set(err, SP_EFORMAT, "%s: malformed header", what);
    obj_shard *sh = calloc(ns ? ns : 1, sizeof *sh);
    if (!sh) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", what);
    int rc = shard_table(&r, sh, ns, version, what, err);
    if (rc != SP_OK) {
        free(sh);
        return rc;
    }
    qsort(sh, ns, sizeof *sh, cmp_shard);
    for (uint32_t s = 1; rc == SP_OK && s < ns; s++) {
        if (cmp_shard(&sh[s - 1], &sh[s]) != 0) continue;
        char nm[SHOW_MAX * 4 + 8];
        show(nm, sizeof nm, sh[s].name, sh[s].name_len);
        rc = sp_error_set(err, SP_EFORMAT, "%s: shard %s listed twice", what, nm);
    }
    char **names = want;
    if (rc == SP_OK && !want) {   /* every shard, in sorted name order (a local folder's) */
        names = calloc(ns ? ns : 1, sizeof *names);
        if (!names) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", what);
        for (uint32_t s = 0; rc == SP_OK && s < ns; s++)
            if (!(names[s] = strndup(sh[s].name, sh[s].name_len)))
                rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", what);
        *all = names;
        *nall = ns;
        nwant = ns;
    }
    uint64_t *sz = rc == SP_OK ? calloc(nwant ? nwant : 1, sizeof *sz) : NULL;
    if (rc == SP_OK && !sz) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", what);
    *sizes = sz;
    for (size_t w = 0; rc == SP_OK && w < nwant; w++) {
        obj_shard key = {names[w], (uint32_t)strlen(names[w]), 0, 0, 0};
        const obj_shard *f = bsearch(&key, sh, ns, sizeof *sh, cmp_shard);
        if (!f) {
            rc = sp_error_set(err, SP_EINVAL, "%s: shard %s is not in the dataset index object "
                              "(rebuild it: seedpipe index URL)", what, names[w]);
            break;
        }
        sz[w] = f->size;
        rc = decode_shard(ds, what, d, n - 8, f, (uint32_t)w, names[w], version, t, err);
    }
    free(sh);
    return rc;
}

/* ---- writing ----------------------------------------------------------------------------- */

int sp_dataset_write_index(const sp_dataset *ds, const char *dest, sp_error *err) {
    if (!ds) return sp_error_set(err, SP_EINVAL, "sp_dataset_write_index: NULL dataset");
    sp__sbuf b = {0};
    int rc = sp__ds_object_encode(ds, &b, err);
    if (rc == SP_OK && dest) {
        rc = sp_write_file_atomic(dest, b.p, b.len, 1, err);
    } else if (rc == SP_OK && sp__ds_tar(ds)->rio) {
        rc = sp__rio_put(sp__ds_tar(ds)->rio, SP_DS_OBJECT_NAME, b.p, b.len, err);
    } else if (rc == SP_OK) {
        char *path = sp__ds_join(ds->base, SP_DS_OBJECT_NAME);
        rc = path ? sp_write_file_atomic(path, b.p, b.len, 1, err)
                  : sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
        free(path);
    }
    free(b.p);
    return rc;
}
