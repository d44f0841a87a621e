/* remote_judge.c - what a remote transfer's headers say (its size, its
 * range), the bytes an upload sends, and what a finished transfer came to
 * (remote_xfer_internal.h): done, retried or failed, with the message that
 * names the object, the HTTP status and S3's error code (escaped), never a
 * credential. remote.c's HOW IT WORKS lists the classes; this file is
 * their one place. Reads a transfer remote.c owns; the result code, the
 * status and the result's text come in: it calls no libcurl function
 * (remote.c is the one caller, tests/layers.py).
 */
#include "dataset/remote_xfer_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- a transfer's callbacks (remote.c hands them to libcurl) ------------------ */

size_t sp__rio_on_header(char *p, size_t sz, size_t nm, void *ud) {
    xfer *x = ud;
    size_t n = sz * nm;
    char line[256];
    size_t k = n < sizeof line - 1 ? n : sizeof line - 1;
    memcpy(line, p, k);
    line[k] = '\0';
    if (strncasecmp(line, "HTTP/", 5) == 0) {   /* a new response (after a retry or 100) */
        x->have_total = 0;
        x->declared = -1;
    } else if (strncasecmp(line, "content-length:", 15) == 0) {
        x->declared = strtoll(line + 15, NULL, 10);
    } else if (strncasecmp(line, "content-range:", 14) == 0) {
        const char *slash = strchr(line, '/');
        if (slash && slash[1] >= '0' && slash[1] <= '9') {
            x->total = strtoull(slash + 1, NULL, 10);
            x->have_total = 1;
        }
    }
    return n;
}

size_t sp__rio_on_upload(char *p, size_t sz, size_t nm, void *ud) {
    xfer *x = ud;
    size_t n = sz * nm, left = x->up_len - x->up_pos;
    if (n > left) n = left;
    memcpy(p, x->up + x->up_pos, n);
    x->up_pos += n;
    return n;
}

/* ---- the verdict ---------------------------------------------------------------- */

/* S3's <Code> and <Message> of an error body, as " (Code: Message)". */
static void s3_code(const xfer *x, char *out, size_t n) {
    out[0] = '\0';
    if (!x->len || !x->body.p) return;
    char body[ERROR_BODY_MAX + 1];
    size_t k = x->len < ERROR_BODY_MAX ? x->len : ERROR_BODY_MAX;
    memcpy(body, x->body.p, k);
    body[k] = '\0';
    char code[64] = "", msg[160] = "";
    const char *tags[2][2] = {{"<Code>", "</Code>"}, {"<Message>", "</Message>"}};
    char *dst[2] = {code, msg};
    size_t cap[2] = {sizeof code, sizeof msg};
    for (int t = 0; t < 2; t++) {
        const char *a = strstr(body, tags[t][0]), *b = a ? strstr(a, tags[t][1]) : NULL;
        if (!a || !b) continue;
        a += strlen(tags[t][0]);
        sp__escape_copy(dst[t], cap[t], a, (size_t)(b - a));   /* the server's text: escaped */
    }
    if (code[0]) snprintf(out, n, " (%s%s%s)", code, msg[0] ? ": " : "", msg);
}

/* The outcomes decided on our side of the wire: a body cut at its bound, a
 * whole object of no declared size, a local write that failed. -1: none
 * of them (the response decides). */
static int judge_bounds(xfer *x, CURLcode res, long st) {
    sp__rio_get *g = x->g;
    if (res == CURLE_WRITE_ERROR && x->no_length) {
        g->rc = SP_EIO;
        snprintf(g->msg, sizeof g->msg, "%s: the server did not declare the object's size "
                 "(no Content-Length): refused, an object read whole is bounded by it",
                 x->display);
        return X_FAIL;
    }
    if (res == CURLE_WRITE_ERROR && x->too_big && g->len && st == 200) {
        g->rc = SP_EIO;
        snprintf(g->msg, sizeof g->msg, "%s: the server ignored the byte range (HTTP 200 with "
                 "the whole object)", x->display);
        return X_FAIL;
    }
    if (res == CURLE_WRITE_ERROR && x->werr) {   /* the local file, not the store */
        g->rc = SP_EIO;
        snprintf(g->msg, sizeof g->msg, "%s: writing the local copy: %s", x->display,
                 strerror(x->werr));
        return X_FAIL;
    }
    if (res == CURLE_WRITE_ERROR && x->too_big) {
        g->rc = SP_ELIMIT;
        snprintf(g->msg, sizeof g->msg, "%s: more than %llu bytes (refused at the bound, not "
                 "read further)", x->display, (unsigned long long)x->cap);
        return X_FAIL;
    }
    if (res == CURLE_FILESIZE_EXCEEDED) {
        g->rc = SP_ELIMIT;
        snprintf(g->msg, sizeof g->msg, "%s: more than %llu bytes (the server declared %lld; "
                 "refused before the body)", x->display, (unsigned long long)x->cap,
                 x->declared);
        return X_FAIL;
    }
    return -1;
}

/* A transfer that got no whole response: a connection never made, a
 * transient or a permanent failure; -1 when it did (res is CURLE_OK). */
