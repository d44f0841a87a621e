/* dataset_tokens.c - the token-corpus kind (SP_DATASET_TOKENS): a Megatron
 * indexed dataset, PREFIX.idx + PREFIX.bin, read by our own reader
 * (dataset_tokens.h is what the loader's packing calls; docs/tokens.md
 * "The format" is the manual).
 *
 * THE FORMAT (megatron-core's indexed_dataset.py, "MMIDIDX"), all integers
 * little-endian, the .idx:
 *
 *     9 bytes   "MMIDIDX\0\0"
 *     u64       version, 1
 *     u8        token dtype code: 1 uint8, 2 int8, 3 int16, 4 int32,
 *               5 int64, 6 float64, 7 float32, 8 uint16
 *     u64 S     sequence count
 *     u64 N     document index entries (documents D = N - 1)
 *     S x i32   sequence_lengths (tokens)
 *     S x i64   sequence_pointers (byte offsets in the .bin)
 *     N x i64   document_indices: document d is sequences
 *               [document_indices[d], document_indices[d + 1])
 *     S x i8    sequence_modes, only in multimodal corpora (ignored here)
 *
 * and the .bin is the sequences' tokens back to back.
 *
 * HOW IT WORKS. The open maps both files read-only (MAP_SHARED: forked
 * children share the pages; nothing is written) and keeps them mapped,
 * then checks the whole index in one pass over the S sequences and the N
 * document entries (check_header(), check_sequences(), check_documents()):
 * the arrays must fill the .idx exactly (or with the S mode bytes), the
 * document index must start at 0, never decrease and end at S, every length
 * must be >= 0 and every pointer must be where megatron-core's writer puts
 * it, the running sum of the lengths before it times the item size (its
 * _IndexWriter computes the pointers so; add_index() rewrites them so):
 * the sequences tile the .bin from byte 0 to its end, with no gap, overlap
 * or trailing byte. That strictness is what makes the rest O(1) without a
 * table: document d's tokens are one run of the .bin starting at token
 * start(d) = pointer[document_indices[d]] / itemsize (the total when the
 * index equals S), and its length is start(d + 1) - start(d); both read
 * from the mapped arrays, so no per-document memory is allocated whether a
 * document is one sequence or many. sp__tok_read() converts from the map
 * (sign- or zero-extending; an int64 token outside int32's range for a
 * 4-byte output is SP_EFORMAT naming the file, document and value).
 *
 * FINGERPRINT (tok_fingerprint()): XXH3-128 (seed 0, streamed through
 * sp__hash: integers as 8 little-endian bytes) of "seedpipe.tokens.v1"
 * (18 bytes), kind 6, the dtype code, D, the total tokens, the .bin's size,
 * and the XXH3-128 (hi, lo) of the .idx's bytes (which hold every length
 * and the document index). The .bin's bytes are NOT hashed: that costs a
 * read of the whole corpus (6 GB for 3 billion uint16 tokens: seconds to
 * minutes) at every open, where the index costs 12 bytes a sequence and 8
 * a document. LIMIT: a .bin rewritten in place with other tokens and the
 * same size keeps the fingerprint (include/seedpipe/dataset.h says so).
 *
 * REMOTE (a URL ending in .idx or .bin, or the prefix URL: s3://,
 * http(s)://; url_probe() decides which URLs are token corpora; remote.c): the
 * .idx is fetched whole into memory (bounded by the larger of
 * SEEDPIPE_REMOTE_INDEX_MAX and 4 GiB, about 200 million documents), the
 * .bin's size is the total of a one-byte ranged GET's Content-Range, and
 * the same checks and fingerprint follow (a remote corpus fingerprints as
 * its local copy). Reads are byte ranges of the .bin, one GET per run of
 * adjacent spans, all in flight at once (sp__rio_fetch_many()), each
 * checked against the .bin's size at open (a replaced object is
 * SP_EMISMATCH). A mixture of token corpora (a blend) counts its sources'
 * windows, which the loader gives it (sp__ds_mix_resize(), dataset_mix.c).
 * Its drivers (at the end) are listed in dataset_drivers.c; the reads are
 * dataset_tokens_read.c's. Calls remote.c and common/.
 */
