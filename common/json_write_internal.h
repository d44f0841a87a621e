/* common/json_write_internal.h - the one JSON writer of the library
 * (internal; not installed). json_internal.h is its reader.
 *
 * Every JSON text the library writes (manifests, loader states, the
 * environment record, the trace's metadata, verify reports, run records,
 * the CPU backend's description) is written through an sp__jw, so there is
 * one string escaper and one rule for commas:
 *
 *   sp__jw w = sp__jw_file(f);
 *   sp__jw_obj(&w);
 *   sp__jw_key(&w, "epoch");  sp__jw_u64(&w, 3);
 *   sp__jw_key(&w, "loss");   sp__jw_fmt(&w, "%.9g", loss);
 *   sp__jw_key(&w, "names");  sp__jw_arr(&w); sp__jw_str(&w, a); sp__jw_end(&w, ']');
 *   sp__jw_end(&w, '}');      // {"epoch":3,"loss":...,"names":["..."]}
 *
 * A value after a key, or first in its container, gets no comma; any other
 * value and key gets one. No whitespace is written (sp__jw_raw() writes
 * bytes as they are, a line's "\n" for instance). Numbers are written with
 * the printf format the caller names, so each file keeps its exact format.
 *
 * THE ESCAPE RULE (sp__jw_str; the bytes of every file written before this
 * writer existed): '"' and '\\' backslashed, \n \r \t as such, every other
 * byte below 0x20 as \u00XX (lower-case hex); every other byte, DEL,
 * UTF-8 and invalid UTF-8 alike, is copied as it stands.
 *
 * The sink is a stdio stream (sp__jw_file) or a caller's fixed buffer
 * (sp__jw_buf) under snprintf's rule: w.len counts every byte asked for
 * (w.len >= size means it was cut) and the buffer is NUL-terminated after
 * what fit. Stream errors stay on the stream (ferror).
 *
 * Inline functions, not a .c file: libseedpipe_train (model.c, record.c)
 * writes JSON too and sees no internal symbol of libseedpipe. Not
 * thread-safe per writer; no global state.
 */
#ifndef SEEDPIPE_COMMON_JSON_WRITE_INTERNAL_H
#define SEEDPIPE_COMMON_JSON_WRITE_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sp__jw {
    FILE *f;              /* the sink: a stream, or (NULL) buf below */
    char *buf;            /* the caller's buffer of size bytes (may be NULL when size is 0) */
    size_t size, len;     /* its size; the bytes asked for so far (may pass size) */
    unsigned depth;       /* containers open (at most 63) */
    uint64_t more;        /* bit d: the container at depth d has a member already */
    int keyed;            /* a key was just written: its value takes no comma */
} sp__jw;

/*! sp__jw_file() / sp__jw_buf() : a writer on a stream / on buf[0 .. size). */
static inline sp__jw sp__jw_file(FILE *f) {
    sp__jw w = {0};
    w.f = f;
    return w;
}
static inline sp__jw sp__jw_buf(char *buf, size_t size) {
    sp__jw w = {0};
    w.buf = buf;
    w.size = size;
    if (size) buf[0] = '\0';
    return w;
}

/*! sp__jw_put() / sp__jw_raw() : n bytes / a C string, as they are (no
 *  comma, no escaping): for what is not a JSON value (a line's end). */
static inline void sp__jw_put(sp__jw *w, const char *s, size_t n) {
    if (w->f) {
        fwrite(s, 1, n, w->f);
        return;
    }
    if (w->len + 1 < w->size) {
        size_t k = w->size - 1 - w->len < n ? w->size - 1 - w->len : n;
        memcpy(w->buf + w->len, s, k);
        w->buf[w->len + k] = '\0';
    }
    w->len += n;
}
static inline void sp__jw_raw(sp__jw *w, const char *s) { sp__jw_put(w, s, strlen(s)); }

/* Before a value or a key: the comma its place wants. */
static inline void sp__jw_sep(sp__jw *w) {
    if (w->keyed) {
        w->keyed = 0;
        return;
    }
    if (w->depth && (w->more >> w->depth & 1u)) sp__jw_put(w, ",", 1);
    w->more |= (uint64_t)1 << w->depth;
}

