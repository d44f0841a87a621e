/* test_imageio.c - PNG/JPEG writing and contact sheets (imageio.h).
 *
 * PNG: encode gray and RGB images with padded strides, decode them with
 * libpng directly (not through seedpipe's decoder) and demand the same
 * pixels; the header says 8-bit, right colour type, not interlaced; encoding
 * is repeatable and sp_image_write writes exactly the encoded bytes. JPEG:
 * TurboJPEG reads back the size and 4:2:0 (gray for 1 channel) subsampling,
 * the pixels are close, quality is range-checked. Contact sheet: the
 * documented geometry, pixel for pixel. Errors name the path.
 * sp_image_write picks the format by the name's extension (any case) or as
 * named, and refuses a name that says no format, writing nothing.
 * Cases: test_png_write, test_jpeg_write (files in setup's mkdtemp
 * directory, removed by teardown), test_contact_sheet.
 */
#include "seedpipe/imageio.h"
#include "augment/imageio_internal.h"

#include "check.h"
#include "runner.h"

#include <png.h>
#include <stdint.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

static sp_image make_image(int w, int h, int c, size_t pad) {
    sp_image im;
    im.width = w;
    im.height = h;
    im.channels = c;
    im.stride = (size_t)w * (size_t)c + pad;
    im.data = malloc(im.stride * (size_t)h);
    CHECK(im.data);
    memset(im.data, 0xEE, im.stride * (size_t)h);   /* padding must not leak */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++)
                im.data[(size_t)y * im.stride + (size_t)(x * c + k)] =
                    (uint8_t)(x * 37 + y * 11 + k * 91 + x * y);
    return im;
}

