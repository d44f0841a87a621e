/* pipeline_write.c - writing one sample's output (pipeline.h, "Output"):
 * the final image as uint8, bfloat16 / float16 or float32 elements, CHW or
 * HWC, each row read mirrored when a horizontal flip is pending. Values
 * are those of per-channel tables (pipeline_spec.c builds them), so they
 * are exact and the same everywhere: read from the tables, or for 3
 * channels computed by write_kernels.c's SIMD kernels where
 * sp__write_prepare() found, when the pipeline was built, that a kernel
 * gives every value of a table. Split from pipeline_run.c, which calls
 * sp__write_output() once per sample, then sp__erase_output() when the
 * pipeline ends with random_erasing ops: they erase a box of the written
 * elements, in the output's own units (after normalize when there is
 * one, as torchvision's RandomErasing after ToTensor / Normalize).
 */
#include "augment/pipeline_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "augment/write_kernels_internal.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#include "augment/ops_internal.h"
#endif

/* float32 and 16-bit samples at least this large are written with
 * non-temporal stores where aligned: a batch of them outgrows a core's
 * caches, and a store that skips the cache neither reads the line it
 * overwrites nor evicts the decoder's data for it (the RandomResizedCrop
 * pipeline ran about 8% faster with them on the development machine,
 * bench/RESULTS.md). Smaller samples stay in the cache for their reader.
 * The stores are fenced before sp__write_output() returns, so they are
 * ordered before whatever publishes the batch. */
#define SP__NT_BYTES ((size_t)128 << 10)

/* float32 -> bfloat16, round to nearest, ties to even (NaN kept a NaN). */
uint16_t sp__to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* float32 -> IEEE binary16, round to nearest, ties to even: overflow to
 * infinity, subnormals through one float addition (which rounds to nearest
 * even in the default rounding mode), normals by rounding the mantissa. */
uint16_t sp__to_f16(float f) {
    const uint32_t infty = 255u << 23, max16 = (127u + 16u) << 23;
    const uint32_t magic_u = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = u & 0x80000000u;
    u ^= sign;
    uint16_t o;
    if (u >= max16) {
        o = u > infty ? 0x7e00 : 0x7c00;
    } else if (u < (113u << 23)) {
        float x, magic;
        memcpy(&x, &u, 4);
        memcpy(&magic, &magic_u, 4);
        x += magic;
        uint32_t r;
        memcpy(&r, &x, 4);
        o = (uint16_t)(r - magic_u);
    } else {
        uint32_t odd = (u >> 13) & 1u;
        u += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
        o = (uint16_t)(u >> 13);
    }
    return (uint16_t)(o | (sign >> 16));
}

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

/* Whether a sample of es-byte elements gets non-temporal stores. */
static int use_nt(const sp_image *im, size_t es) {
    return (size_t)im->height * (size_t)im->width * (size_t)im->channels * es >= SP__NT_BYTES;
}

/* unit_table's mean and std for the kernels: v / 255 = (v / 255 - 0) / 1. */
static const float zero[3] = {0.0f, 0.0f, 0.0f}, one[3] = {1.0f, 1.0f, 1.0f};

/* Table `unit` (0: norm_table, 1: unit_table) of kind, per channel: the
 * float32 values or their 16-bit roundings. */
static void kind_tables(const sp_pipeline *p, int unit, int kind, const void **tab) {
    for (int c = 0; c < 3; c++)
        tab[c] = kind == SP__WK_F32 ? (const void *)(unit ? p->unit_table : p->norm_table[c])
                                    : (const void *)p->half_table[kind == SP__WK_F16][unit ? 3 : c];
}

/* A 3-channel sample written by the kernel of this CPU's level, if that
 * kernel gave table `unit` of kind bit for bit when the pipeline was
 * built: returns 1 (*nt: non-temporal stores used, to be fenced), else 0
 * (the caller reads the tables). */
static int write_by_kernel(const sp_pipeline *p, const sp_image *im, int flip, int nhwc,
                           int unit, int kind, void *dst, int *nt) {
    int level = im->channels == 3 ? sp__write_kernel_level() : 0;
    if (!level || !(p->out_simd[level][unit] >> kind & 1)) return 0;
    const void *tab[3];
    kind_tables(p, unit, kind, tab);
    *nt = use_nt(im, kind == SP__WK_F32 ? 4 : 2);
    sp__write_rgb(level, im, flip, nhwc, kind, tab, unit ? zero : p->norm_mean,
                  unit ? one : p->norm_std, *nt, dst);
    return 1;
}

