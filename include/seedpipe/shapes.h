/* seedpipe/shapes.h - the built-in dataset: procedurally drawn shapes.
 *
 * sp_shapes_make() writes an ImageFolder of `count` images, size x size,
 * evenly over the classes (circle, square, triangle, cross, ring, star,
 * ...), each a shape of random colour, position, scale and rotation on a
 * random textured background; even-numbered files are PNG, odd-numbered
 * JPEG (quality 90). Everything comes from Philox under the seed (stream
 * SP_STREAM_OTHER), drawn with integer arithmetic, so a seed gives the same
 * files (for the same libpng/libjpeg-turbo) on every machine. The classes
 * are separable by shape alone, so a small CNN learns them.
 */
#ifndef SEEDPIPE_SHAPES_H
#define SEEDPIPE_SHAPES_H

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_shapes_opts {
    uint32_t count;   /* total images, default 1000 */
    int size;         /* pixels, default 64 */
    uint64_t seed;    /* default 0 */
} sp_shapes_opts;

/*! sp_shapes_class_names() : NULL-terminated list of class folder names. */
const char *const *sp_shapes_class_names(void);

/*! sp_shapes_make() : create out_dir (and class folders) and write the
 *  images. Existing files of the same names are overwritten; other files
 *  are left alone. @return 0, SP_EIO naming the path, SP_EINVAL. */
int sp_shapes_make(const char *out_dir, const sp_shapes_opts *opts, sp_error *err);

#ifdef __cplusplus
}
#endif
#endif
