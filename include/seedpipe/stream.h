/* seedpipe/stream.h - one batch stream, wherever the batches come from.
 *
 * A stream hands out the batches of one loader stream in order, from a
 * start position to its end, with the same calls whichever source computes
 * them:
 *   SP_STREAM_LOADER   the in-process loader (loader.h), cfg.threads threads,
 *                      batch by batch with sp_loader_batch(), or through the
 *                      epoch cache (sp__cache_epoch_batch()) with cache_dir;
 *   SP_STREAM_POOL     the worker pool (pool.h): `workers` forked processes
 *                      writing into a shared-memory ring (and the cache);
 *   SP_STREAM_SERVICE  a client (client.h) attached by name to a running
 *                      service (service.h, `seedpipe serve`), as one rank.
 *
 *   sp_stream *s;
 *   sp_stream_config sc;
 *   sp_stream_config_default(&sc);          // in-process, epochs 1
 *   sc.kind = SP_STREAM_POOL; sc.workers = 4; sc.epochs = 2;
 *   if (sp_stream_open(&lcfg, &sc, &s, &err) != 0) ...;
 *   sp_batch v;
 *   while ((rc = sp_stream_next(s, &v, &err)) == 0) {
 *       ... v.images, v.labels (v.count samples of batch v.index of v.epoch)
 *       sp_stream_release(s, &v, &err);
 *   }
 *   // rc == SP_END at the end of the stream, else an error
 *   sp_stream_close(s);
 *
 * Guarantee (DESIGN.md section 1): for one loader configuration the three
 * kinds give byte-identical batches (sp_batch_digest() equal batch by
 * batch), with any worker or thread count, with or without the cache, and
 * from a resumed state the batches an uninterrupted stream would have given
 * from there on. A service stream gives its rank's slice of the service's
 * global batches (rank r of world K: the bytes of an in-process loader with
 * rank r, world K).
 *
 * Views. sp_stream_next() fills a view (sp_batch with SP_BATCH_VIEW): its
 * images, labels, indices, skipped and substituted lists point into memory
 * the stream owns (the in-process batch buffer, a pool slot or the
 * service's region), valid until the view is given back with
 * sp_stream_release() or the stream is closed. sp_stream_info_get()'s max_held
 * views may be held at once (1 in-process; the ring's slots otherwise).
 *
 * The one release rule (pool.h and client.h follow it too): give back the
 * view you were handed, any held one, in any order; it is cleared, and a
 * view not held (given back already, or another's) is SP_EINVAL. A ring
 * slot is reused once its batch and every older one are back.
 *
 * Errors are those of the source, with its message ("path: reason" for a
 * sample under on-error fail). A stream that has failed keeps failing:
 * from its first error on, sp_stream_next() and sp_stream_release() return
 * that error (code and message) again, for every kind, so a retry can never
 * hand out a batch an uninterrupted stream would not have; close it.
 * The library prints nothing: cache warnings go to cache_opts->warn.
 *
 * Thread/fork safety: one thread uses a stream (a pool stream: create, take
 * from and close it on one long-lived thread, pool.h's PR_SET_PDEATHSIG
 * rule). A child must not use its parent's stream.
 *
 * ABI: the structs here are fixed-layout parts of SP_ABI_VERSION (version.h):
 * a field added bumps it, and the Python binding's ctypes mirrors
 * (bindings/python/seedpipe/_lib.py, checked by its test_abi.py) change with it.
 */
#ifndef SEEDPIPE_STREAM_H
#define SEEDPIPE_STREAM_H

#include "seedpipe/loader.h"
#include "seedpipe/state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The sources behind a stream, opaque here; their own headers (pool.h,
 * client.h) are the advanced API. */
typedef struct sp_pool sp_pool;
typedef struct sp_client sp_client;
typedef struct sp_client_opts sp_client_opts;
/* The epoch cache and its options, opaque here too: a stream user who sets
 * options or reads the cache's counters includes cache.h. */
typedef struct sp_cache sp_cache;
typedef struct sp_cache_opts sp_cache_opts;

typedef enum {
    SP_STREAM_LOADER = 0,    /* in-process loader */
    SP_STREAM_POOL = 1,      /* worker pool */
    SP_STREAM_SERVICE = 2    /* client of a running service */
} sp_stream_kind;

typedef struct sp_stream_config {
    sp_stream_kind kind;
    int workers;                     /* POOL: 1..64 (pool.h: SP_POOL_MAX_WORKERS) */
    int ring_slots;                  /* POOL: 0: max(2, 2 * workers) */
    uint32_t epochs;                 /* LOADER, POOL: the stream ends before this epoch (>= 1) */
    const sp_loader_state *resume;   /* LOADER, POOL: NULL: from epoch 0, batch 0 */
    const char *cache_dir;           /* LOADER, POOL: the epoch cache (cache.h), or NULL */
    const sp_cache_opts *cache_opts; /* NULL: sp_cache_opts_default() */
    const char *service_name;        /* SERVICE: the region's name (required) */
    uint32_t rank;                   /* SERVICE without a loader config: the rank to attach as */
    const sp_client_opts *client_opts;  /* SERVICE: NULL: defaults */
} sp_stream_config;

/*! sp_stream_config_default() : kind LOADER, epochs 1, everything else 0/NULL. */
SP_API void sp_stream_config_default(sp_stream_config *sc);

typedef struct sp_stream sp_stream;

