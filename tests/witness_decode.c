/* witness_decode.c - seedpipe's side of tests/test_witness.py (a helper, not
 * a test: ctest runs tests/test_*.c).
 *
 *   witness_decode OUTDIR < LIST
 *
 * LIST has one path per line. For line i, the file is probed and decoded in
 * full at scale 1 with the channels its header implies (1 for gray, 3
 * otherwise), and decoded again as its top row only, at 1 channel, through
 * the public API (include/seedpipe/decode.h) with the default limits. On
 * success the full decode's pixels go to OUTDIR/i.raw (row-major, tightly
 * packed). One line per file on stdout, tab-separated:
 *
 *   i  OK   width  height  channels  top=<rc>
 *   i  ERR  <rc>   <message without the path>  top=<rc>
 *
 * top=<rc> is the top-row decode's return code, which the test requires to
 * agree with the full decode's: the policy must not depend on the region.
 */
#include "seedpipe/decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "augment/decode_internal.h"

static void strip_path(const char *msg, const char *path, char *out, size_t n) {
    size_t pl = strlen(path);
    if (strncmp(msg, path, pl) == 0 && strncmp(msg + pl, ": ", 2) == 0) msg += pl + 2;
    snprintf(out, n, "%s", msg);
    for (char *p = out; *p; p++)
        if (*p == '\t' || *p == '\n') *p = ' ';
}

static int decode_one(const char *dir, long i, const char *path) {
    uint8_t *buf = NULL;
    size_t len = 0;
    sp_error err;
    char msg[SP_ERROR_MSG_MAX];
    int rc = sp_read_file(path, 0, &buf, &len, &err);
    sp_image_info info = {0};
    if (rc == 0) rc = sp__image_probe(buf, len, path, NULL, &info, &err);
    sp_image img = {0};
    if (rc == 0) {
        sp_decode_req full = {info.channels, 0, 0, 0, 0, 1};
        rc = sp__image_decode(buf, len, path, &full, NULL, &img, &err);
    }
    if (rc != 0) strip_path(err.msg, path, msg, sizeof msg);
    int top = rc;
    if (info.width > 0) {
        sp_decode_req row = {1, 0, 0, info.width, 1, 1};
        sp_image t = {0};
        sp_error terr;
        top = sp__image_decode(buf, len, path, &row, NULL, &t, &terr);
        sp_image_free(&t);
    }
    if (rc == 0) {
        char out[4096];
        snprintf(out, sizeof out, "%s/%ld.raw", dir, i);
        FILE *f = fopen(out, "wb");
        if (!f) {
            perror(out);
            return 1;
        }
        for (int y = 0; y < img.height; y++)
            fwrite(img.data + (size_t)y * img.stride, 1, (size_t)img.width * img.channels, f);
        if (fclose(f) != 0) {
            perror(out);
            return 1;
        }
        printf("%ld\tOK\t%d\t%d\t%d\ttop=%d\n", i, img.width, img.height, img.channels, top);
    } else {
        printf("%ld\tERR\t%d\t%s\ttop=%d\n", i, rc, msg, top);
    }
    sp_image_free(&img);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: witness_decode OUTDIR < LIST\n");
        return 2;
    }
    char line[4096];
    long i = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if (decode_one(argv[1], i++, line) != 0) return 1;
    }
    return 0;
}