/* bfloat16 / float16 output: 3 channels by the checked arithmetic
 * (write_kernels.c), else 16-bit words from the rounded tables, in the
 * same layouts. Returns 1 if non-temporal stores may have been used. */
static int write_half(const sp_pipeline *p, const sp_image *im, int flip, int nhwc,
                      const sp_run_opts *o, uint16_t *dst) {
    const int H = im->height, W = im->width, C = im->channels;
    const size_t plane = (size_t)H * (size_t)W;
    const ptrdiff_t step = flip ? -(ptrdiff_t)C : (ptrdiff_t)C;
    int k = o->dtype == SP_DTYPE_FLOAT16, norm = p->has_normalize && !o->skip_normalize;
    const uint16_t *t[3];
    for (int c = 0; c < 3; c++) t[c] = p->half_table[k][norm ? c : 3];
    int nt;
    if (write_by_kernel(p, im, flip, nhwc, !norm, k ? SP__WK_F16 : SP__WK_BF16, dst, &nt))
        return nt;
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
    return 0;
}

/* float32 output: 3 channels by arithmetic (write_kernels.c) where the
 * pipeline checked that it gives the table's values (out_simd), else
 * through the per-channel tables. Returns 1 if non-temporal stores may
 * have been used. */
static int write_f32(const sp_pipeline *p, const sp_image *im, int flip, int nhwc,
                     const sp_run_opts *o, float *dst) {
    const int H = im->height, W = im->width, C = im->channels;
    const size_t plane = (size_t)H * (size_t)W;
    const ptrdiff_t step = flip ? -(ptrdiff_t)C : (ptrdiff_t)C;
    const float *tab[3];
    int norm = p->has_normalize && !o->skip_normalize;
    for (int c = 0; c < 3; c++) tab[c] = norm ? p->norm_table[c] : p->unit_table;
    int nt;
    if (write_by_kernel(p, im, flip, nhwc, !norm, SP__WK_F32, dst, &nt)) return nt;
    nt = use_nt(im, sizeof(float));
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
            int al = nt && !(((uintptr_t)d0 | (uintptr_t)d1 | (uintptr_t)d2) & 15);
            for (; x + 4 <= W; x += 4, s += 4 * step) {
                __m128 v0 = _mm_set_ps(t0[s[3 * step]], t0[s[2 * step]], t0[s[step]], t0[s[0]]);
                __m128 v1 = _mm_set_ps(t1[s[3 * step + 1]], t1[s[2 * step + 1]], t1[s[step + 1]], t1[s[1]]);
                __m128 v2 = _mm_set_ps(t2[s[3 * step + 2]], t2[s[2 * step + 2]], t2[s[step + 2]], t2[s[2]]);
                if (al) {
                    _mm_stream_ps(d0 + x, v0);
                    _mm_stream_ps(d1 + x, v1);
                    _mm_stream_ps(d2 + x, v2);
                } else {
                    _mm_storeu_ps(d0 + x, v0);
                    _mm_storeu_ps(d1 + x, v1);
                    _mm_storeu_ps(d2 + x, v2);
                }
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
#if defined(__SSE2__)
    return nt && C == 3 && !nhwc;
#else
    return 0;
#endif
}

/* Write the output; with flip, each row is read mirrored (a pending hflip).
 * One pass per row, every channel at once: by the checked arithmetic
 * (write_kernels.c) or through the per-channel tables (exact either way;
 * with SSE2 four values are stored at a time, which halves the cost of the
 * table's float32 NCHW case). */
void sp__write_output(const sp_pipeline *p, const sp_image *im, int flip, const sp_run_opts *o,
                      void *out) {
    const int nhwc = o->layout == SP_LAYOUT_NHWC || im->channels == 1;
    if (o->dtype == SP_DTYPE_UINT8) {
        write_u8(im, flip, nhwc, out);
    } else if (o->dtype == SP_DTYPE_BFLOAT16 || o->dtype == SP_DTYPE_FLOAT16
                   ? write_half(p, im, flip, nhwc, o, out)
                   : write_f32(p, im, flip, nhwc, o, out)) {
#if defined(__SSE2__)
        _mm_sfence();   /* the non-temporal stores before anything after */
#endif
    }
}

void sp__write_prepare(sp_pipeline *p) {
    memset(p->out_simd, 0, sizeof p->out_simd);
    /* Every input value once per channel: pixel v is (v, v, v); the planes
     * aligned, so that every column is computed (none read from a table). */
    uint8_t px[256 * 3];
    _Alignas(64) uint8_t got[3 * 256 * 4];
    for (int v = 0; v < 256; v++) px[3 * v] = px[3 * v + 1] = px[3 * v + 2] = (uint8_t)v;
    sp_image im = {256, 1, 3, sizeof px, px};
    for (int level = 1; level <= sp__write_kernel_level(); level++)
        for (int unit = 0; unit < 2; unit++)
            for (int kind = SP__WK_F32; kind <= SP__WK_F16; kind++) {
                const void *tab[3];
                kind_tables(p, unit, kind, tab);
                size_t es = kind == SP__WK_F32 ? 4 : 2;
                sp__write_rgb(level, &im, 0, 0, kind, tab, unit ? zero : p->norm_mean,
                              unit ? one : p->norm_std, 0, got);
                int same = 1;
                for (int c = 0; c < 3; c++) same &= !memcmp(got + 256 * es * c, tab[c], 256 * es);
                p->out_simd[level][unit] |= same << kind;
            }
}

/* ---- random_erasing, on the written output ------------------------------------ */

/* One element of value v in the output's dtype at element index e. */
static void put(void *out, sp_dtype t, size_t e, float v) {
    if (t == SP_DTYPE_FLOAT32) ((float *)out)[e] = v;
    else if (t == SP_DTYPE_BFLOAT16) ((uint16_t *)out)[e] = sp__to_bf16(v);
    else if (t == SP_DTYPE_FLOAT16) ((uint16_t *)out)[e] = sp__to_f16(v);
    else ((uint8_t *)out)[e] = (uint8_t)(v >= 255.0f ? 255 : v > 0.0f ? (int)v : 0);
}

/* Erase box b of a W x H x C output: the values are op->value[c] or, for
 * value=random, the normals in (c, y, x) order of the box (torchvision's
 * v tensor of shape [C, h, w]). */
static int erase_box(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, const sp_crop_box *b,
                     int W, int H, int C, const sp_run_opts *o, void *out) {
    size_t n = (size_t)C * (size_t)b->h * (size_t)b->w, t = 0;
    float *v = NULL;
    if (op->erase_random && n) {
        if (!(v = malloc(n * sizeof *v))) return SP_ENOMEM;
        sp__erasing_normals(ctx->k_augment, k, ctx->sample, ctx->epoch, n, v);
    }
    int nhwc = o->layout == SP_LAYOUT_NHWC || C == 1;
    for (int c = 0; c < C; c++)
        for (int y = b->y; y < b->y + b->h; y++)
            for (int x = b->x; x < b->x + b->w; x++, t++) {
                size_t e = nhwc ? ((size_t)y * (size_t)W + (size_t)x) * (size_t)C + (size_t)c
                                : ((size_t)c * (size_t)H + (size_t)y) * (size_t)W + (size_t)x;
                put(out, o->dtype, e, v ? v[t] : (float)op->value[c]);
            }
    free(v);
    return SP_OK;
}

int sp__erase_output(const sp_pipeline *p, const sp_sample_ctx *ctx, int W, int H, int C,
                     const sp_run_opts *o, void *out) {
    for (int k = 0; k < p->nops; k++) {
        const sp_op *op = &p->ops[k];
        if (op->desc != &sp__op_random_erasing) continue;
        sp_ctr d = sp_sample_draw(ctx->k_augment, 0, (uint32_t)k, ctx->sample, ctx->epoch);
        if (!(sp_u01d(d.c[0]) < op->p)) continue;
        sp_crop_box b;
        if (!sp__erasing_sample(W, H, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1],
                               ctx->k_augment, (uint32_t)k, ctx->sample, ctx->epoch, &b))
            continue;
        int rc = erase_box(op, (uint32_t)k, ctx, &b, W, H, C, o, out);
        if (rc) return rc;
    }
    return SP_OK;
}
