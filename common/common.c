/* common.c - error records, image buffers, digests and version strings
 * shared by every seedpipe module (include/seedpipe/common.h,
 * include/seedpipe/version.h). */
#include "seedpipe/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <jpeglib.h>
#include <tiffio.h>
#include <webp/decode.h>
#include <xxhash.h>
#include <zlib.h>
#include <zstd.h>

#include "common/json_write_internal.h"
#include "common/common_internal.h"

/* "X.Y.Z" from seedpipe/version.h, the one place the version is written. */
#define SP_STR_(x) #x
#define SP_STR(x) SP_STR_(x)
#define SEEDPIPE_VERSION \
    SP_STR(SP_VERSION_MAJOR) "." SP_STR(SP_VERSION_MINOR) "." SP_STR(SP_VERSION_PATCH)

const char *sp_strerror(int code) {
    switch (code) {
    case SP_OK: return "ok";
#define XX(name, val, str) case SP_##name: return str;
    SP_ERRNO_MAP(XX)
    SP_STATUS_MAP(XX)
#undef XX
    default: return "unknown status";
    }
}

const char *sp_status_at(size_t i, int *code) {
    static const struct {
        int code;
        const char *name;
    } table[] = {
        {SP_OK, "OK"},
#define XX(name, val, str) {SP_##name, #name},
        SP_ERRNO_MAP(XX)
        SP_STATUS_MAP(XX)
#undef XX
    };
    if (i >= sizeof table / sizeof table[0]) return NULL;
    if (code) *code = table[i].code;
    return table[i].name;
}

void sp_error_clear(sp_error *err) {
    if (!err) return;
    err->code = SP_OK;
    err->msg[0] = '\0';
}

int sp_error_set(sp_error *err, int code, const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

int sp__image_alloc(sp_image *img, int width, int height, int channels) {
    memset(img, 0, sizeof *img);
    if (width <= 0 || height <= 0 || (channels != 1 && channels != 3))
        return SP_EINVAL;
    size_t row = (size_t)width * (size_t)channels;
    if ((size_t)height > SIZE_MAX / row) return SP_EINVAL;
    img->data = malloc(row * (size_t)height);
    if (!img->data) return SP_ENOMEM;
    img->width = width;
    img->height = height;
    img->channels = channels;
    img->stride = row;
    return SP_OK;
}

void sp_image_free(sp_image *img) {
    if (!img) return;
    free(img->data);
    memset(img, 0, sizeof *img);
}

void sp_digest_hex(sp_digest d, char hex[33]) {
    snprintf(hex, 33, "%016llx%016llx", (unsigned long long)d.hi,
             (unsigned long long)d.lo);
}

int sp__digest_parse(const char *hex, sp_digest *out) {
    uint64_t w[2] = {0, 0};
    for (int i = 0; i < 32; i++) {
        char c = hex[i];
        int v;
        if (c >= '0' && c <= '9') v = c - '0';
        else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
        else return SP_EINVAL;
        w[i / 16] = (w[i / 16] << 4) | (uint64_t)v;
    }
    if (hex[32] != '\0') return SP_EINVAL;
    out->hi = w[0];
    out->lo = w[1];
    return SP_OK;
}

const char *sp_version_string(void) { return "seedpipe " SEEDPIPE_VERSION; }

int sp_abi_version(void) { return SP_ABI_VERSION; }

int sp_isa_cap(int best) {
    const char *cap = getenv("SEEDPIPE_ISA");
    if (cap) {
        int want = !strcmp(cap, "sse2") ? 0 : !strcmp(cap, "avx2") ? 1 : 2;
        if (want < best) best = want;
    }
    return best;
}

/* libtiff's version from TIFFGetVersion() ("LIBTIFF, Version 4.5.0\n..."):
 * the digits and dots after "Version ", or "?". */
static void tiff_version(char *out, size_t n) {
    const char *v = strstr(TIFFGetVersion(), "Version ");
    size_t k = 0;
    for (v = v ? v + 8 : ""; k + 1 < n && ((*v >= '0' && *v <= '9') || *v == '.'); v++)
        out[k++] = *v;
    if (k == 0 && n > 1) out[k++] = '?';
    if (n) out[k] = '\0';
}

int sp_library_versions_json(char *buf, size_t size) {
    unsigned xv = XXH_versionNumber();
    int wv = WebPGetDecoderVersion();
    char tv[32], jv[32], xx[32], wp[32];
    tiff_version(tv, sizeof tv);
    snprintf(jv, sizeof jv, "%d.%d.%d", LIBJPEG_TURBO_VERSION_NUMBER / 1000000,
             LIBJPEG_TURBO_VERSION_NUMBER / 1000 % 1000, LIBJPEG_TURBO_VERSION_NUMBER % 1000);
    snprintf(xx, sizeof xx, "%u.%u.%u", xv / 10000, xv / 100 % 100, xv % 100);
    snprintf(wp, sizeof wp, "%d.%d.%d", (wv >> 16) & 0xff, (wv >> 8) & 0xff, wv & 0xff);
    sp__jw w = sp__jw_buf(buf, size);
    sp__jw_obj(&w);
    sp__jw_kstr(&w, "seedpipe", SEEDPIPE_VERSION);
    sp__jw_kstr(&w, "libpng", png_get_libpng_ver(NULL));
    sp__jw_kstr(&w, "libjpeg-turbo", jv);
    sp__jw_kstr(&w, "zstd", ZSTD_versionString());
    sp__jw_kstr(&w, "xxhash", xx);
    sp__jw_kstr(&w, "zlib", zlibVersion());
    sp__jw_kstr(&w, "libwebp", wp);
    sp__jw_kstr(&w, "libtiff", tv);
    sp__jw_end(&w, '}');
    return (int)w.len;
}

int sp_parse_size(const char *s, uint64_t *out, sp_error *err) {
    const char *p = s;
    uint64_t v = 0;
    if (!s || *s < '0' || *s > '9') goto bad;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10) goto bad;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    int shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    case 't': case 'T': shift = 40; p++; break;
    default: break;
    }
    if (shift && *p == 'i') p++;
    if (*p == 'B' || *p == 'b') p++;
    if (*p) goto bad;
    if (shift && v > (UINT64_MAX >> shift)) goto bad;
    *out = v << shift;
    return SP_OK;
bad:
    return sp_error_set(err, SP_EINVAL, "size \"%s\": expected a number with an optional "
                        "K, M, G or T suffix (binary units)", s ? s : "");
}
