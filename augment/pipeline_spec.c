/* pipeline_spec.c - parsing a pipeline spec, its canonical form, presets,
 * the output size, and the dtype/layout helpers of pipeline.h.
 *
 * A spec is ops separated by '|', each `name key=value ...` (whitespace
 * separated; '#' starts a comment to the end of the line). Every error is
 * SP_ESPEC with a message that quotes the offending word and the op index,
 * e.g.  pipeline op 1 "hflip": unknown key "q" (known: p).
 * Every number is normalised through the canonical format ("%.9g", then
 * strtod) as soon as it is parsed, so a parsed pipeline behaves as a
 * function of its canonical string alone and parse(canonical(p)) gives the
 * same canonical string and the same bytes. The language is documented in
 * docs/pipeline.md.
 */
#include "augment/pipeline_internal.h"
#include "common/fileio_internal.h"
#include "common/sbuf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- dtype / layout ---------------------------------------------------------- */

size_t sp__dtype_size(sp_dtype t) {
    switch (t) {
    case SP_DTYPE_FLOAT32: case SP_DTYPE_INT32: return 4;
    case SP_DTYPE_BFLOAT16: case SP_DTYPE_FLOAT16: return 2;
    case SP_DTYPE_INT64: return 8;
    default: return 1;
    }
}
const char *sp_dtype_name(sp_dtype t) {
    switch (t) {
    case SP_DTYPE_FLOAT32: return "float32";
    case SP_DTYPE_BFLOAT16: return "bfloat16";
    case SP_DTYPE_FLOAT16: return "float16";
    case SP_DTYPE_INT32: return "int32";
    case SP_DTYPE_INT64: return "int64";
    default: return "uint8";
    }
}
const char *sp_layout_name(sp_layout l) { return l == SP_LAYOUT_NHWC ? "nhwc" : "nchw"; }

int sp_dtype_parse(const char *s, sp_dtype *out, sp_error *err) {
    if (s && strcmp(s, "uint8") == 0) { *out = SP_DTYPE_UINT8; return SP_OK; }
    if (s && strcmp(s, "float32") == 0) { *out = SP_DTYPE_FLOAT32; return SP_OK; }
    if (s && strcmp(s, "bfloat16") == 0) { *out = SP_DTYPE_BFLOAT16; return SP_OK; }
    if (s && strcmp(s, "float16") == 0) { *out = SP_DTYPE_FLOAT16; return SP_OK; }
    if (s && strcmp(s, "int32") == 0) { *out = SP_DTYPE_INT32; return SP_OK; }
    if (s && strcmp(s, "int64") == 0) { *out = SP_DTYPE_INT64; return SP_OK; }
    return sp_error_set(err, SP_EINVAL,
                        "unknown dtype \"%s\" (known: uint8, float32, bfloat16, float16; "
                        "int32, int64 for token corpora)",
                        s ? s : "(null)");
}

int sp_layout_parse(const char *s, sp_layout *out, sp_error *err) {
    if (s && strcmp(s, "nchw") == 0) { *out = SP_LAYOUT_NCHW; return SP_OK; }
    if (s && strcmp(s, "nhwc") == 0) { *out = SP_LAYOUT_NHWC; return SP_OK; }
    return sp_error_set(err, SP_EINVAL, "unknown layout \"%s\" (known: nchw, nhwc)",
                        s ? s : "(null)");
}

/* ---- presets ------------------------------------------------------------------- */

#define IMAGENET_NORM "normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225"
/* The -fast variants decode JPEG in the DCT domain at 1/2, 1/4 or 1/8 where
 * the crop allows (dct=auto): faster, and no longer torchvision's pixels
 * (docs/pipeline.md has both the speed and the PSNR). */
static const char *const PRESET_NAMES[] = {"imagenet-train", "imagenet-eval", "shapes-train",
                                           "shapes-eval", "mnist", "imagenet-train-fast",
                                           "imagenet-eval-fast", NULL};
static const char *const PRESET_SPECS[] = {
    "random_resized_crop size=224 scale=0.08,1 ratio=0.75,1.3333333333 | hflip p=0.5 | "
    IMAGENET_NORM,
    "resize size=256 | center_crop size=224 | " IMAGENET_NORM,
    "random_resized_crop size=48 scale=0.5,1 ratio=0.75,1.3333333333 | hflip p=0.5 | "
    "color_jitter brightness=0.2 contrast=0.2 saturation=0.2",
    "resize size=48,48",
    "decode mode=gray | normalize mean=0.1307 std=0.3081",
    "decode dct=auto | random_resized_crop size=224 scale=0.08,1 ratio=0.75,1.3333333333 | "
    "hflip p=0.5 | " IMAGENET_NORM,
    "decode dct=auto | resize size=256 | center_crop size=224 | " IMAGENET_NORM,
};

