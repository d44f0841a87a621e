/* dataset_coco_mask.c - COCO segmentations: read into a store of doubles
 * when the annotation file is opened, rasterised per sample at the decoded
 * image's size (dataset_coco_mask.h states the forms and bounds;
 * augment/targets_mask.c rasterises as pycocotools does). Called by
 * dataset_coco.c (reading) and the loader (rasterising).
 */
#include "dataset/dataset_coco_mask.h"
#include "seedpipe/masks.h"
#include "common/vec_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/masks_internal.h"

static int push(sp__coco_seg *s, double v) {
    return SP__VEC_PUSH(s->v, s->n, s->cap, 4096, v) != 0 ? SP_ENOMEM : SP_OK;
}

static int bad(const char *path, size_t ann, int code, const char *why, sp_error *err) {
    return sp_error_set(err, code, "%s: annotation %zu: \"segmentation\" %s", path, ann, why);
}

/* A plain decimal ("-12.375": at most 15 digits, no exponent) exactly:
 * the digits as an integer m < 10^15 < 2^53 and 10^f (f <= 15) are both
 * exact doubles, so m / 10^f is one correctly rounded division, the
 * double strtod() gives. 0, or -1 for another form (strtod() reads it). */
static int plain_decimal(const char *p, size_t n, double *v) {
    static const double p10[16] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
    size_t i = p[0] == '-';
    uint64_t m = 0;
    int digits = 0, frac = -1;
    for (; i < n; i++) {
        if (p[i] == '.' && frac < 0) {
            frac = 0;
        } else if (p[i] >= '0' && p[i] <= '9' && digits < 15) {
            m = m * 10 + (uint64_t)(p[i] - '0');
            digits++;
            frac += frac >= 0;
        } else {
            return -1;
        }
    }
    if (!digits) return -1;
    double x = (double)m / p10[frac > 0 ? frac : 0];
    *v = p[0] == '-' ? -x : x;
    return 0;
}

static int num(const sp__json *j, size_t tok, double *v) {
    if (j->t[tok].kind != SP__J_NUM) return -1;
    char buf[64];
    size_t n = j->t[tok].end - j->t[tok].start;
    if (n >= sizeof buf) return -1;
    if (plain_decimal(j->s + j->t[tok].start, n, v) == 0)
        return isfinite(*v) && fabs(*v) <= SP_MASK_MAX_COORD ? 0 : -1;
    memcpy(buf, j->s + j->t[tok].start, n);
    buf[n] = '\0';
    *v = strtod(buf, NULL);
    return isfinite(*v) && fabs(*v) <= SP_MASK_MAX_COORD ? 0 : -1;
}

static int read_polygons(sp__coco_seg *s, const sp__json *j, long tok, const char *path,
                         size_t ann, sp_error *err) {
    size_t np = j->t[tok].size;
    if (np == 0 || np > SP_MASK_MAX_POLYGONS)
        return bad(path, ann, np ? SP_ELIMIT : SP_EFORMAT, "has 0 or more than 1024 polygons",
                   err);
    if (push(s, 1) || push(s, (double)np)) return SP_ENOMEM;
    size_t p = (size_t)tok + 1;
    for (size_t i = 0; i < np; i++, p = j->t[p].next) {
        size_t n = j->t[p].size;
        if (j->t[p].kind != SP__J_ARR || n % 2 || n < 6 || n > 2 * (size_t)SP_MASK_MAX_POINTS)
            return bad(path, ann, SP_EFORMAT, "has a polygon that is not 3 to 65536 points "
                       "[x, y, x, y, ...]", err);
        if (push(s, (double)(n / 2))) return SP_ENOMEM;
        size_t q = p + 1;
        for (size_t k = 0; k < n; k++, q = j->t[q].next) {
            double v;
            if (num(j, q, &v))
                return bad(path, ann, SP_EFORMAT, "has a polygon coordinate that is not a "
                           "finite number within 2^24", err);
            if (push(s, v)) return SP_ENOMEM;
        }
    }
    return SP_OK;
}

