/* shapes.c - the built-in dataset: procedurally drawn shapes (shapes.h).
 *
 * Image i of a set is a pure function of (seed, size, i): all its random
 * parameters come from Philox4x32-10 under K_other = sp_rng_key(seed,
 * SP_RNG_OTHER), and the drawing is integer / fixed-point arithmetic only
 * (a hard-coded Q14 sine table, no libm), so the pixels are the same on every
 * machine and any image can be drawn without drawing the others. The files
 * are then those pixels through libpng / TurboJPEG, identical for identical
 * library versions.
 *
 * HOW IT WORKS
 *   Class:    image i has class (i + i / K) mod K (K = 6 classes, in sorted
 *             name order). Balanced to within one image for any count, and
 *             since K is even the shift by i / K makes every class get as
 *             many PNG (even i) as JPEG (odd i) files: plain i mod K would
 *             let the file format give the class away.
 *   Draws:    the parameters are consecutive uint32 words of the blocks
 *             philox((j, 0x53484150 "SHAP", i, 0), K_other), j = 0, 1, ...,
 *             four words per block, taken in this order:
 *               1 dark      background dark (shape light) if the word is odd
 *               2 bg A      3 words: channel in [10, 90] (dark) / [165, 245]
 *               3 bg B      3 words: A + [-40, 40], clamped to [0, 100] /
 *                           [155, 255]: a linear gradient from A to B
 *               4 gradient  direction 0..255 (1/256 turns)
 *               5 stripes   period 6..16 px, direction 0..255, amplitude
 *                           0..12, phase 0..period*16-1 (1/16 px)
 *               6 noise     amplitude 2..10
 *               7 colour    3 words: channel in [165, 255] (dark background)
 *                           or [0, 90] (light background)
 *               8 radius    R in [S*20/100, S*36/100] px, in 1/16 px
 *               9 centre    x, y in [m, 16*S - m], m = 11R/10 + 16 (1/16 px)
 *              10 rotation  0..255 (1/256 turns)
 *             "x in [a, b]" means a + sp_uniform_int(word, b - a + 1).
 *             Pixel noise: block philox((p / 4, 0x4e4f4953 "NOIS", i, 0)),
 *             word p % 4, bytes 0..2 for R, G, B, of pixel p = y * S + x;
 *             byte b gives (b * (2A + 1) >> 8) - A for amplitude A.
 *   Pixel:    background = gradient + triangle-wave stripes + noise; shape
 *             = colour + noise / 2; the shape's coverage is counted on a 4x4
 *             grid of sub-pixel samples (0..16) and blended as
 *             (bg * (16 - cov) + fg * cov + 8) >> 4. Sample points are
 *             rotated into the shape's frame with the Q14 table and tested
 *             in 1/16-pixel integers; all divisions of signed values floor.
 *   Shapes (R = radius): circle r <= R; ring 0.55R <= r <= R; square
 *             half-side 0.75R; triangle equilateral, circumradius 1.1R;
 *             cross arms 1.8R long, 0.6R wide; star 5 points, outer R,
 *             inner 0.42R. All fit in 1.1R, so the centre margin keeps them
 *             inside the image. The dark/light split keeps every channel of
 *             the shape at least ~40 levels from the background.
 *   Files:    out_dir/<class>/<i as %06u>.png for even i, .jpg (quality 90,
 *             4:2:0) for odd i.
 */
#include "seedpipe/shapes.h"

#include "seedpipe/imageio.h"
#include "seedpipe/philox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "common/common_internal.h"
#include "loader/shapes_internal.h"

#define SHAPES_TAG_PARAMS 0x53484150u   /* "SHAP" */
#define SHAPES_TAG_NOISE 0x4e4f4953u    /* "NOIS" */
#define SHAPES_MIN_SIZE 16
#define SHAPES_MAX_SIZE 2048
#define SHAPES_MAX_COUNT 100000000u

enum { CIRCLE, CROSS, RING, SQUARE, STAR, TRIANGLE, NUM_CLASSES };

static const char *const class_names[NUM_CLASSES + 1] = {
    "circle", "cross", "ring", "square", "star", "triangle", NULL};

const char *const *sp__shapes_class_names(void) { return class_names; }
int sp__shapes_num_classes(void) { return NUM_CLASSES; }

int sp__shapes_class_of(uint32_t index) {
    return (int)((index + index / NUM_CLASSES) % NUM_CLASSES);
}

/* round(16384 * sin(a * 2pi / 256)) for a = 0..64 (a quarter turn). */
static const int16_t sin_q14[65] = {
    0,     402,   804,   1205,  1606,  2006,  2404,  2801,  3196,  3590,  3981,  4370,  4756,
    5139,  5520,  5897,  6270,  6639,  7005,  7366,  7723,  8076,  8423,  8765,  9102,  9434,
    9760,  10080, 10394, 10702, 11003, 11297, 11585, 11866, 12140, 12406, 12665, 12916, 13160,
    13395, 13623, 13842, 14053, 14256, 14449, 14635, 14811, 14978, 15137, 15286, 15426, 15557,
    15679, 15791, 15893, 15986, 16069, 16143, 16207, 16261, 16305, 16340, 16364, 16379, 16384};

