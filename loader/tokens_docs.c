/* tokens_docs.c - the docs packing of a token corpus (tokens_internal.h):
 * whole documents in windows of L tokens, attention never crossing one.
 *
 * HOW IT WORKS
 * Pieces: document d of n tokens is ceil(n / L) pieces, piece j its tokens
 * [j L, min(n, (j + 1) L)); an empty document has none. A piece's length
 * is its class: class L holds the full pieces, class l < L the last,
 * partial piece of each document with n mod L = l.
 *
 * The layout (built once, at create, from the lengths alone, so the window
 * count N is the corpus's, the same every epoch): the items are the
 * pieces' places, class by class from L down to 1, item g the r-th of its
 * class. Best-fit decreasing puts each item, in that order, into the open
 * window whose remaining room is the smallest that holds it (among equals
 * the one that came to that room last), or opens a new window. A window's
 * places are its items in increasing g. Rooms are found through a bitmap
 * of the room sizes some window has and a stack of windows per size, so
 * the build is O(P + P L / 64) for P pieces; the layout keeps each place's
 * class, window by window (2 bytes a piece, 4 past 65,535 classes), and 4
 * bytes a window.
 *
 * An epoch decides which piece fills each place: the members of class l
 * (class L: the full pieces in (document, piece) order, numbered by a
 * running ordinal; class l < L: the documents with n mod L = l, in
 * increasing id) are shuffled by sp__tokl_shuffle() with stream l, and
 * the r-th place of class l, counting window by window, holds the r-th
 * member of the shuffled class. The table is each place's member (4 bytes
 * a piece), built in O(D + P) through the shuffled classes (4 bytes a
 * piece more while it is built).
 *
 * A window's fields (tokens_internal.h): each place is a segment, in
 * order; its tokens are copied, its labels are the next tokens of the
 * document (the token after a piece's end read too when the document goes
 * on), -100 after the document's last token; the rest of the window is
 * padding.
 */
#include "loader/tokens_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sp__tokl_docs {
    uint64_t P, F;           /* pieces, full pieces (class L) */
    uint32_t ncls;           /* non-empty classes */
    uint64_t *cls_first;     /* ncls + 1: each class's first item (lengths descending) */
    uint32_t *cls_len;       /* ncls: its length */
    uint64_t nlong;          /* documents of at least L tokens */
    uint32_t *long_doc;      /* their ids, increasing */
    uint64_t *long_first;    /* nlong + 1: the ordinal of each one's first full piece */
    uint16_t *cls16;         /* P: each place's class, window by window (ncls <= 65535) */
    uint32_t *cls32;         /* ... or this, when there are more classes */
    uint32_t *win;           /* N + 1: each window's first place (P < 2^32) */
};

static uint32_t class_at(const struct sp__tokl_docs *d, uint64_t k) {
    return d->cls16 ? d->cls16[k] : d->cls32[k];
}

void sp__tokl_docs_destroy(struct sp__tokl_docs *d) {
    if (!d) return;
    free(d->cls_first);
    free(d->cls_len);
    free(d->long_doc);
    free(d->long_first);
    free(d->cls16);
    free(d->cls32);
    free(d->win);
    free(d);
}

/* Classes and long documents from the lengths. */
static int count_pieces(sp__tokl *t, struct sp__tokl_docs *d, uint64_t *cnt, sp_error *err) {
    uint64_t L = t->L;
    for (uint64_t i = 0; i < t->D; i++) {
        uint64_t n = sp__tok_len(t->tok, i);
        cnt[L] += n / L;
        if (n % L) cnt[n % L]++;
        if (n >= L) d->nlong++;
    }
    for (uint64_t l = 1; l <= L; l++) {
        d->P += cnt[l];
        d->ncls += cnt[l] != 0;
    }
    d->F = cnt[L];
    if (d->P == 0)
        return sp_error_set(err, SP_EINVAL, "%s: no tokens, no window", t->what);
    if (d->P >= UINT32_MAX)
        return sp_error_set(err, SP_ELIMIT, "%s: %" PRIu64 " pieces of seq_len %" PRIu64
                            ": at most 2^32 - 2", t->what, d->P, L);
    d->cls_first = malloc((d->ncls + 1) * sizeof *d->cls_first);
    d->cls_len = malloc((d->ncls ? d->ncls : 1) * sizeof *d->cls_len);
    d->long_doc = malloc((d->nlong ? d->nlong : 1) * sizeof *d->long_doc);
    d->long_first = malloc((d->nlong + 1) * sizeof *d->long_first);
    if (!d->cls_first || !d->cls_len || !d->long_doc || !d->long_first)
        return sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
    uint64_t g = 0, c = 0;
    for (uint64_t l = L; l >= 1; l--) {
        if (!cnt[l]) continue;
        d->cls_first[c] = g;
        d->cls_len[c++] = (uint32_t)l;
        g += cnt[l];
    }
    d->cls_first[c] = g;
    uint64_t k = 0, f = 0;
    for (uint64_t i = 0; i < t->D; i++) {
        uint64_t n = sp__tok_len(t->tok, i);
        if (n < L) continue;
        d->long_doc[k] = (uint32_t)i;
        d->long_first[k++] = f;
        f += n / L;
    }
    d->long_first[k] = f;
    return SP_OK;
}

