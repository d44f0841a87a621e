/* test_decode.c - PNG and JPEG decoding (include/seedpipe/decode.h).
 *
 * What it asserts:
 *  - PngSuite: all 161 valid files probe and decode to 3 and 1 channels;
 *    every non-interlaced one equals, pixel for pixel, a small reference
 *    decoder written here from the PNG spec (zlib + unfiltering + the 16->8,
 *    gray->RGB and luma rules of decode.h); every interlaced basi*-style file
 *    equals its non-interlaced twin; PNG regions equal crops of full decodes;
 *    all 14 x*.png are rejected with the path in the message. A synthetic
 *    16-bit PNG checks the 16->8 rule on all 65536 values.
 *  - JPEG corpora (jpeg-bugs, jpeg-crashtest, recursively): probe, full
 *    decode and a region at scale 2 never crash (run this under ASan); each
 *    failure names the path; a file that decodes fully also decodes the
 *    region, equal to the crop of a full scale-2 decode, and a file refused
 *    in full is refused as the region and at scale 2 too (the policy).
 *  - JPEGs encoded here (4:2:0, 4:2:2, 4:4:0, 4:4:4, 4:1:1, 4:1:0, 2x4,
 *    gray, RGB, progressive, restart markers, CMYK with and without Adobe
 *    marker, YCCK): at scales 1, 2, 4, 8 the output has decode.h's geometry and a
 *    random region (odd offsets included) equals the same crop of the full
 *    decode byte for byte; 1-channel output is the luma of 3-channel
 *    output; CMYK/YCCK decode to the expected RGB within a small tolerance.
 *  - Limits: headers patched to declare big sizes give SP_ELIMIT (probe and
 *    decode), as do small custom limits and a valid JPEG of 631 scans (one
 *    of 190 decodes); requests outside the image, bad
 *    scales and bad channel counts give SP_EINVAL with *out zeroed.
 *  - Truncated files (cut at many points) are errors naming the path, for
 *    a full decode and for regions whose rows are intact (the top row, the
 *    top-left quarter): the policy does not depend on the region.
 *  - sp_read_file errors and limits, sp__format_sniff, and four threads
 *    decoding at once give the same bytes as one.
 * Without a third-party corpus ($SP_SHARED_DATA: pngsuite/, jpeg-bugs/,
 * jpeg-crashtest/) the parts that need it print SKIP (sp_test_corpus), the
 * rest runs (the 16-bit rule, the JPEGs made here, JPEG limits, requests,
 * truncations and threads), and a case that skipped a part exits 77 if no
 * check failed.
 * Cases (tests/runner.h, each its own process): test_png_known_pixels,
 * test_png_16bit_rule, test_pngsuite, test_requests, test_limits (PNG and
 * JPEG), test_scan_limit, test_truncated, test_png_policy,
 * test_jpeg_policy, test_jpeg_regions, test_threads, and the two hostile
 * corpora, test_jpeg_bugs and test_jpeg_crashtest.
 */
#include "seedpipe/decode.h"
#include "check.h"
#include "runner.h"

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>
#include "augment/decode_internal.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct strlist { char **v; size_t n, cap; } strlist;

static void list_add(strlist *l, const char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        CHECK(l->v);
    }
    l->v[l->n] = strdup(s);
    CHECK(l->v[l->n]);
    l->n++;
}
static void list_free(strlist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}
static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}
static void list_files(const char *dir, int recursive, strlist *out) {
    DIR *d = opendir(dir);
    CHECK_MSG(d, "cannot open %s", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (recursive) list_files(p, 1, out);
        } else if (S_ISREG(st.st_mode)) {
            list_add(out, p);
        }
    }
    closedir(d);
    qsort(out->v, out->n, sizeof *out->v, cmp_str);
}

