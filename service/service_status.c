/* service_status.c - a service's region seen from outside: the staleness
 * check before a service creates its region, and `seedpipe status`
 * (sp_service_status_read(), include/seedpipe/service.h).
 *
 * Staleness. Before creation (sp__service_stale_check(), from
 * sp_service_create()): a live owner (pid alive with the recorded start
 * time, header says running) is refused; a dead owner, a not-running
 * header, or a zero header older than 2 s (a service killed while creating
 * it) is unlinked and reported.
 *
 * Status. A read-only look at a region: only this user's, mode 0600; its
 * header is copied and checked by region.c (sp__service_validate(), which
 * the client's attach uses too) before any field of it is believed.
 *
 * Calls down into region.c and the ring's layout (pool/ring_layout.h);
 * called by service.c and the public API only.
 */
#include "seedpipe/service.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "service/region_internal.h"
#include "common/escape_internal.h"

/* ---- staleness ------------------------------------------------------------------ */

static int all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* Look at an existing "/name": 0 if absent or removed as stale (note set),
 * SP_EIO if live or not ours to remove. */
int sp__service_stale_check(const char *name, char *note, size_t note_size, sp_error *err) {
    char path[256];
    snprintf(path, sizeof path, "/%s", name);
    struct stat st;
    sp_error e;
    int fd = sp__region_open(path, O_RDONLY, &st, &e);   /* never blocks; a regular file */
    if (fd < 0) {
        if (errno == ENOENT) return SP_OK;
        if (err) *err = e;
        return SP_EIO;
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        return sp_error_set(err, SP_EIO, "region %s exists and belongs to uid %u", name,
                            (unsigned)st.st_uid);
    }
    time_t age = time(NULL) - st.st_mtime;
    sp__ring_hdr *h = NULL;
    size_t hsz = sizeof *h;
    if (st.st_size >= (off_t)hsz) {
        void *p = mmap(NULL, hsz, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) h = p;
    }
    close(fd);
    char why[200];
    int stale = 0;
    if (!h) {
        stale = st.st_size == 0 && age >= 2;
        snprintf(why, sizeof why, "empty");
    } else if (h->magic == SP__RING_MAGIC) {
        /* owner_pid sits at the same offset in every layout version; the
         * service block (start time, running) only in this one, so a live
         * owner of another version counts as running. */
        int pid = h->owner_pid, ours = h->version == SP__RING_VERSION;
        int alive = sp__proc_alive(pid, ours ? h->owner_start : 0);
        int running = !ours || atomic_load(&((sp__ring_hdr *)h)->svc_running) != 0;
        if (alive && running) {
            munmap(h, hsz);
            return sp_error_set(err, SP_EIO,
                                "region %s is served by pid %d (running); stop it or choose "
                                "another --name",
                                name, pid);
        }
        if (alive && age < 2) {
            munmap(h, hsz);
            return sp_error_set(err, SP_EIO,
                                "region %s is being created or shut down by pid %d; try again",
                                name, pid);
        }
        stale = 1;
        if (!alive) snprintf(why, sizeof why, "service pid %d is gone", pid);
        else snprintf(why, sizeof why, "pid %d's header says not running", pid);
    } else if (all_zero((const uint8_t *)h, hsz)) {
        stale = age >= 2;
        snprintf(why, sizeof why, "zero header, left by a service killed while creating it");
    }
    if (h) munmap(h, hsz);
    if (!stale)
        return sp_error_set(err, SP_EIO,
                            "region %s exists and is not a (stale) seedpipe region; remove "
                            "/dev/shm/%s if nothing uses it",
                            name, name);
    if (shm_unlink(path) != 0 && errno != ENOENT)
        return sp_error_set(err, SP_EIO, "region %s: stale, but shm_unlink: %s", name,
                            strerror(errno));
    snprintf(note, note_size, "removed stale region %s (%s)", name, why);
    return SP_OK;
}

/* ---- status ------------------------------------------------------------------------- */

/* Strings from the region are escaped by the one rule for strings from
 * outside (common/escape_internal.h). */

