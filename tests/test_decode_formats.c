/* test_decode_formats.c - the decoders after PNG and JPEG (decode.h): BMP,
 * WebP and TIFF.
 *
 * What it asserts:
 *  - BMP files written here (1/4/8-bit palette, 24-bit, 32-bit BI_RGB and
 *    BI_BITFIELDS, 40- and 124-byte headers, bottom-up and top-down, odd
 *    widths so rows are padded) probe to their size and decode to the
 *    pixels they were written from, RGB and gray (the luma rule), and a
 *    region equals the same crop of the full decode.
 *  - Refusals by name: RLE and odd bit-field masks are SP_EUNSUPP; a file
 *    cut short anywhere, a header whose offset or palette points past the
 *    end, a palette index past the palette are SP_EFORMAT naming the path;
 *    a header declaring 100000 x 100000 is SP_ELIMIT; nothing crashes.
 *  - WebP files encoded here with libwebp (lossless: decode equals the
 *    picture; lossy, with and without alpha: decode equals libwebp's own
 *    WebPDecodeRGB) at odd sizes, RGB, gray and a region; cut anywhere, a
 *    RIFF or chunk size past the end: SP_EFORMAT naming the path; an animated header SP_EUNSUPP; small limits SP_ELIMIT.
 *  - TIFF files written here with libtiff (grey, grey+alpha, RGB, RGBA;
 *    uncompressed, LZW with the horizontal predictor, deflate, PackBits;
 *    strips of 3 rows and 16x16 tiles; odd sizes) decode to their picture,
 *    RGB, gray and a region; cut anywhere, an IFD or a strip past the end:
 *    SP_EFORMAT naming the path; 16-bit samples SP_EUNSUPP; and libtiff
 *    prints nothing to stderr on any of them.
 * Pixel equality against Pillow is bindings/python/tests/test_decode_formats.py.
 * Cases (tests/runner.h): test_bmp_pixels, test_bmp_hostile, test_webp_pixels,
 * test_webp_hostile, test_tiff_pixels, test_tiff_hostile.
 */
#include "seedpipe/decode.h"
#include "check.h"
#include "runner.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tiffio.h>

#include <webp/decode.h>
#include <webp/encode.h>
#include "augment/decode_internal.h"

/* ---- helpers ------------------------------------------------------------ */

/* A deterministic test picture: w x h RGB. */
static uint8_t *make_rgb(int w, int h, uint32_t seed) {
    uint8_t *p = malloc((size_t)w * h * 3);
    CHECK(p);
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (uint8_t)(s >> 24);
    }
    return p;
}

static uint8_t luma(const uint8_t *p) {
    return (uint8_t)((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 32768u) >> 16);
}

/* Decode full RGB and gray and a region; check against `want` (RGB). */
static void check_decode(const uint8_t *buf, size_t len, int w, int h, const uint8_t *want,
                         sp_format fmt) {
    sp_image_info info;
    sp_error err;
    CHECK_OK(sp__image_probe(buf, len, "t", NULL, &info, &err), &err);
    CHECK(info.format == fmt && info.width == w && info.height == h);
    sp_decode_req rq = {3, 0, 0, 0, 0, 1};
    sp_image im, g, r;
    CHECK_OK(sp__image_decode(buf, len, "t", &rq, NULL, &im, &err), &err);
    CHECK(im.width == w && im.height == h && im.channels == 3);
    for (int y = 0; y < h; y++)
        CHECK_MSG(memcmp(im.data + (size_t)y * im.stride, want + (size_t)y * w * 3,
                         (size_t)w * 3) == 0, "row %d differs", y);
    rq.channels = 1;
    CHECK_OK(sp__image_decode(buf, len, "t", &rq, NULL, &g, &err), &err);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            CHECK(g.data[(size_t)y * g.stride + x] == luma(want + ((size_t)y * w + x) * 3));
    sp_decode_req rr = {3, w / 3, h / 4, w / 2 ? w / 2 : 1, h / 2 ? h / 2 : 1, 1};
    CHECK_OK(sp__image_decode(buf, len, "t", &rr, NULL, &r, &err), &err);
    CHECK(r.width == rr.w && r.height == rr.h);
    for (int y = 0; y < rr.h; y++)
        CHECK(memcmp(r.data + (size_t)y * r.stride,
                     im.data + (size_t)(y + rr.y) * im.stride + (size_t)rr.x * 3,
                     (size_t)rr.w * 3) == 0);
    rq.scale_denom = 2;
    sp_image z;
    CHECK(sp__image_decode(buf, len, "t", &rq, NULL, &z, &err) == SP_EINVAL && !z.data);
    sp_image_free(&im);
    sp_image_free(&g);
    sp_image_free(&r);
}

