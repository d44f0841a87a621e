/* dataset_mix.c - the mixture kind: weighted mixtures of datasets
 * (NAME.mix; its driver, sp__ds_driver_mix, at the end), their schedule
 * and the mixture API of dataset.h.
 *
 * A mixture file has one `WEIGHT<TAB>DATASET` line per source (any kind but
 * a mixture; DATASET relative to the file's folder unless absolute or a
 * URL: remote shards, docs/remote.md), an
 * optional `length<TAB>N` line (the epoch length; default the sum of the
 * sources' sizes), '#' comments and blank lines. Its samples are the
 * sources' samples concatenated in line order, its labels the sources'
 * labels offset per source (include/seedpipe/dataset.h), and it keeps them
 * behind the source table of dataset_internal.h (ds->ops): dataset_access.c's
 * accessors call the functions here without naming them. The file's text
 * is read by dataset_mix_parse.c; the sources are opened through the
 * dispatcher's pointer (req->open, dataset_internal.h), so this file calls
 * no function above it.
 * A blend's sources are all token corpora (a mix of token corpora and
 * images is refused): its sizes are the sources' windows, which only the
 * loader knows (the spec's seq_len and packing), so it resizes the
 * schedule with them (sp__ds_mix_resize(), determinism.md section 12a).
 *
 * THE SCHEDULE (docs/determinism.md section 10 is the normative spec;
 * tests/philox_ref.py recomputes it). The weights, written as decimals, are
 * scaled to integers and reduced: source s has weight W_s / W, W = sum W_s.
 * Slot q of every epoch belongs to source a(q), where a is the sequence the
 * quota method of Balinski and Young builds one slot at a time: with C_s(q)
 * the number of slots before q that belong to s, slot q goes, among the
 * sources with C_s(q) * W < W_s * (q + 1) (those still below their upper
 * quota), to the one with the largest W_s / (C_s(q) + 1), the smallest s on
 * a tie. The quota method is house monotone and stays within quota: every
 * prefix of n slots holds floor(n W_s / W) or ceil(n W_s / W) slots of s,
 * within one sample of weight x length. The sequence is restarted every W
 * slots (a(q) = a(q mod W), so each period holds exactly W_s slots of s),
 * and the open computes one period, P = min(W, L) slots, into a table of
 * source numbers with the counts at every 64th slot: a(q) and C_s(q) are
 * then O(1) at any q (a table read and at most 63 bytes counted).
 *
 * Slot q of epoch e is the k-th draw of its source s in that epoch,
 * k = C_s(q); over the epochs the source's draws continue, draw
 * K = e * c_s + k (c_s = C_s(L), its draws per epoch), which is position
 * K mod n_s of the source's own keyed permutation (sampler.h's Feistel
 * order over its n_s samples) for its pass K div n_s (mod 2^32), keyed by
 * K_src(s) = philox((s,0,0,0), K_6)[0..1], K_6 the stream key of tag 6
 * (SP_RNG_MIX). So a source is drawn without repeats until all its
 * samples were drawn once, whatever the weights, and every draw is a pure
 * function of (seed, epoch, q). The loader then permutes the L slots of an
 * epoch with the ordinary epoch order (loader.c), except a blend's, which
 * stay in schedule order.
 *
 * A BLEND'S SWITCH (determinism.md section 12b): a blend resumed with
 * other weights continues each source's draws from where they stopped:
 * from slot q0 of epoch e0 on, draw K = D_s + (the source's slots since
 * (e0, q0) under the new schedule), D_s its draws before (since_k). The
 * loader's state code (loader/state_blend.c) counts D under the state's
 * weights, rebuilds the schedule for the new ones and sets the switch.
 *
 * LIMITATIONS: at most 256 sources; weights with at most 18 significant
 * digits and 18 decimals whose reduced sum stays below 2^62; the period P
 * at most 2^26 slots (64 MiB of table: weights with many digits and a
 * length above 2^26 are refused, naming both) and P x S at most 2^28 (the
 * open's time: O(P x S), about a second at the bound; refused beyond it,
 * naming the product); L at most 2^32.
 */
