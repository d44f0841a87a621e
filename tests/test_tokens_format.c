/* test_tokens_format.c - the token-corpus kind (dataset/dataset_tokens.c)
 * and its writer (include/seedpipe/tokens.h, dataset/dataset_tokens_write.c).
 *
 *  - test_dtypes: a corpus of every integer dtype, empty documents
 *    included, written by sp_tokens_writer and opened by its .idx, its .bin
 *    and its prefix: kind "tokens", D, lengths, total, the same
 *    fingerprint by all three names, spans read to int32 and int64;
 *  - test_multi_sequence: an .idx written by hand whose documents hold
 *    several sequences (and none), with the multimodal mode bytes: lengths
 *    and spans across sequence boundaries;
 *  - test_int64_range: int64 tokens outside int32's range are SP_EFORMAT
 *    for a 4-byte output (naming the .bin, document and value), exact for 8;
 *  - test_hostile: truncated, bad magic and version, float and unknown
 *    dtypes, counts larger than the file, pointers past the .bin, out of
 *    place or misaligned, a document index that does not start at 0,
 *    decreases or does not end at S, a negative length, a .bin of another
 *    size, trailing bytes, no documents, more than 2^32-1 documents (a
 *    sparse file): each its named error, no crash;
 *  - test_source_table: label, path, read (SP_EUNSUPP), the class, spans
 *    out of range, a mixture refused, the writer's abort and its refusals,
 *    a forked child reading the parent's maps.
 */
#define _XOPEN_SOURCE 700   /* nftw */
#include "seedpipe/dataset.h"
#include "seedpipe/tokens.h"
#include "dataset/dataset_tokens.h"

#include "check.h"
#include "runner.h"
#include "tmpdir.h"
#include "common/le_internal.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "dataset/dataset_internal.h"


