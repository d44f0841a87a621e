/* pipeline_write.c - writing one sample's output (pipeline.h, "Output"):
 * the final image as uint8, bfloat16 / float16 or float32 elements, CHW or
 * HWC, each row read mirrored when a horizontal flip is pending. Values
 * are table lookups (pipeline_spec.c builds the tables), so they are exact
 * and the same everywhere. Split from pipeline_run.c, which calls
 * sp__write_output() once per sample.
 */
#include "augment/pipeline_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* uint8 output: the pixels as they are (a copy per row, or mirrored). */
static void write_u8(const sp_image *im, int flip, int nhwc, uint8_t *dst) {
    const int H = im->height, W = im->width, C = im->channels;
    const size_t plane = (size_t)H * (size_t)W;
    const ptrdiff_t step = flip ? -(ptrdiff_t)C : (ptrdiff_t)C;
    for (int y = 0; y < H; y++) {
        const uint8_t *row = im->data + (size_t)y * im->stride;
        const uint8_t *s = row + (flip ? (size_t)(W - 1) * (size_t)C : 0);
        if (nhwc && !flip) {
            memcpy(dst + (size_t)y * (size_t)W * (size_t)C, row, (size_t)W * (size_t)C);
        } else if (nhwc) {
            uint8_t *d = dst + (size_t)y * (size_t)W * (size_t)C;
            for (int x = 0; x < W; x++, s += step, d += C)
                for (int c = 0; c < C; c++) d[c] = s[c];
        } else if (C == 3) {
            uint8_t *d0 = dst + (size_t)y * (size_t)W, *d1 = d0 + plane, *d2 = d1 + plane;
            for (int x = 0; x < W; x++, s += step) {
                d0[x] = s[0];
                d1[x] = s[1];
                d2[x] = s[2];
            }
        } else {
            uint8_t *d0 = dst + (size_t)y * (size_t)W;
            for (int x = 0; x < W; x++, s += step)
                for (int c = 0; c < C; c++) d0[(size_t)c * plane + (size_t)x] = s[c];
        }
    }
}

/* bfloat16 / float16 output: 16-bit words from the rounded tables, in the
 * same layouts. */
static void write_half(const sp_pipeline *p, const sp_image *im, int flip, int nhwc,
                       const sp_run_opts *o, uint16_t *dst) {
    const int H = im->height, W = im->width, C = im->channels;
    const size_t plane = (size_t)H * (size_t)W;
    const ptrdiff_t step = flip ? -(ptrdiff_t)C : (ptrdiff_t)C;
    int k = o->dtype == SP_DTYPE_FLOAT16, norm = p->has_normalize && !o->skip_normalize;
    const uint16_t *t[3];
    for (int c = 0; c < 3; c++) t[c] = p->half_table[k][norm ? c : 3];
    for (int y = 0; y < H; y++) {
        const uint8_t *s = im->data + (size_t)y * im->stride +
                           (flip ? (size_t)(W - 1) * (size_t)C : 0);
        if (nhwc) {
            uint16_t *d = dst + (size_t)y * (size_t)W * (size_t)C;
            for (int x = 0; x < W; x++, s += step, d += C)
                for (int c = 0; c < C; c++) d[c] = t[c][s[c]];
        } else {
            uint16_t *d0 = dst + (size_t)y * (size_t)W;
            for (int x = 0; x < W; x++, s += step)
                for (int c = 0; c < C; c++) d0[(size_t)c * plane + (size_t)x] = t[c][s[c]];
        }
    }
}