#include "dataset/dataset_internal.h"
#include "dataset/dataset_mix.h"
#include "common/hash_internal.h"
#include "dataset/dataset_tokens.h"
#include "seedpipe/perm.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MIX_MAX_PERIOD (UINT64_C(1) << 26)
/* The open's work, period x sources: the quota method weighs every source
 * at every slot of the period (build_table), about 4 ns each here, and the
 * checkpoints take 4 bytes per source per 64 slots. 2^28 bounds an open at
 * about a second and 16 MiB of checkpoints (plus the period's table, at
 * most 64 MiB). */
#define MIX_MAX_WORK (UINT64_C(1) << 28)
#define MIX_BLOCK 64u

typedef unsigned __int128 u128;

typedef struct mix_source {
    sp_dataset *ds;
    uint64_t weight;       /* W_s, reduced */
    uint64_t off;          /* first mixture index */
    int coff;              /* first mixture label */
    uint64_t per_period;   /* C_s(P) */
    uint64_t per_epoch;    /* c_s = C_s(L) */
    uint64_t size;         /* n_s: its samples (a token corpus: its windows, sp__ds_mix_resize) */
} mix_source;

struct sp__ds_mix {
    uint32_t n;            /* sources */
    mix_source *src;
    uint64_t wsum;         /* W */
    uint64_t length;       /* L */
    uint64_t period;       /* P = min(W, L) */
    uint8_t *table;        /* P source numbers */
    uint32_t *ckpt;        /* per block of 64 slots, n counts before it */
    uint64_t length_line;  /* the length line's N, or 0 */
    int tokens;            /* the sources are token corpora (all of them) */
    /* A blend whose weights took effect mid-run (sp__ds_mix_since()): from
     * slot since_q of epoch since_e on, source s's draws continue from
     * since_k[s]; NULL: from the run's start (draw K = e c_s + C_s(q)).
     * since_k[n + s] = since_k[s] - C_s(since_q) (mod 2^64), so that a slot
     * at or after the switch is draw K = since_k[n + s] + (e - since_e) c_s
     * + C_s(q). */
    uint64_t *since_k;
    uint32_t since_e;
    uint64_t since_q;
};

/* The kind's state (ds->state) of a mixture; NULL for any other dataset. */
static struct sp__ds_mix *mix_of(const sp_dataset *ds) {
    return ds && sp__ds_kind(ds) == SP_DATASET_MIX ? ds->state : NULL;
}

/* ---- the source table (what dataset_access.c calls through ds->ops) ----------------- */

/* The source of mixture sample i (< ds->n) and its index there. */
static uint32_t locate(const struct sp__ds_mix *m, uint64_t i, uint64_t *local) {
    uint32_t lo = 0, hi = m->n - 1;
    while (lo < hi) {   /* the last source with off <= i */
        uint32_t mid = (lo + hi + 1) / 2;
        if (m->src[mid].off <= i) lo = mid;
        else hi = mid - 1;
    }
    *local = i - m->src[lo].off;
    return lo;
}

static int mix_label(const sp_dataset *ds, uint64_t i) {
    uint64_t j;
    uint32_t s = locate(mix_of(ds), i, &j);
    return mix_of(ds)->src[s].coff + sp_dataset_label(mix_of(ds)->src[s].ds, j);
}

static const char *mix_path(const sp_dataset *ds, uint64_t i) {
    uint64_t j;
    uint32_t s = locate(mix_of(ds), i, &j);
    return sp_dataset_path(mix_of(ds)->src[s].ds, j);
}

static sp_digest mix_hash(const sp_dataset *ds, uint64_t i) {
    uint64_t j;
    uint32_t s = locate(mix_of(ds), i, &j);
    return sp__dataset_content_hash(mix_of(ds)->src[s].ds, j);
}

static int mix_read(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err) {
    uint64_t j;
    uint32_t s = locate(mix_of(ds), i, &j);
    return sp__dataset_read(mix_of(ds)->src[s].ds, j, out, err);
}

