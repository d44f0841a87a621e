/* jpeg_checkpoints.c - benchmark and proof of a design: JPEG entropy
 * checkpoints (issue 39, item 6; bench/RESULTS.md). Not used by the
 * loader yet.
 *
 *   bench_jpeg_checkpoints DIR [--rounds N]
 *
 * A crop of a JPEG that stops after its last row (a validated file) still
 * entropy-decodes every row above it: Huffman data has no random access.
 * The design measured here keeps, for each iMCU row of a baseline file,
 * the bit position where the row's data starts and the DC predictors
 * there (one walk of the file's Huffman codes, as when it is checked),
 * and decodes a crop from a stream made for it, through libjpeg's public
 * API:
 *   - the file's headers, the frame's height reduced to start one iMCU
 *     row above checkpoint row r;
 *   - one synthetic iMCU row: every block a DC difference and an end of
 *     block, the differences summing, per component, to the kept
 *     predictors, a few AC codes padding its length to the checkpoint's
 *     bit offset modulo 8;
 *   - the file's bytes from the checkpoint's byte on, that byte's first
 *     bits (the row above's) replaced by the synthetic row's last ones.
 * Fancy upsampling reads one chroma row above each row, so output rows
 * from r * mh + 1 on equal a full decode's; a crop starting at y uses
 * r = (y - 1) / mh (none when that is 0). The crops are torchvision's
 * RandomResizedCrop boxes (sp__rrc_sample()) of each file, decoded with
 * SP__DECODE_VALIDATED both ways: the bytes are compared (any difference
 * fails the run) and the thread CPU time of each way printed, in
 * alternated rounds. Baseline Huffman files without a restart interval
 * only (others are counted and skipped). The stream is copied whole here
 * (a source manager reading two buffers would not copy).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/jpeg_files.h"
#include "seedpipe/decode.h"
#include "seedpipe/philox.h"
#include "augment/decode_internal.h"
#include "augment/ops_internal.h"

/* ---- the file's tables and geometry ---- */

typedef struct {
    int maxcode[17], valptr[17], mincode[17];
    uint8_t val[256];
    int code[256], len[256];   /* the encoder's view: len 0 = no code */
} htab;

typedef struct {
    int W, H, nc, mh, mcux, mcuy;
    int h[3], v[3], td[3], ta[3];
    htab dc[4], ac[4];
    size_t sof_h;   /* offset of the frame's 16-bit height */
    size_t data;    /* first byte of the scan's entropy-coded data */
} jinfo;

/* One iMCU row's start: the byte holding its first bit, the bits of that
 * byte that belong to the row above, the DC predictors. */
typedef struct {
    uint32_t byte;
    uint8_t bit;
    int16_t dc[3];
} ckpt;

static void htab_build(htab *t, const uint8_t *bits, const uint8_t *val, int n) {
    memcpy(t->val, val, (size_t)n);
    memset(t->len, 0, sizeof t->len);
    int code = 0, k = 0;
    for (int l = 1; l <= 16; l++) {
        t->valptr[l] = k;
        t->mincode[l] = code;
        for (int i = 0; i < bits[l - 1]; i++, k++, code++) {
            t->code[val[k]] = code;
            t->len[val[k]] = l;
        }
        t->maxcode[l] = bits[l - 1] ? code - 1 : -1;
        code <<= 1;
    }
}

/* 0 for a baseline (SOF0/SOF1) 8-bit file of 1 or 3 components in one
 * interleaved scan, no restart interval; -1 otherwise. */
