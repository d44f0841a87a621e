/* service_join.h - join_status(): a forked service's exit status, for the
 * tests that fork one (sp_service_join(), service.h); -1 when the join
 * itself failed (its message printed). */
#ifndef SEEDPIPE_TESTS_SERVICE_JOIN_H
#define SEEDPIPE_TESTS_SERVICE_JOIN_H

#include <stdio.h>

#include "seedpipe/service.h"

static inline int join_status(pid_t pid, int timeout_ms) {
    sp_error err = {0};
    int status;
    if (sp_service_join(pid, timeout_ms, &status, &err) != SP_OK) {
        fprintf(stderr, "sp_service_join: %s\n", err.msg);
        return -1;
    }
    return status;
}
#endif
