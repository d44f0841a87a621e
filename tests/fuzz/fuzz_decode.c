/* fuzz_decode - PNG, JPEG, BMP, WebP and TIFF through sp__image_probe + sp__image_decode with
 * small limits: the full image at scale 1, then (JPEG) a region at scale 2
 * and (PNG) a region at scale 1, both channel counts. Any input must give
 * 0 or an SP_E* code with a message, never a crash, leak or overflow; a
 * successful decode must have the documented geometry.
 *
 * The oracle is the warning policy (docs/security.md): whenever seedpipe
 * returns pixels, for any request, the file is decoded again in full by
 * the library itself (libjpeg / libpng with their default tolerance, only
 * the ancillary chunks skipped as seedpipe skips them), counting warnings;
 * a file the library warned about or failed on must never have been
 * returned as pixels (abort). A JPEG in YCbCr or RGB also has its pixels
 * compared: seedpipe's full RGB decode must equal libjpeg's. A JPEG
 * decoded in full also has its entropy checkpoints made (jpeg_ckpt.c):
 * a crop from them must equal the same crop from the top, and the
 * input's second half taken as a table must neither crash nor fail the
 * crop (a table not the file's is refused or falls back). */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

#include "seedpipe/decode.h"
#include "augment/decode_internal.h"
#include "augment/jpeg_ckpt_internal.h"

/* ---- the library alone, as the oracle ------------------------------------ */

typedef struct oracle {
    struct jpeg_error_mgr jerr;   /* first: cinfo->err points here */
    jmp_buf jb;
    int warnings;
} oracle;

static void o_jpeg_fail(j_common_ptr ci) { longjmp(((oracle *)ci->err)->jb, 1); }
static void o_jpeg_emit(j_common_ptr ci, int level) {
    if (level < 0) ((oracle *)ci->err)->warnings++;
}
static void o_quiet(j_common_ptr ci) { (void)ci; }

/* 1: libjpeg decodes the whole file with no warning (RGB into *rgb when
 * the file is YCbCr or RGB; *rgb stays NULL otherwise). */
static int o_jpeg(const uint8_t *data, size_t size, uint8_t **rgb) {
    oracle o;
    memset(&o, 0, sizeof o);
    struct jpeg_decompress_struct ci;
    uint8_t *volatile out = NULL;
    ci.err = jpeg_std_error(&o.jerr);
    o.jerr.error_exit = o_jpeg_fail;
    o.jerr.emit_message = o_jpeg_emit;
    o.jerr.output_message = o_quiet;
    jpeg_create_decompress(&ci);
    if (setjmp(o.jb)) {
        jpeg_destroy_decompress(&ci);
        free(out);
        return 0;
    }
    jpeg_mem_src(&ci, data, (unsigned long)size);
    jpeg_read_header(&ci, TRUE);
    int colour = ci.jpeg_color_space == JCS_YCbCr || ci.jpeg_color_space == JCS_RGB;
    ci.out_color_space = colour ? JCS_RGB : ci.jpeg_color_space == JCS_GRAYSCALE
                                                ? JCS_GRAYSCALE : JCS_CMYK;
    ci.dct_method = JDCT_ISLOW;
    ci.do_fancy_upsampling = TRUE;
    ci.do_block_smoothing = FALSE;
    jpeg_start_decompress(&ci);
    size_t rowb = (size_t)ci.output_width * (size_t)ci.output_components;
    out = malloc(rowb * ci.output_height);
    if (!out) abort();
    while (ci.output_scanline < ci.output_height) {
        JSAMPROW r = out + (size_t)ci.output_scanline * rowb;
        jpeg_read_scanlines(&ci, &r, 1);
    }
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    if (o.warnings || !colour) {
        free(out);
        out = NULL;
    }
    *rgb = out;
    return o.warnings == 0;
}

static void o_png_error(png_structp png, png_const_charp msg) {
    (void)msg;
    longjmp(((oracle *)png_get_error_ptr(png))->jb, 1);
}
static void o_png_warning(png_structp png, png_const_charp msg) {
    (void)msg;
    ((oracle *)png_get_error_ptr(png))->warnings++;
}

typedef struct o_src { const uint8_t *p; size_t n, pos; } o_src;
static void o_png_read(png_structp png, png_bytep dst, size_t n) {
    o_src *s = png_get_io_ptr(png);
    if (n > s->n - s->pos) png_error(png, "truncated");
    memcpy(dst, s->p + s->pos, n);
    s->pos += n;
}

/* 1: libpng decodes every row and reads to IEND with no warning or
 * benign error (libpng's defaults: benign errors are warnings). */
static int o_png(const uint8_t *data, size_t size) {
    oracle o;
    memset(&o, 0, sizeof o);
    o_src src = {data, size, 0};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &o, o_png_error,
                                             o_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    uint8_t *volatile row = NULL;
    if (!png || !info) abort();
    if (setjmp(o.jb)) {
        png_destroy_read_struct(&png, &info, NULL);
        free(row);
        return 0;
    }
    png_set_read_fn(png, &src, o_png_read);
    static const png_byte trns[] = "tRNS";
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, trns, 1);
    png_read_info(png, info);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    row = malloc(png_get_rowbytes(png, info));
    if (!row) abort();
    for (int p = 0; p < passes; p++)
        for (png_uint_32 y = 0; y < png_get_image_height(png, info); y++)
            png_read_row(png, row, NULL);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(row);
    return o.warnings == 0;
}

