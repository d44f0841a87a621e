/* loader/sampler_internal.h - the library-internal part of seedpipe/sampler.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/sampler.h.
 */
#ifndef SEEDPIPE_LOADER_SAMPLER_INTERNAL_H
#define SEEDPIPE_LOADER_SAMPLER_INTERNAL_H

#include "seedpipe/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__batch_span() : the slots of the nranks consecutive ranks
 *  bt->rank .. bt->rank + nranks - 1 of global batch b: [*pos, *pos + *count),
 *  the concatenation of their sp_batch_slice()s in rank order (default
 *  layout: positions [b*B + rank*B/world, b*B + (rank+nranks)*B/world), cut
 *  at n; in general [b*B + off(rank), b*B + off(rank + nranks)), see
 *  "Slots" above). nranks 1 is sp_batch_slice(). count is 0 when nranks is
 *  0 or rank + nranks > world, for b >= sp_batches_per_epoch(), and when
 *  every slice of the span lies past a short last batch. */
void sp__batch_span(const sp_batching *bt, uint64_t b, uint32_t nranks, uint64_t *pos,
                    uint32_t *count);

uint32_t sp__block_perm_epoch(const sp_block_perm *bp);

#ifdef __cplusplus
}
#endif

#endif