static uint8_t *load(const char *path, size_t *len) {
    sp_error err;
    uint8_t *data = NULL;
    CHECK_OK(sp_read_file(path, 0, &data, len, &err), &err);
    return data;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {  /* xorshift64*: fixed sequence, tests are reproducible */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 32);
}
static int rnd_in(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

static uint8_t luma(unsigned r, unsigned g, unsigned b) {
    return (uint8_t)((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
}

static sp_decode_req req_full(int channels) {
    sp_decode_req r = {channels, 0, 0, 0, 0, 1};
    return r;
}

static int decode(const uint8_t *buf, size_t len, const char *path, int ch, int x, int y,
                  int w, int h, int d, sp_image *out, sp_error *err) {
    sp_decode_req r = {ch, x, y, w, h, d};
    return sp__image_decode(buf, len, path, &r, NULL, out, err);
}

/* A failure must carry a negative code, set err->code, and name the path. */
static void check_failure(int rc, const sp_error *err, const sp_image *img, const char *path) {
    CHECK(rc < 0);
    CHECK(err->code == rc);
    CHECK_MSG(strstr(err->msg, path) != NULL, "message '%s' lacks the path %s", err->msg, path);
    CHECK(img->data == NULL && img->width == 0 && img->height == 0);
}

/* region == crop of full at (ox, oy) */
static int crop_equal(const sp_image *full, int ox, int oy, const sp_image *reg) {
    if (reg->channels != full->channels) return 0;
    size_t rowb = (size_t)reg->width * (size_t)reg->channels;
    for (int y = 0; y < reg->height; y++)
        if (memcmp(reg->data + (size_t)y * reg->stride,
                   full->data + (size_t)(oy + y) * full->stride + (size_t)ox * full->channels,
                   rowb) != 0)
            return 0;
    return 1;
}

static void check_luma(const sp_image *rgb, const sp_image *gray) {
    CHECK(rgb->channels == 3 && gray->channels == 1);
    CHECK(rgb->width == gray->width && rgb->height == gray->height);
    for (int y = 0; y < rgb->height; y++)
        for (int x = 0; x < rgb->width; x++) {
            const uint8_t *p = rgb->data + (size_t)y * rgb->stride + 3 * (size_t)x;
            CHECK(gray->data[(size_t)y * gray->stride + (size_t)x] == luma(p[0], p[1], p[2]));
        }
}

/* ---- a reference PNG decoder, from the spec (non-interlaced only) -------- */

static unsigned sample_at(const uint8_t *row, size_t idx, int depth) {
    if (depth == 16) return ((unsigned)row[2 * idx] << 8) | row[2 * idx + 1];
    if (depth == 8) return row[idx];
    size_t bit = idx * (size_t)depth;
    return (row[bit / 8] >> (8 - depth - (int)(bit % 8))) & ((1u << depth) - 1);
}
static uint8_t to8(unsigned v, int depth) {
    if (depth == 16) return (uint8_t)((v * 255u + 32895u) >> 16);
    if (depth == 8) return (uint8_t)v;
    return (uint8_t)(v * 255u / ((1u << depth) - 1));
}
static int paeth(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    if (pa <= pb && pa <= pc) return a;
    return pb <= pc ? b : c;
}

/* @return a w*h*3 RGB buffer, or NULL for an interlaced file. */
static uint8_t *ref_png_rgb(const uint8_t *b, size_t n, int *W, int *H) {
    size_t p = 8;
    uint32_t w = 0, h = 0;
    int depth = 0, color = 0, il = 0;
    uint8_t plte[768] = {0};
    uint8_t *z = NULL;
    size_t zn = 0;
    while (p + 12 <= n) {
        uint32_t L = be32(b + p);
        const uint8_t *t = b + p + 4, *d = b + p + 8;
        CHECK(p + 12 + L <= n);
        if (!memcmp(t, "IHDR", 4)) {
            w = be32(d); h = be32(d + 4); depth = d[8]; color = d[9]; il = d[12];
        } else if (!memcmp(t, "PLTE", 4)) {
            memcpy(plte, d, L < 768 ? L : 768);
        } else if (!memcmp(t, "IDAT", 4)) {
            z = realloc(z, zn + L + 1);
            CHECK(z);
            memcpy(z + zn, d, L);
            zn += L;
        } else if (!memcmp(t, "IEND", 4)) {
            break;
        }
        p += 12 + L;
    }
    if (il) { free(z); return NULL; }
    int ch = color == 0 ? 1 : color == 2 ? 3 : color == 3 ? 1 : color == 4 ? 2 : 4;
    size_t rowbytes = ((size_t)w * (size_t)ch * (size_t)depth + 7) / 8;
    size_t bpp = ((size_t)ch * (size_t)depth + 7) / 8;
    uLongf rawlen = (uLongf)((rowbytes + 1) * h);
    uint8_t *raw = malloc(rawlen);
    CHECK(raw);
    CHECK(uncompress(raw, &rawlen, z, (uLong)zn) == Z_OK);
    CHECK(rawlen == (rowbytes + 1) * h);
    free(z);
    for (uint32_t y = 0; y < h; y++) {
        uint8_t *cur = raw + y * (rowbytes + 1) + 1;
        const uint8_t *prev = y ? cur - (rowbytes + 1) : NULL;
        int ft = cur[-1];
        CHECK(ft <= 4);
        for (size_t i = 0; i < rowbytes; i++) {
            int a = i >= bpp ? cur[i - bpp] : 0, up = prev ? prev[i] : 0;
            int c = (prev && i >= bpp) ? prev[i - bpp] : 0;
            int add = ft == 1 ? a : ft == 2 ? up : ft == 3 ? (a + up) / 2
                    : ft == 4 ? paeth(a, up, c) : 0;
            cur[i] = (uint8_t)(cur[i] + add);
        }
    }
    uint8_t *rgb = malloc((size_t)w * h * 3);
    CHECK(rgb);
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *row = raw + y * (rowbytes + 1) + 1;
        for (uint32_t x = 0; x < w; x++) {
            uint8_t *o = rgb + ((size_t)y * w + x) * 3;
            size_t s = (size_t)x * (size_t)ch;
            if (color == 3) {
                unsigned i = sample_at(row, x, depth);
                memcpy(o, plte + 3 * i, 3);
            } else if (color == 0 || color == 4) {
                o[0] = o[1] = o[2] = to8(sample_at(row, s, depth), depth);
            } else {
                for (int c = 0; c < 3; c++) o[c] = to8(sample_at(row, s + (size_t)c, depth), depth);
            }
        }
    }
    free(raw);
    *W = (int)w;
    *H = (int)h;
    return rgb;
}

/* ---- PngSuite ------------------------------------------------------------ */

static void test_pngsuite(void) {
    if (!sp_test_corpus("pngsuite", "PngSuite decodes, reference decoder, twins, x*.png"))
        return;
    strlist files = {0};
    list_files(sp_test_data("pngsuite"), 0, &files);
    int valid = 0, rejected = 0, ref_checked = 0, twins = 0;
    sp_error err;
    for (size_t i = 0; i < files.n; i++) {
        const char *path = files.v[i], *name = base_name(path);
        size_t nl = strlen(name);
        if (nl < 4 || strcmp(name + nl - 4, ".png") != 0) continue;
        size_t len;
        uint8_t *buf = load(path, &len);
        sp_image rgb, gray;
        if (name[0] == 'x') {
            int rc = decode(buf, len, path, 3, 0, 0, 0, 0, 1, &rgb, &err);
            check_failure(rc, &err, &rgb, path);
            rc = decode(buf, len, path, 1, 0, 0, 0, 0, 1, &gray, &err);
            check_failure(rc, &err, &gray, path);
            rejected++;
            free(buf);
            continue;
        }
        sp_image_info info;
        CHECK_OK(sp__image_probe(buf, len, path, NULL, &info, &err), &err);
        CHECK(info.format == SP_FORMAT_PNG);
        CHECK_OK(decode(buf, len, path, 3, 0, 0, 0, 0, 1, &rgb, &err), &err);
        CHECK_OK(decode(buf, len, path, 1, 0, 0, 0, 0, 1, &gray, &err), &err);
        CHECK(rgb.width == info.width && rgb.height == info.height && rgb.channels == 3);
        CHECK(rgb.stride == (size_t)rgb.width * 3 && gray.stride == (size_t)gray.width);
        int color = buf[25];
        CHECK(info.channels == ((color == 0 || color == 4) ? 1 : 3));
        check_luma(&rgb, &gray);

        int rw, rh;
        uint8_t *ref = ref_png_rgb(buf, len, &rw, &rh);
        if (ref) {
            CHECK(rw == rgb.width && rh == rgb.height);
            CHECK_MSG(memcmp(ref, rgb.data, (size_t)rw * rh * 3) == 0,
                      "%s differs from the reference decoder", path);
            free(ref);
            ref_checked++;
        }
        if (nl == 12 && name[3] == 'i') {  /* interlaced: compare with the twin */
            char twin[4096];
            snprintf(twin, sizeof twin, "%s", path);
            twin[strlen(twin) - 9] = 'n';
            struct stat st;
            if (stat(twin, &st) == 0) {
                size_t tl;
                uint8_t *tb = load(twin, &tl);
                sp_image t3, t1;
                CHECK_OK(decode(tb, tl, twin, 3, 0, 0, 0, 0, 1, &t3, &err), &err);
                CHECK_OK(decode(tb, tl, twin, 1, 0, 0, 0, 0, 1, &t1, &err), &err);
                CHECK(t3.width == rgb.width && t3.height == rgb.height);
                CHECK_MSG(crop_equal(&t3, 0, 0, &rgb) && crop_equal(&t1, 0, 0, &gray),
                          "%s differs from %s", path, twin);
                sp_image_free(&t3);
                sp_image_free(&t1);
                free(tb);
                twins++;
            }
        }
        /* regions (interlaced or not) are crops of the full decode */
        for (int k = 0; k < 6; k++) {
            int x = rnd_in(0, rgb.width - 1), y = rnd_in(0, rgb.height - 1);
            int w = rnd_in(1, rgb.width - x), h = rnd_in(1, rgb.height - y);
            int ch = (k & 1) ? 1 : 3;
            sp_image reg;
            CHECK_OK(decode(buf, len, path, ch, x, y, w, h, 1, &reg, &err), &err);
            CHECK(reg.width == w && reg.height == h && reg.channels == ch);
            CHECK_MSG(crop_equal(ch == 3 ? &rgb : &gray, x, y, &reg), "%s region %d,%d %dx%d",
                      path, x, y, w, h);
            sp_image_free(&reg);
        }
        sp_image_free(&rgb);
        sp_image_free(&gray);
        valid++;
        free(buf);
    }
    list_free(&files);
    printf("pngsuite: %d valid decoded (%d checked against the reference decoder, "
           "%d interlaced twins equal), %d x*.png rejected\n",
           valid, ref_checked, twins, rejected);
    CHECK(valid == 161);
    CHECK(rejected == 14);
    CHECK(ref_checked >= 120);
    CHECK(twins >= 15);
}

/* Known pixels, independent of any decoder: PngSuite's basn0g08 is a gray
 * ramp, basn2c08 four colour ramps (see PngSuite.README). */
static void test_png_known_pixels(void) {
    if (!sp_test_corpus("pngsuite", "PngSuite known pixels (basn0g08, basn2c08)")) return;
    sp_error err;
    size_t len;
    uint8_t *buf = load(sp_test_data("pngsuite/basn0g08.png"), &len);
    sp_image g;
    CHECK_OK(decode(buf, len, "basn0g08", 1, 0, 0, 0, 0, 1, &g, &err), &err);
    CHECK(g.width == 32 && g.height == 32);
    /* the first 8 rows are the ramp 0..255 in reading order; then it turns */
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 32; x++) CHECK(g.data[y * 32 + x] == y * 32 + x);
    CHECK(g.data[8 * 32] == 254 && g.data[8 * 32 + 31] == 223 && g.data[31 * 32 + 31] == 3);
    sp_image_free(&g);
    free(buf);

    /* basn2c08: four bands of 8 rows (blue, green, red, gray ramps) with
     * t = 255 - ((y % 8) * 32 + x) in the varying channels, 255 elsewhere */
    buf = load(sp_test_data("pngsuite/basn2c08.png"), &len);
    CHECK_OK(decode(buf, len, "basn2c08", 3, 0, 0, 0, 0, 1, &g, &err), &err);
    CHECK(g.width == 32 && g.height == 32);
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++) {
            int t = 255 - ((y % 8) * 32 + x), band = y / 8;
            int e[3] = {band >= 2 ? t : 255, (band == 1 || band == 3) ? t : 255,
                        (band == 0 || band == 3) ? t : 255};
            const uint8_t *p = g.data + (size_t)y * g.stride + 3 * (size_t)x;
            CHECK_MSG(p[0] == e[0] && p[1] == e[1] && p[2] == e[2], "basn2c08 (%d,%d)", x, y);
        }
    sp_image_free(&g);
    free(buf);
}

