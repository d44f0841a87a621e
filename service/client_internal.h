/* service/client_internal.h - the library-internal part of seedpipe/client.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/client.h.
 */
#ifndef SEEDPIPE_SERVICE_CLIENT_INTERNAL_H
#define SEEDPIPE_SERVICE_CLIENT_INTERNAL_H

#include "seedpipe/client.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__client_attach() : attach to region NAME as global `rank`, one of the
 *  ranks the service serves (all of its world, or its `--ranks A-B`).
 *  @return 0, SP_EIO ("no such region", "service pid P is gone (stale
 *  region)", "rank r is attached by pid P", no answer), SP_EFORMAT (not a
 *  seedpipe region, truncated, hostile sizes, layout version),
 *  SP_EMISMATCH (fingerprint), SP_EINVAL (a bad name, a rank outside the
 *  world, or "service NAME serves ranks A-B of world K; rank r is served
 *  by another node's service"), SP_ENOMEM. Messages start with "region
 *  NAME: ". */
int sp__client_attach(const char *name, uint32_t rank, sp_client **out, sp_error *err);

int sp__client_attach_opts(const char *name, uint32_t rank, const sp_client_opts *opts,
                           sp_client **out, sp_error *err);

/*! sp__client_batch_digest() : sp_batch_digest() of a view (the same bytes
 *  hashed the same way), so `seedpipe digest --rank r --world K` manifests
 *  and stream digests can be compared with what a client received; for a
 *  service that mixes, sp_batch_mix_digest() of the mixed view (what
 *  `digest --batch-mix` writes). */
sp_digest sp__client_batch_digest(const sp_client *c, const sp_batch *view);

/*! sp__client_detach() : drop held views, mark the rank detached, unmap.
 *  Accepts NULL. */
void sp__client_detach(sp_client *c);

/*! sp__client_next() : the next batch of this rank, waiting (futex) until
 *  the service publishes it. *view: capacity B/K, count, epoch, index,
 *  images (count * sample_bytes), labels, indices, skipped, substituted,
 *  pointing into the region; valid until released or detached.
 *  @return 0, SP_END, SP_EINVAL (R views already held), the
 *  stream's error (on-error fail: "path: reason"), SP_EIO (the service died
 *  or stopped before the end; this rank was dropped). */
int sp__client_next(sp_client *c, sp_batch *view, sp_error *err);

/*! sp__client_release() : give back a view from sp__client_next(); the view
 *  is cleared. @return 0 or SP_EINVAL (not held: released twice, or not
 *  ours). */
int sp__client_release(sp_client *c, sp_batch *view, sp_error *err);

#ifdef __cplusplus
}
#endif

#endif
