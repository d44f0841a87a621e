/* augment/decode_jpeg.c - JPEG probe and decode for include/seedpipe/decode.h,
 * through the libjpeg API of libjpeg-turbo reading from memory.
 *
 * Fixed decoder settings, so the output is a pure function of (file bytes,
 * request): accurate integer IDCT (JDCT_ISLOW), fancy upsampling, no block
 * smoothing (which would make a region's edge depend on where the region
 * starts), DCT-domain scaling 1/d. Gray files decode as gray, YCbCr and RGB
 * files as RGB, CMYK and YCCK files as CMYK (libjpeg converts YCCK), which
 * decode.c converts to RGB; a file with an Adobe APP14 marker stores
 * inverted CMYK (as Photoshop writes it), one without stores ink amounts.
 * Gray output from a colour file is the ITU-R 601 luma of the decoded RGB.
 *
 * HOW IT WORKS: a region decode asks libjpeg for the scaled output columns
 * [x0, x1) widened by one pixel on each side and to at least
 * 4 * max_h_samp_factor pixels (jpeg_crop_scanline widens further, to iMCU
 * boundaries), skips to row y0 (jpeg_skip_scanlines), reads rows y0..y1-1
 * and copies out exactly columns [x0, x1). The margins matter: fancy
 * upsampling treats the edges of a cropped row as image edges (libjpeg.txt,
 * "Partial image decompression"), so the edge pixels of the crop are not
 * those of a full decode, and libjpeg falls back to box upsampling when a
 * crop's chroma is under 2 samples wide. With the margins the edge pixels
 * are never copied, and a region decode equals the same crop of a full
 * decode (tests/test_decode.c checks this on every sampling layout). Where
 * libjpeg-turbo 2.1's cropping is wrong (jd_crop_is_exact()) the rows
 * are decoded at full width instead. With SP__DECODE_WIDE (the pipeline's
 * fused region decode) nothing is copied when libjpeg's output layout is
 * the requested one: its (widened) rows are written straight into the
 * image, whose stride is then one libjpeg row and whose pixels are a
 * window of them. In the code: jd_body() opens the file (jd_open()), sets
 * the scale (jd_scale()), picks the columns (jd_columns()), skips to y0,
 * reads the rows (jd_read_wide() or jd_read_rows()) and reads to EOI
 * (jd_finish()), all inside jd_guarded()'s setjmp.
 *
 * Errors: libjpeg errors AND every libjpeg warning (corrupt data, premature
 * end, extraneous bytes, bad Huffman or arithmetic codes) longjmp back with
 * the library's message (SP_EFORMAT; SP_ENOMEM when libjpeg is
 * out of memory); a file with more than 500 scans is refused with
 * SP_ELIMIT (the scan-count DoS, as TurboJPEG's TJFLAG_LIMITSCANS);
 * libjpeg's whole-image buffers (multi-scan files) are capped at
 * 4 * max_bytes (SP_ELIMIT; a safety net: a file within the limits needs
 * at most 8 bytes per pixel there, and max_bytes >= 3 bytes per pixel).
 * Whatever the region, the whole file is read to EOI: the rows after the
 * region are skipped (jpeg_skip_scanlines: entropy decoding only, no IDCT
 * or colour conversion) and jpeg_finish_decompress reads the trailing
 * markers, so damage anywhere is an error for every crop, baseline,
 * progressive (read whole at jpeg_start_decompress) or arithmetic-coded
 * alike. The one exception is SP__DECODE_VALIDATED (decode_internal.h):
 * bytes whose full decode already succeeded (the dataset index's verdict,
 * bound to their content hash) stop after the region's last row, and
 * jpeg_destroy_decompress abandons the rest; the rows given are those of
 * the full read, so only the time differs. Such a file may also come with
 * its entropy checkpoint table (sp__decode_hint): a crop at scale 1 is
 * then decoded from the stream jpeg_ckpt.c makes for it (jd_resumed():
 * the file's headers and one made-up iMCU row, then the file's bytes from
 * the checkpoint on, read by a source manager over the two buffers), and
 * from the file's start when libjpeg refuses that stream. Before libjpeg
 * sees the file, jd_walk() checks that every marker segment up to the
 * first scan fits in the bytes that remain.
 * Reentrant: no global state.
 */
