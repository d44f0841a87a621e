/* dataset_hash.c - hashing an encoded-file dataset's files in threads
 * (sp__ds_hash_all(), dataset_internal.h): each file opened without
 * blocking (a FIFO in its place is refused), checked against the limits,
 * hashed (XXH3-128), and with a decode checker read whole and given its
 * verdict. The threads share one counter; an error is the first failing
 * file in canonical order whatever the thread count. dataset_index.c
 * decides which files need hashing (the persistent index).
 */
#include "dataset/dataset_internal.h"
#include "common/fileio_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#define SP_DS_MAX_HASH_THREADS 8   /* default: online CPUs, at most this */
#define SP_DS_THREADS_CAP 64       /* sp_dataset_limits.hash_threads at most */

typedef struct hash_job {
    sp_dataset *ds;
    const uint64_t *todo;      /* sample indices to hash, ascending */
    uint64_t ntodo;
    sp__ds_rec *recs;                 /* filled with the fstat of the file hashed */
    uint64_t next;             /* guarded by lock */
    pthread_mutex_t lock;
    uint64_t err_at;           /* smallest todo position that failed (ntodo: none) */
    int err_rc;
    sp_error err;
    sp__ds_checker check;      /* NULL: hash only */
    sp__ds_aux *aux;           /* n: the checker's tables */
} hash_job;

/* Checking on: read the file whole, hash it and give its bytes to the
 * checker; the verdict goes to ds->verdicts[i], its table to j->aux[i]
 * (dropped when longer than SP_DS_AUX_MAX). */
static int hash_check(hash_job *j, int fd, const char *full, uint64_t i, sp_error *err) {
    sp_dataset *ds = j->ds;
    sp__buf buf = {NULL, 0};
    size_t got = 0;
    int rc = sp__read_fd(fd, full, ds->max_file_bytes, j->recs[i].size, &buf, &got, err);
    if (rc == SP_OK) {
        XXH128_hash_t h = XXH3_128bits(buf.p, got);
        ds->sizes[i] = got;
        ds->hashes[i] = (sp_digest){h.high64, h.low64};
        uint8_t *aux = NULL;
        size_t alen = 0;
        int clean = j->check(buf.p, got, &aux, &alen);
        ds->verdicts[i] = (uint8_t)(SP_DS_CHECKED | (clean ? SP_DS_CLEAN : 0));
        if (clean && aux && alen <= SP_DS_AUX_MAX) {
            j->aux[i] = (sp__ds_aux){aux, alen, 1};
            aux = NULL;
        }
        free(aux);
    }
    sp__buf_free(&buf);
    return rc;
}

static int hash_one(hash_job *j, uint64_t i, sp_error *err) {
    sp_dataset *ds = j->ds;
    char *full = sp__ds_join(ds->base, ds->pool + ds->path_off[i]);
    if (!full) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    int rc;
    int fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO must not block */
    struct stat st;
    if (fd < 0) {
        rc = sp_error_set(err, SP_EIO, "%s: %s", full, strerror(errno));
    } else if (fstat(fd, &st) != 0) {
        rc = sp_error_set(err, SP_EIO, "%s: %s", full, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = sp_error_set(err, SP_EFORMAT, "%s: not a regular file", full);
    } else if ((uint64_t)st.st_size > ds->max_file_bytes) {
        rc = sp_error_set(err, SP_ELIMIT, "%s: %llu bytes, more than the limit of %llu", full,
                          (unsigned long long)st.st_size, (unsigned long long)ds->max_file_bytes);
    } else {
        j->recs[i] = sp__ds_rec_of(&st);
        rc = j->check ? hash_check(j, fd, full, i, err)
                      : sp__ds_hash_fd(fd, full, ds->max_file_bytes, &ds->sizes[i],
                                       &ds->hashes[i], err);
    }
    if (fd >= 0) close(fd);
    free(full);
    return rc;
}

static void *hash_worker(void *arg) {
    hash_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        uint64_t k = j->next++;
        int stop = k >= j->ntodo || k > j->err_at;
        pthread_mutex_unlock(&j->lock);
        if (stop) return NULL;
        sp_error e;
        int rc = hash_one(j, j->todo[k], &e);
        if (rc) {
            pthread_mutex_lock(&j->lock);
            if (k < j->err_at) {   /* report the first failing file in canonical order */
                j->err_at = k;
                j->err_rc = rc;
                j->err = e;
            }
            pthread_mutex_unlock(&j->lock);
        }
    }
}

static int hash_threads(const sp_dataset *ds, uint64_t ntodo) {
    int t = ds->hash_threads;
    if (t <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        t = cpus > SP_DS_MAX_HASH_THREADS ? SP_DS_MAX_HASH_THREADS : cpus < 1 ? 1 : (int)cpus;
    }
    if (t > SP_DS_THREADS_CAP) t = SP_DS_THREADS_CAP;
    if ((uint64_t)t > ntodo) t = ntodo ? (int)ntodo : 1;
    return t;
}

int sp__ds_hash_all(sp_dataset *ds, const uint64_t *todo, uint64_t ntodo, sp__ds_rec *recs,
                    sp__ds_checker check, sp__ds_aux *aux, uint64_t *failed, sp_error *err) {
    hash_job j = {ds, todo, ntodo, recs, 0, PTHREAD_MUTEX_INITIALIZER, ntodo, 0, {0, ""}, check,
                  aux};
    int nt = hash_threads(ds, ntodo);
    pthread_t tid[SP_DS_THREADS_CAP];
    int started = 0;
    for (; started < nt - 1; started++)   /* fewer threads if the system refuses more */
        if (pthread_create(&tid[started], NULL, hash_worker, &j) != 0) break;
    hash_worker(&j);   /* the caller is a worker too */
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&j.lock);
    if (j.err_at < ntodo) {
        if (err) *err = j.err;
        *failed = todo[j.err_at];
        return j.err_rc;
    }
    return SP_OK;
}