static int parse(const uint8_t *b, size_t n, jinfo *j) {
    memset(j, 0, sizeof *j);
    if (n < 4 || b[0] != 0xFF || b[1] != 0xD8) return -1;
    int hmax = 1, vmax = 1, id[3] = {0, 0, 0};
    for (size_t p = 2; p + 4 <= n;) {
        if (b[p] != 0xFF) return -1;
        int m = b[p + 1];
        size_t L = ((size_t)b[p + 2] << 8) | b[p + 3];
        if (m == 0xFF) { p++; continue; }
        if (L < 2 || p + 2 + L > n) return -1;
        const uint8_t *s = b + p + 4;
        if (m == 0xC0 || m == 0xC1) {
            if (L < 8 || s[0] != 8 || (s[5] != 1 && s[5] != 3) || L < 8 + 3u * s[5]) return -1;
            j->sof_h = p + 5;
            j->H = (s[1] << 8) | s[2];
            j->W = (s[3] << 8) | s[4];
            j->nc = s[5];
            for (int c = 0; c < j->nc; c++) {
                id[c] = s[6 + 3 * c];
                j->h[c] = j->nc == 1 ? 1 : s[7 + 3 * c] >> 4;
                j->v[c] = j->nc == 1 ? 1 : s[7 + 3 * c] & 15;
                if (j->h[c] < 1 || j->h[c] > 4 || j->v[c] < 1 || j->v[c] > 4) return -1;
                hmax = j->h[c] > hmax ? j->h[c] : hmax;
                vmax = j->v[c] > vmax ? j->v[c] : vmax;
            }
        } else if ((m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) ||
                   (m == 0xDD && L >= 4 && (s[0] | s[1]))) {
            return -1;   /* progressive, lossless, arithmetic; a restart interval */
        } else if (m == 0xC4) {
            for (size_t q = 0; q + 17 <= L - 2;) {
                int tc = s[q] >> 4, th = s[q] & 15, tot = 0;
                if (th > 3 || tc > 1) return -1;
                for (int l = 0; l < 16; l++) tot += s[q + 1 + l];
                if (tot > 256 || q + 17 + (size_t)tot > L - 2) return -1;
                htab_build(tc ? &j->ac[th] : &j->dc[th], s + q + 1, s + q + 17, tot);
                q += 17 + (size_t)tot;
            }
        } else if (m == 0xDA) {
            if (!j->nc || L < 6 || s[0] != j->nc) return -1;
            for (int c = 0; c < j->nc; c++) {
                if (s[1 + 2 * c] != id[c]) return -1;   /* the frame's order */
                j->td[c] = s[2 + 2 * c] >> 4;
                j->ta[c] = s[2 + 2 * c] & 15;
                if (j->td[c] > 3 || j->ta[c] > 3) return -1;
            }
            j->data = p + 2 + L;
            break;
        }
        p += 2 + L;
    }
    if (!j->data || j->H <= 0 || j->W <= 0) return -1;
    j->mh = 8 * vmax;
    j->mcux = (j->W + 8 * hmax - 1) / (8 * hmax);
    j->mcuy = (j->H + j->mh - 1) / j->mh;
    return 0;
}

/* ---- walking the Huffman codes (a bit at a time: a prototype) ---- */

typedef struct {
    const uint8_t *b;
    size_t n, p;   /* the byte holding the next bit, and its bits used */
    int nb, bad;
} bitr;

static int getbit(bitr *r) {
    if (r->p >= r->n) {
        r->bad = 1;
        return 0;
    }
    uint8_t c = r->b[r->p];
    int bit = (c >> (7 - r->nb)) & 1;
    if (++r->nb == 8) {
        r->nb = 0;
        r->p += c == 0xFF ? 2 : 1;   /* past its stuffed zero */
        if (c == 0xFF && (r->p - 1 >= r->n || r->b[r->p - 1] != 0)) r->bad = 1;
    }
    return bit;
}

static int getbits(bitr *r, int s) {
    int v = 0;
    for (int i = 0; i < s; i++) v = (v << 1) | getbit(r);
    return v;
}

static int huff(bitr *r, const htab *t) {
    int code = 0;
    for (int l = 1; l <= 16; l++) {
        code = (code << 1) | getbit(r);
        if (t->maxcode[l] >= 0 && code <= t->maxcode[l])
            return t->val[t->valptr[l] + code - t->mincode[l]];
    }
    r->bad = 1;
    return 0;
}

/* Fill ck[0 .. mcuy) (0 or -1 on bad data). */
static int walk(const uint8_t *b, size_t n, const jinfo *j, ckpt *ck) {
    bitr r = {b, n, j->data, 0, 0};
    int pred[3] = {0, 0, 0};
    for (int my = 0; my < j->mcuy; my++) {
        ck[my].byte = (uint32_t)r.p;
        ck[my].bit = (uint8_t)r.nb;
        for (int c = 0; c < 3; c++) ck[my].dc[c] = (int16_t)pred[c];
        int mcux = j->nc == 1 ? (j->W + 7) / 8 : j->mcux;
        for (int mx = 0; mx < mcux; mx++)
            for (int c = 0; c < j->nc; c++)
                for (int k = 0; k < j->h[c] * j->v[c]; k++) {
                    int s = huff(&r, &j->dc[j->td[c]]);
                    if (s > 11) return -1;
                    int d = getbits(&r, s);
                    if (s && d < (1 << (s - 1))) d -= (1 << s) - 1;
                    pred[c] += d;
                    for (int z = 1; z < 64;) {
                        int rs = huff(&r, &j->ac[j->ta[c]]);
                        if (rs & 15) {
                            getbits(&r, rs & 15);
                            z += (rs >> 4) + 1;
                        } else if (rs == 0xF0) {
                            z += 16;
                        } else {
                            break;
                        }
                    }
                    if (r.bad) return -1;
                }
    }
    return 0;
}

/* ---- the stream for a checkpoint ---- */

