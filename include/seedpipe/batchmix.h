/* batchmix.h - MixUp and CutMix keyed by the batch, in C: the draws and the
 * mix of docs/determinism.md section 11a, byte for byte the Python
 * drop-in's (bindings/python/seedpipe/_batchmix.py; bindings/python/tests/
 * test_batch_mix_c.py compares them).
 *
 *   sp__batch_mix_draw()   lambda, CutMix's box and RandomChoice's pick of
 *                         global batch b of epoch e under seed S
 *   sp_batch_mix_f32()    mix a float32 batch (B, C, H, W) in place and write
 *                         its float32 targets (B, num_classes)
 *   sp_batch_mix_digest() what `seedpipe digest --batch-mix` writes per batch
 *   sp_batch_mix_parse()  a --batch-mix spec (one op, or a RandomChoice of
 *                         several) into sp_batch_mix_spec
 *   sp_batch_mix_spec_draw() that spec's mix of one batch (the pick, then
 *                         the picked op's draws)
 */
#ifndef SEEDPIPE_BATCHMIX_H
#define SEEDPIPE_BATCHMIX_H

#include "seedpipe/common.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { SP_BATCH_MIXUP = 1, SP_BATCH_CUTMIX = 2 };

typedef struct sp_batch_mix {
    int op;         /* SP_BATCH_MIXUP or SP_BATCH_CUTMIX */
    double lam;     /* lambda (CutMix: of the clipped box) */
    int box[4];     /* CutMix: x1, y1, x2, y2; MixUp: 0 */
} sp_batch_mix;

/*! sp_batch_mix_f32() : mix x (n images of `plane` = C*H*W floats each, H x
 *  W the last two dimensions) in place by m, image i taking image i - 1's
 *  pixels (image 0 the last one's), as torchvision v2's x.roll(1, 0); the
 *  targets (n x k floats) are the labels' one-hot rows mixed alike.
 *  scratch: plane floats (the last image, unmixed, for image 0). Labels
 *  must be in 0..k-1. @return 0 or SP_EINVAL. */
SP_API int sp_batch_mix_f32(const sp_batch_mix *m, float *x, int n, int c, int h, int w,
                            const int64_t *labels, int k, float *targets, float *scratch,
                            sp_error *err);

/*! sp_batch_mix_digest() : the digest `seedpipe digest --batch-mix` writes
 *  for a mixed batch: XXH3-128 (seed 0) of, little-endian, u32 op, the
 *  64-bit pattern of lam, 4 x i32 box, u32 n, u32 k, n x i32 labels (the
 *  unmixed class indices), the `image_bytes` bytes of the mixed images and
 *  the n * k float32 targets. */
SP_API sp_digest sp_batch_mix_digest(const sp_batch_mix *m, int n, int k, const int32_t *labels,
                                     const void *images, size_t image_bytes,
                                     const float *targets);

/* A batch mix as `--batch-mix` states it (docs/determinism.md 11a):
 *   mixup:alpha=A[,classes=K]        MixUp
 *   cutmix:alpha=A[,classes=K]       CutMix
 *   choice:OP,OP[,...][,p=P/P/...][,classes=K]
 *                                    RandomChoice of the OPs (each
 *                                    mixup:alpha=A or cutmix:alpha=A), op i
 *                                    with probability P_i (default equal)
 * K: the classes of the targets (0: the dataset's). */
#define SP_BATCH_MIX_MAX_OPS 8
typedef struct sp_batch_mix_spec {
    int n;                               /* ops, 1..SP_BATCH_MIX_MAX_OPS */
    int choice;                          /* 1: a RandomChoice (choice:) */
    int op[SP_BATCH_MIX_MAX_OPS];        /* SP_BATCH_MIXUP / SP_BATCH_CUTMIX */
    double alpha[SP_BATCH_MIX_MAX_OPS];  /* finite, > 0 */
    double p[SP_BATCH_MIX_MAX_OPS];      /* as given (finite, >= 0, not all 0) */
    int classes;                         /* 1..65536, or 0: the dataset's */
} sp_batch_mix_spec;

/*! sp_batch_mix_parse() : text (the grammar above) into *out. @return 0
 *  or SP_EINVAL naming the spec and what is wrong. */
SP_API int sp_batch_mix_parse(const char *text, sp_batch_mix_spec *out, sp_error *err);

/*! sp_batch_mix_spec_draw() : the mix of batch `index` of `epoch` under
 *  spec s: a RandomChoice picks op i (sp__batch_mix_pick() over s->p), then
 *  sp__batch_mix_draw() of op i, as the drop-in's RandomChoice of MixUp /
 *  CutMix. @return 0 or SP_EINVAL. */
SP_API int sp_batch_mix_spec_draw(const sp_batch_mix_spec *s, uint64_t seed, uint32_t epoch,
                                  uint64_t index, int h, int w, sp_batch_mix *out,
                                  sp_error *err);

#ifdef __cplusplus
}
#endif
#endif
