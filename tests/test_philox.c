/* test_philox.c - seedpipe/philox.h against published answers and its spec.
 *
 * Asserts:
 *  1. sp_philox4x32_10 reproduces EVERY "philox4x32 10" line of Random123's
 *     known-answer files kat_vectors.gz and old_kat_vectors.gz (Debian
 *     package librandom123-dev / -doc). Whichever of the two files exist are
 *     tested; the test FAILS if neither exists or no line was found.
 *     $SP_RANDOM123_TESTS may name another directory holding them.
 *  2. The DESIGN.md vector (0,0,0,0)/(0,0) -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
 *  3. Key scheme: sp_key_from_seed splits the seed low word first; stream keys
 *     are philox((tag,0,0,0), K)[0..1]; worker keys are philox((w,0,0,0),
 *     K_4)[0..1]; sp_sample_draw is philox((j,k,i,e), K). All distinct.
 *  4. sp_u01f / sp_u01d are exactly (x >> 8) * 2^-24, in [0, 1), for all
 *     2^24 values of the top 24 bits, and the float and double agree.
 *  5. sp_uniform_int is floor(x * n / 2^32): in [0, n), endpoints, and the
 *     exact boundaries between consecutive results.
 * Cases: test_kat_files (1), test_design_vector (2),
 * test_keys (3), test_u01 (4), test_uniform_int (5).
 */
#include "seedpipe/philox.h"

#include <zlib.h>

#include "check.h"
#include "runner.h"

static sp_ctr philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                     uint32_t k0, uint32_t k1) {
    sp_ctr c = {{c0, c1, c2, c3}};
    sp_key k = {{k0, k1}};
    return sp_philox4x32_10(c, k);
}

/* Checks every philox4x32 10 line of one gzip'd KAT file; @return the line
 * count, or -1 if the file does not exist. */
static long check_kat_file(const char *path) {
    gzFile f = gzopen(path, "rb");
    if (!f) return -1;
    char line[1024];
    long n = 0, lineno = 0;
    while (gzgets(f, line, sizeof line)) {
        lineno++;
        char name[32];
        unsigned rounds;
        if (sscanf(line, "%31s %u", name, &rounds) != 2) continue;
        if (strcmp(name, "philox4x32") != 0 || rounds != 10) continue;
        unsigned w[10];
        int got = sscanf(line, "%*s %*u %x %x %x %x %x %x %x %x %x %x", &w[0], &w[1], &w[2],
                         &w[3], &w[4], &w[5], &w[6], &w[7], &w[8], &w[9]);
        CHECK_MSG(got == 10, "%s:%ld: malformed philox4x32 10 line: %s", path, lineno, line);
        sp_ctr o = philox(w[0], w[1], w[2], w[3], w[4], w[5]);
        for (int j = 0; j < 4; j++)
            CHECK_MSG(o.c[j] == w[6 + j], "%s:%ld: word %d is %08x, expected %08x", path,
                      lineno, j, o.c[j], w[6 + j]);
        n++;
    }
    gzclose(f);
    return n;
}

static void test_kat_files(void) {
    const char *dirs[3] = {getenv("SP_RANDOM123_TESTS"), "/usr/share/doc/librandom123-dev/tests",
                           "/usr/share/doc/librandom123-doc/tests"};
    const char *files[2] = {"kat_vectors.gz", "old_kat_vectors.gz"};
    long total = 0;
    int found = 0;
    for (int f = 0; f < 2; f++) {
        for (int d = 0; d < 3; d++) {
            if (!dirs[d] || !dirs[d][0]) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dirs[d], files[f]);
            long n = check_kat_file(path);
            if (n < 0) continue;
            printf("%s: %ld philox4x32 10 vectors match\n", path, n);
            CHECK_MSG(n > 0, "%s has no philox4x32 10 line", path);
            total += n;
            found++;
            break; /* one copy of each file is enough */
        }
    }
    CHECK_MSG(found > 0, "Random123 known-answer files not found (install librandom123-dev: "
                         "kat_vectors.gz in /usr/share/doc/librandom123-{dev,doc}/tests)");
    CHECK(total >= 3);
}

static void test_design_vector(void) {
    sp_ctr o = philox(0, 0, 0, 0, 0, 0);
    CHECK(o.c[0] == 0x6627e8d5u && o.c[1] == 0xe169c58du);
    CHECK(o.c[2] == 0xbc57ac4cu && o.c[3] == 0x9b00dbd8u);
    /* A one-bit change of counter or key changes the output (not a constant). */
    sp_ctr a = philox(1, 0, 0, 0, 0, 0), b = philox(0, 0, 0, 0, 0, 1);
    CHECK(a.c[0] != o.c[0] && b.c[0] != o.c[0] && a.c[0] != b.c[0]);
}

