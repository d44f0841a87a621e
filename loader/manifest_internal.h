/* loader/manifest_internal.h - the library-internal part of seedpipe/manifest.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/manifest.h.
 */
#ifndef SEEDPIPE_LOADER_MANIFEST_INTERNAL_H
#define SEEDPIPE_LOADER_MANIFEST_INTERNAL_H

#include "seedpipe/manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__json_write_string() : write s as a JSON string literal (quoted,
 *  escaped). */
void sp__json_write_string(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif

#endif
