/* common/common_internal.h - the library-internal part of seedpipe/common.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/common.h.
 */
#ifndef SEEDPIPE_COMMON_COMMON_INTERNAL_H
#define SEEDPIPE_COMMON_COMMON_INTERNAL_H

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__digest_parse() : @return 0 if `hex` is exactly 32 hex digits. */
int sp__digest_parse(const char *hex, sp_digest *out);

/*! sp__image_alloc() : allocate a tightly packed w x h x c image.
 *  @return 0, or SP_ENOMEM / SP_EINVAL (non-positive or overflowing size). */
int sp__image_alloc(sp_image *img, int width, int height, int channels);

/*! sp__publish_abort() : close and remove the temporary file, free p. Accepts NULL. */
void sp__publish_abort(sp_publish *p);

/*! sp__publish_begin() : create the temporary file for `path`.
 *  @return 0 with *out set, or SP_EIO naming the path and the reason. */
int sp__publish_begin(const char *path, sp_publish **out, sp_error *err);

/*! sp__publish_commit() : fsync, close, rename over the path (and fsync the
 *  directory if durable); frees p whatever happens (on failure the
 *  temporary file is removed). @return 0 or SP_EIO naming the path. */
int sp__publish_commit(sp_publish *p, int durable, sp_error *err);

/*! sp__publish_fd() : the temporary file's descriptor, to write into (for a
 *  FILE, fdopen a dup() of it and fclose that before committing). */
int sp__publish_fd(const sp_publish *p);

#ifdef __cplusplus
}
#endif

#endif
