/* sbuf.c - the one growable append buffer (common/sbuf_internal.h).
 *
 * In common/: calls nothing of seedpipe. Growth doubles from 256 bytes
 * (n + 1 at least), guarded against size_t overflow.
 */
#include "common/sbuf_internal.h"
#include "common/vec_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL after them: 0, or -1 with oom set. */
static int reserve(sp__sbuf *b, size_t n) {
    if (b->oom) return -1;
    if (n >= SIZE_MAX - b->len) {
        b->oom = 1;
        return -1;
    }
    if (SP__VEC_RESERVE(b->p, b->cap, b->len + n + 1, 256) != 0) {
        b->oom = 1;
        return -1;
    }
    return 0;
}

void sp__sbuf_put(sp__sbuf *b, const void *src, size_t n) {
    if (reserve(b, n) != 0) return;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sp__sbuf_vprintf(sp__sbuf *b, const char *fmt, va_list ap) {
    if (b->oom) return;
    size_t room = b->p ? b->cap - b->len : 0;   /* >= 1 once p is set (the NUL's byte) */
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, aq);
    va_end(aq);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n >= room) {   /* did not fit: grow, then print again */
        if (reserve(b, (size_t)n) != 0) return;
        va_copy(aq, ap);
        n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, aq);
        va_end(aq);
        if (n < 0) {
            b->oom = 1;
            return;
        }
    }
    b->len += (size_t)n;
}

void sp__sbuf_printf(sp__sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sp__sbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void sp__sbuf_free(sp__sbuf *b) {
    if (!b) return;
    free(b->p);
    memset(b, 0, sizeof *b);
}

void sp__fbuf_printf(sp__fbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->len < b->n ? b->n - b->len : 0;
    int k = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0) b->len += (size_t)k;
}