#include "augment/decode_internal.h"
#include "augment/jpeg_ckpt_internal.h"

#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include "common/common_internal.h"

#define SP_JPEG_MAX_SCANS 500

typedef struct sp_jpeg_ctx {
    struct jpeg_error_mgr jerr;        /* first: cinfo->err points here */
    struct jpeg_progress_mgr progress;
    struct jpeg_decompress_struct cinfo;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX + 64];
    int code;                          /* SP_E* for the longjmp'd failure */
    const char *path;
    int created;                       /* jpeg_create_decompress done */
    uint8_t *row;                      /* one scanline of libjpeg output */
    /* A resumed stream (jd_resumed()): libjpeg reads the head given to
     * jd_open(), then these bytes of the file, through src. */
    struct jpeg_source_mgr src;
    const uint8_t *tail;
    size_t tail_len;
} sp_jpeg_ctx;

static void jd_fail(j_common_ptr cinfo) {
    sp_jpeg_ctx *c = (sp_jpeg_ctx *)cinfo->err;
    char buf[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, buf);
    switch (cinfo->err->msg_code) {
    case JERR_OUT_OF_MEMORY: c->code = SP_ENOMEM; break;
    case JERR_NO_BACKING_STORE:  /* the max_memory_to_use cap */
        c->code = SP_ELIMIT;
        snprintf(buf, sizeof buf, "working memory above the limit of %ld bytes",
                 cinfo->mem->max_memory_to_use);
        break;
    default: c->code = SP_EFORMAT; break;
    }
    snprintf(c->msg, sizeof c->msg, "%s", buf);
    longjmp(c->jb, 1);
}

/* Every warning (level -1) is an error: a sample must be exact or refused
 * (docs/security.md, "Decoder warnings"). Trace messages (level >= 0) are
 * ignored. No warning is tolerated, not even JWRN_EXTRANEOUS_DATA ("N
 * extraneous bytes before marker"): after a bit error the entropy decoder
 * can lose sync, decode wrong coefficients from fewer bits and stop short
 * of the next marker, and that is how it shows. */
static void jd_emit(j_common_ptr cinfo, int level) {
    if (level < 0) jd_fail(cinfo);
}

static void jd_output(j_common_ptr cinfo) { (void)cinfo; /* never prints */ }

static void jd_progress(j_common_ptr cinfo) {
    if (!cinfo->is_decompressor) return;
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (d->input_scan_number > SP_JPEG_MAX_SCANS) {
        sp_jpeg_ctx *c = (sp_jpeg_ctx *)cinfo->err;
        snprintf(c->msg, sizeof c->msg, "more than %d scans", SP_JPEG_MAX_SCANS);
        c->code = SP_ELIMIT;
        longjmp(c->jb, 1);
    }
}

/* The marker segments from SOI to the first SOS, walked before libjpeg
 * sees the file: each declared length must fit in the bytes that remain
 * (an APPn claiming 64 KB at the end of a 300-byte file is named here,
 * with its offset, instead of surfacing as libjpeg's generic premature
 * end). Fill bytes (0xFF) before a marker are allowed, anything else
 * between segments is not (libjpeg would warn: extraneous data). What
 * follows the first SOS is entropy-coded and is libjpeg's to check. */
static int jd_walk(const uint8_t *buf, size_t len, const char *path, sp_error *err) {
    size_t pos = 2;   /* after SOI (sniffed by the caller) */
    for (;;) {
        if (pos >= len || buf[pos] != 0xFF) {
            if (pos >= len)
                return sp_error_set(err, SP_EFORMAT,
                                    "%s: JPEG: the file ends at byte %zu, before its first scan "
                                    "(truncated)", path, len);
            return sp_error_set(err, SP_EFORMAT,
                                "%s: JPEG: byte %zu: 0x%02x where a marker should begin", path,
                                pos, buf[pos]);
        }
        while (pos < len && buf[pos] == 0xFF) pos++;
        if (pos >= len) continue;   /* reported above */
        unsigned m = buf[pos++];
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD8)) continue;   /* TEM, RSTn, SOI: no length */
        if (m == 0xD9) return SP_OK;   /* EOI before any scan: libjpeg names that */
        if (len - pos < 2)
            return sp_error_set(err, SP_EFORMAT,
                                "%s: JPEG: marker 0xFF%02X at byte %zu has no length (truncated)",
                                path, m, pos - 2);
        size_t seg = ((size_t)buf[pos] << 8) | buf[pos + 1];
        if (seg < 2 || m == 0x00)
            return sp_error_set(err, SP_EFORMAT, "%s: JPEG: marker 0xFF%02X at byte %zu: invalid",
                                path, m, pos - 2);
        if (seg > len - pos)
            return sp_error_set(err, SP_EFORMAT,
                                "%s: JPEG: marker 0xFF%02X at byte %zu declares %zu bytes, the "
                                "file has %zu left (truncated)", path, m, pos - 2, seg,
                                len - pos);
        if (m == 0xDA) return SP_OK;   /* SOS: entropy-coded data follows */
        pos += seg;
    }
}