/* The smallest room >= l (< L) some window has, or 0. */
static uint64_t find_room(const uint64_t *bits, uint64_t l, uint64_t L) {
    uint64_t wi = l >> 6, nw = (L + 63) >> 6;
    uint64_t word = bits[wi] & (~UINT64_C(0) << (l & 63));
    for (;;) {
        if (word) return (wi << 6) + (uint64_t)__builtin_ctzll(word);
        if (++wi >= nw) return 0;
        word = bits[wi];
    }
}

/* Best-fit decreasing over the items (see the top): win_of[g] for every
 * item, the window count in *nwin. Rooms 1..L-1 have a stack each
 * (head[room], next[window]); a full window is in none. */
static int best_fit(const sp__tokl *t, const struct sp__tokl_docs *d, uint32_t *win_of,
                    uint64_t *nwin, sp_error *err) {
    uint64_t L = t->L, nw = 0;
    uint32_t *head = malloc(L * sizeof *head);
    uint32_t *next = malloc(d->P * sizeof *next);
    uint32_t *room = malloc(d->P * sizeof *room);
    uint64_t *bits = calloc((L + 63) / 64 + 1, sizeof *bits);
    if (!head || !next || !room || !bits) {
        free(head), free(next), free(room), free(bits);
        return sp_error_set(err, SP_ENOMEM, "tokens: out of memory (docs layout)");
    }
    memset(head, 0xff, L * sizeof *head);
    for (uint32_t c = 0; c < d->ncls; c++) {
        uint64_t l = d->cls_len[c];
        for (uint64_t g = d->cls_first[c]; g < d->cls_first[c + 1]; g++) {
            uint64_t r = l < L ? find_room(bits, l, L) : 0;
            uint32_t w;
            if (r) {   /* pop the window that came to room r last */
                w = head[r];
                head[r] = next[w];
                if (head[r] == UINT32_MAX) bits[r >> 6] &= ~(UINT64_C(1) << (r & 63));
            } else {
                w = (uint32_t)nw++;
                room[w] = (uint32_t)L;
            }
            win_of[g] = w;
            room[w] -= (uint32_t)l;
            uint32_t nr = room[w];
            if (nr) {
                next[w] = head[nr];
                head[nr] = w;
                bits[nr >> 6] |= UINT64_C(1) << (nr & 63);
            }
        }
    }
    free(head), free(next), free(room), free(bits);
    *nwin = nw;
    return SP_OK;
}

