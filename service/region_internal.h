/* region_internal.h - the service's region as a reader checks it: what the
 * service (service.c: `status`) and its clients (service_client.c: attach)
 * share, below both (service/region.c).
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

#endif
