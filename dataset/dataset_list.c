/* dataset_list.c - the list-file source: one `path<TAB>label` per line.
 *
 * Grammar (one line, '\n' or "\r\n" terminated; the last may lack it):
 *   - blank (only spaces/tabs) or a comment (first non-blank char '#'):
 *     ignored. A path that starts with '#' is written "./#name".
 *   - otherwise: PATH TAB LABEL [spaces/tabs]. PATH is everything before
 *     the first TAB, taken verbatim (may contain spaces), non-empty;
 *     relative to the list file's folder unless it starts with '/'.
 *     LABEL is decimal digits, 0 .. SP_DS_MAX_CLASSES-1.
 * A NUL byte, a line without TAB, an empty path, a bad label or a
 * duplicate path is SP_EFORMAT "list:LINE: reason". The class names are
 * "0" .. "K-1" with K = largest label + 1. Samples are sorted byte-wise by
 * PATH as written (that string is also what the fingerprint hashes), and
 * every file is hashed at open, or its hash taken from the persistent
 * index (sp__ds_finish_files(), dataset_index.c). Called by dataset_open.c;
 * calls down into dataset_index.c and dataset_common.c only.
 */
#include "dataset/dataset_internal.h"
#include "common/fileio_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int read_list(const char *path, char **text, size_t *len, sp_error *err) {
    sp__buf buf = {NULL, 0};
    int rc = sp__read_regular(AT_FDCWD, path, path, 0, SP_DS_MAX_LIST_BYTES, &buf, len, err);
    if (rc == SP_ELIMIT)
        rc = sp_error_set(err, SP_ELIMIT, "%s: list file larger than %llu bytes", path,
                          (unsigned long long)SP_DS_MAX_LIST_BYTES);
    if (rc == SP_OK && !buf.p && sp__buf_reserve(&buf, 1) != 0)
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    if (rc) {
        sp__buf_free(&buf);
        return rc;
    }
    buf.p[*len] = '\0';   /* the spare byte */
    *text = (char *)buf.p;
    return SP_OK;
}

static int parse_lines(sp_dataset *ds, char *text, size_t len, sp__ds_entries *e,
                       int32_t *max_label, sp_error *err) {
    const char *lp = ds->root;
    int line = 0;
    size_t pos = 0;
    while (pos < len) {
        line++;
        char *s = text + pos;
        char *nl = memchr(s, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - s) : len - pos;
        pos += l + (nl ? 1 : 0);
        if (memchr(s, '\0', l))
            return sp_error_set(err, SP_EFORMAT, "%s:%d: NUL byte (not a text list file)", lp, line);
        if (l > 0 && s[l - 1] == '\r') l--;
        s[l] = '\0';
        size_t k = 0;
        while (s[k] == ' ' || s[k] == '\t') k++;
        if (s[k] == '\0' || s[k] == '#') continue;
        char *tab = strchr(s, '\t');
        if (!tab)
            return sp_error_set(err, SP_EFORMAT,
                                "%s:%d: expected \"path<TAB>label\", found no TAB", lp, line);
        if (tab == s)
            return sp_error_set(err, SP_EFORMAT, "%s:%d: empty path", lp, line);
        *tab = '\0';
        char *lab = tab + 1;
        size_t ll = strlen(lab);
        while (ll > 0 && (lab[ll - 1] == ' ' || lab[ll - 1] == '\t')) lab[--ll] = '\0';
        uint64_t v = 0;
        int ok = ll > 0;
        for (size_t j = 0; j < ll && ok; j++) {
            if (lab[j] < '0' || lab[j] > '9') ok = 0;
            else if ((v = v * 10 + (uint64_t)(lab[j] - '0')) >= SP_DS_MAX_CLASSES) ok = 0;
        }
        if (!ok) {
            int digits = ll > 0 && strspn(lab, "0123456789") == ll;
            if (digits)
                return sp_error_set(err, SP_EFORMAT, "%s:%d: label %s out of range 0..%d", lp,
                                    line, lab, SP_DS_MAX_CLASSES - 1);
            return sp_error_set(err, SP_EFORMAT,
                                "%s:%d: bad label \"%.64s\" (expected a non-negative integer)",
                                lp, line, lab);
        }
        if ((uint64_t)e->n >= ds->max_samples)
            return sp_error_set(err, SP_ELIMIT, "%s:%d: more than %llu samples (limit)", lp, line,
                                (unsigned long long)ds->max_samples);
        char *path = sp__ds_strdup(s);
        if (!path || sp__ds_entries_push(e, path, (int32_t)v, line))
            return sp_error_set(err, SP_ENOMEM, "%s: out of memory", lp);
        if ((int32_t)v > *max_label) *max_label = (int32_t)v;
    }
    return SP_OK;
}

static int list_open(sp_dataset *ds, const sp__ds_req *rq, sp_error *err) {
    (void)rq;
    char *text = NULL;
    size_t len = 0;
    int rc = read_list(ds->root, &text, &len, err);
    if (rc) return rc;
    sp__ds_entries e = {0};
    int32_t max_label = -1;
    rc = parse_lines(ds, text, len, &e, &max_label, err);
    free(text);
    if (!rc && e.n == 0)
        rc = sp_error_set(err, SP_EFORMAT, "%s: no samples (expected lines \"path<TAB>label\")",
                          ds->root);
    if (!rc) rc = sp__ds_numeric_classes(ds, max_label + 1, err);
    if (!rc) rc = sp__ds_finish_files(ds, &e, "no samples", err);
    sp__ds_entries_free(&e);
    return rc;
}

/* Any regular file no other driver took (the table's last of round 2). */
static int list_probe(const sp__ds_req *rq, sp_error *err) {
    (void)err;
    return !rq->is_dir;
}

const sp__ds_driver sp__ds_driver_list = {
    .name = "list", .code = SP_DATASET_LIST, .local = 1, .probe = list_probe,
    .open = list_open, .ops = &sp__ds_files_ops,
};
