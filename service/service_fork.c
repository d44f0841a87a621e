/* service_fork.c - a service in a child process: sp__service_fork() creates
 * and runs it there, reporting creation errors back through a pipe, and
 * sp__service_join() waits for it, with SIGTERM then SIGKILL past the
 * timeout (include/seedpipe/service.h).
 *
 * Calls sp_service_create(), sp_service_run() and sp_service_destroy()
 * (service.c) only, in the child; nothing calls back.
 */
#include "seedpipe/service.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool/ring_layout.h"   /* sp__now_ns() */
#include "common/trace_internal.h"
#include "service/service_internal.h"

/* ---- a service in a child process --------------------------------------------------- */

static volatile sig_atomic_t child_stop;
static void on_stop(int sig) {
    (void)sig;
    child_stop = 1;
}

int sp__service_fork(const sp_loader_config *lcfg, const sp_service_config *scfg, pid_t *pid,
                     sp_error *err) {
    int fds[2];
    if (pipe(fds) != 0) return sp_error_set(err, SP_EIO, "service: pipe: %s", strerror(errno));
    pid_t parent = getpid();
    pid_t p = fork();
    if (p < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return sp_error_set(err, SP_EIO, "service: fork: %s", strerror(e));
    }
    if (p == 0) {
        close(fds[0]);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);
        sp__trace_child("service");
        sp_service *svc;
        sp_error e;
        sp_error_clear(&e);
        char buf[1 + SP_ERROR_MSG_MAX];
        if (sp_service_create(lcfg, scfg, &svc, &e) != 0) {
            buf[0] = (char)(-e.code);
            size_t n = strlen(e.msg);
            memcpy(buf + 1, e.msg, n);
            if (write(fds[1], buf, n + 1) < 0) _exit(1);
            _exit(1);
        }
        buf[0] = 0;
        if (write(fds[1], buf, 1) < 0) child_stop = 1;
        close(fds[1]);
        int rc = sp_service_run(svc, &child_stop, &e);
        sp_service_destroy(svc);
        _exit(rc == 0 || rc == SP_STOPPED ? 0 : 1);
    }
    close(fds[1]);
    sp__trace_spawned((int)p, "service");
    char buf[1 + SP_ERROR_MSG_MAX];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
        if (got == sizeof buf - 1 || (got >= 1 && buf[0] == 0)) break;
    }
    close(fds[0]);
    if (got >= 1 && buf[0] == 0) {
        *pid = p;
        return SP_OK;
    }
    while (waitpid(p, NULL, 0) < 0 && errno == EINTR) {
    }
    if (got == 0) return sp_error_set(err, SP_EIO, "service: the child died before it was ready");
    buf[got] = '\0';
    return sp_error_set(err, -(int)(unsigned char)buf[0], "%s", buf + 1);
}

int sp__service_join(pid_t pid, int timeout_ms, int *status, sp_error *err) {
    int ws = 0;
    uint64_t t0 = sp__now_ns(), limit = (uint64_t)timeout_ms * 1000000ull;
    int phase = 0;
    if (status) *status = -1;
    if (pid <= 0 || timeout_ms < 0)
        return sp_error_set(err, SP_EINVAL, "service join: pid %d, timeout %d ms: need both > 0 "
                            "(the timeout >= 0)", (int)pid, timeout_ms);
    for (;;) {
        pid_t r = waitpid(pid, &ws, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR)
            return sp_error_set(err, SP_EIO, "service join: waitpid(%d): %s", (int)pid,
                                strerror(errno));
        uint64_t el = sp__now_ns() - t0;
        if (phase == 0 && el > limit) {
            kill(pid, SIGTERM);
            phase = 1;
        } else if (phase == 1 && el > limit + 2000000000ull) {
            kill(pid, SIGKILL);
            phase = 2;
        }
        usleep(1000);
    }
    if (status) *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    return SP_OK;
}
