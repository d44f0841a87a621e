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
 * http(s)://; dataset_open.c decides which URLs are token corpora; remote.c): the
 * .idx is fetched whole into memory (bounded by the larger of
 * SEEDPIPE_REMOTE_INDEX_MAX and 4 GiB, about 200 million documents), the
 * .bin's size is the total of a one-byte ranged GET's Content-Range, and
 * the same checks and fingerprint follow (a remote corpus fingerprints as
 * its local copy). Reads are byte ranges of the .bin, one GET per run of
 * adjacent spans, all in flight at once (sp__rio_fetch_many()), each
 * checked against the .bin's size at open (a replaced object is
 * SP_EMISMATCH). A mixture of token corpora (a blend) counts its sources'
 * windows, which the loader gives it (sp__ds_mix_resize(), dataset_mix.c).
 * Called by dataset_open.c; calls remote.c and common/.
 */
#include "dataset/dataset_tokens.h"
#include "dataset/dataset_internal.h"
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
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define TOK_HEADER 34   /* 9 magic + 8 version + 1 dtype + 8 S + 8 N */
static const uint8_t tok_magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

struct sp__tok {
    char *idx_path, *bin_path;      /* PREFIX.idx, PREFIX.bin: messages */
    const uint8_t *idx;             /* the mapped .idx */
    size_t idx_size;
    const uint8_t *bin;             /* the mapped .bin (NULL when empty) */
    size_t bin_size;
    int code, itemsize, is_signed;  /* dtype code, bytes a token, signedness */
    uint64_t S, D, total;
    const uint8_t *lengths, *pointers, *docs;   /* into idx: i32[S], i64[S], i64[D+1] */
    int one_seq;                    /* every document is one sequence (document d = sequence d):
                                     * its length is lengths[d], one read */
    int shift;                      /* log2 of itemsize */
    /* remote: the store, the objects' names in it; idx is then malloc'd, bin NULL */
    sp__rio *rio;
    char *idx_name, *bin_name;
};

/* dtype code -> numpy name, item size, signedness (0: float or unknown) */
static const struct {
    const char *name;
    int size, is_signed;
} tok_types[9] = {
    {NULL, 0, 0},      {"uint8", 1, 0}, {"int8", 1, 1},    {"int16", 2, 1}, {"int32", 4, 1},
    {"int64", 8, 1},   {"float64", 8, 0}, {"float32", 4, 0}, {"uint16", 2, 0},
};

/* ---- lookups ------------------------------------------------------------------- */

static uint64_t seq_ptr(const sp__tok *t, uint64_t s) {
    return sp__le_get64(t->pointers + 8 * s);
}

/* The first token of document d (d <= D): the tiling makes it a pointer. */
static uint64_t doc_start(const sp__tok *t, uint64_t d) {
    uint64_t s = t->one_seq ? d : sp__le_get64(t->docs + 8 * d);
    return s < t->S ? seq_ptr(t, s) >> t->shift : t->total;
}

const sp__tok *sp__tok_of(const sp_dataset *ds) {
    return ds && ds->kind == SP_DATASET_TOKENS ? ds->tok : NULL;
}
uint64_t sp__tok_docs(const sp__tok *t) { return t->D; }
uint64_t sp__tok_total(const sp__tok *t) { return t->total; }
const char *sp__tok_dtype_name(const sp__tok *t) { return tok_types[t->code].name; }

uint64_t sp__tok_len(const sp__tok *t, uint64_t d) {
    if (d >= t->D) return 0;
    if (t->one_seq) return (uint32_t)sp__le_get32(t->lengths + 4 * d);   /* checked >= 0 */
    return doc_start(t, d + 1) - doc_start(t, d);
}

void sp__tok_prefetch_len(const sp__tok *t, uint64_t d) {
    if (d < t->D) __builtin_prefetch(t->one_seq ? t->lengths + 4 * d : t->docs + 8 * d);
}

/* ---- reading ---------------------------------------------------------------------- */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Plain loops the compiler vectorizes, for a little-endian host (the
 * generic loop below is what they compute, token by token). Unaligned,
 * aliasing-safe element types: a span may start anywhere in a window. */
