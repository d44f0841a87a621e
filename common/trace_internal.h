/* trace_internal.h - the recording side of the trace (trace.h) as the
 * library's own code uses it: a span is timed with sp__trace_t0() at its
 * start and recorded with sp__trace_end() at its end.
 *
 * Not a public header. When no trace records, sp__trace_t0() is one
 * relaxed load and a branch and returns 0, and sp__trace_end() of a 0
 * start does nothing: the cost of a span when tracing is off. A span's
 * arguments (epoch, batch, position in the batch, sample index) come from
 * the calling thread's context, set by whoever knows them (the pool's
 * worker for a batch position, the loader once the sample index is known)
 * and inherited by the spans recorded below it (read, decode, augment,
 * write), which know nothing of batches.
 *
 * How the parts are written and merged: common/trace.c's HOW IT WORKS.
 */
#ifndef SEEDPIPE_TRACE_INTERNAL_H
#define SEEDPIPE_TRACE_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "seedpipe/trace.h"

/* "None" for a context field. */
#define SP__TRACE_NONE32 UINT32_MAX
#define SP__TRACE_NONE64 UINT64_MAX

/* 1 while this process records (trace.c). */
extern _Atomic int sp__trace_on;

uint64_t sp__trace_now(void);

/* A span's start: the clock when recording, else 0. */
static inline uint64_t sp__trace_t0(void) {
    if (__builtin_expect(atomic_load_explicit(&sp__trace_on, memory_order_relaxed), 0))
        return sp__trace_now();
    return 0;
}

/*! sp__trace_record() : record a span [t0, now) of `kind` with explicit
 *  arguments (SP__TRACE_NONE*: none). */
void sp__trace_record(int kind, uint64_t t0, uint32_t epoch, uint64_t batch, uint32_t pos,
                      uint64_t sample);
/*! sp__trace_emit() : record a span [t0, now) with the thread's context. */
void sp__trace_emit(int kind, uint64_t t0);

/* A span's end: recorded with the thread's context if it was started
 * while recording. */
static inline void sp__trace_end(int kind, uint64_t t0) {
    if (__builtin_expect(t0 != 0, 0)) sp__trace_emit(kind, t0);
}

/* The thread's context is thread-local storage, touched only while a
 * trace records: a library loaded by dlopen (Python's ctypes) allocates a
 * thread's block of it on first use, which in a child forked from a
 * multi-threaded parent could wait forever for a lock another thread held
 * at the fork; off, nothing here touches it. */
void sp__trace_ctx_set(uint32_t epoch, uint64_t batch, uint32_t pos, uint64_t sample);
void sp__trace_ctx_sample_set(uint64_t sample);

/*! sp__trace_ctx() : set the thread's context (a batch position) when
 *  recording; every field may be SP__TRACE_NONE*. */
static inline void sp__trace_ctx(uint32_t epoch, uint64_t batch, uint32_t pos, uint64_t sample) {
    if (__builtin_expect(atomic_load_explicit(&sp__trace_on, memory_order_relaxed), 0))
        sp__trace_ctx_set(epoch, batch, pos, sample);
}
/*! sp__trace_ctx_sample() : set only the context's sample index (when recording). */
static inline void sp__trace_ctx_sample(uint64_t sample) {
    if (__builtin_expect(atomic_load_explicit(&sp__trace_on, memory_order_relaxed), 0))
        sp__trace_ctx_sample_set(sample);
}

/*! sp__trace_child() : in a process forked by the pool: if its parent
 *  was recording, record this process into its own part, named by the
 *  printf-style name ("worker 3"). Every other forked child records
 *  nothing (the fork handler stops it). */
void sp__trace_child(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*! sp__trace_spawned() : in the parent, just after forking child `pid`
 *  that will call sp__trace_child() with the same name: give it a track
 *  now, so that a child killed before it recorded anything (a pool
 *  destroyed early) still shows as a process in the trace. */
void sp__trace_spawned(int pid, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- Internal to the library: once seedpipe/trace.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__trace_kind_name() : "sample", "read", ..., "batch"; "?" otherwise. */
const char *sp__trace_kind_name(int kind);

#ifdef __cplusplus
}
#endif

#endif
