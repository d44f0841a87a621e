/* region_internal.h - the service's region as a reader checks it: what the
 * service (service.c, service_status.c: `status`, the staleness check) and
 * its clients (service_client.c: attach) share, below them (region.c,
 * service_status.c).
 *
 * Not a public header. The region and the ring in it are laid out in
 * pool/ring_layout.h (the service block of its header included).
 */
#ifndef SEEDPIPE_SERVICE_REGION_INTERNAL_H
#define SEEDPIPE_SERVICE_REGION_INTERNAL_H

#include <stddef.h>

#include "seedpipe/common.h"
#include "pool/ring_layout.h"

struct sp_loader_state;
/*! sp__service_validate() : sp__ring_validate() plus the service block of a
 *  header COPY: rank count, the start state (strictly parsed into *st0), its
 *  shape, batch size and fingerprint against the ring, stream counters.
 *  @return 0 or SP_EFORMAT naming what is wrong. */
int sp__service_validate(const sp__ring_hdr *h, size_t mapped, struct sp_loader_state *st0,
                         sp_error *err);

/*! sp__service_stale_check() : look at an existing region "/name" before a
 *  service creates it (service_status.c): @return 0 when there is none or
 *  it was stale and removed (then note says what was removed and why), or
 *  SP_EIO when it is live, being created, not ours, or not a seedpipe
 *  region (the message says which). */
int sp__service_stale_check(const char *name, char *note, size_t note_size, sp_error *err);

#endif
