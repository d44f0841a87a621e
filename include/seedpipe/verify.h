/* seedpipe/verify.h - prove the determinism contract: one stream, many configurations, equal bytes.
 *
 * sp_verify_run() runs the same loader stream (lcfg, epochs) in several
 * configurations, each as a batch stream (stream.h), and compares every
 * batch's digest (sp_batch_digest()) and its skipped / substituted samples
 * with the in-process reference (the first row):
 *   - the in-process loader (the reference; "in-process, world 1" when
 *     world sizes are verified);
 *   - the worker pool at each worker count;
 *   - the largest worker count with one worker SIGKILLed a third of the way
 *     in (its work is redone by a replacement) (unless SP_VERIFY_NO_CRASH);
 *   - a stop half way, the state saved as text and parsed back, and a
 *     resume on another worker count (unless SP_VERIFY_NO_RESUME);
 *   - through the epoch cache: a cold run that fills it, warm runs that
 *     read it on two worker counts and through a service (per-sample rng
 *     only; unless SP_VERIFY_NO_CACHE; a temporary directory, removed
 *     after, unless cache_dir is given, which is kept);
 *   - a service in a child process read by one client, and by 2 clients as
 *     ranks whose slices are concatenated (world 1 only; unless
 *     SP_VERIFY_NO_SERVICE);
 *   - for each world size K >= 2 in `worlds`: the K ranks' slices of every
 *     global batch from K in-process loaders, and from two services that
 *     each serve half of the ranks, concatenated in rank order.
 * It reports the first divergence of each row down to the byte: epoch,
 * batch, position in the batch (and the rank and its position, for a world
 * row), sample index, byte offset in the batch and in the sample, and the
 * two byte values. A mismatch is a result (sp_verify_ok() 0), not an error.
 *
 * The library prints nothing: sp_verify_format() renders the report as
 * `seedpipe verify` prints it, sp_verify_json() as one JSON object (for
 * bindings); progress goes to the optional callback.
 *
 * Thread/fork safety: forks workers and services (pool.h, service.h): call
 * it from one long-lived thread, and do not reap children yourself.
 *
 * ABI: the structs here are fixed-layout parts of SP_ABI_VERSION (version.h):
 * a field added bumps it, and the Python binding's ctypes mirrors
 * (bindings/python/seedpipe/_lib.py, checked by its test_abi.py) change with it.
 */
#ifndef SEEDPIPE_VERIFY_H
#define SEEDPIPE_VERIFY_H

#include "seedpipe/cache.h"
#include "seedpipe/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_VERIFY_MAX_LIST 16     /* worker counts, world sizes */
#define SP_VERIFY_MAX_WORLD 128   /* two services of 64 ranks */
#define SP_VERIFY_MAX_ROWS 64

/* Rows left out (flags). */
#define SP_VERIFY_NO_CRASH 1u
#define SP_VERIFY_NO_RESUME 2u
#define SP_VERIFY_NO_SERVICE 4u
#define SP_VERIFY_NO_CACHE 8u

typedef struct sp_verify_config {
    const int *workers;        /* worker counts (1..64); NULL: 1,2,3,4,8 */
    int nworkers;              /* 1..16 (0 with workers NULL) */
    const int *worlds;         /* world sizes to verify (1..128, each dividing B; lcfg of
                                  world 1), or NULL */
    int nworlds;
    int ring_slots;            /* the pools' and services' rings (0: default) */
    uint32_t epochs;           /* >= 1 */
    unsigned flags;            /* SP_VERIFY_NO_* */
    const char *cache_dir;     /* NULL: a temporary one; else kept */
    const sp_cache_opts *cache_opts;   /* NULL: defaults (no warnings reported) */
    /* Called every 8 batches of a row and at its last (done, total), and
     * with name NULL when a row ends. May be NULL. */
    void (*progress)(void *ud, const char *name, uint64_t done, uint64_t total);
    void *progress_ud;
} sp_verify_config;

