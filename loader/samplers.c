/* samplers.c - the loader's samplers (loader.h "Samplers"; docs/determinism.md
 * section 13): which loader sample, and which augmentation address, each
 * position of an epoch holds when cfg asks for draws with replacement
 * (uniform or weighted), a number of positions other than the samples', a
 * list of indices, or repeated copies.
 *
 * HOW IT WORKS
 * sp__samp_create() checks the fields against the dataset and the order,
 * copies the indices and weights (cfg then points at the copies, so that
 * sp__loader_config_of() can make the same loader again), builds the subset
 * map of an index list, and quantizes the weights to integers Q_i (section
 * 13: scaled by a power of two so that the largest has 63 - L bits, L the bit
 * length of n, then floored; the scaling and the floor are exact in binary64)
 * and keeps their prefix sums. sp__samp_at() is then a pure function of
 * (the sampler, epoch, position): a uniform draw is one Philox word
 * (uniform_int, the Python backend's RandomSampler(replacement=True)); a
 * weighted draw is an exactly uniform integer r in [0, S) (samplers_wor.c's
 * sp__draw_below()) and the sample whose prefix-sum interval holds r (a
 * binary search); weighted draws without replacement are whole epochs
 * (samplers_wor.c); rounds and copies go through the epoch order of the
 * loader (perm.h), a round q >= 1 under sp_key_derive(K_shuffle, q).
 *
 * Thread- and fork-safe after create: nothing is written.
 *
 * LIMITATIONS
 * A positive weight below 2^-(63-L) of the largest quantizes to 0 and is
 * never drawn (torch would draw it that rarely).
 */
#include "loader/loader_internal.h"
#include "dataset/dataset_api_internal.h"   /* sp__dataset_size(), sp_dataset_mix_*() */
#include "common/hash_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sp__samp {
    uint64_t n;            /* the loader's samples */
    uint64_t m;            /* positions an epoch */
    uint64_t dsize;        /* the dataset's samples: copy c of i is addressed c * dsize + i */
    uint32_t repeat;       /* >= 1 */
    int replacement;
    sp_order order;
    sp_key k_shuffle, k_sampler, k_weighted;
    uint64_t *cum;         /* weighted: prefix sums C_i = Q_0 + .. + Q_i; else NULL */
    uint64_t total;        /* C_{n-1} = S */
    sp__wor *wor;          /* weights without replacement: the epochs' draws; else NULL */
    uint64_t *indices;     /* the copy cfg points at (NULL: none) */
    double *weights;       /* the copy cfg points at (NULL: none) */
};

void sp__samp_destroy(sp__samp *s) {
    if (!s) return;
    sp__wor_destroy(s->wor);
    free(s->cum);
    free(s->indices);
    free(s->weights);
    free(s);
}

uint64_t sp__samp_length(const sp__samp *s) { return s->m; }
int sp__samp_strided(const sp__samp *s) { return s->repeat > 1; }

/* Why cfg's sampler cannot be used with this dataset and order, or SP_OK. */
static int check_fields(const sp_loader_config *c, const sp_dataset *ds, const char *what,
                        sp_error *err) {
    const char *other = sp__dataset_mix_sources(ds) ? "a mixture (it draws its own epoch)"
                        : c->order == SP_ORDER_BLOCK ? "the block order"
                        : (c->indices && c->split) ? "a split (give the indices of the dataset "
                                                     "instead)" : NULL;
    if (!other && sp__dataset_kind_of(ds) == SP_DATASET_TOKENS)
        other = "a token corpus (its samples are windows)";
    if (other)
        return sp_error_set(err, SP_EINVAL, "%s: a sampler (indices, num_samples, replacement, "
                            "weights, repeat) cannot be combined with %s", what, other);
    if ((c->indices && c->nindices == 0) || (c->weights && c->nweights == 0))
        return sp_error_set(err, SP_EINVAL, "%s: %s is empty", what,
                            c->indices && c->nindices == 0 ? "the index list" : "weights");
    if ((c->replacement || c->weights) && c->repeat > 1)
        return sp_error_set(err, SP_EINVAL, "%s: repeat=%u with %s: repeated augmentation "
                            "takes each sample of the order r times; weighted or uniform draws "
                            "take no repeat", what, c->repeat,
                            c->replacement ? "replacement" : "weights");
    return SP_OK;
}

/* The subset map of cfg's index list: a copy, each index below the
 * dataset's size and listed once. */
