/* augment/decode_png.c - PNG probe and decode for include/seedpipe/decode.h,
 * through libpng's low-level read API reading from memory.
 *
 * Every colour type and bit depth, palette and Adam7 are accepted.
 * libpng only unpacks: 1/2/4-bit gray is scaled to 8 bits, 16-bit samples
 * are reduced with png_set_scale_16 (the rule in decode.h), palette indices
 * are expanded here after a check against the PLTE; no gamma, sBIT or
 * background transform is ever applied, so the output does not depend on
 * ancillary chunks, and libpng skips every one of them unread (tRNS
 * included: alpha is dropped anyway by the shared converter in decode_shared.c).
 *
 * HOW IT WORKS: the IHDR is parsed and CRC-checked here first (that is all
 * a probe does), so the limits and the request are checked before libpng
 * allocates anything; a decode then walks the chunk headers to IEND
 * (pd_walk), so no declared length exceeds the file. libpng errors,
 * benign errors and warnings all longjmp back through our error handler
 * with libpng's message (one policy: a sample is exact or refused), and
 * every resource lives in a context struct that the caller frees on every
 * path. Every row is decoded and only the region's rows are kept (an
 * interlaced file: all seven passes), then the rest of the file is read to
 * IEND (png_read_end), so damage anywhere fails every request whatever the
 * region. Reentrant: no global state.
 */
#include "augment/decode_internal.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "common/common_internal.h"

#define SP_PNG_CHUNK_MAX (8u << 20)   /* bound on one chunk's memory in libpng */
#define SP_PNG_CHUNK_CACHE 64         /* bound on stored ancillary chunks (none are) */

/* ---- IHDR (probe) ------------------------------------------------------ */

typedef struct sp_png_ihdr {
    uint32_t width, height;
    int depth, color, interlace;
} sp_png_ihdr;

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int pd_depth_ok(int color, int depth) {
    switch (color) {
    case 0: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case 3: return depth == 1 || depth == 2 || depth == 4 || depth == 8;
    case 2: case 4: case 6: return depth == 8 || depth == 16;
    default: return 0;
    }
}

/* Parse and check the signature and the IHDR chunk that must follow it.
 * *h is always written (zeroed first), whatever the outcome. */
static int pd_parse_ihdr(const uint8_t *buf, size_t len, const char *path,
                             sp_png_ihdr *h, sp_error *err) {
    memset(h, 0, sizeof *h);
    if (len < 8 + 25)
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: file too short for an IHDR", path);
    const uint8_t *c = buf + 8;
    if (be32(c) != 13 || memcmp(c + 4, "IHDR", 4) != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: IHDR: missing or malformed", path);
    if ((uint32_t)crc32(crc32(0L, Z_NULL, 0), c + 4, 17) != be32(c + 21))
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: IHDR: CRC error", path);
    const uint8_t *d = c + 8;
    h->width = be32(d);
    h->height = be32(d + 4);
    h->depth = d[8];
    h->color = d[9];
    h->interlace = d[12];
    if (h->width == 0 || h->height == 0 || h->width > 0x7fffffffu || h->height > 0x7fffffffu)
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: IHDR: invalid size %lux%lu", path,
                            (unsigned long)h->width, (unsigned long)h->height);
    if (!pd_depth_ok(h->color, h->depth))
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
    int rc = pd_parse_ihdr(buf, len, path, &h, err);
    if (rc == SP_OK) rc = sp__decode_check_limits(path, "PNG", h.width, h.height, lim, err);
    if (rc != SP_OK) return rc;
    info->format = SP_FORMAT_PNG;
    info->width = (int)h.width;
    info->height = (int)h.height;
    info->channels = (h.color == 0 || h.color == 4) ? 1 : 3;
    return SP_OK;
}

/* ---- chunk walk ---------------------------------------------------------- */

/* Every chunk from the signature to IEND, walked before libpng sees the
 * file: a declared length must fit in the bytes that remain and a type
 * must be four ASCII letters. This is what bounds a file by its size: a
 * 60-byte file whose tEXt claims 2 GB is refused here, in microseconds,
 * instead of libpng reading 2 GB through the read callback. A file without
 * IEND (cut at a chunk boundary) is truncated. Bytes after IEND are
 * ignored, as by libpng and Pillow. */
