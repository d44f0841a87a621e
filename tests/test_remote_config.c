/* test_remote_config.c - where a remote object is (dataset/remote_config.c):
 * URLs split into store and leaf, request URLs (percent-encoding, S3 path-
 * style and virtual-hosted addressing, the AWS default endpoint), S3
 * settings and credentials from the environment and from the shared
 * credentials and config files with a named profile, and refusals (a URL
 * with user:password@, no host, an unknown addressing style, a profile in
 * no file, an S3 endpoint over plain http:// without
 * SEEDPIPE_S3_ALLOW_HTTP=1). No network: tests/test_remote.py talks to real
 * servers.
 *
 * Cases (tests/runner.h): test_http_urls, test_s3_env, test_s3_profile,
 * test_s3_plain_http.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "dataset/remote_internal.h"
#include "dataset/remote_s3.h"   /* the S3 settings */
#include "runner.h"

static char g_dir[64] = "/tmp/sp-test-remote-cfg-XXXXXX";

static void clear_env(void) {
    static const char *const vars[] = {
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
        "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE", "SEEDPIPE_S3_ADDRESSING", "SEEDPIPE_REMOTE_RETRIES",
        "SEEDPIPE_REMOTE_TIMEOUT", "SEEDPIPE_REMOTE_LOW_SPEED", "SEEDPIPE_REMOTE_LOW_SPEED_TIME",
        "SEEDPIPE_REMOTE_RETRY_TIME", "SEEDPIPE_REMOTE_INDEX_MAX", NULL};
    for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
    /* the endpoints here are plain http:// (no request is sent): opted in,
     * test_s3_plain_http checks the refusal */
    setenv("SEEDPIPE_S3_ALLOW_HTTP", "1", 1);
    char none[128];
    snprintf(none, sizeof none, "%s/none", g_dir);
    setenv("AWS_SHARED_CREDENTIALS_FILE", none, 1);
    setenv("AWS_CONFIG_FILE", none, 1);
}

static sp__rio *open_ok(const char *url, const char *want_leaf) {
    sp__rio *r = NULL;
    char *leaf = NULL;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp__rio_create(url, &r, &leaf, &err), &err);
    CHECK_MSG(strcmp(leaf, want_leaf) == 0, "%s: leaf \"%s\", want \"%s\"", url, leaf, want_leaf);
    free(leaf);
    return r;
}

static void expect_url(const sp__rio *r, const char *name, const char *want) {
    char *u = sp__rio_request_url(r, name);
    CHECK_MSG(u && strcmp(u, want) == 0, "request URL \"%s\", want \"%s\"", u ? u : "(null)", want);
    free(u);
}

static void expect_refused(const char *url, int code, const char *needle) {
    sp__rio *r = NULL;
    char *leaf = NULL;
    sp_error err;
    sp_error_clear(&err);
    CHECK_MSG(sp__rio_create(url, &r, &leaf, &err) == code, "%s: accepted (or another code)", url);
    CHECK_MSG(r == NULL && leaf == NULL, "%s: outputs set on failure", url);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", url, err.msg,
              needle);
}