/* 16 -> 8 bits: a PNG holding all 65536 16-bit values, written here. */
typedef struct membuf { uint8_t *p; size_t n, cap; } membuf;
static void membuf_write(png_structp png, png_bytep data, size_t n) {
    membuf *m = png_get_io_ptr(png);
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2;
        m->p = realloc(m->p, m->cap);
        CHECK(m->p);
    }
    memcpy(m->p + m->n, data, n);
    m->n += n;
}
static void membuf_flush(png_structp png) { (void)png; }

static uint8_t *png16_all_values(int color, int interlace, size_t *len) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    CHECK(png && info);
    membuf m = {0};
    png_set_write_fn(png, &m, membuf_write, membuf_flush);
    png_set_IHDR(png, info, 256, 256, 16, color, interlace, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    int ch = color == PNG_COLOR_TYPE_RGB ? 3 : 1;
    uint8_t *rows = malloc((size_t)256 * 256 * 2 * ch);
    png_bytep rp[256];
    for (int y = 0; y < 256; y++) {
        rp[y] = rows + (size_t)y * 256 * 2 * ch;
        for (int x = 0; x < 256; x++)
            for (int c = 0; c < ch; c++) {
                unsigned v = (unsigned)(y * 256 + x);
                if (c == 1) v = 65535u - v;
                if (c == 2) v = (v * 40503u) & 0xffff;
                rp[y][(x * ch + c) * 2] = (uint8_t)(v >> 8);
                rp[y][(x * ch + c) * 2 + 1] = (uint8_t)v;
            }
    }
    png_write_image(png, rp);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    *len = m.n;
    return m.p;
}

static void test_png_16bit_rule(void) {
    sp_error err;
    for (int t = 0; t < 3; t++) {
        int color = t == 0 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB;
        int il = t == 2 ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE;
        size_t len;
        uint8_t *buf = png16_all_values(color, il, &len);
        sp_image img;
        CHECK_OK(decode(buf, len, "png16", 3, 0, 0, 0, 0, 1, &img, &err), &err);
        CHECK(img.width == 256 && img.height == 256);
        for (unsigned v = 0; v < 65536; v++) {
            const uint8_t *p = img.data + (size_t)v * 3;
            unsigned vs[3] = {v, 65535u - v, (v * 40503u) & 0xffff};
            for (int c = 0; c < 3; c++) {
                unsigned src = color == PNG_COLOR_TYPE_GRAY ? v : vs[c];
                CHECK_MSG(p[c] == (uint8_t)((src * 255u + 32895u) >> 16),
                          "16-bit %u -> %u", src, p[c]);
            }
        }
        sp_image_free(&img);
        free(buf);
    }
}

/* ---- JPEGs made here ------------------------------------------------------ */

enum { CS_YCC, CS_GRAY, CS_RGB, CS_CMYK, CS_YCCK };
typedef struct jvar {
    const char *name;
    int cs, h0, v0, prog, restart, adobe, arith;
} jvar;

static const jvar JVARS[] = {
    {"ycc420", CS_YCC, 2, 2, 0, 0, 0, 0},  {"ycc422", CS_YCC, 2, 1, 0, 0, 0, 0},
    {"ycc440", CS_YCC, 1, 2, 0, 0, 0, 0},  {"ycc444", CS_YCC, 1, 1, 0, 0, 0, 0},
    {"ycc411", CS_YCC, 4, 1, 0, 0, 0, 0},  {"gray", CS_GRAY, 1, 1, 0, 0, 0, 0},
    {"rgb", CS_RGB, 1, 1, 0, 0, 1, 0},     {"prog420", CS_YCC, 2, 2, 1, 0, 0, 0},
    {"prog444", CS_YCC, 1, 1, 1, 0, 0, 0}, {"proggray", CS_GRAY, 1, 1, 1, 0, 0, 0},
    {"rst420", CS_YCC, 2, 2, 0, 1, 0, 0},  {"cmyk", CS_CMYK, 1, 1, 0, 0, 1, 0},
    {"cmyk_noadobe", CS_CMYK, 1, 1, 0, 0, 0, 0}, {"ycck", CS_YCCK, 2, 2, 0, 0, 1, 0},
    {"progcmyk", CS_CMYK, 1, 1, 1, 0, 1, 0},
    /* unusual layouts where libjpeg-turbo 2.1 crops wrongly when scaled */
    {"ycc410", CS_YCC, 4, 2, 0, 0, 0, 0},  {"ycc2x4", CS_YCC, 2, 4, 0, 0, 0, 0},
    {"prog2x4", CS_YCC, 2, 4, 1, 0, 0, 0},
    /* arithmetic-coded, sequential and progressive */
    {"arith420", CS_YCC, 2, 2, 0, 0, 0, 1}, {"progarith", CS_YCC, 2, 2, 1, 0, 0, 1},
};
#define NJVARS ((int)(sizeof JVARS / sizeof JVARS[0]))

static int jvar_comps(const jvar *v) {
    return v->cs == CS_GRAY ? 1 : (v->cs == CS_CMYK || v->cs == CS_YCCK) ? 4 : 3;
}

static uint32_t hash3(uint32_t x, uint32_t y, uint32_t c) {
    uint32_t h = x * 0x9E3779B1u ^ (y + 0x7F4A7C15u) * 0x85EBCA77u ^ c * 0xC2B2AE3Du;
    h ^= h >> 15; h *= 0x2C1B3C6Du; h ^= h >> 12;
    return h;
}

/* Smooth ramps per channel, plus optional noise so chroma and AC matter. */
static uint8_t *synth(int w, int h, int comps, int noisy) {
    uint8_t *p = malloc((size_t)w * h * comps);
    CHECK(p);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < comps; c++) {
                int v;
                switch (c) {
                case 0: v = w > 1 ? x * 255 / (w - 1) : 128; break;
                case 1: v = h > 1 ? y * 255 / (h - 1) : 64; break;
                case 2: v = (x + y) * 255 / (w + h > 2 ? w + h - 2 : 1); break;
                default: v = 255 - ((x + 2 * y) % 256) / 2; break;
                }
                if (noisy) v += (int)(hash3((uint32_t)x, (uint32_t)y, (uint32_t)c) % 61) - 30;
                p[((size_t)y * w + x) * comps + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

static uint8_t *enc_jpeg(const uint8_t *pix, int w, int h, const jvar *v, int quality,
                         size_t *len) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long outlen = 0;
    jpeg_mem_dest(&c, &out, &outlen);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = jvar_comps(v);
    c.in_color_space = v->cs == CS_GRAY ? JCS_GRAYSCALE
                     : c.input_components == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&c);
    if (v->cs == CS_RGB) jpeg_set_colorspace(&c, JCS_RGB);
    if (v->cs == CS_YCCK) jpeg_set_colorspace(&c, JCS_YCCK);
    if (v->cs == CS_CMYK) jpeg_set_colorspace(&c, JCS_CMYK);
    if (v->cs == CS_YCC || v->cs == CS_YCCK) {  /* luma (and K) sampling */
        c.comp_info[0].h_samp_factor = v->h0;
        c.comp_info[0].v_samp_factor = v->v0;
        if (v->cs == CS_YCCK) {
            c.comp_info[3].h_samp_factor = v->h0;
            c.comp_info[3].v_samp_factor = v->v0;
        }
    }
    c.write_Adobe_marker = v->adobe ? TRUE : FALSE;
    jpeg_set_quality(&c, quality, TRUE);
    if (v->prog) jpeg_simple_progression(&c);
    if (v->restart) c.restart_in_rows = 1;
    if (v->arith) c.arith_code = TRUE;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW r = (JSAMPROW)(pix + (size_t)c.next_scanline * w * c.input_components);
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *len = outlen;
    return out;
}

