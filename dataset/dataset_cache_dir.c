/* dataset_cache_dir.c - the user's seedpipe cache folder, where the
 * persistent indexes live (dataset_index.c: an ImageFolder's or a list
 * file's; dataset_tar_index.c: a local shard's), so that opening a dataset
 * writes nothing into the user's data.
 *
 * HOW IT WORKS
 *  - Where: $SEEDPIPE_CACHE if set and not empty, else
 *    $XDG_CACHE_HOME/seedpipe (an absolute XDG_CACHE_HOME only, as the XDG
 *    spec says), else $HOME/.cache/seedpipe. The folder and any missing
 *    parent are made mode 0700. An existing folder (a link to one is
 *    followed: SEEDPIPE_CACHE may name one) must be this user's and not
 *    writable by group or others, sticky or not (anyone who can write
 *    there could plant an index of their own): the rules of the shard
 *    cache's private folder (dataset_shard_cache.c), less the read bits, so
 *    a ~/.cache/seedpipe made 0755 by an older version stays usable. The
 *    folder it is in must be this user's or root's, and sticky if others
 *    may write it (the shard cache's rule for its DIR): else the cache
 *    folder could be swapped between the check and a write.
 *  - A folder that is not usable is never an error: the caller hashes
 *    every file and says why (sp_dataset_index_info.warning).
 *  - An entry is named <tag>-<32 hex digits>, the XXH3-128 of (tag, NUL,
 *    the resolved path of the dataset's root, list file or shard, the
 *    device and inode of the folder it names: an ImageFolder's root itself,
 *    else the folder holding the file). Two datasets never share an entry;
 *    a dataset moved or its folder replaced gets a new one and is indexed
 *    again (the old entry stays, unused: nothing here is ever removed, so
 *    `rm -r` of the folder is always safe). A list file or a shard
 *    rewritten in place of the old keeps its entry, whose stat check then
 *    fails: re-read, and the entry overwritten.
 *
 * dataset_index.c and dataset_tar_index.c call this file; it calls common's
 * hashing only.
 */
#include "dataset/dataset_internal.h"
#include "common/hash_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

__attribute__((format(printf, 3, 4))) static int refuse(char *why, size_t wn,
                                                        const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (why && wn) vsnprintf(why, wn, fmt, ap);
    va_end(ap);
    return -1;
}

/* mkdir -p with mode 0700 for every folder made. 0, or -1 with errno. */
static int make_path(const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) return -1;
        *s = '/';
    }
    if (mkdir(p, 0700) == 0) return chmod(p, 0700) == 0 ? 0 : -1;   /* whatever the umask */
    return errno == EEXIST ? 0 : -1;
}

/* The folder holding the cache folder (resolved): whoever may rename
 * entries there could swap the cache folder for one of their own between
 * the check and a write, so it must be this user's or root's, and sticky
 * where others may write it (/tmp): the shard cache's rule for its DIR. */
static int check_parent(const char *dir, uid_t me, char *why, size_t wn) {
    char *real = realpath(dir, NULL);
    if (!real) return refuse(why, wn, "cache folder %s: %s", dir, strerror(errno));
    char *slash = strrchr(real, '/');
    if (slash == real) slash[1] = '\0';
    else *slash = '\0';
    struct stat st;
    int rc = 0;
    if (stat(real, &st) != 0)
        rc = refuse(why, wn, "cache folder %s: %s: %s", dir, real, strerror(errno));
    else if (st.st_uid != me && st.st_uid != 0)
        rc = refuse(why, wn, "cache folder %s: in %s, owned by uid %u: refused (its owner "
                    "could replace the cache folder)", dir, real, (unsigned)st.st_uid);
    else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
        rc = refuse(why, wn, "cache folder %s: in %s, mode %04o: others may write it and it is "
                    "not sticky: refused (they could replace the cache folder)", dir, real,
                    (unsigned)(st.st_mode & 07777));
    free(real);
    return rc;
}

int sp__ds_cache_dir(char *dir, size_t n, char *why, size_t wn) {
    const char *env = getenv("SEEDPIPE_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    const char *name = "SEEDPIPE_CACHE";
    int w;
    if (env && env[0]) {
        w = snprintf(dir, n, "%s", env);
    } else if (xdg && xdg[0] == '/') {
        w = snprintf(dir, n, "%s/seedpipe", xdg);
        name = "$XDG_CACHE_HOME/seedpipe";
    } else if (home && home[0] == '/') {
        w = snprintf(dir, n, "%s/.cache/seedpipe", home);
        name = "~/.cache/seedpipe";
    } else {
        dir[0] = '\0';
        return refuse(why, wn, "no cache folder (SEEDPIPE_CACHE, XDG_CACHE_HOME and HOME "
                      "are unset or not absolute)");
    }
    if (w < 0 || (size_t)w >= n - 48) {
        dir[0] = '\0';
        return refuse(why, wn, "cache folder %s: path too long", name);
    }
    struct stat st;
    if (make_path(dir) != 0 || stat(dir, &st) != 0)
        return refuse(why, wn, "cache folder %s: %s", dir, strerror(errno));
    uid_t me = geteuid();
    if (!S_ISDIR(st.st_mode))
        return refuse(why, wn, "cache folder %s: not a folder", dir);
    if (st.st_uid != me)
        return refuse(why, wn, "cache folder %s: owned by uid %u, not by this user (uid %u): "
                      "refused (its owner could replace the indexes; set SEEDPIPE_CACHE to a "
                      "folder of your own)", dir, (unsigned)st.st_uid, (unsigned)me);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return refuse(why, wn, "cache folder %s: mode %04o: others may write it: refused (they "
                      "could plant indexes; chmod 700 it or set SEEDPIPE_CACHE to a folder of "
                      "your own)", dir, (unsigned)(st.st_mode & 07777));
    return check_parent(dir, me, why, wn);
}

int sp__ds_cache_entry(const char *dir, const char *tag, const char *path, char *out,
                       size_t n) {
    out[0] = '\0';
    char *real = realpath(path, NULL);
    if (!real) return -1;
    struct stat st;
    int rc = stat(real, &st);
    if (rc == 0 && !S_ISDIR(st.st_mode)) {   /* a file: the identity of its folder */
        char *slash = strrchr(real, '/');
        *slash = '\0';
        rc = stat(slash == real ? "/" : real, &st);
        *slash = '/';
    }
    if (rc == 0) {
        sp__hash h;
        sp__hash_init(&h);
        sp__hash_bytes(&h, tag, strlen(tag) + 1);
        sp__hash_bytes(&h, real, strlen(real));
        uint64_t id[2] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino};
        sp__hash_bytes(&h, id, sizeof id);
        sp_digest d = sp__hash_digest(&h);
        int w = snprintf(out, n, "%s/%s-%016llx%016llx", dir, tag, (unsigned long long)d.hi,
                         (unsigned long long)d.lo);
        if (w < 0 || (size_t)w >= n) rc = -1;
    }
    free(real);
    if (rc != 0) out[0] = '\0';
    return rc == 0 ? 0 : -1;
}
