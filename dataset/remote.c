/* remote.c - requests to remote objects through libcurl: byte ranges, whole
 * objects and uploads, many at once, each retried on its own
 * (remote_internal.h). The only file of the library that calls libcurl.
 *
 * HOW IT WORKS
 * Every request is a transfer (xfer) on the calling thread's libcurl multi
 * handle, on the thread's list of active transfers; whenever the thread is
 * in this file (a fetch, a prefetch, a take) pump() starts waiting ones
 * (at most MAX_INFLIGHT in flight), lets libcurl move bytes, and
 * classifies each finished one:
 *   - done: 206 with the asked range (or 200 with the whole object), the
 *     object's size (Content-Range's total) equal to the indexed one;
 *   - transient: no connection, a reset, a timeout, a body cut short, HTTP
 *     408, 429 or 5xx (S3's 503 SlowDown): tried again after a backoff of
 *     min(2 s, 50 ms * 2^attempt) scaled by a jitter in [0.5, 1), while
 *     the attempts last (SEEDPIPE_REMOTE_RETRIES, default 10) and the
 *     retry would start within SEEDPIPE_REMOTE_RETRY_TIME (default 8 s)
 *     of the first try (or of the last try that received 1 MiB); except a
 *     refused connection to a store that has never answered (the first
 *     request of an open: a wrong port, a server that is down), which
 *     fails after SP__RIO_FIRST_TRIES tries (about 0.1 s) naming the
 *     address, while one that answered before (a server restarting) is
 *     retried as any transient failure;
 *   - permanent: 403, 404, any other status (its body read up to
 *     ERROR_BODY_MAX, for S3's code, and no further), a host that does not
 *     resolve, a body over its bound (a range's length, a whole object's
 *     max: refused when the Content-Length says so, before the body, else
 *     when the body reaches it; a whole object with no bound of the
 *     caller's is bounded by its Content-Length and refused without
 *     one); and an object whose size is not the
 *     indexed one (or a 416: the range lies past its end), which is
 *     SP_EMISMATCH, "changed since the dataset was indexed".
 * Each try is bounded in time: SEEDPIPE_REMOTE_TIMEOUT in all (default
 * 300 s), and cut, as a timeout, when it moves fewer than
 * SEEDPIPE_REMOTE_LOW_SPEED bytes a second (1024) for
 * SEEDPIPE_REMOTE_LOW_SPEED_TIME seconds (4): a stalled or dripping
 * server fails a request in about 8 s (two tries).
 * Messages name the object (s3://bucket/key or the http URL), the HTTP
 * status and S3's error code, never a credential; the object's name and the
 * server's code and message are escaped (common/escape_internal.h). The
 * jitter comes from a per-thread generator seeded by the process id: it
 * decides when, never which bytes.
 *
 * Handles: each thread of each process has its own multi handle and a few
 * easy handles, reused so connections are kept alive; they are found
 * through a pthread key and freed when the thread ends. A process that
 * finds handles of another pid (a forked worker) leaves them alone: the
 * connections are its parent's, and closing them (a TLS close_notify)
 * would disturb the parent.
 */
#include "dataset/remote_xfer_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#define BACKOFF_BASE_MS 50
#define BACKOFF_CAP_MS 2000
#define CONNECT_TIMEOUT_MS 10000L
#define MAX_EASY 64                  /* easy handles kept per thread */
#define MAX_INFLIGHT 64              /* transfers in flight per thread */
#define PF_SLOTS 256                 /* prefetched samples remembered per thread */

static _Atomic uint64_t n_requests;

uint64_t sp__rio_requests(void) { return atomic_load(&n_requests); }

/* ---- per-thread handles ------------------------------------------------------------ */

struct xfer;

/* A prefetched sample: bytes [off, off + len) of transfer x, filed under
 * (owner, key). */
typedef struct pf_entry {
    uint64_t owner, key, off, len;
    struct xfer *x;
} pf_entry;