static void test_keys(void) {
    const uint64_t seeds[] = {0, 1, 42, 0x0123456789abcdefull, 0xffffffffffffffffull,
                              0x100000000ull};
    sp_key k = sp_key_from_seed(0x0123456789abcdefull);
    CHECK(k.k[0] == 0x89abcdefu && k.k[1] == 0x01234567u);
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        uint64_t seed = seeds[s];
        uint32_t lo = (uint32_t)(seed & 0xffffffffu), hi = (uint32_t)(seed >> 32);
        sp_key base = sp_key_from_seed(seed);
        CHECK(base.k[0] == lo && base.k[1] == hi);
        sp_key stream[6];
        for (uint32_t tag = 1; tag <= 5; tag++) {
            sp_ctr o = philox(tag, 0, 0, 0, lo, hi);
            stream[tag] = sp_rng_key(seed, tag);
            CHECK(stream[tag].k[0] == o.c[0] && stream[tag].k[1] == o.c[1]);
            sp_key d = sp_key_derive(base, tag);
            CHECK(d.k[0] == o.c[0] && d.k[1] == o.c[1]);
            for (uint32_t t2 = 1; t2 < tag; t2++)
                CHECK(stream[t2].k[0] != stream[tag].k[0] || stream[t2].k[1] != stream[tag].k[1]);
        }
        CHECK(SP_RNG_SHUFFLE == 1 && SP_RNG_AUGMENT == 2 && SP_RNG_INIT == 3 &&
              SP_RNG_WORKER == 4 && SP_RNG_OTHER == 5);
        /* the tags of docs/determinism.md section 2's table (10: shared with
         * the Python backend's _keys.py; 13: the weighted draws) */
        CHECK(SP_RNG_MIX == 6 && SP_RNG_BLOCK == 7 && SP_RNG_SAMPLER == 10 &&
              SP_RNG_TOKENS == 11 && SP_RNG_WEIGHTED == 13);
        sp_key k4 = stream[SP_RNG_WORKER];
        sp_key prev = {{0, 0}};
        for (uint32_t w = 0; w < 64; w++) {
            sp_ctr o = philox(w, 0, 0, 0, k4.k[0], k4.k[1]);
            sp_key kw = sp_worker_key(seed, w);
            CHECK(kw.k[0] == o.c[0] && kw.k[1] == o.c[1]);
            CHECK(w == 0 || kw.k[0] != prev.k[0] || kw.k[1] != prev.k[1]);
            /* A worker key is never the augment key (it must not reach a batch). */
            CHECK(kw.k[0] != stream[SP_RNG_AUGMENT].k[0] ||
                  kw.k[1] != stream[SP_RNG_AUGMENT].k[1]);
            prev = kw;
        }
        sp_key ka = stream[SP_RNG_AUGMENT];
        for (uint32_t i = 0; i < 200; i++) {
            uint32_t j = i % 3, op = i % 7, smp = i * 2654435761u, e = i / 13;
            sp_ctr d = sp_sample_draw(ka, j, op, smp, e);
            sp_ctr o = philox(j, op, smp, e, ka.k[0], ka.k[1]);
            CHECK(memcmp(&d, &o, sizeof d) == 0);
        }
    }
}

static void test_u01(void) {
    const float f24 = 1.0f / 16777216.0f;
    CHECK(sp_u01f(0) == 0.0f && sp_u01d(0) == 0.0);
    CHECK(sp_u01f(0xffu) == 0.0f);
    CHECK(sp_u01f(0x100u) == f24 && sp_u01d(0x100u) == 1.0 / 16777216.0);
    CHECK(sp_u01f(0xffffffffu) == 1.0f - f24 && sp_u01f(0xffffffffu) < 1.0f);
    CHECK(sp_u01d(0xffffffffu) == 1.0 - 1.0 / 16777216.0 && sp_u01d(0xffffffffu) < 1.0);
    for (uint32_t v = 0; v < (1u << 24); v++) {
        uint32_t x = (v << 8) | (v & 0xffu); /* low 8 bits must be ignored */
        float f = sp_u01f(x);
        double d = sp_u01d(x);
        /* Exactness: scaling back by 2^24 recovers the integer exactly. */
        if (f * 16777216.0f != (float)v || d * 16777216.0 != (double)v || (double)f != d ||
            !(f >= 0.0f && f < 1.0f)) {
            fprintf(stderr, "u01 not exact at v=%u: f=%.9g d=%.17g\n", v, f, d);
            CHECK(0);
        }
    }
}

/* The smallest x with floor(x * n / 2^32) >= v, i.e. ceil(v * 2^32 / n). */
static uint64_t first_x(uint64_t v, uint64_t n) {
    return ((v << 32) + n - 1) / n;
}

static void test_uniform_int(void) {
    const uint64_t ns[] = {1, 2, 3, 7, 10, 1000, 12345, 65537, 0x7fffffffull, 0xffffffffull,
                           0x100000000ull};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        uint64_t n = ns[t];
        CHECK(sp_uniform_int(0, n) == 0);
        CHECK(sp_uniform_int(0xffffffffu, n) == n - 1);
        uint32_t x = 0x9e3779b9u, last = 0;
        for (int i = 0; i < 100000; i++) {
            x = x * 1664525u + 1013904223u;
            CHECK(sp_uniform_int(x, n) < n);
        }
        /* Monotone, and each result v starts exactly at ceil(v * 2^32 / n). */
        uint64_t vs = n < 2000 ? n : 2000;
        for (uint64_t k = 1; k < vs; k++) {
            uint64_t v = k * (n / vs);
            if (v == 0) continue;
            uint64_t x0 = first_x(v, n);
            CHECK(x0 <= 0xffffffffull);
            CHECK(sp_uniform_int((uint32_t)x0, n) == v);
            CHECK(sp_uniform_int((uint32_t)(x0 - 1), n) == v - 1);
            CHECK(sp_uniform_int((uint32_t)x0, n) >= last);
            last = sp_uniform_int((uint32_t)x0, n);
        }
    }
    /* n = 3: the counts of the three results differ by at most one. */
    uint64_t c0 = first_x(1, 3), c1 = first_x(2, 3) - first_x(1, 3);
    uint64_t c2 = (1ull << 32) - first_x(2, 3);
    CHECK(c0 + c1 + c2 == 1ull << 32);
    CHECK(c0 - c2 <= 1 && c1 - c2 <= 1);
}

static const sp_case cases[] = {
    SP_CASE(test_design_vector),
    SP_CASE(test_kat_files),
    SP_CASE(test_keys),
    SP_CASE(test_u01),
    SP_CASE(test_uniform_int),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}
