/* seedpipe/pool.h - the multi-process worker pool: a stream of batches from W forked workers.
 *
 * A pool runs one loader stream (dataset, pipeline, seed, format, geometry:
 * sp_loader_config) from a start position (epoch 0 batch 0, or a resumed
 * sp_loader_state) to the end of epoch `epochs - 1`. W worker processes,
 * forked from the caller, share one memory region holding a ring of R
 * batch slots (R = the prefetch depth); they claim work one sample
 * position at a time and write each sample straight into its place in its
 * batch's slot. The caller (the consumer) takes the batches strictly in
 * stream order with sp__pool_next(), reading them in place (no copy), and
 * gives each slot back with sp__pool_release(); workers wait while every
 * slot is full (backpressure).
 *
 * Guarantees (DESIGN.md sections 1 and 5): the batches are byte-identical
 * to sp_loader_batch()'s for the same configuration, for any W and R, any
 * scheduling, and when workers die: the consumer notices (waitpid), puts
 * the dead worker's unfinished positions back, and forks a replacement;
 * nothing is lost or computed into the stream twice. The on-error policy
 * and the failure log (deduplicated, stream order) are those of loader.h:
 * sp_loader_failure_count() and sp_loader_failure_get() on
 * sp__pool_loader(pool).
 *
 * Worker deaths. How a death is charged depends on how the worker ended,
 * never on timing:
 *  - A crash of the worker's own, charged to the sample position it was
 *    computing: a crash signal the worker raised itself (a fault, abort(),
 *    raise(): SIGSEGV, SIGILL, SIGFPE, SIGABRT; SIGBUS while the ring's
 *    memory is intact) or an exit (a library calling
 *    exit(), a sanitizer's report; workers never exit while the pool
 *    runs). A position charged with two crashes is not tried again: it
 *    fails with "worker process died 2 times while computing it (last:
 *    signal 11)" and follows cfg.on_error (a decoder that crashes on a
 *    hostile file costs that sample, the same under any W).
 *  - Any other death (SIGKILL from the OOM killer or an operator,
 *    SIGTERM, SIGINT, SIGHUP, SIGTRAP, ..., and a crash signal another
 *    process sent, kill -ABRT from a watchdog, which the worker's handler
 *    tells by its si_code: signals that come from outside) is never charged to a sample: the work is redone and the
 *    stream is unchanged, however often one sample's worker is killed.
 *    Such deaths, and crashes while the worker held no position, count
 *    against the pool's respawn bound, SP_POOL_RESPAWN_BOUND(W) = 100 +
 *    16 W for the whole run; past it the stream fails with SP_ELIMIT
 *    ("pool: respawn bound reached: worker 1 was killed by signal 9
 *    (SIGKILL); ...") and nothing is substituted.
 *  - SIGBUS when the ring's memory object shrank (someone truncated it):
 *    the stream fails with SP_EIO, not retried.
 * A crash signal sent from outside before the worker installed its
 * handler (its first instructions) is charged as a crash.
 * sp_pool_stats.worker_deaths counts every death.
 *
 * Epoch cache (cache.h; pcfg.cache_dir). Before the first batch of an
 * epoch enters the ring, the consumer looks its entry up. On a hit, the
 * workers read the batch files instead of computing: one worker per batch
 * reads, verifies and decompresses the whole file straight into the slot,
 * so a warm epoch is read by W processes in parallel. On a miss (and when
 * the epoch streams from its batch 0), the worker that completes a batch
 * compresses and writes its file into the entry's staging directory, also
 * in parallel; the consumer records it, and after the epoch's last batch
 * the entry is committed (and the cache collected to its max_size) on the
 * cache's own thread while the stream goes on; after the stream's last
 * batch (and at sp__pool_destroy()) every epoch is committed, its counters
 * and warnings delivered on the consumer's thread. The cache never
 * changes a byte of the stream: a cached batch is checked against two
 * checksums and the manifest, and any problem (a damaged file: reported
 * once with its path through
 * cache_opts->warn and the entry moved aside; an evicted entry) makes the
 * workers compute that batch instead. A cached batch with failed samples
 * is read like any other: its skipped and substituted lists come from the
 * file and its failure records are logged by the consumer, as
 * sp_cache_reader_batch() does in process. A failed write (full disk) is a
 * warning: the epoch goes on uncached. A worker that dies writing a batch
 * file costs nothing: the consumer writes that batch from the slot.
 * Per-worker rng mode is not cached.
 *
 * cfg.rng_mode SP_RNG_PER_WORKER is the documented demonstration of the
 * classic scheme (loader.h): each worker draws from K_worker(w) with its own
 * counter, so the bytes then depend on W and on scheduling.
 *
 * Test hooks, only in builds configured with SEEDPIPE_TEST_HOOKS=ON (a
 * test build; a library built without it reads no SEEDPIPE_TEST_*
 * variable): with SEEDPIPE_TEST_CRASH_SAMPLE=i in the environment at
 * sp__pool_create(), a worker that starts computing sample i dies by SIGSEGV
 * (as in a decoder crash); it exists to test recovery, nothing else.
 * SEEDPIPE_TEST_CRASH_SIGNAL=n makes it raise signal n instead (9: a kill,
 * as the OOM killer's, which the pool cannot tell from one sent from
 * outside); SEEDPIPE_TEST_CRASH_TIMES=k only while the position has seen
 * fewer than k deaths (default: always, until it is charged with two).
 * SEEDPIPE_TEST_CRASH_FROM says how: unset, it raises the signal (through
 * the worker's handlers: its own crash); `fault` a real one where there is
 * one (a store through NULL for SIGSEGV, abort() for SIGABRT, a trap
 * instruction for SIGILL); `outside` a child of the worker sends it with
 * kill(), as a watchdog would (not charged: redone like a kill).
 * SEEDPIPE_TEST_CRASH_CACHE_WRITE=i: a worker that has written the cache
 * file of batch index i (of any epoch) dies before reporting it.
 *
 * Thread/fork safety: one consumer thread per pool. The library installs
 * no signal handlers in the caller's process. A worker (a forked child)
 * installs its own for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT, which
 * die of the signal by its default action but first record whether another
 * process sent it (a crash signal sent from outside, e.g. by a watchdog, is
 * redone like a kill, never charged to the sample). Workers get
 * PR_SET_PDEATHSIG(SIGKILL), so they never outlive the consumer. PR_SET_PDEATHSIG follows the forking *thread*:
 * create, take from and destroy a pool on one long-lived thread (workers
 * are forked by sp__pool_create() and, as replacements, by sp__pool_next()).
 * The caller must not reap the workers itself (e.g. waitpid(-1, ...)); a
 * SIGCHLD disposition of SIG_IGN works (a reaped worker counts as dead),
 * but the kernel then drops the exit status, so every death counts as a
 * kill: a sample that crashes its workers ends the run at the respawn
 * bound instead of costing that one sample.
 */
