/* ring_internal.h - the worker pool's own part of the ring (ring.c): creating
 * and reserving its region, mapping a slot's pages, a position's state
 * word, and a service's batch mix recorded in the header.
 *
 * Not a public header; pool/ only (and tests). The region and ring layout it
 * extends, which service/ reads too, is ring_layout.h.
 *
 * A position's state word (64 bits) names the batch it belongs to, so a
 * stale compare-and-swap can never hit a later batch that reuses the slot:
 *   bits 0-1 kind (FREE 0, CLAIMED 1, DONE 2), bits 2-9 worker id,
 *   bits 10-63 q, the batch's sequence number in the stream (q < 2^54).
 */
#ifndef SEEDPIPE_RING_INTERNAL_H
#define SEEDPIPE_RING_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "seedpipe/batchmix.h"
#include "loader/loader_internal.h"
#include "pool/ring_layout.h"

/* ---- the pool's region ------------------------------------------------------ */
/*! sp__region_create() : map `size` zeroed bytes shared with forked children
 *  (name NULL or ""), or create the named region "/name" (O_EXCL, 0600).
 *  A named region's pages are reserved here (posix_fallocate: a /dev/shm
 *  too small is SP_ENOMEM now, not SIGBUS later); an anonymous one's are
 *  not: its creator reserves them with sp__region_reserve() once its
 *  workers run (the pool does, before sp__pool_create() returns), so that
 *  the workers start at once instead of after the kernel zeroed the whole
 *  ring. @return 0, SP_EIO (errno text; "exists" for a live name),
 *  SP_EINVAL, SP_ENOMEM. */
int sp__region_create(sp__region *r, const char *name, size_t size, sp_error *err);
/*! sp__region_reserve() : reserve every page of a region this process
 *  created (posix_fallocate, 8 MiB at a time from the end backwards).
 *  @return 0, or SP_ENOMEM / SP_EIO naming the sizes and what to change
 *  ("worker pool ring: cannot reserve 154.3 MB of shared memory ..."). */
int sp__region_reserve(const sp__region *r, sp_error *err);
/*! sp__map_populate() : map the pages of [p, p + n) of a shared mapping
 *  writable into this process's page table now (MADV_POPULATE_WRITE,
 *  Linux 5.14; the range widened to whole pages), one call instead of a
 *  page fault per 4 KiB page at first write; pages nobody reserved yet are
 *  allocated (zeroed) as a write would. Contents are not touched. Best
 *  effort: on an older kernel, or when it fails, the writes fault as
 *  before. @return 0 when populated, -1 otherwise. */
int sp__map_populate(void *p, size_t n);
/*! sp__region_intact() : 1 while the memory object behind a region its
 *  caller created is still at least the region's size (nobody truncated
 *  it: pages of a mapping past the object's end give SIGBUS), 0 when it
 *  shrank or cannot be checked. The pool asks it when a worker dies of
 *  SIGBUS: the ring gone, or a crash of the worker's own. */
int sp__region_intact(const sp__region *r);

/* ---- the pool's view of the ring ------------------------------------------ */
enum { SP__ST_FREE = 0, SP__ST_CLAIMED = 1, SP__ST_DONE = 2 };
static inline uint64_t sp__st(uint64_t q, unsigned kind, unsigned w) {
    return (q << 10) | ((uint64_t)(w & 0xff) << 2) | kind;
}
static inline unsigned sp__st_kind(uint64_t v) { return (unsigned)(v & 3); }
static inline unsigned sp__st_worker(uint64_t v) { return (unsigned)((v >> 2) & 0xff); }
static inline uint64_t sp__st_q(uint64_t v) { return v >> 10; }

/*! sp__ring_mix() : a service's batch mix (NULL: none) into a header copy
 *  before its layout: the spec and the class count (mix->classes, or the
 *  dataset's); the loader's samples must be float32 NCHW images without
 *  targets. @return 0 or SP_EINVAL. */
int sp__ring_mix(const sp_loader *ld, const sp_batch_mix_spec *mix, sp__ring_hdr *hh,
                 sp_error *err);
/*! sp__ring_map_slot() : sp__map_populate() of slot s, or with n > 1 of
 *  its k-th of n page-aligned shares (the pool's workers, on the first
 *  pass over the ring). */
void sp__ring_map_slot(const sp__ring_hdr *h, uint32_t s, uint32_t k, uint32_t n);

#endif
