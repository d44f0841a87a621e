/* loader/batchmix_internal.h - the library-internal part of seedpipe/batchmix.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/batchmix.h.
 */
#ifndef SEEDPIPE_LOADER_BATCHMIX_INTERNAL_H
#define SEEDPIPE_LOADER_BATCHMIX_INTERNAL_H

#include "seedpipe/batchmix.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__batch_mix_draw() : the mix of global batch `index` of `epoch` under
 *  `seed` for images of h x w: op SP_BATCH_MIXUP or SP_BATCH_CUTMIX with
 *  Beta(alpha, alpha); alpha finite and > 0. @return 0 or SP_EINVAL. */
int sp__batch_mix_draw(uint64_t seed, uint32_t epoch, uint64_t index, int op,
                       double alpha, int h, int w, sp_batch_mix *out, sp_error *err);

/*! sp__batch_mix_pick() : RandomChoice's pick among n ops of probabilities p
 *  (normalised here, summed left to right) for that batch. */
int sp__batch_mix_pick(uint64_t seed, uint32_t epoch, uint64_t index, const double *p,
                       int n);

#ifdef __cplusplus
}
#endif

#endif