#ifndef SEEDPIPE_POOL_H
#define SEEDPIPE_POOL_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version, and a program opts in by defining SEEDPIPE_ADVANCED_API; the
 * front door is seedpipe/stream.h. */
#ifndef SEEDPIPE_ADVANCED_API
#error "seedpipe/pool.h is the advanced API: #define SEEDPIPE_ADVANCED_API before including it (README.md: The C API); the front door is seedpipe/stream.h"
#endif

#include "seedpipe/cache.h"
#include "seedpipe/loader.h"
#include "seedpipe/state.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_POOL_MAX_WORKERS 64
/* The most worker deaths charged to no sample (kills from outside: see
 * "Worker deaths" above) one pool survives over its whole run; the next
 * one fails the stream with SP_ELIMIT. */
#define SP_POOL_RESPAWN_BOUND(workers) (100 + 16 * (uint64_t)(workers))
typedef struct sp_pool_config {
    int workers;                    /* 1..SP_POOL_MAX_WORKERS */
    int ring_slots;                 /* R, 1..1024; 0: max(2, 2 * workers) */
    uint32_t epochs;                /* the stream ends before this epoch (>= 1) */
    const sp_loader_state *resume;  /* NULL: start at epoch 0, batch 0 */
    const char *cache_dir;          /* NULL: no cache; else the epoch cache
                                       directory (cache.h), created if missing */
    const sp_cache_opts *cache_opts;   /* NULL: sp_cache_opts_default() */
} sp_pool_config;

typedef struct sp_pool sp_pool;

/*! sp_pool_digest() : sp_batch_digest() of `view`, the batch sp__pool_next()
 *  returned last, as it was delivered (bytes the caller wrote into the view
 *  since are not seen). The first call asks the pool to hash every later
 *  batch sample by sample as it is computed (a moment after each is
 *  written, still in the caches: a fraction of the cost of hashing the
 *  whole batch afterwards): by the consumer while sp__pool_next() waits for
 *  it when a CPU is free for that, else by the worker that wrote each
 *  sample (environment SEEDPIPE_POOL_DIGEST=consumer or =workers chooses).
 *  A batch it could not hash so (a failed, skipped or substituted sample, a
 *  batch done before the first call) is hashed from the view. The value
 *  never depends on which. For a consumer that digests every batch
 *  (`seedpipe digest`); one that does not never pays for it. view NULL:
 *  only ask (before the first sp__pool_next(): the first batches are hashed
 *  so too); returns zeros. */
SP_API sp_digest sp_pool_digest(sp_pool *pool, const sp_batch *view);

typedef struct sp_pool_stats {
    int workers, ring_slots;
    uint64_t batches_taken, batches_total;
    uint64_t worker_deaths;        /* noticed and replaced */
    uint64_t positions_redone;     /* unfinished positions put back */
    uint64_t last_ready_ns;        /* CLOCK_MONOTONIC: last taken batch became complete */
    uint64_t last_taken_ns;        /* ... and when sp__pool_next returned it */
} sp_pool_stats;

/*! sp_pool_cache() : the pool's cache (for sp_cache_stats_get()), or NULL. */
SP_API sp_cache *sp_pool_cache(sp_pool *pool);

/*! sp_pool_worker_pid() : pid of worker w (0 if none). For tests and
 *  `verify`, which kill a worker to prove recovery. */
SP_API int sp_pool_worker_pid(const sp_pool *pool, int w);

#ifdef __cplusplus
}
#endif
#endif