static void test_jpeg_regions(void) {
    static const int sizes[][2] = {{203, 157}, {37, 29}, {64, 48}, {1, 1}, {9, 300}};
    sp_error err;
    long regions = 0;
    for (int vi = 0; vi < NJVARS; vi++) {
        const jvar *v = &JVARS[vi];
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int W = sizes[si][0], H = sizes[si][1];
            uint8_t *pix = synth(W, H, jvar_comps(v), 1);
            size_t len;
            uint8_t *jpg = enc_jpeg(pix, W, H, v, 90, &len);
            char path[64];
            snprintf(path, sizeof path, "synthetic/%s_%dx%d.jpg", v->name, W, H);
            sp_image_info info;
            CHECK_OK(sp__image_probe(jpg, len, path, NULL, &info, &err), &err);
            CHECK(info.format == SP_FORMAT_JPEG && info.width == W && info.height == H);
            CHECK(info.channels == (v->cs == CS_GRAY ? 1 : 3));
            for (int d = 1; d <= 8; d *= 2) {
                sp_image full3, full1;
                CHECK_OK(decode(jpg, len, path, 3, 0, 0, 0, 0, d, &full3, &err), &err);
                CHECK_OK(decode(jpg, len, path, 1, 0, 0, 0, 0, d, &full1, &err), &err);
                int Ws = (W + d - 1) / d, Hs = (H + d - 1) / d;
                CHECK_MSG(full3.width == Ws && full3.height == Hs, "%s d=%d: %dx%d", path, d,
                          full3.width, full3.height);
                check_luma(&full3, &full1);
                if (v->cs == CS_GRAY)  /* gray replicates */
                    for (int i = 0; i < Ws * Hs; i++)
                        CHECK(full3.data[3 * i] == full1.data[i] &&
                              full3.data[3 * i + 2] == full1.data[i]);
                int nreg = (W * H > 4) ? 40 : 4;
                for (int k = 0; k < nreg; k++) {
                    int x, y, w, h;
                    if (k < 4) {  /* corners and a one-pixel region */
                        x = (k & 1) ? W - 1 : 0; y = (k & 2) ? H - 1 : 0; w = 1; h = 1;
                    } else {
                        x = rnd_in(0, W - 1); y = rnd_in(0, H - 1);
                        if (k & 1) { x |= 1; if (x >= W) x = W - 1; }  /* odd offsets */
                        w = (k % 3 == 0) ? rnd_in(1, W - x < 12 ? W - x : 12) : rnd_in(1, W - x);
                        h = rnd_in(1, H - y);
                    }
                    int ch = (k % 4 == 1) ? 1 : 3;
                    sp_image reg;
                    CHECK_OK(decode(jpg, len, path, ch, x, y, w, h, d, &reg, &err), &err);
                    int ox0 = x / d, oy0 = y / d;
                    int ox1 = (x + w + d - 1) / d, oy1 = (y + h + d - 1) / d;
                    if (ox1 > Ws) ox1 = Ws;
                    if (oy1 > Hs) oy1 = Hs;
                    CHECK_MSG(reg.width == ox1 - ox0 && reg.height == oy1 - oy0 &&
                                  reg.channels == ch,
                              "%s d=%d region %d,%d %dx%d -> %dx%d", path, d, x, y, w, h,
                              reg.width, reg.height);
                    CHECK_MSG(crop_equal(ch == 3 ? &full3 : &full1, ox0, oy0, &reg),
                              "%s d=%d ch=%d region %d,%d %dx%d differs from the full decode",
                              path, d, ch, x, y, w, h);
                    sp_image_free(&reg);
                    regions++;
                }
                /* CMYK/YCCK colours: R = round(C*K/255) on Adobe-inverted
                 * values, on ink values otherwise. */
                if (d == 1 && jvar_comps(v) == 4 && W * H > 100) {
                    uint8_t *smooth = synth(W, H, 4, 0);
                    size_t sl;
                    jvar v444 = *v;  /* no chroma subsampling: compare colours */
                    v444.h0 = v444.v0 = 1;
                    uint8_t *sj = enc_jpeg(smooth, W, H, &v444, 100, &sl);
                    sp_image s;
                    CHECK_OK(decode(sj, sl, path, 3, 0, 0, 0, 0, 1, &s, &err), &err);
                    int maxdiff = 0;
                    double sum = 0;
                    for (int i = 0; i < W * H; i++) {
                        const uint8_t *q = smooth + 4 * (size_t)i;
                        for (int c = 0; c < 3; c++) {
                            int e = v->adobe ? (q[c] * q[3] + 127) / 255
                                             : ((255 - q[c]) * (255 - q[3]) + 127) / 255;
                            int diff = abs(e - s.data[3 * i + c]);
                            if (diff > maxdiff) maxdiff = diff;
                            sum += diff;
                        }
                    }
                    double mean = sum / (3.0 * W * H);
                    CHECK_MSG(maxdiff <= 8 && mean < 1.5, "%s: CMYK max diff %d mean %.2f",
                              path, maxdiff, mean);
                    sp_image_free(&s);
                    free(sj);
                    free(smooth);
                }
                sp_image_free(&full3);
                sp_image_free(&full1);
            }
            free(jpg);
            free(pix);
        }
    }
    printf("jpeg regions: %d variants, %ld regions equal to crops of full decodes\n", NJVARS,
           regions);
}

/* ---- the hostile-JPEG corpora -------------------------------------------- */

static void test_jpeg_corpus(const char *rel) {
    if (!sp_test_corpus(rel, "the hostile-JPEG corpus (probe, decode, scale-2 regions)")) return;
    strlist files = {0};
    list_files(sp_test_data(rel), 1, &files);
    CHECK(files.n > 100);
    int decoded = 0, rejected = 0, probed = 0;
    sp_error err;
    for (size_t i = 0; i < files.n; i++) {
        const char *path = files.v[i];
        size_t len;
        uint8_t *buf = load(path, &len);
        sp_image_info info;
        int prc = sp__image_probe(buf, len, path, NULL, &info, &err);
        if (prc == 0) probed++;
        else CHECK_MSG(strstr(err.msg, path) != NULL, "%s: probe message '%s'", path, err.msg);

        sp_image full, full2, reg;
        int rc = decode(buf, len, path, 3, 0, 0, 0, 0, 1, &full, &err);
        if (rc != 0) check_failure(rc, &err, &full, path);
        else CHECK(prc == 0 && full.width == info.width && full.height == info.height);

        int x = 0, y = 0, w = 1, h = 1;
        if (prc == 0) {
            x = info.width / 4; y = info.height / 4;
            w = info.width / 2 > 0 ? info.width / 2 : 1;
            h = info.height / 2 > 0 ? info.height / 2 : 1;
        }
        int rrc = decode(buf, len, path, 3, x, y, w, h, 2, &reg, &err);
        if (rrc != 0) check_failure(rrc, &err, &reg, path);
        int rc2 = decode(buf, len, path, 3, 0, 0, 0, 0, 2, &full2, &err);
        if (rc2 != 0) check_failure(rc2, &err, &full2, path);
        if (rc == 0) {
            CHECK_MSG(rrc == 0 && rc2 == 0, "%s decodes fully but not scaled (%d, %d)", path,
                      rrc, rc2);
            CHECK_MSG(crop_equal(&full2, x / 2, y / 2, &reg),
                      "%s: region %d,%d %dx%d at scale 2 differs from the full decode", path,
                      x, y, w, h);
            sp_image gray;
            CHECK_OK(decode(buf, len, path, 1, 0, 0, 0, 0, 1, &gray, &err), &err);
            check_luma(&full, &gray);
            sp_image_free(&gray);
            decoded++;
        } else {
            /* the policy: what a full decode refuses, every request refuses */
            CHECK_MSG(rrc != 0 && rc2 != 0,
                      "%s: refused in full (rc %d) but served as a scale-2 %s", path, rc,
                      rrc == 0 ? "region" : "image");
            rejected++;
        }
        sp_image_free(&full);
        sp_image_free(&full2);
        sp_image_free(&reg);
        free(buf);
    }
    printf("%s: %zu files, %d probed, %d decoded, %d rejected\n", rel, files.n, probed, decoded,
           rejected);
    CHECK(decoded + rejected == (int)files.n);
    list_free(&files);
}

