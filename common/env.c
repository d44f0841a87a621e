/* env.c - the environment a run depends on (include/seedpipe/env.h). */
#include "seedpipe/env.h"
#include "seedpipe/common.h"

#include "common/sbuf_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SP_ENV_SANITIZERS "address,undefined"
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SP_ENV_SANITIZERS "address,undefined"
#endif
#endif
#ifndef SP_ENV_SANITIZERS
#define SP_ENV_SANITIZERS "none"
#endif

#if defined(__clang__)
#define SP_ENV_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define SP_ENV_COMPILER "gcc " __VERSION__
#else
#define SP_ENV_COMPILER "unknown"
#endif

typedef struct env_info {
    char cpu[256];
    long threads;
    struct utsname un;
    char libs[1024];
    sp_env_cuda_info cuda;
} env_info;

static void gather(env_info *e, const sp_env_cuda_info *cuda) {
    memset(e, 0, sizeof *e);
    snprintf(e->cpu, sizeof e->cpu, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) != 0) continue;
            char *c = strchr(line, ':');
            if (!c) continue;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            c[strcspn(c, "\n")] = '\0';
            snprintf(e->cpu, sizeof e->cpu, "%s", c);
            break;
        }
        fclose(f);
    }
    e->threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (uname(&e->un) != 0) memset(&e->un, 0, sizeof e->un);
    sp_library_versions_json(e->libs, sizeof e->libs);
    if (cuda) e->cuda = *cuda;
}


static void put_str(sp__fbuf *o, const char *s) {   /* a JSON string */
    sp__fbuf_printf(o, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') sp__fbuf_printf(o, "\\%c", c);
        else if (c < 0x20) sp__fbuf_printf(o, "\\u%04x", c);
        else sp__fbuf_printf(o, "%c", c);
    }
    sp__fbuf_printf(o, "\"");
}

static void ver3(char *b, size_t n, const int v[3]) { snprintf(b, n, "%d.%d.%d", v[0], v[1], v[2]); }
static void ver_cuda(char *b, size_t n, int v) { snprintf(b, n, "%d.%d", v / 1000, v % 1000 / 10); }

static int finish(sp__fbuf *o) {
    if (o->n) o->p[o->len < o->n ? o->len : o->n - 1] = '\0';
    return (int)o->len;
}

int sp_env_json(char *buf, size_t n, const sp_env_cuda_info *cuda) {
    env_info e;
    gather(&e, cuda);
    sp__fbuf o = {buf, n, 0};
    sp__fbuf_printf(&o, "{\"seedpipe\":");
    put_str(&o, sp_version_string());
    sp__fbuf_printf(&o, ",\"build\":{\"cuda\":%s,\"sanitizers\":\"%s\",\"assertions\":%s,"
            "\"fp_contract\":\"off\"},\"compiler\":",
        e.cuda.compiled ? "true" : "false", SP_ENV_SANITIZERS,
#ifdef NDEBUG
        "false"
#else
        "true"
#endif
    );
    put_str(&o, SP_ENV_COMPILER);
    sp__fbuf_printf(&o, ",\"libraries\":%s,\"cuda\":{\"compiled\":%s", e.libs,
        e.cuda.compiled ? "true" : "false");
    if (e.cuda.compiled) {
        char rt[32], drv[32], dnn[32], bl[32];
        ver_cuda(rt, sizeof rt, e.cuda.runtime);
        ver_cuda(drv, sizeof drv, e.cuda.driver);
        ver3(dnn, sizeof dnn, e.cuda.cudnn);
        ver3(bl, sizeof bl, e.cuda.cublas);
        sp__fbuf_printf(&o, ",\"runtime\":\"%s\",\"driver\":\"%s\",\"cudnn\":\"%s\",\"cublas\":\"%s\"", rt,
            e.cuda.driver ? drv : "none", dnn, bl);
        if (e.cuda.devices > 0) {
            sp__fbuf_printf(&o, ",\"devices\":%d,\"device\":{\"name\":", e.cuda.devices);
            put_str(&o, e.cuda.name);
            sp__fbuf_printf(&o, ",\"compute_capability\":\"%d.%d\",\"memory_mib\":%llu}", e.cuda.cc_major,
                e.cuda.cc_minor, e.cuda.memory_mib);
        } else {
            sp__fbuf_printf(&o, ",\"devices\":0,\"device\":\"no CUDA device\"");
        }
        if (e.cuda.error[0]) {
            sp__fbuf_printf(&o, ",\"error\":");
            put_str(&o, e.cuda.error);
        }
    }
    sp__fbuf_printf(&o, "},\"cpu\":{\"model\":");
    put_str(&o, e.cpu);
    sp__fbuf_printf(&o, ",\"threads\":%ld},\"os\":{\"sysname\":", e.threads);
    put_str(&o, e.un.sysname);
    sp__fbuf_printf(&o, ",\"release\":");
    put_str(&o, e.un.release);
    sp__fbuf_printf(&o, ",\"machine\":");
    put_str(&o, e.un.machine);
    sp__fbuf_printf(&o, "}}");
    return finish(&o);
}

