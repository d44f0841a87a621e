/* remote_s3.h - the S3 protocol's settings (sp__rio's state of an s3://
 * URL, remote_s3.c), for remote_s3.c and the test of where they come from
 * (tests/test_remote_config.c).
 *
 * Not installed, not part of the API.
 */
#ifndef SEEDPIPE_REMOTE_S3_H
#define SEEDPIPE_REMOTE_S3_H

#include "dataset/remote_internal.h"

typedef struct sp__rio_s3 {
    char *bucket, *prefix;   /* prefix without leading or trailing '/' ("" at the top) */
    char *endpoint;          /* "scheme://host[:port]" (path of the endpoint kept) */
    int virtual_hosted;
    char *region;
    char *key_id, *secret, *token;   /* NULL: unsigned requests. Never printed. */
    char *sigv4;             /* "aws:amz:REGION:s3" */
    char *token_header;      /* "x-amz-security-token: TOKEN", or NULL */
} sp__rio_s3;

extern const sp__rio_proto sp__rio_proto_s3;

/* The S3 settings of a store (NULL for another protocol's). */
const sp__rio_s3 *sp__rio_s3_of(const sp__rio *r);

#endif