/* float32 output through the per-channel tables. */
static void write_f32(const sp_pipeline *p, const sp_image *im, int flip, int nhwc,
                      const sp_run_opts *o, float *dst) {
    const int H = im->height, W = im->width, C = im->channels;
    const size_t plane = (size_t)H * (size_t)W;
    const ptrdiff_t step = flip ? -(ptrdiff_t)C : (ptrdiff_t)C;
    const float *tab[3];
    int norm = p->has_normalize && !o->skip_normalize;
    for (int c = 0; c < 3; c++) tab[c] = norm ? p->norm_table[c] : p->unit_table;
    const float *restrict t0 = tab[0], *restrict t1 = tab[1], *restrict t2 = tab[2];
    for (int y = 0; y < H; y++) {
        const uint8_t *row = im->data + (size_t)y * im->stride;
        const uint8_t *s = row + (flip ? (size_t)(W - 1) * (size_t)C : 0);
        if (C == 1) {
            float *restrict d = dst + (size_t)y * (size_t)W;
            for (int x = 0; x < W; x++, s += step) d[x] = t0[s[0]];
        } else if (C == 3 && nhwc) {
            float *restrict d = dst + (size_t)y * (size_t)W * 3;
            int x = 0;
#if defined(__SSE2__)
            for (; x + 4 <= W; x += 4, s += 4 * step, d += 12) {
                const uint8_t *p1 = s + step, *p2 = p1 + step, *p3 = p2 + step;
                _mm_storeu_ps(d, _mm_set_ps(t0[p1[0]], t2[s[2]], t1[s[1]], t0[s[0]]));
                _mm_storeu_ps(d + 4, _mm_set_ps(t1[p2[1]], t0[p2[0]], t2[p1[2]], t1[p1[1]]));
                _mm_storeu_ps(d + 8, _mm_set_ps(t2[p3[2]], t1[p3[1]], t0[p3[0]], t2[p2[2]]));
            }
#endif
            for (; x < W; x++, s += step, d += 3) {
                d[0] = t0[s[0]];
                d[1] = t1[s[1]];
                d[2] = t2[s[2]];
            }
        } else if (C == 3) {
            float *d0 = dst + (size_t)y * (size_t)W;
            float *d1 = d0 + plane;
            float *d2 = d1 + plane;
            int x = 0;
#if defined(__SSE2__)
            for (; x + 4 <= W; x += 4, s += 4 * step) {
                __m128 v0 = _mm_set_ps(t0[s[3 * step]], t0[s[2 * step]], t0[s[step]], t0[s[0]]);
                __m128 v1 = _mm_set_ps(t1[s[3 * step + 1]], t1[s[2 * step + 1]], t1[s[step + 1]], t1[s[1]]);
                __m128 v2 = _mm_set_ps(t2[s[3 * step + 2]], t2[s[2 * step + 2]], t2[s[step + 2]], t2[s[2]]);
                _mm_storeu_ps(d0 + x, v0);
                _mm_storeu_ps(d1 + x, v1);
                _mm_storeu_ps(d2 + x, v2);
            }
#endif
            for (; x < W; x++, s += step) {
                d0[x] = t0[s[0]];
                d1[x] = t1[s[1]];
                d2[x] = t2[s[2]];
            }
        } else {
            float *d0 = dst + (size_t)y * (size_t)W;
            for (int x = 0; x < W; x++, s += step)
                for (int c = 0; c < C; c++) d0[(size_t)c * plane + (size_t)x] = tab[c][s[c]];
        }
    }
}

/* Write the output; with flip, each row is read mirrored (a pending hflip).
 * One pass per row, every channel at once, through the per-channel table
 * for float32 (exact: a table lookup; with SSE2 four values are stored at
 * a time, which halves the cost of the float32 NCHW case). */
void sp__write_output(const sp_pipeline *p, const sp_image *im, int flip, const sp_run_opts *o,
                      void *out) {
    const int nhwc = o->layout == SP_LAYOUT_NHWC || im->channels == 1;
    if (o->dtype == SP_DTYPE_UINT8) write_u8(im, flip, nhwc, out);
    else if (o->dtype == SP_DTYPE_BFLOAT16 || o->dtype == SP_DTYPE_FLOAT16)
        write_half(p, im, flip, nhwc, o, out);
    else write_f32(p, im, flip, nhwc, o, out);
}
