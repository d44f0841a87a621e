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
 * is neither a directory nor a regular file. A symlink loop is an error, not
 * an endless walk. The samples are then sorted byte-wise by relative path
 * "class/sub/file.png" by sp__ds_finish_files() (dataset_index.c), so
 * readdir order never matters. Called by dataset.c; calls down into
 * dataset_index.c and dataset_common.c only.
 */
#include "loader/dataset_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DEPTH 64

typedef struct dir_id { dev_t dev; ino_t ino; } dir_id;

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

static int ends_with_ci(const char *s, size_t ls, const char *suf) {
    size_t lf = strlen(suf);
    if (ls <= lf) return 0;   /* need at least one character before the suffix */
    for (size_t k = 0; k < lf; k++)
        if (lower((unsigned char)s[ls - lf + k]) != suf[k]) return 0;
    return 1;
}

static int has_image_ext(const char *name) {
    size_t l = strlen(name);
    return ends_with_ci(name, l, ".png") || ends_with_ci(name, l, ".jpg") ||
           ends_with_ci(name, l, ".jpeg");
}

static int walk(sp_dataset *ds, const char *dir, const char *rel, int32_t label,
                dir_id *stack, int depth, sp__ds_entries *e, sp_error *err) {
    DIR *d = opendir(dir);
    if (!d) return sp_error_set(err, SP_EIO, "%s: %s", dir, strerror(errno));
    int rc = SP_OK;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno) rc = sp_error_set(err, SP_EIO, "%s: %s", dir, strerror(errno));
            break;
        }
        const char *name = de->d_name;
        if (name[0] == '.') continue;   /* hidden, "." and ".." */
        /* A regular file (d_type from readdir: no stat needed; symlinks and
         * filesystems without d_type take the stat path below) that is not
         * an image is not a candidate. */
        if (de->d_type == DT_REG && !has_image_ext(name)) continue;
        char *full = sp__ds_join(dir, name);
        char *r = full ? sp__ds_join(rel, name) : NULL;
        if (!r) {
            free(full);
            rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", dir);
            break;
        }
        struct stat st;
        if (de->d_type == DT_REG) {
            /* An image file: its stat is taken once, by the index (dataset_index.c). */
            st.st_mode = S_IFREG;
        } else if (stat(full, &st) != 0) {
            /* A dangling link named like an image would be a silently lost
             * sample: refuse it. Anything else that cannot be stat'ed is
             * not a candidate and is ignored. */
            if (has_image_ext(name))
                rc = sp_error_set(err, SP_EIO, "%s: %s", full, strerror(errno));
            free(full);
            free(r);
            if (rc) break;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            for (int k = 0; k < depth; k++) {
                if (stack[k].dev == st.st_dev && stack[k].ino == st.st_ino) {
                    rc = sp_error_set(err, SP_EFORMAT,
                                      "%s: directory loop (links back to an enclosing folder)", full);
                    break;
                }
            }
            if (!rc && depth >= MAX_DEPTH)
                rc = sp_error_set(err, SP_ELIMIT, "%s: folders nested deeper than %d levels",
                                  full, MAX_DEPTH);
            if (!rc) {
                stack[depth].dev = st.st_dev;
                stack[depth].ino = st.st_ino;
                rc = walk(ds, full, r, label, stack, depth + 1, e, err);
            }
            free(r);
        } else if (S_ISREG(st.st_mode) && has_image_ext(name)) {
            if ((uint64_t)e->n >= ds->max_samples) {
                free(r);
                rc = sp_error_set(err, SP_ELIMIT, "%s: more than %llu samples (limit)", ds->root,
                                  (unsigned long long)ds->max_samples);
            } else
                rc = sp__ds_entries_push(e, r, label, 0);
            if (rc == SP_ENOMEM) sp_error_set(err, rc, "%s: out of memory", dir);
        } else {
            free(r);
        }
        free(full);
        if (rc) break;
    }
    closedir(d);
    return rc;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int sp__ds_open_folder(sp_dataset *ds, sp_error *err) {
    DIR *d = opendir(ds->root);
    if (!d) return sp_error_set(err, SP_EIO, "%s: %s", ds->root, strerror(errno));

    /* 1. class folders, sorted byte-wise */
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
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) { rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root); break; }
            names = nn;
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

    /* 2. walk each class; 3. sort, hash, pack */
    sp__ds_entries e = {0};
    dir_id stack[MAX_DEPTH + 1];
    struct stat st;
    if (stat(ds->root, &st) != 0)
        return sp_error_set(err, SP_EIO, "%s: %s", ds->root, strerror(errno));
    stack[0].dev = st.st_dev;
    stack[0].ino = st.st_ino;
    for (size_t c = 0; c < n && rc == SP_OK; c++) {
        char *dir = sp__ds_join(ds->root, names[c]);
        if (!dir) { rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root); break; }
        if (stat(dir, &st) != 0) {
            rc = sp_error_set(err, SP_EIO, "%s: %s", dir, strerror(errno));
        } else {
            stack[1].dev = st.st_dev;
            stack[1].ino = st.st_ino;
            rc = walk(ds, dir, names[c], (int32_t)c, stack, 2, &e, err);
        }
        free(dir);
    }
    if (rc == SP_OK)
        rc = sp__ds_finish_files(ds, &e,
                                 "no images found (expected class folders with .png, .jpg or "
                                 ".jpeg files)", err);
    sp__ds_entries_free(&e);
    return rc;
}