static int pd_walk(const uint8_t *buf, size_t len, const char *path, sp_error *err) {
    size_t pos = 8;
    char prev[5] = "";
    while (len - pos >= 8) {
        uint32_t n = be32(buf + pos);
        char type[5];
        memcpy(type, buf + pos + 4, 4);
        type[4] = '\0';
        for (int i = 0; i < 4; i++) {
            unsigned char ch = (unsigned char)type[i];
            if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z')))
                return sp_error_set(err, SP_EFORMAT,
                                    "%s: PNG: byte %zu: not a chunk type (after chunk '%s')",
                                    path, pos + 4, prev);
        }
        if (n > 0x7fffffffu || (size_t)n > len - pos - 8 || len - pos - 8 - n < 4)
            return sp_error_set(err, SP_EFORMAT,
                                "%s: PNG: chunk '%s' at byte %zu declares %lu bytes, the file "
                                "has %zu left (truncated)", path, type, pos,
                                (unsigned long)n, len - pos - 8);
        if (memcmp(type, "IEND", 4) == 0) return SP_OK;
        memcpy(prev, type, 5);
        pos += 12 + (size_t)n;
    }
    return sp_error_set(err, SP_EFORMAT,
                        "%s: PNG: no IEND chunk: the file ends at byte %zu, after chunk '%s' "
                        "(truncated)", path, len, prev);
}

/* ---- decode ------------------------------------------------------------ */

typedef struct sp_png_ctx {
    const char *path;
    const uint8_t *buf;
    size_t len, pos;
    jmp_buf jb;
    char msg[256];          /* libpng's error or warning message */
    png_structp png;
    png_infop info;
    uint8_t *rows;          /* transformed rows: 1 (sequential) or region height */
    uint8_t *scratch;       /* Adam7 palette files: rows outside the region */
    uint8_t *rgb;           /* palette files: one row expanded to RGB */
    int labels;             /* a label map: indices and grey values kept as they are */
} sp_png_ctx;

static void pd_on_error(png_structp png, png_const_charp msg) {
    sp_png_ctx *c = (sp_png_ctx *)png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "error");
    longjmp(c->jb, 1);
}

/* Warnings and benign errors (png_set_benign_errors(0) makes the latter
 * errors anyway) fail the sample too: with every ancillary chunk skipped
 * unread, what libpng still warns about is the image data or the critical
 * chunks (docs/security.md, "Decoder warnings"). */
static void pd_on_warning(png_structp png, png_const_charp msg) {
    pd_on_error(png, msg);
}

static void pd_on_read(png_structp png, png_bytep dst, size_t n) {
    sp_png_ctx *c = (sp_png_ctx *)png_get_io_ptr(png);
    if (n > c->len - c->pos) png_error(png, "unexpected end of file (truncated)");
    memcpy(dst, c->buf + c->pos, n);
    c->pos += n;
}

/* Chunks skipped without being read into memory (only their CRC is
 * checked): none of them changes a decoded pixel, since no gamma, sBIT or
 * background transform is applied and alpha (tRNS) is dropped. With the
 * negative count libpng ignores every chunk it knows except the critical
 * ones and tRNS; tRNS is added by name. Unknown chunks: the same. */
static void pd_skip_ancillary(png_structp png) {
    static const png_byte trns[] = "tRNS";
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, trns, 1);
}

/* Palette files: libpng hands over the indices (one byte each after
 * png_set_packing) and they are expanded here, each checked against the
 * PLTE: an index past its end is an error in the PNG specification that
 * libpng 1.6 reports only as a benign error after the last row (and misses
 * for index == num_palette). Returns the first bad index's column or -1. */
static int pd_bad_index(const uint8_t *idx, size_t n, int npal) {
    uint8_t mx = 0;
    for (size_t i = 0; i < n; i++) mx = idx[i] > mx ? idx[i] : mx;
    if (mx < npal) return -1;
    for (size_t i = 0; i < n; i++)
        if (idx[i] >= npal) return (int)i;
    return -1;
}

static void pd_index_error(sp_png_ctx *c, const uint8_t *idx, int x, int y, int npal) {
    snprintf(c->msg, sizeof c->msg,
             "palette index %u at row %d, column %d is past the end of the %d-entry PLTE",
             idx[x], y, x, npal);
    longjmp(c->jb, 1);
}

/* One row of the region to the output: indices expanded first. */
static void pd_emit_row(sp_png_ctx *c, const uint8_t *row, sp__pixfmt fmt,
                            const png_color *pal, size_t xoff, uint8_t *dst, int dst_channels,
                            size_t ow) {
    if (c->labels) {
        memcpy(dst, row + xoff, ow);
    } else if (pal) {
        for (size_t i = 0; i < ow; i++) {
            const png_color *e = &pal[row[xoff + i]];
            c->rgb[3 * i] = e->red;
            c->rgb[3 * i + 1] = e->green;
            c->rgb[3 * i + 2] = e->blue;
        }
        sp__convert_row(c->rgb, SP__PIX_RGB, dst, dst_channels, ow);
    } else {
        sp__convert_row(row + xoff, fmt, dst, dst_channels, ow);
    }
}

