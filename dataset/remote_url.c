/* remote_url.c - what every remote protocol shares: the URL's authority
 * checked (no credentials in a URL: it is printed and recorded), object
 * names percent-encoded, the environment read, secrets wiped. Below the
 * protocols (remote_http.c, remote_s3.c) and their table (remote_config.c);
 * no network and no libcurl here.
 */
#include "dataset/remote_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int sp__rio_check_authority(const char *url, const char *what, sp_error *err) {
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

/* Each byte encoded once: the canonical URI S3's SigV4 expects. */
size_t sp__rio_encode(char *dst, const char *s) {
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

const char *sp__rio_env(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

void sp__rio_wipe_free(char *s) {
    if (!s) return;
    volatile char *v = s;
    while (*v) *v++ = '\0';
    free(s);
}
