/* seedpipe/pool.h - the multi-process worker pool: a stream of batches from W forked workers.
 *
 * A pool runs one loader stream (dataset, pipeline, seed, format, geometry:
 * sp_loader_config) from a start position (epoch 0 batch 0, or a resumed
 * sp_loader_state) to the end of epoch `epochs - 1`. W worker processes,
 * forked from the caller, share one memory region holding a ring of R
 * batch slots (R = the prefetch depth); they claim work one sample
 * position at a time and write each sample straight into its place in its
 * batch's slot. The caller (the consumer) takes the batches strictly in
 * stream order with sp_pool_next(), reading them in place (no copy), and
 * gives each slot back with sp_pool_release(); workers wait while every
 * slot is full (backpressure).
 *
 * Guarantees (DESIGN.md sections 1 and 5): the batches are byte-identical
 * to sp_loader_batch()'s for the same configuration, for any W and R, any
 * scheduling, and when a worker dies (SIGKILL, a crash in a decoder): the
 * consumer notices (waitpid), puts the dead worker's unfinished positions
 * back, and forks a replacement; nothing is lost or computed into the
 * stream twice. A position whose computation killed two workers fails with
 * "worker died ... while computing it" and follows cfg.on_error like any
 * other failure. The on-error policy and the failure log (deduplicated,
 * stream order) are those of loader.h: sp_loader_failure() on
 * sp_pool_loader(pool).
 *
 * cfg.rng_mode SP_RNG_PER_WORKER is the documented demonstration of the
 * classic scheme (loader.h): each worker draws from K_worker(w) with its own
 * counter, so the bytes then depend on W and on scheduling.
 *
 * Test hook: with SEEDPIPE_TEST_CRASH_SAMPLE=i in the environment at
 * sp_pool_create(), a worker that starts computing sample i dies by SIGSEGV
 * (as in a decoder crash); it exists to test recovery, nothing else.
 *
 * Thread/fork safety: one consumer thread per pool. The library installs
 * no signal handlers; workers get PR_SET_PDEATHSIG(SIGKILL), so they never
 * outlive the consumer. PR_SET_PDEATHSIG follows the forking *thread*:
 * create, take from and destroy a pool on one long-lived thread (workers
 * are forked by sp_pool_create() and, as replacements, by sp_pool_next()).
 * The caller must not reap the workers itself (e.g. waitpid(-1, ...)); a
 * SIGCHLD disposition of SIG_IGN is fine (a reaped worker counts as dead).
 */
#ifndef SEEDPIPE_POOL_H
#define SEEDPIPE_POOL_H

#include "seedpipe/loader.h"
#include "seedpipe/state.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_POOL_MAX_WORKERS 64
/* sp_pool_next() return value at the end of the stream (not an error). */
#define SP_POOL_END 1

typedef struct sp_pool_config {
    int workers;                    /* 1..SP_POOL_MAX_WORKERS */
    int ring_slots;                 /* R, 1..1024; 0: max(2, 2 * workers) */
    uint32_t epochs;                /* the stream ends before this epoch (>= 1) */
    const sp_loader_state *resume;  /* NULL: start at epoch 0, batch 0 */
    const char *region_name;        /* NULL (anonymous); a named region is the
                                       service's (service.h): SP_EUNSUPP here */
} sp_pool_config;

typedef struct sp_pool sp_pool;

/*! sp_pool_create() : open the loader (lcfg), check `resume` against it
 *  (sp_loader_state_check), map the region, fork the workers.
 *  @return 0, the loader's errors, SP_EMISMATCH (foreign state), SP_EINVAL
 *  (workers/slots/epochs out of range), SP_EIO (mmap/fork failed). */
int sp_pool_create(const sp_loader_config *lcfg, const sp_pool_config *pcfg, sp_pool **out,
                   sp_error *err);
/*! sp_pool_destroy() : SIGKILL and reap every worker, unmap the region.
 *  Views from sp_pool_next() become invalid. Accepts NULL. */
void sp_pool_destroy(sp_pool *pool);

/*! sp_pool_next() : the next batch of the stream, waiting for it if needed.
 *  *view points into the shared slot (images, labels, indices, skipped,
 *  substituted; capacity = B / world); valid until the matching
 *  sp_pool_release(). Up to R batches may be held at once.
 *  @return 0, SP_POOL_END (the stream is over; *view untouched), SP_EINVAL
 *  (R batches already held), a sample's error under on_error fail (then
 *  every later call returns it again), or SP_EIO (workers could not be
 *  respawned). */
int sp_pool_next(sp_pool *pool, sp_batch *view, sp_error *err);
/*! sp_pool_release() : give back the oldest batch taken. @return 0 or
 *  SP_EINVAL (none held). */
int sp_pool_release(sp_pool *pool, sp_error *err);

/*! sp_pool_state() : the stream position after the last batch taken by
 *  sp_pool_next(), as a state a new pool (or loader) can resume from. */
void sp_pool_state(const sp_pool *pool, sp_loader_state *st);

/*! sp_pool_loader() : the consumer's loader (dims, digest, failure log). */
sp_loader *sp_pool_loader(sp_pool *pool);

typedef struct sp_pool_stats {
    int workers, ring_slots;
    uint64_t batches_taken, batches_total;
    uint64_t worker_deaths;        /* noticed and replaced */
    uint64_t positions_redone;     /* unfinished positions put back */
    uint64_t last_ready_ns;        /* CLOCK_MONOTONIC: last taken batch became complete */
    uint64_t last_taken_ns;        /* ... and when sp_pool_next returned it */
} sp_pool_stats;
void sp_pool_stats_get(const sp_pool *pool, sp_pool_stats *st);

/*! sp_pool_worker_pid() : pid of worker w (0 if none). For tests and
 *  `verify`, which kill a worker to prove recovery. */
int sp_pool_worker_pid(const sp_pool *pool, int w);

#ifdef __cplusplus
}
#endif
#endif
