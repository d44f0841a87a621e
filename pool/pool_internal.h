/* pool_internal.h - the worker pool's interface for the layers above it (the
 * service, service/service.c): a pool created for an owner, batches taken
 * without the wait and the finalising, and given back oldest first.
 *
 * Not a public header. The ring the pool's region holds is
 * pool/ring_layout.h (included here); everything else of pool/ is its own.
 *
 * THE OWNER. Who consumes the pool is said once, where it is created
 * (sp__pool_setup.owner), and pool.c reads it where it decides:
 *  - SP__POOL_TRAINER (sp__pool_create()): the in-process consumer takes
 *    whole batches (sp__pool_next: finalised, as the loader gives them). Its
 *    ring is anonymous and reserved by the pool while the workers start;
 *    a cached batch file with failed samples is taken as it is; the batch
 *    digest (sp_pool_digest()) is hashed while the consumer waits or by the
 *    workers.
 *  - SP__POOL_SERVICE (service.c): a service in a named region, serving
 *    nranks ranks' slices of each batch; it finalises per rank from the
 *    positions (sp__pool_poll: no finalising), so a cached batch with failed
 *    samples is computed instead of taken whole; the region is reserved
 *    when it is created (a /dev/shm too small fails before `ready`); its
 *    clients hash their own slices (no pool digest).
 */
#ifndef SEEDPIPE_POOL_INTERNAL_H
#define SEEDPIPE_POOL_INTERNAL_H

#include "seedpipe/pool.h"
#include <stdint.h>

#include "seedpipe/batchmix.h"
#include "seedpipe/common.h"
#include "seedpipe/loader.h"
#include "pool/ring_layout.h"

struct sp_pool;
struct sp_pool_config;

/* Who consumes the pool (THE OWNER above). */
typedef enum sp__pool_owner { SP__POOL_TRAINER = 0, SP__POOL_SERVICE = 1 } sp__pool_owner;

/* How sp__pool_create_ex() makes a pool for its owner. */
typedef struct sp__pool_setup {
    sp__pool_owner owner;
    const char *region_name;         /* SERVICE: the named region (O_EXCL, 0600) */
    uint32_t nranks;                 /* ranks in the per-slot rank table (0: 1) */
    uint32_t span;                   /* the loader's batches: the span of `span` ranks
                                      * from lcfg->rank (sp__loader_set_span(); 0, 1: one
                                      * rank; > 1 can't use the cache: SP_EUNSUPP) */
    const sp_batch_mix_spec *mix;    /* SERVICE: a batch mix, or NULL */
} sp__pool_setup;

#define SP__POOL_AGAIN 2
/*! sp__pool_create_ex() : sp__pool_create() for the owner setup->owner
 *  (NULL: a TRAINER's plain pool). A SERVICE's pool lives in the region
 *  named setup->region_name (required: SP_EINVAL without) and carries a
 *  per-slot rank table of nranks. mix (NULL: none): a service's batch mix,
 *  recorded in the header with its class count (mix->classes, or the
 *  dataset's) and its slots' soft-target areas (off_mix); its samples must
 *  be float32 NCHW images without targets (SP_EINVAL). */
int sp__pool_create_ex(const sp_loader_config *lcfg, const struct sp_pool_config *pcfg,
                       const sp__pool_setup *setup, struct sp_pool **out, sp_error *err);
/*! sp__pool_poll() : take the next batch if it is complete, without
 *  finalising it: @return 0 (*slot, *q set; taken), SP__POOL_AGAIN (not yet),
 *  SP_END, or a sticky error. Polls worker liveness every 10 ms. */
int sp__pool_poll(struct sp_pool *pool, uint32_t *slot, uint64_t *q, sp_error *err);
/*! sp__pool_hdr() : the ring's header in the pool's region. */
sp__ring_hdr *sp__pool_hdr(struct sp_pool *pool);
/*! sp__pool_release_oldest() : give back the oldest batch taken (the
 *  service's recycling, which takes batches with sp__pool_poll()). @return
 *  0, SP_EINVAL (none held), or what its liveness poll found. */
int sp__pool_release_oldest(struct sp_pool *pool, sp_error *err);
/*! sp__pool_total() : the batches of the pool's stream. */
uint64_t sp__pool_total(const struct sp_pool *pool);

/* ---- Internal to the library: once seedpipe/pool.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__pool_create() : open the loader (lcfg), check `resume` against it
 *  (sp_loader_state_check), map the region, fork the workers, and reserve
 *  the region's memory while they start on the first batch.
 *  @return 0, the loader's errors, SP_EMISMATCH (foreign state), SP_EINVAL
 *  (workers/slots/epochs out of range), SP_EIO (mmap/fork failed),
 *  SP_ENOMEM ("worker pool ring: cannot reserve N MB of shared memory",
 *  the workers reaped: a ring the memory cannot hold fails here, never as
 *  a worker's SIGBUS later). */
int sp__pool_create(const sp_loader_config *lcfg, const sp_pool_config *pcfg, sp_pool **out,
                    sp_error *err);

/*! sp__pool_destroy() : SIGKILL and reap every worker, unmap the region.
 *  Views from sp__pool_next() become invalid. Accepts NULL. */
void sp__pool_destroy(sp_pool *pool);

/*! sp__pool_loader() : the consumer's loader (dims, digest, failure log). */
sp_loader *sp__pool_loader(sp_pool *pool);

/*! sp__pool_next() : the next batch of the stream, waiting for it if needed.
 *  *view points into the shared slot (images, labels, indices, skipped,
 *  substituted; capacity = B / world); valid until it is given back with
 *  sp__pool_release(). Up to R batches may be held at once.
 *  @return 0, SP_END (the stream is over; *view untouched), SP_EINVAL
 *  (R batches already held), a sample's error under on_error fail (then
 *  every later call returns it again, as for the next two), SP_ELIMIT (the
 *  respawn bound: "pool: respawn bound reached: ..."), or SP_EIO (a
 *  replacement could not be forked; the ring's memory gone). */
int sp__pool_next(sp_pool *pool, sp_batch *view, sp_error *err);

/*! sp__pool_release() : give back a view from sp__pool_next(), any held one,
 *  in any order (the one release rule: stream.h, client.h); the view is
 *  cleared. A slot is reused once its batch and every older one are back.
 *  @return 0, SP_EINVAL (view not held: given back already, or not this
 *  pool's), or what its liveness poll found (SP_ELIMIT, SP_EIO: as
 *  sp__pool_next(), which returns it again). */
int sp__pool_release(sp_pool *pool, sp_batch *view, sp_error *err);

/*! sp__pool_state() : the stream position after the last batch taken by
 *  sp__pool_next(), as a state a new pool (or loader) can resume from. */
void sp__pool_state(const sp_pool *pool, sp_loader_state *st);

void sp__pool_stats_get(const sp_pool *pool, sp_pool_stats *st);

#ifdef __cplusplus
}
#endif

#endif
