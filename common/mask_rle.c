/* mask_rle.c - pycocotools' compressed RLE string decoded into counts
 * (include/seedpipe/masks.h sp__mask_rle_string). In common/ because the
 * annotation reader (dataset/) checks the strings when it opens a file and
 * the mask code (augment/) decodes them; it calls nothing.
 *
 * Each count is up to 7 characters in '0'..'o' (48..111), 5 bits each,
 * least significant first, bit 0x20 "more", bit 0x10 of the last character
 * the sign; from the fourth count on (index > 2) it is a delta from the
 * count two before. A count that is cut, longer than 7 characters,
 * negative or past 2^32 is an error.
 */
#include "seedpipe/masks.h"
#include "common/masks_internal.h"

int sp__mask_rle_string(const char *s, size_t len, uint32_t *counts, size_t max, size_t *m,
                        const char *what, sp_error *err) {
    size_t n = 0, p = 0;
    while (p < len) {
        int64_t x = 0;
        int k = 0, more = 1;
        while (more) {
            if (p >= len || k >= 7)
                return sp_error_set(err, SP_EFORMAT, "%s: RLE string is cut or has a count "
                                    "longer than 7 characters (byte %zu)", what, p);
            int c = (unsigned char)s[p] - 48;
            if (c < 0 || c > 63)
                return sp_error_set(err, SP_EFORMAT, "%s: RLE string byte %zu is not in "
                                    "'0'..'o'", what, p);
            x |= (int64_t)(c & 0x1f) << (5 * k);
            more = c & 0x20;
            p++;
            k++;
            if (!more && (c & 0x10)) x |= (int64_t)-1 * ((int64_t)1 << (5 * k));
        }
        if (n > 2) x += (int64_t)counts[n - 2];
        if (n >= max)
            return sp_error_set(err, SP_ELIMIT, "%s: more than %zu RLE counts", what, max);
        if (x < 0 || x > (int64_t)UINT32_MAX)
            return sp_error_set(err, SP_EFORMAT, "%s: RLE count %zu is negative or beyond "
                                "2^32", what, n);
        counts[n++] = (uint32_t)x;
    }
    *m = n;
    return SP_OK;
}
