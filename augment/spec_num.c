/* spec_num.c - the numbers of the pipeline language (docs/pipeline.md,
 * section 1): strict decimal numbers, comma-separated lists, and the
 * canonical normalisation ("%.9g", then strtod) every parsed number goes
 * through. Shared by the parser and the ops' values (pipeline_*.c).
 */
#include "augment/pipeline_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- numbers ------------------------------------------------------------------- */

double sp__canon_num(double v) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.9g", v);
    return strtod(buf, NULL);
}

/* Strict decimal number: [-+]digits[.digits][e[-+]digits], finite. */
int sp__parse_num(const char *s, double *out) {
    if (!*s) return 0;
    for (const char *c = s; *c; c++)
        if (!strchr("0123456789.eE+-", *c)) return 0;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (*end || end == s || errno == ERANGE || v != v || v - v != 0) return 0;
    *out = sp__canon_num(v);
    return 1;
}

/* Comma-separated numbers, 1..max of them. */
int sp__parse_list(const char *s, double *vals, int max, int *n) {
    char buf[256];
    if (strlen(s) >= sizeof buf) return 0;
    strcpy(buf, s);
    *n = 0;
    char *p = buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        if (*n >= max || !sp__parse_num(p, &vals[*n])) return 0;
        (*n)++;
        if (!comma) return 1;
        p = comma + 1;
    }
}

/* 1..max (at most 4) comma-separated integers in [lo, hi]. */
int sp__parse_ints(const char *v, int *out, int max, int lo, int hi, int *n) {
    double s[4];
    if (max > 4 || !sp__parse_list(v, s, max, n)) return 0;
    for (int i = 0; i < *n; i++) {
        if (!(s[i] >= lo && s[i] <= hi) || s[i] != (double)(int)s[i]) return 0;
        out[i] = (int)s[i];
    }
    return 1;
}
