/* augment/write_kernels_internal.h - the output writer's SIMD kernels
 * (write_kernels.c), for augment/pipeline_write.c. Not a public header.
 *
 * A kernel writes a 3-channel sample's values by arithmetic, 16 (AVX-512F)
 * or 8 (AVX2 with FMA and F16C) pixels at a time, instead of reading the
 * pipeline's tables; the writer uses it only where it gave every value of
 * the tables when the pipeline was built (sp__write_prepare()).
 */
#ifndef SEEDPIPE_AUGMENT_WRITE_KERNELS_INTERNAL_H
#define SEEDPIPE_AUGMENT_WRITE_KERNELS_INTERNAL_H

#include <stddef.h>
#include "seedpipe/common.h"

/* The output kinds: float32, and the two 16-bit kinds rounded from the
 * float32 value to nearest even (the tables' sp__to_bf16() / sp__to_f16()
 * on finite values). */
enum { SP__WK_F32, SP__WK_BF16, SP__WK_F16 };

/*! sp__write_kernel_level() : the kernel this CPU runs: 2 (AVX-512F), 1
 *  (AVX2 with FMA and F16C) or 0 (none: the tables), capped by SEEDPIPE_ISA. */
int sp__write_kernel_level(void);

/*! sp__write_rgb() : the output of the 3-channel image im, in kind, NCHW or
 *  NHWC (nhwc), read mirrored when flip, at dst: each value
 *  ((v / 255 - mean[c]) / sd[c], each step rounded to float; mean 0 and sd
 *  1 give v / 255) computed with the kernel of `level` (1 or 2, at most
 *  sp__write_kernel_level()); the columns outside its aligned blocks are
 *  read from tab[c] (256 floats or 16-bit words, by kind). nt: use
 *  non-temporal stores where aligned (the caller fences them). */
void sp__write_rgb(int level, const sp_image *im, int flip, int nhwc, int kind,
                   const void *const *tab, const float *mean, const float *sd, int nt,
                   void *dst);

#endif