/* The source of a resumed stream: the head (set by jd_open()), then the
 * tail; past it, as jpeg_mem_src(), a warning (an error here) and an EOI. */
static void js_init(j_decompress_ptr ci) { (void)ci; }
static void js_term(j_decompress_ptr ci) { (void)ci; }

static boolean js_fill(j_decompress_ptr ci) {
    sp_jpeg_ctx *c = (sp_jpeg_ctx *)ci->err;
    static const JOCTET eoi[2] = {0xFF, JPEG_EOI};
    const uint8_t *t = c->tail;
    c->tail = NULL;
    if (t && c->tail_len) {
        c->src.next_input_byte = t;
        c->src.bytes_in_buffer = c->tail_len;
        return TRUE;
    }
    WARNMS(ci, JWRN_JPEG_EOF);
    c->src.next_input_byte = eoi;
    c->src.bytes_in_buffer = 2;
    return TRUE;
}

static void js_skip(j_decompress_ptr ci, long n) {
    sp_jpeg_ctx *c = (sp_jpeg_ctx *)ci->err;
    while (n > (long)c->src.bytes_in_buffer) {
        n -= (long)c->src.bytes_in_buffer;
        js_fill(ci);
    }
    if (n > 0) {
        c->src.next_input_byte += n;
        c->src.bytes_in_buffer -= (size_t)n;
    }
}

/* Create the decompressor, read the header, map the colour space and check
 * the limits. Runs under jd_guarded()'s setjmp. */
static int jd_open(sp_jpeg_ctx *c, const uint8_t *buf, size_t len,
                        const sp_decode_limits *lim, sp__pixfmt *fmt, sp_error *err) {
    struct jpeg_decompress_struct *ci = &c->cinfo;
    int rc = jd_walk(buf, len, c->path, err);
    if (rc != SP_OK) return rc;
    ci->err = jpeg_std_error(&c->jerr);
    c->jerr.error_exit = jd_fail;
    c->jerr.emit_message = jd_emit;
    c->jerr.output_message = jd_output;
    jpeg_create_decompress(ci);
    c->created = 1;
    c->progress.progress_monitor = jd_progress;
    ci->progress = &c->progress;
    uint64_t cap = lim->max_bytes > (uint64_t)LONG_MAX / 4 ? (uint64_t)LONG_MAX
                                                           : lim->max_bytes * 4;
    ci->mem->max_memory_to_use = (long)cap;
    if (len > ULONG_MAX)
        return sp_error_set(err, SP_ELIMIT, "%s: JPEG: file too large", c->path);
    if (c->tail) {   /* a resumed stream: the head, then the tail */
        c->src = (struct jpeg_source_mgr){buf, len, js_init, js_fill, js_skip,
                                          jpeg_resync_to_restart, js_term};
        ci->src = &c->src;
    } else {
        jpeg_mem_src(ci, buf, (unsigned long)len);
    }
    jpeg_read_header(ci, TRUE);

    switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE:
        ci->out_color_space = JCS_GRAYSCALE; *fmt = SP__PIX_GRAY; break;
    case JCS_YCbCr:
    case JCS_RGB:
        ci->out_color_space = JCS_RGB; *fmt = SP__PIX_RGB; break;
    case JCS_CMYK:
    case JCS_YCCK:
        ci->out_color_space = JCS_CMYK;
        *fmt = ci->saw_Adobe_marker ? SP__PIX_CMYK_INVERTED : SP__PIX_CMYK;
        break;
    default:
        return sp_error_set(err, SP_EFORMAT,
                            "%s: JPEG: unsupported colour space (%d components)", c->path,
                            ci->num_components);
    }
    return sp__decode_check_limits(c->path, "JPEG", ci->image_width, ci->image_height,
                                   lim, err);
}

