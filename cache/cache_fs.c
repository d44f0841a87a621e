/* cache_fs.c - the cache's small POSIX helpers (cache_internal.h).
 *
 * In the cache's stack (cache/, bottom first) beside the file
 * format: it calls no other cache file, and everything that touches a
 * cache directory (cache_batch.c and up) builds on it.
 *
 * Writing a whole new file with the exact error the caller reports,
 * removing a tree without following symlinks, moving an entry aside, the
 * entry-name check and the per-process counter in staging names, an
 * entry's size. In a test build (SEEDPIPE_TEST_HOOKS) also the hook that
 * makes writes fail as on a full disk (sp__cache_fail_after_bytes, never
 * set by the library); a release build has no hook.
 */
#include "cache/cache_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef SEEDPIPE_TEST_HOOKS
_Atomic long long sp__cache_fail_after_bytes = 0;

/* The hook's part of a write of `chunk` bytes at s: 0 to go on, or -1 with
 * errno ENOSPC after writing what the budget allows (a partial file). */
static int hook_fail(int fd, const uint8_t *s, size_t chunk) {
    long long lim = atomic_load(&sp__cache_fail_after_bytes);
    if (lim <= 0) return 0;
    if ((long long)chunk >= lim) {
        atomic_store(&sp__cache_fail_after_bytes, 1);   /* stays failing */
        if (lim > 1) (void)!write(fd, s, (size_t)(lim - 1));   /* a partial file */
        errno = ENOSPC;
        return -1;
    }
    atomic_fetch_sub(&sp__cache_fail_after_bytes, (long long)chunk);
    return 0;
}
#endif

/* ---- file-system helpers ------------------------------------------------------- */

/* Write n bytes or fail with errno set (the full-disk hook first, where
 * compiled in). @return 0 or -1. */
static int write_all(int fd, const void *p, size_t n) {
#ifdef SEEDPIPE_TEST_HOOKS
    if (hook_fail(fd, p, n) != 0) return -1;
#endif
    return sp__write_full(fd, p, n);
}

int sp__write_new(int dirfd, int no_fsync, const char *name, const void *p, size_t len) {
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    int e = 0;
    if (write_all(fd, p, len) != 0) e = errno;
    else if (!no_fsync && fsync(fd) != 0) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (e) unlinkat(dirfd, name, 0);
    return e;
}

int sp__rmtree_at(int dirfd, const char *name) {
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return unlinkat(dirfd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (unlinkat(fd, e->d_name, 0) != 0) {
            if (errno == EISDIR || errno == EPERM) {
                if (sp__rmtree_at(fd, e->d_name) != 0) rc = -1;
            } else if (errno != ENOENT) {
                rc = -1;
            }
        }
    }
    closedir(d);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) rc = -1;
    return rc;
}

unsigned long sp__cache_seq(void) {
    static _Atomic unsigned long seq = 0;
    return atomic_fetch_add(&seq, 1ul);
}

int sp__move_aside(const char *dir, const char *name, char *dst, size_t cap) {
    char src[4096];
    snprintf(src, sizeof src, "%s/%s", dir, name);
    snprintf(dst, cap, "%s/.corrupt/%s.%ld.%lu", dir, name, (long)getpid(), sp__cache_seq());
    return rename(src, dst);
}

int sp__is_key_name(const char *s) {
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return s[32] == '\0';
}

uint64_t sp__dir_bytes(int dirfd) {
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    uint64_t sum = 0;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d)) != NULL)
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            sum += (uint64_t)st.st_size;
    closedir(d);
    return sum;
}
