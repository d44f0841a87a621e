/* cuda_plugin.c - load the CUDA plugin (libseedpipe_cuda.so.N) on first use
 * (train/cuda_plugin.h).
 *
 * Where it looks, in order (the first file that exists is the one used):
 *   1. $SEEDPIPE_CUDA_PLUGIN (a path);
 *   2. beside the binary or library this code is in (dladdr): an installed
 *      libseedpipe_train.so.N and its plugin share a folder, and so do a
 *      build tree's `seedpipe` tool and the plugin; then ../LIBDIR/ from
 *      there (an installed PREFIX/bin/seedpipe, wherever PREFIX is);
 *   3. the install prefix's library folder (SP_CUDA_PLUGIN_INSTALL);
 *   4. the build tree (SP_CUDA_PLUGIN_BUILD), for the tests' executables.
 * The result (the table, or why there is none) is computed once per
 * process under pthread_once and never changes; a forked child inherits it.
 */
#define _GNU_SOURCE   /* dladdr */
#include "train/cuda_plugin.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const sp__cuda_plugin *plugin;
static char why[SP_ERROR_MSG_MAX];

#ifdef SEEDPIPE_HAVE_CUDA
#define PLUGIN_NAME "libseedpipe_cuda.so." SP_CUDA_PLUGIN_SOVERSION

static void load(void) {
    char here[4096] = "", lib[4096] = "";
    Dl_info info;
    if (dladdr((void *)&load, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        int dir = (int)(strrchr(info.dli_fname, '/') - info.dli_fname);
        snprintf(here, sizeof here, "%.*s/" PLUGIN_NAME, dir, info.dli_fname);
        /* an installed tool: PREFIX/bin/seedpipe -> PREFIX/LIBDIR/ */
        snprintf(lib, sizeof lib, "%.*s/../" SP_CUDA_PLUGIN_LIBDIR "/" PLUGIN_NAME, dir,
                 info.dli_fname);
    }
    const char *env = getenv("SEEDPIPE_CUDA_PLUGIN");
    const char *tries[] = {env && env[0] ? env : NULL, here[0] ? here : NULL,
                           lib[0] ? lib : NULL, SP_CUDA_PLUGIN_INSTALL, SP_CUDA_PLUGIN_BUILD};
    size_t used = 0;
    for (size_t k = 0; k < sizeof tries / sizeof tries[0]; k++) {
        if (!tries[k]) continue;
        if (access(tries[k], F_OK) != 0) {
            used += (size_t)snprintf(why + used, used < sizeof why ? sizeof why - used : 0,
                                     "%s%s", used ? ", " : "", tries[k]);
            if (used >= sizeof why) used = sizeof why - 1;
            continue;
        }
        void *h = dlopen(tries[k], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(why, sizeof why,
                     "device cuda: cannot load the CUDA backend %s: %s (the CUDA runtime, cuBLAS "
                     "and cuDNN it was built with must be installed)", tries[k], dlerror());
            return;
        }
        const sp__cuda_plugin *p = (const sp__cuda_plugin *)dlsym(h, SP__CUDA_PLUGIN_SYMBOL);
        if (!p || p->abi != SP__CUDA_PLUGIN_ABI) {
            snprintf(why, sizeof why, "device cuda: %s is not this seedpipe's CUDA backend (%s)",
                     tries[k], p ? "another plugin version" : "no " SP__CUDA_PLUGIN_SYMBOL);
            dlclose(h);
            return;
        }
        plugin = p;   /* never unloaded */
        return;
    }
    char tried[SP_ERROR_MSG_MAX];
    snprintf(tried, sizeof tried, "%s", why);
    snprintf(why, sizeof why,
             "device cuda: the CUDA backend " PLUGIN_NAME " was not found (tried %.300s; set "
             "SEEDPIPE_CUDA_PLUGIN to its path)", tried);
}
#else
static void load(void) {
    snprintf(why, sizeof why,
             "device cuda: this seedpipe was built without CUDA (configure with nvcc and cuDNN "
             "present, -DSEEDPIPE_CUDA=ON)");
}
#endif

const sp__cuda_plugin *sp__cuda_plugin_load(sp_error *err) {
    pthread_once(&once, load);
    if (!plugin) sp_error_set(err, SP_EUNSUPP, "%s", why);
    return plugin;
}
