/* ring_internal.h - the shared-memory region and the batch ring laid out in it.
 *
 * Not a public header. A region is one mapping shared between processes:
 * anonymous (MAP_SHARED | MAP_ANONYMOUS, inherited by forked workers; the
 * phase-1 pool) or named (shm_open, mode 0600, attachable by other
 * processes; the phase-2 service). The ring inside it is a header followed
 * by R batch slots. Every offset is computed from header fields by
 * sp__ring_layout() and re-checked by sp__ring_validate() before a reader
 * trusts a region it did not create (a missing, truncated, foreign or
 * hostile region is an error, never a crash).
 *
 * Region layout (all integers native-endian; the region never leaves the
 * machine):
 *
 *   [0, hdr_size)             sp__ring_hdr (below), hdr_size = sizeof, 64-aligned
 *   [slots_offset + s*slot_size, +slot_size)   slot s = 0..R-1:
 *       +0                    sp__slot_hdr (64 bytes)
 *       +off_state            cap x _Atomic uint64_t   per-position state word
 *       +off_crash            cap x _Atomic uint32_t   deaths while computing it
 *       +off_items            cap x sp__item           outcomes (loader_internal.h)
 *       +off_indices          cap x uint64_t           sample indices
 *       +off_labels           cap x int32_t            labels
 *       +off_skipped          cap x uint64_t           skipped samples
 *       +off_subst            2*cap x uint64_t         (failed, substitute) pairs
 *       +off_images           cap x sample_bytes       the images, 64-aligned
 *
 * A position's state word (64 bits) names the batch it belongs to, so a
 * stale compare-and-swap can never hit a later batch that reuses the slot:
 *   bits 0-1 kind (FREE 0, CLAIMED 1, DONE 2), bits 2-9 worker id,
 *   bits 10-63 q, the batch's sequence number in the stream (q < 2^54).
 */
#ifndef SEEDPIPE_RING_INTERNAL_H
#define SEEDPIPE_RING_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "seedpipe/common.h"
#include "loader/loader_internal.h"

#define SP__RING_MAGIC 0x31474e5250535053ull   /* "SPSPRNG1" little-endian */
#define SP__RING_VERSION 1u
#define SP__RING_MAX_WORKERS 64
#define SP__RING_MAX_SLOTS 1024
#define SP__RING_MAX_CAP (1u << 20)

/* ---- the region ------------------------------------------------------------ */
typedef struct sp__region {
    uint8_t *base;
    size_t size;
    int owner;          /* created it: unlinks a named region on close */
    char name[256];     /* "" for anonymous */
} sp__region;

/*! sp__region_create() : map `size` zeroed bytes shared with forked children
 *  (name NULL or ""), or create the named region "/name" (O_EXCL, 0600).
 *  @return 0, SP_EIO (errno text; "exists" for a live name), SP_EINVAL. */
int sp__region_create(sp__region *r, const char *name, size_t size, sp_error *err);
/*! sp__region_attach() : map an existing named region read-write; the
 *  caller validates it (sp__ring_validate). @return 0, SP_EIO, SP_EFORMAT
 *  (smaller than a header). */
int sp__region_attach(sp__region *r, const char *name, sp_error *err);
/*! sp__region_close() : unmap; the owner of a named region unlinks it.
 *  Accepts a zeroed region. */
void sp__region_close(sp__region *r);

/* ---- the ring ------------------------------------------------------------ */
enum { SP__ST_FREE = 0, SP__ST_CLAIMED = 1, SP__ST_DONE = 2 };
static inline uint64_t sp__st(uint64_t q, unsigned kind, unsigned w) {
    return (q << 10) | ((uint64_t)(w & 0xff) << 2) | kind;
}
static inline unsigned sp__st_kind(uint64_t v) { return (unsigned)(v & 3); }
static inline unsigned sp__st_worker(uint64_t v) { return (unsigned)((v >> 2) & 0xff); }
static inline uint64_t sp__st_q(uint64_t v) { return v >> 10; }

/* Worker record, one cache line each. */
typedef struct sp__worker_rec {
    _Atomic int32_t pid;
    _Atomic uint32_t gen;        /* times this worker id was (re)spawned */
    _Atomic uint32_t busy;       /* 1 while computing a sample */
    uint32_t pad0;
    _Atomic uint64_t samples;    /* positions completed by this id */
    uint8_t pad[40];
} sp__worker_rec;

