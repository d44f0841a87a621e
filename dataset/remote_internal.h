/* remote_internal.h - objects in S3-compatible stores and on HTTP(S) servers:
 * where they are (remote_config.c) and how they are read (remote.c, the
 * one file of the library that calls libcurl).
 *
 * A store is named by a URL: `s3://BUCKET/PREFIX/LEAF` or
 * `http(s)://HOST[:PORT]/PATH/LEAF`. sp__rio_create() splits it into the
 * store (an sp__rio: the folder the URL's last component sits in) and the
 * leaf (a shard, a brace pattern of shards, or "" for the folder itself);
 * objects are then named relative to that folder.
 *
 * S3: the endpoint is AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else the
 * profile's endpoint_url, else AWS (https://s3.REGION.amazonaws.com); the
 * region AWS_REGION, AWS_DEFAULT_REGION, the profile's region, or
 * us-east-1; credentials AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
 * AWS_SESSION_TOKEN), else the profile (AWS_PROFILE, else "default") of
 * the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
 * ~/.aws/credentials) and config file (AWS_CONFIG_FILE, else
 * ~/.aws/config); none at all: unsigned (anonymous) requests. Addressing:
 * SEEDPIPE_S3_ADDRESSING=path|virtual, else the profile's
 * addressing_style, else virtual-hosted for AWS and path-style for another
 * endpoint. TLS trust: the system's, or the PEM file SEEDPIPE_CA_BUNDLE,
 * else AWS_CA_BUNDLE, names. Requests are signed by libcurl's own AWS SigV4
 * (CURLOPT_AWS_SIGV4, "aws:amz:REGION:s3").
 *
 * SECRETS: the secret key and the session token live in the sp__rio only;
 * no message, URL or string this module returns holds either (messages name
 * s3://BUCKET/KEY and the endpoint, never a key). A URL with user:password@
 * is refused (it would be printed and recorded).
 *
 * Reading: byte ranges (GET with Range), whole objects, PUT. Transient
 * failures (connection refused, reset or timed out, a cut body, 408, 429,
 * 5xx, S3's 503 SlowDown) are retried with capped jittered backoff
 * (SEEDPIPE_REMOTE_RETRIES, default 10, within SEEDPIPE_REMOTE_RETRY_TIME,
 * default 10 s); a permanent one (403, 404, ...) fails at once with the
 * object, the HTTP status and S3's error code. Every try has a deadline
 * (SEEDPIPE_REMOTE_TIMEOUT, default 300 s) and a low-speed rule
 * (SEEDPIPE_REMOTE_LOW_SPEED bytes a second over
 * SEEDPIPE_REMOTE_LOW_SPEED_TIME seconds, default 1024 over 4), so a stalled
 * or dripping server costs a request about 8 s; every body is bounded (a
 * range by its length, a whole object by its caller's max, which a larger
 * Content-Length fails at once).
 * Several requests run at once through sp__rio_fetch_many() (libcurl's
 * multi interface). Each thread of each process keeps its own libcurl
 * handles (a forked child never touches its parent's connections).
 *
 * Not installed, not part of the API: names are sp__rio_*.
 */
#ifndef SEEDPIPE_REMOTE_INTERNAL_H
#define SEEDPIPE_REMOTE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/fileio_internal.h"
#include "seedpipe/common.h"

/* ---- the store (remote_config.c) ------------------------------------------- */

struct sp__rio_proto;

typedef struct sp__rio {
    const struct sp__rio_proto *proto;   /* the URL's protocol (below) */
    void *state;         /* the protocol's own settings (remote_http.c, remote_s3.c) */
    char *display;       /* "s3://bucket/prefix" or "http://host/path": messages */
    int retries;             /* transient failures retried this many times */
    /* Deadlines and bounds (SEEDPIPE_REMOTE_*, remote_config.c; docs/remote.md):
     * a try ends by timeout_ms (CURLOPT_TIMEOUT_MS) and is cut when it moves
     * fewer than low_speed bytes a second for low_speed_s seconds; no retry
     * starts more than retry_ms after the request's first try began (or
     * after the start of the last try that received SP__RIO_PROGRESS
     * bytes); the index object is read whole up to index_max bytes. */
    long timeout_ms;
    long low_speed, low_speed_s;
    uint64_t retry_ms;
    uint64_t index_max;
    uint64_t prefetch_max;   /* bytes a thread's read-ahead may hold (SEEDPIPE_PREFETCH_BYTES) */
    /* 1 once any request to the store got an HTTP response (in this process
     * or, before a fork, its parent): a refused connection is then a server
     * restarting, retried as any transient failure; before, it is a wrong
     * address or a server that is down, tried SP__RIO_FIRST_TRIES times
     * only. The one field requests write (remote.c). */
    _Atomic int answered;
} sp__rio;