static int index_map(sp__samp *s, const sp_loader_config *c, const char *what, uint64_t **map,
                     uint64_t *nmap, sp_error *err) {
    size_t bytes = (size_t)c->nindices * sizeof(uint64_t);
    s->indices = malloc(bytes);
    *map = malloc(bytes);
    uint8_t *seen = calloc((size_t)(s->dsize / 8 + 1), 1);
    int rc = SP_OK;
    if (!s->indices || !*map || !seen) rc = sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    for (uint64_t k = 0; rc == SP_OK && k < c->nindices; k++) {
        uint64_t i = c->indices[k];
        if (i >= s->dsize)
            rc = sp_error_set(err, SP_EINVAL, "%s: indices[%llu] = %llu is past the dataset's "
                              "%llu samples", what, (unsigned long long)k, (unsigned long long)i,
                              (unsigned long long)s->dsize);
        else if (seen[i / 8] & (1u << (i % 8)))
            rc = sp_error_set(err, SP_EINVAL, "%s: index %llu is listed twice (indices[%llu]): "
                              "a sample's augmentation is addressed by its index, so two copies "
                              "would be the same bytes; use repeat for repeated samples", what,
                              (unsigned long long)i, (unsigned long long)k);
        else {
            seen[i / 8] |= (uint8_t)(1u << (i % 8));
            s->indices[k] = (*map)[k] = i;
        }
    }
    free(seen);
    *nmap = c->nindices;
    return rc;
}

/* Q_i (docs/determinism.md section 13) and their prefix sums. */
static int quantize(sp__samp *s, const sp_loader_config *c, const char *what, sp_error *err) {
    if (c->nweights != s->n)
        return sp_error_set(err, SP_EINVAL, "%s: %llu weights for %llu samples (one weight "
                            "per sample)", what, (unsigned long long)c->nweights,
                            (unsigned long long)s->n);
    s->weights = malloc((size_t)s->n * sizeof *s->weights);
    s->cum = malloc((size_t)s->n * sizeof *s->cum);
    if (!s->weights || !s->cum) return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    double top = 0;
    for (uint64_t i = 0; i < s->n; i++) {
        double w = c->weights[i];
        if (!(w >= 0) || !isfinite(w))
            return sp_error_set(err, SP_EINVAL, "%s: weights[%llu] = %g: a weight must be "
                                "finite and >= 0", what, (unsigned long long)i, w);
        s->weights[i] = w;
        if (w > top) top = w;
    }
    if (top == 0)
        return sp_error_set(err, SP_EINVAL, "%s: the weights are all 0 (nothing to draw)", what);
    int L = 0, E;
    while (L < 64 && (s->n >> L) != 0) L++;
    (void)frexp(top, &E);                 /* top = f * 2^E, f in [0.5, 1) */
    int k = (63 - L) - E;                 /* Q_max in [2^(62-L), 2^(63-L)) */
    uint64_t sum = 0;
    for (uint64_t i = 0; i < s->n; i++) {
        sum += (uint64_t)floor(ldexp(s->weights[i], k));   /* exact: < 2^(63-L) */
        s->cum[i] = sum;                                    /* < n * 2^(63-L) <= 2^63 */
    }
    s->total = sum;
    return SP_OK;
}