static void test_http_urls(void) {
    clear_env();
    CHECK(sp__rio_is_url("s3://b/k") && sp__rio_is_url("http://h/x") && sp__rio_is_url("https://h/"));
    CHECK(!sp__rio_is_url("/data/x.tar") && !sp__rio_is_url("s3:/b") && !sp__rio_is_url("ftp://h/x"));
    sp__rio *r = open_ok("http://127.0.0.1:8080/data/sub/train-{000..009}.tar", "train-{000..009}.tar");
    CHECK(!sp__rio_s3_of(r) && strcmp(r->proto->name, "http") == 0 && strcmp(r->display, "http://127.0.0.1:8080/data/sub") == 0);
    expect_url(r, "train-001.tar", "http://127.0.0.1:8080/data/sub/train-001.tar");
    expect_url(r, "a b+c%.tar", "http://127.0.0.1:8080/data/sub/a%20b%2Bc%25.tar");
    char *d = sp__rio_display(r, "x.tar");
    CHECK(d && strcmp(d, "http://127.0.0.1:8080/data/sub/x.tar") == 0);
    free(d);
    sp__rio_destroy(r);
    r = open_ok("https://host.example/shards/", "");
    expect_url(r, "seedpipe.index", "https://host.example/shards/seedpipe.index");
    sp__rio_destroy(r);
    sp__rio_destroy(NULL);
    expect_refused("http://user:pw@127.0.0.1/x.tar", SP_EINVAL, "credentials in a URL are refused");
    expect_refused("http:///x.tar", SP_EINVAL, "no host");
    expect_refused("http://h/a b.tar", SP_EINVAL, "space or control byte");
    expect_refused("s3://", SP_EINVAL, "no host");
    expect_refused("s3://bucket", SP_EINVAL, "expected s3://BUCKET/");
    setenv("SEEDPIPE_REMOTE_RETRIES", "101", 1);
    expect_refused("http://h/x.tar", SP_EINVAL, "SEEDPIPE_REMOTE_RETRIES=101");
    unsetenv("SEEDPIPE_REMOTE_RETRIES");
    /* the deadlines and bounds: defaults, then set, then refused by name */
    r = open_ok("http://h/x.tar", "x.tar");
    CHECK(r->retries == 10 && r->timeout_ms == 300000 && r->low_speed == 1024 &&
          r->low_speed_s == 4 && r->retry_ms == 8000 && r->index_max == (128u << 20) &&
          r->prefetch_max == (64u << 20));
    sp__rio_destroy(r);
    setenv("SEEDPIPE_REMOTE_TIMEOUT", "7", 1);
    setenv("SEEDPIPE_REMOTE_LOW_SPEED", "100", 1);
    setenv("SEEDPIPE_REMOTE_LOW_SPEED_TIME", "2", 1);
    setenv("SEEDPIPE_REMOTE_RETRY_TIME", "0", 1);
    setenv("SEEDPIPE_REMOTE_INDEX_MAX", "1M", 1);
    r = open_ok("http://h/x.tar", "x.tar");
    CHECK(r->timeout_ms == 7000 && r->low_speed == 100 && r->low_speed_s == 2 &&
          r->retry_ms == 0 && r->index_max == (1u << 20));
    sp__rio_destroy(r);
    setenv("SEEDPIPE_REMOTE_TIMEOUT", "0", 1);
    expect_refused("http://h/x.tar", SP_EINVAL, "SEEDPIPE_REMOTE_TIMEOUT=0: expected 1..86400");
    unsetenv("SEEDPIPE_REMOTE_TIMEOUT");
    setenv("SEEDPIPE_REMOTE_LOW_SPEED_TIME", "2s", 1);
    expect_refused("http://h/x.tar", SP_EINVAL, "SEEDPIPE_REMOTE_LOW_SPEED_TIME=2s: expected");
    unsetenv("SEEDPIPE_REMOTE_LOW_SPEED_TIME");
    setenv("SEEDPIPE_REMOTE_INDEX_MAX", "5G", 1);
    expect_refused("http://h/x.tar", SP_EINVAL, "SEEDPIPE_REMOTE_INDEX_MAX=5G: expected");
    static const char *const lim[] = {"SEEDPIPE_REMOTE_LOW_SPEED", "SEEDPIPE_REMOTE_LOW_SPEED_TIME",
                                      "SEEDPIPE_REMOTE_RETRY_TIME", "SEEDPIPE_REMOTE_INDEX_MAX", NULL};
    for (int i = 0; lim[i]; i++) unsetenv(lim[i]);
}