/* The file's rows after the transforms: their layout (palette indices
 * when pal is set). */
typedef struct pd_layout {
    png_uint_32 w, h;
    png_colorp pal;
    int npal, passes;
    size_t rowbytes, xoff, ow;   /* bytes of a row; the region's first byte and width */
    sp__pixfmt fmt;
} pd_layout;

/* Every row of every pass is read (the region's rows kept, palette indices
 * checked), and the region's rows emitted to out. */
static void pd_read_rows(sp_png_ctx *c, const pd_layout *L, const sp__window *win,
                         sp_image *out) {
    if (L->passes > 1) {
        /* Adam7: every pass visits rows; libpng merges each pass's pixels
         * into the row we pass, so the region's rows fill up in place. A
         * palette file's rows outside the region go through one scratch
         * row, checked after every read (its stale pixels were checked
         * when they were written). */
        for (int p = 0; p < L->passes; p++)
            for (png_uint_32 y = 0; y < L->h; y++) {
                int keep = (int)y >= win->y0 && (int)y < win->y1;
                uint8_t *dst = keep ? c->rows + (size_t)(y - win->y0) * L->rowbytes : c->scratch;
                png_read_row(c->png, dst, NULL);
                int bad = L->pal ? pd_bad_index(dst, L->w, L->npal) : -1;
                if (bad >= 0) pd_index_error(c, dst, bad, (int)y, L->npal);
            }
        for (int y = 0; y < out->height; y++)
            pd_emit_row(c, c->rows + (size_t)y * L->rowbytes, L->fmt, L->pal, L->xoff,
                        out->data + (size_t)y * out->stride, out->channels, L->ow);
    } else {
        for (png_uint_32 y = 0; y < L->h; y++) {
            /* rows outside the region are decoded but not copied out, unless
             * their palette indices must be checked */
            int keep = (int)y >= win->y0 && (int)y < win->y1;
            png_read_row(c->png, keep || L->pal ? c->rows : NULL, NULL);
            int bad = L->pal ? pd_bad_index(c->rows, L->w, L->npal) : -1;
            if (bad >= 0) pd_index_error(c, c->rows, bad, (int)y, L->npal);
            if (keep)
                pd_emit_row(c, c->rows, L->fmt, L->pal, L->xoff,
                            out->data + (size_t)((int)y - win->y0) * out->stride,
                            out->channels, L->ow);
        }
    }
}

/* All libpng work; a libpng error longjmps to pd_guarded(). Every row
 * is decoded and the file is read to IEND whatever the region, so damage
 * anywhere fails every request. */
static int pd_body(sp_png_ctx *c, const sp_decode_req *req,
                       const sp_decode_limits *lim, const sp__window *win,
                       sp_image *out, sp_error *err) {
    c->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, pd_on_error,
                                    pd_on_warning);
    if (c->png) c->info = png_create_info_struct(c->png);
    if (!c->png || !c->info)
        return sp_error_set(err, SP_ENOMEM, "%s: PNG: out of memory", c->path);
    png_set_read_fn(c->png, c, pd_on_read);
    png_set_benign_errors(c->png, 0);
    png_set_user_limits(c->png, lim->max_width, lim->max_height);
    png_set_chunk_malloc_max(c->png, SP_PNG_CHUNK_MAX);
    png_set_chunk_cache_max(c->png, SP_PNG_CHUNK_CACHE);
    pd_skip_ancillary(c->png);

    png_read_info(c->png, c->info);
    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(c->png, c->info, &w, &h, &depth, &color, &interlace, NULL, NULL);

    png_colorp pal = NULL;
    int npal = 0;
    if (c->labels && (depth > 8 || (color != PNG_COLOR_TYPE_GRAY &&
                                    color != PNG_COLOR_TYPE_PALETTE)))
        return sp_error_set(err, SP_EUNSUPP, "%s: a label map must be a grayscale or palette PNG "
                            "of at most 8 bits (this one: colour type %d, bit depth %d)",
                            c->path, color, depth);
    if (c->labels && depth < 8) png_set_packing(c->png);   /* values, not scaled */
    if (color == PNG_COLOR_TYPE_PALETTE) {
        if (!png_get_PLTE(c->png, c->info, &pal, &npal) || npal < 1)
            return sp_error_set(err, SP_EFORMAT, "%s: PNG: palette image without PLTE", c->path);
        if (depth < 8) png_set_packing(c->png);
    }
    if ((color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) && depth < 8 &&
        !c->labels)
        png_set_expand_gray_1_2_4_to_8(c->png);
    if (depth == 16) png_set_scale_16(c->png);
    int passes = png_set_interlace_handling(c->png);
    png_read_update_info(c->png, c->info);

    int pc = png_get_channels(c->png, c->info);
    size_t rowbytes = png_get_rowbytes(c->png, c->info);
    if (png_get_bit_depth(c->png, c->info) != 8 || pc < 1 || pc > 4 || (pal && pc != 1) ||
        rowbytes != (size_t)w * (size_t)pc)
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: unexpected row layout after unpacking",
                            c->path);
    static const sp__pixfmt fmts[5] = {SP__PIX_GRAY, SP__PIX_GRAY, SP__PIX_GRAY_ALPHA,
                                       SP__PIX_RGB, SP__PIX_RGBA};
    sp__pixfmt fmt = fmts[pc];

    int rc = sp__image_alloc(out, win->x1 - win->x0, win->y1 - win->y0, req->channels);
    if (rc != SP_OK)
        return sp_error_set(err, rc, "%s: PNG: cannot allocate the %dx%d output", c->path,
                            win->x1 - win->x0, win->y1 - win->y0);
    const size_t ow = (size_t)out->width, xoff = (size_t)win->x0 * (size_t)pc;
    size_t nrows = (passes > 1) ? (size_t)(win->y1 - win->y0) : 1;
    /* zeroed: an Adam7 row holds index 0 until a pass writes its pixel */
    if (nrows > SIZE_MAX / rowbytes || !(c->rows = calloc(nrows, rowbytes)) ||
        (pal && (!(c->scratch = calloc(1, rowbytes)) ||
                 (!c->labels && !(c->rgb = malloc(ow * 3))))))
        return sp_error_set(err, SP_ENOMEM, "%s: PNG: out of memory for rows", c->path);

    const pd_layout L = {w, h, pal, npal, passes, rowbytes, xoff, ow, fmt};
    pd_read_rows(c, &L, win, out);
    png_read_end(c->png, NULL);  /* to IEND: trailing chunks' CRCs, extra data */
    return SP_OK;
}