/* The slots, the workers and the ranks of a header copy, for `status`. */
static void status_procs(sp_service_status *out, const sp__ring_hdr *h) {
    uint64_t ready = out->published >= out->recycled ? out->published - out->recycled : 0;
    if (ready > h->nslots) ready = h->nslots;
    uint64_t left = out->total > out->published ? out->total - out->published : 0;
    uint64_t room = h->nslots - ready;
    out->slots_ready = (uint32_t)ready;
    out->slots_computing = (uint32_t)(left < room ? left : room);
    for (uint32_t w = 0; w < h->nworkers && w < SP_POOL_MAX_WORKERS; w++) {
        int pid = h->workers[w].pid;
        out->workers[w].pid = pid;
        out->workers[w].alive = sp__proc_alive(pid, 0);
        out->workers[w].busy = h->workers[w].busy != 0;
        out->workers[w].respawns = h->workers[w].gen ? h->workers[w].gen - 1 : 0;
        out->workers[w].samples = h->workers[w].samples;
    }
    for (uint32_t k = 0; k < h->nranks; k++) {
        out->ranks[k].pid = h->ranks[k].pid;
        out->ranks[k].state = (int)h->ranks[k].state;
        out->ranks[k].attaches = h->ranks[k].attaches;
        out->ranks[k].deaths = h->ranks[k].deaths;
        out->ranks[k].next = h->ranks[k].cursor;
        out->ranks[k].released = h->ranks[k].released;
    }
}

int sp_service_status_read(const char *name, sp_service_status *out, sp_error *err) {
    memset(out, 0, sizeof *out);
    sp__region r;
    struct stat st;
    int rc = sp__region_attach(&r, name, 1, &st, err);
    if (rc != 0) return rc;
    /* Another user's region, or one others may write, is not read: its
     * strings and counts could say anything (clients check the same). */
    if (st.st_uid != geteuid() || (st.st_mode & 077)) {
        sp__region_close(&r);
        return st.st_uid != geteuid()
                   ? sp_error_set(err, SP_EIO, "region %s: owned by uid %u, not by this user: "
                                  "not read", name, (unsigned)st.st_uid)
                   : sp_error_set(err, SP_EIO, "region %s: mode %04o, expected 0600: not read",
                                  name, (unsigned)(st.st_mode & 0777));
    }
    sp__ring_hdr *h = malloc(sizeof *h);
    if (!h) {
        sp__region_close(&r);
        return sp_error_set(err, SP_ENOMEM, "status: out of memory");
    }
    memcpy(h, r.base, sizeof *h);
    size_t mapped = r.size;
    sp__region_close(&r);
    sp_loader_state st0;
    sp_error e;
    sp_error_clear(&e);
    rc = sp__service_validate(h, mapped, &st0, &e);
    if (rc != 0) {
        free(h);
        return sp_error_set(err, rc, "region %s: %s", name, e.msg);
    }
    out->pid = h->owner_pid;
    out->alive = sp__proc_alive(h->owner_pid, h->owner_start);
    out->running = h->svc_running != 0;
    out->ended = h->svc_end != 0;
    out->world = h->world;
    out->rank_first = h->rank_first;
    out->nranks = h->nranks;
    out->ring_slots = h->nslots;
    out->nworkers = h->nworkers;
    out->epochs = h->epochs;
    out->batches_per_epoch = h->batches_per_epoch;
    out->start_abs = h->start_abs;
    out->total = h->total;
    out->published = h->published;
    out->recycled = h->pool_released;
    out->samples = h->samples_published;
    uint64_t end = out->ended && h->last_pub_ns ? h->last_pub_ns : sp__now_ns();
    out->seconds = end > h->started_ns ? (double)(end - h->started_ns) / 1e9 : 0.0;
    out->worker_deaths = h->deaths;
    out->client_deaths = h->client_deaths;
    out->err_code = h->svc_err_code;
    sp__escape_copy(out->err_msg, sizeof out->err_msg, h->svc_err_msg, sizeof h->svc_err_msg);
    sp__escape_copy(out->dataset, sizeof out->dataset, h->dataset, sizeof h->dataset);
    sp_digest_hex(st0.fingerprint, out->fingerprint);
    out->seed = st0.seed;
    status_procs(out, h);
    free(h);
    return SP_OK;
}
