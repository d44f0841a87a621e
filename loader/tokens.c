/* tokens.c - a token corpus cut into samples (loader/tokens_internal.h):
 * the token spec, the epochs' document orders, and the concat packing; the
 * docs packing is tokens_docs.c, the shuffle both use tokens_shuffle.c.
 *
 * HOW IT WORKS
 * The spec is parsed into (L, packing, eod, pad) and printed back in one
 * canonical form (every key, in one order), which the loader hashes into
 * its fingerprint as it hashes a pipeline's.
 *
 * An epoch's document order is a keyed Fisher-Yates shuffle of [0, D)
 * (tokens_shuffle.c: one Philox call a step, D - 1 steps), built the
 * first time a window of that epoch is asked for in this process and
 * kept while it is the newest few (SP__TOKL_EPOCHS; the pool's ring may
 * hold the end of one epoch and the start of the next). Building it costs
 * O(D) time and 4 bytes a document, plus 8 bytes per SP__TOKL_STRIDE
 * documents for concat's offsets; nothing is written anywhere, and any
 * window of the epoch is then found in O(log D + stride).
 *
 * concat: the stream is the documents in the epoch's order, each followed
 * by eod (when set); its length S = T + D (or T) is the same every epoch,
 * so there are N = ceil((S - 1) / L) windows, window w the stream's tokens
 * [w L, w L + L + 1), the positions past S filled with pad. A window is
 * found by a binary search of the sparse offsets c[] for the last stride
 * start at or before w L, a walk of at most `stride` documents, and then
 * copied span by span (sp__tok_read(): one run per document piece).
 */
#include "loader/tokens_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the spec --------------------------------------------------------------------- */

/* A decimal integer in [lo, hi] (an optional '-' when lo < 0), the whole
 * of s. */
static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!*s || (s[0] == '-' && lo >= 0)) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi || (s[0] == '0' && s[1])) return -1;
    *out = v;
    return 0;
}

static int parse_kv(sp__tokl *t, const char *key, const char *val, int *seen, sp_error *err) {
    int64_t v;
    if (strcmp(key, "seq_len") == 0) {
        if (parse_int(val, 1, (int64_t)SP__TOK_MAX_SEQ_LEN, &v) != 0)
            return sp_error_set(err, SP_ESPEC, "tokens: seq_len \"%s\": a whole number in "
                                "1..%" PRIu64, val, SP__TOK_MAX_SEQ_LEN);
        t->L = (uint64_t)v;
        *seen |= 1;
    } else if (strcmp(key, "packing") == 0) {
        if (strcmp(val, "concat") == 0) t->packing = SP__TOK_CONCAT;
        else if (strcmp(val, "docs") == 0) t->packing = SP__TOK_DOCS;
        else
            return sp_error_set(err, SP_ESPEC, "tokens: packing \"%s\": concat or docs", val);
    } else if (strcmp(key, "eod") == 0 || strcmp(key, "pad") == 0) {
        int is_eod = key[0] == 'e';
        if (is_eod && strcmp(val, "none") == 0) {
            t->eod = -1;
        } else if (parse_int(val, 0, INT32_MAX, &v) != 0) {
            return sp_error_set(err, SP_ESPEC, "tokens: %s \"%s\": a token id in 0..%d%s", key,
                                val, INT32_MAX, is_eod ? " or none" : "");
        } else if (is_eod) {
            t->eod = v;
        } else {
            t->pad = v;
        }
    } else {
        return sp_error_set(err, SP_ESPEC, "tokens: unknown key \"%s\" (keys: seq_len, "
                            "packing, eod, pad)", key);
    }
    return SP_OK;
}

/* "tokens seq_len=L packing=P eod=E pad=Q", keys in any order, seq_len
 * required, words separated by blanks. */