static int mix_verdict(const sp_dataset *ds, uint64_t i, const uint8_t **aux, size_t *aux_len) {
    uint64_t j;
    uint32_t s = locate(mix_of(ds), i, &j);
    return sp__ds_verdict(mix_of(ds)->src[s].ds, j, aux, aux_len);
}

static void mix_info(const sp_dataset *ds, sp_dataset_info *info) {
    info->mix_sources = mix_of(ds)->n;
    info->mix_length = mix_of(ds)->length;
}

static void mix_destroy(sp_dataset *ds) {
    struct sp__ds_mix *m = mix_of(ds);
    if (!m) return;
    for (uint32_t s = 0; s < m->n; s++) sp_dataset_close(m->src[s].ds);
    free(m->src);
    free(m->table);
    free(m->ckpt);
    free(m->since_k);
    free(m);
    ds->state = NULL;
}

/* 1 if any source is remote: the loader and the pool then read ahead. */
static int mix_is_remote(const sp_dataset *ds) {
    for (uint32_t s = 0; s < mix_of(ds)->n; s++)
        if (sp__ds_is_remote(mix_of(ds)->src[s].ds)) return 1;
    return 0;
}

/* Read ahead: each remote source gets its own samples among idx[0..n), as
 * its indices (a read of one of them then takes the bytes). Best effort:
 * nothing on out of memory. */
static void mix_prefetch(const sp_dataset *ds, const uint64_t *idx, size_t n) {
    const struct sp__ds_mix *m = mix_of(ds);
    uint64_t *local = malloc((n ? n : 1) * sizeof *local);
    if (!local) return;
    for (uint32_t s = 0; s < m->n; s++) {
        if (!sp__ds_is_remote(m->src[s].ds)) continue;
        size_t k = 0;
        for (size_t j = 0; j < n; j++) {
            uint64_t l;
            if (idx[j] < ds->n && locate(m, idx[j], &l) == s) local[k++] = l;
        }
        if (k) sp__ds_prefetch(m->src[s].ds, local, k);
    }
    free(local);
}

static int mix_fingerprint(const sp_dataset *ds, sp_digest *out, sp_error *err);

static const sp__ds_ops mix_ops = {
    .label = mix_label,
    .path = mix_path,
    .content_hash = mix_hash,
    .read = mix_read,
    .destroy = mix_destroy,
    .prefetch = mix_prefetch,
    .is_remote = mix_is_remote,
    .verdict = mix_verdict,
    .fingerprint = mix_fingerprint,
    .info = mix_info,
};

/* ---- building --------------------------------------------------------------------- */

/* The weights scaled to integers over a common power of ten, reduced. */
static int set_weights(sp_dataset *ds, const mix_parse *p, sp_error *err) {
    struct sp__ds_mix *m = mix_of(ds);
    int dmax = 0;
    for (uint32_t s = 0; s < p->n; s++) dmax = p->v[s].dec > dmax ? p->v[s].dec : dmax;
    u128 w[MIX_MAX_SOURCES], sum = 0, g = 0;
    for (uint32_t s = 0; s < p->n; s++) {
        w[s] = p->v[s].mant;
        for (int k = p->v[s].dec; k < dmax; k++) w[s] *= 10;   /* < 10^36 */
        sum += w[s];                                           /* < 2^128 */
    }
    for (uint32_t s = 0; s < p->n; s++) {   /* gcd over 128 bits */
        u128 a = w[s], b = g;
        while (b) {
            u128 t = a % b;
            a = b;
            b = t;
        }
        g = a;
    }
    if (sum / g >= (UINT64_C(1) << 62))
        return sp_error_set(err, SP_ELIMIT, "%s: the weights are too finely divided (their "
                            "sum in units of their common divisor exceeds 2^62); write them "
                            "with fewer digits", ds->root);
    m->wsum = (uint64_t)(sum / g);
    for (uint32_t s = 0; s < p->n; s++) m->src[s].weight = (uint64_t)(w[s] / g);
    return SP_OK;
}

