/* seedpipe/service.h - the loader as a service behind a named shared-memory region.
 *
 * A service runs one worker pool (pool.h) whose ring lives in a named
 * region "/NAME" (shm_open, O_CREAT | O_EXCL, mode 0600) that clients in
 * other processes attach to (client.h) and read batches from in place: the
 * image bytes are written once, by a worker, into the slot a client reads.
 *
 * Ranks. With world K the service computes GLOBAL batches (batch size B,
 * B % K == 0) and client rank r reads the r-th contiguous slice of B / K
 * positions of each (sampler.h), finalised by the service per slice, so a
 * rank gets exactly what an in-process loader with --rank r --world K gives
 * (on-error skip compacts within the slice) and the slices concatenated in
 * rank order are the global batch. A slot is recycled when every rank has
 * released its slice of it, where:
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
 * every rank gets that sample's error after the batches before it (with
 * world 1 this is the in-process error; with world K a rank whose own slice
 * is fine sees the other slice's error too).
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
 * library installs no signal handlers; sp_service_fork() does, in its child.
 */
#ifndef SEEDPIPE_SERVICE_H
#define SEEDPIPE_SERVICE_H

#include <signal.h>
#include <sys/types.h>

#include "seedpipe/loader.h"
#include "seedpipe/pool.h"
#include "seedpipe/state.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_SERVICE_MAX_RANKS 64
#define SP_SERVICE_NAME_MAX 200
/* sp_service_run() returns this when stopped by the flag (not an error). */
#define SP_SERVICE_STOPPED 1

typedef struct sp_service_config {
    const char *name;               /* region name: 1..200 of [A-Za-z0-9._-] */
    uint32_t world;                 /* K ranks, 1..64; B % K == 0 (0: 1) */
    int workers;                    /* 1..SP_POOL_MAX_WORKERS */
    int ring_slots;                 /* 0: max(2, 2 * workers) */
    uint32_t epochs;                /* >= 1 */
    const sp_loader_state *resume;  /* NULL: from epoch 0, batch 0 */
    const char *cache_dir;          /* NULL, or the epoch cache (pool.h, cache.h): the
                                       global stream's epochs (rank 0, world 1) */
    const sp_cache_opts *cache_opts;   /* NULL: defaults */
} sp_service_config;

typedef struct sp_service sp_service;

/*! sp_service_create() : check/clean the name, open the loader (lcfg, whose
 *  rank/world must be 0/1: the service computes global batches), create
 *  the region, fork the workers, mark the region running.
 *  @return 0, SP_EINVAL (name, world, B % K), SP_EIO ("region NAME is served
 *  by pid P", or not ours), SP_EMISMATCH (resume), the loader's errors. */
SP_API int sp_service_create(const sp_loader_config *lcfg, const sp_service_config *scfg,
                             sp_service **out, sp_error *err);
/*! sp_service_note() : "" or what create did on the way, e.g.
 *  "removed stale region NAME (service pid 123 is gone)". */
SP_API const char *sp_service_note(const sp_service *svc);
/*! sp_service_run() : serve until the end (see above) or until *stop
 *  becomes nonzero (checked at least every 10 ms; may be NULL).
 *  @return 0 (served to the end), SP_SERVICE_STOPPED, the stream's error
 *  (served to the clients first), or SP_EIO (workers keep dying). */
SP_API int sp_service_run(sp_service *svc, volatile sig_atomic_t *stop, sp_error *err);
/*! sp_service_destroy() : mark not running, stop the workers, unlink the
 *  region. Accepts NULL. */
SP_API void sp_service_destroy(sp_service *svc);
/*! sp_service_loader() : the service's loader (failure log, dims). */
SP_API sp_loader *sp_service_loader(sp_service *svc);
/*! sp_service_cache() : the service's epoch cache (stats), or NULL. */
SP_API sp_cache *sp_service_cache(sp_service *svc);

/*! sp_service_fork() : run a service in a child process (for tests, verify
 *  and tools): the child creates it, reports success or the error through a
 *  pipe, serves, and exits 0 (end or SIGTERM/SIGINT/parent death, which it
 *  turns into a stop) or 1. Returns once the region is ready.
 *  @return 0 (*pid set) or the child's create error (child reaped). */
SP_API int sp_service_fork(const sp_loader_config *lcfg, const sp_service_config *scfg, pid_t *pid,
                           sp_error *err);
/*! sp_service_join() : wait for a forked service to exit, at most
 *  timeout_ms (then SIGTERM, and SIGKILL 2 s later). @return its exit
 *  status (0..255), 128 + signal if killed, -1 on waitpid error. */
SP_API int sp_service_join(pid_t pid, int timeout_ms);

/* What `seedpipe status NAME` shows. */
typedef struct sp_service_status {
    int pid, alive, running, ended;
    uint32_t world, ring_slots, nworkers, epochs;
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
    struct { int pid, state; uint32_t attaches, deaths; uint64_t next, released; } ranks[SP_SERVICE_MAX_RANKS];
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