static uint8_t *read_whole(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    CHECK(b);
    CHECK(fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void check_png_roundtrip(int w, int h, int c, size_t pad, const char *tmpdir) {
    sp_error err;
    sp_image im = make_image(w, h, c, pad);
    uint8_t *buf, *buf2;
    size_t len, len2;
    CHECK_OK(sp__png_encode(&im, &buf, &len, &err), &err);
    CHECK(len > 33 && memcmp(buf, "\x89PNG\r\n\x1a\n", 8) == 0);
    CHECK(buf[24] == 8);                          /* bit depth */
    CHECK(buf[25] == (c == 1 ? 0 : 2));           /* gray / RGB */
    CHECK(buf[28] == 0);                          /* not interlaced */

    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    CHECK(png_image_begin_read_from_memory(&pi, buf, len));
    CHECK((int)pi.width == w && (int)pi.height == h);
    pi.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    uint8_t *px = malloc(PNG_IMAGE_SIZE(pi));
    CHECK(px);
    CHECK(png_image_finish_read(&pi, NULL, px, 0, NULL));
    for (int y = 0; y < h; y++)
        CHECK(memcmp(px + (size_t)y * (size_t)w * (size_t)c, im.data + (size_t)y * im.stride,
                     (size_t)w * (size_t)c) == 0);
    free(px);

    /* repeatable, and the file holds exactly the encoded bytes */
    CHECK_OK(sp__png_encode(&im, &buf2, &len2, &err), &err);
    CHECK(len2 == len && memcmp(buf, buf2, len) == 0);
    char path[512];
    snprintf(path, sizeof path, "%s/img_%d_%d_%d.png", tmpdir, w, h, c);
    CHECK_OK(sp_image_write(path, &im, SP_IMAGE_BY_NAME, 0, &err), &err);
    size_t flen;
    uint8_t *file = read_whole(path, &flen);
    CHECK(flen == len && memcmp(file, buf, len) == 0);
    unlink(path);
    free(file);
    free(buf);
    free(buf2);
    free(im.data);
}

static void test_png(const char *tmpdir) {
    check_png_roundtrip(7, 5, 3, 5, tmpdir);
    check_png_roundtrip(9, 4, 1, 3, tmpdir);
    check_png_roundtrip(1, 1, 3, 0, tmpdir);
    check_png_roundtrip(300, 17, 3, 0, tmpdir);

    sp_error err;
    sp_image im = make_image(4, 4, 3, 0);
    int rc = sp_image_write("/nonexistent-dir-sp/x.png", &im, SP_IMAGE_PNG, 0, &err);
    CHECK(rc == SP_EIO);
    CHECK_MSG(strstr(err.msg, "/nonexistent-dir-sp/x.png") && strstr(err.msg, "No such file"),
              "%s", err.msg);
    sp_image bad = im;
    bad.channels = 2;
    uint8_t *buf;
    size_t len;
    CHECK(sp__png_encode(&bad, &buf, &len, &err) == SP_EINVAL);
    CHECK(buf == NULL && len == 0);
    bad = im;
    bad.stride = 5;
    CHECK(sp__png_encode(&bad, &buf, &len, &err) == SP_EINVAL);
    free(im.data);
}

static void test_jpeg(const char *tmpdir) {
    sp_error err;
    for (int c = 1; c <= 3; c += 2) {
        int w = 33, h = 24;
        sp_image im = make_image(w, h, c, 7);
        /* smooth content so the error bound below is meaningful */
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int k = 0; k < c; k++)
                    im.data[(size_t)y * im.stride + (size_t)(x * c + k)] =
                        (uint8_t)(40 + x * 4 + y * 3 + k * 20);
        uint8_t *buf, *buf2;
        size_t len, len2;
        CHECK_OK(sp__jpeg_encode(&im, 90, &buf, &len, &err), &err);
        CHECK(len > 4 && buf[0] == 0xFF && buf[1] == 0xD8);
        CHECK_OK(sp__jpeg_encode(&im, 90, &buf2, &len2, &err), &err);
        CHECK(len2 == len && memcmp(buf, buf2, len) == 0);
        free(buf2);

        tjhandle tj = tjInitDecompress();
        CHECK(tj);
        int jw, jh, ss, cs;
        CHECK(tjDecompressHeader3(tj, buf, len, &jw, &jh, &ss, &cs) == 0);
        CHECK(jw == w && jh == h);
        CHECK(ss == (c == 3 ? TJSAMP_420 : TJSAMP_GRAY));
        uint8_t *px = malloc((size_t)w * (size_t)h * (size_t)c);
        CHECK(px);
        CHECK(tjDecompress2(tj, buf, len, px, w, 0, h, c == 3 ? TJPF_RGB : TJPF_GRAY,
                            TJFLAG_ACCURATEDCT) == 0);
        long sum = 0;
        for (int y = 0; y < h; y++)
            for (int i = 0; i < w * c; i++) {
                int d = px[y * w * c + i] - im.data[(size_t)y * im.stride + (size_t)i];
                sum += d < 0 ? -d : d;
            }
        double mae = (double)sum / (w * h * c);
        CHECK_MSG(mae < 3.0, "JPEG q90 mean abs error %.2f", mae);
        free(px);
        tjDestroy(tj);

        char path[512];
        snprintf(path, sizeof path, "%s/img_%d.jpg", tmpdir, c);
        CHECK_OK(sp_image_write(path, &im, SP_IMAGE_BY_NAME, 90, &err), &err);
        size_t flen;
        uint8_t *file = read_whole(path, &flen);
        CHECK(flen == len && memcmp(file, buf, len) == 0);
        unlink(path);
        free(file);
        /* the format by name, any case, or named outright whatever the name */
        const char *names[] = {"IMG.JPEG", "img.Jpg", "img.png.jpg", "no_extension"};
        for (int i = 0; i < 4; i++) {
            snprintf(path, sizeof path, "%s/%s", tmpdir, names[i]);
            CHECK_OK(sp_image_write(path, &im, i == 3 ? SP_IMAGE_JPEG : SP_IMAGE_BY_NAME, 90,
                                    &err), &err);
            file = read_whole(path, &flen);
            CHECK_MSG(flen == len && memcmp(file, buf, len) == 0, "%s: not the JPEG", names[i]);
            unlink(path);
            free(file);
        }
        snprintf(path, sizeof path, "%s/img.gif", tmpdir);
        CHECK(sp_image_write(path, &im, SP_IMAGE_BY_NAME, 90, &err) == SP_EINVAL);
        CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, ".png, .jpg or .jpeg"), "%s", err.msg);
        CHECK(access(path, F_OK) != 0);
        CHECK(sp_image_write(path, &im, (sp_image_format)7, 90, &err) == SP_EINVAL);
        snprintf(path, sizeof path, "%s/q0.jpg", tmpdir);
        CHECK(sp_image_write(path, &im, SP_IMAGE_BY_NAME, 0, &err) == SP_EINVAL);
        CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, "quality"), "%s", err.msg);
        CHECK(access(path, F_OK) != 0);

        CHECK(sp__jpeg_encode(&im, 0, &buf2, &len2, &err) == SP_EINVAL);
        CHECK(buf2 == NULL && len2 == 0);
        CHECK(sp__jpeg_encode(&im, 101, &buf2, &len2, &err) == SP_EINVAL);
        CHECK(strstr(err.msg, "quality"));
        CHECK(sp_image_write("/nonexistent-dir-sp/y.jpg", &im, SP_IMAGE_JPEG, 90, &err) == SP_EIO);
        CHECK(strstr(err.msg, "/nonexistent-dir-sp/y.jpg"));
        free(buf);
        free(im.data);
    }
}