#include "dataset/dataset_tokens_kind.h"
#include "common/fileio_internal.h"
#include "common/hash_internal.h"
#include "common/le_internal.h"
#include "dataset/remote_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint8_t tok_magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

/* dtype code -> numpy name, item size, signedness (0: float or unknown) */
static const struct {
    const char *name;
    int size, is_signed;
} tok_types[9] = {
    {NULL, 0, 0},      {"uint8", 1, 0}, {"int8", 1, 1},    {"int16", 2, 1}, {"int32", 4, 1},
    {"int64", 8, 1},   {"float64", 8, 0}, {"float32", 4, 0}, {"uint16", 2, 0},
};

/* ---- lookups ------------------------------------------------------------------- */

const sp__tok *sp__tok_of(const sp_dataset *ds) {
    return ds && sp__ds_kind(ds) == SP_DATASET_TOKENS ? ds->state : NULL;
}
uint64_t sp__tok_docs(const sp__tok *t) { return t->D; }
uint64_t sp__tok_total(const sp__tok *t) { return t->total; }
const char *sp__tok_dtype_name(const sp__tok *t) { return tok_types[t->code].name; }

uint64_t sp__tok_len(const sp__tok *t, uint64_t d) {
    if (d >= t->D) return 0;
    if (t->one_seq) return (uint32_t)sp__le_get32(t->lengths + 4 * d);   /* checked >= 0 */
    return sp__tok_doc_start(t, d + 1) - sp__tok_doc_start(t, d);
}

void sp__tok_prefetch_len(const sp__tok *t, uint64_t d) {
    if (d < t->D) __builtin_prefetch(t->one_seq ? t->lengths + 4 * d : t->docs + 8 * d);
}

/* ---- the checks at open --------------------------------------------------------------- */

static int bad(const sp__tok *t, sp_error *err, const char *what) {
    return sp_error_set(err, SP_EFORMAT, "%s: %s", t->idx_path, what);
}

/* Magic, version, dtype, and the array sizes against the file's. */
static int check_header(sp__tok *t, sp_error *err) {
    char m[256];
    if (t->idx_size < TOK_HEADER) {
        snprintf(m, sizeof m, "truncated: %zu bytes, the header alone is %d", t->idx_size,
                 TOK_HEADER);
        return bad(t, err, m);
    }
    if (memcmp(t->idx, tok_magic, sizeof tok_magic) != 0)
        return bad(t, err, "bad magic, not a Megatron indexed dataset (MMIDIDX)");
    uint64_t version = sp__le_get64(t->idx + 9);
    if (version != 1) {
        snprintf(m, sizeof m, "version %" PRIu64 ", only 1 is known", version);
        return bad(t, err, m);
    }
    t->code = t->idx[17];
    if (t->code < 1 || t->code > 8) {
        snprintf(m, sizeof m, "unknown token dtype code %d (1..8)", t->code);
        return bad(t, err, m);
    }
    if (t->code == 6 || t->code == 7)
        return sp_error_set(err, SP_EUNSUPP, "%s: token dtype %s: tokens must be integers",
                            t->idx_path, tok_types[t->code].name);
    t->itemsize = tok_types[t->code].size;
    t->shift = t->itemsize == 8 ? 3 : t->itemsize == 4 ? 2 : t->itemsize == 2 ? 1 : 0;
    t->is_signed = tok_types[t->code].is_signed;
    t->S = sp__le_get64(t->idx + 18);
    uint64_t N = sp__le_get64(t->idx + 26);
    uint64_t rem = t->idx_size - TOK_HEADER;
    if (t->S > rem / 12 || N > (rem - t->S * 12) / 8) {
        snprintf(m, sizeof m, "truncated or hostile: %" PRIu64 " sequences and %" PRIu64
                 " document entries do not fit in its %zu bytes", t->S, N, t->idx_size);
        return bad(t, err, m);
    }
    rem -= t->S * 12 + N * 8;
    if (rem != 0 && rem != t->S) {
        snprintf(m, sizeof m, "%" PRIu64 " bytes after the document index (none, or one "
                 "mode byte a sequence, %" PRIu64 ", expected)", rem, t->S);
        return bad(t, err, m);
    }
    if (N == 0) return bad(t, err, "no document index (it starts with a 0 entry)");
    t->D = N - 1;
    if (t->D > UINT32_MAX)
        return sp_error_set(err, SP_ELIMIT, "%s: %" PRIu64 " documents, at most %" PRIu32
                            " are supported", t->idx_path, t->D, UINT32_MAX);
    if (t->D == 0) return bad(t, err, "no documents");
    t->lengths = t->idx + TOK_HEADER;
    t->pointers = t->lengths + 4 * t->S;
    t->docs = t->pointers + 8 * t->S;
    return SP_OK;
}

