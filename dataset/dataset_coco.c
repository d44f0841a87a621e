/* dataset_coco.c - a COCO-style instances JSON matched to a dataset's
 * samples (dataset_coco.h states the rules; docs/targets.md the user's
 * view).
 *
 * HOW IT WORKS: the file is streamed (dataset_coco_stream.c): never held
 * whole, each image and each annotation tokenized alone (bounded tokens,
 * bytes and depth), after a first pass has checked the whole file's
 * grammar. The dataset's sample paths are sorted once (an index array) so
 * each images[i].file_name is found by binary search; (id, sample) pairs
 * sorted by id then serve the annotations' image_id. Annotations are read
 * in file order into flat arrays, then grouped by sample with a counting
 * sort (stable, so a sample's boxes keep the file's order). Called by the
 * loader; calls dataset_coco_stream.c, dataset_coco_mask.c and common/.
 */
#include "dataset/dataset_coco.h"
#include "dataset/dataset_coco_mask.h"
#include "dataset/dataset_coco_stream.h"
#include "dataset/dataset_internal.h"
#include "dataset/dataset_tar.h"
#include "common/hash_internal.h"
#include "common/json_internal.h"
#include "common/vec_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    uint64_t *rawfirst;   /* keep_raw: nsamples + 1, into rawoff and rawlen */
    uint64_t *rawoff, *rawlen;
    uint64_t *canon;      /* nsamples, or NULL: the first sample of its path (a list
                             naming one file twice: each copy has the image's targets) */
};

typedef struct idpair { int64_t id; uint64_t sample; } idpair;
/* The sample whose targets sample i has (itself, or the first of its path). */
static uint64_t canonical(const sp_coco *c, uint64_t i) {
    return c->canon && i < c->nsamples ? c->canon[i] : i;
}


/* keep_raw: where an annotation of a sample lies in the file. */
typedef struct raw { uint64_t sample, off, len; } raw;

/* One annotation read, before grouping. */
typedef struct ann { uint64_t sample; float box[4]; int32_t cat; uint64_t seg; size_t idx; } ann;

