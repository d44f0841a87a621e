/* common/vec_internal.h - the one growth rule for the library's arrays
 * (internal; not installed).
 *
 * An array that grows one element (or a few) at a time keeps a pointer
 * and a size_t capacity beside its count, and asks here for room:
 *
 *   sp_failure *v = NULL;  size_t n = 0, cap = 0;
 *   if (SP__VEC_RESERVE(v, cap, n + 1, 16) != 0) return SP_ENOMEM;
 *   v[n++] = f;
 *
 * The capacity doubles (from `first` when it is 0) until it holds `need`,
 * then one realloc: amortised O(1) per element, at most twice the memory
 * needed. On failure (out of memory, or a byte size past SIZE_MAX) the
 * array and its capacity are unchanged, so the caller still frees it.
 * The byte buffers (sbuf_internal.h's sp__sbuf, fileio_internal.h's
 * sp__buf) grow by this rule too. Not this: growth to an exact size
 * (a scratch buffer sized for the next batch: one realloc to the size
 * asked) or under a hard bound (the JSON reader's token array stops at
 * its limit).
 *
 * Inline, not a .c file, so libseedpipe_train uses it too (it sees no
 * internal symbol of libseedpipe). No global state.
 */
#ifndef SEEDPIPE_COMMON_VEC_INTERNAL_H
#define SEEDPIPE_COMMON_VEC_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*! sp__vec_reserve() : the rule above on the array whose pointer is at
 *  pp (an object pointer of any type; SP__VEC_RESERVE passes it) of
 *  elem-byte elements. @return 0, or -1 (nothing changed). */
static inline int sp__vec_reserve(void *pp, size_t *cap, size_t need, size_t elem, size_t first) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : first ? first : 1;
    while (c < need) c = c > SIZE_MAX / 2 ? need : c * 2;
    if (elem && c > SIZE_MAX / elem) return -1;
    void *p;
    memcpy(&p, pp, sizeof p);   /* the caller's T *, whatever T */
    p = realloc(p, c * elem);
    if (!p) return -1;
    memcpy(pp, &p, sizeof p);
    *cap = c;
    return 0;
}

/*! SP__VEC_RESERVE(ptr, cap, need, first) : room for `need` elements in
 *  the array ptr (any T *; cap a size_t lvalue). @return 0 or -1. */
#define SP__VEC_RESERVE(ptr, cap, need, first) \
    sp__vec_reserve(&(ptr), &(cap), (need), sizeof *(ptr), (first))

/*! SP__VEC_PUSH(ptr, n, cap, first, value) : append value (n counts the
 *  elements). @return 0, or -1 with nothing appended. */
#define SP__VEC_PUSH(ptr, n, cap, first, value) \
    (SP__VEC_RESERVE(ptr, cap, (n) + 1, first) != 0 ? -1 : ((ptr)[(n)++] = (value), 0))

#endif
