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

size_t sp_dtype_size(sp_dtype t) {
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

const char *const *sp_pipeline_presets(void) { return PRESET_NAMES; }

/* ---- the parser ---------------------------------------------------------------- */

typedef struct op_desc {
    const char *name;
    sp_op_kind kind;
    const char *keys[10];
    const char *required;   /* a key that must be present, or NULL */
} op_desc;

static const op_desc OPS[] = {
    {"decode", SP_OP_DECODE, {"mode", "dct", NULL}, NULL},
    {"random_resized_crop", SP_OP_RRC, {"size", "scale", "ratio", "interpolation", NULL}, "size"},
    {"resize", SP_OP_RESIZE, {"size", "interpolation", NULL}, "size"},
    {"center_crop", SP_OP_CENTER_CROP, {"size", NULL}, "size"},
    {"hflip", SP_OP_HFLIP, {"p", NULL}, NULL},
    {"vflip", SP_OP_VFLIP, {"p", NULL}, NULL},
    {"color_jitter", SP_OP_COLOR_JITTER, {"brightness", "contrast", "saturation", "hue", NULL}, NULL},
    {"grayscale", SP_OP_GRAYSCALE, {"p", NULL}, NULL},
    {"normalize", SP_OP_NORMALIZE, {"mean", "std", NULL}, "mean"},
    {"invert", SP_OP_INVERT, {"p", NULL}, NULL},
    {"posterize", SP_OP_POSTERIZE, {"bits", "p", NULL}, "bits"},
    {"solarize", SP_OP_SOLARIZE, {"threshold", "p", NULL}, "threshold"},
    {"autocontrast", SP_OP_AUTOCONTRAST, {"p", NULL}, NULL},
    {"equalize", SP_OP_EQUALIZE, {"p", NULL}, NULL},
    {"sharpness", SP_OP_SHARPNESS, {"factor", "p", NULL}, "factor"},
    {"random_apply", SP_OP_RANDOM_APPLY, {"ops", "p", NULL}, "ops"},
    {"random_crop", SP_OP_RANDOM_CROP, {"size", "padding", "pad_mode", "fill", "pad_if_needed", NULL},
     "size"},
    {"gaussian_blur", SP_OP_GAUSSIAN_BLUR, {"kernel", "sigma", NULL}, "kernel"},
    {"random_erasing", SP_OP_RANDOM_ERASING, {"p", "scale", "ratio", "value", NULL}, NULL},
    {"rotate", SP_OP_ROTATE, {"degrees", "interpolation", "fill", NULL}, "degrees"},
    {"affine", SP_OP_AFFINE, {"degrees", "translate", "scale", "shear", "interpolation", "fill",
                              NULL}, "degrees"},
    {"auto_augment", SP_OP_AUTO_AUGMENT, {"policy", "interpolation", "fill", NULL}, NULL},
    {"rand_augment", SP_OP_RAND_AUGMENT, {"num_ops", "magnitude", "num_magnitude_bins",
                                          "interpolation", "fill", NULL}, NULL},
    {"trivial_augment_wide", SP_OP_TRIVIAL_AUGMENT, {"num_magnitude_bins", "interpolation",
                                                     "fill", NULL}, NULL},
    {"targets", SP_OP_TARGETS,
     {"max_boxes", "clip", "min_area", "min_visibility", "keypoints", "masks", "mask_fill",
      "protect", "flip_pairs", NULL},
     NULL},
    {"random_zoom_out", SP_OP_RANDOM_ZOOM_OUT, {"fill", "side_range", "p", NULL}, NULL},
    {"random_iou_crop", SP_OP_RANDOM_IOU_CROP, {"min_scale", "max_scale", "min_aspect_ratio",
     "max_aspect_ratio", "sampler_options", "trials", "attempts", NULL}, NULL},
};
#define N_OPS (int)(sizeof OPS / sizeof OPS[0])

static void join_keys(const op_desc *d, char *buf, size_t size) {
    buf[0] = '\0';
    for (int i = 0; d->keys[i]; i++) {
        if (i) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, d->keys[i], size - strlen(buf) - 1);
    }
}

#define BAD(fmt, ...) \
    sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": " fmt, idx, d->name, __VA_ARGS__)

static int bad_value(sp_error *err, int idx, const op_desc *d, const char *key,
                     const char *val, const char *expect) {
    return BAD("bad value \"%s\" for %s (expected %s)", val, key, expect);
}

