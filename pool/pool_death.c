/* pool_death.c - how the worker pool charges a dead worker (pool.c's HOW IT
 * WORKS, "Deaths"; pool_shared.h): from waitpid's status and what the
 * worker's own crash-signal handler recorded, never from timing, a death
 * is a crash of the worker's own (charged to the sample it computed), a
 * death from outside (never charged), or the ring's memory gone (the
 * stream stops); and the short signal names the messages use. Called by
 * pool.c's consumer (sp__pool_death_kind) and pool_worker.c's workers
 * (sp__pool_death_arm, the test crash) only; calls nothing of theirs.
 *
 * A crash signal from outside. SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT
 * are what a fault or abort() raises, but a watchdog or an operator can
 * send them too (kill -ABRT PID): the exit status is the same. Each worker
 * therefore installs a handler for them (SA_SIGINFO) that reads si_code:
 * SI_USER (kill), SI_QUEUE (sigqueue) and SI_TKILL (tgkill) with an
 * si_pid other than the worker's own mean another process sent it; it
 * stores the signal in the worker's record of the ring (`outside`, one
 * atomic word in shared memory) before anything else. Then, sent or
 * raised, the handler restores the default action and raises the signal
 * again: it is blocked while the handler runs, so it is delivered as the
 * handler returns and the worker dies of it as it would have without the
 * handler (a fault is not re-executed first; abort() and raise() never
 * return). The handler calls only async-signal-safe functions (getpid,
 * sigaction, raise) and a lock-free atomic store, and keeps errno. The
 * consumer reaps the worker, reads and clears the word, and a death by the
 * signal recorded there is one from outside: redone, never charged, like
 * SIGKILL. A worker whose handler never ran (a stack overflow: the kernel
 * kills it with SIGSEGV directly), or a signal raised by the worker itself,
 * leaves the word 0: a crash, as before.
 */
#include "pool/pool_shared.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The crash signals a worker's handler looks at. */
static const int crash_sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* This worker's `outside` word (set by sp__pool_death_arm in the worker). */
static _Atomic uint32_t *outside_word;

static void on_crash_signal(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    int saved = errno;
    if (si && (si->si_code == SI_USER || si->si_code == SI_QUEUE || si->si_code == SI_TKILL) &&
        si->si_pid != getpid() && outside_word)
        atomic_store(outside_word, (uint32_t)sig);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);   /* blocked here: delivered, by the default action, as we return */
    errno = saved;
}

int sp__pool_death_arm(sp__ring_hdr *h, uint32_t w) {
    outside_word = &h->workers[w].outside;
    atomic_store(outside_word, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_crash_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    int rc = 0;
    for (size_t k = 0; k < sizeof crash_sigs / sizeof crash_sigs[0]; k++)
        if (sigaction(crash_sigs[k], &sa, NULL) != 0) rc = -1;
    return rc;
}

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

/* Classify worker w's end from waitpid's r and status and its `outside`
 * word; *cause: the crash word's cause field (signal, or exit status |
 * SP__CRASH_EXITED). */
int sp__pool_death_kind(const sp_pool *pool, uint32_t w, pid_t r, int status, uint32_t *cause) {
    *cause = 0;
    uint32_t outside = atomic_exchange(&pool->h->workers[w].outside, 0);
    if (r <= 0) return SP__DEATH_OTHER;   /* reaped by someone else: nothing known */
    if (WIFEXITED(status)) {              /* it ended itself: exit() in a library, a sanitizer */
        *cause = SP__CRASH_EXITED | ((uint32_t)WEXITSTATUS(status) << 16);
        return SP__DEATH_CRASH;
    }
    if (!WIFSIGNALED(status)) return SP__DEATH_OTHER;
    unsigned sig = (unsigned)WTERMSIG(status);
    *cause = (sig & 0xff) << 16;
    if (outside != 0 && outside == sig) return SP__DEATH_OTHER;   /* sent, not raised */
    switch (sig) {
    case SIGSEGV: case SIGILL: case SIGFPE: case SIGABRT:
        return SP__DEATH_CRASH;
    case SIGBUS:   /* the ring truncated under it, or a fault of its own */
        return sp__region_intact(&pool->region) ? SP__DEATH_CRASH : SP__DEATH_RING;
    default:       /* SIGKILL (OOM killer, operator), SIGTERM, SIGTRAP, ...: from outside */
        return SP__DEATH_OTHER;
    }
}

#ifdef SEEDPIPE_TEST_HOOKS
/* The crash hook's death by sig (SEEDPIPE_TEST_CRASH_FROM, pool.h): 0 raised
 * by the worker (through its handlers), 1 a real fault where one exists
 * (SIGSEGV: a store through NULL, SIGABRT: abort(), SIGILL: a trap
 * instruction; raised otherwise), 2 sent by another process: a child of
 * the worker kill()s it and exits, as a watchdog would. */
void sp__pool_test_crash(int sig, int from) {
    if (from == 2) {
        pid_t me = getpid(), c = fork();
        if (c == 0) {
            kill(me, sig);
            _exit(0);
        }
        if (c > 0) waitpid(c, NULL, 0);
        for (;;) pause();   /* the signal is on its way */
    }
    if (from == 1) {
        if (sig == SIGSEGV) {
            volatile int *volatile nowhere = NULL;
            *nowhere = 1;
        }
        if (sig == SIGABRT) abort();
        if (sig == SIGILL) __builtin_trap();
    }
    raise(sig);
}
#endif
