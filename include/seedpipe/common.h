/* seedpipe/common.h - error codes, the error record, images, digests and
 * whole-file reading.
 *
 * Every seedpipe function that can fail returns an int: 0 (SP_OK) on
 * success, a negative SP_E* code on failure. Functions that can fail also take
 * an `sp_error *err` (which may be NULL) and, on failure, fill it with the
 * code and a message that names the file and the reason, e.g.
 *   "data/cat/003.png: PNG: IHDR: CRC error".
 * Library code never prints and never calls exit().
 *
 * Thread safety: sp_error is caller-owned; there is no global error state.
 */
#ifndef SEEDPIPE_COMMON_H
#define SEEDPIPE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "seedpipe/version.h"   /* SP_API, sp_version_string() */

#ifdef __cplusplus
extern "C" {
#endif

/* X-macros generate the enum and the strings so they never drift apart:
 * the errors (negative) and the outcomes that are not errors (positive,
 * each its own value: SP_END ends every stream, the pool's, a client's
 * and sp_stream_next()'s alike; SP_STOPPED is a service stopped on
 * request). A function returns 0, one of its documented outcomes, or an
 * error; rc < 0 is always an error. */
#define SP_ERRNO_MAP(XX)                                                  \
    XX(EINVAL,   -1, "invalid argument")                                  \
    XX(ENOMEM,   -2, "out of memory")                                     \
    XX(EIO,      -3, "I/O error")                                         \
    XX(EFORMAT,  -4, "malformed input")                                   \
    XX(ELIMIT,   -5, "limit exceeded")                                    \
    XX(EMISMATCH,-6, "fingerprint mismatch")                              \
    XX(ESPEC,    -7, "bad pipeline spec")                                 \
    XX(ERANGE,   -8, "out of range")                                      \
    XX(EUNSUPP,  -9, "unsupported")

#define SP_STATUS_MAP(XX)                                                 \
    XX(END,        1, "end of stream (not an error)")                     \
    XX(STOPPED,    2, "stopped on request (not an error)")                \
    XX(CACHE_MISS, 3, "no usable cache entry (not an error)")             \
    XX(CACHE_SKIP, 4, "cache entry present or being written elsewhere (not an error)")

typedef enum {
    SP_OK = 0,
#define XX(name, val, str) SP_##name = val,
    SP_ERRNO_MAP(XX)
    SP_STATUS_MAP(XX)
#undef XX
} sp_status;

/*! sp_strerror() : @return a static string for every sp_status code ("ok"
 *  for 0), "unknown status" for anything else. */
SP_API const char *sp_strerror(int code);

/*! sp_status_at() : the i-th sp_status, so that a binding builds its table
 *  of codes from the library instead of copying this header: i = 0 is
 *  SP_OK, then the errors in SP_ERRNO_MAP's order, then the outcomes in
 *  SP_STATUS_MAP's. Sets *code (code may be NULL) and @return the name
 *  without the SP_ prefix ("OK", "EINVAL", "END"), a static string; NULL,
 *  *code untouched, once i is past the last (loop from 0 until NULL). */
SP_API const char *sp_status_at(size_t i, int *code);

#define SP_ERROR_MSG_MAX 512
typedef struct sp_error {
    int code;                    /* SP_OK or an SP_E* code */
    char msg[SP_ERROR_MSG_MAX];  /* "path: reason", always NUL-terminated */
} sp_error;

/*! sp_error_clear() : reset to SP_OK and an empty message. Accepts NULL. */
SP_API void sp_error_clear(sp_error *err);

/*! sp_error_set() : set code and printf-style message; @return code.
 *  Accepts err == NULL (then only returns code). Used by every module. */
SP_API int sp_error_set(sp_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* An 8-bit interleaved image: pixel (x, y) channel c is
 * data[y * stride + x * channels + c]. `owned` images are freed with
 * sp_image_free(); views (crops) share their parent's data. */
typedef struct sp_image {
    int width, height;
    int channels;   /* 1 (gray) or 3 (RGB) */
    size_t stride;  /* bytes per row, >= width * channels */
    uint8_t *data;
} sp_image;

/*! sp_image_free() : free data allocated by seedpipe; zeroes *img. Accepts NULL. */
SP_API void sp_image_free(sp_image *img);

/* A 128-bit digest / fingerprint (XXH3-128). hex is 32 lowercase digits. */
typedef struct sp_digest { uint64_t hi, lo; } sp_digest;
SP_API void sp_digest_hex(sp_digest d, char hex[33]);

/* One sample's input as the pipeline sees it: either encoded file bytes
 * (PNG, JPEG, BMP, WebP or TIFF; `raw` is NULL) or already-decoded pixels
 * (IDX datasets; `bytes` is NULL). `path` names the sample in every error
 * message. */
typedef struct sp_sample_src {
    const char *path;
    const uint8_t *bytes;
    size_t len;
    const sp_image *raw;
} sp_sample_src;

/*! sp_read_file() : read a whole file into a malloc'd buffer (max_bytes
 *  bound, 0 = 1 GiB); the caller frees *data. Regular files only (symbolic
 *  links followed): a FIFO, device, socket or directory is refused without
 *  blocking, and a file larger than max_bytes before a byte is read. On
 *  failure *data is NULL and *len 0; the message names the path.
 *  @return 0, SP_EIO (with strerror, or "is a FIFO, not a regular file")
 *  or SP_ELIMIT. */
SP_API int sp_read_file(const char *path, uint64_t max_bytes, uint8_t **data,
                        size_t *len, sp_error *err);

/* Atomic publish: how every file seedpipe writes reaches its name (loader
 * states, checkpoints, run records, manifests, shards, index files, images).
 * The bytes go to a temporary file created in the target's directory under
 * an unpredictable name ("<dir>/.<name>.tmp-<16 random hex digits>") with
 * O_CREAT | O_EXCL | O_NOFOLLOW, mode 0644 before the umask, are fsync'd,
 * and the file is renamed over `path`: a reader sees the old file or the
 * whole new one, never a part, and a symbolic link planted at the
 * temporary name or at `path` is never written through (rename replaces a
 * link at `path` itself). With durable, the directory is fsync'd too, so
 * the new name survives a power cut. Reentrant; safe for several
 * processes publishing the same name (the last rename wins). */
typedef struct sp_publish sp_publish;

/*! sp_write_file_atomic() : begin, write n bytes of data, commit.
 *  @return 0 or SP_EIO (ENOSPC and the like named) with the path. */
SP_API int sp_write_file_atomic(const char *path, const void *data, size_t n, int durable,
                                sp_error *err);

/*! sp_parse_size() : "123", "10K", "10M", "2G", "1T" (binary units, any
 *  case, optional trailing "B"/"iB"): the one parser of every size a user
 *  writes (cache --max-size, SEEDPIPE_IDX_MAX_BYTES). @return 0 or SP_EINVAL. */
SP_API int sp_parse_size(const char *s, uint64_t *out, sp_error *err);

/*! sp_isa_cap() : a SIMD level (0 baseline, 1 AVX2, 2 AVX-512) capped by
 *  the environment variable SEEDPIPE_ISA=sse2|avx2|avx512 (unset: best;
 *  another value caps nothing here: sp_env_check() and so
 *  sp_loader_create() and the tool refuse it by name).
 *  Every module with run-time SIMD dispatch (resize, the CPU convolutions,
 *  the cache's hashing and dictionary expansion) gives the same bytes at
 *  every level; tests compare them through this variable. */
SP_API int sp_isa_cap(int best);

/*! sp_library_versions_json() : writes a JSON object of the linked library
 *  versions, e.g. {"seedpipe":"0.1.0","libpng":"1.6.39",
 *  "libjpeg-turbo":"2.1.5","zstd":"1.5.4","xxhash":"0.8.1","zlib":"1.2.13",
 *  "libwebp":"1.2.4","libtiff":"4.5.0"}.
 *  @return the length that was needed (snprintf semantics). */
SP_API int sp_library_versions_json(char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