/* A valid progressive gray JPEG with 1 + 63 * (1 + refinements) scans:
 * each AC coefficient in its own band, refined bit by bit from Al. */
static uint8_t *many_scans_jpeg(int refinements, int *nscans, size_t *len) {
    const int W = 16, H = 16;
    uint8_t *pix = synth(W, H, 1, 1);
    int n = 1 + 63 * (1 + refinements);
    jpeg_scan_info *scans = calloc((size_t)n, sizeof *scans);
    CHECK(scans);
    int k = 0;
    scans[k].comps_in_scan = 1; k++;  /* DC, Ss = Se = Ah = Al = 0 */
    for (int b = 1; b <= 63; b++)
        for (int r = 0; r <= refinements; r++, k++) {
            scans[k].comps_in_scan = 1;
            scans[k].Ss = b; scans[k].Se = b;
            scans[k].Ah = r == 0 ? 0 : refinements - r + 1;
            scans[k].Al = refinements - r;
        }
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long outlen = 0;
    jpeg_mem_dest(&c, &out, &outlen);
    c.image_width = W; c.image_height = H;
    c.input_components = 1; c.in_color_space = JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    c.scan_info = scans;
    c.num_scans = n;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW r = pix + (size_t)c.next_scanline * W;
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(scans);
    free(pix);
    *nscans = n;
    *len = outlen;
    return out;
}

static void test_scan_limit(void) {
    sp_error err;
    sp_image img;
    int n;
    size_t len;
    uint8_t *ok = many_scans_jpeg(2, &n, &len);   /* 190 scans: fine */
    CHECK(n == 190);
    CHECK_OK(decode(ok, len, "scans190.jpg", 1, 0, 0, 0, 0, 1, &img, &err), &err);
    CHECK(img.width == 16 && img.height == 16);
    sp_image_free(&img);
    free(ok);
    uint8_t *bad = many_scans_jpeg(9, &n, &len);  /* 631 scans: refused */
    CHECK(n == 631);
    int rc = decode(bad, len, "scans631.jpg", 1, 0, 0, 0, 0, 1, &img, &err);
    CHECK_MSG(rc == SP_ELIMIT, "631 scans: %d %s", rc, err.msg);
    check_failure(rc, &err, &img, "scans631.jpg");
    CHECK(strstr(err.msg, "500 scans"));
    free(bad);
}

/* ---- limits ---------------------------------------------------------------- */

static void png_set_size(uint8_t *buf, uint32_t w, uint32_t h) {
    put_be32(buf + 16, w);
    put_be32(buf + 20, h);
    put_be32(buf + 29, (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf + 12, 17));
}

/* Patch the SOFn of a JPEG to declare w x h. */
static void jpeg_set_size(uint8_t *buf, size_t len, unsigned w, unsigned h) {
    for (size_t i = 2; i + 9 < len; i++)
        if (buf[i] == 0xff && buf[i + 1] >= 0xc0 && buf[i + 1] <= 0xcf && buf[i + 1] != 0xc4 &&
            buf[i + 1] != 0xc8 && buf[i + 1] != 0xcc) {
            buf[i + 5] = (uint8_t)(h >> 8); buf[i + 6] = (uint8_t)h;
            buf[i + 7] = (uint8_t)(w >> 8); buf[i + 8] = (uint8_t)w;
            return;
        }
    CHECK(!"no SOF marker");
}

static void expect_limit(const uint8_t *buf, size_t len, const char *path,
                         const sp_decode_limits *lim) {
    sp_error err;
    sp_image_info info;
    sp_image img;
    int rc = sp__image_probe(buf, len, path, lim, &info, &err);
    CHECK_MSG(rc == SP_ELIMIT, "%s: probe returned %d (%s)", path, rc, err.msg);
    CHECK(strstr(err.msg, path));
    sp_decode_req r = req_full(3);
    rc = sp__image_decode(buf, len, path, &r, lim, &img, &err);
    CHECK_MSG(rc == SP_ELIMIT, "%s: decode returned %d (%s)", path, rc, err.msg);
    check_failure(rc, &err, &img, path);
}

/* PNG limits: PngSuite's basn2c08 with patched headers. */
static void test_png_limits(void) {
    if (!sp_test_corpus("pngsuite", "PNG limits (patched basn2c08)")) return;
    sp_error err;
    size_t len;
    uint8_t *png = load(sp_test_data("pngsuite/basn2c08.png"), &len);
    uint8_t *p = malloc(len);
    memcpy(p, png, len);
    png_set_size(p, 100000, 100000);          /* width above the limit */
    expect_limit(p, len, "big/wide.png", NULL);
    png_set_size(p, 16384, 16384);            /* 256 Mi pixels > 64 Mi */
    expect_limit(p, len, "big/pixels.png", NULL);
    png_set_size(p, 0x7fffffff, 1);
    expect_limit(p, len, "big/line.png", NULL);
    free(p);

    sp_decode_limits lim = {0, 0, 32 * 32 - 1, 0};   /* basn2c08 is 32x32 */
    expect_limit(png, len, "small/pixels.png", &lim);
    lim = (sp_decode_limits){31, 0, 0, 0};
    expect_limit(png, len, "small/width.png", &lim);
    lim = (sp_decode_limits){0, 31, 0, 0};
    expect_limit(png, len, "small/height.png", &lim);
    lim = (sp_decode_limits){0, 0, 0, 32 * 32 * 3 - 1};
    expect_limit(png, len, "small/bytes.png", &lim);
    lim = (sp_decode_limits){32, 32, 32 * 32, 32 * 32 * 3};  /* exactly at the limits */
    sp_image img;
    sp_decode_req r = req_full(3);
    CHECK_OK(sp__image_decode(png, len, "exact.png", &r, &lim, &img, &err), &err);
    sp_image_free(&img);
    free(png);
}

static void test_limits(void) {
    sp_error err;
    size_t len;
    sp_decode_limits dl;
    sp__decode_limits_default(&dl);
    CHECK(dl.max_width == 16384 && dl.max_height == 16384);
    CHECK(dl.max_pixels == 64ull << 20 && dl.max_bytes == 256ull << 20);
    test_png_limits();

    sp_decode_limits lim;
    sp_image img;
    sp_decode_req r = req_full(3);
    for (int prog = 0; prog < 2; prog++) {
        jvar v = {"lim", CS_YCC, 2, 2, prog, 0, 0, 0};
        uint8_t *pix = synth(64, 48, 3, 1);
        uint8_t *j = enc_jpeg(pix, 64, 48, &v, 90, &len);
        uint8_t *q = malloc(len);
        memcpy(q, j, len);
        jpeg_set_size(q, len, 60000, 60000);
        expect_limit(q, len, "big/huge.jpg", NULL);
        jpeg_set_size(q, len, 16000, 16000);
        expect_limit(q, len, "big/pixels.jpg", NULL);
        jpeg_set_size(q, len, 20000, 8);
        expect_limit(q, len, "big/wide.jpg", NULL);
        lim = (sp_decode_limits){0, 0, 64 * 48 - 1, 0};
        expect_limit(j, len, "small/pixels.jpg", &lim);
        lim = (sp_decode_limits){0, 0, 0, 64 * 48 * 3 - 1};
        expect_limit(j, len, "small/bytes.jpg", &lim);
        lim = (sp_decode_limits){64, 48, 64 * 48, 64 * 48 * 3};
        CHECK_OK(sp__image_decode(j, len, "exact.jpg", &r, &lim, &img, &err), &err);
        sp_image_free(&img);
        free(q);
        free(j);
        free(pix);
    }
}

