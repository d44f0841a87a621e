/* test_pool_ring.c - the worker pool's ring memory: reserved at creation, or
 * a named error there.
 *
 * The pool's own ring is a memfd whose pages are reserved (posix_fallocate)
 * inside sp__pool_create(), after the workers are forked. A reservation the
 * memory cannot give must fail the creation cleanly, never later as a
 * worker's SIGBUS or a failed release. The failure is made real, without a
 * hook in the library: a seccomp filter installed in the case's process
 * (inherited by its forked workers and by an exec'd tool) makes every
 * fallocate(2) fail with ENOMEM, as a memory cgroup at its limit does.
 *  - test_reserve_fails: sp__pool_create() returns SP_ENOMEM, its message
 *    names the ring, the bytes and what to change; no pool, no worker left
 *    (every child reaped), no descriptor or mapping of the ring left; a
 *    2-worker pool the same;
 *  - test_reserve_fails_cli: `seedpipe digest --workers 2` under the filter
 *    exits 1 with that message and prints no digest line.
 * Where seccomp filters are not allowed (an old kernel, a sandbox that
 * forbids them) the cases exit 77 (SKIP).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/pool.h"
#include "seedpipe/shapes.h"
#include "pool/pool_internal.h"

static char g_tmp[256], shapes[300];

static const char *PIPE = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5";

#if defined(__x86_64__)
#define SP_TEST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SP_TEST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/* fallocate(2) fails with ENOMEM from now on, in this process and every
 * child; SKIP where a filter cannot be installed. */
static void fail_fallocate(void) {
#ifdef SP_TEST_AUDIT_ARCH
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SP_TEST_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fallocate, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOMEM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        printf("SKIP: no seccomp filter here (%s)\n", strerror(errno));
        exit(77);
    }
    /* The filter works: fallocate on a file of our own fails as planned. */
    char path[320];
    snprintf(path, sizeof path, "%s/probe", g_tmp);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(posix_fallocate(fd, 0, 4096) == ENOMEM);
    close(fd);
    unlink(path);
#else
    SKIP("no seccomp filter for this architecture in the test");
#endif
}

/* Descriptors and mappings of the pool's ring (a memfd, "seedpipe-ring")
 * this process holds. */
static int ring_refs(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        char link[300], target[4096];
        if (e->d_name[0] == '.') continue;
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k <= 0) continue;
        target[k] = '\0';
        n += strstr(target, "memfd:seedpipe-ring") != NULL;
    }
    closedir(d);
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[4096];
    while (fgets(line, sizeof line, f)) n += strstr(line, "memfd:seedpipe-ring") != NULL;
    fclose(f);
    return n;
}

static void test_reserve_fails(void) {
    fail_fallocate();
    sp_loader_config c;
    sp_loader_config_default(&c);
    c.dataset = shapes;
    c.pipeline = PIPE;
    c.seed = 3;
    c.batch_size = 8;
    for (int workers = 1; workers <= 2; workers++) {
        sp_pool_config pc = {workers, 3, 2, NULL, NULL, NULL};
        sp_pool *pool = (sp_pool *)&pc;   /* must come back NULL */
        sp_error err;
        sp_error_clear(&err);
        int rc = sp__pool_create(&c, &pc, &pool, &err);
        printf("  %d worker(s): %d: %s\n", workers, rc, err.msg);
        CHECK_MSG(rc == SP_ENOMEM, "rc %d: %s", rc, err.msg);
        CHECK(pool == NULL);
        CHECK_MSG(strstr(err.msg, "worker pool ring: cannot reserve") &&
                      strstr(err.msg, "MB of shared memory") && strstr(err.msg, "--ring") &&
                      strstr(err.msg, strerror(ENOMEM)),
                  "%s", err.msg);
        errno = 0;
        CHECK_MSG(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD, "a worker was left");
        CHECK_MSG(ring_refs() == 0, "the ring's memfd is still open or mapped");
    }
}

static void test_reserve_fails_cli(void) {
    const char *bin = getenv("SEEDPIPE_BIN");
    if (!bin) SKIP("SEEDPIPE_BIN is not set");
    int out[2];
    CHECK(pipe(out) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(out[1], 2);
        close(out[0]);
        close(out[1]);
        fail_fallocate();
        execl(bin, bin, "digest", shapes, "--pipeline", PIPE, "--seed", "3", "--batch-size",
              "8", "--epochs", "2", "--workers", "2", "--ring", "3", "--out", "/dev/null",
              (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char text[8192];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof text - 1 && (k = read(out[0], text + n, sizeof text - 1 - n)) > 0)
        n += (size_t)k;
    text[n] = '\0';
    close(out[0]);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("  seedpipe digest: status %d: %s", WIFEXITED(st) ? WEXITSTATUS(st) : -1, text);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) exit(77);   /* the child's SKIP */
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st, text);
    CHECK_MSG(strstr(text, "worker pool ring: cannot reserve") && !strstr(text, " images in ") &&
                  !strstr(text, "died"),
              "%s", text);
}

static void setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sp-test-pool-ring-XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    snprintf(shapes, sizeof shapes, "%s/shapes", g_tmp);
    sp_shapes_opts o = {24, 32, 3};
    sp_error err;
    CHECK_OK(sp_shapes_make(shapes, &o, &err), &err);
}

static void teardown(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    CHECK(system(cmd) == 0);
}

static const sp_case cases[] = {
    SP_CASE(test_reserve_fails),
    SP_CASE(test_reserve_fails_cli),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}
