/* ops_geom.c - the geometric ops of torchvision that move pixels without
 * resampling them (include/seedpipe/ops.h): RandomCrop's padding (constant,
 * edge, reflect), its pad_if_needed, and the crop at a drawn offset.
 *
 * HOW IT WORKS: padding and cropping are pure indexing, so an output pixel
 * is one source pixel or the fill. Rather than building the padded image
 * (as torchvision does, twice with pad_if_needed), each axis gets a map
 * from the crop's positions to source indices (sp__random_crop_map(): the
 * two padding stages composed), and sp__image_remap() copies through the
 * two maps. The bytes are those of torchvision's F.pad + F.crop exactly,
 * for any padding mode; only the pixels the crop shows are ever read.
 */

#include <string.h>
#include "augment/ops_internal.h"

/* The source index of padded index u along an axis of size n (-1: fill). */
static int pad_index(int u, int n, sp_pad_mode mode) {
    if (u >= 0 && u < n) return u;
    if (mode == SP_PAD_CONSTANT) return -1;
    if (mode == SP_PAD_EDGE) return u < 0 ? 0 : n - 1;
    return u < 0 ? -u : 2 * (n - 1) - u;   /* reflect: |pad| < n, checked by the caller */
}

int sp__random_crop_sample(int W, int H, int h, int w, const int pad[4], int pad_if_needed,
                           sp_pad_mode mode, sp_key k_augment, uint32_t op, uint32_t sample,
                           uint32_t epoch, sp_random_crop_geom *g) {
    memset(g, 0, sizeof *g);
    memcpy(g->pad, pad, sizeof g->pad);
    if (mode == SP_PAD_REFLECT && (pad[0] >= W || pad[2] >= W || pad[1] >= H || pad[3] >= H))
        return SP_EINVAL;
    int64_t pw = (int64_t)W + pad[0] + pad[2], ph = (int64_t)H + pad[1] + pad[3];
    if (pad_if_needed && pw < w) {
        g->extra_x = w - (int)pw;
        if (mode == SP_PAD_REFLECT && g->extra_x >= pw) return SP_EINVAL;
        pw += 2 * (int64_t)g->extra_x;
    }
    if (pad_if_needed && ph < h) {
        g->extra_y = h - (int)ph;
        if (mode == SP_PAD_REFLECT && g->extra_y >= ph) return SP_EINVAL;
        ph += 2 * (int64_t)g->extra_y;
    }
    if (pw < w || ph < h || pw > INT32_MAX || ph > INT32_MAX) return SP_EINVAL;
    g->pw = (int)pw;
    g->ph = (int)ph;
    sp_ctr d = sp_sample_draw(k_augment, 0, op, sample, epoch);
    g->y = (int)sp_uniform_int(d.c[0], (uint64_t)(ph - h + 1));
    g->x = (int)sp_uniform_int(d.c[1], (uint64_t)(pw - w + 1));
    return SP_OK;
}

void sp__random_crop_map(int n, int lo, int hi, int extra, sp_pad_mode mode, int off, int len,
                         int32_t *map) {
    int n1 = n + lo + hi;   /* the image after the first padding */
    for (int i = 0; i < len; i++) {
        int v = pad_index(off + i - extra, n1, mode);   /* the second padding */
        map[i] = v < 0 ? -1 : pad_index(v - lo, n, mode);
    }
}

void sp__image_remap(const sp_image *src, const int32_t *xmap, const int32_t *ymap,
                     const uint8_t fill[3], sp_image *out) {
    const int C = out->channels, W = out->width;
    for (int y = 0; y < out->height; y++) {
        uint8_t *d = out->data + (size_t)y * out->stride;
        if (ymap[y] < 0) {
            for (int x = 0; x < W; x++, d += C)
                for (int c = 0; c < C; c++) d[c] = fill[c];
            continue;
        }
        const uint8_t *row = src->data + (size_t)ymap[y] * src->stride;
        for (int x = 0; x < W; x++, d += C) {
            if (xmap[x] < 0) {
                for (int c = 0; c < C; c++) d[c] = fill[c];
                continue;
            }
            const uint8_t *s = row + (size_t)xmap[x] * (size_t)C;
            for (int c = 0; c < C; c++) d[c] = s[c];
        }
    }
}
