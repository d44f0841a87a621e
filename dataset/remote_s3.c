/* remote_s3.c - the S3 protocol: objects in an S3-compatible store,
 * `s3://bucket/prefix/...` (docs/remote.md). Its settings (remote_s3.h):
 * the endpoint, region, addressing style and credentials from the places
 * users keep them (the AWS_* variables, the shared credentials and config
 * files, SEEDPIPE_S3_*), and what each request carries: a SigV4 signature
 * over an unsigned payload, the session token. No network and no libcurl
 * here: remote.c applies the sp__rio_auth this fills.
 *
 * The shared credentials and config files are INI files read by the rule
 * for every file seedpipe reads (bounded, regular files only): sections
 * "[NAME]" (credentials) and "[profile NAME]" or "[default]" (config),
 * "key = value" lines, '#' and ';' comments. Nested sections (an "s3 ="
 * line followed by indented keys) are read flat, which is enough for
 * addressing_style and endpoint_url.
 */
#include "dataset/remote_s3.h"
#include "common/fileio_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INI_MAX_BYTES (1u << 20)

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
        *out = strdup(v);
        if (!*out) rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    }
    sp__buf_free(&b);
    return rc;
}

static char *home_file(const char *env, const char *rel) {
    const char *p = sp__rio_env(env);
    if (p) return strdup(p);
    const char *home = sp__rio_env("HOME");
    if (!home) return NULL;
    size_t n = strlen(home) + strlen(rel) + 2;
    char *f = malloc(n);
    if (f) snprintf(f, n, "%s/%s", home, rel);
    return f;
}

