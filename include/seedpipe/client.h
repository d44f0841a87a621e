/* seedpipe/client.h - read a service's batches over shared memory, zero copy.
 *
 * A client attaches to the region of a running `seedpipe serve` (service.h)
 * as one rank r of the service's world K, takes the batches of the stream in
 * order with sp__client_next(), which returns a view (sp_batch) whose images,
 * labels and indices point INTO the shared region (no byte is copied after
 * the worker wrote it), and gives each back with sp__client_release(). The
 * view of rank r is the r-th slice of the global batch, byte-identical to
 * an in-process sp_loader_batch() with rank r, world K (DESIGN.md section 1).
 *
 * Attaching validates the region before trusting any byte of it: its owner
 * uid and mode (0600, ours; SP_CLIENT_ALLOW_FOREIGN relaxes), the header's
 * magic, layout version, every size and offset recomputed from three numbers
 * and bounds-checked against the mapping's fstat size, the start state
 * (strictly parsed) and its fingerprint, the rank, and that the owner pid is
 * a live process (a stale region is named as such). A missing, truncated,
 * foreign or hostile region gives an error, never a crash. Values the
 * service updates later (counts per slot) are range-checked on every read.
 *
 * Holding and releasing (the one release rule of stream.h): up to R (ring
 * slots) batches may be held; release any held view, in any order; each
 * view can be released once (a second release, or a view this client did
 * not hand out, is SP_EINVAL). A slot is
 * recycled when every rank released it; a client that dies is noticed by
 * the service, which counts its slices as released (nothing twice: release
 * positions are cursors). See service.h for re-attaching a rank.
 *
 * Thread safety: one sp_client per thread (several clients, e.g. several
 * ranks, may live in one process). Fork: a child must not use its parent's
 * client. The library installs no signal handlers.
 */
#ifndef SEEDPIPE_CLIENT_H
#define SEEDPIPE_CLIENT_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version, and a program opts in by defining SEEDPIPE_ADVANCED_API; the
 * front door is seedpipe/stream.h. */
#ifndef SEEDPIPE_ADVANCED_API
#error "seedpipe/client.h is the advanced API: #define SEEDPIPE_ADVANCED_API before including it (README.md: The C API); the front door is seedpipe/stream.h"
#endif

#include "seedpipe/loader.h"
#include "seedpipe/state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Attach flags. */
#define SP_CLIENT_ALLOW_FOREIGN 1u   /* accept a region of another uid / mode */

typedef struct sp_client_opts {
    unsigned flags;                       /* SP_CLIENT_* */
    const sp_digest *expect_fingerprint;  /* NULL: any; else refuse another stream */
    int attach_timeout_ms;                /* wait for the service's answer; 0: 5000 */
} sp_client_opts;

typedef struct sp_client sp_client;

/*! sp_client_state() : the loader state after the last batch this rank
 *  took (the next batch it has not consumed): pass it to `serve --resume`,
 *  `digest --resume` or sp__pool_create(); the fingerprint ignores world, so
 *  it resumes with any rank count. */
SP_API void sp_client_state(const sp_client *c, sp_loader_state *st);

/* What the stream is. */
typedef struct sp_client_info {
    uint32_t rank, world, ring_slots;
    uint32_t batch_size;          /* global B; a rank's slice is B / world */
    int c, h, w;                  /* sample shape */
    sp_dtype dtype;
    sp_layout layout;
    size_t sample_bytes;
    uint64_t batches_per_epoch, total;   /* total: batches in this service's stream */
    uint64_t first;               /* stream number of this attachment's first batch */
    uint32_t epochs;
    int service_pid;
    sp_digest fingerprint;
    uint64_t seed;
    /* Added in ABI 6: the sample record (targets.h, docs/targets.md). With
     * targets 1 each sample of a view (sample_bytes apart) is its image
     * (image_bytes), zeros to target_offset (a multiple of 8), then the
     * target fields of a `targets max_boxes=N keypoints=K masks=M` op:
     * boxes N x 4 float32, keypoints N x K x 3 float32 (K > 0), labels N
     * int32, counts 4 int32 (kept, dropped empty, min_area,
     * min_visibility), zeros to 8 bytes, then with masks SP_MASKS_INSTANCE
     * N x h x w uint8 masks, with SP_MASKS_SEMANTIC an h x w uint8 map.
     * targets 0: a sample is its image only (target_offset = image_bytes,
     * the other fields 0). */
    int targets;
    int max_boxes, keypoints, masks;
    size_t image_bytes, target_offset;
    /* Added in ABI 6: a batch mix (`serve --batch-mix`, service.h): mix_classes
     * K > 0 when the service mixes each batch; its images are then mixed in
     * place, and sp_client_mix_targets() gives its soft targets. */
    int mix_classes;
} sp_client_info;
SP_API void sp_client_info_get(const sp_client *c, sp_client_info *info);

/*! sp_client_mix_targets() : for a view of a service that mixes
 *  (sp_client_info.mix_classes K > 0), its soft targets, count x K float32
 *  (the labels' one-hot rows mixed as the images: torchvision v2's
 *  MixUp/CutMix targets), pointing into the region like the images, and
 *  *mix (may be NULL) the mix drawn for it. NULL for a service without a
 *  mix, or a view this client does not hold. The view's labels stay the
 *  unmixed class indices. */
struct sp_batch_mix;
SP_API const float *sp_client_mix_targets(const sp_client *c, const sp_batch *view,
                                          struct sp_batch_mix *mix);

/* Timing of the last sp__client_next() (CLOCK_MONOTONIC ns; stats only). */
typedef struct sp_client_timing {
    uint64_t ready_ns;      /* the last worker finished the batch */
    uint64_t published_ns;  /* the service published it */
    uint64_t call_ns;       /* sp__client_next() was called */
    uint64_t taken_ns;      /* ... and returned it */
} sp_client_timing;
SP_API void sp_client_timing_get(const sp_client *c, sp_client_timing *t);

#ifdef __cplusplus
}
#endif
#endif
