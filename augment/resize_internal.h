/* resize_internal.h - the Q14 kernels of the resampler (resize_kernel.c),
 * for resize.c's passes and the tests (tests/test_resize_bicubic.c checks
 * their sums and values against a float64 reference). Not a public header.
 */
#ifndef SEEDPIPE_AUGMENT_RESIZE_INTERNAL_H
#define SEEDPIPE_AUGMENT_RESIZE_INTERNAL_H

#include "augment/ops_internal.h"

/* One output coordinate's kernel, and one axis's kernels. */
typedef struct sp__rs_kernel {
    int start;   /* first plane coordinate read */
    int n;       /* number of taps (>= 1) */
} sp__rs_kernel;

typedef struct sp__rs_axis {
    sp__rs_kernel *k;       /* one per window coordinate */
    int32_t *w;      /* ksize weights per window coordinate */
    int ksize;
    int single;      /* every kernel is one tap (a pure copy) */
    int contig;      /* single, and kernel i reads start[0] + i (memcpy) */
    int lo, hi;      /* union of the taps: [lo, hi) */
} sp__rs_axis;

/* The kernels of g's window on both axes (ax: x, ay: y; freed by
 * sp__axis_free() unless it fails). @return 0, SP_EINVAL (bad geometry),
 * SP_ENOMEM. */
int sp__axes_build(const sp_resample_geom *g, sp__rs_axis *ax, sp__rs_axis *ay);
void sp__axis_free(sp__rs_axis *a);

/* The kernel of window coordinate i (0 <= i < win_w, or win_h when
 * vertical) of g's x axis (vertical 0) or y axis (vertical 1): its first
 * plane coordinate, its tap count, and its Q14 weights in w[0 .. n) (cap
 * entries; n > cap: SP_ELIMIT). @return 0, SP_EINVAL (bad geometry or i),
 * SP_ENOMEM. */
int sp__resample_kernel(const sp_resample_geom *g, int vertical, int i, int *start, int *n,
                        int32_t *w, int cap);

#endif
