/* seedpipe/env.h - the environment a run depends on, as one JSON object.
 *
 * What the reproducibility checklist says to record: seedpipe's version and
 * build options (CUDA compiled in or not, sanitizers, build type), the
 * compiler, the versions of libpng, libjpeg-turbo, zstd, xxhash and zlib,
 * the CUDA runtime and driver, cuDNN and cuBLAS versions, the CUDA device
 * name and compute capability (or "no CUDA device"), the CPU model and the
 * number of online CPUs. `seedpipe env` prints it; a training run record
 * can embed it.
 *
 * Keys (always present): "seedpipe", "build" {"cuda", "sanitizers",
 * "build_type", "fp_contract"}, "compiler", "libraries" {libpng,
 * libjpeg-turbo, zstd, xxhash, zlib}, "cuda" (an object: "compiled"
 * false, or "compiled" true with "runtime", "driver", "cudnn", "cublas",
 * "devices" [{"name", "compute_capability", "memory_mib"}] or "device":
 * "no CUDA device"), "cpu" {"model", "threads"}, "os" {"sysname",
 * "release", "machine"}.
 *
 * Library code: never prints. Thread-safe.
 */
#ifndef SEEDPIPE_ENV_H
#define SEEDPIPE_ENV_H

#include <stddef.h>

#include "seedpipe/common.h"    /* sp_error */
#include "seedpipe/version.h"   /* SP_API */

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA part of the record. libseedpipe (the loader) holds no CUDA code:
 * the training library fills this (sp_env_cuda_query() in train.h) and the
 * caller passes it in; NULL means "no CUDA here". */
typedef struct sp_env_cuda_info {
    int compiled;            /* 0: built without CUDA */
    int runtime, driver;     /* cudaRuntimeGetVersion / cudaDriverGetVersion, e.g. 13000 */
    int cudnn[3];            /* major, minor, patch (cudnnGetVersion) */
    int cublas[3];           /* major, minor, patch (cublasGetProperty) */
    int devices;             /* 0: no CUDA device */
    char name[256];          /* device 0 */
    int cc_major, cc_minor;  /* device 0's compute capability */
    unsigned long long memory_mib;
    char error[512];         /* why CUDA could not be asked (plugin, runtime), or "" */
} sp_env_cuda_info;

/*! sp_env_json() : write the JSON object into buf (snprintf semantics:
 *  always NUL-terminated when n > 0). `cuda` may be NULL (reported as not
 *  compiled in). @return the length it needed (>= n: truncated; 8 KiB is
 *  plenty). */
SP_API int sp_env_json(char *buf, size_t n, const sp_env_cuda_info *cuda);

/*! sp_env_text() : the same as "key: value" lines for people. */
SP_API int sp_env_text(char *buf, size_t n, const sp_env_cuda_info *cuda);

/*! sp_env_check() : every SEEDPIPE_* environment variable seedpipe reads
 *  that has a set of values, checked by name (README "Environment
 *  variables"): SEEDPIPE_ISA (sse2, avx2, avx512), SEEDPIPE_INDEX (on,
 *  off), SEEDPIPE_POOL_DIGEST (auto, workers, consumer), SEEDPIPE_PREFETCH
 *  (0..256), SEEDPIPE_REMOTE_RETRIES (0..100), SEEDPIPE_IDX_MAX_BYTES (a
 *  size, 1 byte..1T), SEEDPIPE_SHARD_CACHE_SIZE (a size). An unset or empty
 *  variable is its default; the paths (SEEDPIPE_SHARD_CACHE,
 *  SEEDPIPE_CA_BUNDLE, SEEDPIPE_CUDA_PLUGIN) are checked where they are
 *  used. sp_loader_create() calls it (so does the seedpipe tool, before any
 *  command): a bad value fails a run at its start, never one that runs.
 *  @return 0, or SP_EINVAL with err naming the variable, its value and the
 *  values it takes (the first bad one, in the order above). */
SP_API int sp_env_check(sp_error *err);

#ifdef __cplusplus
}
#endif
#endif
