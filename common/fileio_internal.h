/* common/fileio_internal.h - the one bounded whole-file reader (internal to
 * the library; not installed). sp_read_file() (common.h) is its public face.
 *
 * Every reader of a whole file in the library goes through sp__read_fd(),
 * after sp__open_regular() (the rule below),
 * and every writer of a whole buffer through sp__write_full():
 * it reads to end of file (a size from fstat is only a hint: pipes and
 * files that grow or shrink under it are handled), never past a caller's
 * bound, and names the path in every error. Reentrant; no global state.
 */
#ifndef SEEDPIPE_COMMON_FILEIO_INTERNAL_H
#define SEEDPIPE_COMMON_FILEIO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "seedpipe/common.h"

/* A growable byte buffer, reusable across reads (p and cap are the
 * caller's; {NULL, 0} is an empty one). */
typedef struct sp__buf {
    uint8_t *p;
    size_t cap;
} sp__buf;

/*! sp__buf_reserve() : grow b to at least n bytes (contents kept).
 *  @return 0, or -1 (errno ENOMEM; b unchanged). */
int sp__buf_reserve(sp__buf *b, size_t n);
/*! sp__buf_free() : free b's memory and empty it. Accepts NULL. */
void sp__buf_free(sp__buf *b);

/*! sp__read_fd() : read the open descriptor fd from its current offset to
 *  end of file into buf (grown as needed), at most max bytes; one spare
 *  byte stays after the data, so text can be NUL-terminated in place. The
 *  fd is not closed. `path` only names the file in messages. hint is the
 *  size the caller expects (from its own fstat; 0: unknown), used only for
 *  the first allocation: the read itself is bounded by max alone.
 *  @return 0 with *len set; SP_ELIMIT ("path: file exceeds the limit of N
 *  bytes") when there are more than max bytes, SP_EIO (with strerror) or
 *  SP_ENOMEM; on failure buf stays valid (the caller frees it) and its
 *  contents are undefined. */
int sp__read_fd(int fd, const char *path, uint64_t max, uint64_t hint, sp__buf *buf,
                size_t *len, sp_error *err);

/* THE RULE for every file seedpipe reads (docs/security.md): open with
 * O_NONBLOCK (a FIFO never blocks the open) and O_NOFOLLOW where the name
 * is seedpipe's own (an index, a cache file), fstat the descriptor, refuse
 * what is not a regular file, compare the size with the reader's limit
 * before reading a byte, and read at most the limit (sp__read_fd). */

/*! sp__open_regular() : open dirfd/name (AT_FDCWD and a path work too) by
 *  the rule above; *st is the descriptor's fstat. Messages name `path`
 *  (NULL: name): "is a FIFO, not a regular file", "file is N bytes, limit
 *  M". @return the descriptor (>= 0), or SP_EIO / SP_ELIMIT with errno
 *  that of the failing call (ENOENT when absent, ELOOP for a symlink under
 *  nofollow, EINVAL for a non-regular file, EFBIG for SP_ELIMIT). */
int sp__open_regular(int dirfd, const char *name, const char *path, int nofollow, uint64_t max,
                     struct stat *st, sp_error *err);

/*! sp__read_regular() : sp__open_regular() then sp__read_fd() (a file
 *  that grows past max while read is SP_ELIMIT too, errno EFBIG). */
int sp__read_regular(int dirfd, const char *name, const char *path, int nofollow, uint64_t max,
                     sp__buf *buf, size_t *len, sp_error *err);

/*! sp__read_file_at() : sp__read_regular() with nofollow (seedpipe's own
 *  names). On failure errno is that of the failing call, for callers that
 *  treat "absent" apart. */
int sp__read_file_at(int dirfd, const char *name, const char *path, uint64_t max,
                     sp__buf *buf, size_t *len, sp_error *err);

/*! sp__write_full() : write all n bytes of p to fd (retrying after EINTR
 *  and short writes, in chunks of at most 1 GiB). @return 0, or -1 with
 *  errno set (ENOSPC when the file system takes no more). The one write
 *  loop of the library. */
int sp__write_full(int fd, const void *p, size_t n);

/* ---- atomic publish, the internal knobs (sp__publish_begin/commit in
 * common.h are these with mode 0644 and SP__SYNC_FILE or SP__SYNC_DIR) ---- */

/* What sp__publish_commit_ex() makes durable before and after the rename. */
typedef enum sp__sync {
    SP__SYNC_NONE = 0,   /* rename only: for a copy whose every read is checked
                          * (a damaged file costs a fetch, never a byte) */
    SP__SYNC_FILE = 1,   /* fsync the file, then rename (sp__publish_commit, durable 0) */
    SP__SYNC_DIR = 2,    /* and fsync the directory after (durable 1) */
} sp__sync;

/*! sp__publish_begin_ex() : sp__publish_begin() with the temporary file's mode
 *  (before the umask; it becomes the published file's), e.g. 0600 for
 *  copies only their owner reads. */
int sp__publish_begin_ex(const char *path, mode_t mode, sp_publish **out, sp_error *err);
/*! sp__publish_commit_ex() : sp__publish_commit() with the policy `sync`
 *  (close, rename; fsyncs as above). Frees p whatever happens.
 *  @return 0 or SP_EIO naming the path. */
int sp__publish_commit_ex(sp_publish *p, sp__sync sync, sp_error *err);

#endif