static int parse_size(sp_error *err, int idx, const op_desc *d, const char *v, int *h, int *w,
                      int allow_single) {
    double s[2];
    int n;
    const char *expect = allow_single ? "H or H,W: integers in [1, 16384]"
                                      : "H,W integers in [1, 16384]";
    if (!sp__parse_list(v, s, 2, &n)) return bad_value(err, idx, d, "size", v, expect);
    for (int i = 0; i < n; i++)
        /* range first: converting an out-of-range double to int is UB */
        if (!(s[i] >= 1 && s[i] <= SP_SPEC_MAX_SIZE) || s[i] != (double)(int)s[i])
            return bad_value(err, idx, d, "size", v, expect);
    *h = (int)s[0];
    *w = n == 2 ? (int)s[1] : (allow_single ? 0 : (int)s[0]);
    return SP_OK;
}

static int parse_pair(sp_error *err, int idx, const op_desc *d, const char *key,
                      const char *v, double lo_min, int positive, double out[2]) {
    double s[2];
    int n;
    if (!sp__parse_list(v, s, 2, &n) || n != 2 || s[0] < lo_min || s[1] < s[0] ||
        (positive && !(s[0] > 0)))
        return bad_value(err, idx, d, key, v,
                         positive ? "a,b with 0 < a <= b" : "a,b with 0 <= a <= b");
    out[0] = s[0];
    out[1] = s[1];
    return SP_OK;
}

/* resize / random_resized_crop interpolation=bilinear (default) | bicubic. */
static int parse_interp(sp_error *err, int idx, const op_desc *d, const char *v, int *filter) {
    *filter = SP_RESAMPLE_BILINEAR;
    if (v && strcmp(v, "bicubic") == 0) *filter = SP_RESAMPLE_BICUBIC;
    else if (v && strcmp(v, "bilinear") != 0)
        return bad_value(err, idx, d, "interpolation", v, "bilinear or bicubic");
    return SP_OK;
}

/* color_jitter's hue: h (range [-h, h], 0 <= h <= 0.5) or lo,hi with
 * -0.5 <= lo <= hi <= 0.5, as torchvision; absent or 0: no hue. */
static int parse_hue(sp_error *err, int idx, const op_desc *d, const char *v, double hue[2]) {
    hue[0] = hue[1] = 0.0;
    if (!v) return SP_OK;
    double s[2];
    int n;
    if (!sp__parse_list(v, s, 2, &n) || (n == 1 && !(s[0] >= 0 && s[0] <= 0.5)) ||
        (n == 2 && !(s[0] >= -0.5 && s[0] <= s[1] && s[1] <= 0.5)))
        return bad_value(err, idx, d, "hue", v,
                         "h in [0, 0.5] (shift in [-h, h]) or lo,hi with -0.5 <= lo <= hi <= 0.5");
    hue[0] = n == 1 ? sp__canon_num(-s[0]) : s[0];
    hue[1] = n == 1 ? s[0] : s[1];
    if (hue[0] == 0) hue[0] = 0.0;   /* no "-0" in the canonical form */
    if (hue[1] == 0) hue[1] = 0.0;
    return SP_OK;
}

/* The pixel-value ops: their magnitude (bits, threshold, factor) and p
 * (default 0.5, torchvision's); random_apply's span and p (default 0.5, as
 * torchvision's RandomApply). */
static int parse_pixel(sp_op *op, const op_desc *d, int idx, const char *const *vals,
                       sp_error *err) {
    const char *v = vals[0];
    int pk = 0;   /* the index of p= among the keys */
    double x;
    if (op->kind == SP_OP_POSTERIZE) {
        pk = 1;
        if (!sp__parse_num(v, &x) || !(x >= 0 && x <= 8) || x != (double)(int)x)
            return bad_value(err, idx, d, "bits", v, "an integer in [0, 8]");
        op->bits = (int)x;
    } else if (op->kind == SP_OP_SOLARIZE) {
        pk = 1;
        if (!sp__parse_num(v, &op->level) || !(op->level >= 0 && op->level <= 255))
            return bad_value(err, idx, d, "threshold", v, "a number in [0, 255]");
    } else if (op->kind == SP_OP_SHARPNESS) {
        pk = 1;
        if (!sp__parse_num(v, &op->level) || !(op->level >= 0 && op->level <= SP_FACTOR_MAX))
            return bad_value(err, idx, d, "factor", v, "a number in [0, 255]");
    } else if (op->kind == SP_OP_RANDOM_APPLY) {
        pk = 1;
        if (!sp__parse_num(v, &x) || !(x >= 1 && x < SP_SPEC_MAX_OPS) || x != (double)(int)x)
            return bad_value(err, idx, d, "ops", v, "an integer in [1, 63]: the ops that follow");
        op->span = (int)x;
    }
    op->p = 0.5;
    if ((v = vals[pk]) && (!sp__parse_num(v, &op->p) || op->p < 0 || op->p > 1))
        return bad_value(err, idx, d, "p", v, "a probability in [0, 1]");
    return SP_OK;
}

