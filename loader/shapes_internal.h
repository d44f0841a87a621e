/* loader/shapes_internal.h - the library-internal part of seedpipe/shapes.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/shapes.h.
 */
#ifndef SEEDPIPE_LOADER_SHAPES_INTERNAL_H
#define SEEDPIPE_LOADER_SHAPES_INTERNAL_H

#include "seedpipe/shapes.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__shapes_class_names() : NULL-terminated list of class folder names,
 *  in class-id (byte-wise sorted) order. */
const char *const *sp__shapes_class_names(void);

/*! sp__shapes_class_of() : the class id of image `index`: (index + index/6) % 6. */
int sp__shapes_class_of(uint32_t index);

/*! sp__shapes_num_classes() : 6. */
int sp__shapes_num_classes(void);

/*! sp__shapes_render() : draw image `index` of the set (opts->seed and
 *  opts->size; count is ignored) into a newly allocated size x size x 3
 *  image (free with sp_image_free()); *label (may be NULL) gets its class.
 *  These are exactly the pixels sp_shapes_make() encodes for that index.
 *  @return 0, SP_EINVAL, SP_ENOMEM. */
int sp__shapes_render(const sp_shapes_opts *opts, uint32_t index, sp_image *out,
                      int *label, sp_error *err);

#ifdef __cplusplus
}
#endif

#endif
