/* test_sampler.c - the epoch order (keyed Feistel permutation) and batching.
 *
 * Asserts:
 *  1. sp_perm_at follows the written spec (docs/determinism.md "Epoch order"),
 *     recomputed here by a separate few-line implementation on top of
 *     sp_philox4x32_10 (itself checked against Random123's answers).
 *  2. Each epoch order is a true permutation of [0, N) for N in {1, 2, 3, 4, 5,
 *     16, 17, 1000, 1025, 4097, 65536, 65537}, several seeds and epochs, and is
 *     the same whichever order the positions are computed in.
 *  3. Different epochs and different seeds give unrelated orders (about one
 *     position in common, as for independent random permutations).
 *  4. Basic uniformity, with bounds generous enough for a good permutation and
 *     far from what a broken one (identity, rotation, XOR translation, an
 *     affine or epoch-blind round function) gives: chi-square of (position,
 *     sample) counts over many epochs; about 1 fixed point per epoch and
 *     P(no fixed point) ~ 1/e; about 1 "successor" pair per epoch; no XOR
 *     affinity and no constant XOR difference; all orders of N = 2, 3 occur.
 *  5. Out of contract: pos >= n or n outside [1, 2^62] gives UINT64_MAX;
 *     N = 2^62 works.
 *  6. Batching: sp_batching_check names the bad field; batches per epoch with
 *     and without drop_last; rank slices for world 1/2/4 are contiguous and
 *     concatenate, in rank order, to the global batch (partial last batch).
 *  7. Rank spans (one data service per node): sp__batch_span() of m ranks
 *     from rank r is exactly the concatenation of those ranks' slices, for
 *     every r, m, world up to 8 (partial last batch, drop_last); an aligned
 *     span (m divides r and world) is rank r/m of world world/m; span 1 is
 *     the slice; a span past the world or of 0 ranks is empty.
 * Cases (tests/runner.h): test_spec_and_permutation (1, 2), test_independence
 * (3), test_uniformity (4), test_limits (5), test_batching (6), test_spans (7).
 */
#include "seedpipe/sampler.h"

#include <math.h>

#include "check.h"
#include "runner.h"
#include "loader/sampler_internal.h"

/* ---- the spec, written out independently ------------------------------------ */

static uint64_t spec_perm_at(uint64_t n, sp_key k, uint32_t epoch, uint64_t pos) {
    unsigned h = 1;
    while ((UINT64_C(1) << (2 * h)) < n) h++;      /* smallest even width >= 2 bits */
    uint64_t mask = (UINT64_C(1) << h) - 1, x = pos;
    do {
        uint64_t left = x >> h, right = x & mask;
        for (uint32_t r = 0; r < 8; r++) {         /* 8 rounds */
            sp_ctr c = {{(uint32_t)right, r, epoch, 0}};
            uint64_t f = sp_philox4x32_10(c, k).c[0] & mask;
            uint64_t t = left ^ f;
            left = right;
            right = t;
        }
        x = (left << h) | right;
    } while (x >= n);                              /* cycle-walk into [0, n) */
    return x;
}

static sp_key shuffle_key(uint64_t seed) { return sp_rng_key(seed, SP_RNG_SHUFFLE); }

/* Fills out[0..n) with the order; checks it is a permutation of [0, n). */
static void order(uint64_t n, uint64_t seed, uint32_t epoch, uint64_t *out) {
    sp_perm p;
    sp_perm_init(&p, n, shuffle_key(seed), epoch);
    unsigned char *seen = calloc(n, 1);
    CHECK(seen);
    for (uint64_t i = 0; i < n; i++) {
        out[i] = sp_perm_at(&p, i);
        CHECK_MSG(out[i] < n, "n=%llu pos %llu -> %llu out of range", (unsigned long long)n,
                  (unsigned long long)i, (unsigned long long)out[i]);
        CHECK_MSG(!seen[out[i]], "n=%llu: value %llu appears twice", (unsigned long long)n,
                  (unsigned long long)out[i]);
        seen[out[i]] = 1;
    }
    free(seen);
}

static uint64_t common_positions(const uint64_t *a, const uint64_t *b, uint64_t n) {
    uint64_t c = 0;
    for (uint64_t i = 0; i < n; i++) c += a[i] == b[i];
    return c;
}

