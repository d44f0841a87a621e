/* augment/decode_tiff.c - TIFF probe and decode for include/seedpipe/decode.h,
 * through libtiff (TIFFClientOpenExt reading from memory).
 *
 * Accepted: the first image of the file, 8 bits per sample, unsigned,
 * interleaved (PLANARCONFIG_CONTIG): grey (MINISBLACK, 1 sample, or 2 with
 * an unassociated alpha) and RGB (3 samples, or 4 with an unassociated
 * alpha), in strips or tiles, with any compression libtiff was built with
 * (none, LZW, deflate, PackBits, ...) and either predictor. Alpha is dropped
 * as for PNG. Refused by name (SP_EUNSUPP): other depths, sample formats,
 * photometric interpretations (palette, YCbCr, CMYK, MINISWHITE...), planar
 * files, premultiplied (associated) alpha, codecs libtiff lacks.
 *
 * HOW IT WORKS: libtiff reads through callbacks over the buffer; its error
 * and warning handlers are set per handle (TIFFOpenOptions, libtiff >= 4.5),
 * so nothing is printed and no global state is touched: the first message
 * is kept, and any message, warning or error, fails the sample (the policy
 * of decode.h: a file the library had to patch up is refused). libtiff's
 * own allocations are capped at max_bytes (TIFFOpenOptionsSetMaxSingleMemAlloc).
 * A decode reads every strip or tile of the image, whatever the region,
 * with TIFFReadEncodedStrip / TIFFReadEncodedTile, each of which must
 * deliver its full size (a short one is truncated), into one buffer of the
 * whole image (w * h * samples bytes, within the limits), then the
 * region's rows are converted by the shared converter. Reentrant.
 */
#include "augment/decode_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tiffio.h>
#include "common/common_internal.h"

typedef struct sp_tiff_ctx {
    const char *path;
    const uint8_t *buf;
    size_t len, pos;
    int failed;             /* libtiff reported an error or a warning */
    char msg[256];          /* the first one */
    TIFF *tif;
    uint32_t w, h;
    uint16_t spp, photometric;
} sp_tiff_ctx;

/* ---- libtiff callbacks ----------------------------------------------------- */

static int td_on_message(TIFF *tif, void *user, const char *module, const char *fmt,
                         va_list ap) {
    (void)tif;
    sp_tiff_ctx *c = (sp_tiff_ctx *)user;
    if (!c->failed) {
        int n = snprintf(c->msg, sizeof c->msg, "%s: ", module ? module : "libtiff");
        if (n < 0 || (size_t)n >= sizeof c->msg) n = 0;
        vsnprintf(c->msg + n, sizeof c->msg - (size_t)n, fmt, ap);
    }
    c->failed = 1;
    return 1;   /* handled: the global handlers (stderr) are not called */
}

static tmsize_t td_read(thandle_t h, void *dst, tmsize_t n) {
    sp_tiff_ctx *c = (sp_tiff_ctx *)h;
    size_t left = c->len - c->pos, k = n < 0 ? 0 : (size_t)n;
    if (k > left) k = left;
    memcpy(dst, c->buf + c->pos, k);
    c->pos += k;
    return (tmsize_t)k;
}

static tmsize_t td_write(thandle_t h, void *src, tmsize_t n) {
    (void)h; (void)src; (void)n;
    return -1;
}

static toff_t td_seek(thandle_t h, toff_t off, int whence) {
    sp_tiff_ctx *c = (sp_tiff_ctx *)h;
    uint64_t base = whence == SEEK_CUR ? c->pos : whence == SEEK_END ? c->len : 0;
    if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) return (toff_t)-1;
    if (off > UINT64_MAX - base || base + off > c->len) return (toff_t)-1;
    c->pos = (size_t)(base + off);
    return (toff_t)c->pos;
}

static int td_close(thandle_t h) { (void)h; return 0; }
static toff_t td_size(thandle_t h) { return (toff_t)((sp_tiff_ctx *)h)->len; }
static int td_map(thandle_t h, void **base, toff_t *size) {
    (void)h; (void)base; (void)size;
    return 0;   /* not mapped: every read goes through td_read */
}
static void td_unmap(thandle_t h, void *base, toff_t size) { (void)h; (void)base; (void)size; }

/* ---- open and check -------------------------------------------------------- */

static int td_fail(sp_tiff_ctx *c, sp_error *err) {
    return sp_error_set(err, SP_EFORMAT, "%s: TIFF: %s", c->path,
                        c->failed ? c->msg : "unreadable file");
}