typedef uint16_t u16u __attribute__((aligned(1), may_alias));
typedef int16_t i16u __attribute__((aligned(1), may_alias));
typedef int32_t i32u __attribute__((aligned(1), may_alias));
typedef int64_t i64u __attribute__((aligned(1), may_alias));
#define WIDEN(ST, DT)                                                  \
    do {                                                               \
        const ST *s_ = (const ST *)(const void *)src;                  \
        DT *d_ = (DT *)(void *)dst;                                    \
        for (uint64_t k = 0; k < n; k++) d_[k] = s_[k];                \
    } while (0)

/* uint16 tokens (most corpora: a vocabulary below 65536) to int32, eight at
 * a time where SSE2 is (every x86-64): -O2 leaves the plain loop scalar. */
static void widen_u16_i32(const uint8_t *src, uint8_t *dst, uint64_t n) {
    uint64_t k = 0;
#ifdef __SSE2__
    const __m128i z = _mm_setzero_si128();
    for (; k + 8 <= n; k += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * k));
        _mm_storeu_si128((__m128i *)(void *)(dst + 4 * k), _mm_unpacklo_epi16(v, z));
        _mm_storeu_si128((__m128i *)(void *)(dst + 4 * k + 16), _mm_unpackhi_epi16(v, z));
    }
#endif
    const u16u *s = (const u16u *)(const void *)src;
    i32u *d = (i32u *)(void *)dst;
    for (; k < n; k++) d[k] = s[k];
}

/* 1 and the tokens converted when a plain loop does it (no range check). */
static int convert_fast(const sp__tok *t, const uint8_t *src, uint64_t n, uint8_t *dst,
                        int out_bytes) {
    int w8 = out_bytes == 8;
    if (t->code == 8 && !w8) {
        widen_u16_i32(src, dst, n);
        return 1;
    }
    switch (t->code) {
    case 1: if (w8) WIDEN(uint8_t, i64u); else WIDEN(uint8_t, i32u); return 1;
    case 2: if (w8) WIDEN(int8_t, i64u); else WIDEN(int8_t, i32u); return 1;
    case 3: if (w8) WIDEN(i16u, i64u); else WIDEN(i16u, i32u); return 1;
    case 8: if (w8) WIDEN(u16u, i64u); else WIDEN(u16u, i32u); return 1;
    case 4: if (w8) WIDEN(i32u, i64u); else memcpy(dst, src, 4 * n); return 1;
    case 5: if (w8) { memcpy(dst, src, 8 * n); return 1; } return 0;   /* int32 out: checked */
    default: return 0;
    }
}
#undef WIDEN
#else
static int convert_fast(const sp__tok *t, const uint8_t *src, uint64_t n, uint8_t *dst,
                        int out_bytes) {
    (void)t, (void)src, (void)n, (void)dst, (void)out_bytes;
    return 0;
}
#endif

/* n tokens from src (the corpus's type) to dst as out_bytes integers. */
static int convert(const sp__tok *t, const uint8_t *src, uint64_t n, uint8_t *dst, int out_bytes,
                   uint64_t doc, uint64_t off, sp_error *err) {
    if (convert_fast(t, src, n, dst, out_bytes)) return SP_OK;
    for (uint64_t k = 0; k < n; k++) {
        const uint8_t *p = src + k * (uint64_t)t->itemsize;
        int64_t v;
        switch (t->code) {
        case 1: v = p[0]; break;
        case 2: v = (int8_t)p[0]; break;
        case 3: v = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
        case 8: v = (uint16_t)(p[0] | p[1] << 8); break;
        case 4: v = (int32_t)sp__le_get32(p); break;
        default: v = (int64_t)sp__le_get64(p); break;
        }
        if (out_bytes == 8) {
            sp__le_put64(dst + 8 * k, (uint64_t)v);
        } else if (v < INT32_MIN || v > INT32_MAX) {
            return sp_error_set(err, SP_EFORMAT, "%s: document %" PRIu64 " token %" PRIu64
                                " is %" PRId64 ", outside int32's range (read as int64)",
                                t->bin_path, doc, off + k, v);
        } else {
            sp__le_put32(dst + 4 * k, (uint32_t)(int32_t)v);
        }
    }
    return SP_OK;
}