static void test_spec_and_permutation(void) {
    const uint64_t ns[] = {1, 2, 3, 4, 5, 16, 17, 1000, 1025, 4097, 65536, 65537};
    const uint64_t seeds[] = {0, 42, 0xffffffffffffffffull};
    const uint32_t epochs[] = {0, 1, 7, 0xffffffffu};
    const unsigned want_h[] = {1, 1, 1, 1, 2, 2, 3, 5, 6, 7, 8, 9};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        uint64_t n = ns[a];
        uint64_t *o = malloc(n * sizeof *o), *o2 = malloc(n * sizeof *o2);
        CHECK(o && o2);
        for (size_t s = 0; s < 3; s++)
            for (size_t e = 0; e < 4; e++) {
                if (n > 5000 && (s + e) % 3 != 0) continue;  /* keep it quick */
                order(n, seeds[s], epochs[e], o);
                sp_perm p;
                sp_perm_init(&p, n, shuffle_key(seeds[s]), epochs[e]);
                CHECK(p.half_bits == want_h[a]);
                for (uint64_t i = n; i-- > 0;)   /* random access: any order */
                    CHECK(sp_perm_at(&p, i) == o[i]);
                uint64_t step = n > 5000 ? 97 : 1;
                for (uint64_t i = 0; i < n; i += step)
                    CHECK_MSG(spec_perm_at(n, shuffle_key(seeds[s]), epochs[e], i) == o[i],
                              "n=%llu pos=%llu differs from the spec", (unsigned long long)n,
                              (unsigned long long)i);
                order(n, seeds[s], epochs[e], o2);  /* same inputs, same order */
                CHECK(memcmp(o, o2, n * sizeof *o) == 0);
            }
        free(o);
        free(o2);
    }
}

static void test_independence(void) {
    const uint64_t ns[] = {1000, 4097, 65537};
    for (size_t a = 0; a < 3; a++) {
        uint64_t n = ns[a];
        uint64_t *base = malloc(n * sizeof *base), *o = malloc(n * sizeof *o);
        CHECK(base && o);
        order(n, 1234, 5, base);
        /* Expected common positions of independent random orders: 1 each. */
        for (uint32_t e = 0; e < 5; e++) {
            order(n, 1234, e, o);
            CHECK_MSG(common_positions(base, o, n) <= 12, "n=%llu epochs 5 and %u share %llu",
                      (unsigned long long)n, e, (unsigned long long)common_positions(base, o, n));
        }
        const uint64_t seeds[] = {1235, 0, 1234ull << 32, 1234 ^ 0x8000000000000000ull};
        for (size_t s = 0; s < 4; s++) {
            order(n, seeds[s], 5, o);
            CHECK_MSG(common_positions(base, o, n) <= 12, "n=%llu seed %llu shares %llu",
                      (unsigned long long)n, (unsigned long long)seeds[s],
                      (unsigned long long)common_positions(base, o, n));
        }
        free(base);
        free(o);
    }
}

/* chi-square of counts[n][n] (position, sample) against epochs/n each. */
static double position_chi2(uint64_t n, uint32_t epochs, uint64_t seed) {
    uint32_t *cnt = calloc(n * n, sizeof *cnt);
    uint64_t *o = malloc(n * sizeof *o);
    CHECK(cnt && o);
    for (uint32_t e = 0; e < epochs; e++) {
        order(n, seed, e, o);
        for (uint64_t i = 0; i < n; i++) cnt[i * n + o[i]]++;
    }
    double expect = (double)epochs / (double)n, chi = 0;
    for (uint64_t i = 0; i < n * n; i++) chi += (cnt[i] - expect) * (cnt[i] - expect) / expect;
    free(cnt);
    free(o);
    return chi;
}