int sp__samp_create(sp_loader_config *c, const sp_dataset *ds, const char *what,
                    uint64_t **map, uint64_t *nmap, sp__samp **out, sp_error *err) {
    *out = NULL;
    if (!c->indices && !c->num_samples && !c->replacement && !c->weights && c->repeat <= 1) {
        c->nindices = c->nweights = 0;
        c->repeat = 0;
        return SP_OK;
    }
    int rc = check_fields(c, ds, what, err);
    if (rc != SP_OK) return rc;
    sp__samp *s = calloc(1, sizeof *s);
    if (!s) return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    s->dsize = sp__dataset_size(ds);
    s->repeat = c->repeat > 1 ? c->repeat : 1;
    s->replacement = c->replacement ? 1 : 0;
    s->order = c->order;
    s->k_shuffle = sp_rng_key(c->seed, SP_RNG_SHUFFLE);
    s->k_sampler = sp_rng_key(c->seed, SP_RNG_SAMPLER);
    s->k_weighted = sp_rng_key(c->seed, SP_RNG_WEIGHTED);
    if (c->indices) rc = index_map(s, c, what, map, nmap, err);
    s->n = *map ? *nmap : s->dsize;
    if (rc == SP_OK && s->n == 0) rc = sp_error_set(err, SP_EINVAL, "%s: no samples", what);
    if (rc == SP_OK && c->weights) rc = quantize(s, c, what, err);
    s->m = c->num_samples ? c->num_samples : s->n * s->repeat;
    if (rc == SP_OK && c->weights && !s->replacement)
        rc = sp__wor_create(s->cum, s->n, s->m, s->k_weighted, what, &s->wor, err);
    if (rc == SP_OK && !s->replacement && !s->wor) {   /* copies: c * D + i < 2^32 */
        uint64_t copies = s->repeat > 1 ? s->repeat : (s->m + s->n - 1) / s->n;
        if (copies > 1 && copies * s->dsize > (UINT64_C(1) << 32))
            rc = sp_error_set(err, SP_ELIMIT, "%s: %llu copies of %llu samples: the "
                              "augmentation address c * %llu + i must stay below 2^32", what,
                              (unsigned long long)copies, (unsigned long long)s->dsize,
                              (unsigned long long)s->dsize);
    }
    if (rc != SP_OK) {
        sp__samp_destroy(s);
        return rc;
    }
    c->indices = s->indices;
    c->weights = s->weights;
    if (!c->indices) c->nindices = 0;
    if (!c->weights) c->nweights = 0;
    c->replacement = s->replacement;
    c->repeat = s->repeat > 1 ? s->repeat : 0;
    *out = s;
    return SP_OK;
}

/* The weighted draw of position p of epoch e (section 13): the first i with
 * C_i > r, r exactly uniform below S. */
static uint64_t weighted_draw(const sp__samp *s, uint32_t e, uint64_t p) {
    uint64_t r = sp__draw_below(s->k_weighted, e, p, s->total);
    uint64_t a = 0, b = s->n - 1;
    while (a < b) {
        uint64_t mid = a + (b - a) / 2;
        if (s->cum[mid] > r) b = mid;
        else a = mid + 1;
    }
    return a;
}

uint64_t sp__samp_at(const sp__samp *s, const sp_perm *perm, uint64_t pos, const uint64_t *map,
                     uint64_t *addr) {
    uint32_t e = perm->epoch;
    if (s->wor) {   /* each sample at most once an epoch: augmented as itself */
        uint64_t j = sp__wor_at(s->wor, e, pos), i = j == UINT64_MAX ? j : map ? map[j] : j;
        if (addr) *addr = i;
        return i;
    }
    if (s->replacement) {
        uint64_t j;
        if (s->cum) {
            j = weighted_draw(s, e, pos);
        } else {
            sp_ctr ctr = {{(uint32_t)pos, (uint32_t)(pos >> 32), e, 0}};
            j = ((uint64_t)sp_philox4x32_10(ctr, s->k_sampler).c[0] * s->n) >> 32;
        }
        if (addr) *addr = pos;
        return map ? map[j] : j;
    }
    uint64_t copy, t;
    if (s->repeat > 1) {
        uint64_t q = pos % (s->n * s->repeat);
        copy = q % s->repeat;
        t = q / s->repeat;
    } else {
        copy = pos / s->n;
        t = pos % s->n;
    }
    uint64_t j = t;
    if (s->order != SP_ORDER_SEQUENTIAL) {
        sp_perm round = *perm;   /* round 0: the epoch's order; round q: K_shuffle's q-th key */
        if (s->repeat == 1 && copy > 0)
            sp_perm_init(&round, s->n, sp_key_derive(s->k_shuffle, (uint32_t)copy), e);
        else if (round.n != s->n)
            sp_perm_init(&round, s->n, s->k_shuffle, e);
        j = sp_perm_at(&round, t);
    }
    uint64_t i = map ? map[j] : j;
    if (addr) *addr = copy * s->dsize + i;
    return i;
}

void sp__samp_hash(const sp__samp *s, sp__hash *st) {
    sp__hash_str(st, "sampler-v1");
    sp__hash_u64(st, s->m);
    sp__hash_u64(st, s->repeat);
    sp__hash_u64(st, (uint64_t)s->replacement);
    if (s->indices) {
        sp__hash_str(st, "indices");
        sp__hash_u64(st, s->n);
        for (uint64_t k = 0; k < s->n; k++) sp__hash_u64(st, s->indices[k]);
    }
    if (s->cum) {   /* the quantized weights decide the draws: their prefix sums */
        sp__hash_str(st, "weights");
        sp__hash_u64(st, s->n);
        for (uint64_t k = 0; k < s->n; k++) sp__hash_u64(st, s->cum[k]);
    }
}