/*! sp_stream_open() : open a stream of kind sc->kind.
 *  LOADER, POOL: lcfg is required (the loader's configuration: dataset,
 *  pipeline, seed, format, geometry, rank/world, threads); the stream runs
 *  from sc->resume (checked with sp_loader_state_check()) to the end of
 *  epoch sc->epochs - 1.
 *  SERVICE: attaches to sc->service_name. With lcfg NULL it attaches as
 *  sc->rank and takes whatever stream the service serves (expect a
 *  fingerprint through sc->client_opts); with lcfg it attaches as
 *  lcfg->rank and refuses a service whose stream is not lcfg's
 *  (SP_EMISMATCH: fingerprint or seed) or whose world is not lcfg->world
 *  (SP_EINVAL). Position, epochs and cache are the service's: resume and
 *  cache_dir must be NULL.
 *  @return 0 (*out set), SP_EINVAL (a bad kind, NULL out, no lcfg, workers
 *  or epochs out of range, no service name, resume/cache with a service:
 *  each named in the message), SP_EMISMATCH (a foreign resume state), or
 *  the loader's, pool's, cache's or client's errors. */
SP_API int sp_stream_open(const sp_loader_config *lcfg, const sp_stream_config *sc,
                          sp_stream **out, sp_error *err);

/*! sp_stream_close() : stop the workers / detach, free everything; views
 *  handed out become invalid. A cache is flushed first. Accepts NULL. */
SP_API void sp_stream_close(sp_stream *s);

/*! sp_stream_next() : the next batch, as a view (see above), waiting for
 *  it if needed.
 *  @return 0, SP_END (the stream is over; *view cleared), SP_EINVAL
 *  (max_held views already held; the stream goes on), or the source's
 *  error (the stream has failed: see above). */
SP_API int sp_stream_next(sp_stream *s, sp_batch *view, sp_error *err);

/*! sp_stream_release() : give back a view from sp_stream_next(), any held
 *  one, in any order (the release rule above); it is cleared on success.
 *  @return 0, SP_EINVAL (view NULL or not held), or the error of a failed
 *  stream. */
SP_API int sp_stream_release(sp_stream *s, sp_batch *view, sp_error *err);

/*! sp_stream_seek() : LOADER streams: continue from state st (any
 *  position of this stream: checked with sp_loader_state_check()) without
 *  reopening the dataset or the cache; the next batch is st's. A view
 *  held stays valid until it is given back (the next batch is computed
 *  only by sp_stream_next(), after that).
 *  @return 0, SP_EUNSUPP (a pool or service stream, which computes ahead:
 *  close it and open one with sc.resume), SP_EMISMATCH (another stream's
 *  state), SP_ERANGE (past the stream's end), or a failed stream's error. */
SP_API int sp_stream_seek(sp_stream *s, const sp_loader_state *st, sp_error *err);

/*! sp_stream_state() : the position after the last batch taken, as a
 *  loader state any kind (any worker count, any world size) resumes from;
 *  for a service stream, sp_client_state(). */
SP_API void sp_stream_state(const sp_stream *s, sp_loader_state *st);

/* What a stream is and where it stands. */
typedef struct sp_stream_info {
    sp_stream_kind kind;
    uint32_t rank, world;            /* this stream's slice: rank r of world K */
    uint32_t batch_size;             /* the global batch size B (a view holds <= B / K) */
    int c, h, w;                     /* sample shape */
    sp_dtype dtype;
    sp_layout layout;
    size_t sample_bytes;
    uint64_t batches_per_epoch;
    uint64_t first, end;             /* stream positions epoch * batches_per_epoch + batch:
                                        the first batch and one past the last */
    uint64_t taken;                  /* batches taken by sp_stream_next() so far */
    int held, max_held;              /* views held now / at most */
    sp_digest fingerprint;           /* the loader's fingerprint (sp_loader_info_get()) */
    uint64_t seed;
} sp_stream_info;

/*! sp_stream_info_get() : fill *info. */
SP_API void sp_stream_info_get(const sp_stream *s, sp_stream_info *info);

/*! sp_stream_batch_digest() : sp_batch_digest() of a view of this stream
 *  (or of any batch of its shape), for any kind. */
SP_API sp_digest sp_stream_batch_digest(const sp_stream *s, const sp_batch *b);

/*! sp_stream_digest_of() : the stream digest of n batches, from their
 *  digests d[0..n) in stream order (sp_stream_batch_digest() or
 *  sp_batch_digest() of each): XXH3-128 over the digests, each written as
 *  16 big-endian bytes (hi, then lo). The one definition of the stream
 *  digest: `seedpipe digest` prints it after "stream", sp_verify_run()
 *  compares it row by row, seedpipe.digest() returns it as .stream. Two
 *  runs have the same stream digest when they gave the same batches in the
 *  same order. The caller keeps the batch digests (16 bytes a batch); d may
 *  be NULL when n is 0 (the digest of no batch). Never fails. */
SP_API sp_digest sp_stream_digest_of(const sp_digest *d, size_t n);

/*! sp_stream_loader() : the stream's loader (sample dims, failure log,
 *  manifest header): the in-process one, the pool's, or for a service
 *  stream opened with a loader config the one it was checked against
 *  (NULL without one). */
SP_API sp_loader *sp_stream_loader(sp_stream *s);

/*! sp_stream_cache() : the stream's epoch cache (for sp_cache_stats_get()),
 *  or NULL (none, or a service stream). */
SP_API sp_cache *sp_stream_cache(sp_stream *s);

/*! sp_stream_pool() / sp_stream_client() : the pool of a POOL stream, the
 *  client of a SERVICE stream, NULL otherwise: for what only that source
 *  has (pool stats, worker pids, client timing). Owned by the stream. */
SP_API sp_pool *sp_stream_pool(sp_stream *s);
SP_API sp_client *sp_stream_client(sp_stream *s);

#ifdef __cplusplus
}
#endif
#endif