static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f);
    CHECK(n == 0 || fwrite(p, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

/* An .idx by hand: S lengths, S pointers, N document entries, extra bytes. */
typedef struct hand_idx {
    uint8_t magic0;          /* 'M' unless a test breaks it */
    uint64_t version;
    uint8_t code;
    uint64_t S, N;           /* as declared in the header */
    const int32_t *lens;
    const int64_t *ptrs;
    uint64_t nlens;          /* entries really written (S unless truncated) */
    const int64_t *docs;
    uint64_t ndocs;
    size_t extra;            /* zero bytes appended */
} hand_idx;

static void write_idx(const char *path, const hand_idx *h) {
    size_t n = 34 + h->nlens * 12 + h->ndocs * 8 + h->extra;
    uint8_t *b = calloc(1, n), *p = b;
    CHECK(b);
    memcpy(p, "MMIDIDX\0\0", 9);
    p[0] = h->magic0;
    sp__le_put64(p + 9, h->version);
    p[17] = h->code;
    sp__le_put64(p + 18, h->S);
    sp__le_put64(p + 26, h->N);
    p += 34;
    for (uint64_t i = 0; i < h->nlens; i++, p += 4) sp__le_put32(p, (uint32_t)h->lens[i]);
    for (uint64_t i = 0; i < h->nlens; i++, p += 8) sp__le_put64(p, (uint64_t)h->ptrs[i]);
    for (uint64_t i = 0; i < h->ndocs; i++, p += 8) sp__le_put64(p, (uint64_t)h->docs[i]);
    write_bytes(path, b, n);
    free(b);
}

static sp_dataset *open_ok(const char *path) {
    sp_dataset *ds = NULL;
    sp_error err = {0};
    CHECK_OK(sp_dataset_open(path, NULL, &ds, &err), &err);
    CHECK(sp__dataset_kind_of(ds) == SP_DATASET_TOKENS);
    return ds;
}

/* sp_dataset_open(path) fails with code and a message holding `want`. */
static void open_fails(const char *path, int code, const char *want) {
    sp_dataset *ds = (sp_dataset *)1;
    sp_error err = {0};
    int rc = sp_dataset_open(path, NULL, &ds, &err);
    CHECK_MSG(rc == code && ds == NULL, "%s: rc %d (want %d): %s", path, rc, code, err.msg);
    CHECK_MSG(strstr(err.msg, want) != NULL, "message \"%s\" lacks \"%s\"", err.msg, want);
}

/* ---- test_dtypes --------------------------------------------------------------------- */

static const char *const g_types[] = {"uint8", "int8", "int16", "uint16", "int32", "int64"};
static const int g_sizes[] = {1, 1, 2, 2, 4, 8};

/* Token k of document d, in range for every dtype (signed ones get negatives). */
static int64_t tok_value(int t, uint64_t d, uint64_t k) {
    int64_t v = (int64_t)((d * 31 + k * 7) % 100);
    return (t == 1 || t == 2 || t == 4 || t == 5) && (k % 3 == 1) ? -v : v;
}

static void store(void *dst, int size, int64_t v) {
    if (size == 1) *(uint8_t *)dst = (uint8_t)v;
    if (size == 2) { uint16_t x = (uint16_t)v; memcpy(dst, &x, 2); }
    if (size == 4) { uint32_t x = (uint32_t)v; memcpy(dst, &x, 4); }
    if (size == 8) { uint64_t x = (uint64_t)v; memcpy(dst, &x, 8); }
}

static const uint64_t g_lens[] = {5, 0, 1, 300, 0, 17};
#define NDOCS (sizeof g_lens / sizeof g_lens[0])

static void check_corpus(const sp_dataset *ds, int t) {
    const sp__tok *tok = sp__tok_of(ds);
    CHECK(tok && sp__tok_docs(tok) == NDOCS && sp__dataset_size(ds) == NDOCS);
    CHECK(strcmp(sp__tok_dtype_name(tok), g_types[t]) == 0);
    uint64_t total = 0;
    for (uint64_t d = 0; d < NDOCS; d++) {
        CHECK(sp__tok_len(tok, d) == g_lens[d]);
        total += g_lens[d];
    }
    CHECK(sp__tok_len(tok, NDOCS) == 0 && sp__tok_total(tok) == total);
    int32_t a[300];
    int64_t b[300];
    sp__tok_span sp[2] = {{3, 10, 250, a}, {5, 2, 15, b}};
    sp_error err = {0};
    CHECK_OK(sp__tok_read(tok, &sp[0], 1, 4, &err), &err);
    CHECK_OK(sp__tok_read(tok, &sp[1], 1, 8, &err), &err);
    for (uint64_t k = 0; k < 250; k++) CHECK(a[k] == tok_value(t, 3, 10 + k));
    for (uint64_t k = 0; k < 15; k++) CHECK(b[k] == tok_value(t, 5, 2 + k));
    sp__tok_span empty = {1, 0, 0, a};
    CHECK_OK(sp__tok_read(tok, &empty, 1, 4, &err), &err);
}

static void test_dtypes(void) {
    for (int t = 0; t < 6; t++) {
        char prefix[512];
        snprintf(prefix, sizeof prefix, "%s/c_%s", g_tmp, g_types[t]);
        sp_tokens_writer *w;
        sp_error err = {0};
        CHECK_OK(sp_tokens_writer_open(prefix, g_types[t], &w, &err), &err);
        uint8_t buf[300 * 8];
        for (uint64_t d = 0; d < NDOCS; d++) {
            for (uint64_t k = 0; k < g_lens[d]; k++)
                store(buf + k * g_sizes[t], g_sizes[t], tok_value(t, d, k));
            CHECK_OK(sp_tokens_writer_add(w, g_lens[d] ? buf : NULL, g_lens[d], &err), &err);
        }
        CHECK_OK(sp_tokens_writer_close(w, &err), &err);
        char idx[600], bin[600];
        snprintf(idx, sizeof idx, "%s.idx", prefix);
        snprintf(bin, sizeof bin, "%s.bin", prefix);
        sp_dataset *a = open_ok(idx), *b = open_ok(bin), *c = open_ok(prefix);
        CHECK(strcmp(sp__dataset_root(a), prefix) == 0 && strcmp(sp__dataset_root(c), prefix) == 0);
        CHECK(strcmp(sp__dataset_kind_name(sp__dataset_kind_of(a)), "tokens") == 0);
        sp_digest fa = sp__dataset_fingerprint(a), fb = sp__dataset_fingerprint(b),
                  fc = sp__dataset_fingerprint(c);
        CHECK(fa.hi == fb.hi && fa.lo == fb.lo && fa.hi == fc.hi && fa.lo == fc.lo);
        check_corpus(a, t);
        check_corpus(c, t);
        sp_dataset_close(a);
        sp_dataset_close(b);
        sp_dataset_close(c);
    }
    /* another dtype of the same tokens is another corpus */
    sp_dataset *u8 = open_ok(tp("c_uint8")), *i16 = open_ok(tp("c_int16"));
    CHECK(sp__dataset_fingerprint(u8).hi != sp__dataset_fingerprint(i16).hi);
    sp_dataset_close(u8);
    sp_dataset_close(i16);
}

/* ---- test_multi_sequence ----------------------------------------------------------------- */

static void test_multi_sequence(void) {
    /* sequences 0..4 of lengths 2, 3, 0, 4, 1 (uint16); documents {0, 1}, {},
     * {2, 3}, {4}: lengths 5, 0, 4, 1 */
    const int32_t lens[] = {2, 3, 0, 4, 1};
    const int64_t ptrs[] = {0, 4, 10, 10, 18};
    const int64_t docs[] = {0, 2, 2, 4, 5};
    uint16_t toks[10];
    for (int k = 0; k < 10; k++) toks[k] = (uint16_t)(60000 + k);
    write_bytes(tp("m.bin"), toks, sizeof toks);
    hand_idx h = {'M', 1, 8, 5, 5, lens, ptrs, 5, docs, 5, 5};   /* 5 mode bytes */
    write_idx(tp("m.idx"), &h);
    sp_dataset *ds = open_ok(tp("m"));
    const sp__tok *t = sp__tok_of(ds);
    CHECK(sp__tok_docs(t) == 4 && sp__tok_total(t) == 10);
    CHECK(sp__tok_len(t, 0) == 5 && sp__tok_len(t, 1) == 0 && sp__tok_len(t, 2) == 4 &&
          sp__tok_len(t, 3) == 1);
    int32_t a[5];
    int64_t b[4];
    sp__tok_span sp[2] = {{0, 0, 5, a}, {2, 1, 3, NULL}};
    sp_error err = {0};
    CHECK_OK(sp__tok_read(t, sp, 1, 4, &err), &err);
    for (int k = 0; k < 5; k++) CHECK(a[k] == 60000 + k);
    sp[1].dst = b;
    CHECK_OK(sp__tok_read(t, &sp[1], 1, 8, &err), &err);
    for (int k = 0; k < 3; k++) CHECK(b[k] == 60006 + k);
    sp_dataset_close(ds);
}

/* ---- test_int64_range ------------------------------------------------------------------- */

static void test_int64_range(void) {
    sp_tokens_writer *w;
    sp_error err = {0};
    CHECK_OK(sp_tokens_writer_open(tp("big"), "int64", &w, &err), &err);
    int64_t d0[3] = {1, -5, INT64_C(1) << 40}, d1[2] = {INT32_MIN, INT32_MAX};
    CHECK_OK(sp_tokens_writer_add(w, d0, 3, &err), &err);
    CHECK_OK(sp_tokens_writer_add(w, d1, 2, &err), &err);
    CHECK_OK(sp_tokens_writer_close(w, &err), &err);
    sp_dataset *ds = open_ok(tp("big.idx"));
    const sp__tok *t = sp__tok_of(ds);
    int32_t a[3];
    int64_t b[3];
    sp__tok_span s = {0, 0, 3, a};
    CHECK(sp__tok_read(t, &s, 1, 4, &err) == SP_EFORMAT);
    CHECK_MSG(strstr(err.msg, "big.bin") && strstr(err.msg, "document 0 token 2") &&
              strstr(err.msg, "1099511627776"), "%s", err.msg);
    s.dst = b;
    CHECK_OK(sp__tok_read(t, &s, 1, 8, &err), &err);
    CHECK(b[0] == 1 && b[1] == -5 && b[2] == INT64_C(1) << 40);
    sp__tok_span s1 = {1, 0, 2, a};
    CHECK_OK(sp__tok_read(t, &s1, 1, 4, &err), &err);
    CHECK(a[0] == INT32_MIN && a[1] == INT32_MAX);
    CHECK(sp__tok_read(t, &s1, 1, 2, &err) == SP_EINVAL);
    sp_dataset_close(ds);
}

/* ---- test_hostile ----------------------------------------------------------------------- */

/* A well-formed base (uint16, sequences of 2, 3, 1 tokens, one a document)
 * with one thing changed by the caller; written as h.idx + h.bin (12 bytes). */
static int32_t h_lens[3];
static int64_t h_ptrs[3], h_docs[4];
static hand_idx base_idx(void) {
    const int32_t l[3] = {2, 3, 1};
    const int64_t p[3] = {0, 4, 10}, d[4] = {0, 1, 2, 3};
    memcpy(h_lens, l, sizeof l);
    memcpy(h_ptrs, p, sizeof p);
    memcpy(h_docs, d, sizeof d);
    hand_idx h = {'M', 1, 8, 3, 4, h_lens, h_ptrs, 3, h_docs, 4, 0};
    return h;
}

static void hostile(const hand_idx *h, int code, const char *want) {
    write_idx(tp("h.idx"), h);
    open_fails(tp("h.idx"), code, want);
    open_fails(tp("h.idx"), code, "/h.idx: ");   /* the file is named */
}

/* No documents; more than 2^32-1 (a sparse .idx of 32 GiB); no document index. */
static void hostile_counts(void) {
    write_bytes(tp("e.bin"), "", 0);
    const int64_t zero = 0;
    hand_idx e = {'M', 1, 8, 0, 1, NULL, NULL, 0, &zero, 1, 0};
    write_idx(tp("e.idx"), &e);
    open_fails(tp("e"), SP_EFORMAT, "e.idx: no documents");
    e.N = 0;
    e.ndocs = 0;
    write_idx(tp("e.idx"), &e);
    open_fails(tp("e"), SP_EFORMAT, "no document index");
    e.N = (UINT64_C(1) << 32) + 1;   /* D = 2^32 */
    write_idx(tp("e.idx"), &e);
    int fd = open(tp("e.idx"), O_WRONLY);
    CHECK(fd >= 0);
    int sparse = ftruncate(fd, (off_t)(34 + e.N * 8)) == 0;
    close(fd);
    if (!sparse) {
        printf("SKIP part: no 32 GiB sparse file here; the 2^32-document limit not tested\n");
        return;
    }
    open_fails(tp("e"), SP_ELIMIT, "4294967296 documents");
    remove(tp("e.idx"));
}

static void test_hostile(void) {
    uint8_t bin[12] = {0};
    write_bytes(tp("h.bin"), bin, sizeof bin);
    hand_idx h = base_idx();
    write_idx(tp("h.idx"), &h);
    sp_dataset_close(open_ok(tp("h.idx")));   /* the base is sound */

    write_bytes(tp("h.idx"), "MMIDIDX\0\0\1", 10);
    open_fails(tp("h.idx"), SP_EFORMAT, "truncated: 10 bytes");
    h.magic0 = 'X';            hostile(&h, SP_EFORMAT, "bad magic");
    h = base_idx(); h.version = 2;   hostile(&h, SP_EFORMAT, "version 2");
    h = base_idx(); h.code = 7;      hostile(&h, SP_EUNSUPP, "float32");
    h = base_idx(); h.code = 6;      hostile(&h, SP_EUNSUPP, "float64");
    h = base_idx(); h.code = 9;      hostile(&h, SP_EFORMAT, "unknown token dtype code 9");
    h = base_idx(); h.code = 0;      hostile(&h, SP_EFORMAT, "unknown token dtype code 0");
    h = base_idx(); h.S = UINT64_MAX / 4; hostile(&h, SP_EFORMAT, "do not fit");
    h = base_idx(); h.N = UINT64_MAX;     hostile(&h, SP_EFORMAT, "do not fit");
    h = base_idx(); h.S = 4;              hostile(&h, SP_EFORMAT, "do not fit");
    h = base_idx(); h.extra = 2;          hostile(&h, SP_EFORMAT, "2 bytes after the document");
    h = base_idx(); h_lens[1] = -3;       hostile(&h, SP_EFORMAT, "negative length -3");
    h = base_idx(); h_ptrs[2] = 12;       hostile(&h, SP_EFORMAT, "sequence 2: pointer 12");
    h = base_idx(); h_ptrs[1] = 3;        hostile(&h, SP_EFORMAT, "sequence 1: pointer 3");
    h = base_idx(); h_lens[2] = 2;        hostile(&h, SP_EFORMAT, "run past the end");
    h = base_idx(); h_lens[2] = 0;        hostile(&h, SP_EFORMAT, "the sequences end at byte 10");
    h = base_idx(); h_docs[0] = 1;        hostile(&h, SP_EFORMAT, "starts at 1, not 0");
    h = base_idx(); h_docs[2] = 0;        hostile(&h, SP_EFORMAT, "entry 2 is 0 after 1");
    h = base_idx(); h_docs[3] = 2;        hostile(&h, SP_EFORMAT, "ends at 2");
    h = base_idx(); h_docs[2] = 7;        hostile(&h, SP_EFORMAT, "entry 2 is 7");
    h = base_idx(); h.N = 1; h.ndocs = 1; h.extra = 24;   /* 24 bytes: not S mode bytes */
    hostile(&h, SP_EFORMAT, "24 bytes after the document index");
    hostile_counts();
}

/* ---- test_source_table ------------------------------------------------------------------- */

static void test_source_table(void) {
    sp_tokens_writer *w;
    sp_error err = {0};
    uint16_t toks[4] = {1, 2, 3, 4};
    CHECK_OK(sp_tokens_writer_open(tp("s"), "uint16", &w, &err), &err);
    CHECK_OK(sp_tokens_writer_add(w, toks, 4, &err), &err);
    CHECK_OK(sp_tokens_writer_add(w, toks, 2, &err), &err);
    CHECK_OK(sp_tokens_writer_close(w, &err), &err);
    sp_dataset *ds = open_ok(tp("s.bin"));
    CHECK(sp_dataset_label(ds, 1) == 0 && sp_dataset_label(ds, 2) == -1);
    CHECK(strcmp(sp_dataset_path(ds, 1), tp("s")) == 0);
    CHECK(sp__dataset_num_classes(ds) == 1 && strcmp(sp_dataset_class_name(ds, 0), "tokens") == 0);
    CHECK(sp__dataset_class_count(ds, 0) == 2);
    sp_sample_data sd;
    CHECK(sp__dataset_read(ds, 0, &sd, &err) == SP_EUNSUPP && strstr(err.msg, "seq_len"));
    const sp__tok *t = sp__tok_of(ds);
    int32_t a[8];
    sp__tok_span bad[3] = {{2, 0, 1, a}, {1, 1, 2, a}, {0, 5, 0, a}};
    for (int k = 0; k < 3; k++) CHECK(sp__tok_read(t, &bad[k], 1, 4, &err) == SP_ERANGE);
    /* a forked child reads through the parent's maps */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        sp__tok_span s = {0, 1, 3, a};
        _exit(sp__tok_read(t, &s, 1, 4, &err) == 0 && a[0] == 2 && a[2] == 4 ? 0 : 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    sp_dataset_close(ds);

    /* a mixture of token corpora (a blend, docs/tokens.md) opens; its
     * windows are the loader's (bindings/python/tests/test_tokens.py) */
    FILE *f = fopen(tp("m.mix"), "w");
    CHECK(f);
    fprintf(f, "1\ts.idx\n");
    fclose(f);
    sp_dataset *mx = NULL;
    CHECK_OK(sp_dataset_open(tp("m.mix"), NULL, &mx, &err), &err);
    CHECK(sp__dataset_kind_of(mx) == SP_DATASET_MIX && sp__dataset_mix_sources(mx) == 1);
    CHECK(sp__dataset_kind_of(sp__dataset_mix_source(mx, 0)) == SP_DATASET_TOKENS);
    sp_dataset_close(mx);
    /* a remote corpus whose server never answers: named */
    open_fails("http://127.0.0.1:9/corpus.idx", SP_EIO, "http://127.0.0.1:9/corpus.idx");

    /* the writer: abort leaves nothing; bad arguments */
    CHECK_OK(sp_tokens_writer_open(tp("ab"), "int8", &w, &err), &err);
    CHECK_OK(sp_tokens_writer_add(w, toks, 3, &err), &err);
    sp_tokens_writer_abort(w);
    struct stat sb;
    CHECK(stat(tp("ab.bin"), &sb) != 0 && stat(tp("ab.idx"), &sb) != 0);
    CHECK(sp_tokens_writer_open(tp("ab"), "float32", &w, &err) == SP_EINVAL &&
          strstr(err.msg, "float32"));
    CHECK(sp_tokens_writer_open("", "uint8", &w, &err) == SP_EINVAL);
    CHECK(sp_tokens_writer_open(tp("nodir/x"), "uint8", &w, &err) == SP_EIO);
    CHECK_OK(sp_tokens_writer_open(tp("ab"), "int8", &w, &err), &err);
    CHECK(sp_tokens_writer_add(w, NULL, 3, &err) == SP_EINVAL);
    sp_tokens_writer_abort(w);
    sp_tokens_writer_abort(NULL);
    /* a name that is neither: the prefix absent and only one file */
    write_bytes(tp("lone.idx"), "x", 1);
    open_fails(tp("lone"), SP_EIO, "lone");
}

/* ---- cases ---------------------------------------------------------------------------------- */

static void setup(void) { sp_tmp_make("tokens"); }
static void teardown(void) { sp_tmp_remove(); }

static const sp_case cases[] = {
    SP_CASE(test_dtypes),
    SP_CASE(test_multi_sequence),
    SP_CASE(test_int64_range),
    SP_CASE(test_hostile),
    SP_CASE(test_source_table),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}