static void test_s3_env(void) {
    clear_env();
    /* AWS itself: virtual-hosted, the region's endpoint, unsigned without keys */
    setenv("AWS_REGION", "eu-west-1", 1);
    sp__rio *r = open_ok("s3://my-bucket/pre/fix/shard-{0..3}.tar", "shard-{0..3}.tar");
    CHECK(sp__rio_s3_of(r) && sp__rio_s3_of(r)->virtual_hosted && sp__rio_s3_of(r)->key_id == NULL);
    CHECK(strcmp(r->display, "s3://my-bucket/pre/fix") == 0);
    CHECK(strcmp(sp__rio_s3_of(r)->sigv4, "aws:amz:eu-west-1:s3") == 0);
    expect_url(r, "shard-1.tar", "https://my-bucket.s3.eu-west-1.amazonaws.com/pre/fix/shard-1.tar");
    sp__rio_destroy(r);
    /* another endpoint: path-style; keys and token from the environment */
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
    setenv("AWS_ACCESS_KEY_ID", "AKIDTEST", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t", 1);
    setenv("AWS_SESSION_TOKEN", "tok", 1);
    r = open_ok("s3://bkt/x.tar", "x.tar");
    CHECK(!sp__rio_s3_of(r)->virtual_hosted && strcmp(sp__rio_s3_of(r)->key_id, "AKIDTEST") == 0 &&
          strcmp(sp__rio_s3_of(r)->secret, "s3cr3t") == 0 && strcmp(sp__rio_s3_of(r)->token, "tok") == 0);
    CHECK(strcmp(sp__rio_s3_of(r)->prefix, "") == 0 && strcmp(r->display, "s3://bkt") == 0);
    expect_url(r, "x.tar", "http://127.0.0.1:9000/bkt/x.tar");
    sp__rio_destroy(r);
    setenv("AWS_ENDPOINT_URL_S3", "http://localhost:9001", 1);   /* wins over AWS_ENDPOINT_URL */
    setenv("SEEDPIPE_S3_ADDRESSING", "virtual", 1);
    r = open_ok("s3://bkt/a/", "");
    expect_url(r, "b.tar", "http://bkt.localhost:9001/a/b.tar");
    sp__rio_destroy(r);
    setenv("SEEDPIPE_S3_ADDRESSING", "sideways", 1);
    expect_refused("s3://bkt/a/", SP_EINVAL, "addressing style \"sideways\"");
    unsetenv("SEEDPIPE_S3_ADDRESSING");
    setenv("AWS_ENDPOINT_URL_S3", "ftp://h", 1);
    expect_refused("s3://bkt/a/", SP_EINVAL, "expected http://HOST");
    setenv("AWS_ENDPOINT_URL_S3", "http://k:s@h", 1);
    expect_refused("s3://bkt/a/", SP_EINVAL, "credentials in a URL are refused");
}

/* S3 over plain http:// sends signatures and the session token in clear:
 * refused by name unless SEEDPIPE_S3_ALLOW_HTTP=1 (loopback too); a value
 * other than 0 or 1 is an error; https:// needs no opt-in. */
static void test_s3_plain_http(void) {
    clear_env();
    setenv("AWS_ACCESS_KEY_ID", "AKIDTEST", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t", 1);
    static const char *const eps[] = {"http://127.0.0.1:9000", "http://localhost:9000",
                                      "http://[::1]:9000", "http://store.example", NULL};
    for (int i = 0; eps[i]; i++) {
        setenv("AWS_ENDPOINT_URL", eps[i], 1);
        unsetenv("SEEDPIPE_S3_ALLOW_HTTP");
        expect_refused("s3://bkt/x.tar", SP_EINVAL, "plain http:// is refused");
        expect_refused("s3://bkt/x.tar", SP_EINVAL, "SEEDPIPE_S3_ALLOW_HTTP=1");
        setenv("SEEDPIPE_S3_ALLOW_HTTP", "0", 1);
        expect_refused("s3://bkt/x.tar", SP_EINVAL, "plain http:// is refused");
        setenv("SEEDPIPE_S3_ALLOW_HTTP", "yes", 1);
        expect_refused("s3://bkt/x.tar", SP_EINVAL, "SEEDPIPE_S3_ALLOW_HTTP=yes: expected 0 or 1");
        setenv("SEEDPIPE_S3_ALLOW_HTTP", "1", 1);
        sp__rio_destroy(open_ok("s3://bkt/x.tar", "x.tar"));
    }
    unsetenv("SEEDPIPE_S3_ALLOW_HTTP");
    setenv("AWS_ENDPOINT_URL", "https://127.0.0.1:9000", 1);
    sp__rio_destroy(open_ok("s3://bkt/x.tar", "x.tar"));
    unsetenv("AWS_ENDPOINT_URL");   /* AWS itself: https */
    sp__rio_destroy(open_ok("s3://bkt/x.tar", "x.tar"));
    /* plain http:// datasets (no signature to leak) need no opt-in */
    sp__rio_destroy(open_ok("http://127.0.0.1:9000/d/x.tar", "x.tar"));
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

static void test_s3_profile(void) {
    clear_env();
    char cred[128], conf[128];
    snprintf(cred, sizeof cred, "%s/credentials", g_dir);
    snprintf(conf, sizeof conf, "%s/config", g_dir);
    write_file(cred, "# test\n[default]\naws_access_key_id = DEFKEY\naws_secret_access_key=defsecret\n"
                     "\n[other]\r\naws_access_key_id = OTHERKEY\r\naws_secret_access_key = other/secret+x\r\n"
                     "aws_session_token = othertoken\r\n");
    write_file(conf, "[default]\nregion = us-west-2\n[profile other]\nregion = ap-south-1\n"
                     "endpoint_url = http://127.0.0.1:7000\ns3 =\n  addressing_style = virtual\n");
    setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
    setenv("AWS_CONFIG_FILE", conf, 1);
    sp__rio *r = open_ok("s3://b/k.tar", "k.tar");
    CHECK(strcmp(sp__rio_s3_of(r)->key_id, "DEFKEY") == 0 && strcmp(sp__rio_s3_of(r)->secret, "defsecret") == 0 && !sp__rio_s3_of(r)->token);
    CHECK(strcmp(sp__rio_s3_of(r)->region, "us-west-2") == 0 && sp__rio_s3_of(r)->virtual_hosted);
    sp__rio_destroy(r);
    setenv("AWS_PROFILE", "other", 1);
    r = open_ok("s3://b/k.tar", "k.tar");
    CHECK(strcmp(sp__rio_s3_of(r)->key_id, "OTHERKEY") == 0 && strcmp(sp__rio_s3_of(r)->secret, "other/secret+x") == 0 &&
          strcmp(sp__rio_s3_of(r)->token, "othertoken") == 0);
    CHECK(strcmp(sp__rio_s3_of(r)->region, "ap-south-1") == 0 && strcmp(sp__rio_s3_of(r)->sigv4, "aws:amz:ap-south-1:s3") == 0);
    expect_url(r, "k.tar", "http://b.127.0.0.1:7000/k.tar");
    sp__rio_destroy(r);
    /* the environment's keys and region win over the profile's */
    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    setenv("AWS_REGION", "eu-central-1", 1);
    r = open_ok("s3://b/k.tar", "k.tar");
    CHECK(strcmp(sp__rio_s3_of(r)->key_id, "ENVKEY") == 0 && strcmp(sp__rio_s3_of(r)->region, "eu-central-1") == 0 && !sp__rio_s3_of(r)->token);
    sp__rio_destroy(r);
    setenv("AWS_PROFILE", "nosuch", 1);
    expect_refused("s3://b/k.tar", SP_EINVAL, "AWS profile \"nosuch\"");
}

static void setup(void) { CHECK(mkdtemp(g_dir) != NULL); }

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", g_dir);
}

static const sp_case cases[] = {
    SP_CASE(test_http_urls),
    SP_CASE(test_s3_env),
    SP_CASE(test_s3_profile),
    SP_CASE(test_s3_plain_http),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}
