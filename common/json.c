/* json.c - a small strict JSON tokenizer (common/json_internal.h).
 *
 * Recursive descent over RFC 8259 with a depth limit (the recursion depth
 * is the nesting depth, bounded by max_depth), a token-count limit and
 * size_t arithmetic that never walks past `len`. Used for loader states
 * (state.c) and manifests (manifest.c); both are inputs from elsewhere, so
 * every malformed byte is an SP_EFORMAT error with its offset.
 */
#include "common/json_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct parser {
    sp__json *j;
    size_t pos;
    int max_depth;
    size_t max_tokens;
    const char *what;
    sp_error *err;
} parser;

static int fail(parser *p, const char *why) {
    return sp_error_set(p->err, SP_EFORMAT, "%s: offset %zu: %s", p->what, p->pos, why);
}

static void skip_ws(parser *p) {
    while (p->pos < p->j->len) {
        char c = p->j->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static long new_tok(parser *p, int kind) {
    sp__json *j = p->j;
    if (j->n >= p->max_tokens) {
        sp_error_set(p->err, SP_ELIMIT, "%s: more than %zu JSON values", p->what, p->max_tokens);
        return -1;
    }
    if (j->n == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 64;
        if (cap > p->max_tokens) cap = p->max_tokens;
        sp__jtok *t = realloc(j->t, cap * sizeof *t);
        if (!t) {
            sp_error_set(p->err, SP_ENOMEM, "%s: out of memory", p->what);
            return -1;
        }
        j->t = t;
        j->cap = cap;
    }
    sp__jtok *t = &j->t[j->n];
    t->kind = kind;
    t->start = p->pos;
    t->end = p->pos;
    t->size = 0;
    t->next = j->n + 1;
    return (long)j->n++;
}

static int parse_value(parser *p, int depth);

static int parse_string(parser *p) {
    /* p->pos at the opening quote */
    long k = new_tok(p, SP__J_STR);
    if (k < 0) return p->err ? p->err->code : SP_ELIMIT;
    const char *s = p->j->s;
    size_t len = p->j->len;
    p->pos++;
    p->j->t[k].start = p->pos;
    while (p->pos < len) {
        unsigned char c = (unsigned char)s[p->pos];
        if (c == '"') {
            p->j->t[k].end = p->pos;
            p->pos++;
            return SP_OK;
        }
        if (c < 0x20) return fail(p, "control character in a string");
        if (c == '\\') {
            if (p->pos + 1 >= len) break;
            char e = s[p->pos + 1];
            if (e == 'u') {
                if (p->pos + 6 > len) break;
                for (int i = 2; i < 6; i++) {
                    char h = s[p->pos + (size_t)i];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
                        return fail(p, "bad \\u escape");
                }
                p->pos += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == '\0') return fail(p, "bad escape");
            p->pos += 2;
            continue;
        }
        p->pos++;
    }
    return fail(p, "unterminated string");
}

static int parse_number(parser *p) {
    long k = new_tok(p, SP__J_NUM);
    if (k < 0) return p->err ? p->err->code : SP_ELIMIT;
    const char *s = p->j->s;
    size_t len = p->j->len, i = p->pos;
    if (i < len && s[i] == '-') i++;
    if (i >= len) return fail(p, "bad number");
    if (s[i] == '0') i++;
    else if (s[i] >= '1' && s[i] <= '9')
        while (i < len && s[i] >= '0' && s[i] <= '9') i++;
    else return fail(p, "bad number");
    if (i < len && s[i] == '.') {
        i++;
        if (i >= len || s[i] < '0' || s[i] > '9') return fail(p, "bad number");
        while (i < len && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= len || s[i] < '0' || s[i] > '9') return fail(p, "bad number");
        while (i < len && s[i] >= '0' && s[i] <= '9') i++;
    }
    p->j->t[k].end = i;
    p->pos = i;
    return SP_OK;
}

static int parse_lit(parser *p, const char *lit, int kind) {
    size_t n = strlen(lit);
    if (p->j->len - p->pos < n || memcmp(p->j->s + p->pos, lit, n) != 0)
        return fail(p, "unexpected character");
    long k = new_tok(p, kind);
    if (k < 0) return p->err ? p->err->code : SP_ELIMIT;
    p->pos += n;
    p->j->t[k].end = p->pos;
    return SP_OK;
}

static int parse_container(parser *p, int depth, int is_obj) {
    if (depth >= p->max_depth) return fail(p, "nested too deeply");
    long k = new_tok(p, is_obj ? SP__J_OBJ : SP__J_ARR);
    if (k < 0) return p->err ? p->err->code : SP_ELIMIT;
    p->pos++;
    skip_ws(p);
    size_t count = 0;
    if (p->pos < p->j->len && p->j->s[p->pos] == (is_obj ? '}' : ']')) {
        p->pos++;
    } else {
        for (;;) {
            skip_ws(p);
            if (is_obj) {
                if (p->pos >= p->j->len || p->j->s[p->pos] != '"') return fail(p, "expected a key");
                int rc = parse_string(p);
                if (rc != 0) return rc;
                skip_ws(p);
                if (p->pos >= p->j->len || p->j->s[p->pos] != ':') return fail(p, "expected ':'");
                p->pos++;
            }
            int rc = parse_value(p, depth + 1);
            if (rc != 0) return rc;
            count++;
            skip_ws(p);
            if (p->pos >= p->j->len) return fail(p, "unterminated object or array");
            char c = p->j->s[p->pos];
            if (c == ',') {
                p->pos++;
                continue;
            }
            if (c == (is_obj ? '}' : ']')) {
                p->pos++;
                break;
            }
            return fail(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    p->j->t[k].size = count;
    p->j->t[k].end = p->pos;
    p->j->t[k].next = p->j->n;
    return SP_OK;
}

static int parse_value(parser *p, int depth) {
    skip_ws(p);
    if (p->pos >= p->j->len) return fail(p, "unexpected end of input");
    char c = p->j->s[p->pos];
    switch (c) {
    case '{': return parse_container(p, depth, 1);
    case '[': return parse_container(p, depth, 0);
    case '"': return parse_string(p);
    case 't': return parse_lit(p, "true", SP__J_TRUE);
    case 'f': return parse_lit(p, "false", SP__J_FALSE);
    case 'n': return parse_lit(p, "null", SP__J_NULL);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p);
        return fail(p, "unexpected character");
    }
}

int sp__json_parse(sp__json *j, const char *s, size_t len, int max_depth, size_t max_tokens,
                   const char *what, sp_error *err) {
    memset(j, 0, sizeof *j);
    j->s = s;
    j->len = len;
    parser p = {j, 0, max_depth, max_tokens ? max_tokens : 1, what ? what : "json", err};
    int rc = parse_value(&p, 0);
    if (rc != 0) return rc;
    skip_ws(&p);
    if (p.pos != len) return fail(&p, "trailing characters after the value");
    return SP_OK;
}

void sp__json_free(sp__json *j) {
    if (!j) return;
    free(j->t);
    memset(j, 0, sizeof *j);
}

long sp__json_get(const sp__json *j, size_t obj, const char *key) {
    if (obj >= j->n || j->t[obj].kind != SP__J_OBJ) return -1;
    size_t k = obj + 1;
    for (size_t i = 0; i < j->t[obj].size; i++) {
        size_t v = k + 1;
        if (v >= j->n) return -1;
        if (sp__json_streq(j, (long)k, key)) return (long)v;
        k = j->t[v].next;
    }
    return -1;
}

long sp__json_at(const sp__json *j, size_t arr, size_t i) {
    if (arr >= j->n || j->t[arr].kind != SP__J_ARR || i >= j->t[arr].size) return -1;
    size_t k = arr + 1;
    for (size_t n = 0; n < i; n++) k = j->t[k].next;
    return k < j->n ? (long)k : -1;
}

int sp__json_u64(const sp__json *j, long tok, uint64_t *out) {
    if (tok < 0 || (size_t)tok >= j->n || j->t[tok].kind != SP__J_NUM) return -1;
    const sp__jtok *t = &j->t[tok];
    if (t->end == t->start || t->end - t->start > 20) return -1;
    uint64_t v = 0;
    for (size_t i = t->start; i < t->end; i++) {
        char c = j->s[i];
        if (c < '0' || c > '9') return -1;   /* no sign, fraction or exponent */
        uint64_t d = (uint64_t)(c - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int sp__json_i64(const sp__json *j, long tok, int64_t *out) {
    if (tok < 0 || (size_t)tok >= j->n || j->t[tok].kind != SP__J_NUM) return -1;
    const sp__jtok *t = &j->t[tok];
    int neg = t->end > t->start && j->s[t->start] == '-';
    sp__json tmp = *j;
    sp__jtok tt = *t;
    tt.start += (size_t)neg;
    tmp.t = &tt;
    tmp.n = 1;
    uint64_t v;
    if (sp__json_u64(&tmp, 0, &v) != 0) return -1;
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return c - 'A' + 10;
}

int sp__json_str(const sp__json *j, long tok, char *buf, size_t cap) {
    if (tok < 0 || (size_t)tok >= j->n || j->t[tok].kind != SP__J_STR || cap == 0) return -1;
    const sp__jtok *t = &j->t[tok];
    size_t o = 0;
    for (size_t i = t->start; i < t->end;) {
        char c = j->s[i];
        uint32_t cp;
        if (c != '\\') {
            if (o + 1 >= cap) return -1;
            buf[o++] = c;
            i++;
            continue;
        }
        char e = j->s[i + 1];   /* the tokenizer checked the escape */
        i += 2;
        switch (e) {
        case 'b': cp = 8; break;
        case 'f': cp = 12; break;
        case 'n': cp = 10; break;
        case 'r': cp = 13; break;
        case 't': cp = 9; break;
        case 'u':
            cp = 0;
            for (int k = 0; k < 4; k++) cp = cp * 16 + (uint32_t)hexval(j->s[i + (size_t)k]);
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= t->end && j->s[i] == '\\' &&
                j->s[i + 1] == 'u') {
                uint32_t lo = 0;
                for (int k = 0; k < 4; k++) lo = lo * 16 + (uint32_t)hexval(j->s[i + 2 + (size_t)k]);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            if (cp == 0 || (cp >= 0xD800 && cp < 0xE000)) return -1;
            break;
        default: cp = (uint32_t)(unsigned char)e; break;
        }
        char u[4];
        size_t n;
        if (cp < 0x80) { u[0] = (char)cp; n = 1; }
        else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 63)); n = 2; }
        else if (cp < 0x10000) {
            u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 63));
            u[2] = (char)(0x80 | (cp & 63)); n = 3;
        } else {
            u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 63));
            u[2] = (char)(0x80 | ((cp >> 6) & 63)); u[3] = (char)(0x80 | (cp & 63)); n = 4;
        }
        if (o + n >= cap) return -1;
        memcpy(buf + o, u, n);
        o += n;
    }
    buf[o] = '\0';
    return 0;
}

int sp__json_streq(const sp__json *j, long tok, const char *lit) {
    if (tok < 0 || (size_t)tok >= j->n || j->t[tok].kind != SP__J_STR) return 0;
    size_t n = strlen(lit);
    return j->t[tok].end - j->t[tok].start == n && memcmp(j->s + j->t[tok].start, lit, n) == 0;
}
