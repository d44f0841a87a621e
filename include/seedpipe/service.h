/* seedpipe/service.h - the loader as a service behind a named shared-memory region.
 *
 * A service runs one worker pool (pool.h) whose ring lives in a named
 * region "/NAME" (shm_open, O_CREAT | O_EXCL, mode 0600) that clients in
 * other processes attach to (client.h) and read batches from in place: the
 * image bytes are written once, by a worker, into the slot a client reads.
 *
 * Ranks. A job of world K ranks reads global batches of B samples
 * (B % K == 0); rank r's slice is the r-th contiguous B / K positions of
 * each (sampler.h). A service serves the consecutive ranks A .. A+m-1 of
 * that world (rank_first A, rank_count m; by default all K: one service for
 * the whole job) and computes only their positions, [b*B + A*B/K,
 * b*B + (A+m)*B/K) of global batch b: with one service per node, a node
 * never reads or decodes another node's samples. Clients attach with their
 * GLOBAL rank r (A <= r < A+m; another rank is refused, naming the range
 * served); each slice is finalised by the service on its own, so rank r
 * gets exactly what an in-process loader with --rank r --world K gives
 * (bytes, labels, indices, skipped and substituted lists: on-error skip
 * compacts within the slice; a short last batch cuts the slices the same
 * way), and the slices of all K ranks concatenated in rank order, over all
 * the nodes' services, are the global batch. A slot is recycled when every
 * rank served has released its slice of it, where:
 *  - a rank that has never attached (or is attaching) blocks recycling
 *    (the stream waits for all K ranks, so no rank silently misses batches);
 *  - a rank whose client detached or died does not block: its slices count
 *    as released (the service checks each attached client's pid with
 *    kill(pid, 0) and /proc start time every 20 ms). Releases are cursors,
 *    not reference counts, so a death can release nothing twice;
 *  - a client re-attaching as that rank continues from the first batch it
 *    had not released, or, if that batch was recycled meanwhile, from the
 *    oldest batch still in the ring (its missing slices are lost to it).
 *
 * Errors under on-error fail: the first failing slice stops the stream;
 * every rank this service serves gets that sample's error after the batches
 * before it (with world 1 this is the in-process error; a rank whose own
 * slice is fine sees the error of another rank of the same service too).
 * Ranks served by other services (other nodes) do not see it: their
 * services never compute that sample; their trainers learn of it, if at
 * all, from the job's launcher when the failing ranks stop.
 *
 * Staleness. At create, an existing region with the same name is
 *  - refused when its service is alive (owner pid running, same start time,
 *    header says running): "region NAME is served by pid P";
 *  - removed (shm_unlink), and reported by sp_service_note(), when it is
 *    stale: a seedpipe header whose owner is gone or that says not running,
 *    or an empty/zero header older than 2 s (a service killed while
 *    creating it). Anything else (a foreign file, another uid) is refused.
 *
 * End. The service ends when every batch of the stream was published and
 * released by every rank (or their clients are gone), when a stop flag is
 * raised (SIGTERM/SIGINT in `seedpipe serve`), or after a stream error has
 * been served. sp_service_destroy() marks the region not running, stops the
 * workers and unlinks the region; clients still mapping it can read what
 * they hold, and then see the end of the stream.
 *
 * Thread/fork safety: one thread runs a service (create, run, destroy on
 * the same long-lived thread: the pool's PR_SET_PDEATHSIG rule). The
 * library installs no signal handlers; sp__service_fork() does, in its child.
 */
#ifndef SEEDPIPE_SERVICE_H
#define SEEDPIPE_SERVICE_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version, and a program opts in by defining SEEDPIPE_ADVANCED_API; the
 * front door is seedpipe/stream.h. */
#ifndef SEEDPIPE_ADVANCED_API
#error "seedpipe/service.h is the advanced API: #define SEEDPIPE_ADVANCED_API before including it (README.md: The C API); the front door is seedpipe/stream.h"
#endif

#include <signal.h>
#include <sys/types.h>

#include "seedpipe/loader.h"
#include "seedpipe/pool.h"
#include "seedpipe/state.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_SERVICE_MAX_RANKS 64          /* ranks one service serves */
#define SP_SERVICE_MAX_WORLD (1u << 16)  /* ranks of the job */
#define SP_SERVICE_NAME_MAX 200
typedef struct sp_service_config {
    const char *name;               /* region name: 1..200 of [A-Za-z0-9._-] */
    uint32_t world;                 /* the job's K ranks, 1..2^16; B % K == 0 (0: 1) */
    int workers;                    /* 1..SP_POOL_MAX_WORKERS */
    int ring_slots;                 /* 0: max(2, 2 * workers) */
    uint32_t epochs;                /* >= 1 */
    const sp_loader_state *resume;  /* NULL: from epoch 0, batch 0 */
    const char *cache_dir;          /* NULL, or the epoch cache (pool.h, cache.h) of the
                                       loader's stream: the global one (rank 0, world 1)
                                       for all ranks; see sp_service_create() */
    const sp_cache_opts *cache_opts;   /* NULL: defaults */
    /* The ranks served: rank_first .. rank_first + rank_count - 1 of world
     * (rank_count 1..64; 0: every rank from rank_first on, so a zeroed pair
     * serves all K, as before these fields existed). */
    uint32_t rank_first, rank_count;
    /* Added in ABI 6: NULL, or a batch mix (batchmix.h) applied to each
     * published slice in place, keyed by (the loader's seed, epoch, global
     * batch index): its images mixed, its soft targets (count x K float32)
     * beside them in the slot (client.h: sp_client_mix_targets()). The
     * samples must be float32 NCHW without targets. */
    const struct sp_batch_mix_spec *batch_mix;
} sp_service_config;

