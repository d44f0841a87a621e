/* test_common_helpers.c - the small helpers of common/ written once:
 * the array growth rule (common/vec_internal.h) and the CPU features
 * (common/cpu_internal.h).
 *  - test_vec_push: 100000 pushes keep every value in order; the capacity
 *    starts at `first`, only doubles, and stays below twice the count;
 *  - test_vec_refuse: a size past SIZE_MAX is refused with the array and
 *    its capacity unchanged (still usable, still freed by the caller);
 *  - test_cpu_level: the level agrees with the feature bits and the
 *    compiler's own __builtin_cpu_supports, and SEEDPIPE_ISA caps it
 *    (sse2: 0, avx2: at most 1, unset: the CPU's best again).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "runner.h"
#include "common/cpu_internal.h"
#include "common/vec_internal.h"

typedef struct item {
    uint64_t a;
    uint32_t b;
} item;

static void test_vec_push(void) {
    item *v = NULL;
    size_t n = 0, cap = 0, last = 0;
    int grew = 0;
    for (uint32_t i = 0; i < 100000; i++) {
        CHECK(SP__VEC_PUSH(v, n, cap, 16, ((item){(uint64_t)i * 3, i ^ 0x55u})) == 0);
        if (cap != last) {
            CHECK_MSG(last ? cap == 2 * last : cap == 16, "capacity %zu after %zu", cap, last);
            last = cap;
            grew++;
        }
        CHECK(cap >= n && cap < 2 * n + 16);
    }
    CHECK(n == 100000);
    for (uint32_t i = 0; i < n; i++) CHECK(v[i].a == (uint64_t)i * 3 && v[i].b == (i ^ 0x55u));
    printf("  100000 pushes, %d reallocations, capacity %zu\n", grew, cap);
    CHECK(SP__VEC_RESERVE(v, cap, 10, 16) == 0 && cap == last);   /* room already: nothing */
    free(v);
}

static void test_vec_refuse(void) {
    uint64_t *v = NULL;
    size_t cap = 0;
    CHECK(SP__VEC_RESERVE(v, cap, 5, 4) == 0 && cap == 8 && v != NULL);
    v[7] = 42;
    uint64_t *before = v;
    CHECK(SP__VEC_RESERVE(v, cap, SIZE_MAX / 4, 4) == -1);
    CHECK(v == before && cap == 8 && v[7] == 42);
    free(v);
}

static void test_cpu_level(void) {
    unsigned f = sp__cpu_features();
#ifdef SP__CPU_X86
    CHECK(!!(f & SP__CPU_AVX2) == !!__builtin_cpu_supports("avx2"));
    CHECK(!!(f & SP__CPU_AVX512F) == !!__builtin_cpu_supports("avx512f"));
    CHECK(!!(f & SP__CPU_AVX512BW) == !!__builtin_cpu_supports("avx512bw"));
    CHECK(!!(f & SP__CPU_AVX512VBMI) == !!__builtin_cpu_supports("avx512vbmi"));
#endif
    unsetenv("SEEDPIPE_ISA");
    int best = sp__cpu_level(SP__CPU_AVX512F);
    CHECK(best == ((f & SP__CPU_AVX512F) ? 2 : (f & SP__CPU_AVX2) ? 1 : 0));
    unsigned all = SP__CPU_AVX512F | SP__CPU_AVX512BW | SP__CPU_AVX512VBMI;
    CHECK(sp__cpu_level(all) == ((f & all) == all ? 2 : (f & SP__CPU_AVX2) ? 1 : 0));
    CHECK(sp__cpu_has(0) == 1);
    setenv("SEEDPIPE_ISA", "sse2", 1);
    CHECK(sp__cpu_level(SP__CPU_AVX512F) == 0);
    setenv("SEEDPIPE_ISA", "avx2", 1);
    CHECK(sp__cpu_level(SP__CPU_AVX512F) == (best < 1 ? best : 1));
    unsetenv("SEEDPIPE_ISA");
    CHECK(sp__cpu_level(SP__CPU_AVX512F) == best);
    printf("  features 0x%x, level %d\n", f, best);
}

static const sp_case cases[] = {
    SP_CASE(test_vec_push),
    SP_CASE(test_vec_refuse),
    SP_CASE(test_cpu_level),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}