/* ---- bad requests, sniffing, files ----------------------------------------- */

static void expect_einval(const uint8_t *buf, size_t len, const char *path,
                          sp_decode_req r) {
    sp_error err;
    sp_image img;
    memset(&img, 0x5a, sizeof img);
    int rc = sp__image_decode(buf, len, path, &r, NULL, &img, &err);
    CHECK_MSG(rc == SP_EINVAL, "%s: request ch=%d %d,%d %dx%d d=%d returned %d", path,
              r.channels, r.x, r.y, r.w, r.h, r.scale_denom, rc);
    check_failure(rc, &err, &img, path);
}

static void test_requests(void) {
    size_t plen = 0, jlen;
    uint8_t *png = NULL;   /* NULL without PngSuite: the JPEG requests still run */
    if (sp_test_corpus("pngsuite", "PNG requests, PNG sniffing, sp_read_file limits"))
        png = load(sp_test_data("pngsuite/basn2c08.png"), &plen);   /* 32x32 */
    jvar v = {"req", CS_YCC, 2, 2, 0, 0, 0, 0};
    uint8_t *pix = synth(40, 30, 3, 1);
    uint8_t *jpg = enc_jpeg(pix, 40, 30, &v, 90, &jlen);
    struct { const uint8_t *b; size_t n; const char *p; int W, H; } f[2] = {
        {png, plen, "req.png", 32, 32}, {jpg, jlen, "req.jpg", 40, 30}};
    for (int i = 0; i < 2; i++) {
        if (!f[i].b) continue;
        int W = f[i].W, H = f[i].H;
        expect_einval(f[i].b, f[i].n, f[i].p, (sp_decode_req){2, 0, 0, 0, 0, 1});
        expect_einval(f[i].b, f[i].n, f[i].p, (sp_decode_req){0, 0, 0, 0, 0, 1});
        expect_einval(f[i].b, f[i].n, f[i].p, (sp_decode_req){3, 0, 0, 0, 0, 3});
        expect_einval(f[i].b, f[i].n, f[i].p, (sp_decode_req){3, 0, 0, 0, 0, 0});
        expect_einval(f[i].b, f[i].n, f[i].p, (sp_decode_req){3, -1, 0, 4, 4, 1});
        expect_einval(f[i].b, f[i].n, f[i].p, (sp_decode_req){3, 0, -1, 4, 4, 1});
        expect_einval(f[i].b, f[i].n, f[i].p, (sp_decode_req){3, W - 3, 0, 4, 4, 1});
        expect_einval(f[i].b, f[i].n, f[i].p, (sp_decode_req){3, 0, H - 3, 4, 4, 1});
        expect_einval(f[i].b, f[i].n, f[i].p, (sp_decode_req){3, 0, 0, -4, 4, 1});
        expect_einval(f[i].b, f[i].n, f[i].p, (sp_decode_req){3, W, 0, 1, 1, 1});
    }
    /* PNG decodes only at scale 1 */
    if (png) expect_einval(png, plen, "req.png", (sp_decode_req){3, 0, 0, 0, 0, 2});
    /* w == 0 or h == 0 is the whole image */
    sp_error err;
    sp_image a, b;
    CHECK_OK(decode(jpg, jlen, "j", 3, 5, 7, 0, 9, 1, &a, &err), &err);
    CHECK(a.width == 40 && a.height == 30);
    CHECK_OK(decode(jpg, jlen, "j", 3, 0, 0, 40, 30, 1, &b, &err), &err);
    CHECK(crop_equal(&a, 0, 0, &b));
    sp_image_free(&a);
    sp_image_free(&b);
    /* a scaled region: 1/8 of 40x30 is 5x4; region 9,9 13x13 -> cols 1..2, rows 1..2 */
    CHECK_OK(decode(jpg, jlen, "j", 3, 9, 9, 13, 13, 8, &a, &err), &err);
    CHECK(a.width == 2 && a.height == 2);
    sp_image_free(&a);
    CHECK_OK(decode(jpg, jlen, "j", 3, 39, 29, 1, 1, 8, &a, &err), &err);
    CHECK(a.width == 1 && a.height == 1);
    sp_image_free(&a);

    /* sniffing */
    if (png) CHECK(sp__format_sniff(png, plen) == SP_FORMAT_PNG);
    CHECK(sp__format_sniff(jpg, jlen) == SP_FORMAT_JPEG);
    if (png) CHECK(sp__format_sniff(png, 7) == SP_FORMAT_UNKNOWN);
    CHECK(sp__format_sniff(jpg, 2) == SP_FORMAT_UNKNOWN);
    CHECK(sp__format_sniff(NULL, 0) == SP_FORMAT_UNKNOWN);
    CHECK(sp__format_sniff((const uint8_t *)"GIF89a", 6) == SP_FORMAT_UNKNOWN);
    sp_image img;
    int rc = decode((const uint8_t *)"GIF89a....", 10, "pic.gif", 3, 0, 0, 0, 0, 1, &img, &err);
    CHECK(rc == SP_EFORMAT);
    check_failure(rc, &err, &img, "pic.gif");
    rc = decode(NULL, 0, "empty.png", 3, 0, 0, 0, 0, 1, &img, &err);
    CHECK(rc == SP_EFORMAT);
    check_failure(rc, &err, &img, "empty.png");
    sp_image_info info;
    rc = sp__image_probe((const uint8_t *)"hello", 5, "hello.txt", NULL, &info, &err);
    CHECK(rc == SP_EFORMAT && strstr(err.msg, "hello.txt"));
    /* NULL path and NULL err are accepted */
    sp_decode_req r = req_full(1);
    CHECK(sp__image_decode(jpg, jlen, NULL, &r, NULL, &img, NULL) == 0);
    sp_image_free(&img);
    CHECK(sp__image_decode(jpg, 100, NULL, &r, NULL, &img, NULL) == SP_EFORMAT);
    CHECK(img.data == NULL);

    /* sp_read_file */
    uint8_t *data = (uint8_t *)1;
    size_t len = 99;
    rc = sp_read_file("/nonexistent/dir/file.png", 0, &data, &len, &err);
    CHECK(rc == SP_EIO && data == NULL && len == 0);
    CHECK(strstr(err.msg, "/nonexistent/dir/file.png"));
    if (png) {
        const char *bp = sp_test_data("pngsuite/basn2c08.png");
        char bpath[4096];
        snprintf(bpath, sizeof bpath, "%s", bp);
        rc = sp_read_file(bpath, 10, &data, &len, &err);
        CHECK(rc == SP_ELIMIT && data == NULL && strstr(err.msg, bpath));
        CHECK_OK(sp_read_file(bpath, plen, &data, &len, &err), &err);
        CHECK(len == plen && memcmp(data, png, plen) == 0);
        free(data);
        rc = sp_read_file(bpath, plen - 1, &data, &len, &err);
        CHECK(rc == SP_ELIMIT);
        rc = sp_read_file(sp_test_data("pngsuite"), 0, &data, &len, &err);
        CHECK(rc == SP_EIO && data == NULL);
    }

    free(png);
    free(jpg);
    free(pix);
}

/* ---- truncation ---------------------------------------------------------- */