/* libjpeg-turbo 2.1 sizes a cropped component as if its IDCT were scaled
 * like the luma's (jpeg_crop_scanline computes downsampled_width without
 * the component's DCT scaled size; fixed in 3.x). At scales 1/2 and 1/4 the
 * library may IDCT-scale a chroma component differently, and when that
 * component is still upsampled (fancy upsampling reads downsampled_width),
 * a cropped decode is wrong (e.g. 2x4 or 4:1:0 files at scale 1/2). Crop
 * only when every component either shares the minimum scaled DCT size or
 * needs no upsampling; otherwise decode full rows and copy out. */
static int jd_crop_is_exact(j_decompress_ptr ci) {
#if JPEG_LIB_VERSION >= 70
    int m = ci->min_DCT_h_scaled_size;
#else
    int m = ci->min_DCT_scaled_size;
#endif
    for (int i = 0; i < ci->num_components; i++) {
        const jpeg_component_info *cp = &ci->comp_info[i];
#if JPEG_LIB_VERSION >= 70
        int sz = cp->DCT_h_scaled_size;
#else
        int sz = cp->DCT_scaled_size;
#endif
        if (sz == m) continue;
        if (cp->h_samp_factor * sz == ci->max_h_samp_factor * m &&
            cp->v_samp_factor * sz == ci->max_v_samp_factor * m)
            continue;  /* full-size component: no upsampling */
        return 0;
    }
    return 1;
}

/* libjpeg-turbo 2.1's jpeg_skip_scanlines() after rows were read loses
 * entropy sync when a component's IDCT is scaled unlike the luma's (a 2x4
 * file at scale 1/2: "premature end of data segment" on a valid file).
 * Skip only when every component has the minimum scaled DCT size in both
 * directions; otherwise the rows after the region are decoded and dropped. */
static int jd_skip_is_exact(j_decompress_ptr ci) {
    for (int i = 0; i < ci->num_components; i++) {
        const jpeg_component_info *cp = &ci->comp_info[i];
#if JPEG_LIB_VERSION >= 70
        if (cp->DCT_h_scaled_size != ci->min_DCT_h_scaled_size ||
            cp->DCT_v_scaled_size != ci->min_DCT_v_scaled_size)
            return 0;
#else
        if (cp->DCT_scaled_size != ci->min_DCT_scaled_size) return 0;
#endif
    }
    return 1;
}

/* After the region's last row: skip the rows below it and read to EOI, so
 * a warning anywhere in the file fails every request (the policy must not
 * depend on which rows the crop needs). The last row is read, not skipped:
 * libjpeg-turbo's jpeg_skip_scanlines() to the bottom of the image returns
 * without decoding anything. c->row holds one libjpeg row. */
static int jd_finish(sp_jpeg_ctx *c, const sp__window *win, sp_error *err) {
    struct jpeg_decompress_struct *ci = &c->cinfo;
    JDIMENSION end = (JDIMENSION)win->scaled_h;
    if (ci->output_scanline + 1 < end && jd_skip_is_exact(ci)) {
        JDIMENSION n = end - 1 - ci->output_scanline;
        if (jpeg_skip_scanlines(ci, n) != n)
            return sp_error_set(err, SP_EFORMAT, "%s: JPEG: rows after %d could not be skipped",
                                c->path, win->y1);
    }
    while (ci->output_scanline < end) {
        JSAMPROW r = c->row;
        if (jpeg_read_scanlines(ci, &r, 1) != 1)
            return sp_error_set(err, SP_EFORMAT, "%s: JPEG: row %u could not be read", c->path,
                                ci->output_scanline);
    }
    jpeg_finish_decompress(ci);
    return SP_OK;
}

/* The DCT scale 1/req->scale_denom, with the fixed decoder settings; the
 * scaled size must be the window's. */