typedef struct tl_state {
    pid_t pid;
    CURLM *multi;
    CURL *easy[MAX_EASY];
    int neasy;
    uint64_t rng;
    struct xfer *active;     /* started, not yet collected (a list) */
    int inflight;
    pf_entry pf[PF_SLOTS];   /* a ring: a new entry evicts the oldest */
    uint32_t pf_next;
    uint64_t pf_bytes;       /* the ranges of prefetch transfers not yet freed */
} tl_state;

static void tl_drop_all(tl_state *s);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t tl_key;
static int global_ok;

static void tl_free(void *p) {
    tl_state *s = p;
    if (!s) return;
    if (s->pid == getpid()) {
        tl_drop_all(s);
        for (int i = 0; i < s->neasy; i++) curl_easy_cleanup(s->easy[i]);
        if (s->multi) curl_multi_cleanup(s->multi);
    }
    free(s);
}

static void init_once(void) {
    global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK &&
                pthread_key_create(&tl_key, tl_free) == 0;
}

static tl_state *tl_get(sp_error *err) {
    pthread_once(&once, init_once);
    if (!global_ok) {
        sp_error_set(err, SP_EIO, "libcurl: initialisation failed");
        return NULL;
    }
    tl_state *s = pthread_getspecific(tl_key);
    if (s && s->pid == getpid()) return s;
    /* none yet, or a forked child's copy of its parent's: a new one (the
     * parent's is not ours to free) */
    s = calloc(1, sizeof *s);
    if (s) s->multi = curl_multi_init();
    if (!s || !s->multi || pthread_setspecific(tl_key, s) != 0) {
        if (s && s->multi) curl_multi_cleanup(s->multi);
        free(s);
        sp_error_set(err, SP_ENOMEM, "libcurl: out of memory");
        return NULL;
    }
    s->pid = getpid();
    s->rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)s->pid;
    return s;
}

static CURL *easy_take(tl_state *s) {
    if (s->neasy) {
        CURL *h = s->easy[--s->neasy];
        curl_easy_reset(h);
        return h;
    }
    return curl_easy_init();
}

static void easy_give(tl_state *s, CURL *h) {
    if (s->neasy < MAX_EASY) s->easy[s->neasy++] = h;
    else curl_easy_cleanup(h);
}

/* splitmix64: the jitter (never a byte of data) */
static double jitter(tl_state *s) {
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return 0.5 + 0.5 * (double)(z >> 11) / 9007199254740992.0;
}

static uint64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* ---- one transfer ---------------------------------------------------------------- */


static size_t on_body(char *p, size_t sz, size_t nm, void *ud) {
    xfer *x = ud;
    size_t n = sz * nm;
    long st = 0;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &st);
    int error_body = st >= 300;   /* kept (its first bytes) for S3's error code only */
    if (error_body) {
        if (x->len >= ERROR_BODY_MAX) {   /* enough for its code: the rest is not read */
            x->error_cut = 1;
            return 0;
        }
        if (n > ERROR_BODY_MAX - x->len) n = ERROR_BODY_MAX - x->len;
    } else if ((uint64_t)x->len + n > x->cap) {
        x->too_big = 1;
        return 0;
    } else if (x->cap == UINT64_MAX && x->declared < 0) {
        /* no bound of ours (a shard read whole by `seedpipe index URL`): the
         * server's Content-Length is the bound, and one that declares none
         * could send forever into the temporary file */
        x->no_length = 1;
        return 0;
    }
    if (x->fd >= 0 && !error_body) {
        if (sp__write_full(x->fd, p, n) != 0) {
            x->werr = errno ? errno : EIO;
            return 0;
        }
        x->len += n;
        return n;
    }
    if (x->len + n + 1 > x->body.cap) {
        /* doubled, but not past the bound (+1) where what is needed fits in
         * it: a body refused at 128 MiB never asked for 256 (an error body,
         * up to ERROR_BODY_MAX, may need more than a short range's bound) */
        size_t need = x->len + n + 1;
        size_t want = need > 2 * x->body.cap ? need : 2 * x->body.cap;
        if (x->cap < (uint64_t)SIZE_MAX && want > x->cap + 1)
            want = need > x->cap + 1 ? need : (size_t)x->cap + 1;
        if (sp__buf_reserve(&x->body, want) != 0) return 0;
    }
    memcpy(x->body.p + x->len, p, n);
    x->len += n;
    return sz * nm;
}