static int32_t isin(uint32_t a) {
    a &= 255;
    if (a <= 64) return sin_q14[a];
    if (a <= 128) return sin_q14[128 - a];
    if (a <= 192) return -sin_q14[a - 128];
    return -sin_q14[256 - a];
}
static int32_t icos(uint32_t a) { return isin(a + 64); }

/* Floor division by 2^s, defined for negative values too. */
static int64_t fshr(int64_t v, int s) {
    return v >= 0 ? v >> s : -((-v + ((int64_t)1 << s) - 1) >> s);
}
/* Floor division and a non-negative modulo (d > 0). */
static int64_t fdiv(int64_t a, int64_t d) { return a >= 0 ? a / d : -((-a + d - 1) / d); }
static int64_t fmod_pos(int64_t a, int64_t d) { return a - fdiv(a, d) * d; }
static int clamp255(int64_t v) { return v < 0 ? 0 : v > 255 ? 255 : (int)v; }
static int64_t iabs64(int64_t v) { return v < 0 ? -v : v; }

/* ---- parameter draws ---------------------------------------------------------------- */

typedef struct draws {
    sp_key key;
    uint32_t index, block;
    uint32_t w[4];
    int pos;
} draws;

static uint32_t next_word(draws *d) {
    if (d->pos == 4) {
        sp_ctr c = {{d->block++, SHAPES_TAG_PARAMS, d->index, 0}};
        sp_ctr o = sp_philox4x32_10(c, d->key);
        memcpy(d->w, o.c, sizeof d->w);
        d->pos = 0;
    }
    return d->w[d->pos++];
}

/* Uniform integer in [lo, hi]. */
static int64_t draw_range(draws *d, int64_t lo, int64_t hi) {
    return lo + (int64_t)sp_uniform_int(next_word(d), (uint64_t)(hi - lo + 1));
}

typedef struct params {
    int cls, dark;
    int bg_a[3], bg_b[3], fg[3];
    uint32_t grad_dir, stripe_dir, rot;
    int stripe_period16, stripe_amp, stripe_phase16, noise_amp;
    int64_t r16, cx16, cy16;
    int64_t star_x[10], star_y[10];
} params;

static void draw_params(params *p, sp_key key, uint32_t index, int size) {
    draws d = {key, index, 0, {0, 0, 0, 0}, 4};
    p->cls = sp__shapes_class_of(index);
    p->dark = (int)(next_word(&d) & 1u);
    int lo = p->dark ? 10 : 165, hi = p->dark ? 90 : 245;
    int clo = p->dark ? 0 : 155, chi = p->dark ? 100 : 255;
    for (int c = 0; c < 3; c++) p->bg_a[c] = (int)draw_range(&d, lo, hi);
    for (int c = 0; c < 3; c++) {
        int64_t b = p->bg_a[c] + draw_range(&d, -40, 40);
        p->bg_b[c] = (int)(b < clo ? clo : b > chi ? chi : b);
    }
    p->grad_dir = (uint32_t)draw_range(&d, 0, 255);
    p->stripe_period16 = (int)draw_range(&d, 6, 16) * 16;
    p->stripe_dir = (uint32_t)draw_range(&d, 0, 255);
    p->stripe_amp = (int)draw_range(&d, 0, 12);
    p->stripe_phase16 = (int)draw_range(&d, 0, p->stripe_period16 - 1);
    p->noise_amp = (int)draw_range(&d, 2, 10);
    for (int c = 0; c < 3; c++)
        p->fg[c] = (int)(p->dark ? draw_range(&d, 165, 255) : draw_range(&d, 0, 90));
    int64_t s16 = (int64_t)size * 16;
    p->r16 = draw_range(&d, s16 * 20 / 100, s16 * 36 / 100);
    int64_t m = p->r16 * 11 / 10 + 16;
    p->cx16 = draw_range(&d, m, s16 - m);
    p->cy16 = draw_range(&d, m, s16 - m);
    p->rot = (uint32_t)draw_range(&d, 0, 255);
    /* star vertices in the shape frame (y down, first point up), 1/16 px */
    static const int32_t sx[10] = {0, 9630, 15582, 15582, 9630, 0, -9630, -15582, -15582, -9630};
    static const int32_t sy[10] = {-16384, -13255, -5063, 5063, 13255,
                                   16384,  13255,  5063,  -5063, -13255};
    int64_t inner = p->r16 * 42 / 100;
    for (int k = 0; k < 10; k++) {
        int64_t rad = (k & 1) ? inner : p->r16;
        p->star_x[k] = fshr(rad * sx[k], 14);
        p->star_y[k] = fshr(rad * sy[k], 14);
    }
}

