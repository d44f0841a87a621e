/* seedpipe/shapes.h - the built-in dataset: procedurally drawn shapes.
 *
 * sp_shapes_make() writes an ImageFolder of `count` images, size x size RGB,
 * evenly over 6 classes (circle, cross, ring, square, star, triangle: the
 * class id is the index in that byte-wise sorted list, as the ImageFolder
 * reader will number them), each a shape of random colour, position, scale
 * (radius 20..36% of the size) and rotation on a random textured background
 * (gradient + stripes + noise; the shape contrasts with it). Files are
 * out_dir/<class>/<index as %06u>.png for even indices and .jpg (quality
 * 90, 4:2:0) for odd ones; image i has class (i + i / 6) mod 6, so each
 * class gets as many PNGs as JPEGs. Everything comes from Philox under the
 * seed (stream SP_RNG_OTHER) addressed by the image index, drawn with
 * integer arithmetic only, so a seed gives the same pixels on every machine
 * and the same files for the same libpng/libjpeg-turbo. The classes are
 * separable by shape alone, so a small CNN learns them. The exact recipe
 * is the HOW IT WORKS comment in loader/shapes.c.
 *
 * Thread safety: all functions are reentrant; no global state.
 */
#ifndef SEEDPIPE_SHAPES_H
#define SEEDPIPE_SHAPES_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version, and a program opts in by defining SEEDPIPE_ADVANCED_API; the
 * front door is seedpipe/stream.h. */
#ifndef SEEDPIPE_ADVANCED_API
#error "seedpipe/shapes.h is the advanced API: #define SEEDPIPE_ADVANCED_API before including it (README.md: The C API); the front door is seedpipe/stream.h"
#endif

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options; a zero count or size means the default. */
typedef struct sp_shapes_opts {
    uint32_t count;   /* total images, default 1000, at most 100,000,000 */
    int size;         /* pixels, default 64, 16..2048 */
    uint64_t seed;    /* default 0 */
} sp_shapes_opts;

/*! sp_shapes_make() : create out_dir (and parents, and class folders) and
 *  write the images (opts may be NULL: all defaults). Existing files of the
 *  same names are overwritten; other files are left alone.
 *  @return 0, SP_EIO naming the path, SP_EINVAL, SP_ENOMEM. */
SP_API int sp_shapes_make(const char *out_dir, const sp_shapes_opts *opts, sp_error *err);

#ifdef __cplusplus
}
#endif
#endif