/* The profile's credentials and settings (S3 only). */
static int s3_profile(sp__rio_s3 *r, char **endpoint, char **addressing, sp_error *err) {
    const char *named = sp__rio_env("AWS_PROFILE");
    if (!named) named = sp__rio_env("AWS_DEFAULT_PROFILE");
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

/* ---- the store ------------------------------------------------------------------ */

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

static int setup_s3(sp__rio_s3 *r, const char *rest, sp_error *err) {
    /* rest = "bucket/prefix" (the folder) */
    size_t bl = strcspn(rest, "/");
    if (bl == 0) return sp_error_set(err, SP_EINVAL, "s3://%s: no bucket in the URL", rest);
    r->bucket = strndup(rest, bl);
    const char *pre = rest + bl;
    while (*pre == '/') pre++;
    r->prefix = strdup(pre);
    if (!r->bucket || !r->prefix) return sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    size_t pl = strlen(r->prefix);
    while (pl && r->prefix[pl - 1] == '/') r->prefix[--pl] = '\0';
    const char *id = sp__rio_env("AWS_ACCESS_KEY_ID"), *sec = sp__rio_env("AWS_SECRET_ACCESS_KEY");
    if (id && sec) {
        r->key_id = strdup(id);
        r->secret = strdup(sec);
        const char *tok = sp__rio_env("AWS_SESSION_TOKEN");
        r->token = tok ? strdup(tok) : NULL;
        if (!r->key_id || !r->secret || (tok && !r->token))
            return sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    }
    const char *reg = sp__rio_env("AWS_REGION");
    if (!reg) reg = sp__rio_env("AWS_DEFAULT_REGION");
    if (reg && !(r->region = strdup(reg))) return sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    char *prof_endpoint = NULL, *prof_addressing = NULL;
    int rc = s3_profile(r, &prof_endpoint, &prof_addressing, err);
    if (rc == SP_OK && !r->region && !(r->region = strdup("us-east-1")))
        rc = sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    const char *ep = sp__rio_env("AWS_ENDPOINT_URL_S3");
    if (!ep) ep = sp__rio_env("AWS_ENDPOINT_URL");
    if (!ep) ep = prof_endpoint;
    const char *style = sp__rio_env("SEEDPIPE_S3_ADDRESSING");
    if (!style) style = prof_addressing;
    if (rc == SP_OK && ep) {
        if (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)
            rc = sp_error_set(err, SP_EINVAL, "S3 endpoint %s: expected http://HOST[:PORT] or "
                              "https://HOST[:PORT]", ep);
        if (rc == SP_OK) rc = sp__rio_check_authority(ep, "S3 endpoint", err);
        if (rc == SP_OK && strncmp(ep, "http://", 7) == 0) rc = s3_plain_http(ep, err);
        if (rc == SP_OK && !(r->endpoint = strdup(ep))) rc = SP_ENOMEM;
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

static void s3_destroy(sp__rio *r) {
    sp__rio_s3 *s = r->state;
    if (!s) return;
    free(s->bucket);
    free(s->prefix);
    free(s->endpoint);
    free(s->region);
    free(s->key_id);
    sp__rio_wipe_free(s->secret);
    sp__rio_wipe_free(s->token);
    sp__rio_wipe_free(s->token_header);
    free(s->sigv4);
    free(s);
    r->state = NULL;
}

static int s3_configure(sp__rio *r, const char *folder, sp_error *err) {
    sp__rio_s3 *s = calloc(1, sizeof *s);
    if (!s) return sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    r->state = s;
    int rc = setup_s3(s, folder + strlen("s3://"), err);
    if (rc == SP_OK && s->key_id && s->token) {
        size_t n = strlen(s->token) + 32;
        if ((s->token_header = malloc(n)))
            snprintf(s->token_header, n, "x-amz-security-token: %s", s->token);
        else rc = sp_error_set(err, SP_ENOMEM, "s3: out of memory");
    }
    return rc;
}

const sp__rio_s3 *sp__rio_s3_of(const sp__rio *r) {
    return r && r->proto == &sp__rio_proto_s3 ? r->state : NULL;
}

/* Path style "ENDPOINT/BUCKET/PREFIX/NAME", or virtual-hosted
 * "scheme://BUCKET.HOST/PREFIX/NAME". */
static char *s3_request_url(const sp__rio *r, const char *name) {
    const sp__rio_s3 *s = r->state;
    size_t n = strlen(s->prefix) + strlen(name) + 2;
    char *key = malloc(n);
    if (!key) return NULL;
    snprintf(key, n, "%s%s%s", s->prefix, s->prefix[0] ? "/" : "", name);
    size_t ek = sp__rio_encode(NULL, key);
    n = ek + strlen(s->endpoint) + strlen(s->bucket) + 8;
    char *u = malloc(n);
    if (u) {
        size_t k;
        if (s->virtual_hosted) {
            const char *host = strstr(s->endpoint, "://") + 3;
            k = (size_t)snprintf(u, n, "%.*s%s.%s/", (int)(host - s->endpoint), s->endpoint,
                                 s->bucket, host);
        } else {
            k = (size_t)snprintf(u, n, "%s/%s/", s->endpoint, s->bucket);
        }
        sp__rio_encode(u + k, key);
        u[k + ek] = '\0';
    }
    free(key);
    return u;
}

/* Signed when there are credentials (SigV4 over an unsigned payload, the
 * session token as its header); anonymous otherwise. */
static void s3_auth(const sp__rio *r, sp__rio_auth *a) {
    const sp__rio_s3 *s = r->state;
    if (!s->key_id) return;
    a->sigv4 = s->sigv4;
    a->user = s->key_id;
    a->password = s->secret;
    a->headers[0] = "x-amz-content-sha256: UNSIGNED-PAYLOAD";
    a->headers[1] = s->token_header;
}

const sp__rio_proto sp__rio_proto_s3 = {
    .name = "s3",
    .schemes = {"s3://", NULL},
    .usage = "s3://BUCKET/[PREFIX/]NAME",
    .configure = s3_configure,
    .request_url = s3_request_url,
    .auth = s3_auth,
    .destroy = s3_destroy,
};