static int parse_spec(sp__tokl *t, const char *spec, sp_error *err) {
    char buf[512];
    if (strlen(spec) >= sizeof buf)
        return sp_error_set(err, SP_ESPEC, "tokens: spec longer than %zu bytes", sizeof buf - 1);
    memcpy(buf, spec, strlen(spec) + 1);
    char *save = NULL;
    char *word = strtok_r(buf, " \t\r\n", &save);
    if (!word || strcmp(word, "tokens") != 0)
        return sp_error_set(err, SP_ESPEC, "%s is a token corpus: its spec is \"tokens "
                            "seq_len=L [packing=concat|docs] [eod=ID|none] [pad=ID]\", not "
                            "\"%s\" (docs/tokens.md)", t->what, spec);
    t->packing = SP__TOK_CONCAT;
    t->eod = -1;
    t->pad = 0;
    int seen = 0;
    while ((word = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
        char *eq = strchr(word, '=');
        if (!eq || eq == word || !eq[1])
            return sp_error_set(err, SP_ESPEC, "tokens: \"%s\" is not key=value", word);
        *eq = '\0';
        int rc = parse_kv(t, word, eq + 1, &seen, err);
        if (rc != SP_OK) return rc;
    }
    if (!(seen & 1)) return sp_error_set(err, SP_ESPEC, "tokens: seq_len=L is required");
    if (t->packing == SP__TOK_DOCS && t->eod >= 0)
        return sp_error_set(err, SP_ESPEC, "tokens: eod=%lld is concat's (it marks where one "
                            "document ends in the stream); docs windows mark documents with "
                            "segment_ids", (long long)t->eod);
    char eod[24] = "none";
    if (t->eod >= 0) snprintf(eod, sizeof eod, "%" PRId64, t->eod);
    snprintf(t->canon, sizeof t->canon, "tokens seq_len=%" PRIu64 " packing=%s eod=%s pad=%"
             PRId64, t->L, t->packing == SP__TOK_DOCS ? "docs" : "concat", eod, t->pad);
    return SP_OK;
}

/* ---- concat ---------------------------------------------------------------------------- */

static uint64_t eod_len(const sp__tokl *t) { return t->eod >= 0 ? 1 : 0; }

static int concat_epoch(const sp__tokl *t, uint32_t epoch, sp__tokl_epoch *e, sp_error *err) {
    uint64_t D = t->D, nb = (D + SP__TOKL_STRIDE - 1) / SP__TOKL_STRIDE;
    e->order = malloc((D ? D : 1) * sizeof *e->order);
    e->c = malloc((nb + 1) * sizeof *e->c);
    if (!e->order || !e->c) return sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
    for (uint64_t k = 0; k < D; k++) e->order[k] = (uint32_t)k;
    sp__tokl_shuffle(e->order, D, t->key, epoch, 0);
    uint64_t off = 0, el = eod_len(t);
    for (uint64_t k = 0; k < D; k++) {   /* the lengths in a random order: ask ahead */
        if (k + 16 < D) sp__tok_prefetch_len(t->tok, e->order[k + 16]);
        if (k % SP__TOKL_STRIDE == 0) e->c[k / SP__TOKL_STRIDE] = off;
        off += sp__tok_len(t->tok, e->order[k]) + el;
    }
    e->c[nb] = off;
    return SP_OK;
}

/* Integers of out_bytes each: v at dst[i]. */
static void put_int(void *dst, uint64_t i, int out_bytes, int64_t v) {
    if (out_bytes == 8) ((int64_t *)dst)[i] = v;
    else ((int32_t *)dst)[i] = (int32_t)v;
}

#define SPANS 64

/* The spans gathered so far, read and forgotten. */
static int flush(const sp__tokl *t, sp__tok_span *sp, size_t *n, int ob, sp_error *err) {
    int rc = *n ? sp__tok_read(t->tok, sp, *n, ob, err) : SP_OK;
    *n = 0;
    return rc;
}

/* Where stream offset o lies: the position k in the epoch's order of its
 * document and o's offset in that document's tokens (+ eod). */
static void concat_locate(const sp__tokl *t, const sp__tokl_epoch *e, uint64_t o, uint64_t *k,
                          uint64_t *cur) {
    uint64_t lo = 0, hi = (t->D + SP__TOKL_STRIDE - 1) / SP__TOKL_STRIDE;   /* c[lo] <= o */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (e->c[mid] <= o) lo = mid;
        else hi = mid;
    }
    uint64_t pos = e->c[lo], kk = lo * SP__TOKL_STRIDE, el = eod_len(t);
    for (;;) {
        uint64_t len = sp__tok_len(t->tok, e->order[kk]) + el;
        if (pos + len > o) break;
        pos += len;
        kk++;
    }
    *k = kk;
    *cur = o - pos;
}

