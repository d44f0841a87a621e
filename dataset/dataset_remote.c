/* dataset_remote.c - WebDataset shards in an S3-compatible object store or
 * on an HTTP(S) server (dataset.h): `s3://bucket/prefix/train-{000000..000099}.tar`,
 * `https://host/path/train-{...}.tar`, one shard `.../x.tar`, or a folder
 * `.../path/` (every shard its index object lists).
 *
 * HOW IT WORKS
 * Opening reads one object, the dataset index object `seedpipe.index`
 * beside the shards (dataset_object.c): one request and the index's size,
 * whatever the number of shards or samples, and at most
 * SEEDPIPE_REMOTE_INDEX_MAX bytes (default 128M) of it: a longer or endless
 * body is refused there, one that declares more before its body. It selects the shards the URL
 * names (a brace pattern's expansion, sorted as a local open sorts it) and
 * builds the same sample table a local open of the same shards builds
 * (sp__ds_tar_pack()), so the fingerprint is the local copy's. With
 * SP_INDEX_REBUILD (`seedpipe index URL`) it reads every shard once instead
 * (each into an unlinked temporary file, parsed by the local tar reader,
 * sp__ds_tar_scan_fd()), which is how an index object is made for shards
 * that have none.
 *
 * Prefetch (prefetch_remote(), sp__ds_prefetch() for the loader and the pool
 * with the samples they are about to read, which the order tells them):
 * the samples' members sorted by shard and offset, runs of members at most
 * 16 KiB apart read as one range (at most 8 MiB), each GET started at once
 * on the calling thread (remote.c's prefetch, within its byte budget,
 * SEEDPIPE_PREFETCH_BYTES); a later read of such a sample on that thread
 * takes its bytes. It changes when bytes arrive,
 * never which: every sample is checked against its hash either way.
 *
 * Targets (annotations "@json", sp__ds_remote_json()): the loader's open
 * reads every sample's KEY.json member once, in windows of samples, each
 * window's ranges (members coalesced as prefetch coalesces images) fetched
 * at once, each member checked against its hash in the index object.
 *
 * A sample is one byte-range GET of its image member (remote.c), checked
 * against the object's indexed size and the member's content hash: a
 * shard replaced under the index is SP_EMISMATCH naming the object, never
 * other bytes. A failed request (after the retries of a transient fault)
 * is that sample's error, so --on-error decides.
 *
 * dataset_open.c calls down into this file; it calls dataset_object.c,
 * dataset_tar.c, dataset_tar_index.c, dataset_tar_read.c and remote.c.
 */
#include "dataset/dataset_internal.h"
#include "dataset/dataset_tar.h"
#include "dataset/remote_internal.h"
#include "common/escape_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#define PF_MAX 128                 /* samples one prefetch call considers */
#define COALESCE_GAP (16u << 10)   /* members this close in a shard: one range */
#define COALESCE_SPAN (8u << 20)   /* at most this many bytes a range */