/* The escape rule (above) on s, without the quotes. */
static inline void sp__jw_escape(sp__jw *w, const char *s) {
    const char *run = s;   /* bytes copied as they are, written at once */
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        sp__jw_put(w, run, (size_t)(s - run));
        run = s + 1;
        char e[8] = {'\\', (char)c, 0};
        if (c == '\n') e[1] = 'n';
        else if (c == '\r') e[1] = 'r';
        else if (c == '\t') e[1] = 't';
        else if (c < 0x20) snprintf(e, sizeof e, "\\u%04x", c);
        sp__jw_raw(w, e);
    }
    sp__jw_put(w, run, (size_t)(s - run));
}

/*! sp__jw_str() : a string value ("s", escaped). */
static inline void sp__jw_str(sp__jw *w, const char *s) {
    sp__jw_sep(w);
    sp__jw_put(w, "\"", 1);
    sp__jw_escape(w, s);
    sp__jw_put(w, "\"", 1);
}

/*! sp__jw_key() : a member's key ("k":), escaped. */
static inline void sp__jw_key(sp__jw *w, const char *k) {
    sp__jw_str(w, k);
    sp__jw_put(w, ":", 1);
    w->keyed = 1;
}

/*! sp__jw_obj() / sp__jw_arr() : open an object / an array (a value);
 *  sp__jw_end(w, '}' or ']') closes it. */
static inline void sp__jw_open(sp__jw *w, const char *c) {
    sp__jw_sep(w);
    sp__jw_put(w, c, 1);
    w->depth++;
    w->more &= ~((uint64_t)1 << w->depth);
}
static inline void sp__jw_obj(sp__jw *w) { sp__jw_open(w, "{"); }
/*! sp__jw_inside() : members (or elements) follow inside a container whose
 *  bracket was written as raw text (a fragment another function closes). */
static inline void sp__jw_inside(sp__jw *w) {
    w->depth++;
    w->more &= ~((uint64_t)1 << w->depth);
}
static inline void sp__jw_arr(sp__jw *w) { sp__jw_open(w, "["); }
static inline void sp__jw_end(sp__jw *w, char c) {
    w->depth--;
    sp__jw_put(w, &c, 1);
}

/*! sp__jw_json() : a value already JSON text (another writer's output),
 *  written as it is. */
static inline void sp__jw_json(sp__jw *w, const char *json) {
    sp__jw_sep(w);
    sp__jw_raw(w, json);
}

/*! sp__jw_fmt() : a number value in the printf format given ("%.9g",
 *  "%.6f", "%llu"): the caller's format is the file's. */
static inline void sp__jw_fmt(sp__jw *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static inline void sp__jw_fmt(sp__jw *w, const char *fmt, ...) {
    char t[64], *p = t;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof t && (p = (char *)malloc((size_t)n + 1)) != NULL) {   /* "%.3f" of 1e300 */
        va_start(ap, fmt);
        vsnprintf(p, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    sp__jw_sep(w);
    sp__jw_put(w, p ? p : t, n < 0 ? 0 : p ? (size_t)n : sizeof t - 1);
    if (p != t) free(p);
}

/*! Shorthands: an unsigned or signed integer, a boolean, null. */
static inline void sp__jw_u64(sp__jw *w, uint64_t v) { sp__jw_fmt(w, "%llu", (unsigned long long)v); }
static inline void sp__jw_i64(sp__jw *w, int64_t v) { sp__jw_fmt(w, "%lld", (long long)v); }
static inline void sp__jw_bool(sp__jw *w, int v) { sp__jw_json(w, v ? "true" : "false"); }
static inline void sp__jw_null(sp__jw *w) { sp__jw_json(w, "null"); }

/*! sp__jw_kstr() / sp__jw_ku64() : a key and its string / integer value. */
static inline void sp__jw_kstr(sp__jw *w, const char *k, const char *s) {
    sp__jw_key(w, k);
    sp__jw_str(w, s);
}
static inline void sp__jw_ku64(sp__jw *w, const char *k, uint64_t v) {
    sp__jw_key(w, k);
    sp__jw_u64(w, v);
}

#endif