typedef struct sp__ring_hdr {
    /* Written once by the creator before anyone else maps it. */
    uint64_t magic;
    uint32_t version, hdr_size;
    uint64_t region_size;
    uint32_t nslots, cap;             /* R; positions per slot (B / world) */
    uint64_t sample_bytes;
    uint64_t slots_offset, slot_size;
    uint64_t off_state, off_crash, off_items, off_indices, off_labels, off_skipped,
        off_subst, off_images;
    uint64_t fp_hi, fp_lo;            /* sp_loader_fingerprint() */
    int32_t owner_pid;
    uint32_t nworkers;
    uint64_t start_abs;               /* stream position of q = 0: epoch*nb + batch */
    uint64_t total;                   /* batches in the stream */
    uint64_t batches_per_epoch;
    uint8_t pad0[32];
    /* Shared, mutable; each group on its own cache line. */
    _Alignas(64) _Atomic uint64_t hint;      /* work claim counter: t = q*cap + p */
    _Alignas(64) _Atomic uint64_t released;  /* batches released by the consumer */
    _Atomic uint32_t wake;                   /* futex: workers sleep here */
    _Atomic uint32_t scan_gen;               /* bumped after each worker death */
    _Atomic uint32_t stop;                   /* 1: workers exit */
    _Atomic uint32_t deaths;
    _Alignas(64) sp__worker_rec workers[SP__RING_MAX_WORKERS];
} sp__ring_hdr;

typedef struct sp__slot_hdr {
    _Atomic uint64_t q;          /* batch held (set before `released` admits it) */
    _Atomic uint64_t done;       /* (q << 24) | positions DONE (a hint: see pool.c) */
    _Atomic uint32_t wake;       /* futex: the consumer sleeps here */
    uint32_t count;              /* positions in this batch */
    uint32_t epoch;
    uint32_t pad0;
    uint64_t index;              /* batch index in its epoch */
    _Atomic uint64_t ready_ns;   /* CLOCK_MONOTONIC when the last position finished */
    uint8_t pad[16];
} sp__slot_hdr;

/*! sp__ring_layout() : fill the size and offset fields of *h (nslots, cap,
 *  sample_bytes set) and region_size. @return 0 or SP_ELIMIT/SP_EINVAL on
 *  zero, too large or overflowing sizes. */
int sp__ring_layout(sp__ring_hdr *h, sp_error *err);
/*! sp__ring_validate() : check a mapped header against the mapping size:
 *  magic, version, sizes recomputed from (nslots, cap, sample_bytes) and
 *  equal to the stored ones, everything inside the region. */
int sp__ring_validate(const sp__ring_hdr *h, size_t mapped, sp_error *err);

/* Pointers into slot s (valid once validated). */
sp__slot_hdr *sp__slot(const sp__ring_hdr *h, uint32_t s);
_Atomic uint64_t *sp__slot_state(const sp__ring_hdr *h, uint32_t s);
_Atomic uint32_t *sp__slot_crash(const sp__ring_hdr *h, uint32_t s);
sp__item *sp__slot_items(const sp__ring_hdr *h, uint32_t s);
uint64_t *sp__slot_indices(const sp__ring_hdr *h, uint32_t s);
int32_t *sp__slot_labels(const sp__ring_hdr *h, uint32_t s);
uint64_t *sp__slot_skipped(const sp__ring_hdr *h, uint32_t s);
uint64_t *sp__slot_subst(const sp__ring_hdr *h, uint32_t s);
uint8_t *sp__slot_images(const sp__ring_hdr *h, uint32_t s);

/* ---- process-shared wait/wake (Linux futex on a shared mapping) ----------- */
/*! sp__futex_wait() : sleep while *addr == expected, at most timeout_ns
 *  (0: no limit). @return 0 (woken or value changed), 1 (timed out). */
int sp__futex_wait(_Atomic uint32_t *addr, uint32_t expected, uint64_t timeout_ns);
void sp__futex_wake(_Atomic uint32_t *addr, int n);
/* CLOCK_MONOTONIC in ns (stats only; never decides a byte). */
uint64_t sp__now_ns(void);

#endif