/* Every length >= 0, every pointer the running byte sum, the sum the .bin's size. */
static int check_sequences(sp__tok *t, sp_error *err) {
    char m[320];
    uint64_t at = 0, is = (uint64_t)t->itemsize;
    for (uint64_t s = 0; s < t->S; s++) {
        int32_t len = (int32_t)sp__le_get32(t->lengths + 4 * s);
        uint64_t p = sp__tok_seq_ptr(t, s);
        if (len < 0) {
            snprintf(m, sizeof m, "sequence %" PRIu64 ": negative length %" PRId32, s, len);
            return bad(t, err, m);
        }
        if (p != at) {
            snprintf(m, sizeof m, "sequence %" PRIu64 ": pointer %" PRIu64 ", expected %" PRIu64
                     " (the sequences lie back to back in the .bin, as megatron-core writes "
                     "them)", s, p, at);
            return bad(t, err, m);
        }
        if ((uint64_t)len * is > t->bin_size - at) {
            snprintf(m, sizeof m, "sequence %" PRIu64 ": %" PRId32 " tokens at byte %" PRIu64
                     " run past the end of %s (%zu bytes)", s, len, at, t->bin_path,
                     t->bin_size);
            return bad(t, err, m);
        }
        at += (uint64_t)len * is;
    }
    if (at != t->bin_size) {
        snprintf(m, sizeof m, "the sequences end at byte %" PRIu64 " but %s has %zu bytes "
                 "(files of two different corpora?)", at, t->bin_path, t->bin_size);
        return bad(t, err, m);
    }
    t->total = at / is;
    return SP_OK;
}

/* document_indices: 0 first, non-decreasing, S last; notes whether
 * document d is sequence d throughout (t->one_seq). */
static int check_documents(sp__tok *t, sp_error *err) {
    char m[256];
    uint64_t prev = sp__le_get64(t->docs);
    if (prev != 0) {
        snprintf(m, sizeof m, "document index starts at %" PRIu64 ", not 0", prev);
        return bad(t, err, m);
    }
    int one = t->S == t->D;
    for (uint64_t d = 1; d <= t->D; d++) {
        uint64_t v = sp__le_get64(t->docs + 8 * d);
        one &= v == d;
        if (v < prev || v > t->S) {
            snprintf(m, sizeof m, "document index entry %" PRIu64 " is %" PRIu64 " after %"
                     PRIu64 " (entries must not decrease nor pass the %" PRIu64 " sequences)",
                     d, v, prev, t->S);
            return bad(t, err, m);
        }
        prev = v;
    }
    if (prev != t->S) {
        snprintf(m, sizeof m, "document index ends at %" PRIu64 ", not at the sequence count %"
                 PRIu64, prev, t->S);
        return bad(t, err, m);
    }
    t->one_seq = one;
    return SP_OK;
}

/* ---- mapping, the source table ------------------------------------------------------ */