static int concat_window(const sp__tokl *t, const sp__tokl_epoch *e, uint64_t w, void *dst,
                         int ob, sp_error *err) {
    uint64_t want = t->L + 1, got = 0, k, cur;
    concat_locate(t, e, w * t->L, &k, &cur);
    sp__tok_span sp[SPANS];
    size_t ns = 0;
    int rc = SP_OK;
    while (got < want && k < t->D && rc == SP_OK) {
        uint32_t d = e->order[k];
        uint64_t nd = sp__tok_len(t->tok, d);
        if (cur < nd) {
            uint64_t m = nd - cur < want - got ? nd - cur : want - got;
            sp[ns++] = (sp__tok_span){d, cur, m, (uint8_t *)dst + got * (uint64_t)ob};
            got += m;
            cur += m;
            if (ns == SPANS) rc = flush(t, sp, &ns, ob, err);
        }
        if (got < want && cur == nd && t->eod >= 0) {
            put_int(dst, got++, ob, t->eod);
            cur++;
        }
        if (cur >= nd + eod_len(t)) {
            k++;
            cur = 0;
        }
    }
    if (rc == SP_OK) rc = flush(t, sp, &ns, ob, err);
    for (; got < want; got++) put_int(dst, got, ob, t->pad);
    return rc;
}

static int concat_explain(const sp__tokl *t, const sp__tokl_epoch *e, uint64_t w, char *buf,
                          size_t n) {
    uint64_t want = t->L + 1, got = 0, k, cur;
    concat_locate(t, e, w * t->L, &k, &cur);
    size_t len = 0;
#define OUT(...) do { int m_ = snprintf(buf + len, len < n ? n - len : 0, __VA_ARGS__); \
                      if (m_ > 0) len += (size_t)m_; } while (0)
    OUT("window %" PRIu64 " (concat, stream tokens %" PRIu64 "..%" PRIu64 "):\n", w, w * t->L,
        w * t->L + t->L);
    while (got < want && k < t->D) {
        uint32_t d = e->order[k];
        uint64_t nd = sp__tok_len(t->tok, d), el = eod_len(t);
        uint64_t m = nd + el - cur < want - got ? nd + el - cur : want - got;
        uint64_t tok_end = cur + m > nd ? nd : cur + m;
        OUT("  at %" PRIu64 ": document %u tokens [%" PRIu64 ", %" PRIu64 ") of %" PRIu64 "%s\n",
            got, d, cur < nd ? cur : nd, tok_end, nd, cur + m > nd ? " + eod" : "");
        got += m;
        k++;
        cur = 0;
    }
    if (got < want) OUT("  at %" PRIu64 ": %" PRIu64 " pad tokens (%" PRId64 ")\n", got,
                        want - got, t->pad);
#undef OUT
    return SP_OK;
}

/* ---- epoch tables --------------------------------------------------------------------- */

static void epoch_free(sp__tokl_epoch *e) {
    if (!e) return;
    free(e->order);
    free(e->c);
    free(e);
}

/* The table of `epoch`, built if needed; give it back with release(). */
static int acquire(const sp__tokl *ct, uint32_t epoch, sp__tokl_epoch **out, sp_error *err) {
    sp__tokl *t = (sp__tokl *)ct;   /* the cache is the one mutable part, under the lock */
    pthread_mutex_lock(&t->lock);
    t->clock++;
    int victim = -1;
    for (int i = 0; i < SP__TOKL_EPOCHS; i++) {
        sp__tokl_epoch *e = t->cache[i];
        if (e && e->epoch == epoch) {
            e->refs++;
            e->used = t->clock;
            pthread_mutex_unlock(&t->lock);
            *out = e;
            return SP_OK;
        }
        if (!e) {
            if (victim < 0 || t->cache[victim]) victim = i;
        } else if (e->refs == 0 && (victim < 0 || (t->cache[victim] &&
                                                   t->cache[victim]->used > e->used))) {
            victim = i;
        }
    }
    /* Built under the lock: the other threads of this process want the same
     * epoch, and building it twice would only cost more. */
    sp__tokl_epoch *e = calloc(1, sizeof *e);
    int rc = e ? SP_OK : sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
    if (rc == SP_OK) {
        e->epoch = epoch;
        rc = t->packing == SP__TOK_DOCS ? sp__tokl_docs_epoch(t, epoch, e, err)
                                        : concat_epoch(t, epoch, e, err);
    }
    if (rc != SP_OK) {
        epoch_free(e);
        pthread_mutex_unlock(&t->lock);
        return rc;
    }
    e->refs = 1;
    e->used = t->clock;
    if (victim >= 0) {   /* else every table is in use: this one lives until released */
        epoch_free(t->cache[victim]);
        t->cache[victim] = e;
    }
    pthread_mutex_unlock(&t->lock);
    *out = e;
    return SP_OK;
}

