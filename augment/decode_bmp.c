/* augment/decode_bmp.c - BMP probe and decode for include/seedpipe/decode.h,
 * written here (no library: the format is a header, a palette and rows).
 *
 * Accepted: the Windows headers (BITMAPINFOHEADER and its 52-, 56-, 108-
 * and 124-byte successors) and the 12-byte OS/2 core header; 1/4/8-bit
 * palette images (grey ones too: a grey palette is a palette), 24-bit, and
 * 32-bit BI_RGB or BI_BITFIELDS with the standard masks (R 0x00ff0000,
 * G 0x0000ff00, B 0x000000ff; alpha 0 or 0xff000000), bottom-up (positive
 * height) or top-down (negative). The fourth byte of a 32-bit pixel is
 * dropped, as the PNG path drops alpha. Pixels are those Pillow's
 * Image.convert("RGB") gives. Refused by name with SP_EUNSUPP: RLE4/RLE8,
 * embedded JPEG/PNG, 16-bit pixels, other bit-field masks.
 *
 * HOW IT WORKS: bmp_parse reads the file header and the info header and
 * bounds-checks every field against the file size before anything is
 * allocated: the header must fit, the palette must lie between the header
 * and the pixel offset, and offset + stride * height must not pass the end
 * (a short file is truncated, SP_EFORMAT). Every row is then read straight
 * from the buffer; every palette index of every row is checked against the
 * palette (an index past it is an error, as for PNG, whatever the region),
 * and only the region's rows are converted by the shared converter.
 * Reentrant: no global state.
 */
#include "augment/decode_internal.h"

#include <stdlib.h>
#include <string.h>
#include "common/common_internal.h"

typedef struct sp_bmp {
    uint32_t width, height;
    int top_down;
    int bits;
    uint64_t offset, stride;   /* pixel data start; bytes per row (4-aligned) */
    int ncolors;               /* palette entries (bits <= 8) */
    uint8_t pal[256][3];       /* R G B */
    int grey;                  /* every palette entry has R == G == B */
} sp_bmp;

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8); }

/* Compression and masks: 0 if accepted (*masks_len = bytes of masks after
 * a 40-byte header), else the named refusal. */
static int bmp_compression(const uint8_t *buf, size_t len, uint32_t hsize, uint32_t comp,
                           int bits, size_t *masks_len, const char *path, sp_error *err) {
    static const char *const NAMES[] = {"BI_RGB", "RLE8", "RLE4", "BI_BITFIELDS",
                                        "embedded JPEG", "embedded PNG", "BI_ALPHABITFIELDS"};
    *masks_len = 0;
    if (comp == 0) return SP_OK;
    if (comp != 3 || bits != 32)
        return sp_error_set(err, SP_EUNSUPP, "%s: BMP: %d-bit %s compression is not supported",
                            path, bits, comp < 7 ? NAMES[comp] : "unknown");
    const uint8_t *m;
    if (hsize >= 52) {
        m = buf + 14 + 40;
    } else {   /* 40-byte header: three masks follow it */
        if (len < 14 + 40 + 12)
            return sp_error_set(err, SP_EFORMAT, "%s: BMP: bit-field masks past the end of "
                                "the file (truncated)", path);
        m = buf + 14 + 40;
        *masks_len = 12;
    }
    uint32_t a = hsize >= 56 ? le32(m + 12) : 0;
    if (le32(m) != 0x00ff0000u || le32(m + 4) != 0x0000ff00u || le32(m + 8) != 0x000000ffu ||
        (a != 0 && a != 0xff000000u))
        return sp_error_set(err, SP_EUNSUPP, "%s: BMP: bit-field masks R %08x G %08x B %08x "
                            "A %08x are not the standard 32-bit ones", path, le32(m),
                            le32(m + 4), le32(m + 8), a);
    return SP_OK;
}

/* The palette: ncolors entries of esize bytes (B G R [X]) at pos, which must
 * end at or before the pixel offset. */
