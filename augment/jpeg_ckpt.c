/* augment/jpeg_ckpt.c - JPEG entropy checkpoints (jpeg_ckpt_internal.h):
 * made by one walk of a validated baseline file's Huffman codes, used to
 * decode a crop from near its first row through libjpeg's public API.
 *
 * HOW IT WORKS
 *  - The walk (sp__jpeg_ckpt_make()) decodes the scan's Huffman codes
 *    only: no coefficient is stored, no IDCT. Codes of up to 9 bits are
 *    found in a 512-entry table that also gives the length of the value
 *    bits after them (one shift skips both), longer ones by the
 *    code-length limits (libjpeg's method); the AC loop is libjpeg's (a
 *    run, then a size; 0xF0 skips 16; end of block). At the start of every
 *    iMCU row it keeps the byte holding the row's first bit, how many bits
 *    of that byte belong to the row above, and the DC predictors.
 *    sp__image_check() walks a file only after its full decode succeeded
 *    without a warning, so the walk reads the codes libjpeg read; a walk
 *    that meets anything else (a code not in the table, bits past the
 *    scan's data) keeps nothing.
 *  - The table: "K", the component count, the spacing s and the count
 *    (u16 little-endian each), then per checkpoint k (iMCU row (k + 1) * s)
 *    LEB128 varints: its byte's distance from the previous checkpoint's
 *    (from the scan's first byte for the first) shifted left 3, or'ed with
 *    its bits, then each DC predictor's change from the previous one,
 *    zigzagged (predictors within int16). Typically 5-6 bytes a row. At
 *    most SP__JPEG_CKPT_MAX checkpoints: s is the smallest spacing that
 *    fits.
 *  - Resuming (sp__jpeg_ckpt_resume()) at checkpoint row r builds a stream
 *    libjpeg decodes as any file: the file's headers with the frame's
 *    height counted from row r - 1; one made-up iMCU row in row r - 1's
 *    place, whose blocks hold only DC differences (each the largest step
 *    the file's DC table can code, summing per component to the kept
 *    predictor) and an end of block, a few of them one AC coefficient
 *    more so that the row ends exactly the kept number of bits into a
 *    byte; then the file's bytes from the checkpoint's byte on, that
 *    byte's first bits replaced by the made-up row's last ones. The
 *    decoder's state at row r is then the full decode's: the same bit
 *    position, the same predictors (each JPEG block is decoded from them
 *    and its own bits alone). Fancy upsampling reads one row of chroma
 *    above each row, so the rows of the made-up iMCU row and the first of
 *    row r are not the full decode's: the crop's first row y uses
 *    r = (y - 1) / mh or earlier (mh the iMCU row's height), and
 *    rows_above = (r - 1) * mh.
 *  - The bottom: the frame's height is cut after the iMCU row holding the
 *    crop's last row, or after the next one when that row is the last of
 *    its iMCU row (fancy upsampling reads one row of chroma below each
 *    row; the rows above it read none from the next iMCU row), so libjpeg
 *    does not decode the iMCU row below the crop that the upsampler would
 *    ask for. A crop starting in the first iMCU row or on the second's
 *    first row (y <= mh) gets that cut alone (r = 0: the headers, then
 *    the scan from its start).
 *
 * LIMITS: baseline / extended sequential Huffman, 8-bit, 1 component (1x1)
 * or 3 in one interleaved scan in frame order, no restart interval (a file
 * with restart markers could start at any of them instead: not done). A
 * file whose tables cannot make the made-up row (no end-of-block code,
 * DC codes that cannot sum to the predictor, too few blocks to pad the
 * row to its bit) is decoded from the top. The pixels equal a full
 * decode's by construction; the tests compare every crop of their corpus
 * both ways (tests/test_jpeg_ckpt.c).
 */
#include "augment/jpeg_ckpt_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/common_internal.h"
#include "common/le_internal.h"

#define CK_HEAD 6   /* "K", nc, spacing u16, count u16 */

/* ---- the file's tables and geometry ---- */

