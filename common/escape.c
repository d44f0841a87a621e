/* escape.c - strings from outside made safe to print (escape_internal.h). */
#include "common/escape_internal.h"

#include <stdio.h>
#include <stdlib.h>

static int plain(unsigned char c) {
    return c >= 0x20 && c != 0x7f && c != '\\' && !(c >= 0x80 && c <= 0x9f);
}

void sp__escape_copy(char *dst, size_t n, const char *src, size_t srcn) {
    size_t o = 0;
    for (size_t i = 0; i < srcn && src[i] && o + 1 < n; i++) {
        unsigned char c = (unsigned char)src[i];
        if (plain(c)) {
            dst[o++] = (char)c;
        } else if (o + 5 < n) {
            snprintf(dst + o, 5, "\\x%02x", c);
            o += 4;
        } else {
            break;
        }
    }
    dst[o] = '\0';
}

char *sp__escape_dup(const char *src, size_t srcn) {
    size_t need = 1;
    for (size_t i = 0; i < srcn && src[i]; i++) need += plain((unsigned char)src[i]) ? 1 : 4;
    char *d = malloc(need + 4);   /* the copy stops one escape short of n: room for it */
    if (d) sp__escape_copy(d, need + 4, src, srcn);
    return d;
}