/* The quota method over one period into m->table / m->ckpt (see the top). */
static int build_table(sp_dataset *ds, sp_error *err) {
    struct sp__ds_mix *m = mix_of(ds);
    uint64_t P = m->period, nb = P / MIX_BLOCK + 1;
    uint32_t S = m->n;
    m->table = malloc(P);
    m->ckpt = calloc(nb * S, sizeof *m->ckpt);
    uint64_t *c = calloc(S, sizeof *c);
    if (!m->table || !m->ckpt || !c) {
        free(c);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory for the schedule (%llu slots)",
                            ds->root, (unsigned long long)P);
    }
    for (uint64_t q = 0; q < P; q++) {
        if (q % MIX_BLOCK == 0)
            for (uint32_t s = 0; s < S; s++) m->ckpt[q / MIX_BLOCK * S + s] = (uint32_t)c[s];
        uint32_t best = UINT32_MAX;
        for (uint32_t s = 0; s < S; s++) {
            uint64_t ws = m->src[s].weight;
            if ((u128)c[s] * m->wsum >= (u128)ws * (q + 1)) continue;   /* at its upper quota */
            if (best == UINT32_MAX ||
                (u128)ws * (c[best] + 1) > (u128)m->src[best].weight * (c[s] + 1))
                best = s;
        }
        m->table[q] = (uint8_t)best;   /* some source is below quota: sum c = q < q + 1 */
        c[best]++;
    }
    if (P % MIX_BLOCK == 0)
        for (uint32_t s = 0; s < S; s++) m->ckpt[P / MIX_BLOCK * S + s] = (uint32_t)c[s];
    for (uint32_t s = 0; s < S; s++) m->src[s].per_period = c[s];
    free(c);
    return SP_OK;
}

/* C_s(q): the slots of source s before slot q (any q >= 0). */
static uint64_t count_before(const struct sp__ds_mix *m, uint32_t s, uint64_t q) {
    uint64_t t = q / m->period, r = q % m->period, blk = r / MIX_BLOCK;
    uint64_t c = t * m->src[s].per_period + m->ckpt[blk * m->n + s];
    for (uint64_t j = blk * MIX_BLOCK; j < r; j++) c += m->table[j] == s;
    return c;
}

