/* dataset_mix_parse.c - the .mix file's text: one `WEIGHT<TAB>DATASET`
 * line per source, an optional `length<TAB>N`, '#' comments, blank lines
 * and CRLF (include/seedpipe/dataset.h, "Mixture"; docs/determinism.md
 * section 10 for the weights' rule). Each bad line is SP_EFORMAT naming the
 * file and line. dataset_mix.c opens the sources it names.
 */
#include "dataset/dataset_mix.h"
#include "common/fileio_internal.h"
#include "dataset/remote_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A weight as written: digits with at most one '.', positive: *mant /
 * 10^*dec. The trailing zeros after the point are dropped first (0.500 is
 * 0.5, 999999999999999999.0 is 999999999999999999), then what is left may
 * hold at most MIX_MAX_DIGITS significant digits (from the first non-zero
 * digit to the last, zeros before the point included: 1000000000000000000
 * has 19) and MIX_MAX_DIGITS decimals (docs/determinism.md section 10;
 * tests/philox_ref.py's mix_weight() is the same rule). */
static int parse_weight(const char *w, uint64_t *mant, int *dec) {
    size_t n = strlen(w), point = n, digits = 0;
    for (size_t k = 0; k < n; k++) {
        if (w[k] == '.') {
            if (point != n) return -1;
            point = k;
        } else if (w[k] < '0' || w[k] > '9') {
            return -1;
        } else {
            digits++;
        }
    }
    if (!digits) return -1;
    size_t end = n;                                     /* one past the last digit kept */
    if (point != n)
        while (end > point + 1 && w[end - 1] == '0') end--;   /* 0.500 is 0.5 */
    size_t d = point != n && end > point + 1 ? end - point - 1 : 0;
    uint64_t m = 0;
    int sig = 0;
    for (size_t k = 0; k < end; k++) {
        if (w[k] == '.') continue;
        if (m == 0 && w[k] == '0') continue;          /* leading zeros */
        if (++sig > MIX_MAX_DIGITS) return -1;
        m = m * 10 + (uint64_t)(w[k] - '0');          /* < 10^18 */
    }
    if (m == 0 || d > MIX_MAX_DIGITS) return -1;
    *mant = m;
    *dec = (int)d;
    return 0;
}

static int parse_line(sp_dataset *ds, char *s, int line, mix_parse *p, sp_error *err) {
    const char *f = ds->root;
    char *tab = strchr(s, '\t');
    if (!tab)
        return sp_error_set(err, SP_EFORMAT, "%s:%d: expected WEIGHT<TAB>DATASET or "
                            "length<TAB>N", f, line);
    *tab = '\0';
    char *rest = tab + 1;
    size_t rl = strlen(rest);
    while (rl > 0 && (rest[rl - 1] == ' ' || rest[rl - 1] == '\t')) rest[--rl] = '\0';
    if (strcmp(s, "length") == 0) {
        if (p->length_line)
            return sp_error_set(err, SP_EFORMAT, "%s:%d: length given twice (first on line "
                                "%d)", f, line, p->length_line);
        uint64_t v = 0;
        int ok = rl > 0 && rest[0] != '0';
        for (size_t k = 0; ok && k < rl; k++) {
            ok = rest[k] >= '0' && rest[k] <= '9' && v <= MIX_MAX_LENGTH;
            v = v * 10 + (uint64_t)(rest[k] - '0');
        }
        if (!ok || v == 0 || v > MIX_MAX_LENGTH)
            return sp_error_set(err, SP_EFORMAT, "%s:%d: length \"%s\": expected an integer "
                                "in 1..2^32", f, line, rest);
        p->length = v;
        p->length_line = line;
        return SP_OK;
    }
    if (p->n == MIX_MAX_SOURCES)
        return sp_error_set(err, SP_ELIMIT, "%s:%d: more than %u sources", f, line,
                            MIX_MAX_SOURCES);
    mix_line *l = &p->v[p->n];
    if (parse_weight(s, &l->mant, &l->dec) != 0)
        return sp_error_set(err, SP_EFORMAT, "%s:%d: weight \"%s\": expected a positive "
                            "decimal (digits, at most one '.', at most %d significant digits "
                            "and decimals)", f, line, s, MIX_MAX_DIGITS);
    if (rl == 0) return sp_error_set(err, SP_EFORMAT, "%s:%d: empty dataset path", f, line);
    if (rl >= 4 && strcmp(rest + rl - 4, ".mix") == 0)
        return sp_error_set(err, SP_EFORMAT, "%s:%d: %s: a mixture cannot be a source of a "
                            "mixture (list its sources here)", f, line, rest);
    l->path = sp__rio_is_url(rest) ? sp__ds_strdup(rest) : sp__ds_join(ds->base, rest);
    if (!l->path) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", f);
    l->line = line;
    p->n++;
    return SP_OK;
}

int sp__ds_mix_parse(sp_dataset *ds, mix_parse *p, sp_error *err) {
    sp__buf buf = {NULL, 0};
    size_t len = 0;
    int rc = sp__read_regular(AT_FDCWD, ds->root, ds->root, 0, MIX_MAX_BYTES, &buf, &len, err);
    if (rc == SP_OK && !buf.p && sp__buf_reserve(&buf, 1) != 0)
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    if (rc != SP_OK) {
        sp__buf_free(&buf);
        return rc;
    }
    char *text = (char *)buf.p;
    text[len] = '\0';
    int line = 0;
    size_t pos = 0;
    while (rc == SP_OK && pos < len) {
        line++;
        char *s = text + pos;
        char *nl = memchr(s, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - s) : len - pos;
        pos += l + (nl ? 1 : 0);
        if (memchr(s, '\0', l)) {
            rc = sp_error_set(err, SP_EFORMAT, "%s:%d: NUL byte (not a text file)", ds->root,
                              line);
            break;
        }
        if (l > 0 && s[l - 1] == '\r') l--;
        s[l] = '\0';
        size_t k = strspn(s, " \t");
        if (s[k] == '\0' || s[k] == '#') continue;
        rc = parse_line(ds, s + k, line, p, err);
    }
    sp__buf_free(&buf);
    if (rc == SP_OK && p->n == 0)
        rc = sp_error_set(err, SP_EFORMAT, "%s: no source (expected WEIGHT<TAB>DATASET lines)",
                          ds->root);
    return rc;
}
