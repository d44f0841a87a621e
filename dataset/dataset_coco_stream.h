/* dataset_coco_stream.h - a COCO instances JSON read as a stream, one
 * element at a time (dataset_coco_stream.c), for dataset_coco.c. Not a
 * public header.
 *
 * The file is never held whole, nor tokenized whole: a window over it
 * holds one element at a time (an entry of "images" or "annotations", or
 * another top-level value such as "categories"), which the bounded JSON
 * reader (common/json.c) tokenizes alone. Two passes: the first checks the
 * whole file's syntax, hashes its bytes and finds the two arrays (any key
 * order); the second hands each image, then each annotation, to the
 * caller as its own token array (token 0). Memory: the window (the
 * largest element, at least 1 MiB) and one element's tokens (40 bytes
 * each).
 */
#ifndef SEEDPIPE_DATASET_COCO_STREAM_H
#define SEEDPIPE_DATASET_COCO_STREAM_H

#include "common/json_internal.h"
#include "dataset/dataset_coco.h"

/* What a walk calls: begin(arg, nimages, nanns) once after the first pass
 * (the arrays' lengths; 0 for one that is absent), then image(arg, j, i)
 * for each image, images_done(arg), and ann(arg, j, i) for each
 * annotation, in file order
 * (each returns 0 or an error set in err, which stops the walk). An absent
 * "images" or "annotations", or one that is not an array, is an error
 * named here, after the images for "annotations" (the first occurrence of
 * a key counts). */
typedef struct sp__coco_walk {
    int (*begin)(void *arg, size_t nimages, size_t nanns);
    int (*image)(void *arg, const sp__json *j, size_t i);
    int (*images_done)(void *arg);
    int (*ann)(void *arg, const sp__json *j, size_t i);
    void *arg;
    uint64_t at;    /* set before each image() and ann(): the element's file offset */
} sp__coco_walk;

/*! sp__coco_stream() : walk `path` under lim (its max_bytes, max_tokens and
 *  max_element), *fp set to XXH3-128 of "seedpipe-coco-v1" and the file's
 *  bytes. Errors name path and the byte offset (syntax), or are the
 *  callbacks'. */
int sp__coco_stream(const char *path, const sp_coco_limits *lim, sp__coco_walk *w,
                    sp_digest *fp, sp_error *err);

#endif