int sp__tokl_docs_create(sp__tokl *t, sp_error *err) {
    struct sp__tokl_docs *d = calloc(1, sizeof *d);
    uint64_t *cnt = calloc(t->L + 1, sizeof *cnt);
    t->docs = d;
    if (!d || !cnt) {
        free(cnt);
        return sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
    }
    int rc = count_pieces(t, d, cnt, err);
    free(cnt);
    uint32_t *win_of = rc == SP_OK ? malloc(d->P * sizeof *win_of) : NULL;
    if (rc == SP_OK && !win_of) rc = sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
    uint64_t nw = 0;
    if (rc == SP_OK) rc = best_fit(t, d, win_of, &nw, err);
    if (rc == SP_OK) {
        if (d->ncls <= UINT16_MAX) d->cls16 = malloc(d->P * sizeof *d->cls16);
        else d->cls32 = malloc(d->P * sizeof *d->cls32);
        d->win = calloc(nw + 1, sizeof *d->win);
        if ((!d->cls16 && !d->cls32) || !d->win)
            rc = sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
    }
    if (rc == SP_OK) {
        for (uint64_t g = 0; g < d->P; g++) d->win[win_of[g] + 1]++;
        for (uint64_t w = 0; w < nw; w++) d->win[w + 1] += d->win[w];
        /* win[w] walks to its end while filling; it ends one window on */
        for (uint32_t c = 0; c < d->ncls; c++)
            for (uint64_t g = d->cls_first[c]; g < d->cls_first[c + 1]; g++) {
                uint64_t k = d->win[win_of[g]]++;
                if (d->cls16) d->cls16[k] = (uint16_t)c;
                else d->cls32[k] = c;
            }
        for (uint64_t w = nw; w > 0; w--) d->win[w] = d->win[w - 1];   /* back to starts */
        d->win[0] = 0;
        t->N = nw;
        t->used_tokens = t->T;
    }
    free(win_of);
    return rc;
}

/* The shuffled classes (class by class, as the items), then each place's
 * member: the r-th place of class c, window by window, holds its r-th. */
int sp__tokl_docs_epoch(const sp__tokl *t, uint32_t epoch, sp__tokl_epoch *e, sp_error *err) {
    const struct sp__tokl_docs *d = t->docs;
    uint64_t L = t->L;
    uint32_t *cls = malloc(d->P * sizeof *cls);
    uint64_t *pos = calloc(L + 1, sizeof *pos);
    if (!cls || !pos) {
        free(cls), free(pos);
        return sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
    }
    for (uint32_t c = 0; c < d->ncls; c++) pos[d->cls_len[c]] = d->cls_first[c];
    for (uint64_t f = 0; f < d->F; f++) cls[f] = (uint32_t)f;   /* class L comes first */
    for (uint64_t i = 0; i < t->D; i++) {
        uint64_t r = sp__tok_len(t->tok, i) % L;
        if (r) cls[pos[r]++] = (uint32_t)i;
    }
    for (uint32_t c = 0; c < d->ncls; c++)
        sp__tokl_shuffle(cls + d->cls_first[c], d->cls_first[c + 1] - d->cls_first[c], t->key,
                         epoch, d->cls_len[c]);
    e->order = malloc(d->P * sizeof *e->order);
    if (!e->order) {
        free(cls), free(pos);
        return sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
    }
    for (uint32_t c = 0; c < d->ncls; c++) pos[c] = d->cls_first[c];   /* the next of class c */
    for (uint64_t k = 0; k < d->P; k++) e->order[k] = cls[pos[class_at(d, k)]++];
    free(cls), free(pos);
    return SP_OK;
}

/* The piece in place k: document, first token, length, and the
 * document's length (one lookup, for the caller too). */
static void piece_of(const sp__tokl *t, const sp__tokl_epoch *e, uint64_t k, uint64_t *doc,
                     uint64_t *off, uint64_t *len, uint64_t *doc_len) {
    const struct sp__tokl_docs *d = t->docs;
    uint64_t l = d->cls_len[class_at(d, k)], m = e->order[k];
    *len = l;
    if (l < t->L) {   /* a document's last, partial piece */
        *doc = m;
        *doc_len = sp__tok_len(t->tok, m);
        *off = *doc_len / t->L * t->L;
        return;
    }
    uint64_t a = 0, b = d->nlong;    /* long_first[a] <= m < long_first[b] */
    while (b - a > 1) {
        uint64_t mid = a + (b - a) / 2;
        if (d->long_first[mid] <= m) a = mid;
        else b = mid;
    }
    *doc = d->long_doc[a];
    *off = (m - d->long_first[a]) * t->L;
    *doc_len = sp__tok_len(t->tok, *doc);
}

static void put(void *dst, uint64_t i, int ob, int64_t v) {
    if (ob == 8) ((int64_t *)dst)[i] = v;
    else ((int32_t *)dst)[i] = (int32_t)v;
}

#define SPANS 64

/* A docs window's fields once its tokens, each segment's last label and
 * cu_seqlens[0..nseg] are in: the other labels (each segment's tokens
 * shifted by one), segment and position ids, the padding, the repeated
 * boundary and the count. One version per integer width, plain loops. */
