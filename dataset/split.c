/* split.c - deterministic train/validation splits (include/seedpipe/split.h).
 *
 * A sample's subset is a function of its relative path and the split seed
 * only (XXH3-64 of the path mapped to [0, 1) against cumulative
 * fractions), so adding or removing files never moves another sample.
 */
#include "seedpipe/split.h"
#include "dataset/dataset_api_internal.h"   /* sp__dataset_size() */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include "dataset/split_internal.h"

int sp_split_parse(const char *spec, uint64_t seed, sp_split *out, sp_error *err) {
    memset(out, 0, sizeof *out);
    out->seed = seed;
    if (!spec || !*spec)
        return sp_error_set(err, SP_EINVAL, "split: empty spec (expected NAME=FRACTION,...)");
    const char *p = spec;
    double sum = 0.0;
    while (*p) {
        if (out->n == SP_SPLIT_MAX)
            return sp_error_set(err, SP_EINVAL, "split \"%s\": more than %d subsets", spec,
                                SP_SPLIT_MAX);
        const char *eq = strchr(p, '=');
        const char *comma = strchr(p, ',');
        if (!eq || (comma && comma < eq))
            return sp_error_set(err, SP_EINVAL,
                                "split \"%s\": expected NAME=FRACTION at \"%.*s\"", spec,
                                (int)(comma ? (size_t)(comma - p) : strlen(p)), p);
        size_t len = (size_t)(eq - p);
        if (len == 0 || len >= SP_SPLIT_NAME_MAX)
            return sp_error_set(err, SP_EINVAL, "split \"%s\": subset name must be 1..%d bytes",
                                spec, SP_SPLIT_NAME_MAX - 1);
        for (size_t i = 0; i < len; i++) {
            char c = p[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.'))
                return sp_error_set(err, SP_EINVAL,
                                    "split \"%s\": subset name \"%.*s\": use letters, digits, "
                                    "'_', '-', '.'",
                                    spec, (int)len, p);
        }
        memcpy(out->name[out->n], p, len);
        out->name[out->n][len] = '\0';
        for (int k = 0; k < out->n; k++)
            if (strcmp(out->name[k], out->name[out->n]) == 0)
                return sp_error_set(err, SP_EINVAL, "split \"%s\": subset \"%s\" given twice",
                                    spec, out->name[k]);
        char *end;
        double f = strtod(eq + 1, &end);
        if (end == eq + 1 || (*end && *end != ',') || !(f > 0.0 && f <= 1.0))
            return sp_error_set(err, SP_EINVAL,
                                "split \"%s\": subset \"%s\": fraction must be a number in "
                                "(0, 1]",
                                spec, out->name[out->n]);
        out->frac[out->n] = f;
        sum = sum + f;
        out->cum[out->n] = sum;
        out->n++;
        p = end;
        if (*p == ',') {
            p++;
            if (!*p)
                return sp_error_set(err, SP_EINVAL, "split \"%s\": trailing comma", spec);
        }
    }
    if (!(sum >= 1.0 - 1e-9 && sum <= 1.0 + 1e-9))
        return sp_error_set(err, SP_EINVAL, "split \"%s\": fractions sum to %.17g, not 1", spec,
                            sum);
    out->cum[out->n - 1] = 1.0;
    return SP_OK;
}

double sp__split_u01(uint64_t seed, const char *path) {
    uint64_t h = XXH3_64bits_withSeed(path, strlen(path), seed);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

int sp_split_assign(const sp_split *s, const char *path) {
    double u = sp__split_u01(s->seed, path);
    for (int k = 0; k < s->n - 1; k++)
        if (u < s->cum[k]) return k;
    return s->n - 1;
}

int sp_split_find(const sp_split *s, const char *name) {
    for (int k = 0; name && k < s->n; k++)
        if (strcmp(s->name[k], name) == 0) return k;
    return -1;
}

int sp_split_canonical(const sp_split *s, char *buf, size_t n) {
    size_t len = 0;
    if (n) buf[0] = '\0';
    for (int k = 0; k < s->n; k++) {
        int w = snprintf(len < n ? buf + len : NULL, len < n ? n - len : 0, "%s%s=%.17g",
                         k ? "," : "", s->name[k], s->frac[k]);
        if (w > 0) len += (size_t)w;
    }
    return (int)len;
}

void sp_split_counts(const sp_split *s, const sp_dataset *ds, uint64_t *counts) {
    for (int k = 0; k < s->n; k++) counts[k] = 0;
    uint64_t n = sp__dataset_size(ds);
    for (uint64_t i = 0; i < n; i++) counts[sp_split_assign(s, sp_dataset_path(ds, i))]++;
}
