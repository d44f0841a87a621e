/* test_runner.c - the C tests' case runner (tests/runner.h) tested on itself.
 *
 * This file holds a second, inner list of cases that pass, skip, fail, die
 * on a signal and hang (they are not SP_CASE lines, so ctest does not
 * register them); its real cases run this executable as `test_runner
 * --inner ...` and check what the runner says and returns:
 *  1. a hanging case is killed after SP_TEST_TIMEOUT seconds and reported
 *     by name ("TIMEOUT hang_forever"), with the process it forked;
 *  2. pass / skip / fail / signal are told apart, by name, and the run
 *     exits 1; skips alone exit 77; passes alone 0;
 *  3. `NAME` runs one case, `--filter` the matching ones, `--list` names
 *     them; an unknown name exits 2.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "runner.h"

/* ---- the inner cases -------------------------------------------------------- */

static void inner_ok(void) { printf("inner ok ran\n"); }
static void inner_skip(void) { SKIP("inner skip"); }
static void inner_fail(void) { CHECK(1 + 1 == 3); }
static void inner_signal(void) { kill(getpid(), SIGKILL); }
static void inner_hang(void) {
    pid_t kid = fork();
    if (kid == 0) {
        for (;;) pause();
    }
    FILE *f = fopen(getenv("SP_RUNNER_PIDFILE"), "w");
    CHECK(f && fprintf(f, "%d\n", (int)kid) > 0 && fclose(f) == 0);
    for (;;) pause();
}

static const sp_case inner[] = {
    {"ok_one", inner_ok},   {"ok_two", inner_ok},       {"skip_me", inner_skip},
    {"fail_me", inner_fail}, {"signal_me", inner_signal}, {"hang_forever", inner_hang},
};

/* ---- running the inner runner ------------------------------------------------ */

static char g_out[4096];

/* Run `self --inner ARGS` with env prefix ENV; its output in g_out. */
static int inner_run(const char *env, const char *args) {
    char path[] = "/tmp/sp-test-runner-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = 0;
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "%s '%s' --inner %s >'%s' 2>&1", env, self, args, path);
    int st = system(cmd);
    FILE *f = fopen(path, "r");
    CHECK(f);
    size_t k = fread(g_out, 1, sizeof g_out - 1, f);
    g_out[k] = 0;
    fclose(f);
    unlink(path);
    CHECK(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void test_timeout_kills_and_names(void) {
    char pidfile[] = "/tmp/sp-test-runner-pid-XXXXXX";
    int fd = mkstemp(pidfile);
    CHECK(fd >= 0);
    close(fd);
    char env[256];
    snprintf(env, sizeof env, "SP_TEST_TIMEOUT=1 SP_RUNNER_PIDFILE='%s'", pidfile);
    double t0 = sp__runner_now();
    int rc = inner_run(env, "hang_forever");
    double secs = sp__runner_now() - t0;
    CHECK_MSG(rc == 1, "exit %d: %s", rc, g_out);
    CHECK_MSG(strstr(g_out, "[  TIMEOUT ] hang_forever after") != NULL, "%s", g_out);
    CHECK_MSG(secs < 10, "took %.1f s", secs);
    FILE *f = fopen(pidfile, "r");
    int kid = 0;
    CHECK(f && fscanf(f, "%d", &kid) == 1 && kid > 0);
    fclose(f);
    unlink(pidfile);
    /* The case's own child went with it (it may linger as a zombie of init
     * for a moment: not running either way). */
    int gone = 0;
    for (int i = 0; i < 200 && !gone; i++) {
        char p[64], st[256] = "";
        snprintf(p, sizeof p, "/proc/%d/stat", kid);
        FILE *s = fopen(p, "r");
        if (!s) {
            gone = 1;
            break;
        }
        if (fgets(st, sizeof st, s) && strstr(st, ") Z ")) gone = 1;
        fclose(s);
        if (!gone) usleep(10000);
    }
    CHECK_MSG(gone, "pid %d, forked by the hanging case, is still running", kid);
    printf("a hanging case: killed after 1 s with its child, reported as TIMEOUT hang_forever\n");
}

static void test_outcomes(void) {
    int rc = inner_run("", "--filter _me");
    CHECK_MSG(rc == 1, "exit %d: %s", rc, g_out);
    CHECK(strstr(g_out, "[     SKIP ] skip_me") != NULL);
    CHECK(strstr(g_out, "[   FAILED ] fail_me (exit 1") != NULL);
    CHECK(strstr(g_out, "CHECK failed: 1 + 1 == 3") != NULL);
    CHECK(strstr(g_out, "[   FAILED ] signal_me (killed by signal 9") != NULL);
    CHECK(strstr(g_out, "3 cases: 0 passed, 2 failed, 1 skipped") != NULL);
    CHECK(strstr(g_out, "ok_one") == NULL && strstr(g_out, "hang_forever") == NULL);
    CHECK(inner_run("", "skip_me") == 77);
    rc = inner_run("", "--filter ok_");
    CHECK_MSG(rc == 0 && strstr(g_out, "2 cases: 2 passed") != NULL, "exit %d: %s", rc, g_out);
    printf("outcomes: OK, SKIP, FAILED (exit, signal) by name; exit 1 / 77 / 0\n");
}

static void test_selection(void) {
    CHECK(inner_run("", "--list") == 0);
    CHECK(strcmp(g_out, "ok_one\nok_two\nskip_me\nfail_me\nsignal_me\nhang_forever\n") == 0);
    CHECK(inner_run("", "ok_two") == 0);
    CHECK(strstr(g_out, "[ RUN      ] ok_two") && !strstr(g_out, "ok_one"));
    CHECK(inner_run("", "no_such_case") == 2);
    CHECK(strstr(g_out, "no case named \"no_such_case\"") != NULL);
    CHECK(inner_run("", "--filter zzz") == 2);
    printf("selection: NAME, --filter, --list, unknown names refused\n");
}

static const sp_case cases[] = {
    SP_CASE(test_timeout_kills_and_names),
    SP_CASE(test_outcomes),
    SP_CASE(test_selection),
};

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--inner"))
        return sp_run_cases(argc - 1, argv + 1, inner, SP_NCASES(inner), NULL, NULL);
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}
