/* remote_http.c - the HTTP(S) protocol: objects are files under a URL's
 * folder on any web server (`https://host/path/train-{...}.tar`,
 * docs/remote.md), fetched with GET and byte ranges, written with PUT,
 * unsigned, redirects followed (at most 5, to http or https only). Its
 * state is the folder URL, the base every object's URL is joined to.
 */
#include "dataset/remote_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int http_configure(sp__rio *r, const char *folder, sp_error *err) {
    r->state = strdup(folder);   /* "http(s)://host[:port]/path" (no trailing '/') */
    return r->state ? SP_OK : sp_error_set(err, SP_ENOMEM, "out of memory");
}

static char *http_request_url(const sp__rio *r, const char *name) {
    const char *base = r->state;
    size_t ek = sp__rio_encode(NULL, name), n = ek + strlen(base) + 8;
    char *u = malloc(n);
    if (!u) return NULL;
    size_t k = (size_t)snprintf(u, n, "%s/", base);
    sp__rio_encode(u + k, name);
    u[k + ek] = '\0';
    return u;
}

static void http_auth(const sp__rio *r, sp__rio_auth *a) {
    (void)r;
    a->follow_redirects = 1;
}

static void http_destroy(sp__rio *r) {
    free(r->state);
    r->state = NULL;
}

const sp__rio_proto sp__rio_proto_http = {
    .name = "http",
    .schemes = {"http://", "https://", NULL},
    .usage = "http(s)://HOST/PATH/NAME",
    .configure = http_configure,
    .request_url = http_request_url,
    .auth = http_auth,
    .destroy = http_destroy,
};
