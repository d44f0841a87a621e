/* loader_masks.c - a loader's instance masks (masks_internal.h): each kept
 * box's segmentation rasterised at the decoded image's size (the geometry
 * log's source size) as pycocotools does, then moved through the log
 * (include/seedpipe/masks.h) into the record after the other target
 * fields (targets.h: the sample record). docs/targets.md "Masks".
 */
#include "loader/masks_internal.h"
#include "dataset/dataset_coco_mask.h"
#include "common/fileio_internal.h"
#include "common/hash_internal.h"
#include "augment/decode_internal.h"
#include "seedpipe/decode.h"
#include "seedpipe/masks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "augment/masks_internal.h"

static int label_path(const sp_dataset *ds, uint64_t idx, char *path, size_t cap,
                      sp_error *err);

/* The label maps' identity: every map's path, size and modification time
 * (the index's stat rule, dataset_index.c), so a changed or missing map
 * changes the loader's fingerprint (a cache, a state of the old maps is
 * refused) or fails the open, naming the file. */
int sp__ldm_identity(const sp_dataset *ds, sp__hash *h, sp_error *err) {
    char path[8192];
    uint64_t n = sp__dataset_size(ds);
    sp__hash_str(h, "label maps");
    for (uint64_t i = 0; i < n; i++) {
        int rc = label_path(ds, i, path, sizeof path, err);
        if (rc) return rc;
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            return sp_error_set(err, SP_EIO, "%s: the label map of %s: %s", path,
                                sp_dataset_path(ds, i), errno ? strerror(errno) :
                                "not a regular file");
        sp__hash_str(h, path);
        sp__hash_u64(h, (uint64_t)st.st_size);
        sp__hash_u64(h, (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec);
    }
    return SP_OK;
}

int sp__ldm_open(sp_targets_rules *r, const sp_coco *coco, const sp_dataset *ds, int h, int w,
                 const char *annotations, sp_error *err) {
    if (r->masks == SP_MASKS_NONE) return SP_OK;
    size_t first = 0;
    uint64_t none = coco && r->masks == SP_MASKS_INSTANCE ? sp__coco_unsegmented(coco, &first) : 0;
    if (r->masks == SP_MASKS_SEMANTIC && (sp__dataset_kind_of(ds) != SP_DATASET_IMAGEFOLDER &&
                                          sp__dataset_kind_of(ds) != SP_DATASET_LIST))
        return sp_error_set(err, SP_EINVAL, "pipeline: masks=semantic reads label maps beside "
                            "an image folder or a list file's root, not a %s",
                            sp__dataset_kind_name(sp__dataset_kind_of(ds)));
    if (none)
        return sp_error_set(err, SP_EINVAL, "%s: annotation %zu has no \"segmentation\" (%llu "
                            "boxes lack one) and the targets op says masks=instance",
                            annotations, first, (unsigned long long)none);
    if (h <= 0 || w <= 0)
        return sp_error_set(err, SP_EINVAL, "pipeline: masks= needs a fixed output "
                            "size (end the geometry with a resize or a crop)");
    uint64_t bytes = (uint64_t)(r->masks == SP_MASKS_SEMANTIC ? 1 : r->max_boxes) * (uint64_t)h *
                     (uint64_t)w;
    if (bytes > SP_TARGETS_MAX_MASK_BYTES)
        return sp_error_set(err, SP_ELIMIT, "pipeline: targets op: max_boxes=%d masks of %dx%d "
                            "are %llu bytes per sample, more than 2^28 (lower max_boxes or the "
                            "output size)", r->max_boxes, w, h, (unsigned long long)bytes);
    r->mask_w = w;
    r->mask_h = h;
    return SP_OK;
}

int sp__ldm_rasterise(const double *v, int h, int w, uint8_t *mask, const char *what,
                     sp_error *err) {
    memset(mask, 0, (size_t)h * (size_t)w);
    if (v[0] == 2) {
        if ((int)v[1] != h || (int)v[2] != w)
            return sp_error_set(err, SP_EFORMAT, "%s: RLE \"size\" [%d, %d] is not the decoded "
                                "image's [%d, %d]", what, (int)v[1], (int)v[2], h, w);
        size_t m = (size_t)v[3];
        uint32_t *cn = malloc((m + 1) * sizeof *cn);
        if (!cn) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", what);
        for (size_t k = 0; k < m; k++) cn[k] = (uint32_t)v[4 + k];
        int rc = sp__mask_rle(cn, m, h, w, mask, what, err);
        free(cn);
        return rc;
    }
    uint32_t np = (uint32_t)v[1];
    size_t total = 0, p = 2;
    for (uint32_t i = 0; i < np; i++) {
        total += (size_t)v[p];
        p += 1 + 2 * (size_t)v[p];
    }
    double *xy = malloc((2 * total + 1) * sizeof *xy);
    uint32_t *npts = malloc((np + 1) * sizeof *npts);
    int rc = SP_OK;
    if (!xy || !npts) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", what);
    p = 2;
    for (uint32_t i = 0, o = 0; !rc && i < np; i++) {
        npts[i] = (uint32_t)v[p];
        memcpy(xy + o, v + p + 1, 2 * (size_t)npts[i] * sizeof *xy);
        o += 2 * npts[i];
        p += 1 + 2 * (size_t)npts[i];
    }
    if (!rc) rc = sp__mask_polygons(xy, npts, np, h, w, mask, what, err);
    free(xy);
    free(npts);
    return rc;
}

/* The label map of sample idx: <root>_masks/<path with its extension
 * replaced by .png>, a grayscale or palette PNG of at most 8 bits and of
 * the decoded image's size (its stored values are the labels: a palette
 * map's indices, as VOC's), moved through the log with mask_fill. */
static int label_path(const sp_dataset *ds, uint64_t idx, char *path, size_t cap,
                      sp_error *err) {
    const char *root = sp__dataset_root(ds), *rel = sp_dataset_path(ds, idx);
    if (!root || !rel) return sp_error_set(err, SP_EINVAL, "sample %llu: no path for its label "
                                           "map", (unsigned long long)idx);
    size_t rl = strlen(root);
    while (rl > 1 && root[rl - 1] == '/') rl--;
    const char *slash = strrchr(rel, '/'), *dot = strrchr(rel, '.');
    size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - rel) : strlen(rel);
    if ((size_t)snprintf(path, cap, "%.*s_masks/%.*s.png", (int)rl, root, (int)stem, rel) >= cap)
        return sp_error_set(err, SP_ELIMIT, "%s: label map path too long", rel);
    return SP_OK;
}

