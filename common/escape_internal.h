/* escape_internal.h - the one rule for printing a string that came from
 * outside (a shared-memory region, a remote index object, a server's error
 * body): its control bytes (C0, DEL and the 8-bit C1 range 0x80-0x9f that
 * some terminals take as CSI and the like) and the backslash written as
 * \xNN, so printing it can only print and an escape cannot be forged.
 * Bytes 0xa0-0xff pass, so UTF-8 names mostly keep their letters (a
 * continuation byte in 0x80-0x9f is escaped too: that costs readability,
 * never safety). `seedpipe status` (service/service.c), the remote store's
 * messages (dataset/remote.c, dataset_object.c) use it.
 *
 * Not installed, not part of the API: names are sp__escape_*.
 */
#ifndef SEEDPIPE_ESCAPE_INTERNAL_H
#define SEEDPIPE_ESCAPE_INTERNAL_H

#include <stddef.h>

/* src[0 .. srcn) (up to a NUL) escaped into dst (n bytes, n >= 1), always
 * NUL-terminated; cut at a whole escape when dst is too small. */
void sp__escape_copy(char *dst, size_t n, const char *src, size_t srcn);

/* The same, malloc'd and whole (never cut); NULL when out of memory. */
char *sp__escape_dup(const char *src, size_t srcn);

#endif
