/* common/cpu_internal.h - the CPU's SIMD features, asked by name (internal;
 * not installed).
 *
 * Every module with run-time SIMD dispatch (the hashing in common/hash.c,
 * the resize in augment/resize.c, the output writer's kernels in
 * augment/write_kernels.c, the cache file's loops in cache/cache_file.c,
 * the CPU convolutions in train/nn_cpu.c) asks here,
 * and nowhere else, which features the CPU has and which level (0
 * baseline, 1 AVX2, 2 AVX-512) it may run at:
 *
 *   int isa = sp__cpu_level(SP__CPU_AVX512F);           // hash, nn
 *   int isa = sp__cpu_level(SP__CPU_AVX512F | SP__CPU_AVX512BW |
 *                           SP__CPU_AVX512VBMI);        // the cache file
 *   if (sp__cpu_has(SP__CPU_AVX2)) ...                  // a loop's own guard
 *
 * HOW IT WORKS: the CPU is queried once per process. The compiler's runtime
 * (libgcc, or compiler-rt under clang) runs CPUID and XGETBV once, at
 * load, and keeps the answer in its own table (__cpu_model, one per
 * process, so libseedpipe and libseedpipe_train, which sees no internal
 * symbol of libseedpipe, read the same one: this module is a header of
 * inline functions, not a .c file). sp__cpu_features() turns that table
 * into this header's bits once and keeps them (one word per file that
 * asks), so a hot path's check is one load.
 *
 * The level is capped by SEEDPIPE_ISA=sse2|avx2|avx512 (sp_isa_cap() in
 * seedpipe/common.h, read on every call, so a test may set it between
 * calls); every level gives the same bytes and the tests compare them
 * through that variable. Off x86-64 every feature is absent: level 0.
 * Thread-safe and fork-safe (reads only).
 */
#ifndef SEEDPIPE_COMMON_CPU_INTERNAL_H
#define SEEDPIPE_COMMON_CPU_INTERNAL_H

#include "seedpipe/common.h"

/* The features the library's SIMD loops use. */
enum {
    SP__CPU_AVX2 = 1u << 0,
    SP__CPU_AVX512F = 1u << 1,
    SP__CPU_AVX512BW = 1u << 2,
    SP__CPU_AVX512VBMI = 1u << 3,
    SP__CPU_FMA = 1u << 4,
    SP__CPU_F16C = 1u << 5,
};

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define SP__CPU_X86 1
#include <cpuid.h>
#endif

/*! sp__cpu_features() : the SP__CPU_* bits this CPU (and its OS) has. */
static inline unsigned sp__cpu_features(void) {
#ifdef SP__CPU_X86
    /* Kept after the first ask: one copy per file that asks (every copy
     * holds the same bits), bit 31 saying it is filled. Relaxed atomics:
     * two threads asking first both store the same value. */
    static unsigned known;
    unsigned f = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (f) return f & ~(1u << 31);
    __builtin_cpu_init();   /* a no-op once the runtime filled its table; needed only
                             * when asked from a constructor that runs before it */
    f = (__builtin_cpu_supports("avx2") ? SP__CPU_AVX2 : 0u) |
        (__builtin_cpu_supports("avx512f") ? SP__CPU_AVX512F : 0u) |
        (__builtin_cpu_supports("avx512bw") ? SP__CPU_AVX512BW : 0u) |
        (__builtin_cpu_supports("avx512vbmi") ? SP__CPU_AVX512VBMI : 0u) |
        (__builtin_cpu_supports("fma") ? SP__CPU_FMA : 0u);
    /* F16C from CPUID leaf 1 (clang before 15 does not name it to
     * __builtin_cpu_supports); its registers are AVX's, so it counts only
     * with AVX2, whose check covers the OS's support for them. */
    unsigned a, b, c, d;
    if ((f & SP__CPU_AVX2) && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C)) f |= SP__CPU_F16C;
    __atomic_store_n(&known, f | (1u << 31), __ATOMIC_RELAXED);
    return f;
#else
    return 0;
#endif
}

/*! sp__cpu_has() : 1 if the CPU has every feature in `need`, else 0. */
static inline int sp__cpu_has(unsigned need) { return (sp__cpu_features() & need) == need; }

/*! sp__cpu_level() : the SIMD level a module may run at: 2 if the CPU has
 *  every feature in `avx512` (the AVX-512 subsets that module's loops use),
 *  else 1 with AVX2, else 0; then capped by SEEDPIPE_ISA (sp_isa_cap()). */
static inline int sp__cpu_level(unsigned avx512) {
    unsigned f = sp__cpu_features();
    return sp_isa_cap(avx512 && (f & avx512) == avx512 ? 2 : (f & SP__CPU_AVX2) ? 1 : 0);
}

#endif
