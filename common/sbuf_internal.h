/* common/sbuf_internal.h - the one growable append buffer of the library
 * (internal; not installed).
 *
 * Text built piece by piece (a pipeline's canonical form, the cache
 * manifest) and binary files built field by field (the dataset's index
 * files, an encoded PNG) append to an sp__sbuf: it grows by doubling, keeps
 * a NUL after the data (so text is a C string as it stands), and an
 * allocation failure sets oom and makes every later append a no-op, so a
 * builder checks oom once at the end. {0} is an empty buffer; p stays NULL
 * until the first append. The caller owns p (free() it, or
 * sp__sbuf_free()). Not thread-safe; no global state.
 *
 * Beside it, sp__fbuf: text appended into the caller's fixed buffer with
 * snprintf's rule over the whole output (len counts every byte asked for,
 * so len >= n means it was cut), for the functions that fill a buffer the
 * caller gives with text (sp_env_text(), sp__pipeline_explain()); JSON goes
 * through json_write_internal.h, which keeps the same rule.
 *
 * Not this: sp__buf (fileio_internal.h), a reader's reusable buffer of a
 * bounded size, and FILE streams over memory (open_memstream, which the
 * run record, the verify report and the tool use where a FILE is wanted).
 */
#ifndef SEEDPIPE_COMMON_SBUF_INTERNAL_H
#define SEEDPIPE_COMMON_SBUF_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

typedef struct sp__sbuf {
    char *p;         /* the data, then a NUL; NULL before the first append */
    size_t len, cap; /* bytes of data; bytes allocated (> len once p is set) */
    int oom;         /* an append failed: the contents are incomplete */
} sp__sbuf;

/*! sp__sbuf_put() : append n bytes of src (src may be NULL when n is 0). */
void sp__sbuf_put(sp__sbuf *b, const void *src, size_t n);

/*! sp__sbuf_printf() : append printf(fmt, ...) (the calling thread's
 *  locale, as vsnprintf); an encoding error sets oom too. */
void sp__sbuf_printf(sp__sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/*! sp__sbuf_vprintf() : the same with a va_list (not consumed twice: it
 *  is copied). */
void sp__sbuf_vprintf(sp__sbuf *b, const char *fmt, va_list ap);

/*! sp__sbuf_free() : free b's memory and empty it. Accepts NULL. */
void sp__sbuf_free(sp__sbuf *b);

typedef struct sp__fbuf {
    char *p;         /* the caller's buffer, n bytes (p may be NULL when n is 0) */
    size_t n, len;   /* its size; the bytes asked for so far (may pass n) */
} sp__fbuf;

/*! sp__fbuf_printf() : append printf(fmt, ...) as far as it fits, keeping
 *  a NUL after what fits (vsnprintf); len grows by the full length. */
void sp__fbuf_printf(sp__fbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