static int jd_scale(sp_jpeg_ctx *c, const sp_decode_req *req, const sp__window *win,
                    sp_error *err) {
    struct jpeg_decompress_struct *ci = &c->cinfo;
    ci->dct_method = JDCT_ISLOW;
    ci->do_fancy_upsampling = TRUE;
    ci->do_block_smoothing = FALSE;
    ci->scale_num = 1;
    ci->scale_denom = (unsigned)req->scale_denom;
    jpeg_calc_output_dimensions(ci);
    if ((int)ci->output_width != win->scaled_w || (int)ci->output_height != win->scaled_h)
        return sp_error_set(err, SP_EFORMAT,
                            "%s: JPEG: libjpeg scales %ux%u to %ux%u, expected %dx%d", c->path,
                            ci->image_width, ci->image_height, ci->output_width,
                            ci->output_height, win->scaled_w, win->scaled_h);
    return SP_OK;
}

/* The columns libjpeg decodes (after jpeg_start_decompress): the window's
 * with the margins of HOW IT WORKS; *row_x0 is the scaled column of the row
 * buffer's first pixel. */
static int jd_columns(sp_jpeg_ctx *c, const sp__window *win, JDIMENSION *row_x0,
                      sp_error *err) {
    struct jpeg_decompress_struct *ci = &c->cinfo;
    /* Columns: one pixel of margin each side keeps the crop's edge pixels
     * (simplified upsampling) out of the output; see HOW IT WORKS. */
    JDIMENSION cx0 = (JDIMENSION)(win->x0 > 0 ? win->x0 - 1 : 0);
    JDIMENSION cx1 = (JDIMENSION)(win->x1 < win->scaled_w ? win->x1 + 1 : win->scaled_w);
    /* ... and a minimum width: a crop whose chroma is narrower than 2
     * samples makes libjpeg switch to plain (box) upsampling. */
    JDIMENSION minw = 4u * (JDIMENSION)ci->max_h_samp_factor;
    if (cx1 - cx0 < minw) {
        cx1 = cx0 + minw < (JDIMENSION)win->scaled_w ? cx0 + minw : (JDIMENSION)win->scaled_w;
        if (cx1 - cx0 < minw) cx0 = cx1 > minw ? cx1 - minw : 0;
    }
    *row_x0 = 0;
    if ((cx0 != 0 || cx1 != (JDIMENSION)win->scaled_w) && jd_crop_is_exact(ci)) {
        JDIMENSION xoff = cx0, cw = cx1 - cx0;
        jpeg_crop_scanline(ci, &xoff, &cw);
        *row_x0 = xoff;
    }
    if ((JDIMENSION)win->x0 < *row_x0 || (JDIMENSION)win->x1 > *row_x0 + ci->output_width)
        return sp_error_set(err, SP_EFORMAT, "%s: JPEG: crop to columns %d..%d failed",
                            c->path, win->x0, win->x1);
    return SP_OK;
}

/* SP__DECODE_WIDE: the image is the window [x0 - row_x0, ...) of libjpeg's
 * rows laid end to end (stride = one libjpeg row): row y is written at
 * data + y * stride - off, which keeps the previous rows' pixels
 * (off + width * comps <= stride); row 0 (when off > 0) goes through
 * c->row. */
static int jd_read_wide(sp_jpeg_ctx *c, const sp__window *win, JDIMENSION row_x0,
                        size_t comps, int channels, sp_image *out, sp_error *err) {
    struct jpeg_decompress_struct *ci = &c->cinfo;
    size_t stride = (size_t)ci->output_width * comps;
    size_t off = (size_t)((JDIMENSION)win->x0 - row_x0) * comps;
    int w = win->x1 - win->x0, h = win->y1 - win->y0;
    out->data = malloc(stride * (size_t)h);
    if (!out->data)
        return sp_error_set(err, SP_ENOMEM, "%s: JPEG: cannot allocate the %dx%d output",
                            c->path, w, h);
    out->width = w;
    out->height = h;
    out->channels = channels;
    out->stride = stride;
    for (int y = 0; y < h;) {
        JSAMPROW rows[16];
        int n = h - y < 16 ? h - y : 16;
        for (int i = 0; i < n; i++)
            rows[i] = (y + i == 0 && off) ? c->row
                                          : out->data + (size_t)(y + i) * stride - off;
        JDIMENSION got = jpeg_read_scanlines(ci, rows, (JDIMENSION)n);
        if (got == 0)
            return sp_error_set(err, SP_EFORMAT, "%s: JPEG: row %d could not be read",
                                c->path, win->y0 + y);
        if (y == 0 && off) memcpy(out->data, c->row + off, (size_t)w * comps);
        y += (int)got;
    }
    return SP_OK;
}

