/* seedpipe/split.h - deterministic train/validation splits keyed by the path.
 *
 * A split spec is NAME=FRACTION,... (1 to SP_SPLIT_MAX subsets;
 * names of [A-Za-z0-9_.-], at most 31 bytes, distinct; fractions in
 * (0, 1], summing to 1 within 1e-9). Sample i belongs to subset k when
 *     u = (XXH3_64bits_withSeed(path, strlen(path), split_seed) >> 11) * 2^-53
 * (path = sp_dataset_path(ds, i), the relative path) is below cum[k] and
 * not below cum[k-1], cum[k] = frac[0] + ... + frac[k] in double, left to
 * right, the last one set to 1. The subset is a function of the path and
 * the split seed alone: adding or removing other files never moves a
 * sample to another subset; changing only the fractions moves samples
 * only across the boundaries that moved. Subset sizes are Binomial(N,
 * frac): within 3 * sqrt(N * frac * (1 - frac)) of N * frac with
 * probability 99.7% for a given dataset (a fixed dataset always gets the
 * same sizes). A loader with a subset sees only that subset's samples, in
 * canonical order: its epoch order is a permutation of the subset, and
 * sp_batch.indices are still dataset indices. The loader fingerprint
 * covers the canonical spec, the split seed and the subset.
 *
 * Pure functions on caller-owned structs; thread- and fork-safe.
 */
#ifndef SEEDPIPE_SPLIT_H
#define SEEDPIPE_SPLIT_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version. loader.h, the front door's, includes it for its types, so it
 * carries no SEEDPIPE_ADVANCED_API fence. */

#include "seedpipe/common.h"
#include "seedpipe/dataset.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_SPLIT_MAX 16
#define SP_SPLIT_NAME_MAX 32
typedef struct sp_split {
    int n;
    char name[SP_SPLIT_MAX][SP_SPLIT_NAME_MAX];
    double frac[SP_SPLIT_MAX];
    double cum[SP_SPLIT_MAX];
    uint64_t seed;
} sp_split;

/*! sp_split_parse() : parse a spec. @return 0 or SP_EINVAL with a message
 *  naming the problem ("split \"a=0.5\": fractions sum to 0.5, not 1"). */
SP_API int sp_split_parse(const char *spec, uint64_t seed, sp_split *out, sp_error *err);
/*! sp_split_assign() : the subset (0 .. n-1) of a relative path. */
SP_API int sp_split_assign(const sp_split *s, const char *path);
/*! sp_split_find() : the index of subset `name`, or -1. */
SP_API int sp_split_find(const sp_split *s, const char *name);
/*! sp_split_canonical() : "name=%.17g,..." (hashed into fingerprints);
 *  snprintf semantics. */
SP_API int sp_split_canonical(const sp_split *s, char *buf, size_t n);
/*! sp_split_counts() : counts[k] = samples of ds in subset k (n entries). */
SP_API void sp_split_counts(const sp_split *s, const sp_dataset *ds, uint64_t *counts);

#ifdef __cplusplus
}
#endif
#endif