static void check_truncations(const uint8_t *buf, size_t len, const char *name) {
    sp_error err;
    sp_image full;
    CHECK_OK(decode(buf, len, name, 3, 0, 0, 0, 0, 1, &full, &err), &err);
    int cuts = 0;
    for (size_t cut = 0; cut < len; cut += (cut < 40 || cut + 40 > len) ? 1 : 23) {
        char path[128];
        snprintf(path, sizeof path, "cut/%s@%zu", name, cut);
        uint8_t *b = malloc(cut ? cut : 1);
        memcpy(b, buf, cut);
        sp_image img;
        int rc = decode(b, cut, path, 3, 0, 0, 0, 0, 1, &img, &err);
        CHECK_MSG(rc != 0, "%s decoded although truncated", path);
        check_failure(rc, &err, &img, path);
        /* the top-left quarter and the top row: errors too, although the
         * rows they need are intact (the whole file is always checked) */
        int w = full.width / 2 ? full.width / 2 : 1, h = full.height / 2 ? full.height / 2 : 1;
        rc = decode(b, cut, path, 3, 0, 0, w, h, 1, &img, &err);
        CHECK_MSG(rc != 0, "%s: region decoded although the file is truncated", path);
        check_failure(rc, &err, &img, path);
        rc = decode(b, cut, path, 1, 0, 0, full.width, 1, 1, &img, &err);
        CHECK_MSG(rc != 0, "%s: top row decoded although the file is truncated", path);
        check_failure(rc, &err, &img, path);
        free(b);
        cuts++;
    }
    printf("truncated %s: %d cuts all rejected (full decode, top-left quarter, top row)\n",
           name, cuts);
    sp_image_free(&full);
}

static void test_truncated(void) {
    const char *pngs[] = {"basn2c08.png", "basi2c08.png", "basn3p04.png", "basi0g16.png"};
    int have_png = sp_test_corpus("pngsuite", "truncated PngSuite files");
    for (size_t i = 0; have_png && i < sizeof pngs / sizeof pngs[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "pngsuite/%s", pngs[i]);
        size_t len;
        uint8_t *b = load(sp_test_data(rel), &len);
        check_truncations(b, len, pngs[i]);
        free(b);
    }
    /* 4:2:0, gray, progressive, restart markers, CMYK, arithmetic (both) */
    const int which[] = {0, 5, 7, 10, 11, 18, 19};
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
        const jvar *v = &JVARS[which[i]];
        uint8_t *pix = synth(61, 45, jvar_comps(v), 1);
        size_t len;
        uint8_t *j = enc_jpeg(pix, 61, 45, v, 85, &len);
        check_truncations(j, len, v->name);
        free(j);
        free(pix);
    }
}

/* ---- one policy for decoder warnings, memory bounded by the file ---------- */

/* PNG bytes: 8-bit palette or gray, w x h, pixel value v(x, y), optionally
 * Adam7, with `npal` PLTE entries (colour type 3) and an extra chunk
 * before IDAT whose declared length may lie (declared != 0 replaces it). */
typedef struct png_spec {
    int w, h, color, interlace, npal;
    const char *extra_type;
    size_t extra_len;
    uint32_t extra_declared;
} png_spec;

static void png_chunk(uint8_t **buf, size_t *len, const char *type, const uint8_t *data,
                      size_t n, uint32_t declared) {
    *buf = realloc(*buf, *len + 12 + n);
    CHECK(*buf);
    uint8_t *p = *buf + *len;
    put_be32(p, declared ? declared : (uint32_t)n);
    memcpy(p + 4, type, 4);
    if (n) memcpy(p + 8, data, n);
    put_be32(p + 8 + n, (uint32_t)crc32(crc32(0L, Z_NULL, 0), p + 4, (uInt)(n + 4)));
    *len += 12 + n;
}

static uint8_t *make_png(const png_spec *sp, uint8_t (*v)(int x, int y), size_t *len) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t *buf = malloc(8);
    CHECK(buf);
    memcpy(buf, sig, 8);
    *len = 8;
    uint8_t ihdr[13];
    put_be32(ihdr, (uint32_t)sp->w);
    put_be32(ihdr + 4, (uint32_t)sp->h);
    ihdr[8] = 8; ihdr[9] = (uint8_t)sp->color; ihdr[10] = 0; ihdr[11] = 0;
    ihdr[12] = (uint8_t)sp->interlace;
    png_chunk(&buf, len, "IHDR", ihdr, 13, 0);
    if (sp->color == 3) {
        uint8_t pal[768];
        for (int i = 0; i < 3 * sp->npal; i++) pal[i] = (uint8_t)(i * 37 + 11);
        png_chunk(&buf, len, "PLTE", pal, (size_t)sp->npal * 3, 0);
    }
    if (sp->extra_type) {
        uint8_t *x = calloc(1, sp->extra_len + 1);
        CHECK(x);
        png_chunk(&buf, len, sp->extra_type, x, sp->extra_len, sp->extra_declared);
        free(x);
    }
    /* raw scanlines, filter 0; Adam7 passes in order when interlaced */
    static const int P[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
    size_t cap = (size_t)(sp->w + 1) * (size_t)sp->h * 2 + 64, n = 0;
    uint8_t *raw = malloc(cap);
    CHECK(raw);
    for (int p = 0; p < (sp->interlace ? 7 : 1); p++) {
        int x0 = sp->interlace ? P[p][0] : 0, y0 = sp->interlace ? P[p][1] : 0;
        int dx = sp->interlace ? P[p][2] : 1, dy = sp->interlace ? P[p][3] : 1;
        if (x0 >= sp->w || y0 >= sp->h) continue;
        for (int y = y0; y < sp->h; y += dy) {
            raw[n++] = 0;
            for (int x = x0; x < sp->w; x += dx) raw[n++] = v(x, y);
        }
    }
    uLongf zn = compressBound((uLong)n);
    uint8_t *z = malloc(zn);
    CHECK(z && compress(z, &zn, raw, (uLong)n) == Z_OK);
    png_chunk(&buf, len, "IDAT", z, zn, 0);
    png_chunk(&buf, len, "IEND", NULL, 0, 0);
    free(z);
    free(raw);
    return buf;
}

static int pal_bad_at = 0;   /* the index written at (13, 15); 0..2 are valid */
static uint8_t pal_pixels(int x, int y) {
    if (x == 13 && y == 15) return (uint8_t)pal_bad_at;
    return (uint8_t)((x + y) % 3);
}

static long maxrss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* A decode that must fail with `want` in the message, for the full image,
 * its top row and its top-left 4x4 (rows the damage is not in). */
static void expect_refused(const uint8_t *b, size_t len, const char *path, int w,
                           const char *want) {
    sp_error err;
    sp_image img;
    const int reqs[3][4] = {{0, 0, 0, 0}, {0, 0, w, 1}, {0, 0, 4, 4}};
    for (int r = 0; r < 3; r++)
        for (int ch = 1; ch <= 3; ch += 2) {
            int rc = decode(b, len, path, ch, reqs[r][0], reqs[r][1], reqs[r][2], reqs[r][3], 1,
                            &img, &err);
            CHECK_MSG(rc == SP_EFORMAT, "%s: request %d decoded (rc %d)", path, r, rc);
            check_failure(rc, &err, &img, path);
            CHECK_MSG(strstr(err.msg, want), "%s: message '%s' lacks '%s'", path, err.msg, want);
        }
}

