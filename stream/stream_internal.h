/* stream/stream_internal.h - the library-internal part of seedpipe/stream.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/stream.h.
 */
#ifndef SEEDPIPE_STREAM_STREAM_INTERNAL_H
#define SEEDPIPE_STREAM_STREAM_INTERNAL_H

#include "seedpipe/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__stream_kind_name() : "loader", "pool", "service" ("?" otherwise). */
const char *sp__stream_kind_name(sp_stream_kind k);

#ifdef __cplusplus
}
#endif

#endif