typedef struct {
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
    while (a) {
        s++;
        a >>= 1;
    }
    return s;
}

/* The stream for checkpoint row r >= 1 of j's file into o (room: n + 64
 * bytes per synthetic block); returns its length, 0 where the tables lack
 * a code it needs. */
static size_t build(const uint8_t *b, size_t n, const jinfo *j, const ckpt *ck, int r,
                    uint8_t *o, int *diff, int *pad) {
    int mcux = j->nc == 1 ? (j->W + 7) / 8 : j->mcux, mh = j->nc == 1 ? 8 : j->mh;
    int Hn = j->H - (r - 1) * mh, nb[3] = {0, 0, 0}, base[3] = {0, 0, 0}, tot = 0;
    memcpy(o, b, j->data);
    o[j->sof_h] = (uint8_t)(Hn >> 8);
    o[j->sof_h + 1] = (uint8_t)Hn;
    for (int c = 0; c < j->nc; c++) {
        nb[c] = mcux * j->h[c] * j->v[c];
        base[c] = tot;
        tot += nb[c];
    }
    /* the DC steps: the largest category the table codes, block by block */
    long bits = 0;
    for (int c = 0; c < j->nc; c++) {
        const htab *dt = &j->dc[j->td[c]], *at = &j->ac[j->ta[c]];
        if (!dt->len[0] || !at->len[0]) return 0;
        int R = ck[r].dc[c];
        for (int i = 0; i < nb[c]; i++) {
            int d = 0, a = R < 0 ? -R : R;
            for (int s = 11; a && s >= 1; s--)
                if (dt->len[s] && (1 << (s - 1)) <= a) {
                    d = a < (1 << s) - 1 ? a : (1 << s) - 1;
                    break;
                }
            if (a && !d) return 0;
            d = R < 0 ? -d : d;
            R -= d;
            diff[base[c] + i] = d;
            pad[base[c] + i] = 0;
            bits += dt->len[category(d)] + category(d) + at->len[0];
        }
        if (R) return 0;
    }
    /* the padding: m blocks of one component carry one AC coefficient
     * (run 0, size s: code + s bits) so that the row ends ck[r].bit bits
     * into a byte */
    int need = (ck[r].bit - (int)(bits % 8) + 8) % 8;
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
    if (need) return 0;
    bitw w = {o + j->data, 0, 0, 0};
    int next[3] = {0, 0, 0};
    for (int mx = 0; mx < mcux; mx++)
        for (int c = 0; c < j->nc; c++)
            for (int k = 0; k < j->h[c] * j->v[c]; k++) {
                const htab *dt = &j->dc[j->td[c]], *at = &j->ac[j->ta[c]];
                int i = base[c] + next[c]++, d = diff[i], s = category(d);
                putbits(&w, (uint32_t)dt->code[s], dt->len[s]);
                if (s) putbits(&w, (uint32_t)(d < 0 ? d + (1 << s) - 1 : d), s);
                if (pad[i]) {
                    putbits(&w, (uint32_t)at->code[pad[i]], at->len[pad[i]]);
                    putbits(&w, 1u << (pad[i] - 1), pad[i]);
                }
                putbits(&w, (uint32_t)at->code[0], at->len[0]);
            }
    size_t q = j->data + w.n, B = ck[r].byte;
    if (w.nacc) {   /* the junction byte: our last bits, then the row's first */
        int k = w.nacc;
        uint8_t jb = (uint8_t)((w.acc << (8 - k)) | (b[B] & ((1u << (8 - k)) - 1)));
        o[q++] = jb;
        if (jb == 0xFF) o[q++] = 0;
        B += b[B] == 0xFF ? 2 : 1;
    }
    memcpy(o + q, b + B, n - B);
    return q + (n - B);
}

/* ---- the bench ---- */

/* A file's tables and checkpoints (ck NULL: not walked). */
typedef struct {
    jinfo j;
    ckpt *ck;
} walked_t;