#define SP__RIO_FIRST_TRIES 3
#define SP__RIO_PROGRESS (UINT64_C(1) << 20)   /* a try that got this much restarts retry_ms */

/* Defaults of the deadlines and bounds above. */
#define SP__RIO_TIMEOUT_S 300
#define SP__RIO_LOW_SPEED 1024
#define SP__RIO_LOW_SPEED_S 4
#define SP__RIO_RETRY_S 8
#define SP__RIO_INDEX_MAX (UINT64_C(128) << 20)
#define SP__RIO_PREFETCH_MAX (UINT64_C(64) << 20)

/* ---- protocols ---------------------------------------------------------------
 * A protocol is one file ending in its `const sp__rio_proto sp__rio_proto_NAME`,
 * registered by one X(NAME) line in remote_config.c's table (the first whose
 * scheme starts a URL takes it). It keeps its settings behind r->state and
 * says what each request carries as data (sp__rio_auth): remote.c applies
 * that with libcurl, the one file that calls it. */

/* What a request carries beyond its URL, method and range. */
typedef struct sp__rio_auth {
    const char *sigv4;          /* libcurl's AWS SigV4 provider ("aws:amz:REGION:s3"),
                                 * signing with user / password; NULL: unsigned */
    const char *user, *password;
    const char *headers[3];     /* extra header lines, NULL-ended (owned by r->state) */
    int follow_redirects;       /* 1: follow up to 5 redirects (http, https only) */
} sp__rio_auth;

typedef struct sp__rio_proto {
    const char *name;           /* "s3", "http" */
    const char *schemes[3];     /* URL prefixes it takes ("s3://"), NULL-ended */
    const char *usage;          /* what a URL without a '/' after its host should be */
    /* fill r->state from `folder`, the URL up to its last '/' (its scheme
     * and host checked); r's deadlines and bounds are set. The error names
     * the URL or the setting at fault. */
    int (*configure)(sp__rio *r, const char *folder, sp_error *err);
    /* the URL a request for object `name` (relative to the folder) goes to,
     * percent-encoded (sp__rio_encode()); malloc'd, NULL on out of memory */
    char *(*request_url)(const sp__rio *r, const char *name);
    void (*auth)(const sp__rio *r, sp__rio_auth *a);   /* NULL: nothing to add */
    void (*destroy)(sp__rio *r);   /* frees r->state (secrets wiped) */
} sp__rio_proto;

/* 1 if s names a remote object (a scheme of the protocol table: "s3://",
 * "http://", "https://"). remote_config.c. */
int sp__rio_is_url(const char *s);

/* remote_url.c, for the protocols: "scheme://host[:port]" with no
 * user:password@ and only URL characters (what: the URL's name in the
 * message); s percent-encoded but for RFC 3986's unreserved bytes and '/'
 * into dst (NULL: only counted), its length returned; a non-empty
 * environment variable or NULL; free(s) after zeroing its bytes. */
int sp__rio_check_authority(const char *url, const char *what, sp_error *err);
size_t sp__rio_encode(char *dst, const char *s);
const char *sp__rio_env(const char *name);
void sp__rio_wipe_free(char *s);

/*! sp__rio_create() : the store of `url` and its leaf (the last path
 *  component, malloc'd; "" when the URL ends in '/'). Reads the S3
 *  configuration (above). @return 0, SP_EINVAL (a malformed URL or one with
 *  credentials in it, an unknown SEEDPIPE_S3_ADDRESSING, a named profile
 *  that is in no file), SP_EIO (an unreadable credentials file), SP_ENOMEM. */
int sp__rio_create(const char *url, sp__rio **out, char **leaf, sp_error *err);
void sp__rio_destroy(sp__rio *r);   /* accepts NULL */

/* Object `name` (relative to the store's folder): its display name
 * ("s3://b/p/name", "http://h/p/name") and the URL a request goes to,
 * percent-encoded. malloc'd; NULL when out of memory. */
char *sp__rio_display(const sp__rio *r, const char *name);
char *sp__rio_request_url(const sp__rio *r, const char *name);

/* ---- requests (remote.c) ----------------------------------------------------- */