static void test_uniformity(void) {
    /* (position, sample) counts: (n-1)^2 degrees of freedom; bound = dof +
     * 6 sd (sd = sqrt(2 dof)), far below what a fixed or epoch-rotated order
     * gives (about epochs * (n-1)). */
    const uint64_t ns[] = {5, 10, 17, 64};
    for (size_t a = 0; a < 4; a++) {
        uint64_t n = ns[a];
        double dof = (double)((n - 1) * (n - 1));
        double bound = dof + 6.0 * sqrt(2.0 * dof);
        double chi = position_chi2(n, 20000, 99 + a);
        printf("position chi-square n=%llu: %.1f (dof %.0f, bound %.1f)\n",
               (unsigned long long)n, chi, dof, bound);
        CHECK(chi < bound);
    }

    /* Fixed points and successor pairs of N = 50 over 20000 epochs. */
    const uint64_t n = 50;
    const uint32_t epochs = 20000;
    uint64_t o[50], fixed = 0, nofix = 0, succ = 0;
    for (uint32_t e = 0; e < epochs; e++) {
        order(n, 7, e, o);
        uint64_t f = 0;
        for (uint64_t i = 0; i < n; i++) f += o[i] == i;
        for (uint64_t i = 0; i + 1 < n; i++) succ += o[i + 1] == o[i] + 1;
        fixed += f;
        nofix += f == 0;
    }
    double mean_fixed = (double)fixed / epochs, p_nofix = (double)nofix / epochs;
    double mean_succ = (double)succ / epochs;  /* (n-1) pairs, each 1/n: 0.98 */
    printf("n=50: fixed points/epoch %.4f (1), P(none) %.4f (1/e = 0.3679), "
           "successors/epoch %.4f (0.98)\n", mean_fixed, p_nofix, mean_succ);
    CHECK(mean_fixed > 0.93 && mean_fixed < 1.07);          /* sd 0.007 */
    CHECK(p_nofix > 0.3679 - 0.025 && p_nofix < 0.3679 + 0.025); /* sd 0.0034 */
    CHECK(mean_succ > 0.91 && mean_succ < 1.05);             /* sd 0.007 */

    /* N = 4^8: the Feistel network itself, no cycle-walking. A round function
     * that is affine over GF(2) (or ignores the right half) makes the whole
     * permutation affine: perm(a^b^c) == perm(a)^perm(b)^perm(c) always, and
     * perm(a^d)^perm(a) constant. A random permutation: almost never. */
    sp_perm p;
    sp_perm_init(&p, 65536, shuffle_key(3), 0);
    uint32_t x = 12345, affine = 0;
    for (int t = 0; t < 20000; t++) {
        uint64_t a, b, c;
        x = x * 1664525u + 1013904223u; a = x >> 16;
        x = x * 1664525u + 1013904223u; b = x >> 16;
        x = x * 1664525u + 1013904223u; c = x >> 16;
        affine += sp_perm_at(&p, a ^ b ^ c) ==
                  (sp_perm_at(&p, a) ^ sp_perm_at(&p, b) ^ sp_perm_at(&p, c));
    }
    CHECK_MSG(affine <= 5, "%u of 20000 triples are XOR-affine", affine);
    uint32_t *diff = calloc(65536, sizeof *diff), worst = 0;
    CHECK(diff);
    for (uint64_t a = 0; a < 8192; a++) {
        uint64_t d = sp_perm_at(&p, a ^ 0x0101) ^ sp_perm_at(&p, a);
        if (++diff[d] > worst) worst = diff[d];
    }
    free(diff);
    CHECK_MSG(worst <= 8, "one output difference occurs %u times in 8192", worst);

    /* Every order of N = 2 and N = 3 occurs, about equally often. */
    uint32_t c2[2] = {0, 0}, c3[9] = {0};
    for (uint32_t e = 0; e < 6000; e++) {
        order(2, 11, e, o);
        c2[o[0]]++;
        order(3, 11, e, o);
        c3[o[0] * 3 + o[1]]++;
    }
    CHECK(c2[0] > 2700 && c2[1] > 2700);  /* 3000 +- 39 */
    for (int i = 0; i < 9; i++) {
        if (i / 3 == i % 3) { CHECK(c3[i] == 0); continue; }
        CHECK_MSG(c3[i] > 800 && c3[i] < 1200, "order %d of n=3: %u of 6000", i, c3[i]);
    }
}

static void test_limits(void) {
    sp_perm p;
    sp_perm_init(&p, 10, shuffle_key(1), 0);
    CHECK(sp_perm_at(&p, 10) == UINT64_MAX && sp_perm_at(&p, UINT64_MAX) == UINT64_MAX);
    sp_perm_init(&p, 0, shuffle_key(1), 0);
    CHECK(sp_perm_at(&p, 0) == UINT64_MAX);
    sp_perm_init(&p, (UINT64_C(1) << 62) + 1, shuffle_key(1), 0);
    CHECK(sp_perm_at(&p, 0) == UINT64_MAX);

    const uint64_t big[] = {UINT64_C(1) << 62, (UINT64_C(1) << 40) + 7};
    for (int b = 0; b < 2; b++) {
        uint64_t n = big[b];
        sp_perm_init(&p, n, shuffle_key(77), 3);
        CHECK(p.half_bits == (b == 0 ? 31u : 21u));
        uint64_t got[64];
        for (int i = 0; i < 64; i++) {
            uint64_t pos = i < 32 ? (uint64_t)i : n - 1 - (uint64_t)i * 1000003u;
            got[i] = sp_perm_at(&p, pos);
            CHECK(got[i] < n);
            CHECK(got[i] == spec_perm_at(n, shuffle_key(77), 3, pos));
            for (int j = 0; j < i; j++) CHECK(got[j] != got[i]);
        }
    }
}

/* ---- batching --------------------------------------------------------------- */

