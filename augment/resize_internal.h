/* resize_internal.h - the Q14 kernels of augment/resize.c, for the tests
 * (tests/test_resize_bicubic.c checks their sums and values against a
 * float64 reference). Not a public header.
 */
#ifndef SEEDPIPE_AUGMENT_RESIZE_INTERNAL_H
#define SEEDPIPE_AUGMENT_RESIZE_INTERNAL_H

#include "seedpipe/ops.h"

/* The kernel of window coordinate i (0 <= i < win_w, or win_h when
 * vertical) of g's x axis (vertical 0) or y axis (vertical 1): its first
 * plane coordinate, its tap count, and its Q14 weights in w[0 .. n) (cap
 * entries; n > cap: SP_ELIMIT). @return 0, SP_EINVAL (bad geometry or i),
 * SP_ENOMEM. */
int sp__resample_kernel(const sp_resample_geom *g, int vertical, int i, int *start, int *n,
                        int32_t *w, int cap);

#endif
