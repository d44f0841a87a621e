/* imageio.c - writing images: PNG through libpng, JPEG through TurboJPEG, and
 * contact sheets (include/seedpipe/imageio.h).
 *
 * Both encoders take an sp_image (1 or 3 channels, any stride) and produce a
 * malloc'd buffer (imageio_internal.h); sp_image_write() encodes to memory
 * first and then publishes the file atomically, so a failed encode never
 * leaves a half file behind a good name and there is one code path. Everything that fixes the
 * output bytes is set explicitly (PNG: 8-bit, no interlace, zlib level 6,
 * libpng's default filter heuristic, no time or text chunks; JPEG: baseline,
 * accurate integer forward DCT, 4:2:0 for RGB), so for fixed library
 * versions the bytes are the same run to run.
 *
 * libpng reports errors by longjmp: the handler copies the message into a
 * context on the caller's stack and jumps back to a setjmp in a small helper
 * function, so no local of the function that called setjmp is modified in
 * between. Warnings are dropped (library code never prints).
 */
#include "seedpipe/imageio.h"
#include "augment/imageio_internal.h"
#include "common/fileio_internal.h"
#include "common/sbuf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <png.h>
#include <turbojpeg.h>
#include "common/common_internal.h"

static int check_image(const sp_image *img, const char *what, sp_error *err) {
    if (!img || !img->data || img->width <= 0 || img->height <= 0 ||
        (img->channels != 1 && img->channels != 3) ||
        img->stride < (size_t)img->width * (size_t)img->channels)
        return sp_error_set(err, SP_EINVAL,
                            "%s: bad image (need width, height > 0, 1 or 3 channels, "
                            "stride >= width * channels)", what);
    return SP_OK;
}

/* ---- file output -------------------------------------------------------------------- */

/* Atomic publish (common.h): a reader never sees half an image, and a
 * symlink at the name is replaced, never written through. */
static int write_all(const char *path, const uint8_t *buf, size_t len, sp_error *err) {
    return sp_write_file_atomic(path, buf, len, 0, err);
}

/* ---- PNG -------------------------------------------------------------------------------- */

typedef struct png_ctx {
    char msg[256];
    sp__sbuf out;   /* the encoded bytes */
} png_ctx;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_ctx *c = png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "error");
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static void png_mem_write(png_structp png, png_bytep data, size_t len) {
    png_ctx *c = png_get_io_ptr(png);
    sp__sbuf_put(&c->out, data, len);
    if (c->out.oom) png_error(png, "out of memory");
}

static void png_mem_flush(png_structp png) { (void)png; }

/* The only function with a setjmp; returns 1 on success. */
static int png_encode_rows(png_structp png, png_infop info, const sp_image *img, png_ctx *c) {
    if (setjmp(png_jmpbuf(png))) return 0;
    png_set_write_fn(png, c, png_mem_write, png_mem_flush);
    png_set_IHDR(png, info, (png_uint_32)img->width, (png_uint_32)img->height, 8,
                 img->channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(png, 6);
    png_write_info(png, info);
    for (int y = 0; y < img->height; y++)
        png_write_row(png, img->data + (size_t)y * img->stride);
    png_write_end(png, NULL);
    return 1;
}

int sp__png_encode(const sp_image *img, uint8_t **buf, size_t *len, sp_error *err) {
    if (!buf || !len) return sp_error_set(err, SP_EINVAL, "PNG encode: NULL output");
    *buf = NULL;
    *len = 0;
    int rc = check_image(img, "PNG encode", err);
    if (rc) return rc;
    png_ctx c;
    memset(&c, 0, sizeof c);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &c, png_on_error,
                                              png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, &info);
        return sp_error_set(err, SP_ENOMEM, "PNG encode: out of memory");
    }
    int ok = png_encode_rows(png, info, img, &c);
    png_destroy_write_struct(&png, &info);
    if (!ok) {
        int oom = c.out.oom;
        sp__sbuf_free(&c.out);
        return sp_error_set(err, oom ? SP_ENOMEM : SP_EINVAL, "PNG encode: %s", c.msg);
    }
    *buf = (uint8_t *)c.out.p;
    *len = c.out.len;
    return SP_OK;
}

/* ---- JPEG ------------------------------------------------------------------------------- */

