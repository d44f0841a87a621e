/* dataset_folder.c - the ImageFolder source: a directory with one sub-folder
 * per class, as torchvision.datasets.ImageFolder.
 *
 * Classes are the non-hidden sub-directories of the root (symlinks followed),
 * sorted byte-wise with strcmp (not by locale: "Zebra" sorts before "apple");
 * the class id is the index in that order, and a class folder without images
 * is still a class (with no samples). Inside a class folder the walk is
 * recursive; a file is a sample when its name ends in .png, .jpg or .jpeg in
 * any case. Hidden entries (a leading '.') are skipped at every level, as are
 * files with other extensions, files directly in the root, and anything that
 * is neither a directory nor a regular file. Each real directory (device
 * and inode) is read once: a second path to one already read (a symlink
 * sideways, a bind mount, a class linked to another) is an SP_EFORMAT
 * naming both paths, as is a link back to an enclosing folder (torchvision
 * would list the files twice, or forever; links that pointed sideways made
 * the old walk exponential), and folders nested deeper than 64 levels or a
 * walk that reads more than 2^26 entries are a named SP_ELIMIT, in bounded
 * time. Sub-folders are visited in byte-wise order after the files. The samples are then sorted byte-wise by relative path
 * "class/sub/file.png" by sp__ds_finish_files() (dataset_index.c), so
 * readdir order never matters. Called by dataset_open.c; calls down into
 * dataset_index.c and dataset_common.c only.
 */
#include "dataset/dataset_internal.h"
#include "common/vec_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DEPTH 64
/* Every directory entry the walk reads counts (files, folders, anything):
 * a folder of more is refused, naming the budget, in bounded time. */
#define MAX_ENTRIES (UINT64_C(1) << 26)

typedef struct dir_id { dev_t dev; ino_t ino; } dir_id;

/* A folder walked, and the path (relative to the root) it was walked as. */
typedef struct seen_dir {
    dir_id id;
    char *rel;      /* NULL: a free slot */
} seen_dir;

/* The walk's state: the folders walked (a hash set of device and inode:
 * a second path to one of them is an error naming both, so no folder is
 * read twice, however many links lead to it) and the entries read so far. */
typedef struct walk_ctx {
    seen_dir *seen;   /* open addressing */
    size_t cap, n;
    uint64_t entries;
} walk_ctx;

static size_t id_home(const walk_ctx *w, dir_id id) {
    uint64_t h = ((uint64_t)id.dev * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)id.ino * 0xC2B2AE3D27D4EB4Full);
    return (size_t)(h ^ (h >> 29)) & (w->cap - 1);
}

static void put_seen(walk_ctx *w, seen_dir d) {
    size_t i = id_home(w, d.id);
    while (w->seen[i].rel) i = (i + 1) & (w->cap - 1);
    w->seen[i] = d;
    w->n++;
}

/* The path id was first walked as, or NULL after recording it as `rel`
 * (*oom set when that fails). */
static const char *seen_as(walk_ctx *w, dir_id id, const char *rel, int *oom) {
    *oom = 0;
    if (w->cap) {
        for (size_t i = id_home(w, id); w->seen[i].rel; i = (i + 1) & (w->cap - 1))
            if (w->seen[i].id.dev == id.dev && w->seen[i].id.ino == id.ino) return w->seen[i].rel;
    }
    if ((w->n + 1) * 2 > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        walk_ctx g = {calloc(cap, sizeof(seen_dir)), cap, 0, w->entries};
        if (!g.seen) {
            *oom = 1;
            return NULL;
        }
        for (size_t i = 0; i < w->cap; i++)
            if (w->seen[i].rel) put_seen(&g, w->seen[i]);
        free(w->seen);
        *w = g;
    }
    seen_dir d = {id, sp__ds_strdup(rel)};
    if (!d.rel) {
        *oom = 1;
        return NULL;
    }
    put_seen(w, d);
    return NULL;
}

static void free_seen(walk_ctx *w) {
    for (size_t i = 0; i < w->cap; i++) free(w->seen[i].rel);
    free(w->seen);
}

/* A name is an image when the text after its last dot (with at least one
 * character before the dot) is an image extension (sp__ds_is_image_ext). */
static int has_image_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && dot != name && sp__ds_is_image_ext(dot + 1);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int walk(sp_dataset *ds, const char *dir, const char *rel, int32_t label,
                dir_id *stack, int depth, walk_ctx *w, sp__ds_entries *e, sp_error *err);

/* The sub-folders of dir (names in subs[0..n)), in byte-wise order, each
 * walked once: a link back to an enclosing folder, or a second path to a
 * folder already walked (a link sideways, a bind mount), is an error naming
 * both paths (torchvision would read its files twice, under two names). */
