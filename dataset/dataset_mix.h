/* dataset_mix.h - what the mixture's two files share: the parsed .mix file
 * (dataset_mix_parse.c reads it, dataset_mix.c opens and weighs its
 * sources) and the file's bounds (include/seedpipe/dataset.h, "Mixture").
 *
 * Not installed, not part of the API: names are sp__ds_mix_*.
 */
#ifndef SEEDPIPE_DATASET_MIX_H
#define SEEDPIPE_DATASET_MIX_H

#include "dataset/dataset_internal.h"

#define MIX_MAX_SOURCES 256u
#define MIX_MAX_BYTES (UINT64_C(1) << 20)
#define MIX_MAX_LENGTH (UINT64_C(1) << 32)
#define MIX_MAX_DIGITS 18

/* One parsed source line before its dataset is opened. */
typedef struct mix_line {
    char *path;      /* joined with the .mix file's folder; owned */
    uint64_t mant;
    int dec, line;
} mix_line;

typedef struct mix_parse {
    mix_line v[MIX_MAX_SOURCES];
    uint32_t n;
    uint64_t length;   /* 0: default */
    int length_line;
} mix_parse;

/* Read and check the .mix file ds->root into *p (zeroed by the caller):
 * each source line's weight (as a decimal mantissa and exponent) and path
 * (joined with ds->base unless absolute or a URL; the caller frees them),
 * the length line. @return 0, or SP_EFORMAT / SP_ELIMIT naming the file
 * and line, the read's SP_EIO, SP_ENOMEM. */
int sp__ds_mix_parse(sp_dataset *ds, mix_parse *p, sp_error *err);

#endif