static sp_batching mk(uint64_t n, uint32_t B, int drop, uint32_t rank, uint32_t world) {
    sp_batching bt = {n, B, drop, rank, world, 0, 0};
    return bt;
}

static void expect_einval(sp_batching bt, const char *field) {
    sp_error err;
    sp_error_clear(&err);
    CHECK(sp_batching_check(&bt, &err) == SP_EINVAL);
    CHECK(err.code == SP_EINVAL);
    CHECK_MSG(strstr(err.msg, field) != NULL, "message '%s' does not name '%s'", err.msg, field);
    CHECK(sp_batching_check(&bt, NULL) == SP_EINVAL);
}

static void test_batching(void) {
    sp_error err;
    sp_error_clear(&err);
    sp_batching ok = mk(10, 4, 0, 1, 2);
    CHECK(sp_batching_check(&ok, &err) == 0 && err.code == 0);
    expect_einval(mk(10, 0, 0, 0, 1), "batch_size");
    expect_einval(mk(10, 6, 0, 0, 4), "divisible");
    expect_einval(mk(10, 6, 0, 0, 4), "world");
    expect_einval(mk(10, 4, 0, 2, 2), "rank");
    expect_einval(mk(10, 4, 0, 5, 2), "rank");
    expect_einval(mk(10, 4, 0, 0, 0), "world");
    expect_einval(mk(0, 4, 0, 0, 1), "n (dataset size)");

    /* batches per epoch: {n, B, without drop_last, with drop_last} */
    const uint64_t bpe[][4] = {{10, 3, 4, 3}, {9, 3, 3, 3}, {2, 5, 1, 0}, {1, 1, 1, 1},
                               {100, 32, 4, 3}, {96, 32, 3, 3}, {1000001, 1000, 1001, 1000}};
    for (size_t i = 0; i < sizeof bpe / sizeof bpe[0]; i++) {
        sp_batching a = mk(bpe[i][0], (uint32_t)bpe[i][1], 0, 0, 1);
        sp_batching d = mk(bpe[i][0], (uint32_t)bpe[i][1], 1, 0, 1);
        CHECK(sp_batches_per_epoch(&a) == bpe[i][2]);
        CHECK(sp_batches_per_epoch(&d) == bpe[i][3]);
    }

    /* Rank slices concatenate to the global batch [b*B, min((b+1)*B, n)). */
    const uint64_t ns[] = {1, 7, 10, 32, 33, 100};
    const uint32_t Bs[] = {4, 8, 12}, worlds[] = {1, 2, 4};
    for (size_t a = 0; a < 6; a++)
        for (size_t c = 0; c < 3; c++)
            for (int drop = 0; drop < 2; drop++)
                for (size_t w = 0; w < 3; w++) {
                    uint64_t n = ns[a];
                    uint32_t B = Bs[c], world = worlds[w];
                    sp_batching g = mk(n, B, drop, 0, 1);
                    uint64_t nb = sp_batches_per_epoch(&g);
                    for (uint64_t b = 0; b < nb + 2; b++) {
                        uint64_t start = b * B, end = start + B < n ? start + B : n;
                        uint64_t next = start, total = 0;
                        for (uint32_t r = 0; r < world; r++) {
                            sp_batching bt = mk(n, B, drop, r, world);
                            CHECK(sp_batching_check(&bt, NULL) == 0);
                            CHECK(sp_batches_per_epoch(&bt) == nb);
                            uint64_t pos;
                            uint32_t cnt;
                            sp_batch_slice(&bt, b, &pos, &cnt);
                            CHECK(cnt <= B / world);
                            if (b >= nb) { CHECK(cnt == 0); continue; }
                            if (cnt > 0) CHECK(pos == next);
                            next += cnt;
                            total += cnt;
                        }
                        if (b < nb) {
                            CHECK(next == end && total == end - start);
                            CHECK(!drop || total == B);
                        }
                    }
                }

    /* The partial last batch, by hand: n = 10, B = 8, world = 4, batch 1. */
    uint64_t pos;
    uint32_t cnt;
    sp_batching bt = mk(10, 8, 0, 0, 4);
    sp_batch_slice(&bt, 1, &pos, &cnt);
    CHECK(pos == 8 && cnt == 2);
    for (uint32_t r = 1; r < 4; r++) {
        bt.rank = r;
        sp_batch_slice(&bt, 1, &pos, &cnt);
        CHECK(cnt == 0);
    }
    bt = mk(10, 8, 0, 3, 4);
    sp_batch_slice(&bt, 0, &pos, &cnt);
    CHECK(pos == 6 && cnt == 2);
    bt.drop_last = 1;
    sp_batch_slice(&bt, 1, &pos, &cnt);
    CHECK(cnt == 0);

    /* Through the order: world 2 and 4 sample indices == world 1's. */
    sp_perm p;
    sp_perm_init(&p, 1000, shuffle_key(5), 2);
    for (uint64_t b = 0; b < 32; b++) {
        for (uint32_t world = 2; world <= 4; world *= 2) {
            uint64_t k = 0;
            for (uint32_t r = 0; r < world; r++) {
                bt = mk(1000, 32, 0, r, world);
                sp_batch_slice(&bt, b, &pos, &cnt);
                for (uint32_t i = 0; i < cnt; i++, k++)
                    CHECK(sp_perm_at(&p, pos + i) == sp_perm_at(&p, b * 32 + k));
            }
            CHECK(k == (b < 31 ? 32u : 8u));
        }
        bt = mk(1000, 32, 0, 0, 1);
        sp_batch_slice(&bt, b, &pos, &cnt);
        CHECK(pos == b * 32 && cnt == (b < 31 ? 32u : 8u));
    }
}