static int pd_guarded(sp_png_ctx *c, const sp_decode_req *req,
                          const sp_decode_limits *lim, const sp__window *win,
                          sp_image *out, sp_error *err) {
    if (setjmp(c->jb))
        return sp_error_set(err, SP_EFORMAT, "%s: PNG: %s", c->path, c->msg);
    return pd_body(c, req, lim, win, out, err);
}

static int pd_decode(const uint8_t *buf, size_t len, const char *path,
                     const sp_decode_req *req, const sp_decode_limits *lim, int labels,
                     sp_image *out, sp_error *err) {
    sp_png_ihdr ih;
    sp__window win;
    int rc = pd_parse_ihdr(buf, len, path, &ih, err);
    if (rc == SP_OK) rc = sp__decode_check_limits(path, "PNG", ih.width, ih.height, lim, err);
    if (rc != SP_OK) return rc;
    if (req->scale_denom != 1)
        return sp_error_set(err, SP_EINVAL,
                            "%s: PNG: scale_denom %d (PNG decodes only at scale 1)", path,
                            req->scale_denom);
    rc = sp__decode_window(path, "PNG", (int)ih.width, (int)ih.height, req, &win, err);
    if (rc == SP_OK) rc = pd_walk(buf, len, path, err);
    if (rc != SP_OK) return rc;

    sp_png_ctx c;
    memset(&c, 0, sizeof c);
    c.path = path;
    c.buf = buf;
    c.len = len;
    c.labels = labels;
    rc = pd_guarded(&c, req, lim, &win, out, err);
    if (c.png) png_destroy_read_struct(&c.png, c.info ? &c.info : NULL, NULL);
    free(c.rows);
    free(c.scratch);
    free(c.rgb);
    if (rc != SP_OK) sp_image_free(out);
    return rc;
}

int sp__png_decode(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_req *req, const sp_decode_limits *lim,
                   sp_image *out, sp_error *err) {
    return pd_decode(buf, len, path, req, lim, 0, out, err);
}

/* A label map: one byte per pixel, the grey value or the palette index as
 * stored (1/2/4-bit values unpacked, never scaled; no palette lookup, each
 * index still checked against the PLTE); 16-bit, alpha and colour maps
 * are refused by name. The same checks and reading to IEND as a decode. */
int sp__png_decode_labels(const uint8_t *buf, size_t len, const char *path,
                          sp_image *out, sp_error *err) {
    sp_decode_limits lim;
    sp__decode_limits_default(&lim);
    sp_decode_req req = {1, 0, 0, 0, 0, 1};
    memset(out, 0, sizeof *out);
    if (len < 8 || memcmp(buf, "\x89PNG\r\n\x1a\n", 8) != 0)
        return sp_error_set(err, SP_EUNSUPP, "%s: a label map must be a PNG file", path);
    return pd_decode(buf, len, path, &req, &lim, 1, out, err);
}
