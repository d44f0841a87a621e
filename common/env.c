/* env.c - the environment a run depends on (include/seedpipe/env.h). */
#include "seedpipe/env.h"
#include "seedpipe/common.h"

#include "common/json_write_internal.h"
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


static void ver3(char *b, size_t n, const int v[3]) { snprintf(b, n, "%d.%d.%d", v[0], v[1], v[2]); }
static void ver_cuda(char *b, size_t n, int v) { snprintf(b, n, "%d.%d", v / 1000, v % 1000 / 10); }

static int finish(sp__fbuf *o) {
    if (o->n) o->p[o->len < o->n ? o->len : o->n - 1] = '\0';
    return (int)o->len;
}

/* The "cuda" object's members past "compiled" (CUDA built in). */
static void json_cuda(sp__jw *w, const env_info *e) {
    char rt[32], drv[32], dnn[32], bl[32];
    ver_cuda(rt, sizeof rt, e->cuda.runtime);
    ver_cuda(drv, sizeof drv, e->cuda.driver);
    ver3(dnn, sizeof dnn, e->cuda.cudnn);
    ver3(bl, sizeof bl, e->cuda.cublas);
    sp__jw_kstr(w, "runtime", rt);
    sp__jw_kstr(w, "driver", e->cuda.driver ? drv : "none");
    sp__jw_kstr(w, "cudnn", dnn);
    sp__jw_kstr(w, "cublas", bl);
    if (e->cuda.devices > 0) {
        char cc[32];
        snprintf(cc, sizeof cc, "%d.%d", e->cuda.cc_major, e->cuda.cc_minor);
        sp__jw_key(w, "devices");
        sp__jw_i64(w, e->cuda.devices);
        sp__jw_key(w, "device");
        sp__jw_obj(w);
        sp__jw_kstr(w, "name", e->cuda.name);
        sp__jw_kstr(w, "compute_capability", cc);
        sp__jw_ku64(w, "memory_mib", e->cuda.memory_mib);
        sp__jw_end(w, '}');
    } else {
        sp__jw_ku64(w, "devices", 0);
        sp__jw_kstr(w, "device", "no CUDA device");
    }
    if (e->cuda.error[0]) sp__jw_kstr(w, "error", e->cuda.error);
}

int sp_env_json(char *buf, size_t n, const sp_env_cuda_info *cuda) {
    env_info e;
    gather(&e, cuda);
    sp__jw w = sp__jw_buf(buf, n);
    sp__jw_obj(&w);
    sp__jw_kstr(&w, "seedpipe", sp_version_string());
    sp__jw_key(&w, "build");
    sp__jw_obj(&w);
    sp__jw_key(&w, "cuda");
    sp__jw_bool(&w, e.cuda.compiled);
    sp__jw_kstr(&w, "sanitizers", SP_ENV_SANITIZERS);
    sp__jw_key(&w, "assertions");
#ifdef NDEBUG
    sp__jw_bool(&w, 0);
#else
    sp__jw_bool(&w, 1);
#endif
    sp__jw_kstr(&w, "fp_contract", "off");
    sp__jw_end(&w, '}');
    sp__jw_kstr(&w, "compiler", SP_ENV_COMPILER);
    sp__jw_key(&w, "libraries");
    sp__jw_json(&w, e.libs);
    sp__jw_key(&w, "cuda");
    sp__jw_obj(&w);
    sp__jw_key(&w, "compiled");
    sp__jw_bool(&w, e.cuda.compiled);
    if (e.cuda.compiled) json_cuda(&w, &e);
    sp__jw_end(&w, '}');
    sp__jw_key(&w, "cpu");
    sp__jw_obj(&w);
    sp__jw_kstr(&w, "model", e.cpu);
    sp__jw_key(&w, "threads");
    sp__jw_i64(&w, e.threads);
    sp__jw_end(&w, '}');
    sp__jw_key(&w, "os");
    sp__jw_obj(&w);
    sp__jw_kstr(&w, "sysname", e.un.sysname);
    sp__jw_kstr(&w, "release", e.un.release);
    sp__jw_kstr(&w, "machine", e.un.machine);
    sp__jw_end(&w, '}');
    sp__jw_end(&w, '}');
    return (int)w.len;
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