/* Sizes, offsets, classes (names "s:name") and the epoch length. */
static int concat_sources(sp_dataset *ds, const mix_parse *p, sp_error *err) {
    struct sp__ds_mix *m = mix_of(ds);
    uint64_t n = 0, classes = 0;
    for (uint32_t s = 0; s < m->n; s++) {
        m->src[s].off = n;
        m->src[s].coff = (int)classes;
        if (m->src[s].size == 0)
            return sp_error_set(err, SP_EFORMAT, "%s:%d: %s has no samples", ds->root,
                                p ? p->v[s].line : 0, sp__dataset_root(m->src[s].ds));
        n += m->src[s].size;
        classes += (uint64_t)sp__dataset_num_classes(m->src[s].ds);
        if (classes > SP_DS_MAX_CLASSES * 16u)
            return sp_error_set(err, SP_ELIMIT, "%s:%d: the sources have more than %u classes",
                                ds->root, p ? p->v[s].line : 0, SP_DS_MAX_CLASSES * 16u);
    }
    if (n > ds->max_samples)
        return sp_error_set(err, SP_ELIMIT, "%s: %llu samples in all, limit %llu", ds->root,
                            (unsigned long long)n, (unsigned long long)ds->max_samples);
    ds->n = n;
    m->length = m->length_line ? m->length_line : n;
    if (m->length > MIX_MAX_LENGTH)
        return sp_error_set(err, SP_ELIMIT, "%s: epoch length %llu exceeds 2^32 (set a "
                            "length line)", ds->root, (unsigned long long)m->length);
    m->period = m->wsum < m->length ? m->wsum : m->length;
    if (m->period > MIX_MAX_PERIOD)
        return sp_error_set(err, SP_ELIMIT, "%s: the schedule repeats every %llu slots (the "
                            "weights' common denominator) and the epoch has %llu: one of them "
                            "must be at most 2^26; write the weights with fewer digits or set "
                            "a shorter length", ds->root, (unsigned long long)m->wsum,
                            (unsigned long long)m->length);
    if (m->period * m->n > MIX_MAX_WORK)   /* <= 2^26 x 256: no overflow */
        return sp_error_set(err, SP_ELIMIT, "%s: the schedule's period of %llu slots x %u "
                            "sources = %llu exceeds the open's bound of 2^28 (period x sources: "
                            "the open weighs every source at every slot of the period); write "
                            "the weights with fewer digits, set a shorter length or mix fewer "
                            "sources", ds->root, (unsigned long long)m->period, m->n,
                            (unsigned long long)(m->period * m->n));
    if (!p) return SP_OK;   /* a resize (sp__ds_mix_resize): the classes stand */
    ds->num_classes = (int)classes;
    ds->class_names = calloc(classes ? classes : 1, sizeof *ds->class_names);
    ds->class_counts = calloc(classes ? classes : 1, sizeof *ds->class_counts);
    if (!ds->class_names || !ds->class_counts)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    for (uint32_t s = 0; s < m->n; s++) {
        const sp_dataset *src = m->src[s].ds;
        for (int c = 0; c < sp__dataset_num_classes(src); c++) {
            const char *name = sp_dataset_class_name(src, c);
            size_t len = strlen(name) + 16;
            char *full = malloc(len);
            if (!full) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
            snprintf(full, len, "%u:%s", s, name);
            ds->class_names[m->src[s].coff + c] = full;
            ds->class_counts[m->src[s].coff + c] = sp__dataset_class_count(src, c);
        }
    }
    return SP_OK;
}

/* FINGERPRINT (docs/determinism.md section 10): XXH3-128 seed 0 over
 * "seedpipe.mix.v1" then u64 fields (sp__hash_u64: 8 bytes little-endian):
 * kind (5), S, W, L, and per source W_s, n_s, fingerprint hi, lo. */
static int mix_fingerprint(const sp_dataset *ds, sp_digest *out, sp_error *err) {
    (void)err;
    const struct sp__ds_mix *m = mix_of(ds);
    sp__hash hs;
    sp__hash_init(&hs);
    static const char tag[] = "seedpipe.mix.v1";
    sp__hash_bytes(&hs, tag, sizeof tag - 1);
    sp__hash_u64(&hs, (uint64_t)SP_DATASET_MIX);
    sp__hash_u64(&hs, m->n);
    sp__hash_u64(&hs, m->wsum);
    sp__hash_u64(&hs, m->length);
    for (uint32_t s = 0; s < m->n; s++) {
        sp_digest f = sp__dataset_fingerprint(m->src[s].ds);
        sp__hash_u64(&hs, m->src[s].weight);
        sp__hash_u64(&hs, sp__dataset_size(m->src[s].ds));   /* documents, for a token corpus */
        sp__hash_u64(&hs, f.hi);
        sp__hash_u64(&hs, f.lo);
    }
    *out = sp__hash_digest(&hs);
    return SP_OK;
}

/* The mixture's folder is the base its relative source paths are joined
 * to; the sources are opened by the dispatcher (rq->open). */