/* ---- shape membership, in the shape's frame, 1/16 px ---------------------------------- */

static int in_polygon(const int64_t *xs, const int64_t *ys, int n, int64_t px, int64_t py) {
    int inside = 0;
    for (int a = 0, b = n - 1; a < n; b = a++) {
        int64_t xa = xs[a], ya = ys[a], xb = xs[b], yb = ys[b];
        if ((ya > py) != (yb > py)) {
            /* px < xa + (py - ya) * (xb - xa) / (yb - ya), without division */
            int64_t lhs = (px - xa) * (yb - ya);
            int64_t rhs = (py - ya) * (xb - xa);
            if (yb > ya ? lhs < rhs : lhs > rhs) inside = !inside;
        }
    }
    return inside;
}

static int inside(const params *p, int64_t u, int64_t v) {
    int64_t R = p->r16, d2 = u * u + v * v;
    switch (p->cls) {
    case CIRCLE: return d2 <= R * R;
    case RING: {
        int64_t ri = R * 55 / 100;
        return d2 <= R * R && d2 >= ri * ri;
    }
    case SQUARE: {
        int64_t a = R * 3 / 4;
        return iabs64(u) <= a && iabs64(v) <= a;
    }
    case TRIANGLE: {
        /* circumradius Rt, apex up: v <= Rt/2 and |u| sqrt(3)/2 - v/2 <= Rt/2 */
        int64_t rt = R * 11 / 10;
        return v * 2 <= rt && iabs64(u) * 14189 - v * 8192 <= rt * 8192;
    }
    case CROSS: {
        int64_t w = R * 3 / 10, l = R * 9 / 10;
        int64_t au = iabs64(u), av = iabs64(v);
        return (au <= w && av <= l) || (av <= w && au <= l);
    }
    case STAR: return in_polygon(p->star_x, p->star_y, 10, u, v);
    }
    return 0;
}

/* ---- rendering ------------------------------------------------------------------------ */

static int render(const params *p, sp_key key, uint32_t index, int size, sp_image *img) {
    int rc = sp__image_alloc(img, size, size, 3);
    if (rc) return rc;
    int64_t gc = icos(p->grad_dir), gs = isin(p->grad_dir);
    int64_t sc = icos(p->stripe_dir), ss = isin(p->stripe_dir);
    int64_t rc_ = icos(p->rot), rs = isin(p->rot);
    int64_t half = (int64_t)size * 8;           /* S/2 in 1/16 px */
    int64_t gnorm = (int64_t)size * 16 * 3 / 2;  /* gradient span, 1/16 px */
    int64_t ext = p->r16 * 12 / 10 + 32;         /* shape bounding box half-size */
    int64_t P = p->stripe_period16;
    sp_ctr noise = {{0, 0, 0, 0}};
    for (int y = 0; y < size; y++) {
        uint8_t *row = img->data + (size_t)y * img->stride;
        for (int x = 0; x < size; x++) {
            uint32_t pix = (uint32_t)y * (uint32_t)size + (uint32_t)x;
            if ((pix & 3u) == 0) {
                sp_ctr c = {{pix >> 2, SHAPES_TAG_NOISE, index, 0}};
                noise = sp_philox4x32_10(c, key);
            }
            uint32_t nw = noise.c[pix & 3u];
            int64_t x16 = (int64_t)x * 16 + 8, y16 = (int64_t)y * 16 + 8;
            /* gradient position t in [0, 256] */
            int64_t proj = fshr((x16 - half) * gc + (y16 - half) * gs, 14);
            int64_t t = 128 + fdiv(proj * 256, gnorm);
            t = t < 0 ? 0 : t > 256 ? 256 : t;
            /* stripes: triangle wave in [-amp, amp] */
            int64_t along = fshr(x16 * sc + y16 * ss, 14) + p->stripe_phase16;
            int64_t ph = fmod_pos(along, P);
            int64_t tri = iabs64(2 * ph - P);    /* 0..P */
            int64_t stripe = fdiv((int64_t)p->stripe_amp * (2 * tri - P), P);
            /* coverage on a 4x4 sub-pixel grid */
            int cov = 0;
            int64_t dx0 = (int64_t)x * 16 - p->cx16, dy0 = (int64_t)y * 16 - p->cy16;
            if (dx0 > -ext - 16 && dx0 < ext && dy0 > -ext - 16 && dy0 < ext) {
                for (int sy = 0; sy < 4; sy++) {
                    for (int sx = 0; sx < 4; sx++) {
                        int64_t dx = dx0 + 2 + 4 * sx, dy = dy0 + 2 + 4 * sy;
                        int64_t u = fshr(dx * rc_ + dy * rs, 14);
                        int64_t v = fshr(dy * rc_ - dx * rs, 14);
                        cov += inside(p, u, v);
                    }
                }
            }
            for (int c = 0; c < 3; c++) {
                int b = (int)((nw >> (8 * c)) & 0xffu);
                int64_t nz = (((int64_t)b * (2 * p->noise_amp + 1)) >> 8) - p->noise_amp;
                int64_t base = p->bg_a[c] + fdiv((int64_t)(p->bg_b[c] - p->bg_a[c]) * t, 256);
                int bg = clamp255(base + stripe + nz);
                int fg = clamp255(p->fg[c] + fdiv(nz, 2));
                row[3 * x + c] = (uint8_t)((bg * (16 - cov) + fg * cov + 8) >> 4);
            }
        }
    }
    return SP_OK;
}