/* How a row first differs from the reference. */
typedef enum {
    SP_VERIFY_SAME = 0,        /* no divergence */
    SP_VERIFY_DIV_SAMPLE,      /* another sample index at `position` */
    SP_VERIFY_DIV_BYTE,        /* a byte of the sample at `position` differs */
    SP_VERIFY_DIV_COUNT,       /* the samples agree, their numbers do not (or a label/dims) */
    SP_VERIFY_DIV_MISSING,     /* the reference has no such batch */
    SP_VERIFY_DIV_LISTS,       /* the skipped/substituted samples differ */
    SP_VERIFY_DIV_LENGTH,      /* only the number of batches differs */
    SP_VERIFY_DIV_UNKNOWN      /* the batch could not be recomputed (note says why) */
} sp_verify_div_kind;

typedef struct sp_verify_divergence {
    sp_verify_div_kind kind;
    uint32_t epoch;
    uint64_t batch;            /* within the epoch */
    int64_t stream_batch;      /* epoch * batches per epoch + batch */
    int64_t position;          /* in the (global, concatenated) batch; -1 if none */
    int64_t rank;              /* a world row: the rank holding `position`, else -1 */
    int64_t rank_position;     /* ... and its position in that rank's slice */
    uint64_t sample_ref, sample;   /* sample index at `position`: reference, this row */
    int64_t byte_offset;       /* DIV_BYTE: in the batch; -1 otherwise */
    int64_t sample_byte;       /* DIV_BYTE: in the sample */
    uint32_t byte_ref, byte;   /* DIV_BYTE: the two values */
    uint32_t count_ref, count; /* samples in the batch: reference, this row */
} sp_verify_divergence;

typedef struct sp_verify_row {
    char name[96];             /* "workers 2", "service -> client", ... */
    int rc;                    /* 0, or the row's error (msg) */
    char msg[SP_ERROR_MSG_MAX];
    uint64_t batches;
    sp_digest stream;          /* XXH3-128 over the batch digests, as `seedpipe digest` */
    int equal;                 /* the reference row: 1; else 1 iff identical to it */
    uint32_t world;            /* a world row: K; else 0 */
    uint64_t worker_deaths;    /* noticed and replaced */
    sp_verify_divergence div;
    char note[1024];           /* the lines printed under the table for this row ("" none) */
} sp_verify_row;

typedef struct sp_verify_report sp_verify_report;

/*! sp_verify_run() : run the configurations (see above).
 *  @return 0 (*out set: inspect it, sp_verify_ok()), or before anything ran
 *  SP_EINVAL (epochs 0, empty or bad lists, a count without its list, a
 *  world size not dividing the batch size, world sizes with lcfg not the
 *  whole stream (world 1), too many rows), the loader's errors for lcfg,
 *  SP_ENOMEM.
 *  A row's own failure (a sample error, a service that cannot start) is
 *  in that row (rc, msg), not the return value. */
SP_API int sp_verify_run(const sp_loader_config *lcfg, const sp_verify_config *vcfg,
                         sp_verify_report **out, sp_error *err);
/*! sp_verify_free() : accepts NULL. */
SP_API void sp_verify_free(sp_verify_report *r);

/*! sp_verify_ok() : 1 iff every row ran and equals the reference. */
SP_API int sp_verify_ok(const sp_verify_report *r);

/*! sp_verify_format() : the report as `seedpipe verify` prints it (table,
 *  notes, "verify: " summary line), NUL-terminated in buf (truncated if
 *  size is too small). @return the length needed, snprintf-style. */
SP_API size_t sp_verify_format(const sp_verify_report *r, char *buf, size_t size);
/*! sp_verify_json() : the report as one JSON object {"ok", "summary",
 *  "skipped", "rows": [{"configuration", "batches", "digest" (null if
 *  failed), "equal" (null for the reference), "error", "world",
 *  "worker_deaths", "note", "divergence": {...} or null}]}, snprintf-style
 *  like sp_verify_format(). */
SP_API size_t sp_verify_json(const sp_verify_report *r, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
