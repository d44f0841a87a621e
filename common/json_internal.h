/* json_internal.h - a small strict JSON reader for states and manifests.
 *
 * Not a public header. sp__json_parse() tokenizes one JSON value into a
 * flat array (jsmn style: each token knows its kind, its byte span and the
 * index just past its subtree), with hard limits on depth and token count,
 * so hostile input (it is fuzzed) costs bounded memory and time and gives
 * an error with a byte offset, never a crash. Strings are kept raw;
 * sp__json_str() decodes them. Numbers are validated against the JSON
 * grammar and kept as text; sp__json_u64()/sp__json_i64() convert integers
 * exactly (no floating point).
 */
#ifndef SEEDPIPE_JSON_INTERNAL_H
#define SEEDPIPE_JSON_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "seedpipe/common.h"

enum { SP__J_OBJ, SP__J_ARR, SP__J_STR, SP__J_NUM, SP__J_TRUE, SP__J_FALSE, SP__J_NULL };

typedef struct sp__jtok {
    int kind;
    size_t start, end;    /* span in the text (strings: inside the quotes) */
    size_t size;          /* object: keys; array: elements */
    size_t next;          /* index of the first token after this subtree */
} sp__jtok;

typedef struct sp__json {
    const char *s;
    size_t len;
    sp__jtok *t;
    size_t n, cap;
} sp__json;

/*! sp__json_parse() : one value, then only whitespace. `what` prefixes
 *  messages ("state.json"). @return 0 or SP_EFORMAT ("what: offset N:
 *  reason"), SP_ELIMIT, SP_ENOMEM. Free with sp__json_free() either way. */
int sp__json_parse(sp__json *j, const char *s, size_t len, int max_depth, size_t max_tokens,
                   const char *what, sp_error *err);
void sp__json_free(sp__json *j);

/* The value of `key` in object token `obj`, or -1 (also if obj is not an object). */
long sp__json_get(const sp__json *j, size_t obj, const char *key);
/* Element i of array token `arr`, or -1. O(i): use sp__jtok.next to walk. */
long sp__json_at(const sp__json *j, size_t arr, size_t i);
/* 0 on success; -1 if the token is not a plain non-negative integer in range. */
int sp__json_u64(const sp__json *j, long tok, uint64_t *out);
int sp__json_i64(const sp__json *j, long tok, int64_t *out);
/* Decode a string token into buf (NUL-terminated). 0, or -1 (not a string,
 * too long, bad escape, or an escaped NUL). */
int sp__json_str(const sp__json *j, long tok, char *buf, size_t cap);
/* 1 if the token is a string equal to lit (raw compare, no escapes). */
int sp__json_streq(const sp__json *j, long tok, const char *lit);

#endif