/* Map path read-only (a regular file; an empty one maps to NULL). */
static int map_file(const char *path, const uint8_t **out, size_t *size, sp_error *err) {
    struct stat st;
    int fd = sp__open_regular(AT_FDCWD, path, path, 0, UINT64_MAX >> 1, &st, err);
    if (fd < 0) return fd;
    *size = (size_t)st.st_size;
    *out = NULL;
    int rc = SP_OK;
    if (*size) {
        void *p = mmap(NULL, *size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            rc = sp_error_set(err, errno == ENOMEM ? SP_ENOMEM : SP_EIO, "%s: mmap: %s", path,
                              strerror(errno));
        else
            *out = p;
    }
    close(fd);
    return rc;
}

static void tok_destroy(sp_dataset *ds) {
    sp__tok *t = ds->state;
    if (!t) return;
    if (t->rio) free((void *)t->idx);
    else if (t->idx) munmap((void *)t->idx, t->idx_size);
    if (t->bin) munmap((void *)t->bin, t->bin_size);
    sp__rio_destroy(t->rio);
    free(t->idx_name);
    free(t->bin_name);
    free(t->idx_path);
    free(t->bin_path);
    free(t);
    ds->state = NULL;
}

static int tok_label(const sp_dataset *ds, uint64_t i) {
    (void)ds;
    (void)i;
    return 0;
}

/* No per-document strings: every document is named by the prefix. */
static const char *tok_path(const sp_dataset *ds, uint64_t i) {
    (void)i;
    return ds->root;
}

/* No per-document hash is kept (the fingerprint covers the index). */
static sp_digest tok_hash(const sp_dataset *ds, uint64_t i) {
    (void)ds;
    (void)i;
    sp_digest z = {0, 0};
    return z;
}

static int tok_sample(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err) {
    (void)out;
    return sp_error_set(err, SP_EUNSUPP, "%s: document %" PRIu64 ": a token corpus is read "
                        "through the loader's seq_len packing, not sample by sample", ds->root,
                        i);
}

static int tok_fingerprint(const sp_dataset *ds, sp_digest *out, sp_error *err) {
    (void)err;
    const sp__tok *t = ds->state;
    sp__hash h;
    sp__hash_init(&h);
    sp__hash_bytes(&h, t->idx, t->idx_size);
    sp_digest idx = sp__hash_digest(&h);
    static const char tag[] = "seedpipe.tokens.v1";
    sp__hash_init(&h);
    sp__hash_bytes(&h, tag, sizeof tag - 1);
    sp__hash_u64(&h, (uint64_t)SP_DATASET_TOKENS);
    sp__hash_u64(&h, (uint64_t)t->code);
    sp__hash_u64(&h, t->D);
    sp__hash_u64(&h, t->total);
    sp__hash_u64(&h, (uint64_t)t->bin_size);
    sp__hash_u64(&h, idx.hi);
    sp__hash_u64(&h, idx.lo);
    *out = sp__hash_digest(&h);
    return SP_OK;
}

static int tok_is_remote(const sp_dataset *ds) {
    return ((const sp__tok *)ds->state)->rio != NULL;
}

static const sp__ds_ops tok_ops = {
    .label = tok_label,
    .path = tok_path,
    .content_hash = tok_hash,
    .read = tok_sample,
    .destroy = tok_destroy,
    .fingerprint = tok_fingerprint,
    .is_remote = tok_is_remote,
};

/* ---- open ---------------------------------------------------------------------------- */

/* *prefix (malloc'd) is the corpus's PREFIX when the local path names one:
 * PREFIX.idx or PREFIX.bin with the other beside it, or an absent PREFIX
 * with both; else NULL. @return 0 / SP_ENOMEM. */
static int tokens_prefix(const char *path, char **prefix) {
    *prefix = NULL;
    size_t l = strlen(path);
    struct stat st;
    char *p = NULL;
    if (l > 4 && (strcmp(path + l - 4, ".idx") == 0 || strcmp(path + l - 4, ".bin") == 0)) {
        char *other = sp__ds_strdup(path);
        if (!other) return SP_ENOMEM;
        memcpy(other + l - 3, path[l - 3] == 'i' ? "bin" : "idx", 3);
        int both = stat(path, &st) == 0 && stat(other, &st) == 0;
        free(other);
        if (!both) return SP_OK;
        p = strndup(path, l - 4);
    } else {
        if (stat(path, &st) == 0) return SP_OK;
        char *a = malloc(l + 5), *b = malloc(l + 5);
        int both = 0;
        if (a && b) {
            snprintf(a, l + 5, "%s.idx", path);
            snprintf(b, l + 5, "%s.bin", path);
            both = stat(a, &st) == 0 && stat(b, &st) == 0;
        }
        free(a);
        free(b);
        if (!a || !b) return SP_ENOMEM;
        if (!both) return SP_OK;
        p = sp__ds_strdup(path);
    }
    if (!p) return SP_ENOMEM;
    *prefix = p;
    return SP_OK;
}

/* A local corpus: PREFIX.idx and PREFIX.bin mapped. */
static int open_local(sp_dataset *ds, sp__tok *t, const char *prefix, sp_error *err) {
    size_t l = strlen(prefix);
    char *root = sp__ds_strdup(prefix);
    t->idx_path = malloc(l + 5);
    t->bin_path = malloc(l + 5);
    if (!root || !t->idx_path || !t->bin_path) {
        free(root);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", prefix);
    }
    free(ds->root);
    ds->root = root;   /* messages name the prefix */
    snprintf(t->idx_path, l + 5, "%s.idx", prefix);
    snprintf(t->bin_path, l + 5, "%s.bin", prefix);
    int rc = map_file(t->idx_path, &t->idx, &t->idx_size, err);
    if (rc == SP_OK) rc = map_file(t->bin_path, &t->bin, &t->bin_size, err);
    return rc;
}

/* The .bin's size: a one-byte ranged GET's Content-Range total (an empty
 * object answers 416 to any range). */
static int remote_bin_size(sp__tok *t, sp_error *err) {
    sp__rio_get g;
    memset(&g, 0, sizeof g);
    g.name = t->bin_name;
    g.len = 1;
    int rc = sp__rio_fetch(t->rio, &g, err);
    free(g.buf);
    if (rc != SP_OK && g.status == 416) return SP_OK;   /* bin_size 0 */
    if (rc != SP_OK) return rc;
    if (!g.total)
        return sp_error_set(err, SP_EIO, "%s: the server gave no object size (Content-Range)",
                            t->bin_path);
    t->bin_size = (size_t)g.total;
    return SP_OK;
}

/* A remote corpus (ds->root a URL ending in .idx or .bin, or the prefix
 * URL): the .idx fetched whole (at most the larger of
 * SEEDPIPE_REMOTE_INDEX_MAX and SP__TOK_REMOTE_IDX_MAX), the .bin's size
 * asked for. */
#define SP__TOK_REMOTE_IDX_MAX (UINT64_C(4) << 30)
static int open_remote(sp_dataset *ds, sp__tok *t, sp_error *err) {
    char *leaf = NULL;
    int rc = sp__rio_create(ds->root, &t->rio, &leaf, err);
    if (rc != SP_OK) return rc;
    size_t l = strlen(leaf), lr = strlen(ds->root);
    int ext = l > 4 && (strcmp(leaf + l - 4, ".idx") == 0 || strcmp(leaf + l - 4, ".bin") == 0);
    size_t stem = ext ? l - 4 : l;
    t->idx_name = malloc(stem + 5);
    t->bin_name = malloc(stem + 5);
    if (t->idx_name && t->bin_name) {
        snprintf(t->idx_name, stem + 5, "%.*s.idx", (int)stem, leaf);
        snprintf(t->bin_name, stem + 5, "%.*s.bin", (int)stem, leaf);
    }
    free(leaf);
    if (!t->idx_name || !t->bin_name)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    t->idx_path = sp__rio_display(t->rio, t->idx_name);
    t->bin_path = sp__rio_display(t->rio, t->bin_name);
    if (!t->idx_path || !t->bin_path)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    if (ext) ds->root[lr - 4] = '\0';   /* the prefix URL */
    sp__rio_get g;
    memset(&g, 0, sizeof g);
    g.name = t->idx_name;
    g.max = t->rio->index_max > SP__TOK_REMOTE_IDX_MAX ? t->rio->index_max
                                                       : SP__TOK_REMOTE_IDX_MAX;
    rc = sp__rio_fetch(t->rio, &g, err);
    t->idx = g.buf;
    t->idx_size = g.got;
    if (rc != SP_OK && !ext && g.status == 404 && err) {   /* was it meant as a token corpus? */
        size_t m = strlen(err->msg);
        snprintf(err->msg + m, sizeof err->msg - m, " (a remote dataset URL is a .tar shard, a "
                 "brace pattern of shards, a folder ending in '/', or a token corpus's PREFIX, "
                 ".idx or .bin)");
    }
    if (rc == SP_OK) rc = remote_bin_size(t, err);
    return rc;
}

/* Maps PREFIX.idx and PREFIX.bin (prefix NULL: ds->root is a URL ending in
 * .idx or .bin, or the prefix URL, fetched), checks them and sets
 * ds->root to the prefix. */
static int open_tokens(sp_dataset *ds, const char *prefix, sp_error *err) {
    ds->ops = &tok_ops;
    sp__tok *t = calloc(1, sizeof *t);
    ds->state = t;
    if (!t) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    int rc = prefix ? open_local(ds, t, prefix, err) : open_remote(ds, t, err);
    if (rc == SP_OK) rc = check_header(t, err);
    if (rc == SP_OK) rc = check_sequences(t, err);
    if (rc == SP_OK) rc = check_documents(t, err);
    if (rc != SP_OK) return rc;
    /* one class, "tokens", so that generic code finds the table it expects */
    ds->class_names = calloc(1, sizeof *ds->class_names);
    ds->class_counts = calloc(1, sizeof *ds->class_counts);
    if (!ds->class_names || !ds->class_counts ||
        !(ds->class_names[0] = sp__ds_strdup("tokens")))
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    ds->num_classes = 1;
    ds->class_counts[0] = t->D;
    ds->n = t->D;
    return SP_OK;
}

/* ---- the drivers: a local corpus, a remote one ------------------------------------- */

static int local_probe(const sp__ds_req *rq, sp_error *err) {
    char *prefix = NULL;
    if (rq->url) return 0;
    if (tokens_prefix(rq->root, &prefix) != SP_OK)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", rq->path);
    int mine = prefix != NULL;
    free(prefix);
    return mine;
}

static int local_open(sp_dataset *ds, const sp__ds_req *rq, sp_error *err) {
    char *prefix = NULL;
    if (tokens_prefix(rq->root, &prefix) != SP_OK || !prefix)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", rq->path);
    int rc = open_tokens(ds, prefix, err);
    free(prefix);
    return rc;
}

/* A URL names a token corpus when it ends in .idx or .bin, or its last
 * path component is neither empty (a folder), a .tar shard nor a brace
 * pattern of shards (then it is the corpus's prefix). */
static int url_probe(const sp__ds_req *rq, sp_error *err) {
    (void)err;
    const char *url = rq->path;
    size_t l = strlen(url);
    if (!rq->url) return 0;
    if (l > 4 && (strcmp(url + l - 4, ".idx") == 0 || strcmp(url + l - 4, ".bin") == 0))
        return 1;
    const char *host = strstr(url, "://");
    const char *path = host ? strchr(host + 3, '/') : NULL;
    if (!path) return 0;   /* a bucket or a server alone */
    const char *leaf = strrchr(path, '/') + 1;
    size_t ll = strlen(leaf);
    return ll && !(ll > 4 && strcmp(leaf + ll - 4, ".tar") == 0) && !strchr(leaf, '{');
}

static int url_open(sp_dataset *ds, const sp__ds_req *rq, sp_error *err) {
    (void)rq;
    return open_tokens(ds, NULL, err);
}

const sp__ds_driver sp__ds_driver_tokens = {
    .name = "tokens", .code = SP_DATASET_TOKENS, .probe = local_probe, .open = local_open,
    .ops = &tok_ops,
};

const sp__ds_driver sp__ds_driver_tokens_url = {
    .name = "tokens", .code = SP_DATASET_TOKENS, .probe = url_probe, .open = url_open,
    .ops = &tok_ops,
};
