/* dataset_coco_stream.c - a COCO instances JSON read one element at a time
 * (dataset_coco_stream.h states what and why).
 *
 * HOW IT WORKS: a window (rd) over the file, read with pread, slides
 * forward; the skeleton (the top-level object, its keys, the brackets and
 * commas of "images" and "annotations") is read here byte by byte, and
 * each element is first spanned (brackets counted, strings skipped) so it
 * lies whole in the window, then tokenized alone by sp__json_parse(),
 * which checks its grammar exactly. The first pass hashes every byte as
 * it is read and keeps the offsets of the two arrays; the second reads
 * them again from those offsets. A file whose size or modification time
 * changed between the passes is refused. Called by dataset_coco.c; calls
 * common/ only.
 */
#include "dataset/dataset_coco_stream.h"
#include "common/fileio_internal.h"
#include "common/hash_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WIN_MIN ((size_t)1 << 20)
#define ELEM_DEPTH 14        /* 16 less the top-level object and the array */
#define PEEK_EOF 256
#define PEEK_ERR 257

typedef struct rd {
    int fd;
    const char *path;
    char *b;
    size_t cap, lo, hi;   /* b[lo, hi) are valid; b[0] is at file offset base */
    uint64_t base, size;
    sp__hash *h;          /* the first pass: every byte as read */
    uint64_t *elem_at;    /* the second pass: each element's offset, for the callback */
    const sp_coco_limits *lim;
    sp_error *err;
} rd;

/* The array of a key (images, annotations) as the first pass found it. */
typedef struct found { int seen; uint64_t off; size_t n; } found;

static uint64_t at(const rd *r, size_t k) { return r->base + r->lo + k; }

static int syntax(rd *r, size_t k, const char *why) {
    return sp_error_set(r->err, SP_EFORMAT, "%s: offset %llu: %s", r->path,
                        (unsigned long long)at(r, k), why);
}

/* Read until b[lo, lo + need) is valid: 1, 0 (the file ends first), or an
 * error. The window grows to hold one element, at most max_element bytes. */