static void expect_fail(const uint8_t *buf, size_t len, int code, const char *what) {
    sp_error err;
    sp_image im;
    sp_decode_req rq = {3, 0, 0, 0, 0, 1};
    int pr = sp__image_probe(buf, len, "dir/bad.img", NULL, NULL, &err);
    int rc = sp__image_decode(buf, len, "dir/bad.img", &rq, NULL, &im, &err);
    CHECK_MSG(rc == code, "%s: decode gave %d (%s), want %d", what, rc, err.msg, code);
    CHECK_MSG(strstr(err.msg, "dir/bad.img") != NULL, "%s: '%s' names no path", what,
              err.msg);
    CHECK(im.data == NULL);
    if (getenv("SP_TEST_VERBOSE")) printf("%s: %s\n", what, err.msg);
    CHECK(pr == SP_OK || pr == code || pr == SP_EFORMAT);
}

/* ---- BMP ------------------------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

typedef struct bmp_opts {
    int bits, top_down, bitfields, hsize;   /* hsize 40 or 124 */
} bmp_opts;

/* A BMP of the w x h picture `rgb`; for bits <= 8 the picture's pixels are
 * indices into a palette made here (pal, 2^bits entries) and *rgb is
 * rewritten to the palette colours. Returns the file, *len its size. */
static uint8_t *write_bmp(int w, int h, uint8_t *rgb, bmp_opts o, size_t *len) {
    int ncol = o.bits <= 8 ? 1 << o.bits : 0;
    size_t masks = (o.bitfields && o.hsize == 40) ? 12 : 0;
    size_t off = 14 + (size_t)o.hsize + masks + (size_t)ncol * 4;
    size_t stride = (((size_t)w * o.bits + 31) / 32) * 4;
    *len = off + stride * h;
    uint8_t *f = calloc(1, *len);
    CHECK(f);
    f[0] = 'B'; f[1] = 'M';
    put32(f + 2, (uint32_t)*len);
    put32(f + 10, (uint32_t)off);
    uint8_t *hd = f + 14;
    put32(hd, (uint32_t)o.hsize);
    put32(hd + 4, (uint32_t)w);
    put32(hd + 8, (uint32_t)(o.top_down ? -h : h));
    put16(hd + 12, 1);
    put16(hd + 14, (uint32_t)o.bits);
    put32(hd + 16, o.bitfields ? 3 : 0);
    put32(hd + 20, (uint32_t)(stride * h));
    if (o.bitfields) {
        put32(hd + 40, 0x00ff0000u); put32(hd + 44, 0x0000ff00u); put32(hd + 48, 0x000000ffu);
        if (o.hsize >= 56) put32(hd + 52, 0xff000000u);
    }
    uint8_t *pal = f + 14 + o.hsize + masks;
    for (int i = 0; i < ncol; i++) {   /* a grey ramp for 1 bit, colours otherwise */
        uint8_t r = ncol == 2 ? (uint8_t)(i * 255) : (uint8_t)(i * 37 + 11);
        pal[4 * i + 2] = r;
        pal[4 * i + 1] = ncol == 2 ? r : (uint8_t)(i * 91 + 3);
        pal[4 * i] = ncol == 2 ? r : (uint8_t)(255 - i * 13);
    }
    for (int y = 0; y < h; y++) {
        uint8_t *row = f + off + stride * (size_t)(o.top_down ? y : h - 1 - y);
        for (int x = 0; x < w; x++) {
            uint8_t *px = rgb + ((size_t)y * w + x) * 3;
            if (ncol) {
                int idx = px[0] % ncol, per = 8 / o.bits;
                row[x / per] |= (uint8_t)(idx << (8 - o.bits * (x % per + 1)));
                px[0] = pal[4 * idx + 2]; px[1] = pal[4 * idx + 1]; px[2] = pal[4 * idx];
            } else {
                size_t step = (size_t)o.bits / 8;
                row[x * step] = px[2]; row[x * step + 1] = px[1]; row[x * step + 2] = px[0];
                if (step == 4) row[x * step + 3] = (uint8_t)(x * 7);   /* alpha/X: dropped */
            }
        }
    }
    return f;
}