static int mix_open(sp_dataset *ds, const sp__ds_req *rq, sp_error *err) {
    int rc = sp__ds_set_base(ds, 0, err);
    if (rc != SP_OK) return rc;
    mix_parse *p = calloc(1, sizeof *p);
    ds->state = calloc(1, sizeof(struct sp__ds_mix));
    if (!p || !ds->state) {
        free(p);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    }
    rc = sp__ds_mix_parse(ds, p, err);
    struct sp__ds_mix *m = mix_of(ds);
    if (rc == SP_OK && !(m->src = calloc(p->n, sizeof *m->src)))
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    for (uint32_t s = 0; rc == SP_OK && s < p->n; s++) {
        rc = rq->open(p->v[s].path, rq->limits, &m->src[s].ds, err);
        if (rc == SP_OK) {
            m->n++;
            m->src[s].size = sp__dataset_size(m->src[s].ds);
        }
        int tok = rc == SP_OK && sp__ds_kind(m->src[s].ds) == SP_DATASET_TOKENS;
        if (rc == SP_OK && s == 0) m->tokens = tok;
        if (rc == SP_OK && tok != m->tokens) {
            rc = sp_error_set(err, SP_EINVAL, "%s:%d: %s is %s: a mixture's sources are all "
                              "token corpora or none is (docs/tokens.md)", ds->root,
                              p->v[s].line, m->src[s].ds->root,
                              tok ? "a token corpus" : "no token corpus");
        } else if (rc != SP_OK && err) {   /* the source's message, after the file and line */
            char why[SP_ERROR_MSG_MAX];
            snprintf(why, sizeof why, "%s", err->msg);
            sp_error_set(err, rc, "%s:%d: %s", ds->root, p->v[s].line, why);
        }
    }
    if (rc == SP_OK) rc = set_weights(ds, p, err);
    m->length_line = p->length;
    if (rc == SP_OK) rc = concat_sources(ds, p, err);
    if (rc == SP_OK) rc = build_table(ds, err);
    if (rc == SP_OK)
        for (uint32_t s = 0; s < m->n; s++) m->src[s].per_epoch = count_before(m, s, m->length);
    for (uint32_t s = 0; s < p->n; s++) free(p->v[s].path);
    free(p);
    return rc;
}

/* ---- the public mixture API (dataset.h) --------------------------------------------- */

uint32_t sp__dataset_mix_sources(const sp_dataset *ds) { return mix_of(ds) ? mix_of(ds)->n : 0; }

const sp_dataset *sp__dataset_mix_source(const sp_dataset *ds, uint32_t s) {
    return mix_of(ds) && s < mix_of(ds)->n ? mix_of(ds)->src[s].ds : NULL;
}

int sp_dataset_mix_source_get(const sp_dataset *ds, uint32_t s, sp_mix_source *out) {
    size_t need = offsetof(sp_mix_source, dataset) + sizeof out->dataset;
    const struct sp__ds_mix *m = mix_of(ds);
    if (!m || s >= m->n || !out || out->struct_size < need) return SP_EINVAL;
    sp_mix_source in = {.struct_size = out->struct_size, .dataset = m->src[s].ds,
                        .weight_num = m->src[s].weight, .weight_den = m->wsum,
                        .offset = m->src[s].off, .class_offset = m->src[s].coff};
    memcpy(out, &in, out->struct_size < sizeof in ? out->struct_size : sizeof in);
    return SP_OK;
}

int sp__dataset_mix_weight(const sp_dataset *ds, uint32_t s, uint64_t *num, uint64_t *den) {
    if (!ds || !mix_of(ds) || s >= mix_of(ds)->n) return SP_EINVAL;
    if (num) *num = mix_of(ds)->src[s].weight;
    if (den) *den = mix_of(ds)->wsum;
    return SP_OK;
}

uint64_t sp__dataset_mix_length(const sp_dataset *ds) {
    return mix_of(ds) ? mix_of(ds)->length : ds->n;
}

int sp__dataset_mix_locate(const sp_dataset *ds, uint64_t i, uint32_t *source, uint64_t *local) {
    if (!ds || i >= ds->n) return SP_ERANGE;
    uint64_t j = i;
    uint32_t s = mix_of(ds) ? locate(mix_of(ds), i, &j) : 0;
    if (source) *source = s;
    if (local) *local = j;
    return SP_OK;
}

int sp__dataset_mix_class_offset(const sp_dataset *ds, uint32_t s) {
    return mix_of(ds) && s < mix_of(ds)->n ? mix_of(ds)->src[s].coff : -1;
}

/* K: the number of source s's draw at slot q of epoch e (its draws from
 * the run's start, or continued from since_k[s] after a switch; section
 * 12b). SP_ERANGE before the switch: those slots drew under other weights. */