static int read_rle(sp__coco_seg *s, const sp__json *j, long tok, const char *path, size_t ann,
                    sp_error *err) {
    long sz = sp__json_get(j, (size_t)tok, "size"), ct = sp__json_get(j, (size_t)tok, "counts");
    int64_t h, w;
    if (sz < 0 || j->t[sz].kind != SP__J_ARR || j->t[sz].size != 2 ||
        sp__json_i64(j, sp__json_at(j, (size_t)sz, 0), &h) || sp__json_i64(j, sp__json_at(j,
        (size_t)sz, 1), &w) || h <= 0 || w <= 0 || h > 65535 || w > 65535)
        return bad(path, ann, SP_EFORMAT, "RLE: \"size\" is not [h, w] in [1, 65535]", err);
    if (ct < 0 || (j->t[ct].kind != SP__J_ARR && j->t[ct].kind != SP__J_STR))
        return bad(path, ann, SP_EFORMAT, "RLE: \"counts\" is not a list or a string", err);
    size_t at = s->n;
    if (push(s, 2) || push(s, (double)h) || push(s, (double)w) || push(s, 0)) return SP_ENOMEM;
    size_t m = 0;
    if (j->t[ct].kind == SP__J_ARR) {
        if (j->t[ct].size > SP_MASK_MAX_COUNTS)
            return bad(path, ann, SP_ELIMIT, "RLE: more than 2^24 counts", err);
        size_t q = (size_t)ct + 1;
        for (size_t k = 0; k < j->t[ct].size; k++, q = j->t[q].next) {
            uint64_t c;
            if (sp__json_u64(j, (long)q, &c) || c > UINT32_MAX)
                return bad(path, ann, SP_EFORMAT, "RLE: a count is not an integer in "
                           "[0, 2^32)", err);
            if (push(s, (double)c)) return SP_ENOMEM;
        }
        m = j->t[ct].size;
    } else {
        size_t len = j->t[ct].end - j->t[ct].start;
        char *str = malloc(len + 1);
        uint32_t *cn = malloc((len + 1) * sizeof *cn);
        int rc = !str || !cn ? SP_ENOMEM : SP_OK;
        if (!rc && sp__json_str(j, ct, str, len + 1) != 0)
            rc = bad(path, ann, SP_EFORMAT, "RLE: \"counts\" is not a valid string", err);
        char what[96];
        snprintf(what, sizeof what, "annotation %zu", ann);
        if (!rc) rc = sp__mask_rle_string(str, strlen(str), cn, SP_MASK_MAX_COUNTS, &m, what, err);
        for (size_t k = 0; !rc && k < m; k++)
            if (push(s, (double)cn[k])) rc = SP_ENOMEM;
        free(str);
        free(cn);
        if (rc == SP_ENOMEM) return sp_error_set(err, rc, "%s: out of memory", path);
        if (rc) {
            char msg[sizeof err->msg];
            memcpy(msg, err->msg, sizeof msg);
            return sp_error_set(err, rc, "%s: %s", path, msg);
        }
    }
    s->v[at + 3] = (double)m;
    return SP_OK;
}

int sp__coco_seg_read(sp__coco_seg *s, const sp__json *j, long tok, const char *path, size_t ann,
                      uint64_t *at, sp_error *err) {
    *at = SP__COCO_NO_SEG;
    if (tok < 0) return SP_OK;
    size_t start = s->n;
    int rc;
    if (j->t[tok].kind == SP__J_ARR) rc = read_polygons(s, j, tok, path, ann, err);
    else if (j->t[tok].kind == SP__J_OBJ) rc = read_rle(s, j, tok, path, ann, err);
    else rc = bad(path, ann, SP_EFORMAT, "is neither a list of polygons nor an RLE object", err);
    if (rc == SP_ENOMEM) rc = sp_error_set(err, rc, "%s: out of memory", path);
    if (rc) {
        s->n = start;
        return rc;
    }
    *at = start;
    return SP_OK;
}