/* Parse the values of one op whose key=value strings are in vals[]. */
static int parse_values(sp_pipeline *p, sp_op *op, const op_desc *d, int idx,
                        const char *const *vals, sp_error *err) {
    const char *v;
    switch (op->kind) {
    case SP_OP_DECODE:
        op->channels = 3;
        op->dct = 0;   /* default: torchvision's pixels (no DCT-domain scaling) */
        if ((v = vals[0])) {
            if (strcmp(v, "rgb") == 0) op->channels = 3;
            else if (strcmp(v, "gray") == 0) op->channels = 1;
            else return bad_value(err, idx, d, "mode", v, "rgb or gray");
        }
        if ((v = vals[1])) {
            if (strcmp(v, "auto") == 0) op->dct = 1;
            else if (strcmp(v, "off") == 0) op->dct = 0;
            else return bad_value(err, idx, d, "dct", v, "auto or off");
        }
        return SP_OK;
    case SP_OP_RRC: {
        int rc = parse_size(err, idx, d, vals[0], &op->h, &op->w, 0);
        op->scale[0] = 0.08;
        op->scale[1] = 1.0;
        op->ratio[0] = 0.75;
        op->ratio[1] = sp__canon_num(4.0 / 3.0);
        if (!rc && vals[1]) rc = parse_pair(err, idx, d, "scale", vals[1], 0.0, 0, op->scale);
        if (!rc && vals[2]) rc = parse_pair(err, idx, d, "ratio", vals[2], 0.0, 1, op->ratio);
        return rc ? rc : parse_interp(err, idx, d, vals[3], &op->filter);
    }
    case SP_OP_RESIZE: {
        int rc = parse_size(err, idx, d, vals[0], &op->h, &op->w, 1);
        return rc ? rc : parse_interp(err, idx, d, vals[1], &op->filter);
    }
    case SP_OP_CENTER_CROP:
        return parse_size(err, idx, d, vals[0], &op->h, &op->w, 0);
    case SP_OP_HFLIP:
    case SP_OP_VFLIP:
    case SP_OP_GRAYSCALE:
        op->p = op->kind == SP_OP_GRAYSCALE ? 0.1 : 0.5;
        if ((v = vals[0]) && (!sp__parse_num(v, &op->p) || op->p < 0 || op->p > 1))
            return bad_value(err, idx, d, "p", v, "a probability in [0, 1]");
        return SP_OK;
    case SP_OP_COLOR_JITTER:
        for (int k = 0; k < 3; k++) {
            op->jitter[k][0] = op->jitter[k][1] = 1.0;
            if (!(v = vals[k])) continue;
            double s[2];
            int n;
            if (!sp__parse_list(v, s, 2, &n) || s[0] < 0 || (n == 2 && s[1] < s[0]) ||
                s[n - 1] > SP_FACTOR_MAX || (n == 1 && s[0] + 1.0 > SP_FACTOR_MAX))
                return bad_value(err, idx, d, d->keys[k], v,
                                 "b >= 0 (factor in [max(0, 1-b), 1+b]) or lo,hi with "
                                 "0 <= lo <= hi <= 255");
            if (n == 1) {
                op->jitter[k][0] = sp__canon_num(1.0 - s[0] > 0 ? 1.0 - s[0] : 0.0);
                op->jitter[k][1] = sp__canon_num(1.0 + s[0]);
            } else {
                op->jitter[k][0] = s[0];
                op->jitter[k][1] = s[1];
            }
        }
        return parse_hue(err, idx, d, vals[3], op->hue);
    case SP_OP_INVERT:
    case SP_OP_POSTERIZE:
    case SP_OP_SOLARIZE:
    case SP_OP_AUTOCONTRAST:
    case SP_OP_EQUALIZE:
    case SP_OP_SHARPNESS:
    case SP_OP_RANDOM_APPLY:
        return parse_pixel(op, d, idx, vals, err);
    case SP_OP_RANDOM_CROP:
    case SP_OP_GAUSSIAN_BLUR:
    case SP_OP_RANDOM_ERASING:
    case SP_OP_ROTATE:
        return sp__geom_parse(p, op, idx, d->name, vals, err);
    case SP_OP_AFFINE: case SP_OP_AUTO_AUGMENT: case SP_OP_RAND_AUGMENT: case SP_OP_TRIVIAL_AUGMENT:
        return sp__policy_parse(p, op, idx, d->name, vals, err);
    case SP_OP_TARGETS: return sp__targets_parse(op, idx, vals, err);
    case SP_OP_RANDOM_ZOOM_OUT: case SP_OP_RANDOM_IOU_CROP:
        return sp__detcrop_parse(p, op, idx, d->name, vals, err);
    case SP_OP_NORMALIZE: {
        int nm, ns, c = p->channels;
        if (!sp__parse_list(vals[0], op->mean, 3, &nm) || (nm != 1 && nm != c))
            return bad_value(err, idx, d, "mean", vals[0],
                             c == 3 ? "1 or 3 numbers" : "1 number (gray pipeline)");
        if (!vals[1]) return BAD("missing required key \"%s\"", "std");
        if (!sp__parse_list(vals[1], op->std, 3, &ns) || (ns != 1 && ns != c))
            return bad_value(err, idx, d, "std", vals[1],
                             c == 3 ? "1 or 3 positive numbers" : "1 positive number");
        for (int i = 0; i < ns; i++)
            if (!(op->std[i] > 0)) return bad_value(err, idx, d, "std", vals[1], "std > 0");
        for (int i = nm; i < c; i++) op->mean[i] = op->mean[0];
        for (int i = ns; i < c; i++) op->std[i] = op->std[0];
        op->nmean = c;
        return SP_OK;
    }
    }
    return SP_EINVAL;
}
#undef BAD

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
    for (int i = 0; i < N_OPS; i++) {
        snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%s", i ? ", " : "", OPS[i].name);
        int dist = edit_distance(name, OPS[i].name);
        if (dist < bd) bd = dist, best = OPS[i].name;
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

/* Parse one op from its tokens (tok[0] is the name). */
static int parse_op(sp_pipeline *p, int idx, char **tok, int ntok, sp_error *err) {
    const op_desc *d = NULL;
    for (int i = 0; i < N_OPS; i++)
        if (strcmp(tok[0], OPS[i].name) == 0) d = &OPS[i];
    if (!d) return unknown_op(idx, tok[0], err);
    const char *vals[10] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
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
                            idx, d->name, d->required);
    if (d->kind == SP_OP_DECODE && idx != 0)
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": decode must be the first op",
                            idx, d->name);
    if (idx > 0 && p->ops[idx - 1].kind == SP_OP_TARGETS)
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": no op may follow targets "
                            "(it must be last)", idx, d->name);
    if (p->has_normalize && d->kind != SP_OP_RANDOM_ERASING && d->kind != SP_OP_TARGETS)
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": no op but random_erasing may "
                            "follow normalize (it must be last)", idx, d->name);
    if (p->has_erasing && d->kind != SP_OP_RANDOM_ERASING && d->kind != SP_OP_TARGETS)
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": no op but random_erasing may "
                            "follow random_erasing (it works on the output values)", idx, d->name);
    sp_op *op = &p->ops[idx];
    memset(op, 0, sizeof *op);
    op->kind = d->kind;
    int rc = parse_values(p, op, d, idx, vals, err);
    if (rc) return rc;
    for (int j = 0; d->kind == SP_OP_TARGETS && j < idx; j++)   /* targets_spec.c */
        for (int o = 0; o < N_OPS && !sp__targets_moves(p->ops[j].kind); o++)
            if (OPS[o].kind == p->ops[j].kind)
                return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": it cannot move "
                                    "boxes and keypoints yet, so a pipeline with targets "
                                    "refuses it", j, OPS[o].name);
    if (op->kind == SP_OP_DECODE) {
        p->has_decode = 1;
        p->channels = op->channels;
        p->dct = op->dct;
    }
    if (op->kind == SP_OP_NORMALIZE) p->has_normalize = 1;
    if (op->kind == SP_OP_RANDOM_ERASING) p->has_erasing = 1;
    return SP_OK;
}

