/* pool_release.c - sp_pool_release(): the consumer gives back any view it
 * holds, in any order (the one release rule, include/seedpipe/stream.h).
 *
 * The ring recycles its slots in order: slot q % R can take batch q + R
 * only once batch q is back. A view given back out of order marks its slot
 * (pool->given_back); the ring then moves past the oldest batches while
 * they are back, one sp__pool_release_oldest() (pool.c) each. Calls down
 * into pool.c only.
 */
#include "pool/pool_shared.h"

#include <string.h>

/* Any held view, in any order: its slot is marked, and the ring moves past
 * the oldest batches while they are back. */
int sp_pool_release(sp_pool *pool, sp_batch *view, sp_error *err) {
    if (!pool || !view) return sp_error_set(err, SP_EINVAL, "pool: %s is NULL", pool ? "view" : "pool");
    uint64_t abs = (uint64_t)view->epoch * pool->nb + view->index;
    uint64_t q = abs - pool->start_abs;   /* wraps (huge) below the start */
    uint32_t s = (uint32_t)(q % pool->R);
    if (abs < pool->start_abs || q < pool->released || q >= pool->taken || pool->given_back[s] ||
        view->images != sp__slot_images(pool->h, s))
        return sp_error_set(err, SP_EINVAL, "pool: epoch %u batch %llu is not held (given back "
                            "already, or not a view of this pool)", view->epoch,
                            (unsigned long long)view->index);
    pool->given_back[s] = 1;
    memset(view, 0, sizeof *view);
    while (pool->released < pool->taken && pool->given_back[pool->released % pool->R]) {
        pool->given_back[pool->released % pool->R] = 0;
        int rc = sp__pool_release_oldest(pool, err);
        if (rc != 0) return rc;
    }
    return SP_OK;
}