static int fill(rd *r, size_t need) {
    if (r->lo) {
        memmove(r->b, r->b + r->lo, r->hi - r->lo);
        r->base += r->lo;
        r->hi -= r->lo;
        r->lo = 0;
    }
    if (need > r->cap) {
        if (need > r->lim->max_element + 1)
            return sp_error_set(r->err, SP_ELIMIT, "%s: offset %llu: a value longer than %llu "
                                "bytes", r->path, (unsigned long long)r->base,
                                (unsigned long long)r->lim->max_element);
        size_t cap = r->cap * 2 > need ? r->cap * 2 : need;
        if (cap > r->lim->max_element + 1) cap = (size_t)r->lim->max_element + 1;
        char *b = realloc(r->b, cap);
        if (!b) return sp_error_set(r->err, SP_ENOMEM, "%s: out of memory", r->path);
        r->b = b;
        r->cap = cap;
    }
    while (r->hi < need) {
        uint64_t off = r->base + r->hi;
        if (off >= r->size) return 0;
        size_t want = r->cap - r->hi;
        if (want > r->size - off) want = (size_t)(r->size - off);
        ssize_t n = pread(r->fd, r->b + r->hi, want, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sp_error_set(r->err, SP_EIO, "%s: read: %s", r->path, strerror(errno));
        if (n == 0) return sp_error_set(r->err, SP_EIO, "%s: the file became shorter while read",
                                        r->path);
        if (r->h) sp__hash_bytes(r->h, r->b + r->hi, (size_t)n);
        r->hi += (size_t)n;
    }
    return 1;
}

/* The byte at lo + k, PEEK_EOF, or PEEK_ERR (r->err set). */
static int peek(rd *r, size_t k) {
    if (r->lo + k < r->hi) return (unsigned char)r->b[r->lo + k];
    int rc = fill(r, k + 1);
    return rc == 1 ? (unsigned char)r->b[r->lo + k] : rc == 0 ? PEEK_EOF : PEEK_ERR;
}

static int ws(rd *r) {
    for (;;) {
        int c = peek(r, 0);
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return c;
        r->lo++;
    }
}

static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int bracket_or_quote(int c) {
    return c == '"' || c == '{' || c == '[' || c == '}' || c == ']';
}

/* One byte of span()'s scan: 1 when the value ends before byte k (*len
 * set; k + 1 for a closing bracket or quote), else 0. */
static int span_byte(int c, size_t k, int *depth, int *instr, int *esc, size_t *len) {
    if (*esc) {
        *esc = 0;
    } else if (*instr) {
        if (c == '\\') {
            *esc = 1;
        } else if (c == '"') {
            *instr = 0;
            if (*depth == 0) return *len = k + 1, 1;
        }
    } else if (c == '"') {
        *instr = 1;
    } else if (c == '{' || c == '[') {
        ++*depth;
    } else if (c == '}' || c == ']') {
        if (*depth == 0) return *len = k, 1;
        if (--*depth == 0) return *len = k + 1, 1;
    } else if (*depth == 0 && (c == ',' || c == ':' || is_ws(c))) {
        return *len = k, 1;
    }
    return 0;
}

/* *len: the bytes of the value that starts at lo (the grammar is checked
 * after, by the tokenizer: this only finds where it ends), at most
 * max_element. */
static int span(rd *r, size_t *len) {
    size_t k = 0, cap = r->lim->max_element;
    int depth = 0, instr = 0, esc = 0;
    for (;;) {
        int c = peek(r, k);   /* refills the window past k */
        if (c == PEEK_ERR) return r->err->code;
        if (c == PEEK_EOF) {
            if (depth || instr || esc) return syntax(r, k, "unexpected end of file");
            return *len = k, SP_OK;
        }
        const unsigned char *p = (const unsigned char *)r->b + r->lo;
        size_t end = r->hi - r->lo;
        if (end > cap + 1) end = cap + 1;
        for (; k < end; k++) {
            if (depth && !instr && !esc && !bracket_or_quote(p[k])) continue;   /* hot */
            if (span_byte(p[k], k, &depth, &instr, &esc, len)) return SP_OK;
            if (depth > ELEM_DEPTH + 1) return syntax(r, k, "nested too deeply");
        }
        if (k > cap)
            return sp_error_set(r->err, SP_ELIMIT, "%s: offset %llu: a value longer than %llu "
                                "bytes", r->path, (unsigned long long)at(r, 0),
                                (unsigned long long)cap);
    }
}

/* Tokenize the len bytes at lo; an error names the value's offset. */
static int elem(rd *r, size_t len, sp__json *j) {
    int rc = sp__json_parse(j, r->b + r->lo, len, ELEM_DEPTH, r->lim->max_tokens, r->path, r->err);
    if (rc == SP_OK) return rc;
    char what[SP_ERROR_MSG_MAX];
    snprintf(what, sizeof what, "%s: the value at offset %llu", r->path,
             (unsigned long long)at(r, 0));
    sp__json_free(j);
    return sp__json_parse(j, r->b + r->lo, len, ELEM_DEPTH, r->lim->max_tokens, what, r->err);
}

/* The array at lo ('['): each element tokenized, handed to cb (NULL: only
 * checked), counted in *n. */
static int walk_array(rd *r, int (*cb)(void *, const sp__json *, size_t), void *arg, size_t *n) {
    *n = 0;
    int c = peek(r, 0);
    if (c != '[') return c == PEEK_ERR ? r->err->code : syntax(r, 0, "expected '['");
    r->lo++;
    c = ws(r);
    if (c == ']') return r->lo++, SP_OK;
    for (;;) {
        if (c == PEEK_ERR) return r->err->code;
        size_t len;
        sp__json j;
        int rc = span(r, &len);
        if (rc) return rc;
        rc = elem(r, len, &j);
        if (!rc && cb && r->elem_at) *r->elem_at = at(r, 0);
        if (!rc && cb) rc = cb(arg, &j, *n);
        sp__json_free(&j);
        if (rc) return rc;
        r->lo += len;
        ++*n;
        c = ws(r);
        if (c == ',') {
            r->lo++;
            c = ws(r);
            continue;
        }
        if (c == ']') return r->lo++, SP_OK;
        if (c == PEEK_ERR) return r->err->code;
        return syntax(r, 0, c == PEEK_EOF ? "unexpected end of file" : "expected ',' or ']'");
    }
}

/* Key at lo (a string): 0 "images", 1 "annotations", -1 another; checked. */
static int key(rd *r, int *which) {
    size_t len;
    sp__json j;
    int rc = span(r, &len);
    if (rc) return rc;
    if ((rc = elem(r, len, &j)) != 0) {
        sp__json_free(&j);
        return rc;
    }
    int ok = j.t[0].kind == SP__J_STR;
    *which = sp__json_streq(&j, 0, "images") ? 0 : sp__json_streq(&j, 0, "annotations") ? 1 : -1;
    sp__json_free(&j);
    if (!ok) return syntax(r, 0, "expected a key (a string)");
    r->lo += len;
    return SP_OK;
}

/* One member's value at lo: the first array of images or annotations is
 * walked (checked, counted, its offset kept); anything else is checked. */
static int member(rd *r, int which, found *f) {
    int c = peek(r, 0);
    if (c == PEEK_ERR) return r->err->code;
    if (which >= 0 && !f[which].seen) {
        f[which].seen = c == '[' ? 1 : 2;
        if (c == '[') {
            f[which].off = at(r, 0);
            return walk_array(r, NULL, NULL, &f[which].n);
        }
    }
    size_t len;
    sp__json j = {0};
    int rc = span(r, &len);
    if (!rc) rc = elem(r, len, &j);
    sp__json_free(&j);
    if (!rc) r->lo += len;
    return rc;
}

/* The first pass: the whole file's grammar, its hash, the arrays found. */
static int pass1(rd *r, found *f) {
    int c = ws(r);
    if (c == PEEK_ERR) return r->err->code;
    if (c != '{') return syntax(r, 0, c == PEEK_EOF ? "no JSON value" : "not a JSON object");
    r->lo++;
    c = ws(r);
    if (c == '}') r->lo++;
    while (c != '}') {
        int which, rc;
        if (c == PEEK_ERR) return r->err->code;
        if (c != '"') return syntax(r, 0, c == PEEK_EOF ? "unexpected end of file" :
                                    "expected a key (a string)");
        if ((rc = key(r, &which)) != 0) return rc;
        if ((c = ws(r)) != ':')
            return c == PEEK_ERR ? r->err->code : syntax(r, 0, "expected ':'");
        r->lo++;
        ws(r);
        if ((rc = member(r, which, f)) != 0) return rc;
        c = ws(r);
        if (c == ',') {
            r->lo++;
            c = ws(r);
            if (c == '}') return syntax(r, 0, "expected a key (a string)");
        } else if (c == '}') {
            r->lo++;
        } else {
            return c == PEEK_ERR ? r->err->code :
                   syntax(r, 0, c == PEEK_EOF ? "unexpected end of file" : "expected ',' or '}'");
        }
    }
    c = ws(r);
    if (c == PEEK_ERR) return r->err->code;
    return c == PEEK_EOF ? SP_OK : syntax(r, 0, "trailing characters after the value");
}

/* The second pass over one array (found f), each element handed to cb. */
static int pass2(rd *r, const found *f, const char *name,
                 int (*cb)(void *, const sp__json *, size_t), void *arg) {
    if (f->seen != 1)
        return sp_error_set(r->err, SP_EFORMAT, "%s: \"%s\" must be an array", r->path, name);
    r->base = f->off;
    r->lo = r->hi = 0;
    size_t n;
    int rc = walk_array(r, cb, arg, &n);
    if (!rc && n != f->n)
        rc = sp_error_set(r->err, SP_EIO, "%s: the file changed while read", r->path);
    return rc;
}

int sp__coco_stream(const char *path, const sp_coco_limits *lim, sp__coco_walk *w,
                    sp_digest *fp, sp_error *err) {
    struct stat st, st2;
    int fd = sp__open_regular(AT_FDCWD, path, path, 0, lim->max_bytes, &st, err);
    if (fd == SP_ELIMIT)
        return sp_error_set(err, SP_ELIMIT, "%s: annotations larger than %llu bytes", path,
                            (unsigned long long)lim->max_bytes);
    if (fd < 0) return fd;
    sp__hash h;
    sp__hash_init(&h);
    sp__hash_str(&h, "seedpipe-coco-v1");
    rd r = {fd, path, malloc(WIN_MIN), WIN_MIN, 0, 0, 0, (uint64_t)st.st_size, &h, &w->at, lim,
            err};
    found f[2];
    memset(f, 0, sizeof f);
    int rc = r.b ? pass1(&r, f) : sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    r.h = NULL;
    if (!rc) {
        *fp = sp__hash_digest(&h);
        rc = w->begin(w->arg, f[0].seen == 1 ? f[0].n : 0, f[1].seen == 1 ? f[1].n : 0);
    }
    if (!rc) rc = pass2(&r, &f[0], "images", w->image, w->arg);
    if (!rc) rc = w->images_done(w->arg);
    if (!rc) rc = pass2(&r, &f[1], "annotations", w->ann, w->arg);
    if (!rc && (fstat(fd, &st2) != 0 || st2.st_size != st.st_size ||
                st2.st_mtim.tv_sec != st.st_mtim.tv_sec ||
                st2.st_mtim.tv_nsec != st.st_mtim.tv_nsec))
        rc = sp_error_set(err, SP_EIO, "%s: the file changed while read", path);
    free(r.b);
    close(fd);
    return rc;
}