static void release(const sp__tokl *ct, sp__tokl_epoch *e) {
    sp__tokl *t = (sp__tokl *)ct;
    pthread_mutex_lock(&t->lock);
    int cached = 0;
    for (int i = 0; i < SP__TOKL_EPOCHS; i++) cached |= t->cache[i] == e;
    if (--e->refs == 0 && !cached) epoch_free(e);
    pthread_mutex_unlock(&t->lock);
}

/* ---- the interface -------------------------------------------------------------------- */

/* A blend: every source laid out with the same spec, the schedule resized
 * to their windows. */
static int create_blend(sp__tokl *t, sp_dataset *ds, const char *spec, sp_error *err) {
    t->nsrc = sp__dataset_mix_sources(ds);
    t->src = calloc(t->nsrc, sizeof *t->src);
    uint64_t *sizes = calloc(t->nsrc, sizeof *sizes);
    int rc = t->src && sizes ? SP_OK : sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
    for (uint32_t s = 0; rc == SP_OK && s < t->nsrc; s++) {
        sp_dataset *src = (sp_dataset *)sp__dataset_mix_source(ds, s);
        rc = sp__tokl_create(src, spec, t->seed, sp__dataset_root(src), &t->src[s], err);
        if (rc == SP_OK) sizes[s] = t->src[s]->N;
    }
    if (rc == SP_OK) rc = sp__ds_mix_resize(ds, sizes, err);
    free(sizes);
    if (rc != SP_OK) return rc;
    t->mix = ds;
    t->N = sp__dataset_mix_length(ds);
    t->width = t->src[0]->width;
    t->L = t->src[0]->L;
    snprintf(t->canon, sizeof t->canon, "%s", t->src[0]->canon);
    for (uint32_t s = 0; s < t->nsrc; s++) {   /* what an epoch's slots carry, in expectation */
        uint64_t num, den;
        sp__dataset_mix_weight(ds, s, &num, &den);
        t->used_tokens += (uint64_t)((double)t->src[s]->used_tokens / (double)t->src[s]->N *
                                     (double)t->N * (double)num / (double)den);
    }
    return SP_OK;
}

int sp__tokl_create(sp_dataset *ds, const char *spec, uint64_t seed, const char *what,
                    sp__tokl **out, sp_error *err) {
    *out = NULL;
    if (sp__dataset_mix_sources(ds) > 0) {
        sp__tokl *t = calloc(1, sizeof *t);
        if (!t) return sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
        pthread_mutex_init(&t->lock, NULL);
        snprintf(t->what, sizeof t->what, "%s", what);
        t->seed = seed;
        int rc = create_blend(t, ds, spec, err);
        if (rc != SP_OK) {
            sp__tokl_destroy(t);
            return rc;
        }
        *out = t;
        return SP_OK;
    }
    const sp__tok *tok = sp__tok_of(ds);
    if (!tok) return sp_error_set(err, SP_EINVAL, "%s: not a token corpus", what);
    sp__tokl *t = calloc(1, sizeof *t);
    if (!t) return sp_error_set(err, SP_ENOMEM, "tokens: out of memory");
    pthread_mutex_init(&t->lock, NULL);
    snprintf(t->what, sizeof t->what, "%s", what);
    t->ds = ds;
    t->tok = tok;
    t->D = sp__tok_docs(tok);
    t->T = sp__tok_total(tok);
    t->key = sp_rng_key(seed, SP_RNG_TOKENS);
    int rc = parse_spec(t, spec, err);
    if (rc == SP_OK && t->D > UINT32_MAX)
        rc = sp_error_set(err, SP_ELIMIT, "%s: %" PRIu64 " documents: at most 2^32 - 1",
                          what, t->D);
    if (rc == SP_OK && t->packing == SP__TOK_CONCAT) {
        uint64_t S = t->T + t->D * eod_len(t);
        if (S < 2)
            rc = sp_error_set(err, SP_EINVAL, "%s: %" PRIu64 " tokens%s make no window (a "
                              "window needs 2)", what, S, t->eod >= 0 ? " with eods" : "");
        t->N = S >= 2 ? (S - 1 + t->L - 1) / t->L : 0;
        t->used_tokens = S;
        t->width = t->L + 1;
    } else if (rc == SP_OK) {
        t->width = 5 * t->L + 2;
        rc = sp__tokl_docs_create(t, err);
    }
    if (rc != SP_OK) {
        sp__tokl_destroy(t);
        return rc;
    }
    *out = t;
    return SP_OK;
}