/* A remote corpus's spans: one ranged GET per run of spans that are
 * adjacent in the .bin (span i + 1 starting where span i ends), all at once
 * (sp__rio_fetch_many()), each checked against the .bin's size at open. */
static int read_remote(const sp__tok *t, const sp__tok_span *spans, size_t n, int out_bytes,
                       sp_error *err) {
    uint64_t is = (uint64_t)t->itemsize;
    sp__rio_get *g = calloc(n, sizeof *g);
    size_t *grp = malloc(n * sizeof *grp), ng = 0;
    if (!g || !grp) {
        free(g);
        free(grp);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", t->bin_path);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t off = (doc_start(t, spans[i].doc) + spans[i].off) * is, len = spans[i].n * is;
        grp[i] = ng;
        if (!len) continue;
        if (ng && g[ng - 1].off + g[ng - 1].len == off) {
            grp[i] = ng - 1;
            g[ng - 1].len += len;
            continue;
        }
        g[ng].name = t->bin_name;
        g[ng].off = off;
        g[ng].len = len;
        g[ng].expect_total = t->bin_size;
        ng++;
    }
    int rc = SP_OK;
    if (ng && sp__rio_fetch_many(t->rio, g, ng) != 0)
        for (size_t k = 0; k < ng && rc == SP_OK; k++)
            if (g[k].rc != SP_OK) rc = sp_error_set(err, g[k].rc, "%s", g[k].msg);
    for (size_t i = 0; i < n && rc == SP_OK; i++) {
        if (!spans[i].n) continue;
        const sp__rio_get *q = &g[grp[i]];
        uint64_t off = (doc_start(t, spans[i].doc) + spans[i].off) * is - q->off;
        if (q->got != q->len)
            rc = sp_error_set(err, SP_EIO, "%s: %zu bytes came for a range of %" PRIu64,
                              t->bin_path, q->got, q->len);
        else
            rc = convert(t, q->buf + off, spans[i].n, spans[i].dst, out_bytes, spans[i].doc,
                         spans[i].off, err);
    }
    for (size_t k = 0; k < ng; k++) free(g[k].buf);
    free(g);
    free(grp);
    return rc;
}

int sp__tok_read(const sp__tok *t, const sp__tok_span *spans, size_t n, int out_bytes,
                 sp_error *err) {
    if (!t || (n && !spans) || (out_bytes != 4 && out_bytes != 8))
        return sp_error_set(err, SP_EINVAL, "sp__tok_read: bad argument (out_bytes %d)",
                            out_bytes);
    for (size_t i = 0; i < n; i++) {
        const sp__tok_span *sp = &spans[i];
        uint64_t len = sp__tok_len(t, sp->doc);
        if (sp->doc >= t->D || sp->off > len || sp->n > len - sp->off)
            return sp_error_set(err, SP_ERANGE, "%s: tokens [%" PRIu64 ", +%" PRIu64
                                ") of document %" PRIu64 " (of %" PRIu64 ", %" PRIu64
                                " tokens long): out of range", t->idx_path, sp->off, sp->n,
                                sp->doc, t->D, len);
    }
    if (t->rio) return n ? read_remote(t, spans, n, out_bytes, err) : SP_OK;
    for (size_t i = 0; i < n; i++) {
        const sp__tok_span *sp = &spans[i];
        if (!sp->n) continue;
        uint64_t first = doc_start(t, sp->doc) + sp->off;
        int rc = convert(t, t->bin + first * (uint64_t)t->itemsize, sp->n, sp->dst, out_bytes,
                         sp->doc, sp->off, err);
        if (rc != SP_OK) return rc;
    }
    return SP_OK;
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
        uint64_t p = seq_ptr(t, s);
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
    sp__tok *t = ds->tok;
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
    ds->tok = NULL;
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
    const sp__tok *t = ds->tok;
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

static int tok_is_remote(const sp_dataset *ds) { return ds->tok->rio != NULL; }

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

int sp__ds_tokens_prefix(const char *path, char **prefix) {
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

int sp__ds_open_tokens(sp_dataset *ds, const char *prefix, sp_error *err) {
    ds->ops = &tok_ops;
    sp__tok *t = ds->tok = calloc(1, sizeof *t);
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
