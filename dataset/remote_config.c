/* remote_config.c - where a remote object is: the URL split into store and
 * leaf, its protocol found in the table below (each protocol one file:
 * remote_http.c, remote_s3.c), the deadlines and bounds every store has,
 * and the URL each request goes to (remote_internal.h). No network here
 * and no libcurl: remote.c sends the requests.
 */
#include "dataset/remote_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The protocols, X(NAME): sp__rio_proto_NAME; the first whose scheme
 * starts a URL takes it. A new protocol is one file and one line here. */
#define SP__RIO_PROTOS(X) \
    X(s3)                 /* s3://BUCKET/PREFIX/... (remote_s3.c) */ \
    X(http)               /* http://, https:// (remote_http.c) */

#define SP__RIO_DECLARE(name) extern const sp__rio_proto sp__rio_proto_##name;
SP__RIO_PROTOS(SP__RIO_DECLARE)
#define SP__RIO_ENTRY(name) &sp__rio_proto_##name,
static const sp__rio_proto *const protos[] = {SP__RIO_PROTOS(SP__RIO_ENTRY) NULL};

/* The protocol whose scheme starts s, or NULL. */
static const sp__rio_proto *proto_of(const char *s) {
    for (size_t i = 0; s && protos[i]; i++)
        for (size_t k = 0; protos[i]->schemes[k]; k++)
            if (strncmp(s, protos[i]->schemes[k], strlen(protos[i]->schemes[k])) == 0)
                return protos[i];
    return NULL;
}

int sp__rio_is_url(const char *s) { return proto_of(s) != NULL; }

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static char *dup(const char *s) { return s ? dup_n(s, strlen(s)) : NULL; }

/* ---- deadlines and bounds ------------------------------------------------------ */

/* The integer in environment variable `name` (unset or empty: def), in
 * lo..hi, or a named error saying what was expected. */
static int env_long(const char *name, long lo, long hi, long def, const char *unit, long *out,
                    sp_error *err) {
    const char *e = getenv(name);
    *out = def;
    if (!e || !e[0]) return SP_OK;
    char *end;
    errno = 0;
    long v = strtol(e, &end, 10);
    if (*end || errno || end == e || e[0] == '+' || e[0] == ' ' || v < lo || v > hi)
        return sp_error_set(err, SP_EINVAL, "%s=%s: expected %ld..%ld (%s)", name, e, lo, hi,
                            unit);
    *out = v;
    return SP_OK;
}

/* SEEDPIPE_REMOTE_{RETRIES,TIMEOUT,LOW_SPEED,LOW_SPEED_TIME,RETRY_TIME,INDEX_MAX},
 * SEEDPIPE_PREFETCH_BYTES. */
static int limits(sp__rio *r, sp_error *err) {
    long retries, timeout, low, low_s, retry;
    int rc = env_long("SEEDPIPE_REMOTE_RETRIES", 0, 100, 10, "retries of a transient failure",
                      &retries, err);
    if (rc == SP_OK)
        rc = env_long("SEEDPIPE_REMOTE_TIMEOUT", 1, 86400, SP__RIO_TIMEOUT_S,
                      "seconds a try may last", &timeout, err);
    if (rc == SP_OK)
        rc = env_long("SEEDPIPE_REMOTE_LOW_SPEED", 1, 1L << 30, SP__RIO_LOW_SPEED,
                      "bytes a second below which a try is too slow", &low, err);
    if (rc == SP_OK)
        rc = env_long("SEEDPIPE_REMOTE_LOW_SPEED_TIME", 1, 3600, SP__RIO_LOW_SPEED_S,
                      "seconds a try may stay below SEEDPIPE_REMOTE_LOW_SPEED", &low_s, err);
    if (rc == SP_OK)
        rc = env_long("SEEDPIPE_REMOTE_RETRY_TIME", 0, 86400, SP__RIO_RETRY_S,
                      "seconds after a request's first try that a retry may start", &retry, err);
    if (rc != SP_OK) return rc;
    r->retries = (int)retries;
    r->timeout_ms = timeout * 1000L;
    r->low_speed = low;
    r->low_speed_s = low_s;
    r->retry_ms = (uint64_t)retry * 1000u;
    r->index_max = SP__RIO_INDEX_MAX;
    const char *e = getenv("SEEDPIPE_REMOTE_INDEX_MAX");
    sp_error e2;
    if (e && e[0] && (sp_parse_size(e, &r->index_max, &e2) != SP_OK || r->index_max < 1024 ||
                      r->index_max > (UINT64_C(4) << 30)))
        return sp_error_set(err, SP_EINVAL, "SEEDPIPE_REMOTE_INDEX_MAX=%s: expected a size in "
                            "1K..4G (digits, optionally K, M or G)", e);
    r->prefetch_max = SP__RIO_PREFETCH_MAX;
    e = getenv("SEEDPIPE_PREFETCH_BYTES");
    if (e && e[0] && (sp_parse_size(e, &r->prefetch_max, &e2) != SP_OK ||
                      r->prefetch_max < 1024 || r->prefetch_max > (UINT64_C(1) << 40)))
        return sp_error_set(err, SP_EINVAL, "SEEDPIPE_PREFETCH_BYTES=%s: expected a size in "
                            "1K..1T (digits, optionally K, M, G or T)", e);
    return SP_OK;
}

int sp__rio_create(const char *url, sp__rio **out, char **leaf, sp_error *err) {
    *out = NULL;
    *leaf = NULL;
    if (!sp__rio_is_url(url)) return sp_error_set(err, SP_EINVAL, "%s: not an s3:// or http(s):// URL", url);
    sp__rio *r = calloc(1, sizeof *r);
    if (!r) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", url);
    int rc = sp__rio_check_authority(url, url, err);
    const char *scheme_end = strstr(url, "://") + 3;
    const char *slash = strrchr(scheme_end, '/');
    const char *lf = slash ? slash + 1 : scheme_end + strlen(scheme_end);
    size_t folder_len = slash ? (size_t)(slash - url) : strlen(url);
    char *folder = dup_n(url, folder_len);
    *leaf = dup(lf);
    if (rc == SP_OK && (!folder || !*leaf)) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", url);
    if (rc == SP_OK) rc = limits(r, err);
    if (rc == SP_OK) {
        r->proto = proto_of(url);
        if (!slash) rc = sp_error_set(err, SP_EINVAL, "%s: expected %s", url, r->proto->usage);
        else rc = r->proto->configure(r, folder, err);
    }
    if (rc == SP_OK) {
        r->display = folder;
        folder = NULL;
    }
    free(folder);
    if (rc != SP_OK) {
        sp__rio_destroy(r);
        free(*leaf);
        *leaf = NULL;
        return rc;
    }
    *out = r;
    return SP_OK;
}

void sp__rio_destroy(sp__rio *r) {
    if (!r) return;
    if (r->proto) r->proto->destroy(r);
    free(r->display);
    free(r);
}

/* ---- object names --------------------------------------------------------------- */

char *sp__rio_display(const sp__rio *r, const char *name) {
    size_t n = strlen(r->display) + strlen(name) + 2;
    char *d = malloc(n);
    if (d) snprintf(d, n, "%s/%s", r->display, name);
    return d;
}

char *sp__rio_request_url(const sp__rio *r, const char *name) {
    return r->proto->request_url(r, name);
}
