/* make_photos.c - make a JPEG ImageFolder of real photographs for benchmarks.
 *
 *   bench_make_photos OUT_DIR [--count N] [--src DIR] [--seed S]
 *
 * Takes the camera photos under --src (default /usr/share/backgrounds/mate,
 * Debian's mate-backgrounds package), and writes N (default 2000) files of
 * 500x375, quality 90: each a random crop (4:3, between 500 px wide and the
 * whole photo) of one photo, resized with seedpipe's antialiased resize. The
 * class folder is the photo's name. Deterministic for a seed.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "seedpipe/decode.h"
#include "seedpipe/imageio.h"
#include "seedpipe/philox.h"
#include "augment/decode_internal.h"
#include "augment/ops_internal.h"

typedef struct { char name[256]; sp_image img; } photo_t;

static photo_t photos[64];
static int nphotos;

static int cmp_photo(const void *a, const void *b) {
    return strcmp(((const photo_t *)a)->name, ((const photo_t *)b)->name);
}

static void walk(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && nphotos < 64) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) { walk(p); continue; }
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || strcasecmp(dot, ".jpg")) continue;
        uint8_t *buf;
        size_t len;
        sp_error err;
        if (sp_read_file(p, 0, &buf, &len, &err) != 0) continue;
        sp_image_info info;
        if (sp__image_probe(buf, len, p, NULL, &info, &err) != 0) { free(buf); continue; }
        /* Big photos are decoded at 1/2 or 1/4 so crops hold real detail
         * at 500 px without using gigabytes. */
        int d2 = 1;
        while (info.width / (d2 * 2) >= 1200 && d2 < 4) d2 *= 2;
        sp_decode_req req = {3, 0, 0, 0, 0, d2};
        photo_t *ph = &photos[nphotos];
        if (sp__image_decode(buf, len, p, &req, NULL, &ph->img, &err) == 0 &&
            ph->img.width >= 500 && ph->img.height >= 375) {
            snprintf(ph->name, sizeof ph->name, "%.*s", (int)(dot - e->d_name), e->d_name);
            nphotos++;
        } else {
            sp_image_free(&ph->img);
        }
        free(buf);
    }
    closedir(d);
}

int main(int argc, char **argv) {
    char *out = NULL;
    const char *src = "/usr/share/backgrounds/mate";
    unsigned count = 2000;
    unsigned long long seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--count") && i + 1 < argc) count = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--src") && i + 1 < argc) src = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], 0, 0);
        else out = argv[i];
    }
    if (!out) {
        fprintf(stderr, "usage: bench_make_photos OUT_DIR [--count N] [--src DIR] [--seed S]\n");
        return 2;
    }
    walk(src);
    if (nphotos == 0) {
        fprintf(stderr, "no usable photos under %s (apt-get install mate-backgrounds)\n", src);
        return 1;
    }
    qsort(photos, (size_t)nphotos, sizeof *photos, cmp_photo);
    /* OUT_DIR and the folders above it (out/photos on a fresh clone, where
     * out/ is not made yet) */
    for (char *p = out + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(out, 0755);
            *p = '/';
        }
    mkdir(out, 0755);
    sp_key k = sp_rng_key(seed, SP_RNG_OTHER);
    for (unsigned i = 0; i < count; i++) {
        photo_t *ph = &photos[i % (unsigned)nphotos];
        sp_ctr r = sp_sample_draw(k, 0, 0, i, 0);
        int maxw = ph->img.width;
        if (ph->img.height * 4 / 3 < maxw) maxw = ph->img.height * 4 / 3;
        int cw = 500 + (int)sp_uniform_int(r.c[0], (uint64_t)(maxw - 500 + 1));
        int ch = cw * 3 / 4;
        int x = (int)sp_uniform_int(r.c[1], (uint64_t)(ph->img.width - cw + 1));
        int y = (int)sp_uniform_int(r.c[2], (uint64_t)(ph->img.height - ch + 1));
        sp_image view, small;
        sp_error err;
        if (sp__image_crop(&ph->img, x, y, cw, ch, &view) != 0 ||
            sp__image_resize(&view, 500, 375, &small) != 0) {
            fprintf(stderr, "resize failed\n");
            return 1;
        }
        char dir[4096], path[4200];
        snprintf(dir, sizeof dir, "%s/%s", out, ph->name);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            perror(dir);
            return 1;
        }
        snprintf(path, sizeof path, "%s/%06u.jpg", dir, i);
        if (sp_image_write(path, &small, SP_IMAGE_JPEG, 90, &err) != 0) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        sp_image_free(&small);
    }
    printf("wrote %u photos (500x375, q90) from %d sources to %s\n", count, nphotos, out);
    for (int i = 0; i < nphotos; i++) sp_image_free(&photos[i].img);
    return 0;
}
