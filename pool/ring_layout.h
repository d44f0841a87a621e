/* ring_layout.h - the shared-memory region and the batch ring laid out in it
 * (ring.c), as the service publishes it and its clients read it.
 *
 * Not a public header; what service/ (the service and its client) reads
 * of the ring: the pool's own part (state words, reservation, the batch
 * mix's header block, mapping a slot) is pool/ring_internal.h, which
 * includes this one, and the pool's interface for the service is
 * pool/pool_internal.h. A region is one mapping shared between processes:
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
 *       +off_crash            cap x _Atomic uint32_t   deaths while computing it (pool.c:
 *                                                      crashes, other deaths, last cause)
 *       +off_items            cap x sp__item           outcomes (loader_internal.h)
 *       +off_indices          cap x uint64_t           sample indices
 *       +off_labels           cap x int32_t            labels
 *       +off_skipped          cap x uint64_t           skipped samples
 *       +off_subst            2*cap x uint64_t         (failed, substitute) pairs
 *       +off_ranks            nranks x sp__rank_slice  per-rank slice as published
 *       +off_images           cap x sample_bytes       the images, 64-aligned
 *       +off_mix              cap x mix_classes float  soft targets (a service's batch
 *                                                      mix; 0 bytes without one)
 *
 * The header's service block (service.c, service_client.c; a reader checks
 * it with service/region.c) is zero in a plain pool's region:
 * `published` batches are visible to clients, one rank record per rank
 * served holds that client's pid and cursors, and state_text is the
 * sp_loader_state (state.h JSON) of the stream's start, from which a client
 * learns fingerprints, shape and dtype. Version 2 added the service block,
 * cwake, nranks and the per-slot rank table.
 *
 * Ranks (version 3). A service serves the nranks consecutive ranks
 * rank_first .. rank_first + nranks - 1 of a job of `world` ranks (one
 * service per node; all of them by default: rank_first 0, nranks = world).
 * Each rank's slice has rank_cap = B / world positions; a slot holds the
 * served ranks' slices in rank order, cap = nranks * rank_cap positions, and
 * rank record / rank table entry k is rank rank_first + k. Version 2 had no
 * world or rank_first (nranks was the world, cap = B): a version-2 client
 * would take a partial service's slices for the wrong ranks, so the version
 * changed and such a client is refused ("layout version 3, this build reads
 * 2"), as a version-3 client refuses a version-2 region. Version 5 added
 * the sample record's description (tg_*: a sample may carry target fields
 * after its image, docs/targets.md), so a client cuts each record into its
 * image and its targets without knowing the pipeline.
 */
#ifndef SEEDPIPE_RING_LAYOUT_H
#define SEEDPIPE_RING_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "seedpipe/batchmix.h"   /* SP_BATCH_MIX_MAX_OPS */
#include "seedpipe/common.h"
#include "loader/loader_internal.h"

#define SP__RING_MAGIC 0x31474e5250535053ull   /* "SPSPRNG1" little-endian */
#define SP__RING_VERSION 5u   /* 4: a 16 KiB start state (a blend's, ABI 6); 5: the
                                * sample record's target fields (ABI 6) */
#define SP__RING_MAX_WORKERS 64
#define SP__RING_MAX_SLOTS 1024
#define SP__RING_MAX_CAP (1u << 20)
#define SP__RING_MAX_RANKS 64      /* ranks served by one region */
#define SP__RING_MAX_WORLD (1u << 16)
#define SP__STATE_TEXT_MAX 16384   /* SP_STATE_TEXT_MAX (state.h) */

/* ---- the region ------------------------------------------------------------ */
typedef struct sp__region {
    uint8_t *base;
    size_t size;
    int owner;          /* created it: unlinks a named region on close */
    int fd;             /* the creator keeps its descriptor (sp__region_intact);
                         * meaningless unless owner */
    char name[256];     /* "" for anonymous */
} sp__region;

/*! sp__region_open() : shm_open(path = "/NAME", flags | O_NONBLOCK), fstat
 *  into *st, and refuse anything but a regular file (a FIFO, a directory
 *  planted under the name): the descriptor, or SP_EIO naming the region,
 *  the type and its owner. Never blocks. Every open of an existing region
 *  goes through it. */
int sp__region_open(const char *path, int flags, struct stat *st, sp_error *err);

/*! sp__region_attach() : map an existing named region (read-write, or
 *  read-only); the caller validates it (sp__ring_validate). *st (may be
 *  NULL) gets the object's fstat (owner uid, mode, size). @return 0, SP_EIO
 *  (errno text, e.g. "No such file or directory"), SP_EFORMAT (smaller than
 *  a header), SP_EINVAL (bad name). */
