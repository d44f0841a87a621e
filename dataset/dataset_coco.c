/* dataset_coco.c - a COCO-style instances JSON matched to a dataset's
 * samples (dataset_coco.h states the rules; docs/targets.md the user's
 * view).
 *
 * HOW IT WORKS: the file is read whole (bounded) and tokenized once
 * (common/json.c, bounded tokens and depth). The dataset's sample paths
 * are sorted once (an index array) so each images[i].file_name is found
 * by binary search; (id, sample) pairs sorted by id then serve the
 * annotations' image_id. Annotations are read in file order into flat
 * arrays, then grouped by sample with a counting sort (stable, so a
 * sample's boxes keep the file's order). Called by the loader; calls
 * common/ only.
 */
#include "dataset/dataset_coco.h"
#include "dataset/dataset_coco_mask.h"
#include "common/fileio_internal.h"
#include "common/hash_internal.h"
#include "common/json_internal.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 16
#define MAX_PATH_LEN 4096
#define MAX_COORD 16777216.0   /* 2^24 */

struct sp_coco {
    uint64_t nsamples;
    uint64_t *first;      /* nsamples + 1: sample i's boxes are first[i] .. first[i+1] */
    float *boxes;         /* 4 per box */
    int32_t *labels;
    float *kps;           /* 3K per box, or NULL */
    uint32_t k;
    sp_digest fp;
    uint64_t crowd, unmatched;
    double *segv;         /* the segmentations (dataset_coco_mask.h) */
    uint64_t *segat;      /* per box: its place in segv, or SP__COCO_NO_SEG */
    uint64_t unsegmented; /* boxes without a segmentation; the first one's annotation: */
    size_t first_unseg;
};

typedef struct idpair { int64_t id; uint64_t sample; } idpair;

/* One annotation read, before grouping. */
typedef struct ann { uint64_t sample; float box[4]; int32_t cat; uint64_t seg; size_t idx; } ann;

typedef struct ctx {
    const char *path;
    const sp__json *j;
    const sp_dataset *ds;
    struct pathidx *order;   /* the samples sorted by path */
    idpair *ids;
    size_t nids;
    ann *anns;
    float *kps;           /* 3K per ann */
    size_t nanns;
    uint32_t k;
    sp_coco *c;
    sp_error *err;
    sp__coco_seg seg;
} ctx;

typedef struct pathidx { const char *p; uint64_t i; } pathidx;
static int by_path(const void *a, const void *b) {
    int c = strcmp(((const pathidx *)a)->p, ((const pathidx *)b)->p);
    uint64_t x = ((const pathidx *)a)->i, y = ((const pathidx *)b)->i;
    return c ? c : x < y ? -1 : x > y;
}
static int by_id(const void *a, const void *b) {
    int64_t x = ((const idpair *)a)->id, y = ((const idpair *)b)->id;
    return x < y ? -1 : x > y;
}

static int fail(ctx *x, int code, const char *what, size_t i, const char *reason) {
    return sp_error_set(x->err, code, "%s: %s %zu: %s", x->path, what, i, reason);
}