typedef struct htab {
    int maxcode[18], valptr[17], mincode[17];
    uint16_t look[512];          /* 9-bit prefix -> (bits << 8) | value; 0: longer */
    uint8_t val[256];
    uint16_t code[256];
    uint8_t len[256];            /* the encoder's view: 0 = no code */
} htab;

typedef struct jinfo {
    int W, H, nc, mh, mcux, mcuy;
    int h[3], v[3], td[3], ta[3];
    int bpm[3], nblk;            /* blocks per MCU of each component; per iMCU row */
    int spacing, count;          /* the checkpoint rows: (k + 1) * spacing, k < count */
    htab dc[4], ac[4];
    uint8_t have[2][4];          /* tables defined */
    size_t sof_h;                /* offset of the frame's 16-bit height */
    size_t data;                 /* the scan's first entropy-coded byte */
} jinfo;

/* Build a table from a DHT's counts and values (the 9-bit lookup only for
 * a walk: the bits of a code and of the value that follows it, the size
 * for a DC table (ac 0), the low nibble for an AC table); -1 if the counts
 * overflow the code space (libjpeg refuses such a table). */
static int htab_build(htab *t, const uint8_t *bits, const uint8_t *val, int n, int look, int ac) {
    if (look) memset(t->look, 0, sizeof t->look);
    memset(t->len, 0, sizeof t->len);
    memcpy(t->val, val, (size_t)n);
    int code = 0, k = 0;
    for (int l = 1; l <= 16; l++) {
        t->valptr[l] = k;
        t->mincode[l] = code;
        for (int i = 0; i < bits[l - 1]; i++, k++, code++) {
            if (code >= (1 << l)) return -1;
            t->code[val[k]] = (uint16_t)code;
            t->len[val[k]] = (uint8_t)l;
            /* the code's and its value's bits (a DC size over 11 is refused
             * by the walk: kept below 256 here) */
            int all = l + (ac ? val[k] & 15 : val[k]);
            uint16_t e = (uint16_t)((all > 255 ? 255 : all) << 8 | val[k]);
            if (look && l <= 9)
                for (int f = 0; f < 1 << (9 - l); f++) t->look[(code << (9 - l)) | f] = e;
        }
        t->maxcode[l] = bits[l - 1] ? code - 1 : -1;
        code <<= 1;
    }
    t->maxcode[17] = 0x7FFFFFFF;   /* a sentinel: no code is longer */
    return 0;
}

/* The frame (SOF0/SOF1) of an 8-bit file of 1 or 3 components. */
static int parse_sof(const uint8_t *s, size_t L, size_t at, jinfo *j, int *id) {
    if (L < 8 || s[0] != 8 || (s[5] != 1 && s[5] != 3) || L < 8 + 3u * s[5]) return -1;
    j->sof_h = at;
    j->H = (s[1] << 8) | s[2];
    j->W = (s[3] << 8) | s[4];
    j->nc = s[5];
    for (int c = 0; c < j->nc; c++) {
        id[c] = s[6 + 3 * c];
        j->h[c] = s[7 + 3 * c] >> 4;
        j->v[c] = s[7 + 3 * c] & 15;
        if (j->h[c] < 1 || j->h[c] > 4 || j->v[c] < 1 || j->v[c] > 4) return -1;
        if (j->nc == 1 && (j->h[c] != 1 || j->v[c] != 1)) return -1;
    }
    return 0;
}

static int parse_dht(const uint8_t *s, size_t L, jinfo *j, int look) {
    for (size_t q = 0; q + 17 <= L - 2;) {
        int tc = s[q] >> 4, th = s[q] & 15, tot = 0;
        if (th > 3 || tc > 1) return -1;
        for (int l = 0; l < 16; l++) tot += s[q + 1 + l];
        if (tot > 256 || q + 17 + (size_t)tot > L - 2) return -1;
        if (htab_build(tc ? &j->ac[th] : &j->dc[th], s + q + 1, s + q + 17, tot, look, tc) != 0)
            return -1;
        j->have[tc][th] = 1;
        q += 17 + (size_t)tot;
    }
    return 0;
}

