/* dataset/split_internal.h - the library-internal part of seedpipe/split.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/split.h.
 */
#ifndef SEEDPIPE_DATASET_SPLIT_INTERNAL_H
#define SEEDPIPE_DATASET_SPLIT_INTERNAL_H

#include "seedpipe/split.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__split_u01() : the path's position u in [0, 1) (formula above). */
double sp__split_u01(uint64_t seed, const char *path);

#ifdef __cplusplus
}
#endif

#endif