#define FIELDS(T, NAME)                                                                  \
    static void NAME(void *base, uint64_t L, uint64_t nseg, uint64_t at, int64_t pad) {  \
        T *tok = base, *lab = tok + L, *seg = lab + L, *ps = seg + L, *cu = ps + L;      \
        for (uint64_t k = 1; k <= nseg; k++) {                                           \
            uint64_t a = (uint64_t)cu[k - 1], b = (uint64_t)cu[k];                       \
            memcpy(lab + a, tok + a + 1, (b - a - 1) * sizeof(T));                       \
            for (uint64_t i = a; i < b; i++) {                                           \
                seg[i] = (T)k;                                                           \
                ps[i] = (T)(i - a);                                                      \
            }                                                                            \
        }                                                                                \
        for (uint64_t i = at; i < L; i++) {                                              \
            tok[i] = (T)pad;                                                             \
            lab[i] = SP__TOK_IGNORE;                                                     \
            seg[i] = ps[i] = 0;                                                          \
        }                                                                                \
        for (uint64_t k = nseg + 1; k <= L; k++) cu[k] = (T)at;                          \
        cu[L + 1] = (T)nseg;                                                             \
    }
FIELDS(int32_t, fields32)
FIELDS(int64_t, fields64)
#undef FIELDS

int sp__tokl_docs_window(const sp__tokl *t, const sp__tokl_epoch *e, uint64_t w, void *dst,
                         int ob, sp_error *err) {
    const struct sp__tokl_docs *d = t->docs;
    uint64_t L = t->L, at = 0, nseg = 0;
    uint8_t *base = dst;
    uint8_t *tok = base, *lab = base + L * (uint64_t)ob, *cu = base + 4 * L * (uint64_t)ob;
    sp__tok_span sp[SPANS];
    size_t ns = 0;
    int rc = SP_OK;
    put(cu, 0, ob, 0);
    for (uint64_t s = d->win[w]; s < d->win[w + 1] && rc == SP_OK; s++) {
        uint64_t doc, off, len, n_d;
        piece_of(t, e, s, &doc, &off, &len, &n_d);
        put(cu, ++nseg, ob, (int64_t)(at + len));
        sp[ns++] = (sp__tok_span){doc, off, len, tok + at * (uint64_t)ob};
        if (off + len < n_d)   /* the document goes on: its next token */
            sp[ns++] = (sp__tok_span){doc, off + len, 1, lab + (at + len - 1) * (uint64_t)ob};
        else
            put(lab, at + len - 1, ob, SP__TOK_IGNORE);
        at += len;
        if (ns >= SPANS - 1) {
            rc = sp__tok_read(t->tok, sp, ns, ob, err);
            ns = 0;
        }
    }
    if (rc == SP_OK && ns) rc = sp__tok_read(t->tok, sp, ns, ob, err);
    if (rc != SP_OK) return rc;
    if (ob == 8) fields64(base, L, nseg, at, t->pad);
    else fields32(base, L, nseg, at, t->pad);
    return SP_OK;
}

int sp__tokl_docs_explain(const sp__tokl *t, const sp__tokl_epoch *e, uint64_t w, char *buf,
                          size_t n) {
    const struct sp__tokl_docs *d = t->docs;
    size_t len = 0;
    uint64_t at = 0;
#define OUT(...) do { int m_ = snprintf(buf + len, len < n ? n - len : 0, __VA_ARGS__); \
                      if (m_ > 0) len += (size_t)m_; } while (0)
    OUT("window %" PRIu64 " (docs, %" PRIu64 " segments):\n", w,
        (uint64_t)(d->win[w + 1] - d->win[w]));
    for (uint64_t s = d->win[w]; s < d->win[w + 1]; s++) {
        uint64_t doc, off, plen, n_d;
        piece_of(t, e, s, &doc, &off, &plen, &n_d);
        OUT("  at %" PRIu64 ": segment %" PRIu64 ": document %" PRIu64 " tokens [%" PRIu64 ", %"
            PRIu64 ") of %" PRIu64 "\n", at, s - d->win[w] + 1, doc, off, off + plen, n_d);
        at += plen;
    }
    if (at < t->L) OUT("  at %" PRIu64 ": %" PRIu64 " pad tokens (%" PRId64 ")\n", at,
                       t->L - at, t->pad);
#undef OUT
    return SP_OK;
}
