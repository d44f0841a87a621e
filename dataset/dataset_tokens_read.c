/* dataset_tokens_read.c - a token corpus's reads (sp__tok_read(),
 * dataset_tokens.h): spans of documents copied from the mapped .bin or
 * fetched as byte ranges of a remote one, converted to the loader's int32
 * or int64 (sign- or zero-extended; an int64 token outside int32's range
 * for a 4-byte output is SP_EFORMAT naming the file, document and value).
 * The corpus's state and its checks at open are dataset_tokens.c's.
 */
#include "dataset/dataset_tokens_kind.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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
        uint64_t off = (sp__tok_doc_start(t, spans[i].doc) + spans[i].off) * is, len = spans[i].n * is;
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
        uint64_t off = (sp__tok_doc_start(t, spans[i].doc) + spans[i].off) * is - q->off;
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
        uint64_t first = sp__tok_doc_start(t, sp->doc) + sp->off;
        int rc = convert(t, t->bin + first * (uint64_t)t->itemsize, sp->n, sp->dst, out_bytes,
                         sp->doc, sp->off, err);
        if (rc != SP_OK) return rc;
    }
    return SP_OK;
}