/* ---- canonical form ------------------------------------------------------------ */

static void canon_op(sp__sbuf *b, const sp_op *op) {
    static const char *const jk[3] = {"brightness", "contrast", "saturation"};
    switch (op->kind) {
    case SP_OP_DECODE:
        sp__sbuf_printf(b, "decode mode=%s dct=%s", op->channels == 1 ? "gray" : "rgb",
                        op->dct ? "auto" : "off");
        break;
    case SP_OP_RRC:
        sp__sbuf_printf(b, "random_resized_crop size=%d,%d scale=%.9g,%.9g ratio=%.9g,%.9g",
                        op->h, op->w, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1]);
        if (op->filter == SP_RESAMPLE_BICUBIC)   /* only then: bilinear forms unchanged */
            sp__sbuf_printf(b, " interpolation=bicubic");
        break;
    case SP_OP_RESIZE:
        if (op->w) sp__sbuf_printf(b, "resize size=%d,%d", op->h, op->w);
        else sp__sbuf_printf(b, "resize size=%d", op->h);
        if (op->filter == SP_RESAMPLE_BICUBIC) sp__sbuf_printf(b, " interpolation=bicubic");
        break;
    case SP_OP_CENTER_CROP: sp__sbuf_printf(b, "center_crop size=%d,%d", op->h, op->w); break;
    case SP_OP_HFLIP: sp__sbuf_printf(b, "hflip p=%.9g", op->p); break;
    case SP_OP_VFLIP: sp__sbuf_printf(b, "vflip p=%.9g", op->p); break;
    case SP_OP_GRAYSCALE: sp__sbuf_printf(b, "grayscale p=%.9g", op->p); break;
    case SP_OP_COLOR_JITTER:
        sp__sbuf_printf(b, "color_jitter");
        for (int k = 0; k < 3; k++)
            sp__sbuf_printf(b, " %s=%.9g,%.9g", jk[k], op->jitter[k][0], op->jitter[k][1]);
        if (op->hue[0] != 0 || op->hue[1] != 0)   /* only when given: old forms unchanged */
            sp__sbuf_printf(b, " hue=%.9g,%.9g", op->hue[0], op->hue[1]);
        break;
    case SP_OP_INVERT: sp__sbuf_printf(b, "invert p=%.9g", op->p); break;
    case SP_OP_POSTERIZE: sp__sbuf_printf(b, "posterize bits=%d p=%.9g", op->bits, op->p); break;
    case SP_OP_SOLARIZE:
        sp__sbuf_printf(b, "solarize threshold=%.9g p=%.9g", op->level, op->p);
        break;
    case SP_OP_AUTOCONTRAST: sp__sbuf_printf(b, "autocontrast p=%.9g", op->p); break;
    case SP_OP_EQUALIZE: sp__sbuf_printf(b, "equalize p=%.9g", op->p); break;
    case SP_OP_SHARPNESS:
        sp__sbuf_printf(b, "sharpness factor=%.9g p=%.9g", op->level, op->p);
        break;
    case SP_OP_RANDOM_APPLY: sp__sbuf_printf(b, "random_apply ops=%d p=%.9g", op->span, op->p); break;
    case SP_OP_RANDOM_CROP:
    case SP_OP_GAUSSIAN_BLUR:
    case SP_OP_RANDOM_ERASING:
    case SP_OP_ROTATE: sp__geom_canon(b, op); break;
    case SP_OP_AFFINE: case SP_OP_AUTO_AUGMENT: case SP_OP_RAND_AUGMENT: case SP_OP_TRIVIAL_AUGMENT:
        sp__policy_canon(b, op);
        break;
    case SP_OP_TARGETS: sp__targets_canon(b, op); break;
    case SP_OP_RANDOM_ZOOM_OUT: case SP_OP_RANDOM_IOU_CROP: sp__detcrop_canon(b, op); break;
    case SP_OP_NORMALIZE:
        sp__sbuf_printf(b, "normalize mean=");
        for (int i = 0; i < op->nmean; i++) sp__sbuf_printf(b, "%s%.9g", i ? "," : "", op->mean[i]);
        sp__sbuf_printf(b, " std=");
        for (int i = 0; i < op->nmean; i++) sp__sbuf_printf(b, "%s%.9g", i ? "," : "", op->std[i]);
        break;
    }
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
        if (ra->kind != SP_OP_RANDOM_APPLY) continue;
        int end = i + ra->span;
        if (end >= p->nops)
            return sp_error_set(err, SP_ESPEC, "pipeline op %d \"random_apply\": ops=%d reaches "
                                "past the last op (op %d)", i, ra->span, p->nops - 1);
        for (int j = i + 1; j <= end; j++) {
            sp_op_kind k = p->ops[j].kind;
            if (sp__op_is_geometric(k) || k == SP_OP_NORMALIZE || k == SP_OP_RANDOM_ERASING ||
                k == SP_OP_RANDOM_ZOOM_OUT || k == SP_OP_RANDOM_IOU_CROP)
                return sp_error_set(err, SP_ESPEC, "pipeline op %d: a %s inside random_apply "
                                    "(op %d, ops=%d); only ops that keep the image size may be "
                                    "random-applied", j, k == SP_OP_NORMALIZE ? "normalize" :
                                    k == SP_OP_RANDOM_ERASING ? "random_erasing" :
                                    "crop or resize", i, ra->span);
            if (k == SP_OP_RANDOM_APPLY && j + p->ops[j].span > end)
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
        if (p->ops[i].kind == SP_OP_NORMALIZE) n = &p->ops[i];
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) {
            if (!n) { p->norm_table[c][v] = p->unit_table[v]; continue; }
            int cc = c < n->nmean ? c : 0;
            float m = (float)n->mean[cc], s = (float)n->std[cc];
            float x = (float)v / 255.0f;   /* each assignment rounds to float */
            x = x - m;
            x = x / s;
            p->norm_table[c][v] = x;
        }
    for (int v = 0; v < 256; v++) {
        for (int c = 0; c < 3; c++) {
            p->half_table[0][c][v] = sp__to_bf16(p->norm_table[c][v]);
            p->half_table[1][c][v] = sp__to_f16(p->norm_table[c][v]);
        }
        p->half_table[0][3][v] = sp__to_bf16(p->unit_table[v]);
        p->half_table[1][3][v] = sp__to_f16(p->unit_table[v]);
    }
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
            canon_op(&b, &p->ops[i]);
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