struct stat;
int sp__region_attach(sp__region *r, const char *name, int readonly, struct stat *st,
                      sp_error *err);
/*! sp__region_name_check() : 1..200 of [A-Za-z0-9._-]. @return 0 or SP_EINVAL. */
int sp__region_name_check(const char *name, sp_error *err);
/*! sp__region_close() : unmap; the owner of a named region unlinks it.
 *  Accepts a zeroed region. */
void sp__region_close(sp__region *r);

/* ---- the ring ------------------------------------------------------------ */
/* Worker record, one cache line each. */
typedef struct sp__worker_rec {
    _Atomic int32_t pid;
    _Atomic uint32_t gen;        /* times this worker id was (re)spawned */
    _Atomic uint32_t busy;       /* 1 while computing a sample */
    _Atomic uint32_t outside;    /* a crash signal another process sent it (its handler,
                                  * pool_death.c); 0: none. Was padding: same layout */
    _Atomic uint64_t samples;    /* positions completed by this id */
    uint8_t pad[40];
} sp__worker_rec;

/* Rank record (service): one client per rank; written by that client
 * (pid, cursor, released) and by the service (state, first). */
enum { SP__RANK_NEVER = 0, SP__RANK_ATTACHING = 1, SP__RANK_ATTACHED = 2, SP__RANK_GONE = 3 };
typedef struct sp__rank_rec {
    _Atomic int32_t pid;         /* client pid while attached (0: none) */
    _Atomic uint32_t state;      /* SP__RANK_* */
    _Atomic uint64_t pid_start;  /* the client's start time (/proc stat 22): pid reuse guard */
    _Atomic uint64_t cursor;     /* next q this rank takes */
    _Atomic uint64_t released;   /* every q < released is released by this rank */
    _Atomic uint64_t first;      /* first q of the current attachment (set by the service) */
    _Atomic uint32_t attaches;   /* attachments so far */
    _Atomic uint32_t wake;       /* futex: the attaching client sleeps here */
    _Atomic uint32_t deaths;     /* attachments that ended by the client's death */
    uint8_t pad[12];
} sp__rank_rec;

/* One rank's slice of a published batch (per slot, nranks of them). */
typedef struct sp__rank_slice {
    uint32_t count, nskipped, nsubst, pad;
} sp__rank_slice;