void sp__tokl_destroy(sp__tokl *t) {
    if (!t) return;
    for (uint32_t s = 0; s < t->nsrc && t->src; s++) sp__tokl_destroy(t->src[s]);
    free(t->src);
    for (int i = 0; i < SP__TOKL_EPOCHS; i++) epoch_free(t->cache[i]);
    sp__tokl_docs_destroy(t->docs);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

const char *sp__tokl_canonical(const sp__tokl *t) { return t->canon; }
uint64_t sp__tokl_windows(const sp__tokl *t) { return t->N; }
uint64_t sp__tokl_width(const sp__tokl *t) { return t->width; }
void sp__tokl_fill(const sp__tokl *t, uint64_t *tokens, uint64_t *capacity) {
    *tokens = t->used_tokens;
    *capacity = t->N * t->L;
}

int sp__tokl_window(const sp__tokl *t, uint32_t epoch, uint64_t w, void *dst, int out_bytes,
                    sp_error *err) {
    if (w >= t->N)
        return sp_error_set(err, SP_ERANGE, "%s: window %" PRIu64 " out of range (%" PRIu64
                            " windows)", t->what, w, t->N);
    if (t->mix) {   /* a blend: slot w draws a source's window, at that source's pass */
        sp_mix_draw d;
        int rc = sp_dataset_mix_draw(t->mix, t->seed, epoch, w, &d);
        return rc ? sp_error_set(err, rc, "%s: slot %" PRIu64 ": no draw", t->what, w)
                  : sp__tokl_window(t->src[d.source], d.pass, d.local, dst, out_bytes, err);
    }
    sp__tokl_epoch *e;
    int rc = acquire(t, epoch, &e, err);
    if (rc != SP_OK) return rc;
    rc = t->packing == SP__TOK_DOCS ? sp__tokl_docs_window(t, e, w, dst, out_bytes, err)
                                    : concat_window(t, e, w, dst, out_bytes, err);
    release(t, e);
    return rc;
}

int sp__tokl_explain(const sp__tokl *t, uint32_t epoch, uint64_t w, char *buf, size_t n,
                     sp_error *err) {
    if (n) buf[0] = '\0';
    if (w >= t->N)
        return sp_error_set(err, SP_ERANGE, "explain: window %" PRIu64 " out of range (%s has "
                            "%" PRIu64 ")", w, t->what, t->N);
    if (t->mix) {
        sp_mix_draw d;
        int rc = sp_dataset_mix_draw(t->mix, t->seed, epoch, w, &d);
        if (rc) return sp_error_set(err, rc, "%s: slot %" PRIu64 ": no draw", t->what, w);
        int m = snprintf(buf, n, "slot %" PRIu64 " draws source %u (%s) window %" PRIu64
                         " of its pass %u, its draw %" PRIu64 " of the epoch\n", w, d.source,
                         t->src[d.source]->what, d.local, d.pass, d.draw);
        size_t k = m > 0 && (size_t)m < n ? (size_t)m : n ? n - 1 : 0;
        return sp__tokl_explain(t->src[d.source], d.pass, d.local, buf + k, n - k, err);
    }
    sp__tokl_epoch *e;
    int rc = acquire(t, epoch, &e, err);
    if (rc != SP_OK) return rc;
    rc = t->packing == SP__TOK_DOCS ? sp__tokl_docs_explain(t, e, w, buf, n)
                                    : concat_explain(t, e, w, buf, n);
    release(t, e);
    return rc;
}
