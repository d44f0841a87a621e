/* test_json_write.c - the library's one JSON writer (common/json_write_internal.h).
 *
 * Every manifest, state file, environment record, verify report and run
 * record is written through it, and their bytes must not change:
 *  - test_escape_bytes: each byte 0x01-0xff alone, between letters, is
 *    written as the escape rule says (checked against the rule written
 *    out here byte by byte: '"' and '\\' backslashed, \n \r \t, other
 *    control bytes \u00xx, DEL, UTF-8 and invalid UTF-8 bytes as they are),
 *    on a stream and in a buffer alike;
 *  - test_escape_strings: whole strings (quotes, backslashes, a UTF-8
 *    name, a cut UTF-8 sequence, control bytes in a row) give the text a
 *    JSON reader (the library's own, json_internal.h) decodes back to the
 *    same bytes;
 *  - test_structure: commas and nesting (objects in arrays in objects,
 *    empty containers, preformatted values, numbers in the caller's
 *    formats) give the exact text;
 *  - test_buffer_cut: the fixed-buffer sink keeps snprintf's rule (the
 *    full length is counted, the buffer is cut and NUL-terminated) at
 *    every size from 0 to past the text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runner.h"
#include "common/json_internal.h"
#include "common/json_write_internal.h"

/* The escape rule, byte by byte, as the manifests were written before the
 * writer existed (loader/manifest.c's escaper). */
static void rule(unsigned char c, char *out) {
    if (c == '"') strcpy(out, "\\\"");
    else if (c == '\\') strcpy(out, "\\\\");
    else if (c == '\n') strcpy(out, "\\n");
    else if (c == '\r') strcpy(out, "\\r");
    else if (c == '\t') strcpy(out, "\\t");
    else if (c < 0x20) snprintf(out, 8, "\\u00%c%c", "0123456789abcdef"[c >> 4],
                                "0123456789abcdef"[c & 15]);
    else out[0] = (char)c, out[1] = '\0';
}

/* s written as a string value on a memory stream; malloc'd. */
static char *on_stream(const char *s) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL);
    sp__jw w = sp__jw_file(f);
    sp__jw_str(&w, s);
    fclose(f);
    return text;
}

static void test_escape_bytes(void) {
    for (int c = 1; c < 256; c++) {
        char in[4] = {'a', (char)c, 'b', 0}, want[16] = "\"a", esc[8];
        rule((unsigned char)c, esc);
        strcat(want, esc);
        strcat(want, "b\"");
        char *got = on_stream(in);
        CHECK_MSG(strcmp(got, want) == 0, "byte 0x%02x: got %s, want %s", c, got, want);
        char buf[32];
        sp__jw w = sp__jw_buf(buf, sizeof buf);
        sp__jw_str(&w, in);
        CHECK_MSG(w.len == strlen(want) && strcmp(buf, want) == 0, "byte 0x%02x in a buffer", c);
        free(got);
    }
}

static void test_escape_strings(void) {
    static const char *const S[] = {
        "",
        "plain",
        "say \"hi\"\\now",
        "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac",      /* UTF-8 */
        "cut \xe6\x97 and \xff\xfe\x80 bytes",         /* invalid UTF-8 */
        "\x01\x02\x1f\x7f\n\r\t\b\f",
        "\\\\\"\"",
    };
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        char *got = on_stream(S[i]);
        sp__json j = {0};
        sp_error err;
        int rc = sp__json_parse(&j, got, strlen(got), 4, 16, "test", &err);
        char back[256] = "";
        CHECK_MSG(rc == 0, "string %zu: %s does not parse: %s", i, got, err.msg);
        CHECK_MSG(sp__json_str(&j, 0, back, sizeof back) == 0 && strcmp(back, S[i]) == 0,
                  "string %zu: %s decodes to %s", i, got, back);
        /* and byte for byte what the rule gives */
        char want[256] = "\"", esc[8];
        for (const char *p = S[i]; *p; p++) {
            rule((unsigned char)*p, esc);
            strcat(want, esc);
        }
        strcat(want, "\"");
        CHECK_MSG(strcmp(got, want) == 0, "string %zu: %s, want %s", i, got, want);
        sp__json_free(&j);
        free(got);
    }
}

/* One document with every kind of value and nesting; the writer's text. */
static size_t document(char *buf, size_t size) {
    sp__jw w = sp__jw_buf(buf, size);
    sp__jw_obj(&w);
    sp__jw_ku64(&w, "n", 18446744073709551615ull);
    sp__jw_key(&w, "neg");
    sp__jw_i64(&w, -5);
    sp__jw_key(&w, "loss");
    sp__jw_fmt(&w, "%.9g", 0.1);
    sp__jw_key(&w, "acc");
    sp__jw_fmt(&w, "%.6f", 0.5);
    sp__jw_key(&w, "list");
    sp__jw_arr(&w);
    for (int i = 0; i < 3; i++) sp__jw_u64(&w, (uint64_t)i);
    sp__jw_arr(&w);
    sp__jw_end(&w, ']');
    sp__jw_obj(&w);
    sp__jw_kstr(&w, "k", "v");
    sp__jw_key(&w, "t");
    sp__jw_bool(&w, 1);
    sp__jw_end(&w, '}');
    sp__jw_null(&w);
    sp__jw_end(&w, ']');
    sp__jw_key(&w, "pre");
    sp__jw_json(&w, "{\"a\":1}");
    sp__jw_key(&w, "f");
    sp__jw_bool(&w, 0);
    sp__jw_end(&w, '}');
    sp__jw_raw(&w, "\n");
    return w.len;
}

static const char DOC[] = "{\"n\":18446744073709551615,\"neg\":-5,\"loss\":0.1,"
                          "\"acc\":0.500000,\"list\":[0,1,2,[],{\"k\":\"v\",\"t\":true},null],"
                          "\"pre\":{\"a\":1},\"f\":false}\n";

static void test_structure(void) {
    char buf[512];
    size_t n = document(buf, sizeof buf);
    CHECK_MSG(n == strlen(DOC) && strcmp(buf, DOC) == 0, "got %s", buf);
    sp__json j = {0};
    sp_error err;
    CHECK_MSG(sp__json_parse(&j, buf, n, 8, 64, "doc", &err) == 0, "%s", err.msg);
    sp__json_free(&j);
    /* the same on a stream */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL);
    sp__jw w = sp__jw_file(f);
    sp__jw_arr(&w);
    sp__jw_str(&w, "a");
    sp__jw_obj(&w);
    sp__jw_end(&w, '}');
    sp__jw_end(&w, ']');
    fclose(f);
    CHECK_MSG(strcmp(text, "[\"a\",{}]") == 0, "got %s", text);
    free(text);
}

static void test_buffer_cut(void) {
    size_t full = strlen(DOC);
    for (size_t size = 0; size <= full + 2; size++) {
        char buf[512];
        memset(buf, 'X', sizeof buf);
        size_t n = document(size ? buf : NULL, size);
        CHECK_MSG(n == full, "size %zu: length %zu, want %zu", size, n, full);
        if (!size) continue;
        size_t kept = size - 1 < full ? size - 1 : full;
        CHECK_MSG(buf[kept] == '\0' && memcmp(buf, DOC, kept) == 0, "size %zu: cut wrong", size);
        CHECK_MSG(buf[size] == 'X', "size %zu: wrote past the buffer", size);
    }
}

static const sp_case cases[] = {
    SP_CASE(test_escape_bytes),
    SP_CASE(test_escape_strings),
    SP_CASE(test_structure),
    SP_CASE(test_buffer_cut),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}