typedef struct sp__ring_hdr {
    /* Written once by the creator before anyone else maps it. */
    uint64_t magic;
    uint32_t version, hdr_size;
    uint64_t region_size;
    uint32_t nslots, cap;             /* R; positions per slot (nranks * B / world) */
    uint64_t sample_bytes;
    uint64_t slots_offset, slot_size;
    uint64_t off_state, off_crash, off_items, off_indices, off_labels, off_skipped,
        off_subst, off_images;
    uint64_t fp_hi, fp_lo;            /* sp__loader_fingerprint() */
    int32_t owner_pid;
    uint32_t nworkers;
    uint64_t start_abs;               /* stream position of q = 0: epoch*nb + batch */
    uint64_t total;                   /* batches in the stream */
    uint64_t batches_per_epoch;
    uint32_t nranks, rank_cap;        /* ranks served (1: plain pool); cap / nranks */
    uint64_t off_ranks;               /* per-slot rank table */
    uint32_t world, rank_first;       /* service: the job's K; the first rank served */
    /* Service, version 5: the sample record (targets.h). tg_on 0: a sample
     * is its image only; 1: the image, zeros to 8 bytes, then the target
     * fields of a `targets max_boxes=tg_max_boxes keypoints=tg_keypoints
     * masks=tg_masks` op (masks at the sample's h x w). region.c checks
     * that sample_bytes is what they say. */
    uint32_t tg_on, tg_max_boxes, tg_keypoints, tg_masks;
    /* Service, version 5: a batch mix (batchmix.h; `serve --batch-mix`).
     * mix_n 0: none; else the spec (mix_n ops, RandomChoice when mix_n > 1
     * or mix_choice) mixes each published slice in place, and its soft
     * targets (count x mix_classes float32, per position) are at off_mix
     * of the slot. */
    uint32_t mix_n, mix_classes, mix_choice, mix_pad;
    int32_t mix_op[SP_BATCH_MIX_MAX_OPS];
    double mix_alpha[SP_BATCH_MIX_MAX_OPS], mix_p[SP_BATCH_MIX_MAX_OPS];
    uint64_t off_mix;                 /* per slot: cap x mix_classes float32 */
    uint8_t pad0[8];
    /* Shared, mutable; each group on its own cache line. */
    _Alignas(64) _Atomic uint64_t hint;      /* work claim counter: t = q*cap + p */
    _Alignas(64) _Atomic uint64_t released;  /* batches released by the consumer */
    _Atomic uint32_t wake;                   /* futex: workers sleep here */
    _Atomic uint32_t scan_gen;               /* bumped after each worker death */
    _Atomic uint32_t stop;                   /* 1: workers exit */
    _Atomic uint32_t deaths;
    _Atomic uint32_t cwake;                  /* futex: the consumer sleeps here */
    _Atomic uint32_t csleep;                 /* 1 while the consumer sleeps on cwake */
    _Atomic uint64_t pd_want;                /* pool_digest.c: (q << 24 | p) + 1 while the
                                              * consumer waits for position p of batch q
                                              * to hash it; 0: none (in the padding of
                                              * this line: the layout is unchanged) */
    _Alignas(64) sp__worker_rec workers[SP__RING_MAX_WORKERS];
    /* The service block (zero in a plain pool). */
    _Alignas(64) _Atomic uint64_t published; /* batches q < published are visible */
    _Atomic uint32_t pub_wake;               /* futex: waiting clients sleep here */
    _Atomic uint32_t pub_sleepers;           /* clients sleeping on pub_wake */
    _Atomic uint32_t svc_running;            /* 1 while the service serves */
    _Atomic uint32_t svc_end;                /* 1: `published` is final */
    _Atomic int32_t svc_err_code;            /* a stream error (on-error fail) */
    uint32_t owner_uid;
    uint64_t owner_start;                    /* owner's start time (/proc stat 22) */
    uint64_t started_ns;                     /* CLOCK_MONOTONIC at ready */
    _Atomic uint64_t samples_published;
    _Atomic uint64_t pool_released;          /* batches recycled by the service */
    _Atomic uint64_t last_pub_ns;
    _Atomic uint32_t client_deaths;
    uint32_t epochs;
    char dataset[256];                       /* for `status` (truncated) */
    char state_text[SP__STATE_TEXT_MAX];     /* sp_loader_state_format() at the start */
    char svc_err_msg[SP_ERROR_MSG_MAX];
    _Alignas(64) sp__rank_rec ranks[SP__RING_MAX_RANKS];
} sp__ring_hdr;

typedef struct sp__slot_hdr {
    _Atomic uint64_t q;          /* batch held (set before `released` admits it) */
    _Atomic uint64_t done;       /* (q << 24) | positions DONE (a hint: see pool.c) */
    _Atomic uint32_t wake;       /* unused since v2 (the consumer sleeps on cwake) */
    uint32_t count;              /* positions in this batch */
    uint32_t epoch;
    uint32_t pad0;
    uint64_t index;              /* batch index in its epoch */
    _Atomic uint64_t ready_ns;   /* CLOCK_MONOTONIC when the last position finished */
    _Atomic uint64_t pub_ns;     /* ... and when the service published it */
    uint8_t pad[8];
} sp__slot_hdr;

/*! sp__ring_layout() : fill the size and offset fields of *h (nslots, cap,
 *  sample_bytes, nranks set; nranks 0 counts as 1) and region_size. @return 0 or SP_ELIMIT/SP_EINVAL on
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
sp__rank_slice *sp__slot_ranks(const sp__ring_hdr *h, uint32_t s);
uint8_t *sp__slot_images(const sp__ring_hdr *h, uint32_t s);

/* ---- process-shared wait/wake (Linux futex on a shared mapping) ----------- */
/*! sp__futex_wait() : sleep while *addr == expected, at most timeout_ns
 *  (0: no limit). @return 0 (woken or value changed), 1 (timed out). */
int sp__futex_wait(_Atomic uint32_t *addr, uint32_t expected, uint64_t timeout_ns);
void sp__futex_wake(_Atomic uint32_t *addr, int n);
/* CLOCK_MONOTONIC in ns (stats only; never decides a byte). */
uint64_t sp__now_ns(void);
/*! sp__proc_start() : start time of process pid (field 22 of /proc/PID/stat),
 *  0 if there is no such process or it is a zombie. With the pid it names
 *  a process uniquely (a reused pid has another start time). */
uint64_t sp__proc_start(int pid);
/*! sp__proc_alive() : pid > 0 names a live (non-zombie) process started at
 *  `start` (0: any start time). */
int sp__proc_alive(int pid, uint64_t start);

#endif