static void test_bmp_pixels(void) {
    static const bmp_opts K[] = {
        {1, 0, 0, 40}, {4, 0, 0, 40}, {8, 0, 0, 40}, {24, 0, 0, 40}, {32, 0, 0, 40},
        {1, 1, 0, 124}, {4, 1, 0, 40}, {8, 1, 0, 124}, {24, 1, 0, 124}, {32, 1, 0, 124},
        {32, 0, 1, 40}, {32, 1, 1, 124}};
    static const int sizes[][2] = {{1, 1}, {7, 5}, {13, 9}, {33, 2}};
    for (size_t k = 0; k < sizeof K / sizeof *K; k++)
        for (size_t s = 0; s < 4; s++) {
            int w = sizes[s][0], h = sizes[s][1];
            uint8_t *rgb = make_rgb(w, h, (uint32_t)(k * 10 + s));
            size_t len;
            uint8_t *f = write_bmp(w, h, rgb, K[k], &len);
            check_decode(f, len, w, h, rgb, SP_FORMAT_BMP);
            free(f);
            free(rgb);
        }
    /* a grey palette probes as 1 channel */
    uint8_t *rgb = make_rgb(5, 3, 1);
    size_t len;
    uint8_t *f = write_bmp(5, 3, rgb, (bmp_opts){1, 0, 0, 40}, &len);
    sp_image_info info;
    sp_error err;
    CHECK_OK(sp__image_probe(f, len, "t", NULL, &info, &err), &err);
    CHECK(info.channels == 1);
    free(f);
    free(rgb);
}

static void test_bmp_hostile(void) {
    uint8_t *rgb = make_rgb(13, 9, 3);
    size_t len;
    uint8_t *f = write_bmp(13, 9, rgb, (bmp_opts){8, 0, 0, 40}, &len);
    uint8_t *g = malloc(len);
    CHECK(g);
    for (size_t cut = 0; cut < len; cut += (cut < 80 ? 1 : 7)) {   /* truncated anywhere */
        memcpy(g, f, cut);
        expect_fail(g, cut, SP_EFORMAT, "truncated BMP");
    }
    memcpy(g, f, len);
    put32(g + 10, 0x7fffff00u);                 /* pixel offset past the end */
    expect_fail(g, len, SP_EFORMAT, "offset past the end");
    memcpy(g, f, len);
    put32(g + 10, 20);                          /* pixel offset inside the headers */
    expect_fail(g, len, SP_EFORMAT, "offset in the headers");
    memcpy(g, f, len);
    put32(g + 14, 0xfffffff0u);                 /* header size: unknown version */
    expect_fail(g, len, SP_EUNSUPP, "header size");
    memcpy(g, f, len);
    put32(g + 10, 14 + 40 + 100);               /* pixels start inside the palette */
    expect_fail(g, len, SP_EFORMAT, "palette past the offset");
    memcpy(g, f, len);
    put32(g + 14 + 32, 1000);                   /* 1000 entries for 8-bit pixels */
    expect_fail(g, len, SP_EFORMAT, "palette of 1000");
    memcpy(g, f, len);
    put32(g + 14 + 32, 4);                      /* 4 entries: indices past the palette */
    expect_fail(g, len, SP_EFORMAT, "index past the palette");
    memcpy(g, f, len);
    put32(g + 14 + 16, 1);                      /* RLE8 */
    expect_fail(g, len, SP_EUNSUPP, "RLE8");
    memcpy(g, f, len);
    put32(g + 14 + 4, 100000);                  /* 100000 x 100000 */
    put32(g + 14 + 8, 100000);
    expect_fail(g, len, SP_ELIMIT, "huge");
    memcpy(g, f, len);
    put32(g + 14 + 8, 0x80000000u);             /* height INT_MIN */
    expect_fail(g, len, SP_EFORMAT, "height INT_MIN");
    memcpy(g, f, len);
    put16(g + 14 + 14, 16);                     /* 16-bit */
    expect_fail(g, len, SP_EUNSUPP, "16-bit");
    free(f);
    free(rgb);
    rgb = make_rgb(4, 4, 4);
    f = write_bmp(4, 4, rgb, (bmp_opts){32, 0, 1, 124}, &len);
    put32(f + 14 + 40, 0x000000ffu);            /* R and B masks swapped */
    put32(f + 14 + 48, 0x00ff0000u);
    expect_fail(f, len, SP_EUNSUPP, "odd masks");
    free(f);
    free(rgb);
    free(g);
}

