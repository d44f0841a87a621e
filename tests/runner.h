/* runner.h - the C tests' case runner, in the manner of libuv's (test/runner.c).
 *
 * A test file lists its cases and hands them to sp_run_cases() from main:
 *
 *   static const sp_case cases[] = {
 *       SP_CASE(test_fingerprint),      <- one a line: CMake reads these lines
 *       SP_CASE(test_on_error),
 *   };
 *   int main(int argc, char **argv) {
 *       return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
 *   }
 *
 *   test_x                 every case, in order, each in its own process
 *   test_x NAME            exactly case NAME (what ctest runs: tests/CMakeLists.txt
 *                          registers every SP_CASE line as test `test_x.NAME`)
 *   test_x --filter SUB    the cases whose name contains SUB
 *   test_x --list          the case names, one a line
 *
 * HOW IT WORKS: setup (may be NULL) runs once in the runner, before any case;
 * every case is then forked, in its own process group, so a CHECK that
 * exits, a crash, or a leaked worker process of one case never touches the
 * next. A case that has not ended after SP_TEST_TIMEOUT seconds (environment;
 * default 300) is killed with its whole process group and reported as
 * "TIMEOUT name after N s". Exit status 77 from a case (SKIP(), or a
 * skipped corpus part: sp_test_status()) is a skip, not a failure. teardown
 * (may be NULL) runs once at the end, in the runner. The runner exits 1 if a
 * case failed or timed out, else 77 if one was skipped, else 0; an unknown
 * case name or a filter that matches nothing exits 2.
 *
 * Tests only (check.h's rules hold: library code never exits).
 */
#ifndef SP_TESTS_RUNNER_H
#define SP_TESTS_RUNNER_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

typedef struct sp_case {
    const char *name;
    void (*fn)(void);
} sp_case;

#define SP_CASE(fn) {#fn, fn}
#define SP_NCASES(a) (sizeof(a) / sizeof((a)[0]))

static inline double sp__runner_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Run one case in a child process; @return its exit status, 124 on timeout,
 * 128 + signal when it was killed by one. */
static inline int sp__runner_one(const sp_case *c, double timeout) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "runner: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        c->fn();
        fflush(stdout);
        exit(sp_test_status());
    }
    setpgid(pid, pid);   /* both sides, so a kill below cannot miss the group */
    double t0 = sp__runner_now();
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) return 1;
        if (sp__runner_now() - t0 > timeout) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
            }
            kill(-pid, SIGKILL);   /* anything the case left in its group */
            return 124;
        }
        struct timespec d = {0, 5 * 1000 * 1000};
        nanosleep(&d, NULL);
    }
    kill(-pid, SIGKILL);           /* a case's stray children do not outlive it */
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static inline int sp_run_cases(int argc, char **argv, const sp_case *cases, size_t n,
                               void (*setup)(void), void (*teardown)(void)) {
    const char *only = NULL, *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) {
            for (size_t k = 0; k < n; k++) printf("%s\n", cases[k].name);
            return 0;
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
            filter = argv[++i];
        } else if (argv[i][0] != '-' && !only) {
            only = argv[i];
        } else {
            fprintf(stderr, "usage: %s [NAME | --filter SUBSTRING | --list]\n", argv[0]);
            return 2;
        }
    }
    const char *tv = getenv("SP_TEST_TIMEOUT");
    double timeout = tv && atof(tv) > 0 ? atof(tv) : 300.0;
    size_t ran = 0, failed = 0, skipped = 0;
    int set_up = 0;
    for (size_t k = 0; k < n; k++) {
        const sp_case *c = &cases[k];
        if ((only && strcmp(c->name, only) != 0) || (filter && !strstr(c->name, filter)))
            continue;
        if (!set_up && setup) setup();
        set_up = 1;
        printf("[ RUN      ] %s\n", c->name);
        double t0 = sp__runner_now();
        int rc = sp__runner_one(c, timeout);
        double secs = sp__runner_now() - t0;
        ran++;
        if (rc == 0) {
            printf("[       OK ] %s (%.2f s)\n", c->name, secs);
        } else if (rc == 77) {
            skipped++;
            printf("[     SKIP ] %s (%.2f s)\n", c->name, secs);
        } else {
            failed++;
            if (rc == 124)
                printf("[  TIMEOUT ] %s after %.0f s (killed; SP_TEST_TIMEOUT=%.0f)\n", c->name,
                       secs, timeout);
            else if (rc > 128)
                printf("[   FAILED ] %s (killed by signal %d, %.2f s)\n", c->name, rc - 128, secs);
            else
                printf("[   FAILED ] %s (exit %d, %.2f s)\n", c->name, rc, secs);
        }
        fflush(stdout);
    }
    if (set_up && teardown) teardown();
    if (ran == 0) {
        fprintf(stderr, "%s: no case %s \"%s\" (--list shows them)\n", argv[0],
                only ? "named" : "matches", only ? only : filter ? filter : "");
        return 2;
    }
    printf("%zu case%s: %zu passed, %zu failed, %zu skipped\n", ran, ran == 1 ? "" : "s",
           ran - failed - skipped, failed, skipped);
    return failed ? 1 : skipped ? 77 : 0;
}

#endif