const char *const *sp__pipeline_presets(void) { return PRESET_NAMES; }

/* ---- the parser ---------------------------------------------------------------- */

static void join_keys(const sp__op_desc *d, char *buf, size_t size) {
    buf[0] = '\0';
    for (int i = 0; d->keys[i]; i++) {
        if (i) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, d->keys[i], size - strlen(buf) - 1);
    }
}

/* Edit distance (insert, delete, substitute, each 1) of a and b, capped at
 * 99: how far a mistyped name is from a known one. */
static int edit_distance(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na > 63 || nb > 63) return 99;
    int row[64];
    for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[nb];
}

/* The error for a name that is no op: the ops and the presets it could
 * have meant, and the closest of them when it is a near miss
 * ("imagenet_train": did you mean "imagenet-train"?). */
static int unknown_op(int idx, const char *name, sp_error *err) {
    char ops[512] = "", presets[512] = "", hint[96] = "";
    const char *best = NULL;
    int bd = 99;
    const sp__op_desc *d;
    for (int i = 0; (d = sp__op_at(i)); i++) {
        snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%s", i ? ", " : "", d->name);
        int dist = edit_distance(name, d->name);
        if (dist < bd) bd = dist, best = d->name;
    }
    for (int i = 0; PRESET_NAMES[i]; i++) {
        snprintf(presets + strlen(presets), sizeof presets - strlen(presets), "%s%s",
                 i ? ", " : "", PRESET_NAMES[i]);
        int dist = idx == 0 ? edit_distance(name, PRESET_NAMES[i]) : 99;   /* only whole */
        if (dist < bd) bd = dist, best = PRESET_NAMES[i];
    }
    int near = (int)strlen(name) / 3 > 2 ? (int)strlen(name) / 3 : 2;
    if (best && bd <= near) snprintf(hint, sizeof hint, " (did you mean \"%s\"?)", best);
    /* The presets first (a whole pipeline is one name); the op list cut at
     * a name where the message would not fit. */
    size_t room = SP_ERROR_MSG_MAX - 120 - strlen(hint) - strlen(presets) -
                  (strlen(name) < 64 ? strlen(name) : 64);
    if (strlen(ops) > room && room > 40) {
        char *cut = ops + room - 40;
        while (cut > ops && *cut != ',') cut--;
        snprintf(cut, sizeof ops - (size_t)(cut - ops), ", ... (docs/pipeline.md lists them)");
    }
    return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%.64s\": unknown op%s (the whole "
                        "pipeline may be one preset: %s; ops: %s)", idx, name, hint, presets,
                        ops);
}

/* Is the op d at idx allowed after the ops before it (the order rules)? */
static int check_order(const sp_pipeline *p, const sp__op_desc *d, int idx, sp_error *err) {
    if ((d->flags & SP__OP_FIRST) && idx != 0)
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": %s must be the first op",
                            idx, d->name, d->name);
    if (idx > 0 && (p->ops[idx - 1].desc->flags & SP__OP_LAST))
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": no op may follow %s "
                            "(it must be last)", idx, d->name, p->ops[idx - 1].desc->name);
    if (p->has_normalize && !(d->flags & SP__OP_AFTER_OUTPUT))
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": no op but random_erasing may "
                            "follow normalize (it must be last)", idx, d->name);
    if (p->has_erasing && !(d->flags & SP__OP_AFTER_OUTPUT))
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": no op but random_erasing may "
                            "follow random_erasing (it works on the output values)", idx, d->name);
    return SP_OK;
}

/* Parse one op from its tokens (tok[0] is the name). */
static int parse_op(sp_pipeline *p, int idx, char **tok, int ntok, sp_error *err) {
    const sp__op_desc *d = sp__op_find(tok[0]);
    if (!d) return unknown_op(idx, tok[0], err);
    const char *vals[SP__OP_MAX_KEYS] = {NULL};
    for (int t = 1; t < ntok; t++) {
        char *eq = strchr(tok[t], '=');
        if (!eq || eq == tok[t])
            return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": expected key=value, got \"%s\"",
                                idx, d->name, tok[t]);
        *eq = '\0';
        int k = -1;
        for (int i = 0; d->keys[i]; i++)
            if (strcmp(tok[t], d->keys[i]) == 0) k = i;
        if (k < 0) {
            char known[128];
            join_keys(d, known, sizeof known);
            return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": unknown key \"%s\" (known: %s)",
                                idx, d->name, tok[t], known);
        }
        if (vals[k])
            return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": key \"%s\" given twice", idx,
                                d->name, tok[t]);
        vals[k] = eq + 1;
    }
    if (d->required && !vals[0])
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": missing required key \"%s\"",
                            idx, d->name, d->keys[0]);
    int rc = check_order(p, d, idx, err);
    if (rc) return rc;
    sp_op *op = &p->ops[idx];
    memset(op, 0, sizeof *op);
    op->desc = d;
    return d->parse(p, op, idx, vals, err);
}