static int bmp_palette(const uint8_t *buf, sp_bmp *b, uint32_t used, size_t pos, size_t esize,
                       const char *path, sp_error *err) {
    uint32_t n = used ? used : (1u << b->bits);
    if (n > (1u << b->bits))
        return sp_error_set(err, SP_EFORMAT, "%s: BMP: %lu palette entries for %d-bit pixels",
                            path, (unsigned long)n, b->bits);
    if ((uint64_t)pos + (uint64_t)n * esize > b->offset)
        return sp_error_set(err, SP_EFORMAT, "%s: BMP: the %lu-entry palette runs past the "
                            "pixel data offset %llu", path, (unsigned long)n,
                            (unsigned long long)b->offset);
    b->ncolors = (int)n;
    b->grey = 1;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = buf + pos + i * esize;
        b->pal[i][0] = e[2];
        b->pal[i][1] = e[1];
        b->pal[i][2] = e[0];
        if (e[0] != e[1] || e[1] != e[2]) b->grey = 0;
    }
    return SP_OK;
}

/* Parse and bounds-check everything; *b is written (zeroed first). */
static int bmp_parse(const uint8_t *buf, size_t len, const char *path,
                     const sp_decode_limits *lim, sp_bmp *b, sp_error *err) {
    memset(b, 0, sizeof *b);
    if (len < 14 + 12)
        return sp_error_set(err, SP_EFORMAT, "%s: BMP: file too short for its headers", path);
    uint32_t hsize = le32(buf + 14);
    if (hsize != 12 && hsize != 40 && hsize != 52 && hsize != 56 && hsize != 108 &&
        hsize != 124)
        return sp_error_set(err, SP_EUNSUPP, "%s: BMP: info header of %lu bytes is not a "
                            "known version", path, (unsigned long)hsize);
    if (len < 14 + (size_t)hsize)
        return sp_error_set(err, SP_EFORMAT, "%s: BMP: the %lu-byte info header runs past the "
                            "end of the %zu-byte file (truncated)", path,
                            (unsigned long)hsize, len);
    const uint8_t *h = buf + 14;
    int64_t w, hh;
    uint32_t comp = 0, used = 0;
    if (hsize == 12) {
        w = le16(h + 4);
        hh = le16(h + 6);
        b->bits = (int)le16(h + 10);
    } else {
        w = (int32_t)le32(h + 4);
        hh = (int32_t)le32(h + 8);
        b->bits = (int)le16(h + 14);
        comp = le32(h + 16);
        used = le32(h + 32);
    }
    b->top_down = hh < 0;
    if (hh < 0) hh = -hh;
    if (w <= 0 || hh <= 0 || w > 0x7fffffff || hh > 0x7fffffff)
        return sp_error_set(err, SP_EFORMAT, "%s: BMP: invalid size %lldx%lld", path,
                            (long long)w, (long long)hh);
    b->width = (uint32_t)w;
    b->height = (uint32_t)hh;
    if (b->bits != 1 && b->bits != 4 && b->bits != 8 && b->bits != 24 && b->bits != 32)
        return sp_error_set(err, b->bits == 16 ? SP_EUNSUPP : SP_EFORMAT,
                            "%s: BMP: %d bits per pixel is not supported", path, b->bits);
    if (b->top_down && comp != 0 && comp != 3)
        return sp_error_set(err, SP_EFORMAT, "%s: BMP: a top-down file cannot be compressed",
                            path);
    size_t masks_len;
    int rc = bmp_compression(buf, len, hsize, comp, b->bits, &masks_len, path, err);
    if (rc == SP_OK) rc = sp__decode_check_limits(path, "BMP", b->width, b->height, lim, err);
    if (rc != SP_OK) return rc;
    b->offset = le32(buf + 10);
    b->stride = (((uint64_t)b->width * (uint64_t)b->bits + 31) / 32) * 4;
    size_t pal_pos = 14 + (size_t)hsize + masks_len;
    if (b->offset < pal_pos)
        return sp_error_set(err, SP_EFORMAT, "%s: BMP: pixel data offset %llu lies inside the "
                            "headers", path, (unsigned long long)b->offset);
    if (b->offset > len || b->stride * b->height > (uint64_t)len - b->offset)
        return sp_error_set(err, SP_EFORMAT, "%s: BMP: %lu rows of %llu bytes at offset %llu "
                            "run past the end of the %zu-byte file (truncated)", path,
                            (unsigned long)b->height, (unsigned long long)b->stride,
                            (unsigned long long)b->offset, len);
    if (b->bits <= 8)
        return bmp_palette(buf, b, used, pal_pos, hsize == 12 ? 3 : 4, path, err);
    return SP_OK;
}