static int draw_number(const struct sp__ds_mix *m, uint32_t s, uint32_t epoch, uint64_t q,
                       uint64_t k, uint64_t *K) {
    uint64_t c = m->src[s].per_epoch;
    if (!m->since_k) {
        *K = (uint64_t)epoch * c + k;   /* < 2^32 * 2^32 */
        return SP_OK;
    }
    if (epoch < m->since_e || (epoch == m->since_e && q < m->since_q)) return SP_ERANGE;
    *K = m->since_k[m->n + s] + (uint64_t)(epoch - m->since_e) * c + k;
    return SP_OK;
}

int sp_dataset_mix_draw(const sp_dataset *ds, uint64_t seed, uint32_t epoch, uint64_t q,
                        sp_mix_draw *out) {
    if (!ds || !mix_of(ds) || !out) return SP_EINVAL;
    const struct sp__ds_mix *m = mix_of(ds);
    if (q >= m->length) return SP_ERANGE;
    uint32_t s = m->table[q % m->period];
    const mix_source *src = &m->src[s];
    uint64_t big, k = count_before(m, s, q);
    if (draw_number(m, s, epoch, q, k, &big) != SP_OK) return SP_ERANGE;
    uint64_t ns = src->size;
    sp_perm perm;
    sp_perm_init(&perm, ns, sp_key_derive(sp_rng_key(seed, SP_RNG_MIX), s),
                 (uint32_t)(big / ns));
    out->source = s;
    out->draw = k;
    out->pass = (uint32_t)(big / ns);
    out->local = sp_perm_at(&perm, big % ns);
    out->index = src->off + out->local;
    return SP_OK;
}

int sp__ds_mix_resize(sp_dataset *ds, const uint64_t *sizes, sp_error *err) {
    struct sp__ds_mix *m = mix_of(ds);
    if (!m || !m->tokens)
        return sp_error_set(err, SP_EINVAL, "%s: not a mixture of token corpora", ds->root);
    for (uint32_t s = 0; s < m->n; s++) m->src[s].size = sizes[s];
    free(m->table);
    free(m->ckpt);
    m->table = NULL;
    m->ckpt = NULL;
    int rc = concat_sources(ds, NULL, err);
    if (rc == SP_OK) rc = build_table(ds, err);
    if (rc == SP_OK)
        for (uint32_t s = 0; s < m->n; s++) m->src[s].per_epoch = count_before(m, s, m->length);
    return rc;
}

/* ---- a blend's weights changed mid-run (dataset_tokens.h, section 12b) ------------------ */

int sp__ds_mix_draws_at(const sp_dataset *ds, uint32_t epoch, uint64_t q, uint64_t *draws) {
    const struct sp__ds_mix *m = mix_of(ds);
    if (!m || q > m->length) return SP_EINVAL;
    for (uint32_t s = 0; s < m->n; s++)
        if (draw_number(m, s, epoch, q, count_before(m, s, q), &draws[s]) != SP_OK)
            return SP_ERANGE;
    return SP_OK;
}

int sp__ds_mix_reweight(sp_dataset *ds, const uint64_t *weights, sp_error *err) {
    struct sp__ds_mix *m = mix_of(ds);
    if (!m || !m->tokens)
        return sp_error_set(err, SP_EINVAL, "%s: not a mixture of token corpora", ds->root);
    u128 sum = 0;
    uint64_t g = 0;
    for (uint32_t s = 0; s < m->n; s++) {
        if (weights[s] == 0)
            return sp_error_set(err, SP_EINVAL, "%s: source %u's weight is 0", ds->root, s);
        sum += weights[s];
        uint64_t a = weights[s], b = g;
        while (b) {
            uint64_t t = a % b;
            a = b;
            b = t;
        }
        g = a;
    }
    if (sum >= (UINT64_C(1) << 62) || g != 1)
        return sp_error_set(err, SP_EINVAL, "%s: weights not reduced integers summing below "
                            "2^62", ds->root);
    for (uint32_t s = 0; s < m->n; s++) m->src[s].weight = weights[s];
    m->wsum = (uint64_t)sum;
    free(m->since_k);
    m->since_k = NULL;
    uint64_t *sizes = malloc(m->n * sizeof *sizes);
    if (!sizes) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    for (uint32_t s = 0; s < m->n; s++) sizes[s] = m->src[s].size;
    int rc = sp__ds_mix_resize(ds, sizes, err);
    free(sizes);
    if (rc == SP_OK) rc = mix_fingerprint(ds, &ds->fingerprint, err);
    return rc;
}