int sp_env_text(char *buf, size_t n, const sp_env_cuda_info *cuda) {
    env_info e;
    gather(&e, cuda);
    sp__fbuf o = {buf, n, 0};
    sp__fbuf_printf(&o, "seedpipe:    %s\n", sp_version_string());
    sp__fbuf_printf(&o, "build:       CUDA %s, sanitizers %s, assertions %s, fp-contract off\n",
        e.cuda.compiled ? "compiled in" : "not compiled in", SP_ENV_SANITIZERS,
#ifdef NDEBUG
        "off"
#else
        "on"
#endif
    );
    sp__fbuf_printf(&o, "compiler:    %s\n", SP_ENV_COMPILER);
    sp__fbuf_printf(&o, "libraries:   %s\n", e.libs);
    if (!e.cuda.compiled) {
        sp__fbuf_printf(&o, "CUDA:        not compiled in\n");
    } else {
        char rt[32], drv[32], dnn[32], bl[32];
        ver_cuda(rt, sizeof rt, e.cuda.runtime);
        ver_cuda(drv, sizeof drv, e.cuda.driver);
        ver3(dnn, sizeof dnn, e.cuda.cudnn);
        ver3(bl, sizeof bl, e.cuda.cublas);
        sp__fbuf_printf(&o, "CUDA:        runtime %s, driver %s\n", rt, e.cuda.driver ? drv : "none");
        sp__fbuf_printf(&o, "cuDNN:       %s\ncuBLAS:      %s\n", dnn, bl);
        if (e.cuda.devices > 0)
            sp__fbuf_printf(&o, "device:      %s, compute capability %d.%d, %llu MiB (%d device%s)\n",
                e.cuda.name, e.cuda.cc_major, e.cuda.cc_minor, e.cuda.memory_mib,
                e.cuda.devices, e.cuda.devices == 1 ? "" : "s");
        else
            sp__fbuf_printf(&o, "device:      no CUDA device\n");
        if (e.cuda.error[0]) sp__fbuf_printf(&o, "cuda error:  %s\n", e.cuda.error);
    }
    sp__fbuf_printf(&o, "cpu:         %s, %ld threads\n", e.cpu, e.threads);
    sp__fbuf_printf(&o, "os:          %s %s %s\n", e.un.sysname, e.un.release, e.un.machine);
    return finish(&o);
}

/* ---- every SEEDPIPE_* value checked by name (sp_env_check) ------------------------- */

/* A variable with a fixed set of words: 1 if v is one of them. */
static int one_of(const char *v, const char *const *words) {
    for (; *words; words++)
        if (strcmp(v, *words) == 0) return 1;
    return 0;
}

/* An unsigned decimal integer in lo..hi (digits only). */
static int int_in(const char *v, unsigned long lo, unsigned long hi) {
    unsigned long n = 0;
    if (!*v) return 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9' || n > hi) return 0;
        n = n * 10 + (unsigned long)(*p - '0');
    }
    return n >= lo && n <= hi;
}

int sp_env_check(sp_error *err) {
    static const char *const isa[] = {"sse2", "avx2", "avx512", NULL};
    static const char *const onoff[] = {"on", "off", NULL};
    static const char *const hasher[] = {"auto", "workers", "consumer", NULL};
    static const struct {
        const char *name;
        const char *const *words;    /* or NULL: */
        unsigned long lo, hi;        /* an integer in lo..hi, or hi 0: a size (sp_parse_size)
                                      * in lo..size_max */
        uint64_t size_max;
        const char *takes;
    } vars[] = {
        {"SEEDPIPE_ISA", isa, 0, 0, 0, "sse2, avx2 or avx512"},
        {"SEEDPIPE_INDEX", onoff, 0, 0, 0, "on or off"},
        {"SEEDPIPE_POOL_DIGEST", hasher, 0, 0, 0, "auto, workers or consumer"},
        {"SEEDPIPE_PREFETCH", NULL, 0, 256, 0, "an integer in 0..256"},
        {"SEEDPIPE_REMOTE_RETRIES", NULL, 0, 100, 0, "an integer in 0..100"},
        {"SEEDPIPE_IDX_MAX_BYTES", NULL, 1, 0, UINT64_C(1) << 40,
         "a size in 1..1T (digits, optionally K, M, G or T)"},
        {"SEEDPIPE_SHARD_CACHE_SIZE", NULL, 0, 0, UINT64_MAX,
         "a size (digits, optionally K, M, G or T)"},
    };
    for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++) {
        const char *v = getenv(vars[k].name);
        if (!v || !*v) continue;
        int ok;
        if (vars[k].words) {
            ok = one_of(v, vars[k].words);
        } else if (vars[k].hi) {
            ok = int_in(v, vars[k].lo, vars[k].hi);
        } else {
            uint64_t n = 0;
            sp_error e;
            ok = sp_parse_size(v, &n, &e) == SP_OK && n >= vars[k].lo && n <= vars[k].size_max;
        }
        if (ok) continue;
        char shown[68];   /* the value, printable: control bytes as '?' */
        size_t m = 0;
        for (; v[m] && m < 64; m++)
            shown[m] = (unsigned char)v[m] < 0x20 || (unsigned char)v[m] == 0x7f ? '?' : v[m];
        snprintf(shown + m, sizeof shown - m, "%s", v[m] ? "..." : "");
        return sp_error_set(err, SP_EINVAL, "environment: %s=\"%s\" is not a value it takes: "
                            "%s (unset it for the default)", vars[k].name, shown,
                            vars[k].takes);
    }
    return SP_OK;
}