const char *sp_pipeline_canonical(const sp_pipeline *p) { return p->canonical; }

int sp_pipeline_has_normalize(const sp_pipeline *p) { return p->has_normalize; }

void sp__resize_dims(const sp_op *op, int W, int H, int *ow, int *oh) {
    if (op->w) { *ow = op->w; *oh = op->h; return; }
    /* torchvision Resize(int): the shorter side becomes S, the longer one
     * int(S * long / short) (floor; exact in integers). */
    int64_t s = op->h;
    if (W <= H) {
        *ow = (int)s;
        int64_t l = s * H / W;
        *oh = l > INT32_MAX ? INT32_MAX : (int)l;
    } else {
        *oh = (int)s;
        int64_t l = s * W / H;
        *ow = l > INT32_MAX ? INT32_MAX : (int)l;
    }
}

int sp_pipeline_output_dims(const sp_pipeline *p, int in_w, int in_h, int *out_h, int *out_w,
                            int *out_c, sp_error *err) {
    int w = in_w > 0 && in_h > 0 ? in_w : 0, h = w ? in_h : 0;
    for (int i = 0; i < p->nops; i++) {
        const sp_op *op = &p->ops[i];
        if (op->kind == SP_OP_RRC || op->kind == SP_OP_CENTER_CROP ||
            op->kind == SP_OP_RANDOM_CROP || (op->kind == SP_OP_RESIZE && op->w)) {
            w = op->w;
            h = op->h;
        } else if (op->kind == SP_OP_RESIZE && w) {
            sp__resize_dims(op, w, h, &w, &h);
        } else if (op->kind == SP_OP_RESIZE || op->kind == SP_OP_RANDOM_ZOOM_OUT ||
                   op->kind == SP_OP_RANDOM_IOU_CROP) {
            w = h = 0;   /* a drawn size: only a fixed-size op after it fixes the output */
        }
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
