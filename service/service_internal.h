/* service/service_internal.h - the library-internal part of seedpipe/service.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/service.h.
 */
#ifndef SEEDPIPE_SERVICE_SERVICE_INTERNAL_H
#define SEEDPIPE_SERVICE_SERVICE_INTERNAL_H

#include "seedpipe/service.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__service_fork() : run a service in a child process (for tests, verify
 *  and tools): the child creates it, reports success or the error through a
 *  pipe, serves, and exits 0 (end or SIGTERM/SIGINT/parent death, which it
 *  turns into a stop) or 1. Returns once the region is ready.
 *  @return 0 (*pid set) or the child's create error (child reaped). */
int sp__service_fork(const sp_loader_config *lcfg, const sp_service_config *scfg, pid_t *pid,
                     sp_error *err);

/*! sp__service_join() : wait for a forked service to exit, at most
 *  timeout_ms (then SIGTERM, and SIGKILL 2 s later); *status (may be
 *  NULL) is then its exit status (0..255), or 128 + signal if a signal
 *  ended it. @return 0, SP_EINVAL (pid <= 0 or timeout_ms < 0) or SP_EIO
 *  (waitpid failed: not our child, or already reaped), *status then -1. */
int sp__service_join(pid_t pid, int timeout_ms, int *status, sp_error *err);

#ifdef __cplusplus
}
#endif

#endif