static int parse_sos(const uint8_t *s, size_t L, size_t data, jinfo *j, const int *id) {
    if (!j->nc || L < 6u + 2u * (unsigned)j->nc || s[0] != j->nc) return -1;
    for (int c = 0; c < j->nc; c++) {
        if (s[1 + 2 * c] != id[c]) return -1;   /* the frame's order */
        j->td[c] = s[2 + 2 * c] >> 4;
        j->ta[c] = s[2 + 2 * c] & 15;
        if (j->td[c] > 3 || j->ta[c] > 3 || !j->have[0][j->td[c]] || !j->have[1][j->ta[c]])
            return -1;
    }
    j->data = data;
    return 0;
}

/* The markers up to the first scan's data (look: with the walk's lookup
 * tables). 0, or -1 for a file without checkpoints (progressive,
 * lossless, arithmetic, 12-bit, a restart interval, another layout) or a
 * header this walk does not follow. */
static int parse(const uint8_t *b, size_t n, jinfo *j, int look) {
    j->W = j->H = j->nc = 0;
    j->data = 0;
    memset(j->have, 0, sizeof j->have);
    if (n < 4 || b[0] != 0xFF || b[1] != 0xD8) return -1;
    int id[3] = {0, 0, 0};
    for (size_t p = 2; p + 4 <= n && !j->data;) {
        if (b[p] != 0xFF) return -1;
        int m = b[p + 1];
        if (m == 0xFF) {   /* fill byte */
            p++;
            continue;
        }
        size_t L = ((size_t)b[p + 2] << 8) | b[p + 3];
        if (L < 2 || p + 2 + L > n) return -1;
        const uint8_t *s = b + p + 4;
        int rc = 0;
        if (m == 0xC0 || m == 0xC1) rc = parse_sof(s, L, p + 5, j, id);
        else if (m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) rc = -1;
        else if (m == 0xDD) rc = L >= 4 && (s[0] | s[1]) ? -1 : 0;
        else if (m == 0xC4) rc = parse_dht(s, L, j, look);
        else if (m == 0xDA) rc = parse_sos(s, L, p + 2 + L, j, id);
        if (rc) return -1;
        p += 2 + L;
    }
    if (!j->data || j->H <= 0 || j->W <= 0 || j->data >= n) return -1;
    int hmax = 1, vmax = 1;
    for (int c = 0; c < j->nc; c++) {
        hmax = j->h[c] > hmax ? j->h[c] : hmax;
        vmax = j->v[c] > vmax ? j->v[c] : vmax;
    }
    j->mh = 8 * vmax;
    j->mcux = (j->W + 8 * hmax - 1) / (8 * hmax);
    j->mcuy = (j->H + j->mh - 1) / j->mh;
    j->nblk = 0;
    for (int c = 0; c < j->nc; c++) {
        j->bpm[c] = j->h[c] * j->v[c];   /* 1 for a gray file (1x1 only) */
        j->nblk += j->mcux * j->bpm[c];
    }
    /* the smallest spacing that keeps at most SP__JPEG_CKPT_MAX of rows 1.. */
    j->spacing = (j->mcuy - 1 + SP__JPEG_CKPT_MAX - 1) / SP__JPEG_CKPT_MAX;
    j->count = j->mcuy >= 2 ? (j->mcuy - 1) / j->spacing : 0;
    return 0;
}

/* ---- the walk: a 64-bit bit buffer, libjpeg's zero fill at a marker ---- */

typedef struct bitr {
    const uint8_t *b;
    size_t n, p;       /* the next byte to load */
    uint64_t acc;      /* nb bits, MSB first */
    int nb;
    uint64_t loaded;   /* data bytes loaded (real and zero fill) */
    uint64_t fill0;    /* zero bytes loaded at a marker or the end */
    size_t pos[8];     /* where the last 8 loaded bytes were */
} bitr;