/* ---- WebP ------------------------------------------------------------------- */

/* The picture with alpha appended (a gradient), w x h x 4. */
static uint8_t *with_alpha(const uint8_t *rgb, int w, int h) {
    uint8_t *p = malloc((size_t)w * h * 4);
    CHECK(p);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        memcpy(p + 4 * i, rgb + 3 * i, 3);
        p[4 * i + 3] = (uint8_t)(1 + i * 5 % 255);   /* never 0: RGB kept exact */
    }
    return p;
}

static void test_webp_pixels(void) {
    static const int sizes[][2] = {{1, 1}, {7, 5}, {33, 17}};
    for (size_t s = 0; s < 3; s++)
        for (int kind = 0; kind < 4; kind++) {   /* lossless, lossless+alpha, lossy, lossy+alpha */
            int w = sizes[s][0], h = sizes[s][1];
            uint8_t *rgb = make_rgb(w, h, (uint32_t)(100 + s * 4 + kind));
            uint8_t *rgba = with_alpha(rgb, w, h);
            uint8_t *f = NULL;
            size_t len;
            switch (kind) {
            case 0: len = WebPEncodeLosslessRGB(rgb, w, h, w * 3, &f); break;
            case 1: len = WebPEncodeLosslessRGBA(rgba, w, h, w * 4, &f); break;
            case 2: len = WebPEncodeRGB(rgb, w, h, w * 3, 80, &f); break;
            default: len = WebPEncodeRGBA(rgba, w, h, w * 4, 80, &f); break;
            }
            CHECK(len > 0 && f);
            if (kind >= 2) {   /* lossy: the library's own decode is the reference */
                int dw, dh;
                uint8_t *ref = WebPDecodeRGB(f, len, &dw, &dh);
                CHECK(ref && dw == w && dh == h);
                check_decode(f, len, w, h, ref, SP_FORMAT_WEBP);
                WebPFree(ref);
            } else {
                check_decode(f, len, w, h, rgb, SP_FORMAT_WEBP);
            }
            WebPFree(f);
            free(rgba);
            free(rgb);
        }
}

static void test_webp_hostile(void) {
    uint8_t *rgb = make_rgb(33, 17, 9);
    for (int lossy = 0; lossy < 2; lossy++) {
        uint8_t *f = NULL;
        size_t len = lossy ? WebPEncodeRGB(rgb, 33, 17, 33 * 3, 75, &f)
                           : WebPEncodeLosslessRGB(rgb, 33, 17, 33 * 3, &f);
        CHECK(len > 40);
        uint8_t *g = malloc(len);
        CHECK(g);
        for (size_t cut = 0; cut < len; cut += (cut < 64 ? 1 : 5)) {
            memcpy(g, f, cut);
            expect_fail(g, cut, SP_EFORMAT, "truncated WebP");
        }
        memcpy(g, f, len);
        put32(g + 4, 0x7ffffff0u);               /* RIFF size past the end */
        expect_fail(g, len, SP_EFORMAT, "RIFF size");
        memcpy(g, f, len);
        put32(g + 16, 0x7ffffff0u);              /* chunk size past the end */
        expect_fail(g, len, SP_EFORMAT, "chunk size");
        sp_decode_limits lim = {8, 0, 0, 0};
        sp_error err;
        CHECK(sp__image_probe(f, len, "t", &lim, NULL, &err) == SP_ELIMIT);
        sp_image im;
        sp_decode_req rq = {3, 0, 0, 0, 0, 1};
        CHECK(sp__image_decode(f, len, "t", &rq, &lim, &im, &err) == SP_ELIMIT && !im.data);
        free(g);
        WebPFree(f);
    }
    /* an animated file's VP8X header: refused by name */
    static const uint8_t anim[] = {'R', 'I', 'F', 'F', 22, 0, 0, 0, 'W', 'E', 'B', 'P',
                                   'V', 'P', '8', 'X', 10, 0, 0, 0, 0x02, 0, 0, 0,
                                   7, 0, 0, 5, 0, 0};
    expect_fail(anim, sizeof anim, SP_EUNSUPP, "animated");
    free(rgb);
}

/* ---- TIFF ------------------------------------------------------------------- */

typedef struct tiff_opts {
    int spp, comp, tiled, bits;   /* comp: COMPRESSION_*; bits 8 or 16 */
} tiff_opts;

