/* common/masks_internal.h - the library-internal part of seedpipe/masks.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/masks.h.
 */
#ifndef SEEDPIPE_COMMON_MASKS_INTERNAL_H
#define SEEDPIPE_COMMON_MASKS_INTERNAL_H

#include "seedpipe/masks.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__mask_rle_string() : decode pycocotools' compressed counts string
 *  (len bytes) into counts (at most max; *m gets how many). */
int sp__mask_rle_string(const char *s, size_t len, uint32_t *counts, size_t max, size_t *m,
                        const char *what, sp_error *err);

#ifdef __cplusplus
}
#endif

#endif