/* Configure x->h for the request (after a retry, from scratch). */
static int xfer_setup(const sp__rio *r, xfer *x) {
    CURL *h = x->h;
    sp__rio_get *g = x->g;
    x->len = 0;
    x->too_big = 0;
    x->werr = 0;
    x->error_cut = 0;
    x->no_length = 0;
    x->have_total = 0;
    x->declared = -1;
    x->up_pos = 0;
    x->errbuf[0] = '\0';
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
    if (x->fd >= 0 && (ftruncate(x->fd, 0) != 0 || lseek(x->fd, 0, SEEK_SET) != 0)) return -1;
    curl_easy_setopt(h, CURLOPT_URL, x->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     r->timeout_ms < CONNECT_TIMEOUT_MS ? r->timeout_ms : CONNECT_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, r->timeout_ms);       /* the try, whole */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, r->low_speed);   /* a drip cannot pass */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, r->low_speed_s);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sp__rio_on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_PRIVATE, x);
    const char *ca = getenv("SEEDPIPE_CA_BUNDLE");
    if (!ca || !ca[0]) ca = getenv("AWS_CA_BUNDLE");
    if (ca && ca[0]) curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    sp__rio_auth a = {0};   /* what the protocol adds (remote_internal.h) */
    if (r->proto->auth) r->proto->auth(r, &a);
    if (a.follow_redirects) {
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
        curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    }
    if (strcmp(x->method, "PUT") == 0) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, sp__rio_on_upload);
        curl_easy_setopt(h, CURLOPT_READDATA, x);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->up_len);
        /* no "Expect:" to turn off 100-continue: libcurl 7.88 signs the empty
         * header it does not send (SignatureDoesNotMatch) */
    } else if (g->len) {
        char range[80];
        /* (the body is bounded by the range: on_body) */
        snprintf(range, sizeof range, "Range: bytes=%llu-%llu", (unsigned long long)g->off,
                 (unsigned long long)(g->off + g->len - 1));
        x->hdrs = curl_slist_append(x->hdrs, range);
    }
    if (a.sigv4) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_AWS_SIGV4);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, a.sigv4);
        curl_easy_setopt(h, CURLOPT_USERNAME, a.user);
        curl_easy_setopt(h, CURLOPT_PASSWORD, a.password);
    }
    for (size_t i = 0; i < sizeof a.headers / sizeof a.headers[0] && a.headers[i]; i++)
        x->hdrs = curl_slist_append(x->hdrs, a.headers[i]);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->hdrs);
    x->cap = g->len ? g->len : g->max;
    if (!g->len && strcmp(x->method, "GET") == 0 && x->cap < (uint64_t)INT64_MAX)
        /* a whole object declared larger than its bound fails before its body */
        curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x->cap);
    if (x->fd < 0 && sp__buf_reserve(&x->body, (size_t)(g->len ? g->len + 1 : 65536)) != 0)
        return -1;
    return 0;
}

static void xfer_release(tl_state *s, xfer *x) {
    if (x->h) {
        curl_multi_remove_handle(s->multi, x->h);
        easy_give(s, x->h);
        x->h = NULL;
        if (x->state == 1) s->inflight--;
    }
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
}

static void xfer_finish(xfer *x, int rc, const char *msg) {
    x->g->rc = rc;
    if (msg) snprintf(x->g->msg, sizeof x->g->msg, "%s", msg);
    x->state = 2;
}

/* Start the waiting transfers whose backoff is over (up to MAX_INFLIGHT);
 * *wake: the earliest backoff still running. */
