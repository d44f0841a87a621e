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

#ifdef __cplusplus
extern "C" {
#endif

/*! sp_env_json() : write the JSON object into buf (snprintf semantics:
 *  always NUL-terminated when n > 0). @return the length it needed (>= n:
 *  truncated; 8 KiB is plenty). */
int sp_env_json(char *buf, size_t n);

/*! sp_env_text() : the same as "key: value" lines for people. */
int sp_env_text(char *buf, size_t n);

/* The CUDA part (loader/env.c without CUDA, kernels/env_cuda.cu with). */
typedef struct sp_env_cuda_info {
    int compiled;            /* 0: the library was built without CUDA */
    int runtime, driver;     /* cudaRuntimeGetVersion / cudaDriverGetVersion, e.g. 13000 */
    int cudnn[3];            /* major, minor, patch (cudnnGetVersion) */
    int cublas[3];           /* major, minor, patch (cublasGetProperty) */
    int devices;             /* 0: no CUDA device */
    char name[256];          /* device 0 */
    int cc_major, cc_minor;  /* device 0's compute capability */
    unsigned long long memory_mib;
    char error[160];         /* a runtime error while asking, or "" */
} sp_env_cuda_info;

/*! sp_env_cuda_query() : fill *out (zeroed first). Never fails: problems
 *  go to out->error. */
void sp_env_cuda_query(sp_env_cuda_info *out);

#ifdef __cplusplus
}
#endif
#endif