/* ---- entry points ------------------------------------------------------------------ */

/* Comments: '#' to the end of the line becomes spaces. */
static void blank_comments(char *s) {
    int in_comment = 0;
    for (; *s; s++) {
        if (*s == '#') in_comment = 1;
        else if (*s == '\n') in_comment = 0;
        if (in_comment) *s = ' ';
    }
}

/* random_apply's span: the `ops` ops after it exist, none of them changes
 * the image size or the output (geometric ops, normalize), and a
 * random_apply inside it ends inside it too. */
static int check_spans(const sp_pipeline *p, sp_error *err) {
    for (int i = 0; i < p->nops; i++) {
        const sp_op *ra = &p->ops[i];
        if (!ra->span) continue;   /* random_apply's ops= (no other op has a span) */
        int end = i + ra->span;
        if (end >= p->nops)
            return sp_error_set(err, SP_ESPEC, "pipeline op %d \"random_apply\": ops=%d reaches "
                                "past the last op (op %d)", i, ra->span, p->nops - 1);
        for (int j = i + 1; j <= end; j++) {
            const sp__op_desc *d = p->ops[j].desc;
            if (d->flags & (SP__OP_REGION | SP__OP_NEW_SIZE | SP__OP_ON_OUTPUT))
                return sp_error_set(err, SP_ESPEC, "pipeline op %d: a %s inside random_apply "
                                    "(op %d, ops=%d); only ops that keep the image size may be "
                                    "random-applied", j, d->flags & SP__OP_ON_OUTPUT ? d->name :
                                    "crop or resize", i, ra->span);
            if (p->ops[j].span && j + p->ops[j].span > end)
                return sp_error_set(err, SP_ESPEC, "pipeline op %d \"random_apply\": its ops "
                                    "end after those of the random_apply it is in (op %d)", j, i);
        }
    }
    return SP_OK;
}

static int parse_text(const char *text, sp_pipeline *p, sp_error *err) {
    char *buf = strdup(text);
    if (!buf) return sp_error_set(err, SP_ENOMEM, "pipeline: out of memory");
    blank_comments(buf);
    int rc = SP_OK, idx = 0, any = 0;
    for (char *c = buf; *c; c++) any |= !strchr(" \t\r\n|", *c);
    if (!any) {
        free(buf);
        return sp_error_set(err, SP_ESPEC, "pipeline: empty spec");
    }
    char *seg = buf;
    for (;;) {
        char *bar = strchr(seg, '|');
        if (bar) *bar = '\0';
        char *tok[16];
        int ntok = 0;
        char *save = NULL;
        for (char *t = strtok_r(seg, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
            if (ntok == 16) {
                rc = sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": too many words", idx, tok[0]);
                goto out;
            }
            tok[ntok++] = t;
        }
        if (ntok == 0) {
            rc = sp_error_set(err, SP_ESPEC, "pipeline op %d: empty op (stray '|')", idx);
            goto out;
        }
        if (idx >= SP_SPEC_MAX_OPS) {
            rc = sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": more than %d ops", idx, tok[0],
                              SP_SPEC_MAX_OPS);
            goto out;
        }
        if ((rc = parse_op(p, idx, tok, ntok, err))) goto out;
        idx++;
        if (!bar) break;
        seg = bar + 1;
    }
    p->nops = idx;
    rc = check_spans(p, err);
    if (!rc) rc = sp__targets_check(p, err);
out:
    free(buf);
    return rc;
}

static int read_spec_file(const char *path, char **text, sp_error *err) {
    sp__buf buf = {NULL, 0};
    size_t n = 0;
    int rc = sp__read_regular(AT_FDCWD, path, path, 0, 65535, &buf, &n, err);
    if (rc == SP_ELIMIT)
        rc = sp_error_set(err, SP_ESPEC, "%s: pipeline spec file larger than 64 KiB", path);
    else if (rc == SP_OK && !buf.p && sp__buf_reserve(&buf, 1) != 0)
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    if (rc == SP_OK) {
        buf.p[n] = '\0';   /* the spare byte */
        if (strlen((char *)buf.p) != n)
            rc = sp_error_set(err, SP_ESPEC, "%s: pipeline spec contains a NUL byte", path);
    }
    if (rc) {
        sp__buf_free(&buf);
        return rc;
    }
    *text = (char *)buf.p;
    return SP_OK;
}