static void test_png_policy(void) {
    sp_error err;
    sp_image img;
    size_t len;
    int cases = 0;
    for (int il = 0; il <= 1; il++) {
        png_spec sp = {16, 16, 3, il, 3, NULL, 0, 0};
        /* valid control: every index < 3 */
        pal_bad_at = 2;
        uint8_t *b = make_png(&sp, pal_pixels, &len);
        CHECK_OK(decode(b, len, "pal-ok.png", 3, 0, 0, 0, 0, 1, &img, &err), &err);
        size_t o = ((size_t)15 * 16 + 13) * 3;   /* (13, 15) = palette entry 2 */
        CHECK(img.data[o] == (uint8_t)(6 * 37 + 11) && img.data[o + 2] == (uint8_t)(8 * 37 + 11));
        sp_image_free(&img);
        free(b);
        /* index == npal (which libpng 1.6 itself misses) and far past it,
         * in the last row: refused for any region */
        const int bad[2] = {3, 200};
        for (int k = 0; k < 2; k++) {
            pal_bad_at = bad[k];
            b = make_png(&sp, pal_pixels, &len);
            char path[64], want[64];
            snprintf(path, sizeof path, "pal-%s-%d.png", il ? "adam7" : "seq", bad[k]);
            snprintf(want, sizeof want, "palette index %d at row 15", bad[k]);
            expect_refused(b, len, path, 16, want);
            free(b);
            cases++;
        }
    }
    /* declared lengths beyond the file: a 1x1 palette PNG whose tEXt, zTXt,
     * iCCP or unknown chunk claims ~2 GB is refused without the memory */
    const char *types[] = {"tEXt", "zTXt", "iCCP", "abCd", "IDAT"};
    long rss0 = maxrss_kb();
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        png_spec sp = {1, 1, 3, 0, 1, types[i], 9, 0x7ff00000u};
        pal_bad_at = 0;
        uint8_t *b = make_png(&sp, pal_pixels, &len);
        CHECK(len < 128);
        char path[64];
        snprintf(path, sizeof path, "huge-%s.png", types[i]);
        int rc = decode(b, len, path, 3, 0, 0, 0, 0, 1, &img, &err);
        CHECK_MSG(rc == SP_EFORMAT && strstr(err.msg, "declares 2146435072 bytes"),
                  "%s: rc %d '%s'", path, rc, err.msg);
        check_failure(rc, &err, &img, path);
        free(b);
        cases++;
    }
    long grew = maxrss_kb() - rss0;
    CHECK_MSG(grew < 32 * 1024, "the ~2 GB declared chunks cost %ld KB of memory", grew);
    /* a truthful big ancillary chunk is skipped unread: the file decodes */
    png_spec big = {16, 16, 0, 0, 0, "tEXt", 3u << 20, 0};
    uint8_t *b = make_png(&big, pal_pixels, &len);
    CHECK_OK(decode(b, len, "big-text.png", 1, 0, 0, 0, 0, 1, &img, &err), &err);
    CHECK(img.data[0] == 0 && img.data[16 * 15 + 13] == (uint8_t)pal_bad_at);
    sp_image_free(&img);
    /* ... but a chunk after IEND is gone, and so is IEND itself */
    size_t cut = len - 12;
    int rc = decode(b, cut, "no-iend.png", 1, 0, 0, 16, 1, 1, &img, &err);
    CHECK_MSG(rc == SP_EFORMAT && strstr(err.msg, "no IEND"), "no-iend: '%s'", err.msg);
    free(b);
    printf("png policy: %d palette/length cases refused for every region; memory +%ld KB\n",
           cases, grew);
}

static void test_jpeg_policy(void) {
    sp_error err;
    sp_image img;
    size_t len;
    uint8_t *pix = synth(48, 40, 3, 1);
    uint8_t *j = enc_jpeg(pix, 48, 40, &JVARS[0], 85, &len);
    /* an APP1 after SOI claiming 60000 bytes of a short file */
    uint8_t *b = malloc(len + 8);
    CHECK(b);
    memcpy(b, j, 2);
    const uint8_t app1[6] = {0xFF, 0xE1, 0xEA, 0x60, 'E', 'x'};
    memcpy(b + 2, app1, 6);
    memcpy(b + 8, j + 2, len - 2);
    int rc = decode(b, len + 6, "app1.jpg", 3, 0, 0, 0, 0, 1, &img, &err);
    CHECK_MSG(rc == SP_EFORMAT && strstr(err.msg, "declares 60000 bytes"), "app1: '%s'",
              err.msg);
    sp_image_info info;
    rc = sp__image_probe(b, len + 6, "app1.jpg", NULL, &info, &err);
    CHECK(rc == SP_EFORMAT && strstr(err.msg, "app1.jpg"));
    /* stray bytes between two segments: libjpeg's "extraneous bytes"
     * warning, an error like every other one */
    size_t seg = 2 + 2 + (((size_t)j[4] << 8) | j[5]);   /* SOI + the first segment */
    CHECK(j[2] == 0xFF && seg < len);
    memcpy(b, j, seg);
    b[seg] = 0x00;
    b[seg + 1] = 0x17;
    memcpy(b + seg + 2, j + seg, len - seg);
    expect_refused(b, len + 2, "stray.jpg", 48, "stray.jpg");
    rc = decode(b, len + 2, "stray.jpg", 3, 0, 0, 0, 0, 1, &img, &err);
    CHECK_MSG(strstr(err.msg, "0x00 where a marker should begin"), "stray: '%s'", err.msg);
    free(b);
    free(j);
    free(pix);
    printf("jpeg policy: a lying segment length and stray bytes are refused\n");
}

/* ---- reentrancy -------------------------------------------------------------- */

#define NTHREAD_IMG 6
typedef struct thread_job {
    const uint8_t *bufs[NTHREAD_IMG];
    size_t lens[NTHREAD_IMG];
    const sp_image *expect[NTHREAD_IMG];
    int first;   /* 0, or 3 without PngSuite: the JPEGs only */
    int ok;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *job = arg;
    job->ok = 1;
    for (int rep = 0; rep < 20; rep++)
        for (int i = job->first; i < NTHREAD_IMG; i++) {
            sp_error err;
            sp_image img;
            if (decode(job->bufs[i], job->lens[i], "t", 3, 0, 0, 0, 0, 1, &img, &err) != 0 ||
                !crop_equal(&img, 0, 0, job->expect[i]) || img.width != job->expect[i]->width ||
                img.height != job->expect[i]->height)
                job->ok = 0;
            sp_image_free(&img);
        }
    return NULL;
}

static void test_threads(void) {
    uint8_t *bufs[NTHREAD_IMG];
    size_t lens[NTHREAD_IMG];
    sp_image expect[NTHREAD_IMG];
    uint8_t *pix[NTHREAD_IMG] = {0};
    const char *pngs[3] = {"pngsuite/basi2c16.png", "pngsuite/basn3p08.png",
                           "pngsuite/tbrn2c08.png"};
    const int jv[3] = {0, 8, 13};
    sp_error err;
    int first = sp_test_corpus("pngsuite", "PngSuite files in the threads check") ? 0 : 3;
    for (int i = 0; i < first; i++) {   /* nothing to free for the PNGs not loaded */
        bufs[i] = NULL;
        memset(&expect[i], 0, sizeof expect[i]);
    }
    for (int i = first; i < NTHREAD_IMG; i++) {
        if (i < 3) {
            bufs[i] = load(sp_test_data(pngs[i]), &lens[i]);
        } else {
            const jvar *v = &JVARS[jv[i - 3]];
            pix[i] = synth(150, 100, jvar_comps(v), 1);
            bufs[i] = enc_jpeg(pix[i], 150, 100, v, 90, &lens[i]);
        }
        CHECK_OK(decode(bufs[i], lens[i], "t", 3, 0, 0, 0, 0, 1, &expect[i], &err), &err);
    }
    thread_job jobs[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        for (int i = 0; i < NTHREAD_IMG; i++) {
            jobs[t].bufs[i] = bufs[i];
            jobs[t].lens[i] = lens[i];
            jobs[t].expect[i] = &expect[i];
        }
        jobs[t].first = first;
        CHECK(pthread_create(&th[t], NULL, thread_main, &jobs[t]) == 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK(jobs[t].ok);
    }
    for (int i = 0; i < NTHREAD_IMG; i++) {
        sp_image_free(&expect[i]);
        free(bufs[i]);
        free(pix[i]);
    }
}

static void test_jpeg_bugs(void) { test_jpeg_corpus("jpeg-bugs"); }
static void test_jpeg_crashtest(void) { test_jpeg_corpus("jpeg-crashtest"); }

/* The runner waited for every case: its children's CPU time is theirs. */
static void teardown(void) {
    struct rusage ru;
    CHECK(getrusage(RUSAGE_CHILDREN, &ru) == 0);
    double cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                 (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    printf("test_decode: %.1f s CPU in the cases run\n", cpu);
}

static const sp_case cases[] = {
    SP_CASE(test_png_known_pixels),
    SP_CASE(test_png_16bit_rule),
    SP_CASE(test_pngsuite),
    SP_CASE(test_requests),
    SP_CASE(test_limits),
    SP_CASE(test_scan_limit),
    SP_CASE(test_truncated),
    SP_CASE(test_png_policy),
    SP_CASE(test_jpeg_policy),
    SP_CASE(test_jpeg_regions),
    SP_CASE(test_threads),
    SP_CASE(test_jpeg_bugs),
    SP_CASE(test_jpeg_crashtest),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, teardown);
}