static void start_ready(tl_state *s, uint64_t t, uint64_t *wake) {
    for (xfer *x = s->active; x && s->inflight < MAX_INFLIGHT; x = x->next) {
        if (x->state != 0) continue;
        if (x->not_before > t) {
            if (x->not_before < *wake) *wake = x->not_before;
            continue;
        }
        x->h = easy_take(s);
        if (!x->h || xfer_setup(x->r, x) != 0 ||
            curl_multi_add_handle(s->multi, x->h) != CURLM_OK) {
            xfer_release(s, x);
            char m[SP_ERROR_MSG_MAX];
            snprintf(m, sizeof m, "%s: out of memory", x->display);
            xfer_finish(x, SP_ENOMEM, m);
            continue;
        }
        atomic_fetch_add(&n_requests, 1);
        if (x->attempt == 0) x->window = t;
        x->state = 1;
        s->inflight++;
    }
}

/* One round: start what can start, let libcurl work, judge what ended
 * (retry after a backoff, or finish), then wait for activity at most
 * max_ms unless something finished. */
static void pump(tl_state *s, int max_ms) {
    uint64_t t = now_ms(), wake = t + (uint64_t)max_ms;
    start_ready(s, t, &wake);
    int running = 0, finished = 0;
    curl_multi_perform(s->multi, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(s->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE) continue;
        xfer *x = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        CURLcode res = m->data.result;
        long st = 0;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &st);
        int verdict = sp__rio_judge(x, res, st, curl_easy_strerror(res));
        xfer_release(s, x);
        finished++;
        uint64_t now = now_ms(), at = now;
        if (verdict == X_RETRY) {
            uint64_t d = (uint64_t)BACKOFF_BASE_MS << (x->attempt < 16 ? x->attempt : 16);
            if (d > BACKOFF_CAP_MS) d = BACKOFF_CAP_MS;
            at = now + (uint64_t)((double)d * jitter(s));
            if (x->len >= SP__RIO_PROGRESS) x->window = now;   /* it was moving: a new window */
        }
        int in_window = at - x->window <= x->r->retry_ms;
        if (verdict == X_RETRY && x->attempt < x->r->retries && in_window) {
            x->attempt++;
            x->not_before = at;
            x->state = 0;
            continue;
        }
        if (verdict == X_RETRY) {
            size_t l = strlen(x->g->msg);
            if (in_window)
                snprintf(x->g->msg + l, sizeof x->g->msg - l, " (gave up after %d tries)",
                         x->attempt + 1);
            else
                snprintf(x->g->msg + l, sizeof x->g->msg - l, " (gave up after %d tries in "
                         "%.1f s: no retry starts more than SEEDPIPE_REMOTE_RETRY_TIME=%llu s "
                         "after the first try)", x->attempt + 1,
                         (double)(now - x->window) / 1000.0,
                         (unsigned long long)(x->r->retry_ms / 1000));
        }
        if (verdict == X_DONE) x->g->rc = SP_OK;
        x->state = 2;
    }
    if (finished || max_ms <= 0) return;
    t = now_ms();
    int ms = wake > t ? (int)(wake - t) : 0;
    if (ms > max_ms) ms = max_ms;
    if (s->inflight) {
        curl_multi_poll(s->multi, NULL, 0, ms, NULL);
    } else if (ms > 0) {
        struct timespec ts = {0, (long)ms * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void wait_for(tl_state *s, xfer *x) {
    while (x->state != 2) pump(s, 50);
}

static void push_active(tl_state *s, xfer *x) {
    x->next = s->active;
    s->active = x;
}

static void unlink_active(tl_state *s, xfer *x) {
    for (xfer **p = &s->active; *p; p = &(*p)->next)
        if (*p == x) {
            *p = x->next;
            break;
        }
    x->next = NULL;
}

/* x zeroed by the caller (but for own and name_copy). */
static int xfer_init(const sp__rio *r, xfer *x, sp__rio_get *g, const char *method, int fd) {
    x->r = r;
    x->g = g;
    x->method = method;
    x->fd = fd;
    g->rc = SP_OK;
    g->msg[0] = '\0';
    g->status = 0;
    g->total = 0;
    g->got = 0;
    g->buf = NULL;
    x->url = sp__rio_request_url(r, g->name);
    char *shown = sp__rio_display(r, g->name);   /* names come from the index: escaped */
    x->display = shown ? sp__escape_dup(shown, strlen(shown)) : NULL;
    free(shown);
    if (!x->url || !x->display) {
        g->rc = SP_ENOMEM;
        snprintf(g->msg, sizeof g->msg, "%s: out of memory", g->name);
        x->state = 2;
        return -1;
    }
    return 0;
}

/* The body to g (rc OK, memory sink), the transfer's memory freed. */
static void xfer_done(tl_state *s, xfer *x) {
    xfer_release(s, x);
    sp__rio_get *g = x->g;
    if (g->rc == SP_OK && x->fd < 0) {
        g->buf = x->body.p;
        x->body.p = NULL;
    }
    g->got = x->len;
    sp__buf_free(&x->body);
    free(x->url);
    free(x->display);
    free(x->name_copy);
}

size_t sp__rio_fetch_many(const sp__rio *r, sp__rio_get *g, size_t n) {
    sp_error e;
    sp_error_clear(&e);
    tl_state *s = tl_get(&e);
    xfer *xs = s ? calloc(n ? n : 1, sizeof *xs) : NULL;
    if (!xs) {
        for (size_t i = 0; i < n; i++) {
            g[i].rc = s ? SP_ENOMEM : e.code;
            snprintf(g[i].msg, sizeof g[i].msg, "%s", s ? "out of memory" : e.msg);
            g[i].buf = NULL;
        }
        return n;
    }
    for (size_t i = 0; i < n; i++)
        if (xfer_init(r, &xs[i], &g[i], "GET", -1) == 0) push_active(s, &xs[i]);
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) {
        wait_for(s, &xs[i]);
        unlink_active(s, &xs[i]);
        xfer_done(s, &xs[i]);
        failed += g[i].rc != SP_OK;
    }
    free(xs);
    return failed;
}

int sp__rio_fetch(const sp__rio *r, sp__rio_get *g, sp_error *err) {
    sp__rio_fetch_many(r, g, 1);
    if (g->rc != SP_OK) sp_error_set(err, g->rc, "%s", g->msg);
    return g->rc;
}

/* One transfer with a private request: a whole object into fd, or a PUT. */
static int one(const sp__rio *r, const char *name, const char *method, int fd,
               const void *data, size_t n, uint64_t max, uint64_t *size, sp_error *err) {
    tl_state *s = tl_get(err);
    if (!s) return err->code;
    sp__rio_get g;
    memset(&g, 0, sizeof g);
    g.name = name;
    g.max = max;
    xfer x;
    memset(&x, 0, sizeof x);
    if (xfer_init(r, &x, &g, method, fd) == 0) {
        x.up = data;
        x.up_len = n;
        push_active(s, &x);
        wait_for(s, &x);
        unlink_active(s, &x);
    }
    if (size) *size = x.len;
    int werr = x.werr;
    xfer_done(s, &x);
    free(g.buf);
    if (g.rc != SP_OK) sp_error_set(err, g.rc, "%s", g.msg);
    errno = g.rc != SP_OK ? werr : 0;   /* sp__rio_fetch_fd's caller tells its disk from the store */
    return g.rc;
}

int sp__rio_fetch_fd(const sp__rio *r, const char *name, int fd, uint64_t max, uint64_t *size,
                     sp_error *err) {
    return one(r, name, "GET", fd, NULL, 0, max, size, err);
}

int sp__rio_put(const sp__rio *r, const char *name, const void *data, size_t n, sp_error *err) {
    return one(r, name, "PUT", -1, data, n, ERROR_BODY_MAX, NULL, err);
}

/* ---- prefetch -------------------------------------------------------------------------- */

static _Atomic uint64_t next_owner = 1;

uint64_t sp__rio_owner_id(void) { return atomic_fetch_add(&next_owner, 1); }

/* A prefetch transfer nobody points at any more: stopped and freed. */
static void pf_unref(tl_state *s, xfer *x) {
    if (--x->refs > 0) return;
    s->pf_bytes -= x->own.len;
    unlink_active(s, x);
    xfer_done(s, x);
    free(x->g->buf);
    free(x);
}

static void pf_clear(tl_state *s, pf_entry *e) {
    if (!e->x) return;
    xfer *x = e->x;
    e->x = NULL;
    pf_unref(s, x);
}

static void tl_drop_all(tl_state *s) {
    for (int i = 0; i < PF_SLOTS; i++) pf_clear(s, &s->pf[i]);
    s->active = NULL;   /* only fetch calls' own transfers could be left: none between calls */
}

int sp__rio_prefetch(const sp__rio *r, uint64_t owner, const sp__rio_get *req,
                     const uint64_t *keys, const uint64_t *offs, const uint64_t *lens, size_t n) {
    sp_error e;
    sp_error_clear(&e);
    tl_state *s = tl_get(&e);
    if (!s || n == 0 || n > PF_SLOTS) return -1;
    if (req->len > r->prefetch_max || s->pf_bytes > r->prefetch_max - req->len)
        return -1;   /* over the read-ahead budget: read when needed instead */
    xfer *x = calloc(1, sizeof *x);
    if (!x) return -1;
    x->own = *req;
    x->own.name = x->name_copy = strdup(req->name);
    if (!x->name_copy || xfer_init(r, x, &x->own, "GET", -1) != 0) {
        free(x->url);
        free(x->display);
        free(x->name_copy);
        free(x);
        return -1;
    }
    push_active(s, x);
    x->refs = (int)n;
    s->pf_bytes += x->own.len;
    for (size_t k = 0; k < n; k++) {
        pf_entry *en = &s->pf[s->pf_next++ % PF_SLOTS];
        pf_clear(s, en);   /* the oldest goes */
        en->owner = owner;
        en->key = keys[k];
        en->off = offs[k];
        en->len = lens[k];
        en->x = x;
    }
    pump(s, 0);   /* send what can be sent now */
    return 0;
}

int sp__rio_prefetched(uint64_t owner, uint64_t key) {
    tl_state *s = pthread_getspecific(tl_key);
    if (!s || s->pid != getpid()) return 0;
    for (int i = 0; i < PF_SLOTS; i++)
        if (s->pf[i].x && s->pf[i].owner == owner && s->pf[i].key == key) return 1;
    return 0;
}

int sp__rio_take(uint64_t owner, uint64_t key, sp__rio_get *g) {
    pthread_once(&once, init_once);
    tl_state *s = global_ok ? pthread_getspecific(tl_key) : NULL;
    if (!s || s->pid != getpid()) return 0;
    pf_entry *en = NULL;
    for (int i = 0; i < PF_SLOTS && !en; i++)
        if (s->pf[i].x && s->pf[i].owner == owner && s->pf[i].key == key) en = &s->pf[i];
    if (!en) return 0;
    xfer *x = en->x;
    wait_for(s, x);
    g->rc = x->g->rc;
    g->status = x->g->status;
    g->total = x->g->total;
    g->buf = NULL;
    g->got = 0;
    snprintf(g->msg, sizeof g->msg, "%s", x->g->msg);
    if (g->rc == SP_OK) {
        if (en->off + en->len > x->len) {
            g->rc = SP_EIO;
            snprintf(g->msg, sizeof g->msg, "%s: short response", x->display);
        } else if (x->refs == 1 && en->off == 0 && en->len == x->len) {
            g->buf = x->body.p;   /* the whole body is this sample's */
            x->body.p = NULL;
            x->body.cap = 0;
            g->got = (size_t)en->len;
        } else if ((g->buf = malloc(en->len ? (size_t)en->len : 1)) != NULL) {
            memcpy(g->buf, x->body.p + en->off, (size_t)en->len);
            g->got = (size_t)en->len;
        } else {
            g->rc = SP_ENOMEM;
            snprintf(g->msg, sizeof g->msg, "%s: out of memory", x->display);
        }
    }
    en->x = NULL;
    pf_unref(s, x);
    return 1;
}

void sp__rio_forget(const sp__rio *r) {
    tl_state *s = global_ok ? pthread_getspecific(tl_key) : NULL;
    if (!s || s->pid != getpid()) return;
    for (int i = 0; i < PF_SLOTS; i++)
        if (s->pf[i].x && s->pf[i].x->r == r) pf_clear(s, &s->pf[i]);
}