int sp__jpeg_encode(const sp_image *img, int quality, uint8_t **buf, size_t *len,
                    sp_error *err) {
    if (!buf || !len) return sp_error_set(err, SP_EINVAL, "JPEG encode: NULL output");
    *buf = NULL;
    *len = 0;
    int rc = check_image(img, "JPEG encode", err);
    if (rc) return rc;
    if (quality < 1 || quality > 100)
        return sp_error_set(err, SP_EINVAL, "JPEG encode: quality %d outside 1..100", quality);
    if (img->width > 65535 || img->height > 65535 || img->stride > INT_MAX)
        return sp_error_set(err, SP_EINVAL, "JPEG encode: %d x %d is larger than JPEG allows",
                            img->width, img->height);
    tjhandle tj = tjInitCompress();
    if (!tj) return sp_error_set(err, SP_ENOMEM, "JPEG encode: %s", tjGetErrorStr2(NULL));
    unsigned char *jbuf = NULL;
    unsigned long jlen = 0;
    int gray = img->channels == 1;
    if (tjCompress2(tj, img->data, img->width, (int)img->stride, img->height,
                    gray ? TJPF_GRAY : TJPF_RGB, &jbuf, &jlen,
                    gray ? TJSAMP_GRAY : TJSAMP_420, quality, TJFLAG_ACCURATEDCT) != 0) {
        rc = sp_error_set(err, SP_EINVAL, "JPEG encode: %s", tjGetErrorStr2(tj));
    } else {
        *buf = malloc(jlen ? jlen : 1);
        if (!*buf) {
            rc = sp_error_set(err, SP_ENOMEM, "JPEG encode: out of memory");
        } else {
            memcpy(*buf, jbuf, jlen);
            *len = jlen;
        }
    }
    tjFree(jbuf);
    tjDestroy(tj);
    return rc;
}

/* ---- one write for both ---------------------------------------------------------------- */

/* 1 if path ends in ext (".png"), any case. */
static int ends_with(const char *path, const char *ext) {
    size_t n = strlen(path), k = strlen(ext);
    return n >= k && strcasecmp(path + n - k, ext) == 0;
}

int sp_image_write(const char *path, const sp_image *img, sp_image_format format, int quality,
                   sp_error *err) {
    if (!path) return sp_error_set(err, SP_EINVAL, "image write: NULL path");
    if (format == SP_IMAGE_BY_NAME)
        format = ends_with(path, ".png") ? SP_IMAGE_PNG
               : ends_with(path, ".jpg") || ends_with(path, ".jpeg") ? SP_IMAGE_JPEG
                                                                    : SP_IMAGE_BY_NAME;
    if (format != SP_IMAGE_PNG && format != SP_IMAGE_JPEG)
        return sp_error_set(err, SP_EINVAL, "%s: no image format %s (.png, .jpg or .jpeg)", path,
                            format == SP_IMAGE_BY_NAME ? "by this name" : "of this number");
    uint8_t *buf;
    size_t len;
    int rc = format == SP_IMAGE_PNG ? sp__png_encode(img, &buf, &len, err)
                                    : sp__jpeg_encode(img, quality, &buf, &len, err);
    if (rc) {
        if (err) {   /* "path: PNG encode: why" */
            char msg[SP_ERROR_MSG_MAX];
            snprintf(msg, sizeof msg, "%s", err->msg);
            sp_error_set(err, rc, "%s: %s", path, msg);
        }
        return rc;
    }
    rc = write_all(path, buf, len, err);
    free(buf);
    return rc;
}

/* ---- contact sheet --------------------------------------------------------------------- */

int sp_contact_sheet(const uint8_t *pixels, int count, int h, int w, int c, int cols,
                     sp_image *out, sp_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!pixels || !out || count < 1 || h < 1 || w < 1 || (c != 1 && c != 3) || cols < 1)
        return sp_error_set(err, SP_EINVAL,
                            "contact sheet: bad arguments (count %d, %d x %d x %d, cols %d)",
                            count, h, w, c, cols);
    if (cols > count) cols = count;
    int rows = (count + cols - 1) / cols;
    int64_t W = (int64_t)cols * (w + SP_CONTACT_GAP) + SP_CONTACT_GAP;
    int64_t H = (int64_t)rows * (h + SP_CONTACT_GAP) + SP_CONTACT_GAP;
    if (W > INT_MAX / 3 || H > INT_MAX || (uint64_t)W * (uint64_t)H > (UINT64_C(1) << 32))
        return sp_error_set(err, SP_ELIMIT, "contact sheet: %lld x %lld pixels is too large",
                            (long long)W, (long long)H);
    int rc = sp__image_alloc(out, (int)W, (int)H, 3);
    if (rc) return sp_error_set(err, rc, "contact sheet: out of memory");
    memset(out->data, SP_CONTACT_BG, out->stride * (size_t)out->height);
    size_t tile = (size_t)h * (size_t)w * (size_t)c;
    for (int k = 0; k < count; k++) {
        const uint8_t *src = pixels + (size_t)k * tile;
        size_t x0 = (size_t)SP_CONTACT_GAP + (size_t)(k % cols) * (size_t)(w + SP_CONTACT_GAP);
        size_t y0 = (size_t)SP_CONTACT_GAP + (size_t)(k / cols) * (size_t)(h + SP_CONTACT_GAP);
        for (int y = 0; y < h; y++) {
            uint8_t *dst = out->data + (y0 + (size_t)y) * out->stride + x0 * 3;
            const uint8_t *s = src + (size_t)y * (size_t)w * (size_t)c;
            if (c == 3) {
                memcpy(dst, s, (size_t)w * 3);
            } else {
                for (int x = 0; x < w; x++) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = s[x];
            }
        }
    }
    return SP_OK;
}