/* Open the first directory and check the layout and the limits. */
static int td_open(sp_tiff_ctx *c, const sp_decode_limits *lim, sp_error *err) {
    TIFFOpenOptions *o = TIFFOpenOptionsAlloc();
    if (!o) return sp_error_set(err, SP_ENOMEM, "%s: TIFF: out of memory", c->path);
    TIFFOpenOptionsSetMaxSingleMemAlloc(o, (tmsize_t)lim->max_bytes);
    TIFFOpenOptionsSetErrorHandlerExtR(o, td_on_message, c);
    TIFFOpenOptionsSetWarningHandlerExtR(o, td_on_message, c);
    c->tif = TIFFClientOpenExt(c->path, "rm", (thandle_t)c, td_read, td_write, td_seek,
                               td_close, td_size, td_map, td_unmap, o);
    TIFFOpenOptionsFree(o);
    if (!c->tif || c->failed) return td_fail(c, err);
    uint16_t bps = 0, planar = 0, fmt = 0, comp = 0, nextra = 0, *extra = NULL;
    if (!TIFFGetField(c->tif, TIFFTAG_IMAGEWIDTH, &c->w) ||
        !TIFFGetField(c->tif, TIFFTAG_IMAGELENGTH, &c->h) ||
        !TIFFGetField(c->tif, TIFFTAG_PHOTOMETRIC, &c->photometric) || c->w == 0 || c->h == 0)
        return sp_error_set(err, SP_EFORMAT, "%s: TIFF: no image size or photometric tag",
                            c->path);
    TIFFGetFieldDefaulted(c->tif, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted(c->tif, TIFFTAG_SAMPLESPERPIXEL, &c->spp);
    TIFFGetFieldDefaulted(c->tif, TIFFTAG_PLANARCONFIG, &planar);
    TIFFGetFieldDefaulted(c->tif, TIFFTAG_SAMPLEFORMAT, &fmt);
    TIFFGetFieldDefaulted(c->tif, TIFFTAG_COMPRESSION, &comp);
    TIFFGetFieldDefaulted(c->tif, TIFFTAG_EXTRASAMPLES, &nextra, &extra);
    int base = c->photometric == PHOTOMETRIC_MINISBLACK ? 1
             : c->photometric == PHOTOMETRIC_RGB ? 3 : 0;
    if (!base || bps != 8 || fmt != SAMPLEFORMAT_UINT ||
        (c->spp != base && c->spp != base + 1) ||
        (c->spp > 1 && planar != PLANARCONFIG_CONTIG))
        return sp_error_set(err, SP_EUNSUPP, "%s: TIFF: photometric %u with %u samples of %u "
                            "bits (format %u, planar %u) is not supported (8-bit grey or RGB, "
                            "interleaved)", c->path, c->photometric, c->spp, bps, fmt, planar);
    if (c->spp == base + 1 && nextra >= 1 && extra && extra[0] == EXTRASAMPLE_ASSOCALPHA)
        return sp_error_set(err, SP_EUNSUPP, "%s: TIFF: premultiplied (associated) alpha is "
                            "not supported", c->path);
    if (!TIFFIsCODECConfigured(comp))
        return sp_error_set(err, SP_EUNSUPP, "%s: TIFF: compression %u is not available",
                            c->path, comp);
    if (c->failed) return td_fail(c, err);
    uint32_t tw = 0, th = 0;
    if (TIFFIsTiled(c->tif) &&
        (!TIFFGetField(c->tif, TIFFTAG_TILEWIDTH, &tw) ||
         !TIFFGetField(c->tif, TIFFTAG_TILELENGTH, &th) || tw == 0 || th == 0 ||
         (uint64_t)tw * th * c->spp > lim->max_bytes))
        return sp_error_set(err, tw && th ? SP_ELIMIT : SP_EFORMAT, "%s: TIFF: tiles of "
                            "%lux%lu", c->path, (unsigned long)tw, (unsigned long)th);
    return sp__decode_check_limits(c->path, "TIFF", c->w, c->h, lim, err);
}

static void td_close_ctx(sp_tiff_ctx *c) {
    if (c->tif) TIFFClose(c->tif);
    c->tif = NULL;
}

static void td_init(sp_tiff_ctx *c, const uint8_t *buf, size_t len, const char *path) {
    memset(c, 0, sizeof *c);
    c->path = path;
    c->buf = buf;
    c->len = len;
}

int sp__tiff_probe(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_limits *lim, sp_image_info *info, sp_error *err) {
    sp_tiff_ctx c;
    td_init(&c, buf, len, path);
    int rc = td_open(&c, lim, err);
    if (rc == SP_OK) {
        info->format = SP_FORMAT_TIFF;
        info->width = (int)c.w;
        info->height = (int)c.h;
        info->channels = c.photometric == PHOTOMETRIC_MINISBLACK ? 1 : 3;
    }
    td_close_ctx(&c);
    return rc;
}

/* ---- decode ---------------------------------------------------------------- */

/* Every strip into pix (w * h * spp bytes). */
static int td_read_strips(sp_tiff_ctx *c, uint8_t *pix, sp_error *err) {
    uint32_t rps = 0;
    TIFFGetFieldDefaulted(c->tif, TIFFTAG_ROWSPERSTRIP, &rps);
    if (rps == 0 || rps > c->h) rps = c->h;
    size_t scan = (size_t)c->w * c->spp;
    uint32_t n = TIFFNumberOfStrips(c->tif);
    if (n != (c->h + rps - 1) / rps)
        return sp_error_set(err, SP_EFORMAT, "%s: TIFF: %lu strips for %lu rows of %lu",
                            c->path, (unsigned long)n, (unsigned long)c->h, (unsigned long)rps);
    for (uint32_t s = 0; s < n; s++) {
        uint32_t rows = c->h - s * rps < rps ? c->h - s * rps : rps;
        tmsize_t want = (tmsize_t)(rows * scan);
        tmsize_t got = TIFFReadEncodedStrip(c->tif, s, pix + (size_t)s * rps * scan, want);
        if (c->failed || got < 0) return td_fail(c, err);
        if (got != want)
            return sp_error_set(err, SP_EFORMAT, "%s: TIFF: strip %lu gave %lld of %lld bytes "
                                "(truncated)", c->path, (unsigned long)s, (long long)got,
                                (long long)want);
    }
    return SP_OK;
}

/* Every tile, its part inside the image copied into pix. */
static int td_read_tiles(sp_tiff_ctx *c, uint8_t *pix, sp_error *err) {
    uint32_t tw = 0, th = 0;
    TIFFGetField(c->tif, TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(c->tif, TIFFTAG_TILELENGTH, &th);
    uint64_t tbytes = (uint64_t)tw * th * c->spp;   /* checked by td_open */
    uint8_t *tile = malloc((size_t)tbytes);
    if (!tile) return sp_error_set(err, SP_ENOMEM, "%s: TIFF: out of memory", c->path);
    size_t scan = (size_t)c->w * c->spp;
    int rc = SP_OK;
    for (uint32_t y = 0; rc == SP_OK && y < c->h; y += th)
        for (uint32_t x = 0; rc == SP_OK && x < c->w; x += tw) {
            tmsize_t got = TIFFReadEncodedTile(c->tif, TIFFComputeTile(c->tif, x, y, 0, 0),
                                               tile, (tmsize_t)tbytes);
            if (c->failed || got < 0) {
                rc = td_fail(c, err);
            } else if ((uint64_t)got != tbytes) {
                rc = sp_error_set(err, SP_EFORMAT, "%s: TIFF: tile at %lu,%lu gave %lld of "
                                  "%llu bytes (truncated)", c->path, (unsigned long)x,
                                  (unsigned long)y, (long long)got, (unsigned long long)tbytes);
            } else {
                uint32_t cw = c->w - x < tw ? c->w - x : tw, ch = c->h - y < th ? c->h - y : th;
                for (uint32_t r = 0; r < ch; r++)
                    memcpy(pix + (size_t)(y + r) * scan + (size_t)x * c->spp,
                           tile + (size_t)r * tw * c->spp, (size_t)cw * c->spp);
            }
        }
    free(tile);
    return rc;
}

int sp__tiff_decode(const uint8_t *buf, size_t len, const char *path,
                    const sp_decode_req *req, const sp_decode_limits *lim,
                    sp_image *out, sp_error *err) {
    sp_tiff_ctx c;
    sp__window win;
    uint8_t *pix = NULL;
    td_init(&c, buf, len, path);
    int rc = td_open(&c, lim, err);
    if (rc == SP_OK && req->scale_denom != 1)
        rc = sp_error_set(err, SP_EINVAL, "%s: TIFF: scale_denom %d (TIFF decodes only at "
                          "scale 1)", path, req->scale_denom);
    if (rc == SP_OK) rc = sp__decode_window(path, "TIFF", (int)c.w, (int)c.h, req, &win, err);
    size_t scan = (size_t)c.w * c.spp;
    if (rc == SP_OK && !(pix = malloc(scan * c.h)))   /* within the limits: w * h * 4 */
        rc = sp_error_set(err, SP_ENOMEM, "%s: TIFF: out of memory", path);
    if (rc == SP_OK)
        rc = TIFFIsTiled(c.tif) ? td_read_tiles(&c, pix, err)
                                : td_read_strips(&c, pix, err);
    if (rc == SP_OK) {
        rc = sp__image_alloc(out, win.x1 - win.x0, win.y1 - win.y0, req->channels);
        if (rc != SP_OK)
            sp_error_set(err, rc, "%s: TIFF: cannot allocate the %dx%d output", path,
                         win.x1 - win.x0, win.y1 - win.y0);
    }
    if (rc == SP_OK) {
        static const sp__pixfmt FMTS[5] = {SP__PIX_GRAY, SP__PIX_GRAY, SP__PIX_GRAY_ALPHA,
                                           SP__PIX_RGB, SP__PIX_RGBA};
        for (int y = win.y0; y < win.y1; y++)
            sp__convert_row(pix + (size_t)y * scan + (size_t)win.x0 * c.spp, FMTS[c.spp],
                            out->data + (size_t)(y - win.y0) * out->stride, out->channels,
                            (size_t)out->width);
    }
    free(pix);
    td_close_ctx(&c);
    if (rc != SP_OK) sp_image_free(out);
    return rc;
}