/* The window's rows into the allocated output: straight from libjpeg when
 * its rows are the output's (direct), else through c->row, converted. */
static int jd_read_rows(sp_jpeg_ctx *c, const sp__window *win, JDIMENSION row_x0,
                        size_t comps, sp__pixfmt fmt, int same, sp_image *out,
                        sp_error *err) {
    struct jpeg_decompress_struct *ci = &c->cinfo;
    int direct = row_x0 == (JDIMENSION)win->x0 && ci->output_width == (JDIMENSION)out->width &&
                 same;
    if (direct) {  /* libjpeg writes straight into the output, 16 rows per call */
        for (int y = 0; y < out->height;) {
            JSAMPROW rows[16];
            int n = out->height - y < 16 ? out->height - y : 16;
            for (int i = 0; i < n; i++) rows[i] = out->data + (size_t)(y + i) * out->stride;
            JDIMENSION got = jpeg_read_scanlines(ci, rows, (JDIMENSION)n);
            if (got == 0)
                return sp_error_set(err, SP_EFORMAT, "%s: JPEG: row %d could not be read",
                                    c->path, win->y0 + y);
            y += (int)got;
        }
    } else {
        const uint8_t *src = c->row + (size_t)((JDIMENSION)win->x0 - row_x0) * comps;
        for (int y = 0; y < out->height; y++) {
            JSAMPROW r = c->row;
            if (jpeg_read_scanlines(ci, &r, 1) != 1)
                return sp_error_set(err, SP_EFORMAT, "%s: JPEG: row %d could not be read",
                                    c->path, win->y0 + y);
            sp__convert_row(src, fmt, out->data + (size_t)y * out->stride, out->channels,
                            (size_t)out->width);
        }
    }
    return SP_OK;
}

/* Decode the request's window (inside jd_guarded()'s setjmp). */
static int jd_body(sp_jpeg_ctx *c, const uint8_t *buf, size_t len,
                        const sp_decode_req *req, const sp_decode_limits *lim, int flags,
                        sp_image *out, sp_error *err) {
    sp__pixfmt fmt = SP__PIX_RGB;
    int rc = jd_open(c, buf, len, lim, &fmt, err);
    if (rc != SP_OK) return rc;
    struct jpeg_decompress_struct *ci = &c->cinfo;

    sp__window win;
    rc = sp__decode_window(c->path, "JPEG", (int)ci->image_width, (int)ci->image_height,
                           req, &win, err);
    if (rc != SP_OK) return rc;
    rc = jd_scale(c, req, &win, err);
    if (rc != SP_OK) return rc;

    /* Same layout as the output: libjpeg can write into it (direct). */
    int same = (fmt == SP__PIX_RGB && req->channels == 3) ||
               (fmt == SP__PIX_GRAY && req->channels == 1);
    int wide = same && (flags & SP__DECODE_WIDE);
    if (!wide) {
        rc = sp__image_alloc(out, win.x1 - win.x0, win.y1 - win.y0, req->channels);
        if (rc != SP_OK)
            return sp_error_set(err, rc, "%s: JPEG: cannot allocate the %dx%d output", c->path,
                                win.x1 - win.x0, win.y1 - win.y0);
    }

    jpeg_start_decompress(ci);
    JDIMENSION row_x0;
    rc = jd_columns(c, &win, &row_x0, err);
    if (rc != SP_OK) return rc;

    size_t comps = (size_t)ci->output_components;
    if ((int)comps != sp__pixfmt_bytes(fmt))
        return sp_error_set(err, SP_EFORMAT, "%s: JPEG: unexpected %d output components",
                            c->path, ci->output_components);
    c->row = malloc((size_t)ci->output_width * comps);
    if (!c->row) return sp_error_set(err, SP_ENOMEM, "%s: JPEG: out of memory", c->path);

    if (win.y0 > 0) {
        JDIMENSION skipped = jpeg_skip_scanlines(ci, (JDIMENSION)win.y0);
        if (skipped != (JDIMENSION)win.y0)
            return sp_error_set(err, SP_EFORMAT, "%s: JPEG: skipped %u of %d rows", c->path,
                                skipped, win.y0);
    }
    rc = wide ? jd_read_wide(c, &win, row_x0, comps, req->channels, out, err)
              : jd_read_rows(c, &win, row_x0, comps, fmt, same, out, err);
    if (rc != SP_OK || (flags & SP__DECODE_VALIDATED)) return rc;
    return jd_finish(c, &win, err);
}