int sp__bmp_probe(const uint8_t *buf, size_t len, const char *path,
                  const sp_decode_limits *lim, sp_image_info *info, sp_error *err) {
    sp_bmp *b = malloc(sizeof *b);
    if (!b) return sp_error_set(err, SP_ENOMEM, "%s: BMP: out of memory", path);
    int rc = bmp_parse(buf, len, path, lim, b, err);
    if (rc == SP_OK) {
        info->format = SP_FORMAT_BMP;
        info->width = (int)b->width;
        info->height = (int)b->height;
        info->channels = (b->bits <= 8 && b->grey) ? 1 : 3;
    }
    free(b);
    return rc;
}

/* One file row (y counted from the top) to RGB in `rgb` (n = width pixels),
 * checking palette indices: returns the first bad column, or -1. */
static int bmp_row_rgb(const sp_bmp *b, const uint8_t *src, uint8_t *rgb) {
    size_t n = b->width;
    if (b->bits >= 24) {
        size_t step = (size_t)b->bits / 8;
        for (size_t i = 0; i < n; i++) {
            rgb[3 * i] = src[step * i + 2];
            rgb[3 * i + 1] = src[step * i + 1];
            rgb[3 * i + 2] = src[step * i];
        }
        return -1;
    }
    int per = 8 / b->bits, mask = (1 << b->bits) - 1;
    for (size_t i = 0; i < n; i++) {
        int shift = 8 - b->bits * (int)(i % (size_t)per + 1);
        int idx = (src[i / (size_t)per] >> shift) & mask;
        if (idx >= b->ncolors) return (int)i;
        memcpy(rgb + 3 * i, b->pal[idx], 3);
    }
    return -1;
}

int sp__bmp_decode(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_req *req, const sp_decode_limits *lim,
                   sp_image *out, sp_error *err) {
    sp__window win;
    sp_bmp *b = malloc(sizeof *b);
    uint8_t *rgb = NULL;
    if (!b) return sp_error_set(err, SP_ENOMEM, "%s: BMP: out of memory", path);
    int rc = bmp_parse(buf, len, path, lim, b, err);
    if (rc == SP_OK && req->scale_denom != 1)
        rc = sp_error_set(err, SP_EINVAL, "%s: BMP: scale_denom %d (BMP decodes only at "
                          "scale 1)", path, req->scale_denom);
    if (rc == SP_OK)
        rc = sp__decode_window(path, "BMP", (int)b->width, (int)b->height, req, &win, err);
    if (rc == SP_OK && !(rgb = malloc((size_t)b->width * 3)))
        rc = sp_error_set(err, SP_ENOMEM, "%s: BMP: out of memory for a row", path);
    if (rc == SP_OK) {
        rc = sp__image_alloc(out, win.x1 - win.x0, win.y1 - win.y0, req->channels);
        if (rc != SP_OK)
            sp_error_set(err, rc, "%s: BMP: cannot allocate the %dx%d output", path,
                         win.x1 - win.x0, win.y1 - win.y0);
    }
    for (uint32_t y = 0; rc == SP_OK && y < b->height; y++) {
        uint32_t fy = b->top_down ? y : b->height - 1 - y;   /* row in file order */
        int keep = (int)y >= win.y0 && (int)y < win.y1;
        if (!keep && b->bits > 8) continue;   /* nothing to check in a skipped RGB row */
        int bad = bmp_row_rgb(b, buf + b->offset + (uint64_t)fy * b->stride, rgb);
        if (bad >= 0)
            rc = sp_error_set(err, SP_EFORMAT, "%s: BMP: palette index at row %lu, column %d "
                              "is past the end of the %d-entry palette", path,
                              (unsigned long)y, bad, b->ncolors);
        else if (keep)
            sp__convert_row(rgb + (size_t)win.x0 * 3, SP__PIX_RGB,
                            out->data + (size_t)((int)y - win.y0) * out->stride,
                            out->channels, (size_t)out->width);
    }
    free(rgb);
    free(b);
    if (rc != SP_OK) sp_image_free(out);
    return rc;
}
