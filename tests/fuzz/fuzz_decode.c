/* fuzz_decode - PNG and JPEG through sp_image_probe + sp_image_decode with
 * small limits: the full image at scale 1, then (JPEG) a region at scale 2
 * and (PNG) a region at scale 1, both channel counts. Any input must give
 * 0 or an SP_E* code with a message, never a crash, leak or overflow; a
 * successful decode must have the documented geometry. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "seedpipe/decode.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_decode_limits lim;
    memset(&lim, 0, sizeof lim);
    lim.max_width = 1024;
    lim.max_height = 1024;
    lim.max_pixels = 256 * 1024;
    lim.max_bytes = 1u << 20;
    sp_image_info info;
    sp_error err;
    (void)sp_format_sniff(data, size);
    if (sp_image_probe(data, size, "fuzz", &lim, &info, &err) != 0) {
        if (err.code == 0 || err.msg[0] == '\0') abort();
        return 0;
    }
    if (info.width <= 0 || info.height <= 0 || (uint64_t)info.width * info.height > lim.max_pixels)
        abort();
    for (int ch = 1; ch <= 3; ch += 2) {
        sp_decode_req rq = {ch, 0, 0, 0, 0, 1};
        sp_image im;
        if (sp_image_decode(data, size, "fuzz", &rq, &lim, &im, &err) == 0) {
            check_out(&im, &info, &rq);
            sp_image_free(&im);
        } else if (err.msg[0] == '\0' || im.data) {
            abort();
        }
        /* a region in the middle */
        rq.x = info.width / 4;
        rq.y = info.height / 3;
        rq.w = info.width / 2 > 0 ? info.width / 2 : 1;
        rq.h = info.height / 2 > 0 ? info.height / 2 : 1;
        rq.scale_denom = info.format == SP_FORMAT_JPEG ? 2 : 1;
        if (sp_image_decode(data, size, "fuzz", &rq, &lim, &im, &err) == 0) {
            check_out(&im, &info, &rq);
            sp_image_free(&im);
        }
    }
    return 0;
}