/* A TIFF of the w x h picture (its first spp samples: grey is channel 0,
 * alpha a gradient), written by libtiff to a file and read back. */
static uint8_t *write_tiff(int w, int h, const uint8_t *rgb, tiff_opts o, size_t *len) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/sp-test-tiff-%d.tif", (int)getpid());
    TIFF *t = TIFFOpen(path, "w");
    CHECK(t);
    int grey = o.spp <= 2;
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, (uint32_t)w);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, (uint32_t)h);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, o.bits);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, o.spp);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, grey ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_RGB);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(t, TIFFTAG_COMPRESSION, o.comp);
    if (o.comp == COMPRESSION_LZW) TIFFSetField(t, TIFFTAG_PREDICTOR, PREDICTOR_HORIZONTAL);
    if (o.spp == 2 || o.spp == 4) {
        uint16_t ex = EXTRASAMPLE_UNASSALPHA;
        TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 1, &ex);
    }
    size_t bps = (size_t)o.bits / 8, scan = (size_t)w * o.spp * bps;
    uint8_t *pix = calloc((size_t)h, scan);
    CHECK(pix);
    for (size_t i = 0; i < (size_t)w * h; i++)
        for (int s = 0; s < o.spp; s++) {
            int alpha = (s == 1 && grey) || s == 3;
            uint8_t v = alpha ? (uint8_t)(i * 3) : rgb[3 * i + (grey ? 0 : s)];
            pix[(i * o.spp + s) * bps] = v;
            if (bps == 2) pix[(i * o.spp + s) * bps + 1] = v;
        }
    if (o.tiled) {
        TIFFSetField(t, TIFFTAG_TILEWIDTH, 16);
        TIFFSetField(t, TIFFTAG_TILELENGTH, 16);
        size_t tsz = (size_t)TIFFTileSize(t);
        uint8_t *tile = malloc(tsz);
        CHECK(tile);
        for (int y = 0; y < h; y += 16)
            for (int x = 0; x < w; x += 16) {
                memset(tile, 0, tsz);
                for (int r = 0; r < 16 && y + r < h; r++)
                    memcpy(tile + (size_t)r * 16 * o.spp * bps,
                           pix + (size_t)(y + r) * scan + (size_t)x * o.spp * bps,
                           (size_t)(w - x < 16 ? w - x : 16) * o.spp * bps);
                CHECK(TIFFWriteTile(t, tile, (uint32_t)x, (uint32_t)y, 0, 0) > 0);
            }
        free(tile);
    } else {
        TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 3);
        for (int y = 0; y < h; y++) CHECK(TIFFWriteScanline(t, pix + (size_t)y * scan, (uint32_t)y, 0) > 0);
    }
    TIFFClose(t);
    free(pix);
    FILE *f = fopen(path, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(*len);
    CHECK(buf && fread(buf, 1, *len, f) == *len);
    fclose(f);
    remove(path);
    return buf;
}

static void test_tiff_pixels(void) {
    static const int comps[] = {COMPRESSION_NONE, COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE,
                                COMPRESSION_PACKBITS};
    static const int sizes[][2] = {{1, 1}, {7, 5}, {37, 23}};
    int n = 0;
    for (int spp = 1; spp <= 4; spp++)
        for (int c = 0; c < 4; c++)
            for (int tiled = 0; tiled < 2; tiled++)
                for (int s = 0; s < 3; s++) {
                    int w = sizes[s][0], h = sizes[s][1];
                    uint8_t *rgb = make_rgb(w, h, (uint32_t)(spp * 100 + c * 10 + s));
                    size_t len;
                    uint8_t *f = write_tiff(w, h, rgb, (tiff_opts){spp, comps[c], tiled, 8}, &len);
                    if (spp <= 2)   /* grey: the picture's first channel, replicated */
                        for (size_t i = 0; i < (size_t)w * h; i++)
                            rgb[3 * i + 1] = rgb[3 * i + 2] = rgb[3 * i];
                    check_decode(f, len, w, h, rgb, SP_FORMAT_TIFF);
                    n++;
                    free(f);
                    free(rgb);
                }
    CHECK(n == 4 * 4 * 2 * 3);
}

/* Patch the value of a one-value tag (SHORT or LONG) in a little-endian
 * TIFF's first IFD. */