static int judge_transport(xfer *x, CURLcode res, long st, const char *why) {
    sp__rio_get *g = x->g;
    if (st > 0)   /* a response: the store is there (the cast: the one mutable field) */
        atomic_store_explicit((_Atomic int *)&x->r->answered, 1, memory_order_relaxed);
    if (res == CURLE_COULDNT_CONNECT &&
        !atomic_load_explicit(&x->r->answered, memory_order_relaxed) &&
        x->attempt + 1 >= SP__RIO_FIRST_TRIES) {
        g->rc = SP_EIO;
        snprintf(g->msg, sizeof g->msg, "%s: %s: no server has answered at this address (a "
                 "wrong host or port, or a server that is down); gave up after %d tries",
                 x->display, x->errbuf[0] ? x->errbuf : why, x->attempt + 1);
        return X_FAIL;
    }
    if (res != CURLE_OK) {
        int transient = res == CURLE_COULDNT_CONNECT || res == CURLE_OPERATION_TIMEDOUT ||
                        res == CURLE_RECV_ERROR || res == CURLE_SEND_ERROR ||
                        res == CURLE_PARTIAL_FILE || res == CURLE_GOT_NOTHING ||
                        res == CURLE_HTTP2 || res == CURLE_HTTP2_STREAM ||
                        res == CURLE_SSL_CONNECT_ERROR || res == CURLE_WEIRD_SERVER_REPLY;
        g->rc = SP_EIO;
        snprintf(g->msg, sizeof g->msg, "%s: %s (%s)", x->display,
                 x->errbuf[0] ? x->errbuf : why, why);
        if (res == CURLE_OPERATION_TIMEDOUT) {   /* which rule, and how to change it */
            size_t l = strlen(g->msg);
            snprintf(g->msg + l, sizeof g->msg - l, " [a try: at most "
                     "SEEDPIPE_REMOTE_TIMEOUT=%ld s, at least SEEDPIPE_REMOTE_LOW_SPEED=%ld "
                     "bytes/s over SEEDPIPE_REMOTE_LOW_SPEED_TIME=%ld s]",
                     x->r->timeout_ms / 1000, x->r->low_speed, x->r->low_speed_s);
        }
        return transient ? X_RETRY : X_FAIL;
    }
    return -1;
}

/* What the response says: a status, an object that changed, a range cut
 * short or ignored. */
static int judge_response(xfer *x, CURLcode res, long st, const char *why) {
    sp__rio_get *g = x->g;
    char code[240];
    int v = judge_transport(x, res, st, why);
    if (v >= 0) return v;
    if (st == 408 || st == 429 || (st >= 500 && st <= 599)) {
        s3_code(x, code, sizeof code);
        g->rc = SP_EIO;
        snprintf(g->msg, sizeof g->msg, "%s: HTTP %ld%s", x->display, st, code);
        return X_RETRY;
    }
    if (strcmp(x->method, "PUT") == 0) {
        if (st >= 200 && st <= 299) return X_DONE;
        s3_code(x, code, sizeof code);
        g->rc = SP_EIO;
        snprintf(g->msg, sizeof g->msg, "%s: upload refused: HTTP %ld%s", x->display, st, code);
        return X_FAIL;
    }
    if (st == 416 && g->expect_total) {
        g->rc = SP_EMISMATCH;
        snprintf(g->msg, sizeof g->msg, "%s: the object changed since the dataset was indexed "
                 "(bytes %llu.. are past its end: HTTP 416)", x->display,
                 (unsigned long long)g->off);
        return X_FAIL;
    }
    if (st != 200 && st != 206) {
        s3_code(x, code, sizeof code);
        g->rc = SP_EIO;
        snprintf(g->msg, sizeof g->msg, "%s: HTTP %ld%s", x->display, st, code);
        return X_FAIL;
    }
    uint64_t total = x->have_total ? x->total : (st == 200 ? (uint64_t)x->len : 0);
    g->total = total;
    if (g->expect_total && total && total != g->expect_total) {
        g->rc = SP_EMISMATCH;
        snprintf(g->msg, sizeof g->msg, "%s: the object changed since the dataset was indexed "
                 "(%llu bytes, indexed %llu)", x->display, (unsigned long long)total,
                 (unsigned long long)g->expect_total);
        return X_FAIL;
    }
    if (g->len && st == 200) {   /* the server sent the whole object: cut the range out */
        if (x->fd >= 0 || g->off + g->len > x->len) {
            g->rc = SP_EIO;
            snprintf(g->msg, sizeof g->msg, "%s: the server ignored the byte range and sent "
                     "%zu bytes", x->display, x->len);
            return X_FAIL;
        }
        memmove(x->body.p, x->body.p + g->off, (size_t)g->len);
        x->len = (size_t)g->len;
    }
    if (g->len && x->len != g->len) {   /* cut short: a transient fault */
        g->rc = SP_EIO;
        snprintf(g->msg, sizeof g->msg, "%s: %zu of %llu bytes received", x->display, x->len,
                 (unsigned long long)g->len);
        return X_RETRY;
    }
    return X_DONE;
}

int sp__rio_judge(xfer *x, CURLcode res, long st, const char *why) {
    x->g->status = st;
    if (res == CURLE_WRITE_ERROR && x->error_cut) res = CURLE_OK;   /* judged by its status */
    int v = judge_bounds(x, res, st);
    return v >= 0 ? v : judge_response(x, res, st, why);
}
