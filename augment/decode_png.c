/* augment/decode_png.c - PNG probe and decode for include/seedpipe/decode.h,
 * through libpng's low-level read API reading from memory.
 *
 * Every colour type and bit depth, palette, tRNS and Adam7 are accepted.
 * libpng only unpacks: palettes are expanded, 1/2/4-bit gray is scaled to
 * 8 bits, 16-bit samples are reduced with png_set_scale_16 (the rule in
 * decode.h); no gamma, sBIT or background transform is ever applied, so the
 * output does not depend on ancillary chunks. Alpha (from the file or from
 * tRNS) is dropped by the shared converter in decode.c.
 *
 * HOW IT WORKS: the IHDR is parsed and CRC-checked here first (that is all
 * a probe does), so the limits and the request are checked before libpng
 * allocates anything. libpng errors longjmp back through our error handler
 * (message kept, warnings ignored), and every resource lives in a context
 * struct that the caller frees on every path. A non-interlaced file is
 * decoded row by row and only the region's rows are kept; decoding stops
 * after the region's last row. An interlaced file is read completely (all
 * seven passes), keeping only the region's rows. When the last image row
 * was read the rest of the file is checked to IEND (png_read_end), so a full
 * decode of a file that is damaged anywhere fails; a region decode may not
 * notice damage after its last row (its pixels are still exact).
 * Reentrant: no global state.
 */
#include "augment/decode_internal.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SP_PNG_CHUNK_MAX (8u << 20)   /* bound on one ancillary chunk's memory */

/* ---- IHDR (probe) ------------------------------------------------------ */

typedef struct sp_png_ihdr {
    uint32_t width, height;
    int depth, color, interlace;
} sp_png_ihdr;

static uint32_t sp_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int sp_png_depth_ok(int color, int depth) {
    switch (color) {
    case 0: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case 3: return depth == 1 || depth == 2 || depth == 4 || depth == 8;
    case 2: case 4: case 6: return depth == 8 || depth == 16;
    default: return 0;
    }
}

/* Parse and check the signature and the IHDR chunk that must follow it.
 * *h is always written (zeroed first), whatever the outcome. */
static int sp_png_parse_ihdr(const uint8_t *buf, size_t len, const char *path,
                             sp_png_ihdr *h, sp_error *err) {
    memset(h, 0, sizeof *h);
    if (len < 8 + 25)
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: file too short for an IHDR", path);
    const uint8_t *c = buf + 8;
    if (sp_be32(c) != 13 || memcmp(c + 4, "IHDR", 4) != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: IHDR: missing or malformed", path);
    if ((uint32_t)crc32(crc32(0L, Z_NULL, 0), c + 4, 17) != sp_be32(c + 21))
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: IHDR: CRC error", path);
    const uint8_t *d = c + 8;
    h->width = sp_be32(d);
    h->height = sp_be32(d + 4);
    h->depth = d[8];
    h->color = d[9];
    h->interlace = d[12];
    if (h->width == 0 || h->height == 0 || h->width > 0x7fffffffu || h->height > 0x7fffffffu)
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: IHDR: invalid size %lux%lu", path,
                            (unsigned long)h->width, (unsigned long)h->height);
    if (!sp_png_depth_ok(h->color, h->depth))
        return sp_error_set(err, SP_EFORMAT,
                            "%s: PNG: IHDR: invalid colour type %d with bit depth %d", path,
                            h->color, h->depth);
    if (d[10] != 0 || d[11] != 0 || h->interlace > 1)
        return sp_error_set(err, SP_EFORMAT,
                            "%s: PNG: IHDR: unknown compression %d, filter %d or interlace %d",
                            path, d[10], d[11], h->interlace);
    return SP_OK;
}

int sp__png_probe(const uint8_t *buf, size_t len, const char *path,
                  const sp_decode_limits *lim, sp_image_info *info, sp_error *err) {
    sp_png_ihdr h;
    int rc = sp_png_parse_ihdr(buf, len, path, &h, err);
    if (rc == SP_OK) rc = sp__decode_check_limits(path, "PNG", h.width, h.height, lim, err);
    if (rc != SP_OK) return rc;
    info->format = SP_FORMAT_PNG;
    info->width = (int)h.width;
    info->height = (int)h.height;
    info->channels = (h.color == 0 || h.color == 4) ? 1 : 3;
    return SP_OK;
}

/* ---- decode ------------------------------------------------------------ */

typedef struct sp_png_ctx {
    const char *path;
    const uint8_t *buf;
    size_t len, pos;
    jmp_buf jb;
    char msg[256];          /* libpng's error message */
    png_structp png;
    png_infop info;
    uint8_t *rows;          /* transformed rows: 1 (sequential) or region height */
} sp_png_ctx;

static void sp_png_on_error(png_structp png, png_const_charp msg) {
    sp_png_ctx *c = (sp_png_ctx *)png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "error");
    longjmp(c->jb, 1);
}

static void sp_png_on_warning(png_structp png, png_const_charp msg) {
    (void)png; (void)msg;   /* benign (ancillary chunks); never printed */
}

static void sp_png_on_read(png_structp png, png_bytep dst, size_t n) {
    sp_png_ctx *c = (sp_png_ctx *)png_get_io_ptr(png);
    if (n > c->len - c->pos) png_error(png, "unexpected end of file (truncated)");
    memcpy(dst, c->buf + c->pos, n);
    c->pos += n;
}