static void test_spans(void) {
    const uint64_t ns[] = {1, 7, 10, 33, 100};
    const uint32_t Bs[] = {8, 24, 48};
    int cases = 0;
    for (size_t a = 0; a < 5; a++)
        for (size_t c = 0; c < 3; c++)
            for (int drop = 0; drop < 2; drop++)
                for (uint32_t world = 1; world <= 8; world++) {
                    uint64_t n = ns[a];
                    uint32_t B = Bs[c];
                    if (B % world) continue;
                    sp_batching g = mk(n, B, drop, 0, world);
                    uint64_t nb = sp_batches_per_epoch(&g);
                    for (uint32_t r = 0; r < world; r++)
                        for (uint32_t m = 0; m <= world - r + 1; m++) {
                            sp_batching bt = mk(n, B, drop, r, world);
                            for (uint64_t b = 0; b < nb + 2; b++) {
                                uint64_t pos, p1;
                                uint32_t cnt, c1;
                                sp__batch_span(&bt, b, m, &pos, &cnt);
                                cases++;
                                if (m == 0 || r + m > world || b >= nb) {
                                    CHECK(cnt == 0);
                                    continue;
                                }
                                /* The slices of ranks r .. r+m-1, in rank order. */
                                uint64_t next = 0, total = 0;
                                int started = 0;
                                for (uint32_t k = r; k < r + m; k++) {
                                    sp_batching one = mk(n, B, drop, k, world);
                                    sp_batch_slice(&one, b, &p1, &c1);
                                    if (!c1) continue;
                                    if (started) CHECK(p1 == next);
                                    else CHECK(p1 == pos);
                                    started = 1;
                                    next = p1 + c1;
                                    total += c1;
                                }
                                CHECK(cnt == total);
                                CHECK(cnt <= m * (B / world));
                                if (m == 1) {
                                    sp_batch_slice(&bt, b, &p1, &c1);
                                    CHECK(p1 == pos && c1 == cnt);
                                }
                                if (r % m == 0 && world % m == 0) {   /* rank r/m of world/m */
                                    sp_batching big = mk(n, B, drop, r / m, world / m);
                                    sp_batch_slice(&big, b, &p1, &c1);
                                    CHECK(c1 == cnt && (cnt == 0 || p1 == pos));
                                }
                            }
                        }
                }
    /* By hand: n = 10, B = 8, world 4, batch 0: ranks 1-2 are [2, 6); batch 1
     * (2 samples): ranks 0-1 hold both, ranks 2-3 none. */
    uint64_t pos;
    uint32_t cnt;
    sp_batching bt = mk(10, 8, 0, 1, 4);
    sp__batch_span(&bt, 0, 2, &pos, &cnt);
    CHECK(pos == 2 && cnt == 4);
    bt.rank = 0;
    sp__batch_span(&bt, 1, 2, &pos, &cnt);
    CHECK(pos == 8 && cnt == 2);
    bt.rank = 2;
    sp__batch_span(&bt, 1, 2, &pos, &cnt);
    CHECK(cnt == 0);
    sp__batch_span(&bt, 0, 3, &pos, &cnt);   /* ranks 2-4 of 4: no such span */
    CHECK(cnt == 0);
    printf("  spans: %d cases equal to their ranks' slices\n", cases);
}

static const sp_case cases[] = {
    SP_CASE(test_spec_and_permutation),
    SP_CASE(test_independence),
    SP_CASE(test_uniformity),
    SP_CASE(test_limits),
    SP_CASE(test_batching),
    SP_CASE(test_spans),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}