typedef struct sp_service sp_service;

/*! sp_service_create() : check/clean the name, open the loader (lcfg, whose
 *  rank/world must be 0/1: the service's ranks come from scfg), create the
 *  region, fork the workers, mark the region running.
 *  The loader computes the served ranks' positions only: ranks A .. A+m-1
 *  with A and K multiples of m are rank A/m of world K/m (so the epoch
 *  cache, cache_dir, holds that rank's stream: all ranks, the global one);
 *  other spans (e.g. ranks 1-2 of 4) take consecutive slices and cannot use
 *  the cache (SP_EUNSUPP).
 *  @return 0, SP_EINVAL (name, world, range, B % K), SP_EUNSUPP (cache with
 *  such a span), SP_EIO ("region NAME is served by pid P", or not ours),
 *  SP_EMISMATCH (resume), the loader's errors. */
SP_API int sp_service_create(const sp_loader_config *lcfg, const sp_service_config *scfg,
                             sp_service **out, sp_error *err);
/*! sp_service_note() : "" or what create did on the way, e.g.
 *  "removed stale region NAME (service pid 123 is gone)". */
SP_API const char *sp_service_note(const sp_service *svc);
/*! sp_service_run() : serve until the end (see above) or until *stop
 *  becomes nonzero (checked at least every 10 ms; may be NULL).
 *  @return 0 (served to the end), SP_STOPPED, the stream's error
 *  (served to the clients first), SP_ELIMIT (the workers' respawn bound:
 *  "pool: respawn bound reached: ...", also served to the clients first),
 *  or SP_EIO (a worker could not be forked; the region's memory gone).
 *  Worker deaths follow pool.h's rule ("Worker deaths"): a crash costs its
 *  sample under on_error, a kill from outside is redone and never changes
 *  a batch. */
SP_API int sp_service_run(sp_service *svc, volatile sig_atomic_t *stop, sp_error *err);
/*! sp_service_destroy() : mark not running, stop the workers, unlink the
 *  region. Accepts NULL. */
SP_API void sp_service_destroy(sp_service *svc);
/*! sp_service_loader() : the service's loader (failure log, dims). */
SP_API sp_loader *sp_service_loader(sp_service *svc);
/*! sp_service_cache() : the service's epoch cache (stats), or NULL. */
SP_API sp_cache *sp_service_cache(sp_service *svc);

/* What `seedpipe status NAME` shows. */
typedef struct sp_service_status {
    int pid, alive, running, ended;
    uint32_t world, ring_slots, nworkers, epochs;   /* world: the job's K */
    uint64_t batches_per_epoch, start_abs, total;
    uint64_t published, recycled;    /* batches handed to clients / recycled */
    uint64_t samples;                /* samples published */
    double seconds;                  /* since ready */
    uint32_t worker_deaths, client_deaths;
    int err_code;
    char err_msg[SP_ERROR_MSG_MAX];
    char dataset[256];
    char fingerprint[33];
    uint64_t seed;
    uint32_t slots_ready, slots_computing;   /* ring occupancy */
    struct { int pid, alive, busy; uint32_t respawns; uint64_t samples; } workers[SP_POOL_MAX_WORKERS];
    /* ranks[k]: rank rank_first + k, k < nranks */
    struct { int pid, state; uint32_t attaches, deaths; uint64_t next, released; } ranks[SP_SERVICE_MAX_RANKS];
    uint32_t rank_first, nranks;     /* the ranks served (all: 0, world) */
} sp_service_status;
#define SP_RANK_NEVER 0
#define SP_RANK_ATTACHING 1
#define SP_RANK_ATTACHED 2
#define SP_RANK_GONE 3

/*! sp_service_status_read() : map NAME read-only, validate it like a client,
 *  and copy its progress. @return 0, SP_EIO (missing), SP_EFORMAT (not a
 *  valid seedpipe region). A stale region reads fine (alive 0). */
SP_API int sp_service_status_read(const char *name, sp_service_status *st, sp_error *err);

#ifdef __cplusplus
}
#endif
#endif