static int resolve_opts(const sp_shapes_opts *opts, sp_shapes_opts *o, sp_error *err) {
    o->count = 1000;
    o->size = 64;
    o->seed = 0;
    if (opts) {
        if (opts->count) o->count = opts->count;
        if (opts->size) o->size = opts->size;
        o->seed = opts->seed;
    }
    if (o->size < SHAPES_MIN_SIZE || o->size > SHAPES_MAX_SIZE)
        return sp_error_set(err, SP_EINVAL, "shapes: size %d outside %d..%d", o->size,
                            SHAPES_MIN_SIZE, SHAPES_MAX_SIZE);
    if (o->count > SHAPES_MAX_COUNT)
        return sp_error_set(err, SP_EINVAL, "shapes: count %u larger than %u", o->count,
                            SHAPES_MAX_COUNT);
    return SP_OK;
}

int sp__shapes_render(const sp_shapes_opts *opts, uint32_t index, sp_image *out, int *label,
                      sp_error *err) {
    if (!out) return sp_error_set(err, SP_EINVAL, "shapes: NULL output image");
    memset(out, 0, sizeof *out);
    sp_shapes_opts o;
    int rc = resolve_opts(opts, &o, err);
    if (rc) return rc;
    sp_key key = sp_rng_key(o.seed, SP_RNG_OTHER);
    params p;
    draw_params(&p, key, index, o.size);
    rc = render(&p, key, index, o.size, out);
    if (rc) return sp_error_set(err, rc, "shapes: out of memory for image %u", index);
    if (label) *label = p.cls;
    return SP_OK;
}

/* mkdir -p for one path; an existing directory is fine. */
static int make_dirs(const char *path, sp_error *err) {
    size_t l = strlen(path);
    char *s = malloc(l + 1);
    if (!s) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    memcpy(s, path, l + 1);
    int rc = SP_OK;
    for (size_t k = 1; k <= l && rc == SP_OK; k++) {
        if (s[k] != '/' && s[k] != '\0') continue;
        char save = s[k];
        s[k] = '\0';
        if (mkdir(s, 0755) != 0 && errno != EEXIST)
            rc = sp_error_set(err, SP_EIO, "%s: %s", s, strerror(errno));
        s[k] = save;
    }
    struct stat st;
    if (rc == SP_OK && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)))
        rc = sp_error_set(err, SP_EIO, "%s: not a directory", path);
    free(s);
    return rc;
}

int sp_shapes_make(const char *out_dir, const sp_shapes_opts *opts, sp_error *err) {
    if (!out_dir || !out_dir[0]) return sp_error_set(err, SP_EINVAL, "shapes: empty output folder");
    sp_shapes_opts o;
    int rc = resolve_opts(opts, &o, err);
    if (rc) return rc;
    size_t lo = strlen(out_dir);
    size_t cap = lo + 64;
    char *path = malloc(cap);
    if (!path) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", out_dir);
    rc = make_dirs(out_dir, err);
    for (int c = 0; c < NUM_CLASSES && rc == SP_OK; c++) {
        snprintf(path, cap, "%s/%s", out_dir, class_names[c]);
        rc = make_dirs(path, err);
    }
    sp_key key = sp_rng_key(o.seed, SP_RNG_OTHER);
    for (uint32_t i = 0; i < o.count && rc == SP_OK; i++) {
        params p;
        sp_image img;
        draw_params(&p, key, i, o.size);
        rc = render(&p, key, i, o.size, &img);
        if (rc) {
            rc = sp_error_set(err, rc, "shapes: out of memory for image %u", i);
            break;
        }
        snprintf(path, cap, "%s/%s/%06u.%s", out_dir, class_names[p.cls], i,
                 (i & 1u) ? "jpg" : "png");
        rc = sp_image_write(path, &img, (i & 1u) ? SP_IMAGE_JPEG : SP_IMAGE_PNG, 90, err);
        sp_image_free(&img);
    }
    free(path);
    return rc;
}
