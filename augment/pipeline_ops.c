/* pipeline_ops.c - the registry of pipeline ops: every op of the spec
 * language, once, in the order `unknown op` errors list them. Each entry
 * is an op's descriptor (sp__op_desc, pipeline_internal.h), defined at the
 * end of the file that holds the op's code. To add an op: write its file
 * (pipeline_<name>.c, ending in `const sp__op_desc sp__op_<name>`) and add
 * one X(<name>) line here; docs/pipeline.md "Adding an op" has the rest
 * (docs, tests, the Python mapping).
 */
#include "augment/pipeline_internal.h"

#include <string.h>

#define SP__OPS(X) \
    X(decode)                           \
    X(random_resized_crop)              \
    X(resize)                           \
    X(center_crop)                      \
    X(hflip)                            \
    X(vflip)                            \
    X(color_jitter)                     \
    X(grayscale)                        \
    X(normalize)                        \
    X(invert)                           \
    X(posterize)                        \
    X(solarize)                         \
    X(autocontrast)                     \
    X(equalize)                         \
    X(sharpness)                        \
    X(random_apply)                     \
    X(random_crop)                      \
    X(gaussian_blur)                    \
    X(random_erasing)                   \
    X(rotate)                           \
    X(affine)                           \
    X(auto_augment)                     \
    X(rand_augment)                     \
    X(trivial_augment_wide)             \
    X(targets)                          \
    X(random_zoom_out)                  \
    X(random_iou_crop)                  \
    /* a new op: one line above this one */

#define DECLARE(name) extern const sp__op_desc sp__op_##name;
#define ENTRY(name) &sp__op_##name,
SP__OPS(DECLARE)
static const sp__op_desc *const OPS[] = {SP__OPS(ENTRY)};
#define N_OPS (int)(sizeof OPS / sizeof OPS[0])

const sp__op_desc *sp__op_find(const char *name) {
    for (int i = 0; i < N_OPS; i++)
        if (strcmp(name, OPS[i]->name) == 0) return OPS[i];
    return NULL;
}

const sp__op_desc *sp__op_at(int i) { return i >= 0 && i < N_OPS ? OPS[i] : NULL; }