static int same_image(const sp_image *a, const sp_image *b) {
    if (a->width != b->width || a->height != b->height || a->channels != b->channels) return 0;
    for (int y = 0; y < a->height; y++)
        if (memcmp(a->data + (size_t)y * a->stride, b->data + (size_t)y * b->stride,
                   (size_t)a->width * (size_t)a->channels))
            return 0;
    return 1;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: bench_jpeg_checkpoints DIR [--rounds N]\n");
        return 2;
    }
    size_t nfiles;
    jpeg_file *files = jpeg_files_load(dir, &nfiles);
    if (!nfiles) {
        fprintf(stderr, "no JPEG files under %s\n", dir);
        return 1;
    }
    walked_t *wk = calloc(nfiles, sizeof *wk);
    size_t walked = 0, maxlen = 0, maxblocks = 0;
    double twalk = 0, tfull = 0;
    for (size_t i = 0; i < nfiles; i++) {
        const jpeg_file *f = &files[i];
        walked_t *w = &wk[i];
        if (f->len > maxlen) maxlen = f->len;
        sp_image full;
        sp_error err;
        sp_decode_req whole = {3, 0, 0, 0, 0, 1};   /* w, h 0: the whole image */
        double t0 = cpu_s();
        int ok = sp__image_decode(f->data, f->len, f->path, &whole, NULL, &full, &err) == 0;
        double t1 = cpu_s();
        if (ok) sp_image_free(&full);
        if (!ok || parse(f->data, f->len, &w->j) != 0) continue;
        w->ck = malloc((size_t)w->j.mcuy * sizeof *w->ck);
        if (walk(f->data, f->len, &w->j, w->ck) != 0) {
            free(w->ck);
            w->ck = NULL;
            continue;
        }
        twalk += cpu_s() - t1;
        tfull += t1 - t0;
        size_t blocks = (size_t)(w->j.mcux + 1) * 16 * 3;
        if (blocks > maxblocks) maxblocks = blocks;
        walked++;
    }
    uint8_t *syn = malloc(maxlen + 64 * maxblocks + 1024);
    int *diff = malloc(maxblocks * sizeof *diff), *pad = malloc(maxblocks * sizeof *pad);
    sp_key key = sp_rng_key(1, SP_RNG_AUGMENT);
    double tnorm = 0, tck = 0, tbuild = 0;
    size_t used = 0, unused = 0, nostream = 0, differ = 0;
    for (int rd = 0; rd < rounds; rd++)
        for (size_t i = 0; i < nfiles; i++) {
            const jpeg_file *f = &files[i];
            const walked_t *w = &wk[i];
            if (!w->ck) continue;
            sp_crop_box bx;
            sp__rrc_sample(w->j.W, w->j.H, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0, key, 1,
                           (uint32_t)i, (uint32_t)rd, &bx);
            sp_decode_req rq = {3, bx.x, bx.y, bx.w, bx.h, 1};
            sp_image a, c;
            sp_error err;
            int mh = w->j.nc == 1 ? 8 : w->j.mh, r = bx.y >= 1 ? (bx.y - 1) / mh : 0;
            double t0 = cpu_s();
            int ea = sp__image_decode_ex(f->data, f->len, f->path, &rq, NULL,
                                         SP__DECODE_VALIDATED, &a, &err);
            double t1 = cpu_s();
            int ec;
            size_t sn = r >= 1 ? build(f->data, f->len, &w->j, w->ck, r, syn, diff, pad) : 0;
            if (r >= 1) tbuild += cpu_s() - t1;
            if (sn) {
                sp_decode_req rs = {3, bx.x, bx.y - (r - 1) * mh, bx.w, bx.h, 1};
                ec = sp__image_decode_ex(syn, sn, f->path, &rs, NULL, SP__DECODE_VALIDATED, &c,
                                         &err);
                used++;
            } else {   /* at the top, or the tables lack a code the stream needs */
                nostream += r >= 1;
                ec = sp__image_decode_ex(f->data, f->len, f->path, &rq, NULL,
                                         SP__DECODE_VALIDATED, &c, &err);
                unused++;
            }
            double t2 = cpu_s();
            tnorm += t1 - t0;
            tck += t2 - t1;
            if (ea || ec || !same_image(&a, &c)) {
                if (differ++ < 5)
                    fprintf(stderr, "DIFFERENT: %s crop %d,%d %dx%d checkpoint row %d: %s\n",
                            f->path, bx.x, bx.y, bx.w, bx.h, r,
                            ea ? "the plain decode failed" : ec ? err.msg : "other bytes");
            }
            if (!ea) sp_image_free(&a);
            if (!ec) sp_image_free(&c);
        }
    printf("files: %zu JPEGs from %s, %zu walked (baseline, no restart interval)\n", nfiles,
           dir, walked);
    printf("walk: %.0f us a file (a full decode: %.0f us)\n", 1e6 * twalk / (double)walked,
           1e6 * tfull / (double)walked);
    printf("crops: %zu, from a checkpoint %zu, from the top %zu (of which %zu for want of a "
           "Huffman code); bytes differing: %zu\n",
           used + unused, used, unused, nostream, differ);
    printf("region decode, thread CPU: stopping after the last row %.3f s, with checkpoints "
           "%.3f s (making the streams %.3f s): %.3fx\n", tnorm, tck, tbuild, tnorm / tck);
    free(syn);
    free(diff);
    free(pad);
    for (size_t i = 0; i < nfiles; i++) free(wk[i].ck);
    free(wk);
    jpeg_files_free(files, nfiles);
    return differ ? 1 : 0;
}
