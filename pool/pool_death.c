/* pool_death.c - how the worker pool charges a dead worker (pool.c's HOW IT
 * WORKS, "Deaths"; pool_shared.h): from waitpid's status alone, never
 * from timing, a death is a crash of the worker's own (charged to the
 * sample it computed), a death from outside (never charged), or the ring's
 * memory gone (the stream stops); and the short signal names the messages
 * use. Called by pool.c's consumer only; calls nothing of pool.c's.
 */
#include "pool/pool_shared.h"

#include <signal.h>
#include <sys/wait.h>

/* A short name for the signals a worker may die of ("signal 9" otherwise). */
const char *sp__pool_sig_name(unsigned sig) {
    switch (sig) {
    case SIGKILL: return " (SIGKILL)";
    case SIGTERM: return " (SIGTERM)";
    case SIGINT: return " (SIGINT)";
    case SIGHUP: return " (SIGHUP)";
    case SIGQUIT: return " (SIGQUIT)";
    case SIGTRAP: return " (SIGTRAP)";
    case SIGSEGV: return " (SIGSEGV)";
    case SIGBUS: return " (SIGBUS)";
    default: return "";
    }
}

/* Classify worker w's end from waitpid's r and status; *cause: the crash
 * word's cause field (signal, or exit status | SP__CRASH_EXITED). */
int sp__pool_death_kind(const sp_pool *pool, pid_t r, int status, uint32_t *cause) {
    *cause = 0;
    if (r <= 0) return SP__DEATH_OTHER;   /* reaped by someone else: nothing known */
    if (WIFEXITED(status)) {              /* it ended itself: exit() in a library, a sanitizer */
        *cause = SP__CRASH_EXITED | ((uint32_t)WEXITSTATUS(status) << 16);
        return SP__DEATH_CRASH;
    }
    if (!WIFSIGNALED(status)) return SP__DEATH_OTHER;
    unsigned sig = (unsigned)WTERMSIG(status);
    *cause = (sig & 0xff) << 16;
    switch (sig) {
    case SIGSEGV: case SIGILL: case SIGFPE: case SIGABRT:
        return SP__DEATH_CRASH;
    case SIGBUS:   /* the ring truncated under it, or a fault of its own */
        return sp__region_intact(&pool->region) ? SP__DEATH_CRASH : SP__DEATH_RING;
    default:       /* SIGKILL (OOM killer, operator), SIGTERM, SIGTRAP, ...: from outside */
        return SP__DEATH_OTHER;
    }
}
