/* remote_xfer_internal.h - one transfer of remote.c, shared with
 * remote_judge.c, which decides what a finished one came to (done, retried,
 * failed, and the message). Not installed; names are sp__rio_* and xfer.
 * remote.c owns every transfer (it creates, runs and frees them, and is the
 * only file that calls libcurl); remote_judge.c only reads one and writes
 * its verdict into its request (g->rc, g->msg).
 */
#ifndef SEEDPIPE_DATASET_REMOTE_XFER_INTERNAL_H
#define SEEDPIPE_DATASET_REMOTE_XFER_INTERNAL_H

#include "dataset/remote_internal.h"
#include "common/escape_internal.h"

#include <curl/curl.h>

#define ERROR_BODY_MAX 4096          /* an error response's body kept for its code */

typedef struct xfer {
    const sp__rio *r;
    sp__rio_get *g;          /* the GET it serves (PUT/fd: a private one; prefetch: &own) */
    sp__rio_get own;
    char *name_copy;         /* prefetch: own.name */
    int refs;                /* prefetch entries that point at it */
    struct xfer *next;       /* the thread's active list */
    const char *method;      /* "GET" or "PUT" */
    int fd;                  /* >= 0: the body goes to this file */
    const uint8_t *up;       /* PUT: the data */
    size_t up_len, up_pos;
    CURL *h;
    struct curl_slist *hdrs;
    char *url, *display;
    sp__buf body;
    size_t len;              /* body bytes received */
    uint64_t cap;            /* bound on the body */
    int too_big;
    int werr;                /* fd: the errno of a failed write (ENOSPC...), or 0 */
    int error_cut;           /* an error body stopped at ERROR_BODY_MAX */
    int no_length;           /* an unbounded whole object whose size was not declared */
    uint64_t total;          /* Content-Range's total, or Content-Length for a 200 */
    int have_total;
    long long declared;      /* the response's Content-Length (-1: none) */
    int attempt;
    uint64_t window;         /* ms: when the retry window began (the first try, or the
                                last that received SP__RIO_PROGRESS bytes) */
    uint64_t not_before;     /* ms: a retry waits until then */
    int state;               /* 0 waiting, 1 in flight, 2 finished */
    char errbuf[CURL_ERROR_SIZE];
} xfer;

enum { X_DONE, X_RETRY, X_FAIL };

/* libcurl's header and upload callbacks of transfer x (ud): the
 * response's Content-Length and Content-Range's total (a new "HTTP/"
 * status line resets them), and the next bytes of x->up. */
size_t sp__rio_on_header(char *p, size_t sz, size_t nm, void *ud);
size_t sp__rio_on_upload(char *p, size_t sz, size_t nm, void *ud);

/*! sp__rio_judge() : what transfer x, finished with libcurl's result res
 *  (`why` its text, curl_easy_strerror) and the HTTP status `status` (0: no
 *  response), came to: X_DONE, X_RETRY (a
 *  transient fault: retried after a backoff while the attempts last) or
 *  X_FAIL; on X_RETRY and X_FAIL x->g->rc and x->g->msg say why (the
 *  object named as x->display, escaped; never a credential). May cut a
 *  whole object's body down to the asked range (a server that ignored it). */
int sp__rio_judge(xfer *x, CURLcode res, long status, const char *why);

#endif