static int semantic(const sp_targets_rules *r, const sp_dataset *ds, uint64_t idx,
                    const sp_geom_log *log, uint8_t *out, sp_error *err) {
    char path[8192];
    int lrc = label_path(ds, idx, path, sizeof path, err);
    if (lrc) return lrc;
    sp__buf buf = {NULL, 0};
    size_t len = 0;
    sp_image img = {0, 0, 0, 0, NULL};
    int rc = sp__read_regular(AT_FDCWD, path, path, 0, 1ull << 30, &buf, &len, err);
    if (!rc) rc = sp__png_decode_labels(buf.p, len, path, &img, err);
    if (!rc && (img.width != log->src_w || img.height != log->src_h))
        rc = sp_error_set(err, SP_EFORMAT, "%s: label map of %dx%d, the image is %dx%d", path,
                          img.width, img.height, log->src_w, log->src_h);
    if (!rc && img.stride != (size_t)img.width)
        rc = sp_error_set(err, SP_EFORMAT, "%s: unexpected row stride", path);
    if (!rc) rc = sp__mask_warp(log, img.data, (uint8_t)r->mask_fill, out, err);
    sp_image_free(&img);
    sp__buf_free(&buf);
    return rc;
}

int sp__ldm_write(const sp_targets_rules *r, const sp_coco *coco, const sp_dataset *ds,
                  uint64_t idx, const sp_geom_log *log, const uint32_t *kept, uint32_t nkept,
                  uint8_t *out, const char *path, sp_error *err) {
    if (r->masks == SP_MASKS_NONE) return SP_OK;
    int ow = log->n ? log->step[log->n - 1].out_w : log->src_w;
    int oh = log->n ? log->step[log->n - 1].out_h : log->src_h;
    if (ow != r->mask_w || oh != r->mask_h)
        return sp_error_set(err, SP_EINVAL, "%s: the geometry ends at %dx%d, the masks are "
                            "%dx%d", path, ow, oh, r->mask_w, r->mask_h);
    if (r->masks == SP_MASKS_SEMANTIC) return semantic(r, ds, idx, log, out, err);
    size_t plane = (size_t)r->mask_w * (size_t)r->mask_h;
    uint8_t *src = nkept ? malloc((size_t)log->src_w * (size_t)log->src_h) : NULL;
    if (nkept && !src) return sp_error_set(err, SP_ENOMEM, "%s: masks: out of memory", path);
    int rc = SP_OK;
    for (uint32_t q = 0; q < nkept && !rc; q++) {
        char what[4200];
        snprintf(what, sizeof what, "%s: box %u", path, kept[q]);
        const double *seg = sp__coco_segmentation(coco, idx, kept[q]);
        if (!seg) rc = sp_error_set(err, SP_EINVAL, "%s: no segmentation", what);
        if (!rc) rc = sp__ldm_rasterise(seg, log->src_h, log->src_w, src, what, err);
        if (!rc) rc = sp__mask_warp(log, src, (uint8_t)r->mask_fill, out + q * plane, err);
    }
    free(src);
    return rc;
}