/* seedpipe returned pixels for this file: the library must agree. */
static void check_oracle(const uint8_t *data, size_t size, const sp_image_info *info,
                         const sp_image *full_rgb) {
    if (info->format == SP_FORMAT_PNG) {
        if (!o_png(data, size)) abort();   /* pixels from a file libpng warned about */
        return;
    }
    if (info->format != SP_FORMAT_JPEG) return;   /* BMP, WebP, TIFF: no second decoder */
    uint8_t *rgb = NULL;
    if (!o_jpeg(data, size, &rgb)) abort();   /* ... libjpeg warned about */
    if (rgb && full_rgb) {
        for (int y = 0; y < full_rgb->height; y++)
            if (memcmp(full_rgb->data + (size_t)y * full_rgb->stride,
                       rgb + (size_t)y * (size_t)full_rgb->width * 3,
                       (size_t)full_rgb->width * 3) != 0)
                abort();   /* seedpipe's pixels are not libjpeg's */
    }
    free(rgb);
}

static int div_up(int a, int d) { return (a + d - 1) / d; }

static void check_out(const sp_image *im, const sp_image_info *info, const sp_decode_req *rq) {
    int d = rq->scale_denom;
    int W = info->width, H = info->height;
    int x = rq->w ? rq->x : 0, y = rq->w && rq->h ? rq->y : 0;
    int w = rq->w && rq->h ? rq->w : W, h = rq->w && rq->h ? rq->h : H;
    int Ws = div_up(W, d), Hs = div_up(H, d);
    int x1 = div_up(x + w, d) < Ws ? div_up(x + w, d) : Ws;
    int y1 = div_up(y + h, d) < Hs ? div_up(y + h, d) : Hs;
    if (im->width != x1 - x / d || im->height != y1 - y / d || im->channels != rq->channels)
        abort();
    /* touch every byte (ASan checks the bounds) */
    volatile uint8_t acc = 0;
    for (int r = 0; r < im->height; r++)
        for (size_t i = 0; i < (size_t)im->width * (size_t)im->channels; i++)
            acc ^= im->data[(size_t)r * im->stride + i];
    (void)acc;
}

static int same_pixels(const sp_image *a, const sp_image *b) {
    if (a->width != b->width || a->height != b->height || a->channels != b->channels) return 0;
    for (int y = 0; y < a->height; y++)
        if (memcmp(a->data + (size_t)y * a->stride, b->data + (size_t)y * b->stride,
                   (size_t)a->width * (size_t)a->channels) != 0)
            return 0;
    return 1;
}

/* A JPEG decoded in full without error: a lower crop from its checkpoints
 * equals the crop from the top; a foreign table is harmless. */
static void check_ckpt(const uint8_t *data, size_t size, const sp_image_info *info,
                       const sp_decode_limits *lim) {
    uint8_t *ck;
    size_t cl;
    if (sp__jpeg_ckpt_make(data, size, &ck, &cl) < 0) return;
    int w = info->width / 2 > 0 ? info->width / 2 : 1;
    sp_decode_req rq = {3, info->width / 5, info->height / 2, w, info->height - info->height / 2,
                        1};
    sp__decode_hint plain = {SP__DECODE_VALIDATED, NULL, 0}, own = {SP__DECODE_VALIDATED, ck, cl};
    sp__decode_hint foreign = {SP__DECODE_VALIDATED, data + size / 2, size - size / 2};
    sp_image a, b, c;
    sp_error err;
    int ra = sp__image_decode_hint(data, size, "fuzz", &rq, lim, &plain, &a, &err);
    int rb = sp__image_decode_hint(data, size, "fuzz", &rq, lim, &own, &b, &err);
    int rc = sp__image_decode_hint(data, size, "fuzz", &rq, lim, &foreign, &c, &err);
    if (ra != 0 || rb != 0 || rc != 0 || !same_pixels(&a, &b)) abort();
    sp_image_free(&a);
    sp_image_free(&b);
    sp_image_free(&c);
    free(ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_decode_limits lim;
    memset(&lim, 0, sizeof lim);
    lim.max_width = 1024;
    lim.max_height = 1024;
    lim.max_pixels = 256 * 1024;
    lim.max_bytes = 1u << 20;
    sp_image_info info;
    sp_error err;
    (void)sp__format_sniff(data, size);
    if (sp__image_probe(data, size, "fuzz", &lim, &info, &err) != 0) {
        if (err.code == 0 || err.msg[0] == '\0') abort();
        return 0;
    }
    if (info.width <= 0 || info.height <= 0 || (uint64_t)info.width * info.height > lim.max_pixels)
        abort();
    int served = 0;   /* pixels returned for some request */
    sp_image full_rgb = {0};
    for (int ch = 1; ch <= 3; ch += 2) {
        sp_decode_req rq = {ch, 0, 0, 0, 0, 1};
        sp_image im;
        if (sp__image_decode(data, size, "fuzz", &rq, &lim, &im, &err) == 0) {
            check_out(&im, &info, &rq);
            served = 1;
            if (ch == 3) full_rgb = im;
            else sp_image_free(&im);
        } else if (err.msg[0] == '\0' || im.data) {
            abort();
        }
        /* a region in the middle */
        rq.x = info.width / 4;
        rq.y = info.height / 3;
        rq.w = info.width / 2 > 0 ? info.width / 2 : 1;
        rq.h = info.height / 2 > 0 ? info.height / 2 : 1;
        rq.scale_denom = info.format == SP_FORMAT_JPEG ? 2 : 1;
        if (sp__image_decode(data, size, "fuzz", &rq, &lim, &im, &err) == 0) {
            check_out(&im, &info, &rq);
            served = 1;
            sp_image_free(&im);
        }
    }
    if (served) check_oracle(data, size, &info, full_rgb.data ? &full_rgb : NULL);
    if (full_rgb.data && info.format == SP_FORMAT_JPEG) check_ckpt(data, size, &info, &lim);
    sp_image_free(&full_rgb);
    return 0;
}