int sp__ds_mix_set_since(sp_dataset *ds, uint32_t epoch, uint64_t q, const uint64_t *draws,
                         sp_error *err) {
    struct sp__ds_mix *m = mix_of(ds);
    if (!m || q > m->length)
        return sp_error_set(err, SP_EINVAL, "%s: no blend or slot out of range", ds->root);
    if (!draws) {
        free(m->since_k);
        m->since_k = NULL;
        return SP_OK;
    }
    if (!m->since_k && !(m->since_k = malloc(2 * (size_t)m->n * sizeof *m->since_k)))
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    memcpy(m->since_k, draws, m->n * sizeof *draws);
    for (uint32_t s = 0; s < m->n; s++) m->since_k[m->n + s] = draws[s] - count_before(m, s, q);
    m->since_e = epoch;
    m->since_q = q;
    return SP_OK;
}

int sp__ds_mix_since(const sp_dataset *ds, uint32_t *epoch, uint64_t *q, uint64_t *draws) {
    const struct sp__ds_mix *m = mix_of(ds);
    if (!m) return 0;
    *epoch = m->since_k ? m->since_e : 0;
    *q = m->since_k ? m->since_q : 0;
    for (uint32_t s = 0; s < m->n; s++) draws[s] = m->since_k ? m->since_k[s] : 0;
    return m->since_k != NULL;
}

void sp__ds_mix_hash_since(const sp_dataset *ds, sp__hash *h) {
    const struct sp__ds_mix *m = mix_of(ds);
    if (!m || !m->since_k) return;
    sp__hash_str(h, "blend_since");
    sp__hash_u64(h, m->since_e);
    sp__hash_u64(h, m->since_q);
    for (uint32_t s = 0; s < m->n; s++) sp__hash_u64(h, m->since_k[s]);
}

/* XXH3-128 over "seedpipe.blend.v1", S, L and per source n_s and its
 * fingerprint: the mixture's fingerprint less the weights (the sources a
 * blend state may resume with other weights). */
sp_digest sp__ds_mix_sources_fp(const sp_dataset *ds) {
    const struct sp__ds_mix *m = mix_of(ds);
    sp__hash hs;
    sp__hash_init(&hs);
    static const char tag[] = "seedpipe.blend.v1";
    sp__hash_bytes(&hs, tag, sizeof tag - 1);
    sp__hash_u64(&hs, m->n);
    sp__hash_u64(&hs, m->length_line);
    for (uint32_t s = 0; s < m->n; s++) {
        sp_digest f = sp__dataset_fingerprint(m->src[s].ds);
        sp__hash_u64(&hs, sp__dataset_size(m->src[s].ds));
        sp__hash_u64(&hs, f.hi);
        sp__hash_u64(&hs, f.lo);
    }
    return sp__hash_digest(&hs);
}

/* A NAME.mix path (as given: "x.mix/" is a folder's name) that is no folder. */
static int mix_probe(const sp__ds_req *rq, sp_error *err) {
    (void)err;
    size_t l = strlen(rq->path);
    if (l < 5 || strcmp(rq->path + l - 4, ".mix") != 0) return 0;
    struct stat st;
    return !(stat(rq->path, &st) == 0 && S_ISDIR(st.st_mode));
}

const sp__ds_driver sp__ds_driver_mix = {
    .name = "mixture", .code = SP_DATASET_MIX, .probe = mix_probe, .open = mix_open,
    .ops = &mix_ops,
};