static int walk_subdirs(sp_dataset *ds, const char *dir, const char *rel, int32_t label,
                        dir_id *stack, int depth, walk_ctx *w, char **subs, size_t n,
                        sp__ds_entries *e, sp_error *err) {
    int rc = SP_OK;
    if (n > 1) qsort(subs, n, sizeof *subs, cmp_str);
    for (size_t k = 0; k < n && rc == SP_OK; k++) {
        char *full = sp__ds_join(dir, subs[k]);
        char *r = full ? sp__ds_join(rel, subs[k]) : NULL;
        struct stat st;
        if (!r) {
            rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", dir);
        } else if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            dir_id id = {st.st_dev, st.st_ino};
            for (int a = 0; a < depth && rc == SP_OK; a++)
                if (stack[a].dev == id.dev && stack[a].ino == id.ino)
                    rc = sp_error_set(err, SP_EFORMAT, "%s: directory loop (links back to an "
                                      "enclosing folder)", full);
            int oom = 0;
            const char *first = rc ? NULL : seen_as(w, id, r, &oom);
            if (oom) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", dir);
            else if (first)
                rc = sp_error_set(err, SP_EFORMAT, "%s: the same folder as %s/%s, already read "
                                  "(a link or mount reaches it twice; each folder is read once: "
                                  "remove the second path)", full, ds->root, first);
            if (rc == SP_OK && depth >= MAX_DEPTH)
                rc = sp_error_set(err, SP_ELIMIT, "%s: folders nested deeper than %d levels",
                                  full, MAX_DEPTH);
            if (rc == SP_OK) {
                stack[depth] = id;
                rc = walk(ds, full, r, label, stack, depth + 1, w, e, err);
            }
        }
        free(full);
        free(r);
    }
    for (size_t k = 0; k < n; k++) free(subs[k]);
    free(subs);
    return rc;
}

/* One entry of dir: an image file is pushed, a folder (or a link to one)
 * goes on *subs for walk_subdirs(). */
static int walk_entry(sp_dataset *ds, const char *dir, const char *rel, int32_t label,
                      const struct dirent *de, char ***subs, size_t *ns, size_t *cap,
                      sp__ds_entries *e, sp_error *err) {
    const char *name = de->d_name;
    /* A regular file (d_type from readdir: no stat needed; symlinks and
     * filesystems without d_type take the stat path below) that is not
     * an image is not a candidate. */
    if (de->d_type == DT_REG && !has_image_ext(name)) return SP_OK;
    int is_dir = de->d_type == DT_DIR, is_img = de->d_type == DT_REG;
    if (!is_dir && !is_img) {
        char *full = sp__ds_join(dir, name);
        if (!full) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", dir);
        struct stat st;
        int rc = SP_OK;
        if (stat(full, &st) != 0) {
            /* A dangling link named like an image would be a silently lost
             * sample: refuse it. Anything else that cannot be stat'ed is
             * not a candidate and is ignored. */
            if (has_image_ext(name)) rc = sp_error_set(err, SP_EIO, "%s: %s", full, strerror(errno));
        } else {
            is_dir = S_ISDIR(st.st_mode);
            is_img = S_ISREG(st.st_mode) && has_image_ext(name);
        }
        free(full);
        if (rc) return rc;
    }
    if (is_dir) {
        if (SP__VEC_RESERVE(*subs, *cap, *ns + 1, 16) != 0)
            return sp_error_set(err, SP_ENOMEM, "%s: out of memory", dir);
        if (!((*subs)[*ns] = sp__ds_strdup(name)))
            return sp_error_set(err, SP_ENOMEM, "%s: out of memory", dir);
        (*ns)++;
    } else if (is_img) {
        if ((uint64_t)e->n >= ds->max_samples)
            return sp_error_set(err, SP_ELIMIT, "%s: more than %llu samples (limit)", ds->root,
                                (unsigned long long)ds->max_samples);
        char *r = sp__ds_join(rel, name);
        int rc = r ? sp__ds_entries_push(e, r, label, 0) : SP_ENOMEM;
        if (rc == SP_ENOMEM) return sp_error_set(err, rc, "%s: out of memory", dir);
        if (rc) return rc;
    }
    return SP_OK;
}

static int walk(sp_dataset *ds, const char *dir, const char *rel, int32_t label,
                dir_id *stack, int depth, walk_ctx *w, sp__ds_entries *e, sp_error *err) {
    DIR *d = opendir(dir);
    if (!d) return sp_error_set(err, SP_EIO, "%s: %s", dir, strerror(errno));
    int rc = SP_OK;
    char **subs = NULL;
    size_t ns = 0, cap = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno) rc = sp_error_set(err, SP_EIO, "%s: %s", dir, strerror(errno));
            break;
        }
        if (++w->entries > MAX_ENTRIES) {
            rc = sp_error_set(err, SP_ELIMIT, "%s: the walk read more than %llu folder entries "
                              "(limit; at %s)", ds->root, (unsigned long long)MAX_ENTRIES, dir);
            break;
        }
        if (de->d_name[0] == '.') continue;   /* hidden, "." and ".." */
        rc = walk_entry(ds, dir, rel, label, de, &subs, &ns, &cap, e, err);
        if (rc) break;
    }
    closedir(d);
    if (rc) {
        for (size_t k = 0; k < ns; k++) free(subs[k]);
        free(subs);
        return rc;
    }
    return walk_subdirs(ds, dir, rel, label, stack, depth, w, subs, ns, e, err);
}

