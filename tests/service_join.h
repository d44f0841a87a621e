/* service_join.h - join_status(): a forked service's exit status, for the
 * tests that fork one (sp__service_join(), service.h); -1 when the join
 * itself failed (its message printed). */
#ifndef SEEDPIPE_TESTS_SERVICE_JOIN_H
#define SEEDPIPE_TESTS_SERVICE_JOIN_H

#include <stdio.h>

#include "seedpipe/service.h"
#include "service/service_internal.h"

static inline int join_status(pid_t pid, int timeout_ms) {
    sp_error err = {0};
    int status;
    if (sp__service_join(pid, timeout_ms, &status, &err) != SP_OK) {
        fprintf(stderr, "sp__service_join: %s\n", err.msg);
        return -1;
    }
    return status;
}
#endif