static int ends_with(const char *s, const char *suf) {
    size_t ls = strlen(s), lf = strlen(suf);
    return ls > lf && strcmp(s + ls - lf, suf) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **v, size_t n) {
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

/* The shards the URL's leaf names: a pattern's, sorted, or the one shard;
 * NULL for a folder (then every shard of the index object). */
static int wanted(const sp_dataset *ds, const char *leaf, char ***names, size_t *n,
                  sp_error *err) {
    *names = NULL;
    *n = 0;
    if (!leaf[0]) return SP_OK;
    if (sp__ds_is_shard_pattern(leaf)) {
        int rc = sp__ds_expand_pattern(leaf, names, n, err);
        if (rc != SP_OK) return rc;
        qsort(*names, *n, sizeof **names, cmp_str);
        for (size_t i = 1; i < *n; i++)
            if (strcmp((*names)[i - 1], (*names)[i]) == 0)
                return sp_error_set(err, SP_EINVAL, "%s: shard %s named twice", ds->root,
                                    (*names)[i]);
        return SP_OK;
    }
    if (!ends_with(leaf, ".tar"))
        return sp_error_set(err, SP_EINVAL, "%s: a remote dataset is a .tar shard, a brace "
                            "pattern of shards (train-{000000..000099}.tar) or a folder URL "
                            "ending in '/'", ds->root);
    *names = calloc(1, sizeof **names);
    if (*names && ((*names)[0] = strdup(leaf))) *n = 1;
    return *n ? SP_OK : sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
}

/* The table from the index object beside the shards. */
static int from_object(sp_dataset *ds, char **names, size_t n, sp__ds_tar_set *t,
                       char ***all, size_t *nall, uint64_t **sizes, sp_error *err) {
    sp__rio_get g;
    memset(&g, 0, sizeof g);
    g.name = SP_DS_OBJECT_NAME;
    g.max = sp__ds_tar(ds)->rio->index_max;   /* SEEDPIPE_REMOTE_INDEX_MAX: never buffered past it */
    int rc = sp__rio_fetch(sp__ds_tar(ds)->rio, &g, err);
    if (rc == SP_ELIMIT) {
        size_t l = strlen(err->msg);
        snprintf(err->msg + l, sizeof err->msg - l, "; an index object is read up to "
                 "SEEDPIPE_REMOTE_INDEX_MAX (default 128M; about 90 bytes a sample: set it "
                 "higher for a larger dataset)");
    }
    char *what = sp__rio_display(sp__ds_tar(ds)->rio, SP_DS_OBJECT_NAME);
    if (!what) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    if (rc != SP_OK && what && g.status == 404)
        rc = sp_error_set(err, SP_EIO, "%s: HTTP 404: there is no dataset index object beside "
                          "the shards; make one with `seedpipe index %s` (reads every shard "
                          "once)", what, ds->root);
    if (rc == SP_OK)
        rc = sp__ds_object_decode(ds, what, g.buf, g.got, names, n, all, nall, sizes, t, err);
    if (what) snprintf(ds->index.path, sizeof ds->index.path, "%s", what);
    free(what);
    free(g.buf);
    return rc;
}

/* The table from the shards themselves, each read once. */
static int from_shards(sp_dataset *ds, char **names, size_t n, sp__ds_tar_set *t,
                       uint64_t **sizes, sp_error *err) {
    if (!names)
        return sp_error_set(err, SP_EINVAL, "%s: reading the shards needs their names: give "
                            "a brace pattern or a .tar (an object store's folder is not "
                            "listed)", ds->root);
    uint64_t *sz = calloc(n, sizeof *sz);
    uint8_t *buf = malloc(SP_DS_TAR_READ_BUF);
    *sizes = sz;
    int rc = sz && buf ? SP_OK : sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    for (size_t i = 0; rc == SP_OK && i < n; i++) {
        snprintf(path, sizeof path, "%s/seedpipe-shard-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
        int fd = mkstemp(path);
        if (fd < 0) {
            rc = sp_error_set(err, SP_EIO, "%s: %s", path, strerror(errno));
            break;
        }
        unlink(path);
        char *what = sp__rio_display(sp__ds_tar(ds)->rio, names[i]);
        if (!what) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
        if (rc == SP_OK) rc = sp__rio_fetch_fd(sp__ds_tar(ds)->rio, names[i], fd, UINT64_MAX, &sz[i], err);
        if (rc == SP_OK && lseek(fd, 0, SEEK_SET) != 0)
            rc = sp_error_set(err, SP_EIO, "%s: %s", path, strerror(errno));
        size_t before = t->n;
        if (rc == SP_OK) rc = sp__ds_tar_scan_fd(ds, (uint32_t)i, names[i], what, fd, t, buf, err);
        ds->index.hashed += t->n - before;
        free(what);
        close(fd);
    }
    free(buf);
    return rc;
}

static int open_remote(sp_dataset *ds, const sp__ds_req *rq, sp_error *err) {
    (void)rq;
    char *leaf = NULL;
    int rc = sp__ds_tar_new(ds, err);
    if (rc != SP_OK) return rc;
    ds->ops = &sp__ds_remote_ops;
    rc = sp__rio_create(ds->root, &sp__ds_tar(ds)->rio, &leaf, err);
    if (rc != SP_OK) return rc;
    sp__ds_tar(ds)->pf_owner = sp__rio_owner_id();
    ds->base = strdup(sp__ds_tar(ds)->rio->display);
    if (!ds->base) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    char **names = NULL, **all = NULL;
    size_t n = 0, nall = 0;
    uint64_t *sizes = NULL;
    sp__ds_tar_set t = {0};
    if (rc == SP_OK) rc = wanted(ds, leaf, &names, &n, err);
    ds->index.used = 1;
    if (rc == SP_OK && ds->index_mode == SP_INDEX_REBUILD) {
        rc = from_shards(ds, names, n, &t, &sizes, err);
        snprintf(ds->index.path, sizeof ds->index.path, "%s/%s (not written: seedpipe index "
                 "writes it)", ds->base, SP_DS_OBJECT_NAME);
    } else if (rc == SP_OK) {
        rc = from_object(ds, names, n, &t, &all, &nall, &sizes, err);
        ds->index.reused = t.n;
    }
    if (all) {
        names = all;
        n = nall;
    }
    if (rc == SP_OK) {
        rc = sp__ds_tar_pack(ds, names, n, sizes, &t, err);   /* takes names and sizes */
        names = NULL;
        sizes = NULL;
    }
    if (rc == SP_OK) rc = sp__ds_shard_cache_setup(ds, err);
    free_names(names, n);
    free(sizes);
    free(leaf);
    sp__ds_tar_set_free(&t);
    return rc;
}

static void close_remote(sp_dataset *ds) {
    if (!ds->state) return;
    free(sp__ds_tar(ds)->shard_cache);
    free(sp__ds_tar(ds)->shard_cache_keys);
    if (sp__ds_tar(ds)->rio) sp__rio_forget(sp__ds_tar(ds)->rio);
    sp__rio_destroy(sp__ds_tar(ds)->rio);
    sp__ds_tar(ds)->rio = NULL;
    sp__ds_tar_free(ds);
}

static int read_remote(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err) {
    int rc = sp__ds_sample_path(ds, i, out, err);
    if (rc != SP_OK) return rc;
    const char *bad = sp__ds_tar_bad(ds, i);
    if (bad) return sp_error_set(err, SP_EFORMAT, "%s/%s", ds->base, bad);
    uint32_t s = sp__ds_tar(ds)->shard_of[i];
    if (sp__ds_tar(ds)->shard_cache && ds->sizes[i]) {   /* a local copy of the whole shard */
        int c = sp__ds_shard_cache_read(ds, i, out, err);
        if (c != 0) return c > 0 ? SP_OK : c;
    }
    sp__rio_get g;
    memset(&g, 0, sizeof g);
    g.name = sp__ds_tar(ds)->shards[s];
    g.off = sp__ds_tar(ds)->offsets[i];
    g.len = ds->sizes[i];
    g.expect_total = sp__ds_tar(ds)->shard_sizes[s];
    if (g.len && sp__rio_take(sp__ds_tar(ds)->pf_owner, i, &g)) {   /* prefetched on this thread */
        if (g.rc != SP_OK) rc = sp_error_set(err, g.rc, "%s", g.msg);
    } else if (g.len) {
        rc = sp__rio_fetch(sp__ds_tar(ds)->rio, &g, err);
    } else if (!(g.buf = malloc(1))) {
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", out->full_path);
    }
    if (rc != SP_OK) return rc;
    out->owned = g.buf;
    XXH128_hash_t d = XXH3_128bits(g.buf, (size_t)g.len);
    if (d.high64 != ds->hashes[i].hi || d.low64 != ds->hashes[i].lo) {
        char *what = sp__rio_display(sp__ds_tar(ds)->rio, sp__ds_tar(ds)->shards[s]);
        const char *path = ds->pool + ds->path_off[i];
        char *w = what ? sp__escape_dup(what, strlen(what)) : NULL;
        char *p = sp__escape_dup(path, strlen(path));   /* names from the index: escaped */
        rc = sp_error_set(err, SP_EMISMATCH, "%s: the object changed since the dataset was "
                          "indexed (content hash of %s differs)", w ? w : "(out of memory)",
                          p ? p : "(out of memory)");
        free(p);
        free(w);
        free(what);
        return rc;
    }
    out->src.bytes = out->owned;
    out->src.len = (size_t)g.len;
    return SP_OK;
}

/* ---- prefetch ------------------------------------------------------------------------ */

typedef struct pf_item {
    uint64_t i, off, len;
    uint32_t shard;
} pf_item;

static int cmp_item(const void *a, const void *b) {
    const pf_item *x = a, *y = b;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static void prefetch_remote(const sp_dataset *ds, const uint64_t *idx, size_t n) {
    if (sp__ds_tar(ds)->shard_cache) return;   /* whole shards are read instead */
    pf_item v[PF_MAX];
    size_t m = 0;
    for (size_t k = 0; k < n && m < PF_MAX; k++) {
        uint64_t i = idx[k];
        if (i >= ds->n || !ds->sizes[i] || sp__ds_tar_bad(ds, i) ||
            sp__rio_prefetched(sp__ds_tar(ds)->pf_owner, i))
            continue;
        v[m].i = i;
        v[m].shard = sp__ds_tar(ds)->shard_of[i];
        v[m].off = sp__ds_tar(ds)->offsets[i];
        v[m].len = ds->sizes[i];
        m++;
    }
    qsort(v, m, sizeof *v, cmp_item);
    uint64_t keys[PF_MAX], offs[PF_MAX], lens[PF_MAX];
    for (size_t j = 0; j < m;) {
        /* a run of members of one shard, each starting at most COALESCE_GAP
         * after the previous one ends: one range */
        uint64_t start = v[j].off, end = v[j].off + v[j].len;
        size_t k = j, cnt = 0;
        for (; k < m && v[k].shard == v[j].shard; k++) {
            if (k > j && v[k].i == v[k - 1].i) continue;   /* the same sample twice */
            if (k > j && (v[k].off < end || v[k].off - end > COALESCE_GAP ||
                          v[k].off + v[k].len - start > COALESCE_SPAN))
                break;
            keys[cnt] = v[k].i;
            offs[cnt] = v[k].off - start;
            lens[cnt] = v[k].len;
            cnt++;
            end = v[k].off + v[k].len;
        }
        sp__rio_get req;
        memset(&req, 0, sizeof req);
        req.name = sp__ds_tar(ds)->shards[v[j].shard];
        req.off = start;
        req.len = end - start;
        req.expect_total = sp__ds_tar(ds)->shard_sizes[v[j].shard];
        sp__rio_prefetch(sp__ds_tar(ds)->rio, sp__ds_tar(ds)->pf_owner, &req, keys, offs, lens, cnt);
        j = k;
    }
}

/* ---- KEY.json members (annotations "@json") ---------------------------------------------- */

#define NO_MEMBER UINT32_MAX   /* a sample of the window without a member */
#define EMPTY_MEMBER (UINT32_MAX - 1)   /* one of 0 bytes: no request */

struct sp__ds_json_reader {
    uint64_t first, end;              /* samples [first, end) fetched */
    sp__rio_get g[SP_DS_JSON_WINDOW];   /* their ranges, ng of them */
    size_t ng;
    uint32_t rng[SP_DS_JSON_WINDOW];  /* each sample's range, or NO_ / EMPTY_MEMBER */
    uint64_t at[SP_DS_JSON_WINDOW];   /* where its member starts in it */
    uint64_t requests;
};

sp__ds_json_reader *sp__ds_remote_json_new(void) { return calloc(1, sizeof(sp__ds_json_reader)); }

uint64_t sp__ds_remote_json_requests(const sp__ds_json_reader *r) { return r->requests; }

static void json_drop(sp__ds_json_reader *r) {
    for (size_t k = 0; k < r->ng; k++) free(r->g[k].buf);
    r->ng = 0;
}

void sp__ds_remote_json_free(sp__ds_json_reader *r) {
    if (!r) return;
    json_drop(r);
    free(r);
}

static int has_member(const sp_dataset *ds, uint64_t i) {
    return sp__ds_tar(ds)->json_size && sp__ds_tar(ds)->json_size[i] != UINT64_MAX && !sp__ds_tar_bad(ds, i);
}

/* Fetch the members of samples first.. (a window: SP_DS_JSON_WINDOW samples,
 * SP_DS_JSON_WINDOW_BYTES of members, at least one member) at once: sorted
 * by shard and offset, runs as in prefetch_remote() one range each. */
static void json_load(sp__ds_json_reader *r, const sp_dataset *ds, uint64_t first) {
    json_drop(r);
    pf_item v[SP_DS_JSON_WINDOW];
    size_t m = 0;
    uint64_t i = first, bytes = 0;
    for (; i < ds->n && i - first < SP_DS_JSON_WINDOW; i++) {
        uint64_t len = has_member(ds, i) ? sp__ds_tar(ds)->json_size[i] : 0;
        if (m && (bytes >= SP_DS_JSON_WINDOW_BYTES || len > SP_DS_JSON_WINDOW_BYTES - bytes))
            break;   /* the next window's */
        r->rng[i - first] = !has_member(ds, i) ? NO_MEMBER : len ? 0 : EMPTY_MEMBER;
        if (!len) continue;
        v[m].i = i;
        v[m].shard = sp__ds_tar(ds)->shard_of[i];
        v[m].off = sp__ds_tar(ds)->json_off[i];
        v[m].len = len;
        bytes += len;
        m++;
    }
    r->first = first;
    r->end = i;
    qsort(v, m, sizeof *v, cmp_item);
    for (size_t j = 0; j < m;) {
        uint64_t start = v[j].off, end = v[j].off + v[j].len;
        size_t k = j;
        for (; k < m && v[k].shard == v[j].shard; k++) {
            if (k > j && (v[k].off < end || v[k].off - end > COALESCE_GAP ||
                          v[k].off + v[k].len - start > COALESCE_SPAN))
                break;
            r->rng[v[k].i - first] = (uint32_t)r->ng;
            r->at[v[k].i - first] = v[k].off - start;
            end = v[k].off + v[k].len;
        }
        sp__rio_get *g = &r->g[r->ng++];
        memset(g, 0, sizeof *g);
        g->name = sp__ds_tar(ds)->shards[v[j].shard];
        g->off = start;
        g->len = end - start;
        g->expect_total = sp__ds_tar(ds)->shard_sizes[v[j].shard];
        j = k;
    }
    sp__rio_fetch_many(sp__ds_tar(ds)->rio, r->g, r->ng);
    r->requests += r->ng;
}

/* "URL/shard/KEY.json" of sample i, escaped (names from the index), malloc'd. */
static char *json_name(const sp_dataset *ds, uint64_t i) {
    const char *p = ds->pool + ds->path_off[i], *slash = strrchr(p, '/');
    const char *dot = strchr(slash ? slash + 1 : p, '.');
    size_t kl = dot ? (size_t)(dot - p) : strlen(p), n = strlen(ds->base) + kl + 8;
    char *raw = malloc(n);
    if (!raw) return NULL;
    snprintf(raw, n, "%s/%.*s.json", ds->base, (int)kl, p);
    char *e = sp__escape_dup(raw, strlen(raw));
    free(raw);
    return e;
}

int sp__ds_remote_json(void *reader, const sp_dataset *ds, uint64_t i, uint64_t max,
                       uint8_t **bytes, size_t *len, sp_error *err) {
    sp__ds_json_reader *r = reader;
    *bytes = NULL;
    *len = 0;
    if (sp__ds_tar(ds)->json_unindexed)
        return sp_error_set(err, SP_EUNSUPP, "%s: a version 1 dataset index object, which does "
                            "not say where the .json members lie: rebuild it (seedpipe index "
                            "%s) to read targets from them", ds->index.path, ds->root);
    if (i >= ds->n || !has_member(ds, i)) return SP_OK;   /* none (a bad sample fails on its image) */
    if (sp__ds_tar(ds)->json_size[i] > max) {
        char *nm = json_name(ds, i);
        int rc = sp_error_set(err, SP_ELIMIT, "%s: the index says %llu bytes, more than %llu "
                              "(the annotation element bound): not fetched",
                              nm ? nm : "(out of memory)",
                              (unsigned long long)sp__ds_tar(ds)->json_size[i], (unsigned long long)max);
        free(nm);
        return rc;
    }
    if (i < r->first || i >= r->end) json_load(r, ds, i);
    uint32_t k = r->rng[i - r->first];
    uint64_t want = sp__ds_tar(ds)->json_size[i];
    const sp__rio_get *g = k == EMPTY_MEMBER ? NULL : &r->g[k];
    if (g && g->rc != SP_OK) return sp_error_set(err, g->rc, "%s", g->msg);
    if (g && (g->got < r->at[i - r->first] || g->got - r->at[i - r->first] < want))
        return sp_error_set(err, SP_EIO, "%s: a short response", g->name);   /* not expected */
    uint8_t *b = malloc(want ? (size_t)want : 1);
    if (!b) return sp_error_set(err, SP_ENOMEM, "annotations @json: out of memory");
    if (want) memcpy(b, g->buf + r->at[i - r->first], (size_t)want);
    XXH128_hash_t d = XXH3_128bits(b, (size_t)want);
    if (d.high64 != sp__ds_tar(ds)->json_hash[i].hi || d.low64 != sp__ds_tar(ds)->json_hash[i].lo) {
        free(b);
        char *nm = json_name(ds, i);
        int rc = sp_error_set(err, SP_EMISMATCH, "%s: the object changed since the dataset was "
                              "indexed (the member's content hash differs)",
                              nm ? nm : "(out of memory)");
        free(nm);
        return rc;
    }
    *bytes = b;
    *len = (size_t)want;
    return SP_OK;
}

static int is_remote(const sp_dataset *ds) {
    (void)ds;
    return 1;
}

const sp__ds_ops sp__ds_remote_ops = {
    .read = read_remote,
    .destroy = close_remote,
    .prefetch = prefetch_remote,
    .is_remote = is_remote,
    .shard_count = sp__ds_tar_shard_count,
    .shard_of = sp__ds_tar_shard_of,
};

/* Any URL the token corpus's driver (before it) did not take. */
static int remote_probe(const sp__ds_req *rq, sp_error *err) {
    (void)err;
    return rq->url;
}

const sp__ds_driver sp__ds_driver_remote = {
    .name = "webdataset", .code = SP_DATASET_WEBDATASET, .probe = remote_probe,
    .open = open_remote, .ops = &sp__ds_remote_ops,
};