static void tiff_patch(uint8_t *f, size_t len, uint16_t tag, uint32_t v) {
    uint32_t ifd = (uint32_t)f[4] | (uint32_t)f[5] << 8 | (uint32_t)f[6] << 16 |
                   (uint32_t)f[7] << 24;
    CHECK(f[0] == 'I' && ifd + 2 <= len);
    unsigned n = f[ifd] | (unsigned)f[ifd + 1] << 8;
    for (unsigned i = 0; i < n && ifd + 2 + 12 * (i + 1) <= len; i++) {
        uint8_t *e = f + ifd + 2 + 12 * i;
        if ((e[0] | e[1] << 8) != tag) continue;
        CHECK((e[4] | e[5] << 8 | e[6] << 16) == 1);   /* one value, inline */
        if ((e[2] | e[3] << 8) == 3) put16(e + 8, v);
        else put32(e + 8, v);
        return;
    }
    CHECK_MSG(0, "tag %u not found", tag);
}

/* Run expect_fail with stderr going to a file; nothing may be printed. */
static void expect_fail_quiet(const uint8_t *buf, size_t len, int code, const char *what) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/sp-test-tiff-err-%d", (int)getpid());
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w+");
    CHECK(saved >= 0 && f);
    dup2(fileno(f), 2);
    expect_fail(buf, len, code, what);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long n = ftell(f) >= 0 ? (fseek(f, 0, SEEK_END), ftell(f)) : -1;
    fclose(f);
    remove(path);
    CHECK_MSG(n == 0, "%s: %ld bytes printed to stderr", what, n);
}

static void test_tiff_hostile(void) {
    uint8_t *rgb = make_rgb(37, 23, 5);
    for (int c = 0; c < 2; c++) {
        size_t len;
        uint8_t *f = write_tiff(37, 23, rgb, (tiff_opts){3, c ? COMPRESSION_LZW : COMPRESSION_NONE,
                                                          0, 8}, &len);
        uint8_t *g = malloc(len);
        CHECK(g);
        for (size_t cut = 0; cut < len; cut += (cut < 64 ? 1 : 13)) {
            memcpy(g, f, cut);
            expect_fail_quiet(g, cut, SP_EFORMAT, "truncated TIFF");
        }
        memcpy(g, f, len);
        put32(g + 4, 0x7ffffff0u);               /* first IFD past the end */
        expect_fail_quiet(g, len, SP_EFORMAT, "IFD offset");
        free(g);
        free(f);
    }
    size_t len;
    for (int c = 0; c < 2; c++) {   /* one strip (3 rows): its offset and size patched */
        uint8_t *f = write_tiff(37, 3, rgb, (tiff_opts){3, c ? COMPRESSION_ADOBE_DEFLATE
                                                              : COMPRESSION_NONE, 0, 8}, &len);
        uint8_t *g = malloc(len);
        CHECK(g);
        memcpy(g, f, len);
        tiff_patch(g, len, TIFFTAG_STRIPOFFSETS, (uint32_t)len - 10);   /* data past the end */
        expect_fail_quiet(g, len, SP_EFORMAT, "strip past the end");
        memcpy(g, f, len);
        tiff_patch(g, len, TIFFTAG_STRIPBYTECOUNTS, 0x7fff0000u);        /* size past the end */
        expect_fail_quiet(g, len, SP_EFORMAT, "strip size");
        memcpy(g, f, len);
        tiff_patch(g, len, TIFFTAG_IMAGELENGTH, 60000);                  /* rows past the strip */
        expect_fail_quiet(g, len, SP_EFORMAT, "height past the data");
        free(g);
        free(f);
    }
    uint8_t *f = write_tiff(9, 7, rgb, (tiff_opts){3, COMPRESSION_NONE, 0, 16}, &len);
    expect_fail_quiet(f, len, SP_EUNSUPP, "16-bit");
    free(f);
    f = write_tiff(37, 23, rgb, (tiff_opts){1, COMPRESSION_NONE, 0, 8}, &len);
    sp_decode_limits lim = {16, 0, 0, 0};
    sp_error err;
    CHECK(sp__image_probe(f, len, "t", &lim, NULL, &err) == SP_ELIMIT);
    free(f);
    free(rgb);
}

static const sp_case cases[] = {
    SP_CASE(test_bmp_pixels),
    SP_CASE(test_bmp_hostile),
    SP_CASE(test_webp_pixels),
    SP_CASE(test_webp_hostile),
    SP_CASE(test_tiff_pixels),
    SP_CASE(test_tiff_hostile),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}