/* The class folders, sorted byte-wise, into ds->class_names. */
static int class_folders(sp_dataset *ds, sp_error *err) {
    DIR *d = opendir(ds->root);
    if (!d) return sp_error_set(err, SP_EIO, "%s: %s", ds->root, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = SP_OK;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno) rc = sp_error_set(err, SP_EIO, "%s: %s", ds->root, strerror(errno));
            break;
        }
        if (de->d_name[0] == '.') continue;
        char *full = sp__ds_join(ds->root, de->d_name);
        if (!full) { rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root); break; }
        struct stat st;
        int is_dir = stat(full, &st) == 0 && S_ISDIR(st.st_mode);
        free(full);
        if (!is_dir) continue;
        if (n >= SP_DS_MAX_CLASSES) {
            rc = sp_error_set(err, SP_ELIMIT, "%s: more than %d class folders", ds->root,
                              SP_DS_MAX_CLASSES);
            break;
        }
        if (SP__VEC_RESERVE(names, cap, n + 1, 64) != 0) {
            rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
            break;
        }
        names[n] = sp__ds_strdup(de->d_name);
        if (!names[n]) { rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root); break; }
        n++;
    }
    closedir(d);
    if (rc == SP_OK && n == 0)
        rc = sp_error_set(err, SP_EFORMAT,
                          "%s: no class folders (an ImageFolder has one sub-folder per class)",
                          ds->root);
    if (rc != SP_OK) {
        for (size_t k = 0; k < n; k++) free(names[k]);
        free(names);
        return rc;
    }
    qsort(names, n, sizeof *names, cmp_str);
    ds->class_names = names;
    ds->num_classes = (int)n;
    return SP_OK;
}

/* 1. the class folders; 2. walk each class; 3. sort, hash, pack. */
static int folder_open(sp_dataset *ds, const sp__ds_req *rq, sp_error *err) {
    (void)rq;
    int rc = class_folders(ds, err);
    if (rc != SP_OK) return rc;
    char **names = ds->class_names;
    size_t n = (size_t)ds->num_classes;
    sp__ds_entries e = {0};
    dir_id stack[MAX_DEPTH + 1];
    walk_ctx w = {NULL, 0, 0, 0};
    struct stat st;
    if (stat(ds->root, &st) != 0)
        return sp_error_set(err, SP_EIO, "%s: %s", ds->root, strerror(errno));
    stack[0].dev = st.st_dev;
    stack[0].ino = st.st_ino;
    int oom = 0;
    seen_as(&w, stack[0], ".", &oom);
    if (oom) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    for (size_t c = 0; c < n && rc == SP_OK; c++) {
        char *dir = sp__ds_join(ds->root, names[c]);
        if (!dir) { rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root); break; }
        if (stat(dir, &st) != 0) {
            rc = sp_error_set(err, SP_EIO, "%s: %s", dir, strerror(errno));
        } else {
            stack[1].dev = st.st_dev;
            stack[1].ino = st.st_ino;
            /* A class folder that is the root or another class by a link. */
            const char *first = seen_as(&w, stack[1], names[c], &oom);
            if (oom) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
            else if (first)
                rc = sp_error_set(err, SP_EFORMAT, "%s: the same folder as %s/%s (a link): each "
                                  "folder is read once, a class cannot share one", dir, ds->root,
                                  first);
            else rc = walk(ds, dir, names[c], (int32_t)c, stack, 2, &w, &e, err);
        }
        free(dir);
    }
    free_seen(&w);
    if (rc == SP_OK)
        rc = sp__ds_finish_files(ds, &e,
                                 "no images found (expected class folders with .png, .jpg, "
                                 ".jpeg, .bmp, .webp, .tif or .tiff files)", err);
    sp__ds_entries_free(&e);
    return rc;
}

/* Any folder no other driver took (shards: dataset_tar.c, before it). */
static int folder_probe(const sp__ds_req *rq, sp_error *err) {
    (void)err;
    return rq->is_dir;
}

const sp__ds_driver sp__ds_driver_folder = {
    .name = "imagefolder", .code = SP_DATASET_IMAGEFOLDER, .local = 1, .probe = folder_probe,
    .open = folder_open, .ops = &sp__ds_files_ops,
};