static void fill(bitr *r) {
    /* eight bytes at once while none is 0xFF (no stuffing, no marker) */
    if (r->p + 8 <= r->n) {
        uint64_t w = 0;
        for (int i = 0; i < 8; i++) w = w << 8 | r->b[r->p + i];
        uint64_t v = ~w;
        if (!((v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull)) {
            int k = (64 - r->nb) / 8;   /* whole bytes that fit: nb <= 56, so k >= 1 */
            for (int i = 0; i < k; i++) r->pos[(r->loaded + (uint64_t)i) & 7] = r->p + (size_t)i;
            r->acc |= (w >> (64 - 8 * k)) << (64 - 8 * k - r->nb);
            r->nb += 8 * k;
            r->p += (size_t)k;
            r->loaded += (uint64_t)k;
            return;
        }
    }
    while (r->nb <= 56) {
        uint8_t c = 0;
        size_t at = r->p;
        if (r->p < r->n && (r->b[r->p] != 0xFF || (r->p + 1 < r->n && r->b[r->p + 1] == 0))) {
            c = r->b[r->p];
            r->p += c == 0xFF ? 2 : 1;   /* past a stuffed zero */
        } else {
            r->fill0++;
        }
        r->pos[r->loaded++ & 7] = at;
        r->acc |= (uint64_t)c << (56 - r->nb);
        r->nb += 8;
    }
}

/* A code longer than the 9-bit lookup's (r has at least 32 bits): its
 * value, or -1 for a code t does not have. */
static int huff_long(bitr *r, const htab *t) {
    int l = 10;
    while ((int64_t)(r->acc >> (64 - l)) > t->maxcode[l]) l++;
    if (l > 16) return -1;
    int code = (int)(r->acc >> (64 - l));
    r->acc <<= l;
    r->nb -= l;
    return t->val[(t->valptr[l] + code - t->mincode[l]) & 255];
}

/* The bit buffer of walk_row() lives in locals (acc, nb), in registers;
 * r gets it only around fill() and huff_long(). W_LOOK: at least 32 bits
 * in acc, then table t's lookup entry for them into e (0: a longer code). */
#define W_OUT() (r->acc = acc, r->nb = nb)
#define W_IN() (acc = r->acc, nb = r->nb)
#define W_LOOK(t, e)                    \
    do {                                \
        if (nb < 32) {                  \
            W_OUT();                    \
            fill(r);                    \
            W_IN();                     \
        }                               \
        (e) = (t)->look[acc >> 55];     \
    } while (0)

/* A code of t longer than 9 bits, consumed: its value, or -1 (the
 * value's own bits are left in acc). */
#define W_LONG(t, v)                    \
    do {                                \
        W_OUT();                        \
        (v) = huff_long(r, (t));        \
        W_IN();                         \
    } while (0)

/* One iMCU row's blocks, each a DC difference (added to pred) and its AC
 * codes skipped as libjpeg's loop reads them (a run, then a size; 0xF0
 * skips 16; end of block). A lookup entry gives a code's bits and its
 * value's together, so a coefficient is one shift. 0, or -1 on a code the
 * tables lack. */
static int walk_row(bitr *r, const jinfo *j, int *pred) {
    uint64_t acc = r->acc;
    int nb = r->nb, rc = -1;
    for (int mx = 0; mx < j->mcux; mx++)
        for (int c = 0; c < j->nc; c++) {
            const htab *dt = &j->dc[j->td[c]], *at = &j->ac[j->ta[c]];
            for (int i = 0; i < j->bpm[c]; i++) {
                unsigned e;
                int s, rs, all;
                W_LOOK(dt, e);
                if (e) {
                    s = (int)(e & 255);
                    all = (int)(e >> 8);
                } else {
                    W_LONG(dt, s);
                    all = s;   /* the code is consumed: the value's bits are left */
                }
                if (s < 0 || s > 11) goto out;
                if (s) {
                    int d = (int)((acc >> (64 - all)) & ((1u << s) - 1));
                    pred[c] += d < (1 << (s - 1)) ? d - (1 << s) + 1 : d;
                }
                acc <<= all;
                nb -= all;
                for (int z = 1; z < 64;) {
                    W_LOOK(at, e);
                    if (e) {
                        rs = (int)(e & 255);
                        acc <<= e >> 8;
                        nb -= (int)(e >> 8);
                    } else {
                        W_LONG(at, rs);
                        if (rs < 0) goto out;
                        acc <<= rs & 15;   /* the coefficient's bits */
                        nb -= rs & 15;
                    }
                    if (rs & 15) z += (rs >> 4) + 1;
                    else if (rs == 0xF0) z += 16;
                    else break;
                }
            }
        }
    rc = 0;
out:
    W_OUT();
    return rc;
}
#undef W_LONG
#undef W_LOOK
#undef W_IN
#undef W_OUT

/* ---- the table: deltas as LEB128 varints ---- */

typedef struct ckpt {
    uint32_t byte;   /* the byte holding the row's first bit */
    int bit;         /* bits of it the row above owns */
    int pred[3];     /* the DC predictors there */
} ckpt;

static uint8_t *put_varint(uint8_t *p, uint32_t v) {
    for (; v >= 0x80; v >>= 7) *p++ = (uint8_t)(v | 0x80);
    *p++ = (uint8_t)v;
    return p;
}

/* -1 past end or after 5 bytes */
static int get_varint(const uint8_t **p, const uint8_t *end, uint32_t *v) {
    uint32_t x = 0;
    for (int sh = 0; sh < 35 && *p < end; sh += 7) {
        uint8_t c = *(*p)++;
        x |= (uint32_t)(c & 0x7F) << sh;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static uint32_t zigzag(int v) { return v < 0 ? 2u * (uint32_t)(-(v + 1)) + 1u : 2u * (uint32_t)v; }
static int unzigzag(uint32_t v) { return v & 1 ? -(int)(v >> 1) - 1 : (int)(v >> 1); }

/* The table of j's checkpoints e: the header, then
 * per checkpoint (byte - the previous one's, or the scan's first byte)
 * << 3 | bits, and each predictor's change, zigzagged. */
static size_t encode(const jinfo *j, const ckpt *e, uint8_t *t) {
    uint8_t *p = t + CK_HEAD;
    uint32_t prev = (uint32_t)j->data;
    int pp[3] = {0, 0, 0};
    t[0] = 'K';
    t[1] = (uint8_t)j->nc;
    sp__le_put16(t + 2, (uint16_t)j->spacing);
    sp__le_put16(t + 4, (uint16_t)j->count);
    for (int k = 0; k < j->count; k++) {
        p = put_varint(p, (e[k].byte - prev) << 3 | (uint32_t)e[k].bit);
        prev = e[k].byte;
        for (int c = 0; c < j->nc; c++) {
            p = put_varint(p, zigzag(e[k].pred[c] - pp[c]));
            pp[c] = e[k].pred[c];
        }
    }
    return (size_t)(p - t);
}

/* The walk, keeping the checkpoints of rows s, 2s, ... (s: j->spacing) in e. */
static int walk(const uint8_t *b, size_t n, const jinfo *j, ckpt *e) {
    bitr r = {b, n, j->data, 0, 0, 0, 0, {0}};
    int pred[3] = {0, 0, 0}, k = 0;
    for (int my = 0; my < j->mcuy; my++) {
        if (my && my % j->spacing == 0 && k < j->count) {
            int q = (r.nb + 7) / 8;   /* bytes holding unread bits */
            e[k].byte = (uint32_t)r.pos[(r.loaded - (uint64_t)q) & 7];
            e[k].bit = (8 - r.nb % 8) % 8;
            for (int c = 0; c < j->nc; c++) {
                if (pred[c] < -32768 || pred[c] > 32767) return -1;
                e[k].pred[c] = pred[c];
            }
            k++;
        }
        if (walk_row(&r, j, pred) != 0) return -1;
    }
    /* every bit read was the file's: zero fill only in bytes not reached */
    return r.fill0 <= (uint64_t)(r.nb / 8) ? 0 : -1;
}

int sp__jpeg_ckpt_make(const uint8_t *buf, size_t len, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    jinfo *j = malloc(sizeof *j);
    ckpt *e = malloc(SP__JPEG_CKPT_MAX * sizeof *e);
    uint8_t *t = malloc(CK_HEAD + SP__JPEG_CKPT_MAX * 5 * 4);   /* 4 varints of <= 5 bytes */
    int rc = j && e && t ? 0 : SP_ENOMEM;
    if (!rc && parse(buf, len, j, 1) == 0 && j->count > 0 && len <= UINT32_MAX) {
        if (walk(buf, len, j, e) == 0) {
            size_t tl = encode(j, e, t);
            uint8_t *shrunk = realloc(t, tl);
            *out = shrunk ? shrunk : t;
            *out_len = tl;
            t = NULL;
            rc = 1;
        }
    }
    free(t);
    free(e);
    free(j);
    return rc;
}

/* ---- the made-up row ---- */

typedef struct bitw {
    uint8_t *o;
    size_t n;
    uint32_t acc;
    int nacc;
} bitw;

static void putbits(bitw *w, uint32_t v, int l) {
    for (int i = l - 1; i >= 0; i--) {
        w->acc = (w->acc << 1) | ((v >> i) & 1);
        if (++w->nacc == 8) {
            w->o[w->n++] = (uint8_t)w->acc;
            if ((uint8_t)w->acc == 0xFF) w->o[w->n++] = 0;
            w->acc = 0;
            w->nacc = 0;
        }
    }
}

static int category(int v) {
    int a = v < 0 ? -v : v, s = 0;
    for (; a; a >>= 1) s++;
    return s;
}

/* Whether the DC table codes the difference v. */
static int dc_coded(const htab *dt, int v) {
    int s = category(v);
    return s <= 11 && dt->len[s];
}

/* Two differences the table codes with d[0] + d[1] = R, neither 0 when
 * nonzero, the largest d[0] of R's sign first (a table made for one image
 * may lack small categories): 1, or 0 where there are none. */
static int dc_split(const htab *dt, int R, int nonzero, int *d) {
    int sg = R < 0 ? -1 : 1, a = R < 0 ? -R : R;
    for (int v = a < 2047 ? a : 2047; v >= -2047; v--) {
        int d0 = sg * v, d1 = R - d0;
        if (d1 < -2047 || d1 > 2047 || (nonzero && (!d0 || !d1))) continue;
        if (dc_coded(dt, d0) && dc_coded(dt, d1)) {
            d[0] = d0;
            d[1] = d1;
            return 1;
        }
    }
    return 0;
}

/* The DC step of one block toward R with `left` blocks to go (this one
 * included): where two blocks can still end at R, the first of a split
 * (dc_split()); else the largest step the table codes. */
static int dc_step(const htab *dt, int R, int left) {
    int sg = R < 0 ? -1 : 1, a = R < 0 ? -R : R, d[2];
    if (left >= 2 && a <= 2 * 2047 && dc_split(dt, R, 0, d)) return d[0];
    for (int s = 11; a && s >= 1; s--)
        if (dt->len[s] && (1 << (s - 1)) <= a) return sg * (a < (1 << s) - 1 ? a : (1 << s) - 1);
    return 0;
}

/* nb DC differences the table codes summing to R, into d: 0, or -1. With
 * a zero difference coded, dc_step() block by block. Without one (noise
 * at a high quality: an optimised table may have none), every block needs
 * a nonzero one: the largest steps while R is far, then one, two or three
 * values that reach R, as the parity of the blocks left asks, and the
 * blocks after them +u, -u in turn (u the smallest magnitude coded). */
static int plan_dc(const htab *dt, int R, int nb, int *d) {
    int i = 0, u = 0, a[3], k = -1;
    if (dt->len[0]) {
        for (; i < nb; i++) {
            d[i] = dc_step(dt, R, nb - i);
            R -= d[i];
        }
        return R ? -1 : 0;
    }
    for (int s = 1; s <= 11 && !u; s++)
        if (dt->len[s]) u = 1 << (s - 1);
    for (; u && i < nb && (R > 2 * 2047 || R < -2 * 2047); i++) {
        d[i] = dc_step(dt, R, 1);
        R -= d[i];
    }
    int m = nb - i;   /* blocks left, each a nonzero difference */
    if (!u || m < 1) return -1;
    if (m % 2 == 0 && R == 0) k = 0;
    else if (m % 2 == 0 && dc_split(dt, R, 1, a)) k = 2;
    else if (m % 2 == 1 && R && dc_coded(dt, R)) a[0] = R, k = 1;
    else if (m % 2 == 1 && m >= 3 && dc_split(dt, R - u, 1, a + 1)) a[0] = u, k = 3;
    else if (m % 2 == 1 && m >= 3 && dc_split(dt, R + u, 1, a + 1)) a[0] = -u, k = 3;
    if (k < 0) return -1;
    for (int t = 0; t < k; t++) d[i++] = a[t];
    for (int f = 0; i < nb; f++) d[i++] = f % 2 ? -u : u;
    return 0;
}

/* The plan of the made-up row: each block's DC difference (diff) and
 * padding size (pad, 0: none), from the predictors pr and the bits bit of
 * the junction byte the row above owns. -1 where the tables lack a code. */
static int plan_row(const jinfo *j, const int *pr, int bit, int *diff, int *pad) {
    long bits = 0;
    int base[3] = {0, 0, 0}, nb[3] = {0, 0, 0};
    for (int c = 0, at0 = 0; c < j->nc; c++) {
        const htab *dt = &j->dc[j->td[c]], *at = &j->ac[j->ta[c]];
        nb[c] = j->mcux * j->bpm[c];
        base[c] = at0;
        at0 += nb[c];
        if (!at->len[0] || plan_dc(dt, pr[c], nb[c], diff + base[c]) != 0) return -1;
        for (int i = 0; i < nb[c]; i++) {
            int d = diff[base[c] + i];
            pad[base[c] + i] = 0;
            bits += dt->len[category(d)] + category(d) + at->len[0];
        }
    }
    int need = (bit - (int)(bits % 8) + 8) % 8;
    for (int c = 0; need && c < j->nc; c++)
        for (int s = 1; need && s <= 10; s++) {
            const htab *at = &j->ac[j->ta[c]];
            if (!at->len[s]) continue;
            for (int m = 1; m <= 8 && m <= nb[c]; m++)
                if ((m * (at->len[s] + s)) % 8 == need) {
                    for (int i = 0; i < m; i++) pad[base[c] + i] = s;
                    need = 0;
                    break;
                }
        }
    return need ? -1 : 0;
}

/* Write the planned row, in the scan's block order, after the headers. */
static void write_row(const jinfo *j, const int *diff, const int *pad, bitw *w) {
    int next[3] = {0, 0, 0}, base[3] = {0, 0, 0};
    for (int c = 1; c < j->nc; c++) base[c] = base[c - 1] + j->mcux * j->bpm[c - 1];
    for (int mx = 0; mx < j->mcux; mx++)
        for (int c = 0; c < j->nc; c++)
            for (int k = 0; k < j->bpm[c]; k++) {
                const htab *dt = &j->dc[j->td[c]], *at = &j->ac[j->ta[c]];
                int i = base[c] + next[c]++, d = diff[i], s = category(d);
                putbits(w, dt->code[s], dt->len[s]);
                if (s) putbits(w, (uint32_t)(d < 0 ? d + (1 << s) - 1 : d), s);
                if (pad[i]) {
                    putbits(w, at->code[pad[i]], at->len[pad[i]]);
                    putbits(w, 1u << (pad[i] - 1), pad[i]);
                }
                putbits(w, at->code[0], at->len[0]);
            }
}

/* The checkpoint a crop starting at row y starts from, if the table fits
 * j's file (its header, every entry inside it and ending it, every byte
 * inside the scan's data): 1 (its row, byte, bits and
 * predictors in *e), 0 (none above y: the crop starts at the scan's
 * start), -1 (the table is not this file's). */
static int ck_entry(const jinfo *j, const uint8_t *ck, size_t ck_len, size_t n, int y,
                    int *row, ckpt *e) {
    if (ck_len < CK_HEAD || ck[0] != 'K' || ck[1] != j->nc || j->count < 1 ||
        sp__le_get16(ck + 2) != j->spacing || sp__le_get16(ck + 4) != j->count)
        return -1;
    int sp = j->spacing, count = j->count;
    int want = y >= 1 ? (y - 1) / j->mh / sp - 1 : -1;   /* r = (want + 1) * sp <= (y - 1) / mh */
    if (want >= count) return -1;
    const uint8_t *p = ck + CK_HEAD, *end = ck + ck_len;
    uint64_t byte = j->data;
    int pred[3] = {0, 0, 0};
    for (int k = 0; k < count; k++) {
        uint32_t v;
        if (get_varint(&p, end, &v) != 0) return -1;
        byte += v >> 3;
        if (byte >= n) return -1;
        for (int c = 0; c < j->nc; c++) {
            uint32_t d;
            if (get_varint(&p, end, &d) != 0) return -1;
            pred[c] += unzigzag(d);
            if (pred[c] < -32768 || pred[c] > 32767) return -1;
        }
        if (k == want) {
            *row = (k + 1) * sp;
            *e = (ckpt){(uint32_t)byte, (int)(v & 7), {pred[0], pred[1], pred[2]}};
        }
    }
    if (p != end) return -1;
    return want >= 0 ? 1 : 0;
}

/* The head of the stream for checkpoint row r (0: none, the scan from its
 * start) and a frame ending at row H_end (see HOW IT WORKS). */
static int make_head(const uint8_t *b, size_t n, const jinfo *j, int r, const ckpt *e,
                     int H_end, sp__jpeg_resume *out) {
    uint32_t B = e->byte;
    int nblk = j->nblk;
    int *diff = r ? malloc(2 * (size_t)nblk * sizeof *diff) : NULL;
    /* a block is at most 16 + 11 + 16 + 10 + 16 bits, doubled by stuffing */
    uint8_t *o = malloc(j->data + (r ? 20 * (size_t)nblk : 0) + 8);
    if ((r && !diff) || !o) {
        free(diff);
        free(o);
        return SP_ENOMEM;
    }
    int rc = 0, above = r ? (r - 1) * j->mh : 0;
    if (!r || plan_row(j, e->pred, e->bit, diff, diff + nblk) == 0) {
        int Hn = H_end - above;
        memcpy(o, b, j->data);
        o[j->sof_h] = (uint8_t)(Hn >> 8);
        o[j->sof_h + 1] = (uint8_t)Hn;
        bitw w = {o + j->data, 0, 0, 0};
        if (r) write_row(j, diff, diff + nblk, &w);
        size_t q = j->data + w.n;
        if (!r) B = (uint32_t)j->data;
        if (w.nacc) {   /* the junction byte: the row's last bits, then row r's first */
            uint8_t jb = (uint8_t)((w.acc << (8 - w.nacc)) | (b[B] & ((1u << (8 - w.nacc)) - 1)));
            o[q++] = jb;
            if (jb == 0xFF) o[q++] = 0;
            B += b[B] == 0xFF ? 2 : 1;
        }
        if (B <= n) {
            *out = (sp__jpeg_resume){o, q, B, above, r};
            o = NULL;
            rc = 1;
        }
    }
    free(o);
    free(diff);
    return rc;
}

int sp__jpeg_ckpt_resume(const uint8_t *buf, size_t len, const uint8_t *ck, size_t ck_len,
                         int y, int y_end, sp__jpeg_resume *out) {
    memset(out, 0, sizeof *out);
    jinfo *j = malloc(sizeof *j);
    if (!j) return SP_ENOMEM;
    int rc = 0, r = 0, found = -1;
    ckpt e = {0, 0, {0, 0, 0}};
    if (ck && parse(buf, len, j, 0) == 0) found = ck_entry(j, ck, ck_len, len, y, &r, &e);
    if (found >= 0 && y >= 0 && y < y_end && y_end <= j->H) {
        /* the frame ends with the iMCU row of the last row, or the next
         * one when that row is its row's last (upsampling reads below) */
        int last = y_end - 1, H_end = (last / j->mh + 1 + (last % j->mh == j->mh - 1)) * j->mh;
        if (H_end > j->H) H_end = j->H;
        if (found == 1 || H_end < j->H) rc = make_head(buf, len, j, r, &e, H_end, out);
    }
    free(j);
    return rc;
}