/* A JSON number token as a finite double. */
static int num(const sp__json *j, long tok, double *out) {
    if (tok < 0 || j->t[tok].kind != SP__J_NUM) return -1;
    size_t n = j->t[tok].end - j->t[tok].start;
    char buf[64];
    if (n >= sizeof buf) return -1;
    memcpy(buf, j->s + j->t[tok].start, n);
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    if (!isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* Sample whose path is name, or -1 (binary search in x->order). */
static int64_t find_sample(const ctx *x, const char *name) {
    uint64_t lo = 0, hi = sp_dataset_size(x->ds);
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(x->order[mid].p, name);
        if (c == 0) return (int64_t)x->order[mid].i;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static int read_images(ctx *x, long arr) {
    const sp__json *j = x->j;
    if (arr < 0 || j->t[arr].kind != SP__J_ARR)
        return sp_error_set(x->err, SP_EFORMAT, "%s: \"images\" must be an array", x->path);
    x->ids = malloc((j->t[arr].size + 1) * sizeof *x->ids);
    char *name = malloc(MAX_PATH_LEN + 1);
    uint8_t *seen = calloc(sp_dataset_size(x->ds) + 1, 1);
    if (!x->ids || !name || !seen) {
        free(name);
        free(seen);
        return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
    }
    int rc = SP_OK;
    size_t e = (size_t)arr + 1;
    for (size_t i = 0; i < j->t[arr].size && !rc; i++, e = j->t[e].next) {
        int64_t id;
        if (j->t[e].kind != SP__J_OBJ) rc = fail(x, SP_EFORMAT, "image", i, "not an object");
        else if (sp__json_i64(j, sp__json_get(j, e, "id"), &id) != 0)
            rc = fail(x, SP_EFORMAT, "image", i, "\"id\" is not an integer");
        else if (sp__json_str(j, sp__json_get(j, e, "file_name"), name, MAX_PATH_LEN + 1) != 0)
            rc = fail(x, SP_EFORMAT, "image", i, "\"file_name\" is not a string of at most "
                      "4096 bytes");
        if (rc) break;
        int64_t s = find_sample(x, name);
        if (s >= 0 && seen[s]++) {
            rc = fail(x, SP_EFORMAT, "image", i, "its \"file_name\" is another image's too");
            break;
        }
        x->ids[x->nids].id = id;
        x->ids[x->nids++].sample = s < 0 ? UINT64_MAX : (uint64_t)s;
    }
    free(name);
    free(seen);
    if (rc) return rc;
    qsort(x->ids, x->nids, sizeof *x->ids, by_id);
    for (size_t i = 1; i < x->nids; i++)
        if (x->ids[i].id == x->ids[i - 1].id)
            return sp_error_set(x->err, SP_EFORMAT, "%s: two images have id %lld", x->path,
                                (long long)x->ids[i].id);
    return SP_OK;
}

static const idpair *find_id(const ctx *x, int64_t id) {
    idpair key = {id, 0};
    return bsearch(&key, x->ids, x->nids, sizeof *x->ids, by_id);
}

/* The keypoints of annotation i (token kt) into its slot of x->kps
 * (allocated, zeroed, for every annotation at the first keypoints). */
static int read_kps(ctx *x, size_t i, long kt, size_t total) {
    const sp__json *j = x->j;
    if (j->t[kt].kind != SP__J_ARR || j->t[kt].size % 3 || j->t[kt].size == 0 ||
        j->t[kt].size > 3 * SP_TARGETS_MAX_KEYPOINTS)
        return fail(x, SP_EFORMAT, "annotation", i, "\"keypoints\" must be 3K numbers, "
                    "1 <= K <= 256");
    uint32_t k = (uint32_t)(j->t[kt].size / 3);
    if (x->k && k != x->k)
        return fail(x, SP_EFORMAT, "annotation", i, "\"keypoints\" has another K than the "
                    "annotations before it");
    if (!x->k) {
        x->kps = calloc(total * 3 * (size_t)k + 1, sizeof *x->kps);
        if (!x->kps) return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
        x->k = k;
    }
    float *dst = x->kps + x->nanns * 3 * (size_t)k;
    size_t e = (size_t)kt + 1;
    for (size_t q = 0; q < 3 * (size_t)k; q++, e = j->t[e].next) {
        double v;
        if (num(j, (long)e, &v) != 0 || fabs(v) > MAX_COORD)
            return fail(x, SP_EFORMAT, "annotation", i, "a keypoint value is not a finite "
                        "number within 2^24");
        if (q % 3 == 2 && v != 0 && v != 1 && v != 2)
            return fail(x, SP_EFORMAT, "annotation", i, "a keypoint visibility is not 0, 1 "
                        "or 2");
        dst[q] = (float)v;
    }
    return SP_OK;
}

/* Annotation i (object token e) into x->anns[x->nanns], or left out. */
static int read_ann(ctx *x, size_t i, size_t e, size_t total) {
    const sp__json *j = x->j;
    int64_t img, cat, crowd = 0;
    if (j->t[e].kind != SP__J_OBJ) return fail(x, SP_EFORMAT, "annotation", i, "not an object");
    if (sp__json_i64(j, sp__json_get(j, e, "image_id"), &img) != 0)
        return fail(x, SP_EFORMAT, "annotation", i, "\"image_id\" is not an integer");
    const idpair *ip = find_id(x, img);
    if (!ip) return fail(x, SP_EFORMAT, "annotation", i, "\"image_id\" names no image");
    if (sp__json_i64(j, sp__json_get(j, e, "category_id"), &cat) != 0 || cat > INT32_MAX ||
        cat < INT32_MIN)
        return fail(x, SP_EFORMAT, "annotation", i, "\"category_id\" is not an int32");
    long ct = sp__json_get(j, e, "iscrowd");
    if (ct >= 0 && (sp__json_i64(j, ct, &crowd) != 0 || (crowd != 0 && crowd != 1)))
        return fail(x, SP_EFORMAT, "annotation", i, "\"iscrowd\" is not 0 or 1");
    long bt = sp__json_get(j, e, "bbox");
    if (bt < 0 || j->t[bt].kind != SP__J_ARR || j->t[bt].size != 4)
        return fail(x, SP_EFORMAT, "annotation", i, "\"bbox\" is not 4 numbers [x, y, w, h]");
    double b[4];
    size_t q = (size_t)bt + 1;
    for (int t = 0; t < 4; t++, q = j->t[q].next)
        if (num(j, (long)q, &b[t]) != 0 || fabs(b[t]) > MAX_COORD)
            return fail(x, SP_EFORMAT, "annotation", i, "a \"bbox\" value is not a finite "
                        "number within 2^24");
    if (b[2] < 0 || b[3] < 0)
        return fail(x, SP_EFORMAT, "annotation", i, "\"bbox\" has a negative width or height");
    long kt = sp__json_get(j, e, "keypoints");
    if (kt >= 0) {
        int rc = read_kps(x, i, kt, total);
        if (rc) return rc;
    }
    if (crowd) {
        x->c->crowd++;
        return SP_OK;
    }
    if (ip->sample == UINT64_MAX) {
        x->c->unmatched++;
        return SP_OK;
    }
    ann *a = &x->anns[x->nanns];
    int rc = sp__coco_seg_read(&x->seg, j, sp__json_get(j, e, "segmentation"), x->path, i,
                               &a->seg, x->err);
    if (rc) return rc;
    x->nanns++;
    a->idx = i;
    a->sample = ip->sample;
    a->box[0] = (float)b[0];
    a->box[1] = (float)b[1];
    a->box[2] = (float)(b[0] + b[2]);
    a->box[3] = (float)(b[1] + b[3]);
    a->cat = (int32_t)cat;
    return SP_OK;
}

/* Group the annotations by sample (counting sort, stable). */
static int group(ctx *x) {
    sp_coco *c = x->c;
    size_t n = x->nanns, k3 = 3 * (size_t)x->k;
    c->first = calloc(c->nsamples + 1, sizeof *c->first);
    c->boxes = malloc((4 * n + 1) * sizeof *c->boxes);
    c->labels = malloc((n + 1) * sizeof *c->labels);
    c->segat = malloc((n + 1) * sizeof *c->segat);
    if (k3) c->kps = malloc((k3 * n + 1) * sizeof *c->kps);
    if (!c->first || !c->boxes || !c->labels || !c->segat || (k3 && !c->kps))
        return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
    for (size_t a = 0; a < n; a++) c->first[x->anns[a].sample + 1]++;
    for (uint64_t i = 0; i < c->nsamples; i++) c->first[i + 1] += c->first[i];
    uint64_t *fill = calloc(c->nsamples + 1, sizeof *fill);
    if (!fill) return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
    for (size_t a = 0; a < n; a++) {
        uint64_t s = x->anns[a].sample, at = c->first[s] + fill[s]++;
        memcpy(c->boxes + 4 * at, x->anns[a].box, sizeof x->anns[a].box);
        c->labels[at] = x->anns[a].cat;
        c->segat[at] = x->anns[a].seg;
        if (x->anns[a].seg == SP__COCO_NO_SEG && !c->unsegmented++)
            c->first_unseg = x->anns[a].idx;
        if (k3) memcpy(c->kps + k3 * at, x->kps + k3 * a, k3 * sizeof *c->kps);
    }
    free(fill);
    c->k = x->k;
    return SP_OK;
}

static int parse(ctx *x, const sp__json *j) {
    if (j->t[0].kind != SP__J_OBJ)
        return sp_error_set(x->err, SP_EFORMAT, "%s: not a JSON object", x->path);
    int rc = read_images(x, sp__json_get(j, 0, "images"));
    if (rc) return rc;
    long arr = sp__json_get(j, 0, "annotations");
    if (arr < 0 || j->t[arr].kind != SP__J_ARR)
        return sp_error_set(x->err, SP_EFORMAT, "%s: \"annotations\" must be an array", x->path);
    size_t total = j->t[arr].size;
    x->anns = malloc((total + 1) * sizeof *x->anns);
    if (!x->anns) return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
    size_t e = (size_t)arr + 1;
    for (size_t i = 0; i < total && !rc; i++, e = j->t[e].next) rc = read_ann(x, i, e, total);
    return rc ? rc : group(x);
}

int sp_coco_open(const char *path, const sp_dataset *ds, const sp_coco_limits *lim,
                 sp_coco **out, sp_error *err) {
    *out = NULL;
    sp_coco_limits dl = {256ull << 20, (size_t)1 << 24};
    if (lim) dl = *lim;
    sp__buf buf = {NULL, 0};
    size_t len = 0;
    int rc = sp__read_regular(AT_FDCWD, path, path, 0, dl.max_bytes, &buf, &len, err);
    if (rc == SP_ELIMIT)
        rc = sp_error_set(err, SP_ELIMIT, "%s: annotations larger than %llu bytes", path,
                          (unsigned long long)dl.max_bytes);
    if (rc) {
        sp__buf_free(&buf);
        return rc;
    }
    sp__json j;
    ctx x = {path, &j, ds, NULL, NULL, 0, NULL, NULL, 0, 0, NULL, err, {NULL, 0, 0}};
    x.c = calloc(1, sizeof *x.c);
    uint64_t n = sp_dataset_size(ds);
    x.order = malloc((n + 1) * sizeof *x.order);
    rc = sp__json_parse(&j, (const char *)buf.p, len, MAX_DEPTH, dl.max_tokens, path, err);
    if (!rc && (!x.c || !x.order)) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    if (!rc) {
        sp__hash h;
        sp__hash_init(&h);
        sp__hash_str(&h, "seedpipe-coco-v1");
        sp__hash_bytes(&h, buf.p, len);
        x.c->fp = sp__hash_digest(&h);
        x.c->nsamples = n;
        for (uint64_t i = 0; i < n; i++) {
            const char *sp = sp_dataset_path(ds, i);
            x.order[i].p = sp ? sp : "";
            x.order[i].i = i;
        }
        qsort(x.order, n, sizeof *x.order, by_path);
        rc = parse(&x, &j);
    }
    sp__json_free(&j);
    sp__buf_free(&buf);
    free(x.order);
    free(x.ids);
    free(x.anns);
    free(x.kps);
    if (!rc) x.c->segv = x.seg.v;
    else free(x.seg.v);
    if (rc) {
        sp_coco_close(x.c);
        return rc;
    }
    *out = x.c;
    return SP_OK;
}

void sp_coco_close(sp_coco *c) {
    if (!c) return;
    free(c->first);
    free(c->boxes);
    free(c->labels);
    free(c->kps);
    free(c->segv);
    free(c->segat);
    free(c);
}

void sp_coco_get(const sp_coco *c, uint64_t i, sp_targets *t) {
    memset(t, 0, sizeof *t);
    if (i >= c->nsamples) return;
    uint64_t a = c->first[i];
    t->n = (uint32_t)(c->first[i + 1] - a);
    t->k = c->k;
    t->boxes = c->boxes + 4 * a;
    t->labels = c->labels + a;
    t->keypoints = c->k ? c->kps + 3 * (size_t)c->k * a : NULL;
}

sp_digest sp_coco_fingerprint(const sp_coco *c) { return c->fp; }
uint32_t sp_coco_keypoints(const sp_coco *c) { return c->k; }
uint64_t sp_coco_crowd(const sp_coco *c) { return c->crowd; }
uint64_t sp_coco_unmatched(const sp_coco *c) { return c->unmatched; }

uint32_t sp_coco_max_boxes(const sp_coco *c, uint64_t *which) {
    uint64_t best = 0;
    *which = 0;
    for (uint64_t i = 0; i < c->nsamples; i++)
        if (c->first[i + 1] - c->first[i] > best) {
            best = c->first[i + 1] - c->first[i];
            *which = i;
        }
    return best > UINT32_MAX ? UINT32_MAX : (uint32_t)best;
}

const double *sp_coco_segmentation(const sp_coco *c, uint64_t i, uint32_t box) {
    if (i >= c->nsamples || c->first[i] + box >= c->first[i + 1]) return NULL;
    uint64_t at = c->segat[c->first[i] + box];
    return at == SP__COCO_NO_SEG ? NULL : c->segv + at;
}

uint64_t sp_coco_unsegmented(const sp_coco *c, size_t *first) {
    *first = c->first_unseg;
    return c->unsegmented;
}
