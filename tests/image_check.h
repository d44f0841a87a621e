/* image_check.h - the random images and pixel comparisons the op tests
 * share (test_ops.c, test_ops_pixel.c, test_ops_geom.c, test_ops_policy.c): a fixed
 * LCG (each test program its own sequence, the same on every machine), an
 * image of random bytes whose stride is wider than its rows (3 columns
 * more, left as they are: ops must read through the stride), one pixel, and
 * equality of the visible pixels. Header-only: each test is its own
 * program; needs check.h's CHECK.
 */
#ifndef SEEDPIPE_TESTS_IMAGE_CHECK_H
#define SEEDPIPE_TESTS_IMAGE_CHECK_H

#include "seedpipe/common.h"
#include "check.h"

#include <stdint.h>
#include <string.h>
#include "common/common_internal.h"

static uint64_t image_check_state = 0x2545F4914F6CDD1Dull;

static inline uint32_t rnd32(void) {
    image_check_state = image_check_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(image_check_state >> 32);
}

static inline uint8_t rnd8(void) { return (uint8_t)(rnd32() >> 24); }

/* A w x h x c image of random values with a padded stride (a view). */
static inline sp_image make_image(int w, int h, int c) {
    sp_image im;
    CHECK(sp__image_alloc(&im, w + 3, h, c) == 0);
    for (int y = 0; y < h; y++)
        for (int i = 0; i < (w + 3) * c; i++) im.data[(size_t)y * im.stride + i] = rnd8();
    im.width = w;
    return im;
}

static inline uint8_t px(const sp_image *im, int x, int y, int k) {
    return im->data[(size_t)y * im->stride + (size_t)x * (size_t)im->channels + (size_t)k];
}

/* Same size and the same visible pixels (the strides may differ). */
static inline int same_pixels(const sp_image *a, const sp_image *b) {
    if (a->width != b->width || a->height != b->height || a->channels != b->channels) return 0;
    for (int y = 0; y < a->height; y++)
        if (memcmp(a->data + (size_t)y * a->stride, b->data + (size_t)y * b->stride,
                   (size_t)a->width * (size_t)a->channels))
            return 0;
    return 1;
}

#endif