/* All libpng work; a libpng error longjmps to sp_png_guarded(). */
static int sp_png_body(sp_png_ctx *c, const sp_decode_req *req,
                       const sp_decode_limits *lim, const sp__window *win,
                       sp_image *out, sp_error *err) {
    c->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, sp_png_on_error,
                                    sp_png_on_warning);
    if (c->png) c->info = png_create_info_struct(c->png);
    if (!c->png || !c->info)
        return sp_error_set(err, SP_ENOMEM, "%s: PNG: out of memory", c->path);
    png_set_read_fn(c->png, c, sp_png_on_read);
    png_set_user_limits(c->png, lim->max_width, lim->max_height);
    png_set_chunk_malloc_max(c->png, SP_PNG_CHUNK_MAX);
    png_set_keep_unknown_chunks(c->png, PNG_HANDLE_CHUNK_NEVER, NULL, 0);

    png_read_info(c->png, c->info);
    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(c->png, c->info, &w, &h, &depth, &color, &interlace, NULL, NULL);

    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(c->png);
    if ((color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) && depth < 8)
        png_set_expand_gray_1_2_4_to_8(c->png);
    if (depth == 16) png_set_scale_16(c->png);
    int passes = png_set_interlace_handling(c->png);
    png_read_update_info(c->png, c->info);

    int pc = png_get_channels(c->png, c->info);
    size_t rowbytes = png_get_rowbytes(c->png, c->info);
    if (png_get_bit_depth(c->png, c->info) != 8 || pc < 1 || pc > 4 ||
        rowbytes != (size_t)w * (size_t)pc)
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: unexpected row layout after unpacking",
                            c->path);
    static const sp__pixfmt fmts[5] = {SP__PIX_GRAY, SP__PIX_GRAY, SP__PIX_GRAY_ALPHA,
                                       SP__PIX_RGB, SP__PIX_RGBA};
    sp__pixfmt fmt = fmts[pc];

    int rc = sp_image_alloc(out, win->x1 - win->x0, win->y1 - win->y0, req->channels);
    if (rc != SP_OK)
        return sp_error_set(err, rc, "%s: PNG: cannot allocate the %dx%d output", c->path,
                            win->x1 - win->x0, win->y1 - win->y0);
    size_t nrows = (passes > 1) ? (size_t)(win->y1 - win->y0) : 1;
    if (nrows > SIZE_MAX / rowbytes || !(c->rows = malloc(nrows * rowbytes)))
        return sp_error_set(err, SP_ENOMEM, "%s: PNG: out of memory for rows", c->path);

    const size_t ow = (size_t)out->width, xoff = (size_t)win->x0 * (size_t)pc;
    if (passes > 1) {
        /* Adam7: every pass visits rows; libpng merges each pass's pixels
         * into the row we pass, so the region's rows fill up in place. */
        for (int p = 0; p < passes; p++)
            for (png_uint_32 y = 0; y < h; y++) {
                int keep = (int)y >= win->y0 && (int)y < win->y1;
                png_read_row(c->png, keep ? c->rows + (size_t)(y - win->y0) * rowbytes : NULL,
                             NULL);
            }
        for (int y = 0; y < out->height; y++)
            sp__convert_row(c->rows + (size_t)y * rowbytes + xoff, fmt,
                            out->data + (size_t)y * out->stride, out->channels, ow);
    } else {
        for (int y = 0; y < win->y1; y++) {
            int keep = y >= win->y0;
            png_read_row(c->png, keep ? c->rows : NULL, NULL);
            if (keep)
                sp__convert_row(c->rows + xoff, fmt,
                                out->data + (size_t)(y - win->y0) * out->stride,
                                out->channels, ow);
        }
    }
    if (win->y1 == (int)h) png_read_end(c->png, NULL);  /* check to IEND */
    return SP_OK;
}

static int sp_png_guarded(sp_png_ctx *c, const sp_decode_req *req,
                          const sp_decode_limits *lim, const sp__window *win,
                          sp_image *out, sp_error *err) {
    if (setjmp(c->jb))
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: %s", c->path, c->msg);
    return sp_png_body(c, req, lim, win, out, err);
}

int sp__png_decode(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_req *req, const sp_decode_limits *lim,
                   sp_image *out, sp_error *err) {
    sp_png_ihdr ih;
    sp__window win;
    int rc = sp_png_parse_ihdr(buf, len, path, &ih, err);
    if (rc == SP_OK) rc = sp__decode_check_limits(path, "PNG", ih.width, ih.height, lim, err);
    if (rc != SP_OK) return rc;
    if (req->scale_denom != 1)
        return sp_error_set(err, SP_EINVAL,
                            "%s: PNG: scale_denom %d (PNG decodes only at scale 1)", path,
                            req->scale_denom);
    rc = sp__decode_window(path, "PNG", (int)ih.width, (int)ih.height, req, &win, err);
    if (rc != SP_OK) return rc;

    sp_png_ctx c;
    memset(&c, 0, sizeof c);
    c.path = path;
    c.buf = buf;
    c.len = len;
    rc = sp_png_guarded(&c, req, lim, &win, out, err);
    if (c.png) png_destroy_read_struct(&c.png, c.info ? &c.info : NULL, NULL);
    free(c.rows);
    if (rc != SP_OK) sp_image_free(out);
    return rc;
}