static int jd_guarded(sp_jpeg_ctx *c, const uint8_t *buf, size_t len,
                           const sp_decode_req *req, const sp_decode_limits *lim, int flags,
                           sp_image_info *info, sp_image *out, sp_error *err) {
    if (setjmp(c->jb))
        return sp_error_set(err, c->code, "%s: JPEG: %s", c->path, c->msg);
    if (out) return jd_body(c, buf, len, req, lim, flags, out, err);
    sp__pixfmt fmt = SP__PIX_RGB;
    int rc = jd_open(c, buf, len, lim, &fmt, err);
    if (rc != SP_OK) return rc;
    info->format = SP_FORMAT_JPEG;
    info->width = (int)c->cinfo.image_width;
    info->height = (int)c->cinfo.image_height;
    info->channels = (fmt == SP__PIX_GRAY) ? 1 : 3;
    return SP_OK;
}

/* probe (out == NULL) or decode, with cleanup on every path; tail (NULL:
 * none): the file's bytes after a resumed stream's head, buf. */
static int jd_run(const uint8_t *buf, size_t len, const char *path,
                       const sp_decode_req *req, const sp_decode_limits *lim, int flags,
                       sp_image_info *info, sp_image *out, sp_error *err,
                       const uint8_t *tail, size_t tail_len) {
    sp_jpeg_ctx *c = calloc(1, sizeof *c);
    if (!c) return sp_error_set(err, SP_ENOMEM, "%s: JPEG: out of memory", path);
    c->path = path;
    c->tail = tail;
    c->tail_len = tail_len;
    int rc = jd_guarded(c, buf, len, req, lim, flags, info, out, err);
    if (c->created) jpeg_destroy_decompress(&c->cinfo);
    free(c->row);
    free(c);
    if (rc != SP_OK && out) sp_image_free(out);
    return rc;
}

/* A validated file's crop from its last checkpoint above (jpeg_ckpt.c):
 * the rows of the resumed stream, whose row 0 is the file's rows_above.
 * 1 (*out filled: the pixels of a decode from the top), 0 where no
 * checkpoint helps or libjpeg refused the stream (a table that is not
 * these bytes': the caller decodes from the top), or SP_ENOMEM. */
static int jd_resumed(const uint8_t *buf, size_t len, const char *path,
                      const sp_decode_req *req, const sp_decode_limits *lim,
                      const sp__decode_hint *hint, sp_image *out, sp_error *err) {
    if (!hint || !hint->ckpt || !(hint->flags & SP__DECODE_VALIDATED) ||
        req->scale_denom != 1 || req->w <= 0 || req->h <= 0 || req->y < 0 ||
        req->h > INT_MAX - req->y)
        return 0;
    sp__jpeg_resume rs;
    int rc = sp__jpeg_ckpt_resume(buf, len, hint->ckpt, hint->ckpt_len, req->y, req->y + req->h,
                                  &rs);
    if (rc != 1)
        return rc == SP_ENOMEM ? sp_error_set(err, rc, "%s: JPEG: out of memory", path) : rc;
    sp_decode_req rq = *req;
    rq.y -= rs.rows_above;
    rc = jd_run(rs.head, rs.head_len, path, &rq, lim, hint->flags, NULL, out, err,
                buf + rs.tail, len - rs.tail);
    free(rs.head);
    if (rc == SP_ENOMEM) return rc;
    return rc == SP_OK;
}

int sp__jpeg_probe(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_limits *lim, sp_image_info *info, sp_error *err) {
    return jd_run(buf, len, path, NULL, lim, 0, info, NULL, err, NULL, 0);
}

int sp__jpeg_decode(const uint8_t *buf, size_t len, const char *path,
                    const sp_decode_req *req, const sp_decode_limits *lim,
                    const sp__decode_hint *hint, sp_image *out, sp_error *err) {
    int rc = jd_resumed(buf, len, path, req, lim, hint, out, err);
    if (rc != 0) return rc == 1 ? SP_OK : rc;
    return jd_run(buf, len, path, req, lim, hint ? hint->flags : 0, NULL, out, err, NULL, 0);
}
