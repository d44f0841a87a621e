/* common/fileio.c - bounded whole-file reading and whole-buffer writing
 * (common/fileio_internal.h; sp_read_file() in include/seedpipe/common.h).
 *
 * One reader for the whole library: datasets' list files, loader state,
 * pipeline specs, cache batch files and manifests, checkpoints and the
 * public sp_read_file() all come through sp__read_fd(), so each has the
 * same bound, the same handling of short reads and EINTR, and messages that
 * name the file. Reentrant; no global state.
 */
#include "common/fileio_internal.h"
#include "common/vec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "common/common_internal.h"

#define SP_READ_FILE_DEFAULT_MAX (1ull << 30)   /* sp_read_file: 1 GiB */

int sp__buf_reserve(sp__buf *b, size_t n) {
    if (SP__VEC_RESERVE(b->p, b->cap, n, 4096) != 0) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

void sp__buf_free(sp__buf *b) {
    if (!b) return;
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

static int limit_error(sp_error *err, const char *path, uint64_t max) {
    return sp_error_set(err, SP_ELIMIT, "%s: file exceeds the limit of %llu bytes", path,
                        (unsigned long long)max);
}

int sp__read_fd(int fd, const char *path, uint64_t max, uint64_t hint, sp__buf *buf,
                size_t *len, sp_error *err) {
    *len = 0;
    if (max > SIZE_MAX - 2) max = SIZE_MAX - 2;
    /* The first allocation: the size the caller knows (+ 1 to see the end,
     * + 1 spare), else 64 KiB; never more than the bound allows. No stat
     * here: the callers that know the size have just stat'ed the file. */
    uint64_t first = hint ? hint + 2 : 65536;
    if (first > max + 2) first = max + 2;
    size_t n = 0;
    for (;;) {
        if (n + 1 >= buf->cap) {   /* room for one byte more and the spare */
            uint64_t want = buf->cap ? (uint64_t)buf->cap * 2 : first;
            if (want < first) want = first;
            if (want > max + 2) want = max + 2;
            if (want <= n + 1) return limit_error(err, path, max);
            /* Exactly `want`: a file of known size costs its size + 2. */
            uint8_t *p = realloc(buf->p, (size_t)want);
            if (!p) {
                sp_error_set(err, SP_ENOMEM, "%s: out of memory reading the file", path);
                errno = ENOMEM;
                return SP_ENOMEM;
            }
            buf->p = p;
            buf->cap = (size_t)want;
        }
        ssize_t r = read(fd, buf->p + n, buf->cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            sp_error_set(err, SP_EIO, "%s: read error: %s", path, strerror(e));
            errno = e;
            return SP_EIO;
        }
        if (r == 0) break;
        n += (size_t)r;
        if (n > max) return limit_error(err, path, max);
    }
    *len = n;
    return SP_OK;
}

int sp__write_full(int fd, const void *p, size_t n) {
    const uint8_t *s = p;
    while (n) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t w = write(fd, s, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) {
            errno = ENOSPC;
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* sp_error_set() may touch errno (it formats); callers of
 * sp__read_file_at() read it after the call. */
static int fail_errno(sp_error *err, int code, int e, const char *path, const char *why) {
    sp_error_set(err, code, "%s: %s", path, why ? why : strerror(e));
    errno = e;
    return code;
}

static const char *not_regular(mode_t m) {
    return S_ISDIR(m)  ? "is a directory, not a regular file"
         : S_ISFIFO(m) ? "is a FIFO, not a regular file"
         : S_ISSOCK(m) ? "is a socket, not a regular file"
         : S_ISCHR(m) || S_ISBLK(m) ? "is a device, not a regular file"
                                    : "is not a regular file";
}

int sp__open_regular(int dirfd, const char *name, const char *path, int nofollow, uint64_t max,
                     struct stat *st, sp_error *err) {
    if (!path) path = name;
    int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0) return fail_errno(err, SP_EIO, errno, path, NULL);
    int rc = SP_OK;
    if (fstat(fd, st) != 0) {
        rc = fail_errno(err, SP_EIO, errno, path, NULL);
    } else if (!S_ISREG(st->st_mode)) {
        rc = fail_errno(err, SP_EIO, EINVAL, path, not_regular(st->st_mode));
    } else if ((uint64_t)st->st_size > max) {
        char why[96];
        snprintf(why, sizeof why, "file is %llu bytes, limit %llu",
                 (unsigned long long)st->st_size, (unsigned long long)max);
        rc = fail_errno(err, SP_ELIMIT, EFBIG, path, why);
    }
    if (rc == SP_OK) return fd;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int sp__read_regular(int dirfd, const char *name, const char *path, int nofollow, uint64_t max,
                     sp__buf *buf, size_t *len, sp_error *err) {
    if (!path) path = name;
    *len = 0;
    struct stat st;
    int fd = sp__open_regular(dirfd, name, path, nofollow, max, &st, err);
    if (fd < 0) return fd;
    int rc = sp__read_fd(fd, path, max, (uint64_t)st.st_size, buf, len, err);
    if (rc == SP_ELIMIT) errno = EFBIG;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int sp__read_file_at(int dirfd, const char *name, const char *path, uint64_t max,
                     sp__buf *buf, size_t *len, sp_error *err) {
    return sp__read_regular(dirfd, name, path, 1, max, buf, len, err);
}

int sp_read_file(const char *path, uint64_t max_bytes, uint8_t **data, size_t *len,
                 sp_error *err) {
    if (!data || !len)
        return sp_error_set(err, SP_EINVAL, "%s: sp_read_file: no output", path ? path : "(null)");
    *data = NULL;
    *len = 0;
    if (!path) return sp_error_set(err, SP_EINVAL, "(null): no path");
    if (max_bytes == 0) max_bytes = SP_READ_FILE_DEFAULT_MAX;
    /* Follows symbolic links (the caller named the file); regular files
     * only, opened without blocking, the size checked before reading. */
    sp__buf buf = {NULL, 0};
    size_t n = 0;
    int rc = sp__read_regular(AT_FDCWD, path, path, 0, max_bytes, &buf, &n, err);
    if (rc != SP_OK) {
        sp__buf_free(&buf);
        return rc;
    }
    if (!buf.p && !(buf.p = malloc(1))) /* an empty file: still a buffer to free */
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory reading the file", path);
    *data = buf.p;
    *len = n;
    return SP_OK;
}

/* ---- atomic publish (include/seedpipe/common.h) ------------------------------------------ */

struct sp_publish {
    int fd;
    char *path;   /* the target */
    char *tmp;    /* the temporary file beside it */
};

/* 64 bits from the kernel's generator for the temporary name (getrandom
 * never fails for 8 bytes once the pool is initialised; a failure falls
 * back to the clock and the pid, still behind O_EXCL). */
static uint64_t tmp_bits(void) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
    }
    return r;
}

int sp__publish_begin(const char *path, sp_publish **out, sp_error *err) {
    return sp__publish_begin_ex(path, 0644, out, err);
}

int sp__publish_begin_ex(const char *path, mode_t mode, sp_publish **out, sp_error *err) {
    *out = NULL;
    if (!path || !*path) return sp_error_set(err, SP_EINVAL, "publish: no path");
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
    size_t n = strlen(path) + 32;
    sp_publish *p = calloc(1, sizeof *p);
    char *tmp = malloc(n), *dup = strdup(path);
    if (!p || !tmp || !dup) {
        free(p); free(tmp); free(dup);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    }
    int fd = -1, e = EEXIST;
    for (int tries = 0; fd < 0 && e == EEXIST && tries < 64; tries++) {
        snprintf(tmp, n, "%.*s.%s.tmp-%016llx", (int)dl, path, path + dl,
                 (unsigned long long)tmp_bits());
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        e = fd < 0 ? errno : 0;
    }
    if (fd < 0) {
        sp_error_set(err, SP_EIO, "%s: cannot create a temporary file beside it: %s", path,
                     strerror(e));
        free(p); free(tmp); free(dup);
        return SP_EIO;
    }
    p->fd = fd;
    p->path = dup;
    p->tmp = tmp;
    *out = p;
    return SP_OK;
}

int sp__publish_fd(const sp_publish *p) { return p ? p->fd : -1; }

static void publish_free(sp_publish *p) {
    free(p->path);
    free(p->tmp);
    free(p);
}

void sp__publish_abort(sp_publish *p) {
    if (!p) return;
    if (p->fd >= 0) close(p->fd);
    unlink(p->tmp);
    publish_free(p);
}

/* fsync the directory holding path (its entry, after a rename). */
static int sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) < sizeof dir) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

int sp__publish_commit(sp_publish *p, int durable, sp_error *err) {
    return sp__publish_commit_ex(p, durable ? SP__SYNC_DIR : SP__SYNC_FILE, err);
}

int sp__publish_commit_ex(sp_publish *p, sp__sync sync, sp_error *err) {
    if (!p) return sp_error_set(err, SP_EINVAL, "publish: nothing to commit");
    const char *why = NULL;
    int e = 0;
    if (sync != SP__SYNC_NONE && fsync(p->fd) != 0) why = "fsync", e = errno;
    if (close(p->fd) != 0 && !why) why = "close", e = errno;
    p->fd = -1;
    if (!why && rename(p->tmp, p->path) != 0) why = "rename", e = errno;
    if (!why && sync == SP__SYNC_DIR && sync_dir(p->path) != 0)
        why = "fsync of its directory", e = errno;
    int rc = SP_OK;
    if (why) {
        rc = sp_error_set(err, SP_EIO, "%s: %s: %s", p->path, why, strerror(e));
        if (strcmp(why, "fsync of its directory") != 0) unlink(p->tmp);
    }
    publish_free(p);
    return rc;
}

int sp_write_file_atomic(const char *path, const void *data, size_t n, int durable,
                         sp_error *err) {
    sp_publish *p;
    int rc = sp__publish_begin(path, &p, err);
    if (rc) return rc;
    if (sp__write_full(p->fd, data, n) != 0) {
        int e = errno;
        sp_error_set(err, SP_EIO, "%s: write: %s", path, strerror(e));
        sp__publish_abort(p);
        return SP_EIO;
    }
    return sp__publish_commit(p, durable, err);
}