typedef struct ctx {
    const char *path;
    const sp__json *j;       /* the element at hand (token 0) */
    const sp_dataset *ds;
    const sp_coco_limits *lim;
    const struct sp__coco_walk *walk;   /* the file's walk (its element offsets) */
    raw *raws;            /* keep_raw: each annotation of a sample, in file order */
    size_t nraw, rawcap;
    struct pathidx *order;   /* the samples sorted by path */
    idpair *ids;
    size_t nids;
    uint8_t *seen;           /* per sample: named by an image */
    ann *anns;
    float *kps;           /* 3K per ann */
    size_t nanns, cap;    /* kept; room for */
    size_t base;          /* members: the annotations of the samples before */
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
    uint64_t lo = 0, hi = sp__dataset_size(x->ds);
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(x->order[mid].p, name);
        if (c == 0) return (int64_t)canonical(x->c, x->order[mid].i);
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* The streamed walk's begin(): room for the images and annotations. */
static int begin(void *arg, size_t nimages, size_t nanns) {
    ctx *x = arg;
    x->ids = malloc((nimages + 1) * sizeof *x->ids);
    x->seen = calloc(sp__dataset_size(x->ds) + 1, 1);
    x->anns = malloc((nanns + 1) * sizeof *x->anns);
    x->cap = nanns + 1;
    if (!x->ids || !x->seen || !x->anns)
        return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
    return SP_OK;
}

/* Image i (token 0 of j): its (id, sample). */
static int read_image(void *arg, const sp__json *j, size_t i) {
    ctx *x = arg;
    char name[MAX_PATH_LEN + 1];
    int64_t id;
    if (j->t[0].kind != SP__J_OBJ) return fail(x, SP_EFORMAT, "image", i, "not an object");
    if (sp__json_i64(j, sp__json_get(j, 0, "id"), &id) != 0)
        return fail(x, SP_EFORMAT, "image", i, "\"id\" is not an integer");
    if (sp__json_str(j, sp__json_get(j, 0, "file_name"), name, sizeof name) != 0)
        return fail(x, SP_EFORMAT, "image", i, "\"file_name\" is not a string of at most "
                    "4096 bytes");
    int64_t s = find_sample(x, name);
    if (s >= 0 && x->seen[s]++)
        return fail(x, SP_EFORMAT, "image", i, "its \"file_name\" is another image's too");
    x->ids[x->nids].id = id;
    x->ids[x->nids++].sample = s < 0 ? UINT64_MAX : (uint64_t)s;
    return SP_OK;
}

/* After the images: sorted by id, no id twice. */
static int ids_sorted(void *arg) {
    ctx *x = arg;
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
static int read_kps(ctx *x, size_t i, long kt) {
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
        x->kps = calloc(x->cap * 3 * (size_t)k + 1, sizeof *x->kps);
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

/* Room for one more annotation (and its keypoints) in x->anns. */
static int reserve(ctx *x) {
    if (x->nanns < x->cap) return SP_OK;
    size_t cap = x->cap ? 2 * x->cap : 64, k3 = 3 * (size_t)x->k;
    ann *a = realloc(x->anns, cap * sizeof *a);
    if (a) x->anns = a;
    float *kp = k3 ? realloc(x->kps, cap * k3 * sizeof *kp) : NULL;
    if (kp) {
        memset(kp + x->cap * k3, 0, (cap - x->cap) * k3 * sizeof *kp);
        x->kps = kp;
    }
    if (!a || (k3 && !kp)) return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
    x->cap = cap;
    return SP_OK;
}

/* Annotation i (object token e of j) of `sample` (UINT64_MAX: an image of
 * no sample) into x->anns[x->nanns], or left out. */
static int read_ann_of(ctx *x, const sp__json *j, size_t e, size_t i, uint64_t sample) {
    int64_t cat, crowd = 0;
    x->j = j;
    int rc = reserve(x);
    if (rc) return rc;
    if (x->kps)   /* the slot may hold a left-out annotation's keypoints */
        memset(x->kps + x->nanns * 3 * (size_t)x->k, 0, 3 * (size_t)x->k * sizeof *x->kps);
    if (j->t[e].kind != SP__J_OBJ) return fail(x, SP_EFORMAT, "annotation", i, "not an object");
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
    if (kt >= 0 && (rc = read_kps(x, i, kt)) != 0) return rc;
    if (crowd) {
        x->c->crowd++;
        return SP_OK;
    }
    if (sample == UINT64_MAX) {
        x->c->unmatched++;
        return SP_OK;
    }
    ann *a = &x->anns[x->nanns];
    size_t had = x->seg.n;
    rc = sp__coco_seg_read(&x->seg, j, sp__json_get(j, e, "segmentation"), x->path, i,
                               &a->seg, x->err);
    if (rc) return rc;
    if (!x->lim->keep_segmentations && a->seg != SP__COCO_NO_SEG) {
        x->seg.n = had;        /* checked, not kept */
        a->seg = SP__COCO_NOT_KEPT;
    }
    x->nanns++;
    a->idx = x->base + i;
    a->sample = sample;
    a->box[0] = (float)b[0];
    a->box[1] = (float)b[1];
    a->box[2] = (float)(b[0] + b[2]);
    a->box[3] = (float)(b[1] + b[3]);
    a->cat = (int32_t)cat;
    return SP_OK;
}

/* Annotation i of the file (token 0 of j): its image_id names its sample. */
static int read_ann(void *arg, const sp__json *j, size_t i) {
    ctx *x = arg;
    int64_t img;
    if (j->t[0].kind != SP__J_OBJ) return fail(x, SP_EFORMAT, "annotation", i, "not an object");
    if (sp__json_i64(j, sp__json_get(j, 0, "image_id"), &img) != 0)
        return fail(x, SP_EFORMAT, "annotation", i, "\"image_id\" is not an integer");
    const idpair *ip = find_id(x, img);
    if (!ip) return fail(x, SP_EFORMAT, "annotation", i, "\"image_id\" names no image");
    if (x->lim->keep_raw && ip->sample != UINT64_MAX) {
        if (SP__VEC_RESERVE(x->raws, x->rawcap, x->nraw + 1, 1024) != 0)
            return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
        x->raws[x->nraw++] = (raw){ip->sample, x->walk->at, j->len};
    }
    return read_ann_of(x, j, 0, i, ip->sample);
}

/* keep_raw: the annotations' places grouped by sample (stable). */
static int group_raw(ctx *x) {
    sp_coco *c = x->c;
    c->rawfirst = calloc(c->nsamples + 2, sizeof *c->rawfirst);
    c->rawoff = malloc((x->nraw + 1) * sizeof *c->rawoff);
    c->rawlen = malloc((x->nraw + 1) * sizeof *c->rawlen);
    if (!c->rawfirst || !c->rawoff || !c->rawlen)
        return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
    for (size_t a = 0; a < x->nraw; a++) c->rawfirst[x->raws[a].sample + 2]++;
    for (uint64_t i = 0; i < c->nsamples; i++) c->rawfirst[i + 2] += c->rawfirst[i + 1];
    for (size_t a = 0; a < x->nraw; a++) {   /* rawfirst[s + 1]: the fill of sample s */
        uint64_t at = c->rawfirst[x->raws[a].sample + 1]++;
        c->rawoff[at] = x->raws[a].off;
        c->rawlen[at] = x->raws[a].len;
    }
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
    return x->lim->keep_raw ? group_raw(x) : SP_OK;
}

sp_coco_limits sp__coco_default_limits(void) {
    sp_coco_limits l = {(uint64_t)1 << 36, (size_t)1 << 24, (uint64_t)1 << 28, 1, 0};
    return l;
}

/* The dataset's samples sorted by path (x->order). */
static int sort_samples(ctx *x) {
    uint64_t n = sp__dataset_size(x->ds);
    x->order = malloc((n + 1) * sizeof *x->order);
    if (!x->order) return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
    for (uint64_t i = 0; i < n; i++) {
        const char *sp = sp_dataset_path(x->ds, i);
        x->order[i].p = sp ? sp : "";
        x->order[i].i = i;
    }
    qsort(x->order, n, sizeof *x->order, by_path);
    /* A path named twice (a list may): every copy maps to the first one,
     * which the annotations are matched to. Equal paths are adjacent, the
     * lowest index first. */
    for (uint64_t k = 1; k < n; k++) {
        if (!x->order[k].p[0] || strcmp(x->order[k].p, x->order[k - 1].p) != 0) continue;
        if (!x->c->canon) {
            x->c->canon = malloc(n * sizeof *x->c->canon);
            if (!x->c->canon) return sp_error_set(x->err, SP_ENOMEM, "%s: out of memory", x->path);
            for (uint64_t i = 0; i < n; i++) x->c->canon[i] = i;
        }
        x->c->canon[x->order[k].i] = x->c->canon[x->order[k - 1].i];
    }
    return SP_OK;
}


int sp__coco_open(const char *path, const sp_dataset *ds, const sp_coco_limits *lim,
                  sp_coco **out, sp_error *err) {
    *out = NULL;
    sp_coco_limits dl = lim ? *lim : sp__coco_default_limits();
    ctx x;
    memset(&x, 0, sizeof x);
    x.path = path;
    x.ds = ds;
    x.lim = &dl;
    x.err = err;
    x.c = calloc(1, sizeof *x.c);
    int rc = x.c ? sort_samples(&x) : sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    if (!rc) {
        x.c->nsamples = sp__dataset_size(ds);
        sp__coco_walk w = {begin, read_image, ids_sorted, read_ann, &x, 0};
        x.walk = &w;
        rc = sp__coco_stream(path, &dl, &w, &x.c->fp, err);
    }
    if (!rc) rc = group(&x);
    free(x.raws);
    free(x.order);
    free(x.ids);
    free(x.seen);
    free(x.anns);
    free(x.kps);
    if (!rc) x.c->segv = x.seg.v;
    else free(x.seg.v);
    if (rc) {
        sp__coco_close(x.c);
        return rc;
    }
    *out = x.c;
    return SP_OK;
}

/* Sample i's annotations from its member (bytes, len; NULL: none), named
 * x->path: an array of annotation objects, or an object whose
 * "annotations" is one. */
static int read_member(ctx *x, uint64_t i, const uint8_t *bytes, size_t len, sp__hash *h) {
    sp__hash_u64(h, bytes ? (uint64_t)len : UINT64_MAX);
    if (!bytes) return SP_OK;
    sp__hash_bytes(h, bytes, len);
    if (len > x->lim->max_element)
        return sp_error_set(x->err, SP_ELIMIT, "%s: %zu bytes, more than %llu", x->path, len,
                            (unsigned long long)x->lim->max_element);
    sp__json j;
    int rc = sp__json_parse(&j, (const char *)bytes, len, 15, x->lim->max_tokens, x->path,
                            x->err);
    long arr = rc ? -1 : j.t[0].kind == SP__J_ARR ? 0 : sp__json_get(&j, 0, "annotations");
    if (!rc && (arr < 0 || j.t[arr].kind != SP__J_ARR))
        rc = sp_error_set(x->err, SP_EFORMAT, "%s: not an array of annotations (nor an object "
                          "whose \"annotations\" is one)", x->path);
    size_t e = (size_t)arr + 1, n = rc ? 0 : j.t[arr].size;
    for (size_t q = 0; q < n && !rc; q++, e = j.t[e].next) rc = read_ann_of(x, &j, e, q, i);
    x->base += n;
    sp__json_free(&j);
    return rc;
}

/* "ROOT/shard/KEY.json" for sample path "shard/KEY.ext" into buf. */
static void member_name(const sp_dataset *ds, uint64_t i, char *buf, size_t cap) {
    const char *p = sp_dataset_path(ds, i), *slash = strrchr(p, '/');
    const char *dot = strchr(slash ? slash + 1 : p, '.');
    int n = dot ? (int)(dot - p) : (int)strlen(p);
    snprintf(buf, cap, "%s/%.*s.json", ds->base, n, p);
}

int sp__coco_open_fetch(const sp_dataset *ds, sp_coco_fetch fetch, void *arg,
                        const sp_coco_limits *lim, sp_coco **out, sp_error *err) {
    *out = NULL;
    sp_coco_limits dl = lim ? *lim : sp__coco_default_limits();
    char name[MAX_PATH_LEN + 64];
    ctx x;
    memset(&x, 0, sizeof x);
    x.path = name;
    x.ds = ds;
    x.lim = &dl;
    x.err = err;
    x.c = calloc(1, sizeof *x.c);
    int rc = x.c ? reserve(&x) : sp_error_set(err, SP_ENOMEM, "annotations: out of memory");
    sp__hash h;
    sp__hash_init(&h);
    sp__hash_str(&h, "seedpipe-coco-members-v1");
    uint64_t n = sp__dataset_size(ds);
    for (uint64_t i = 0; i < n && !rc; i++) {
        uint8_t *b = NULL;
        size_t len = 0;
        member_name(ds, i, name, sizeof name);
        rc = fetch(arg, ds, i, dl.max_element, &b, &len, err);
        if (!rc) rc = read_member(&x, i, b, len, &h);
        free(b);
    }
    if (!rc) {
        x.c->nsamples = n;
        x.c->fp = sp__hash_digest(&h);
        x.path = "annotations";
        rc = group(&x);
    }
    free(x.anns);
    free(x.kps);
    if (!rc) x.c->segv = x.seg.v;
    else free(x.seg.v);
    if (rc) {
        sp__coco_close(x.c);
        return rc;
    }
    *out = x.c;
    return SP_OK;
}

static int tar_fetch(void *arg, const sp_dataset *ds, uint64_t i, uint64_t max, uint8_t **bytes,
                     size_t *len, sp_error *err) {
    (void)arg;
    return sp__ds_tar_json(ds, i, max, bytes, len, err);
}

int sp__coco_open_members(const sp_dataset *ds, const sp_coco_limits *lim, sp_coco **out,
                          sp_error *err) {
    *out = NULL;
    if (sp__dataset_kind_of(ds) != SP_DATASET_WEBDATASET)
        return sp_error_set(err, SP_EINVAL, "annotations @json: %s is not WebDataset shards "
                            "(their KEY.json members hold the targets; docs/targets.md)",
                            sp__dataset_root(ds));
    if (!sp__ds_is_remote(ds)) return sp__coco_open_fetch(ds, tar_fetch, NULL, lim, out, err);
    sp__ds_json_reader *r = sp__ds_remote_json_new();   /* remote shards: ranged reads */
    int rc = r ? sp__coco_open_fetch(ds, sp__ds_remote_json, r, lim, out, err)
               : sp_error_set(err, SP_ENOMEM, "annotations @json: out of memory");
    sp__ds_remote_json_free(r);
    return rc;
}

void sp__coco_close(sp_coco *c) {
    if (!c) return;
    free(c->first);
    free(c->boxes);
    free(c->labels);
    free(c->kps);
    free(c->segv);
    free(c->segat);
    free(c->rawfirst);
    free(c->rawoff);
    free(c->rawlen);
    free(c->canon);
    free(c);
}

void sp__coco_get(const sp_coco *c, uint64_t i, sp_targets *t) {
    memset(t, 0, sizeof *t);
    if (i >= c->nsamples) return;
    i = canonical(c, i);
    uint64_t a = c->first[i];
    t->n = (uint32_t)(c->first[i + 1] - a);
    t->k = c->k;
    t->boxes = c->boxes + 4 * a;
    t->labels = c->labels + a;
    t->keypoints = c->k ? c->kps + 3 * (size_t)c->k * a : NULL;
}

sp_digest sp__coco_fingerprint(const sp_coco *c) { return c->fp; }
uint32_t sp__coco_keypoints(const sp_coco *c) { return c->k; }
uint64_t sp__coco_crowd(const sp_coco *c) { return c->crowd; }
uint64_t sp__coco_unmatched(const sp_coco *c) { return c->unmatched; }

uint32_t sp__coco_max_boxes(const sp_coco *c, uint64_t *which) {
    uint64_t best = 0;
    *which = 0;
    for (uint64_t i = 0; i < c->nsamples; i++)
        if (c->first[i + 1] - c->first[i] > best) {
            best = c->first[i + 1] - c->first[i];
            *which = i;
        }
    return best > UINT32_MAX ? UINT32_MAX : (uint32_t)best;
}

const double *sp__coco_segmentation(const sp_coco *c, uint64_t i, uint32_t box) {
    i = canonical(c, i);
    if (i >= c->nsamples || c->first[i] + box >= c->first[i + 1]) return NULL;
    uint64_t at = c->segat[c->first[i] + box];
    return at == SP__COCO_NO_SEG || at == SP__COCO_NOT_KEPT ? NULL : c->segv + at;
}

uint64_t sp__coco_unsegmented(const sp_coco *c, size_t *first) {
    *first = c->first_unseg;
    return c->unsegmented;
}

uint32_t sp__coco_raw(const sp_coco *c, uint64_t i, const uint64_t **off, const uint64_t **len) {
    if (!c->rawfirst || i >= c->nsamples) return 0;
    i = canonical(c, i);
    *off = c->rawoff + c->rawfirst[i];
    *len = c->rawlen + c->rawfirst[i];
    return (uint32_t)(c->rawfirst[i + 1] - c->rawfirst[i]);
}
