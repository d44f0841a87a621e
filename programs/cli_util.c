/* cli_util.c - the tool's own small helpers for files and JSON (cli.h):
 * reading a whole file, publishing a file atomically, the one JSON string
 * escaper of programs/, and a loader's sp_loader_info in one call.
 *
 * The tool writes what it writes with these, not with the library's file
 * helpers, so that those can stay internal to the library: programs/ uses
 * the public API as any outside program would (DESIGN.md section 8).
 *
 * An atomic publish writes a temporary file beside the target, under an
 * unpredictable name created with O_EXCL (no one can make us write through
 * a planted link), then fsyncs it (durable: its directory too, after the
 * rename), and renames it into place: a reader sees the old file or the
 * whole new one, never a part. The messages name the file and the step
 * that failed, as the library's publish does.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- reading ------------------------------------------------------------------------------ */

/* The library's reading rule (docs/security.md): opened without blocking
 * (a FIFO cannot stall the open), refused unless a regular file, and its
 * size checked against the limit before a byte is read. */
#define CLI_READ_MAX (1u << 30)

char *cli_read_file(const char *path, size_t *len, char *why, size_t n) {
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, n, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > CLI_READ_MAX) {
        snprintf(why, n, S_ISREG(st.st_mode) ? "%s: larger than %u bytes"
                                             : "%s: not a regular file", path, CLI_READ_MAX);
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(why, n, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 16, got;
    char *buf = malloc(cap);
    while (buf && *len <= CLI_READ_MAX && (got = fread(buf + *len, 1, cap - *len - 1, f)) > 0) {
        *len += got;
        if (cap - *len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad || *len > CLI_READ_MAX) {
        snprintf(why, n, "%s: %s", path, !buf ? "out of memory" : bad ? "read error"
                                                                   : "grew past the limit");
        free(buf);
        *len = 0;
        return NULL;
    }
    buf[*len] = '\0';
    return buf;
}

/* ---- atomic publish ----------------------------------------------------------------------- */

struct cli_publish {
    int fd;
    char *path;   /* the target */
    char *tmp;    /* the temporary file beside it */
};

/* 64 bits from the kernel's generator for the temporary name (a failure
 * falls back to the clock and the pid, still behind O_EXCL). */
static uint64_t tmp_bits(void) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
    }
    return r;
}

static void publish_free(cli_publish *p) {
    free(p->path);
    free(p->tmp);
    free(p);
}

int cli_publish_begin(const char *path, cli_publish **out, sp_error *err) {
    *out = NULL;
    if (!path || !*path) return sp_error_set(err, SP_EINVAL, "publish: no path");
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
    size_t n = strlen(path) + 32;
    cli_publish *p = calloc(1, sizeof *p);
    char *tmp = malloc(n), *dup = strdup(path);
    if (!p || !tmp || !dup) {
        free(p), free(tmp), free(dup);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    }
    int fd = -1, e = EEXIST;
    for (int tries = 0; fd < 0 && e == EEXIST && tries < 64; tries++) {
        snprintf(tmp, n, "%.*s.%s.tmp-%016llx", (int)dl, path, path + dl,
                 (unsigned long long)tmp_bits());
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        e = fd < 0 ? errno : 0;
    }
    if (fd < 0) {
        free(p), free(tmp), free(dup);
        return sp_error_set(err, SP_EIO, "%s: cannot create a temporary file beside it: %s",
                            path, strerror(e));
    }
    p->fd = fd;
    p->path = dup;
    p->tmp = tmp;
    *out = p;
    return SP_OK;
}

int cli_publish_fd(const cli_publish *p) { return p ? p->fd : -1; }

void cli_publish_abort(cli_publish *p) {
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

int cli_publish_commit(cli_publish *p, int durable, sp_error *err) {
    if (!p) return sp_error_set(err, SP_EINVAL, "publish: nothing to commit");
    const char *why = NULL;
    int e = 0;
    if (fsync(p->fd) != 0) why = "fsync", e = errno;
    if (close(p->fd) != 0 && !why) why = "close", e = errno;
    p->fd = -1;
    if (!why && rename(p->tmp, p->path) != 0) why = "rename", e = errno;
    if (!why && durable && sync_dir(p->path) != 0) why = "fsync of its directory", e = errno;
    int rc = SP_OK;
    if (why) {
        rc = sp_error_set(err, SP_EIO, "%s: %s: %s", p->path, why, strerror(e));
        if (strcmp(why, "fsync of its directory") != 0) unlink(p->tmp);
    }
    publish_free(p);
    return rc;
}

/* write(2) until all n bytes are written (EINTR retried; 0 is ENOSPC). */
static int write_full(int fd, const void *data, size_t n) {
    const char *s = data;
    while (n) {
        ssize_t w = write(fd, s, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int cli_write_file_atomic(const char *path, const void *data, size_t n, int durable,
                          sp_error *err) {
    cli_publish *p;
    int rc = cli_publish_begin(path, &p, err);
    if (rc) return rc;
    if (write_full(p->fd, data, n) != 0) {
        int e = errno;
        sp_error_set(err, SP_EIO, "%s: write: %s", path, strerror(e));
        cli_publish_abort(p);
        return SP_EIO;
    }
    return cli_publish_commit(p, durable, err);
}

/* ---- JSON and the loader ------------------------------------------------------------------- */

void cli_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

sp_loader_info cli_loader_info(const sp_loader *ld) {
    sp_loader_info li;
    memset(&li, 0, sizeof li);
    li.struct_size = sizeof li;
    sp_loader_info_get(ld, &li);   /* cannot fail: struct_size is this header's */
    return li;
}