static void check_sheet(int count, int h, int w, int c, int cols) {
    sp_error err;
    size_t tile = (size_t)h * (size_t)w * (size_t)c;
    uint8_t *px = malloc(tile * (size_t)count);
    CHECK(px);
    for (size_t i = 0; i < tile * (size_t)count; i++) px[i] = (uint8_t)(i * 7 + 1);
    sp_image s;
    CHECK_OK(sp_contact_sheet(px, count, h, w, c, cols, &s, &err), &err);
    int ecols = cols > count ? count : cols;
    int rows = (count + ecols - 1) / ecols;
    CHECK(s.channels == 3);
    CHECK(s.width == ecols * (w + 2) + 2);
    CHECK(s.height == rows * (h + 2) + 2);
    for (int Y = 0; Y < s.height; Y++) {
        for (int X = 0; X < s.width; X++) {
            int expect[3] = {SP_CONTACT_BG, SP_CONTACT_BG, SP_CONTACT_BG};
            int col = (X - 2) / (w + 2), row = (Y - 2) / (h + 2);
            int tx = (X - 2) % (w + 2), ty = (Y - 2) % (h + 2);
            int k = row * ecols + col;
            if (X >= 2 && Y >= 2 && tx < w && ty < h && col < ecols && k < count) {
                const uint8_t *p = px + (size_t)k * tile + ((size_t)ty * (size_t)w + (size_t)tx) * (size_t)c;
                for (int ch = 0; ch < 3; ch++) expect[ch] = c == 3 ? p[ch] : p[0];
            }
            for (int ch = 0; ch < 3; ch++)
                CHECK_MSG(s.data[(size_t)Y * s.stride + (size_t)X * 3 + (size_t)ch] == expect[ch],
                          "sheet pixel (%d,%d,%d)", X, Y, ch);
        }
    }
    sp_image_free(&s);
    free(px);
}

static void test_contact_sheet(void) {
    check_sheet(5, 3, 4, 1, 3);    /* 2 rows, last row with an empty cell */
    check_sheet(6, 5, 2, 3, 2);
    check_sheet(3, 4, 4, 3, 10);   /* cols clamp to count */
    check_sheet(1, 1, 1, 1, 1);
    /* the example from the header: 5 tiles of 4x6, 3 columns -> 26 x 14 */
    sp_error err;
    uint8_t px[5 * 4 * 6] = {0};
    sp_image s;
    CHECK_OK(sp_contact_sheet(px, 5, 4, 6, 1, 3, &s, &err), &err);
    CHECK(s.width == 26 && s.height == 14);
    sp_image_free(&s);
    CHECK(sp_contact_sheet(px, 0, 4, 6, 1, 3, &s, &err) == SP_EINVAL);
    CHECK(sp_contact_sheet(px, 5, 4, 6, 2, 3, &s, &err) == SP_EINVAL);
    CHECK(sp_contact_sheet(px, 5, 4, 6, 1, 0, &s, &err) == SP_EINVAL);
    CHECK(sp_contact_sheet(NULL, 5, 4, 6, 1, 3, &s, &err) == SP_EINVAL);
    CHECK(s.data == NULL);
}

static char g_dir[64];   /* setup's temporary directory (the files the cases write) */

static void setup(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/sp_test_imageio_XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
}

static void test_png_write(void) { test_png(g_dir); }
static void test_jpeg_write(void) { test_jpeg(g_dir); }

static const sp_case cases[] = {
    SP_CASE(test_png_write),
    SP_CASE(test_jpeg_write),
    SP_CASE(test_contact_sheet),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}
