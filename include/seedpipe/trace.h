/* seedpipe/trace.h - a timeline of where the time goes: Chrome trace-event
 * JSON of the consumer and every worker process, and its summary.
 *
 * sp_trace_start(path) makes this process record spans (what it did, from
 * when to when) until sp_trace_stop(), which writes them to `path` as a
 * Chrome trace-event file (JSON object format: {"traceEvents": [...]}) that
 * Perfetto (ui.perfetto.dev) and chrome://tracing open. Worker processes a
 * pool forks while a trace is recording record their own spans, and
 * sp_trace_stop() merges them in: one track per process (pid = the OS pid,
 * named "consumer", "worker 0", ... by process_name metadata), complete
 * events ("ph": "X", microseconds since sp_trace_start()) with the batch and
 * sample they belong to in "args". docs/tracing.md says how to read one.
 *
 * What is recorded (the span names, sp_trace_kind below): a worker's
 * "sample" (one batch position: epoch, batch, position, sample index) and,
 * inside it, "read" (the sample's bytes), "decode", "augment" (the ops
 * after decoding) and "write" (the output into the batch slot); "cache
 * read" / "cache write" (a whole batch file); "wait work" (nothing left to
 * claim) and "wait slot" (the ring is full: backpressure). The consumer's
 * "next" (sp_stream_next() / the service's take: waiting for the next
 * batch), "digest" (sp_batch_digest()), "open" (the dataset and pipeline)
 * "spawn" (forking the workers) and "ring" (reserving the ring's memory,
 * while the workers start); the service's "publish"; a caller's own
 * spans through sp_trace_span() ("step" for a training step, "user").
 *
 * Guarantees. Tracing never changes a byte of a stream: it only reads a
 * clock and appends records. Off (the default) it costs one predictable
 * branch per span. On, each process appends fixed-size binary records (48
 * bytes) to its own file beside `path` (`path`.parts-PID/), through a
 * shared mapping of one 3 MiB window, so memory stays bounded whatever the
 * run's length and a worker killed at any instruction (sp__pool_destroy()
 * SIGKILLs them) loses nothing it recorded; sp_trace_stop() turns the
 * parts into JSON and removes them. A process records at most
 * SP_TRACE_MAX_EVENTS spans; later ones are counted as dropped (the JSON's
 * "otherData" says how many).
 *
 * Thread/fork safety: the recorder is process-wide; any thread may record
 * (a mutex orders the appends). Start and stop from one thread, with no
 * pool of the process running across the stop (the pool's workers append
 * to their own files: close the stream first). A child forked by anything
 * else than a pool records nothing.
 */
#ifndef SEEDPIPE_TRACE_H
#define SEEDPIPE_TRACE_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version, and a program opts in by defining SEEDPIPE_ADVANCED_API; the
 * front door is seedpipe/stream.h. */
#ifndef SEEDPIPE_ADVANCED_API
#error "seedpipe/trace.h is the advanced API: #define SEEDPIPE_ADVANCED_API before including it (README.md: The C API); the front door is seedpipe/stream.h"
#endif

#include <stddef.h>
#include <stdint.h>

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most spans one process records; more are counted as dropped. */
#define SP_TRACE_MAX_EVENTS (1u << 22)

/* Span kinds (stable values: they are what the part files hold). */
typedef enum {
    SP_TRACE_SAMPLE = 1,       /* a worker computes one batch position */
    SP_TRACE_READ = 2,         /* the sample's bytes read from the dataset */
    SP_TRACE_DECODE = 3,       /* image decode (a JPEG's crop region) */
    SP_TRACE_AUGMENT = 4,      /* the ops after decoding (resample, flips, jitter) */
    SP_TRACE_WRITE = 5,        /* the output written into the batch (slot) */
    SP_TRACE_WAIT_WORK = 6,    /* a worker with nothing to claim */
    SP_TRACE_WAIT_SLOT = 7,    /* a worker waiting for a free ring slot */
    SP_TRACE_CACHE_READ = 8,   /* a cached batch file read into a slot */
    SP_TRACE_CACHE_WRITE = 9,  /* a batch written to the epoch cache */
    SP_TRACE_NEXT = 10,        /* the consumer waits for (takes) the next batch */
    SP_TRACE_DIGEST = 11,      /* the consumer hashes a batch */
    SP_TRACE_OPEN = 12,        /* dataset and pipeline opened */
    SP_TRACE_SPAWN = 13,       /* worker processes forked */
    SP_TRACE_PUBLISH = 14,     /* the service publishes a batch to its clients */
    SP_TRACE_STEP = 15,        /* a training step (the caller's) */
    SP_TRACE_USER = 16,        /* anything else the caller times */
    SP_TRACE_BATCH = 17,       /* an in-process loader computes a batch */
    SP_TRACE_RING = 18,        /* the pool's ring memory reserved (while the workers start) */
    SP_TRACE_MAP = 19,         /* a worker maps a ring slot's pages (its first item there) */
    SP_TRACE_KIND_END = 20
} sp_trace_kind;