/* One GET: object `name`, bytes [off, off + len) (len 0: the whole object,
 * at most max bytes). expect_total: the object's size as indexed (0: not
 * known); a response whose object has another size is SP_EMISMATCH ("the
 * object changed since the dataset was indexed"). The body lands in buf
 * (malloc'd, owned by the caller on success). */
typedef struct sp__rio_get {
    const char *name;
    uint64_t off, len, max, expect_total;
    uint8_t *buf;          /* out */
    size_t got;            /* out: bytes in buf */
    uint64_t total;        /* out: the object's size, when the server said it */
    long status;           /* out: the last HTTP status (0: none) */
    int rc;                /* out: 0 or the sp_status of this request */
    char msg[SP_ERROR_MSG_MAX];   /* out: the error when rc != 0 */
} sp__rio_get;

/*! sp__rio_fetch_many() : run the n GETs at once (at most 64 in flight a
 *  thread) on this thread's libcurl multi handle, each retried on its own.
 *  Every request gets its own rc/msg. @return the number that failed. */
size_t sp__rio_fetch_many(const sp__rio *r, sp__rio_get *g, size_t n);

/*! sp__rio_fetch() : one GET, as above; on failure err gets its message.
 *  @return the request's rc. */
int sp__rio_fetch(const sp__rio *r, sp__rio_get *g, sp_error *err);

/*! sp__rio_fetch_fd() : the whole object `name` written to fd (at most max
 *  bytes; retried from the start), its size in *size. max UINT64_MAX: at
 *  most the size the response declares (Content-Length); a response that
 *  declares none is refused (SP_EIO). A write to fd that fails (a full
 *  disk) is not retried: SP_EIO ("URL: writing the local copy: reason")
 *  with errno that write's (ENOSPC, EDQUOT...); after any other outcome
 *  errno is 0, so the caller tells its disk from the store. */
int sp__rio_fetch_fd(const sp__rio *r, const char *name, int fd, uint64_t max, uint64_t *size,
                     sp_error *err);

/*! sp__rio_put() : store n bytes as object `name` (S3 PutObject or HTTP
 *  PUT). @return 0, SP_EIO (with the status). */
int sp__rio_put(const sp__rio *r, const char *name, const void *data, size_t n, sp_error *err);

/* ---- prefetch (remote.c) ----------------------------------------------------
 * A thread starts GETs ahead of need and files the bytes they will bring
 * under (owner, key) keys, several keys a GET when adjacent members are
 * read as one range; a later sp__rio_take() of a key on the same thread
 * waits for its GET (transfers progress whenever this thread is in
 * remote.c) and hands over that key's bytes. Per thread, at most 256 keys
 * are remembered (a new one evicts the oldest, stopping a GET nobody
 * points at), freed when the thread ends; and the ranges of a thread's
 * prefetches not yet taken add up to at most the store's prefetch_max
 * bytes (SEEDPIPE_PREFETCH_BYTES, default 64M): a range that would pass it
 * is not started (its samples are read when needed), so read-ahead holds
 * that much memory a thread whatever the members' sizes. Prefetching
 * decides only when bytes arrive, never which. */

/* A new owner id (one per opened dataset: keys of a dataset destroyed and
 * another allocated at the same address never match). */
uint64_t sp__rio_owner_id(void);
/*! sp__rio_prefetch() : start req (its fields are copied) and file bytes
 *  [offs[k], offs[k] + lens[k]) of its response under (owner, keys[k]),
 *  k < n (n <= 256). @return 0, or -1 (nothing started: out of memory, or
 *  req->len would take this thread's read-ahead past r->prefetch_max). */
int sp__rio_prefetch(const sp__rio *r, uint64_t owner, const sp__rio_get *req,
                     const uint64_t *keys, const uint64_t *offs, const uint64_t *lens, size_t n);
/* 1 if (owner, key) is filed on this thread. */
int sp__rio_prefetched(uint64_t owner, uint64_t key);
/*! sp__rio_take() : 0 if (owner, key) was not prefetched on this thread;
 *  else wait for it and return 1 with g->rc, g->msg, g->status and, on
 *  success, g->buf / g->got (malloc'd, the caller's) as sp__rio_fetch()
 *  gives them. */
int sp__rio_take(uint64_t owner, uint64_t key, sp__rio_get *g);
/* Drop this thread's prefetches of store r (before destroying it). */
void sp__rio_forget(const sp__rio *r);

/* Requests this process has sent (each retry counts), for the tools and tests. */
uint64_t sp__rio_requests(void);

#endif
