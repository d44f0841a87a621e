/* ops_blur.c - torchvision's GaussianBlur on uint8 images
 * (include/seedpipe/ops.h: sp__gaussian_kernel1d, sp__image_gaussian_blur).
 *
 * HOW IT WORKS: the kernel is torchvision's _get_gaussian_kernel1d step for
 * step in IEEE binary32 (x = i - (k - 1) / 2, exact; t = x / sigma;
 * t = t * t; t = -0.5f * t; e = exp(t) (the project's own sp_det_exp in
 * double, rounded to float: libm's expf may differ in its last bit between
 * libm versions, and these weights decide bytes); then e / (sum of e, left to
 * right)); the build uses -ffp-contract=off, so nothing is fused. The
 * image is padded by reflection (kx / 2 columns, ky / 2 rows, torch's
 * reflect: each pad must be smaller than its side) through index maps,
 * never copied padded, and convolved separably in double: for each output
 * row, a vertical pass (rows top to bottom, weight ky[i] * v) over every
 * source column, then a horizontal pass (left to right, kx[j] * that) over
 * the reflected columns; the result is rounded to nearest, ties to even
 * (torch.round), and clamped to [0, 255].
 *
 * LIMITATIONS: torchvision convolves with the 2D kernel ky (x) kx rounded
 * to binary32 and accumulates in binary32 in an order of its own (oneDNN);
 * this double computation is within about 1e-5 grey levels of the exact
 * blur, so a value differs from torchvision's only where the blurred value
 * lies that close to a half-integer. docs/pipeline.md gives the measured
 * agreement.
 */
#include "seedpipe/detmath.h"

#include <math.h>      /* rint */
#include <stdlib.h>
#include <string.h>
#include "augment/ops_internal.h"

void sp__gaussian_kernel1d(int k, float sigma, float *out) {
    float half = (float)(k - 1) * 0.5f, sum = 0.0f;
    for (int i = 0; i < k; i++) {
        float x = (float)i - half;   /* linspace(-half, half, k): integers for odd k */
        float t = x / sigma;
        t = t * t;
        t = -0.5f * t;
        out[i] = (float)sp_det_exp((double)t);
        sum += out[i];
    }
    for (int i = 0; i < k; i++) out[i] = out[i] / sum;
}

/* torch's reflect index of u along n (|overhang| < n). */
static int reflect(int u, int n) { return u < 0 ? -u : u >= n ? 2 * (n - 1) - u : u; }

int sp__image_gaussian_blur(sp_image *img, int kx, int ky, float sigma_x, float sigma_y) {
    const int W = img->width, H = img->height, C = img->channels, px = kx / 2, py = ky / 2;
    if (kx < 1 || ky < 1 || !(kx & 1) || !(ky & 1) || px >= W || py >= H ||
        !(sigma_x > 0) || !(sigma_y > 0))
        return SP_EINVAL;
    if (kx == 1 && ky == 1) return SP_OK;   /* a weight of exactly 1: the identity */
    size_t row = (size_t)W * (size_t)C;
    float *wx = malloc(((size_t)kx + (size_t)ky) * sizeof *wx);
    int *xmap = malloc(((size_t)W + (size_t)kx) * sizeof *xmap);
    double *v = malloc(row * sizeof *v);
    sp_image src = {0};
    int rc = wx && xmap && v ? sp__image_copy(img, &src) : SP_ENOMEM;
    if (rc == SP_OK) {
        float *wy = wx + kx;
        sp__gaussian_kernel1d(kx, sigma_x, wx);
        sp__gaussian_kernel1d(ky, sigma_y, wy);
        for (int x = 0; x < W + kx - 1; x++) xmap[x] = reflect(x - px, W) * C;
        for (int y = 0; y < H; y++) {
            memset(v, 0, row * sizeof *v);
            for (int i = 0; i < ky; i++) {
                const uint8_t *s = src.data + (size_t)reflect(y + i - py, H) * src.stride;
                double w = wy[i];
                for (size_t t = 0; t < row; t++) v[t] += w * s[t];
            }
            uint8_t *d = img->data + (size_t)y * img->stride;
            for (int x = 0; x < W; x++)
                for (int c = 0; c < C; c++) {
                    double acc = 0.0;
                    for (int j = 0; j < kx; j++) acc += wx[j] * v[xmap[x + j] + c];
                    acc = rint(acc);
                    d[(size_t)x * C + c] = (uint8_t)(acc < 0 ? 0 : acc > 255 ? 255 : acc);
                }
        }
    }
    sp_image_free(&src);
    free(wx);
    free(xmap);
    free(v);
    return rc;
}
