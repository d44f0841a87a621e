/* remote_config.c - where a remote object is: the URL split into store and
 * leaf, S3's endpoint, region, addressing style and credentials from the
 * places users keep them, and the URL each request goes to
 * (remote_internal.h). No network here and no libcurl: remote.c sends the
 * requests.
 *
 * The shared credentials and config files are INI files read by the rule
 * for every file seedpipe reads (bounded, regular files only): sections
 * "[NAME]" (credentials) and "[profile NAME]" or "[default]" (config),
 * "key = value" lines, '#' and ';' comments. Nested sections (an "s3 ="
 * line followed by indented keys) are read flat, which is enough for
 * addressing_style and endpoint_url.
 */
#include "dataset/remote_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INI_MAX_BYTES (1u << 20)

int sp__rio_is_url(const char *s) {
    return s && (strncmp(s, "s3://", 5) == 0 || strncmp(s, "http://", 7) == 0 ||
                 strncmp(s, "https://", 8) == 0);
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static char *dup(const char *s) { return s ? dup_n(s, strlen(s)) : NULL; }

static const char *env_nonempty(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

/* ---- INI files ---------------------------------------------------------------- */

/* The value of `key` in section `section` of the INI file at path (a copy,
 * trimmed), or NULL. *found_section: the section exists. A missing file is
 * no error; an unreadable one is SP_EIO. */
static int ini_get(const char *path, const char *section, const char *key, char **out,
                   int *found_section, sp_error *err) {
    *out = NULL;
    sp__buf b = {NULL, 0};
    size_t n = 0;
    sp_error e;
    sp_error_clear(&e);
    if (sp__read_regular(AT_FDCWD, path, path, 0, INI_MAX_BYTES, &b, &n, &e) != 0) {
        sp__buf_free(&b);
        if (errno == ENOENT) return SP_OK;
        return sp_error_set(err, e.code ? e.code : SP_EIO, "%s", e.msg);
    }
    b.p[n] = '\0';   /* sp__read_fd leaves a spare byte */
    int in = 0, rc = SP_OK;
    char *save = NULL;
    for (char *line = strtok_r((char *)b.p, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        while (*line == ' ' || *line == '\t') line++;
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\r' || line[l - 1] == ' ' || line[l - 1] == '\t')) line[--l] = '\0';
        if (!l || line[0] == '#' || line[0] == ';') continue;
        if (line[0] == '[') {
            char *close = strchr(line, ']');
            if (close) *close = '\0';
            char *name = line + 1;
            while (*name == ' ') name++;
            size_t nl = strlen(name);
            while (nl && name[nl - 1] == ' ') name[--nl] = '\0';
            in = strcmp(name, section) == 0;
            if (in) *found_section = 1;
            continue;
        }
        if (!in) continue;
        char *eq = strchr(line, '=');
        if (!eq) continue;
        char *k = line, *ke = eq;
        while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
        if ((size_t)(ke - k) != strlen(key) || strncmp(k, key, (size_t)(ke - k)) != 0) continue;
        char *v = eq + 1;
        while (*v == ' ' || *v == '\t') v++;
        free(*out);
        *out = dup(v);
        if (!*out) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    }
    sp__buf_free(&b);
    return rc;
}

static char *home_file(const char *env, const char *rel) {
    const char *p = env_nonempty(env);
    if (p) return dup(p);
    const char *home = env_nonempty("HOME");
    if (!home) return NULL;
    size_t n = strlen(home) + strlen(rel) + 2;
    char *f = malloc(n);
    if (f) snprintf(f, n, "%s/%s", home, rel);
    return f;
}

/* The profile's credentials and settings (S3 only). */
static int s3_profile(sp__rio *r, char **endpoint, char **addressing, sp_error *err) {
    const char *named = env_nonempty("AWS_PROFILE");
    if (!named) named = env_nonempty("AWS_DEFAULT_PROFILE");
    const char *profile = named ? named : "default";
    char *cred = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    char *conf = home_file("AWS_CONFIG_FILE", ".aws/config");
    char section[300];
    if (strcmp(profile, "default") == 0) snprintf(section, sizeof section, "default");
    else snprintf(section, sizeof section, "profile %s", profile);
    int in_cred = 0, in_conf = 0, rc = SP_OK;
    char *id = NULL, *secret = NULL, *token = NULL, *region = NULL;
    if (cred) {
        rc = ini_get(cred, profile, "aws_access_key_id", &id, &in_cred, err);
        if (rc == SP_OK) rc = ini_get(cred, profile, "aws_secret_access_key", &secret, &in_cred, err);
        if (rc == SP_OK) rc = ini_get(cred, profile, "aws_session_token", &token, &in_cred, err);
    }
    if (conf && rc == SP_OK) {
        rc = ini_get(conf, section, "region", &region, &in_conf, err);
        if (rc == SP_OK) rc = ini_get(conf, section, "endpoint_url", endpoint, &in_conf, err);
        if (rc == SP_OK) rc = ini_get(conf, section, "addressing_style", addressing, &in_conf, err);
        /* the config file may hold credentials too */
        if (rc == SP_OK && !id) rc = ini_get(conf, section, "aws_access_key_id", &id, &in_conf, err);
        if (rc == SP_OK && !secret)
            rc = ini_get(conf, section, "aws_secret_access_key", &secret, &in_conf, err);
    }
    if (rc == SP_OK && named && !in_cred && !in_conf)
        rc = sp_error_set(err, SP_EINVAL, "AWS profile \"%s\" (AWS_PROFILE) is in neither %s nor %s",
                          profile, cred ? cred : "~/.aws/credentials", conf ? conf : "~/.aws/config");
    if (rc == SP_OK && !r->key_id && id && secret) {
        r->key_id = id;
        r->secret = secret;
        r->token = token;
        id = secret = token = NULL;
    }
    if (rc == SP_OK && !r->region && region) {
        r->region = region;
        region = NULL;
    }
    free(id);
    free(secret);
    free(token);
    free(region);
    free(cred);
    free(conf);
    return rc;
}

/* ---- the URL -------------------------------------------------------------------- */

/* "scheme://host[:port]" with no user:password@ and only URL characters. */
static int check_authority(const char *url, const char *what, sp_error *err) {
    const char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    size_t hl = strcspn(host, "/");
    if (memchr(host, '@', hl))
        return sp_error_set(err, SP_EINVAL, "%s: credentials in a URL are refused (the URL is "
                            "printed and recorded); use AWS_ACCESS_KEY_ID / "
                            "AWS_SECRET_ACCESS_KEY or a credentials file", what);
    if (hl == 0) return sp_error_set(err, SP_EINVAL, "%s: no host in the URL", what);
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return sp_error_set(err, SP_EINVAL, "%s: a space or control byte in the URL", what);
    return SP_OK;
}

/* An S3 endpoint over plain http:// sends every request's SigV4 signature
 * and the session token (x-amz-security-token) in clear: anyone on the path
 * can read the token and replay or reuse it while it lasts. Refused unless
 * SEEDPIPE_S3_ALLOW_HTTP=1, always (a loopback address too: a proxy or a
 * tunnel may be listening there); the opt-in is said once a process on
 * stderr, the one message the library prints itself: a risk the user took
 * must reach them wherever the library runs (the tool, Python, a C
 * trainer), and no handle that could carry it outlives this open. */
static int s3_plain_http(const char *ep, sp_error *err) {
    static _Atomic int warned;
    const char *v = getenv("SEEDPIPE_S3_ALLOW_HTTP");
    if (v && v[0] && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        return sp_error_set(err, SP_EINVAL, "SEEDPIPE_S3_ALLOW_HTTP=%s: expected 0 or 1", v);
    if (!v || strcmp(v, "1") != 0)
        return sp_error_set(err, SP_EINVAL, "S3 endpoint %s: plain http:// is refused: it sends "
                            "the request signatures and any session token in clear (anyone on "
                            "the path can read and replay them); use https://, or set "
                            "SEEDPIPE_S3_ALLOW_HTTP=1 to accept that risk", ep);
    if (!atomic_exchange(&warned, 1))
        fprintf(stderr, "seedpipe: warning: S3 endpoint %s is plain http:// "
                "(SEEDPIPE_S3_ALLOW_HTTP=1): the request signatures and any session token "
                "travel in clear, readable and replayable by anyone on the path\n", ep);
    return SP_OK;
}

static int setup_s3(sp__rio *r, const char *rest, sp_error *err) {
    /* rest = "bucket/prefix" (the folder) */
    size_t bl = strcspn(rest, "/");
    if (bl == 0) return sp_error_set(err, SP_EINVAL, "s3://%s: no bucket in the URL", rest);
    r->bucket = dup_n(rest, bl);
    const char *pre = rest + bl;
    while (*pre == '/') pre++;
    r->prefix = dup(pre);
    if (!r->bucket || !r->prefix) return sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    size_t pl = strlen(r->prefix);
    while (pl && r->prefix[pl - 1] == '/') r->prefix[--pl] = '\0';
    const char *id = env_nonempty("AWS_ACCESS_KEY_ID"), *sec = env_nonempty("AWS_SECRET_ACCESS_KEY");
    if (id && sec) {
        r->key_id = dup(id);
        r->secret = dup(sec);
        const char *tok = env_nonempty("AWS_SESSION_TOKEN");
        r->token = tok ? dup(tok) : NULL;
        if (!r->key_id || !r->secret || (tok && !r->token))
            return sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    }
    const char *reg = env_nonempty("AWS_REGION");
    if (!reg) reg = env_nonempty("AWS_DEFAULT_REGION");
    if (reg && !(r->region = dup(reg))) return sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    char *prof_endpoint = NULL, *prof_addressing = NULL;
    int rc = s3_profile(r, &prof_endpoint, &prof_addressing, err);
    if (rc == SP_OK && !r->region && !(r->region = dup("us-east-1")))
        rc = sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    const char *ep = env_nonempty("AWS_ENDPOINT_URL_S3");
    if (!ep) ep = env_nonempty("AWS_ENDPOINT_URL");
    if (!ep) ep = prof_endpoint;
    const char *style = env_nonempty("SEEDPIPE_S3_ADDRESSING");
    if (!style) style = prof_addressing;
    if (rc == SP_OK && ep) {
        if (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)
            rc = sp_error_set(err, SP_EINVAL, "S3 endpoint %s: expected http://HOST[:PORT] or "
                              "https://HOST[:PORT]", ep);
        if (rc == SP_OK) rc = check_authority(ep, "S3 endpoint", err);
        if (rc == SP_OK && strncmp(ep, "http://", 7) == 0) rc = s3_plain_http(ep, err);
        if (rc == SP_OK && !(r->endpoint = dup(ep))) rc = SP_ENOMEM;
    } else if (rc == SP_OK) {
        size_t n = strlen(r->region) + 40;
        r->endpoint = malloc(n);
        if (r->endpoint) snprintf(r->endpoint, n, "https://s3.%s.amazonaws.com", r->region);
        else rc = SP_ENOMEM;
    }
    if (rc == SP_OK) {
        size_t el = strlen(r->endpoint);
        while (el && r->endpoint[el - 1] == '/') r->endpoint[--el] = '\0';
        if (!style || strcmp(style, "auto") == 0) r->virtual_hosted = ep == NULL;
        else if (strcmp(style, "path") == 0) r->virtual_hosted = 0;
        else if (strcmp(style, "virtual") == 0) r->virtual_hosted = 1;
        else rc = sp_error_set(err, SP_EINVAL, "S3 addressing style \"%s\": expected path, "
                               "virtual or auto (SEEDPIPE_S3_ADDRESSING)", style);
    }
    if (rc == SP_OK) {
        size_t n = strlen(r->region) + 16;
        r->sigv4 = malloc(n);
        if (r->sigv4) snprintf(r->sigv4, n, "aws:amz:%s:s3", r->region);
        else rc = SP_ENOMEM;
    }
    if (rc == SP_ENOMEM) rc = sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    free(prof_endpoint);
    free(prof_addressing);
    return rc;
}

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
    int rc = check_authority(url, url, err);
    const char *scheme_end = strstr(url, "://") + 3;
    const char *slash = strrchr(scheme_end, '/');
    const char *lf = slash ? slash + 1 : scheme_end + strlen(scheme_end);
    size_t folder_len = slash ? (size_t)(slash - url) : strlen(url);
    char *folder = dup_n(url, folder_len);
    *leaf = dup(lf);
    if (rc == SP_OK && (!folder || !*leaf)) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", url);
    if (rc == SP_OK) rc = limits(r, err);
    if (rc == SP_OK && strncmp(url, "s3://", 5) == 0) {
        r->kind = SP__RIO_S3;
        if (!slash) rc = sp_error_set(err, SP_EINVAL, "%s: expected s3://BUCKET/[PREFIX/]NAME", url);
        else rc = setup_s3(r, folder + 5, err);
    } else if (rc == SP_OK) {
        r->kind = SP__RIO_HTTP;
        if (!slash) rc = sp_error_set(err, SP_EINVAL, "%s: expected http(s)://HOST/PATH/NAME", url);
        else if (!(r->http_base = dup(folder))) rc = sp_error_set(err, SP_ENOMEM, "out of memory");
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

static void wipe_free(char *s) {
    if (!s) return;
    volatile char *v = s;
    while (*v) *v++ = '\0';
    free(s);
}

void sp__rio_destroy(sp__rio *r) {
    if (!r) return;
    free(r->display);
    free(r->http_base);
    free(r->bucket);
    free(r->prefix);
    free(r->endpoint);
    free(r->region);
    free(r->key_id);
    wipe_free(r->secret);
    wipe_free(r->token);
    free(r->sigv4);
    free(r);
}

/* ---- object names --------------------------------------------------------------- */

char *sp__rio_display(const sp__rio *r, const char *name) {
    size_t n = strlen(r->display) + strlen(name) + 2;
    char *d = malloc(n);
    if (d) snprintf(d, n, "%s/%s", r->display, name);
    return d;
}

/* Percent-encode everything but RFC 3986's unreserved bytes and '/' (the
 * canonical URI S3's SigV4 expects: each byte encoded once). */
static size_t encode(char *dst, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || *p == '/') {
            if (dst) dst[k] = (char)*p;
            k++;
        } else {
            if (dst) {
                dst[k] = '%';
                dst[k + 1] = hex[*p >> 4];
                dst[k + 2] = hex[*p & 15];
            }
            k += 3;
        }
    }
    return k;
}

char *sp__rio_request_url(const sp__rio *r, const char *name) {
    char *key = NULL;
    if (r->kind == SP__RIO_S3) {
        size_t n = strlen(r->prefix) + strlen(name) + 2;
        key = malloc(n);
        if (key) snprintf(key, n, "%s%s%s", r->prefix, r->prefix[0] ? "/" : "", name);
    } else {
        key = dup(name);
    }
    if (!key) return NULL;
    size_t ek = encode(NULL, key);
    size_t n = ek + strlen(r->kind == SP__RIO_S3 ? r->endpoint : r->http_base) +
               (r->bucket ? strlen(r->bucket) : 0) + 8;
    char *u = malloc(n);
    if (u) {
        size_t k;
        if (r->kind == SP__RIO_HTTP) {
            k = (size_t)snprintf(u, n, "%s/", r->http_base);
        } else if (r->virtual_hosted) {
            const char *host = strstr(r->endpoint, "://") + 3;
            k = (size_t)snprintf(u, n, "%.*s%s.%s/", (int)(host - r->endpoint), r->endpoint,
                                 r->bucket, host);
        } else {
            k = (size_t)snprintf(u, n, "%s/%s/", r->endpoint, r->bucket);
        }
        encode(u + k, key);
        u[k + ek] = '\0';
    }
    free(key);
    return u;
}