static void build_tables(sp_pipeline *p) {
    for (int v = 0; v < 256; v++) p->unit_table[v] = (float)v / 255.0f;
    const sp_op *n = NULL;
    for (int i = 0; i < p->nops; i++)
        if (p->ops[i].desc == &sp__op_normalize) n = &p->ops[i];
    for (int c = 0; c < 3; c++) {
        int cc = n && c < n->nmean ? c : 0;
        /* without normalize, (v / 255 - 0) / 1: the unit table */
        float m = n ? (float)n->mean[cc] : 0.0f, s = n ? (float)n->std[cc] : 1.0f;
        p->norm_mean[c] = m;
        p->norm_std[c] = s;
        for (int v = 0; v < 256; v++) {
            float x = (float)v / 255.0f;   /* each assignment rounds to float */
            x = x - m;
            x = x / s;
            p->norm_table[c][v] = x;
        }
    }
    for (int v = 0; v < 256; v++) {
        for (int c = 0; c < 3; c++) {
            p->half_table[0][c][v] = sp__to_bf16(p->norm_table[c][v]);
            p->half_table[1][c][v] = sp__to_f16(p->norm_table[c][v]);
        }
        p->half_table[0][3][v] = sp__to_bf16(p->unit_table[v]);
        p->half_table[1][3][v] = sp__to_f16(p->unit_table[v]);
    }
    sp__write_prepare(p);
}

/* The preset named by `text` (alone, whitespace and comments allowed). */
static const char *preset_spec(const char *text) {
    char buf[256];
    size_t n = strlen(text);
    if (n >= sizeof buf) return NULL;
    memcpy(buf, text, n + 1);
    blank_comments(buf);
    char name[64], rest[2];
    if (sscanf(buf, " %63s %1s", name, rest) != 1) return NULL;
    for (int i = 0; PRESET_NAMES[i]; i++)
        if (strcmp(name, PRESET_NAMES[i]) == 0) return PRESET_SPECS[i];
    return NULL;
}

static int parse_all(const char *spec, sp_pipeline **out, sp_error *err) {
    while (*spec == ' ' || *spec == '\t' || *spec == '\n' || *spec == '\r') spec++;
    char *file_text = NULL;
    const char *text = spec;
    if (spec[0] == '@') {
        int rc = read_spec_file(spec + 1, &file_text, err);
        if (rc) return rc;
        text = file_text;
    }
    const char *preset = preset_spec(text);
    if (preset) text = preset;
    sp_pipeline *p = calloc(1, sizeof *p);
    if (!p) {
        free(file_text);
        return sp_error_set(err, SP_ENOMEM, "pipeline: out of memory");
    }
    p->channels = 3;
    p->dct = 0;
    int rc = parse_text(text, p, err);
    free(file_text);
    if (!rc) {
        sp__sbuf b = {0};
        for (int i = 0; i < p->nops; i++) {
            if (i) sp__sbuf_printf(&b, " | ");
            p->ops[i].desc->canon(&b, &p->ops[i]);
        }
        p->canonical = b.p;   /* freed by destroy on failure */
        if (b.oom) rc = sp_error_set(err, SP_ENOMEM, "pipeline: out of memory");
    }
    if (rc) {
        sp_pipeline_destroy(p);
        return rc;
    }
    build_tables(p);
    *out = p;
    return SP_OK;
}

int sp_pipeline_parse(const char *spec, sp_pipeline **out, sp_error *err) {
    if (!spec || !out) return sp_error_set(err, SP_EINVAL, "pipeline: NULL spec");
    *out = NULL;
    /* Numbers are read and printed in the "C" locale whatever the caller's
     * LC_NUMERIC ("0.5", never "0,5"); uselocale is per thread. */
    locale_t c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c_locale ? uselocale(c_locale) : (locale_t)0;
    int rc = parse_all(spec, out, err);
    if (c_locale) {
        uselocale(old);
        freelocale(c_locale);
    }
    return rc;
}

void sp_pipeline_destroy(sp_pipeline *p) {
    if (!p) return;
    free(p->canonical);
    free(p);
}

const char *sp__pipeline_canonical(const sp_pipeline *p) { return p->canonical; }

int sp_pipeline_has_normalize(const sp_pipeline *p) { return p->has_normalize; }

int sp__pipeline_output_dims(const sp_pipeline *p, int in_w, int in_h, int *out_h, int *out_w,
                             int *out_c, sp_error *err) {
    int w = in_w > 0 && in_h > 0 ? in_w : 0, h = w ? in_h : 0;
    for (int i = 0; i < p->nops; i++) {
        const sp_op *op = &p->ops[i];
        if (op->desc->shape) op->desc->shape(op, &w, &h);   /* 0 x 0: a drawn size */
    }
    if (w <= 0 || h <= 0)
        return sp_error_set(err, SP_ESPEC,
                            "pipeline has no fixed output size (\"%s\"); add a crop or an "
                            "exact resize, or give the input size",
                            p->canonical);
    *out_h = h;
    *out_w = w;
    *out_c = p->channels;
    return SP_OK;
}