/*! sp_trace_start() : record this process (and the pool workers it forks
 *  from now on) until sp_trace_stop(), which writes `path`. The parts
 *  directory `path`.parts-PID is created now, with this process's part and
 *  its first 3 MiB window reserved (a missing parent directory, or a disk
 *  without the room, is an error here naming it and the errno, ENOSPC, not
 *  at the end). @return 0, SP_EINVAL (a trace is
 *  already recording in this process, or path empty), SP_EIO (naming the
 *  path and the reason). */
SP_API int sp_trace_start(const char *path, sp_error *err);

/*! sp_trace_stop() : stop recording and write the trace (atomic publish:
 *  the file appears whole) from this process's and its workers' parts,
 *  then remove the parts. A no-op returning 0 when no trace records.
 *  A part that could not grow on a full disk (its blocks are reserved
 *  before they are mapped: never a SIGBUS) dropped its spans from then on:
 *  the trace is still written and 0 returned, with err->code 0 and
 *  err->msg a warning ("trace FILE: truncated: N spans dropped, ... (ENOSPC)");
 *  otherwise err->msg stays empty.
 *  @return 0, SP_EIO or SP_ENOMEM (the parts are removed either way). */
SP_API int sp_trace_stop(sp_error *err);

/*! sp_trace_active() : 1 while this process records, else 0. */
SP_API int sp_trace_active(void);

/*! sp_trace_clock() : the trace clock (CLOCK_MONOTONIC, ns) when a trace
 *  records, else 0: t0 for sp_trace_span(). */
SP_API uint64_t sp_trace_clock(void);

/*! sp_trace_span() : record a span of `kind` from t0 (sp_trace_clock()) to
 *  now, with the epoch and batch index it concerns (UINT32_MAX /
 *  UINT64_MAX: none). Does nothing when t0 is 0 or no trace records. */
SP_API void sp_trace_span(int kind, uint64_t t0, uint32_t epoch, uint64_t batch);

/* The summary of a trace file (sp_trace_summary()). */
typedef struct sp_trace_proc {
    int pid;
    char name[32];             /* process_name: "consumer", "worker 0", ... */
    double first_us, last_us;  /* its first span's start, its last span's end */
    double busy_us;            /* the union of its work spans (every span but the waits) */
    uint64_t events;
} sp_trace_proc;

typedef struct sp_trace_gap {
    int pid;
    double start_us, dur_us;   /* a stretch of that process with no work span */
    char waited[24];           /* the wait span that covers most of it ("wait slot",
                                  "next", ...), or "untraced" */
} sp_trace_gap;

typedef struct sp_trace_summary {
    double wall_us;            /* first span's start to last span's end, all processes */
    double busy_us;            /* sum of the processes' busy_us */
    double first_batch_us;     /* end of the consumer's first "next" (from the trace's
                                  start: sp_trace_start()); -1 if none */
    uint64_t events, dropped;
    size_t nprocs, ngaps;
    sp_trace_proc *procs;      /* consumer first, then by name */
    sp_trace_gap *gaps;        /* the longest first */
} sp_trace_summary;

/* The largest trace file sp_trace_summary_read() reads: 256 MiB (about 1.3
 * million spans). */
#define SP_TRACE_SUMMARY_MAX_BYTES ((uint64_t)256 << 20)

/*! sp_trace_summary_read() : read a trace written by sp_trace_stop() (any
 *  Chrome trace-event JSON object with "X" events and process_name
 *  metadata works) and summarise it, keeping the `max_gaps` longest idle
 *  gaps. The file must be a regular file of at most
 *  SP_TRACE_SUMMARY_MAX_BYTES (checked on its size before a byte is read:
 *  SP_ELIMIT naming the limit); it is read whole, each event parsed on its
 *  own (memory: the file, plus 48 bytes a span). Names from the file
 *  (process_name, span names) are kept with their control bytes and the
 *  backslash escaped as \xNN, so printing them prints no terminal escape.
 *  @return 0, SP_EIO, SP_EFORMAT (not a trace: the reason and byte offset),
 *  SP_ELIMIT, SP_ENOMEM. Free with sp_trace_summary_free(). */
SP_API int sp_trace_summary_read(const char *path, size_t max_gaps, sp_trace_summary *out,
                                 sp_error *err);
/*! sp_trace_summary_free() : free what sp_trace_summary_read() allocated. Accepts a zeroed one. */
SP_API void sp_trace_summary_free(sp_trace_summary *s);

#ifdef __cplusplus
}
#endif
#endif
