/* seedpipe/philox.h - Philox4x32-10 and seedpipe's key/stream scheme.
 *
 * The generator is Philox4x32-10 exactly as in Salmon et al., SC'11
 * ("Parallel random numbers: as easy as 1, 2, 3"), the same function as
 * Random123's philox4x32_10 and cuRAND's Philox4_32_10. It is a pure
 * function philox(counter[4], key[2]) -> out[4]; no state, so it is thread-
 * and fork-safe and usable from C and CUDA (the inline functions are
 * __host__ __device__ under nvcc). docs/determinism.md is the normative spec;
 * tests/philox_ref.py is an independent reference implementation.
 *
 * Keys and streams (DESIGN.md section 2):
 *   K       = (seed & 0xffffffff, seed >> 32)
 *   K_tag   = philox((tag,0,0,0), K)[0..1]        tag: SP_RNG_*
 *   K_worker(w) = philox((w,0,0,0), K_4)[0..1]  a worker's own generator
 *   sample draw block j of op k, sample i, epoch e:
 *             philox((j, k, i, e), K_augment)
 *   uniform [0,1):  (x >> 8) * 2^-24   (exact in float and double)
 */
#ifndef SEEDPIPE_PHILOX_H
#define SEEDPIPE_PHILOX_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version. loader.h, the front door's, includes it for its types, so it
 * carries no SEEDPIPE_ADVANCED_API fence. */

#include <stdint.h>

#if defined(__CUDACC__)
#define SP_HOSTDEV __host__ __device__ __forceinline__
#else
#define SP_HOSTDEV static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The generator-stream tags (DESIGN.md section 2), SP_RNG_*: the batch
 * streams of stream.h are SP_STREAM_*. */
enum sp_rng_stream {
    SP_RNG_SHUFFLE = 1,
    SP_RNG_AUGMENT = 2,
    SP_RNG_INIT = 3,
    SP_RNG_WORKER = 4,
    SP_RNG_OTHER = 5,
    SP_RNG_MIX = 6,   /* a mixture's sources' own orders (dataset.h, determinism.md 10) */
    SP_RNG_BLOCK = 7, /* the block:K order's shard and block permutations (sampler.h, 6a) */
    /* 8, 9: the Python backend's sample and collate streams
     * (bindings/python/seedpipe/_keys.py, determinism.md section 11) */
    SP_RNG_SAMPLER = 10, /* draws with replacement, uniform (both backends; determinism.md 13) */
    SP_RNG_TOKENS = 11,  /* a token corpus's document orders (determinism.md section 12) */
    /* 12: the Python backend's batch ops (determinism.md section 11a) */
    SP_RNG_WEIGHTED = 13, /* weighted draws with replacement (determinism.md section 13) */
    SP_RNG_FAKE = 14      /* generated images, "fakedata:" (dataset_fake.c; seed 0) */
};

typedef struct sp_key { uint32_t k[2]; } sp_key;
typedef struct sp_ctr { uint32_t c[4]; } sp_ctr;

#define SP_PHILOX_M0 0xD2511F53u
#define SP_PHILOX_M1 0xCD9E8D57u
#define SP_PHILOX_W0 0x9E3779B9u
#define SP_PHILOX_W1 0xBB67AE85u

SP_HOSTDEV void sp_philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

/*! sp_philox4x32_10() : the 10-round Philox4x32 bijection of `ctr` under `key`. */
SP_HOSTDEV sp_ctr sp_philox4x32_10(sp_ctr ctr, sp_key key) {
    uint32_t c0 = ctr.c[0], c1 = ctr.c[1], c2 = ctr.c[2], c3 = ctr.c[3];
    uint32_t k0 = key.k[0], k1 = key.k[1];
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, lo0, hi1, lo1;
        if (r > 0) { k0 += SP_PHILOX_W0; k1 += SP_PHILOX_W1; }
        sp_philox_mulhilo(SP_PHILOX_M0, c0, &hi0, &lo0);
        sp_philox_mulhilo(SP_PHILOX_M1, c2, &hi1, &lo1);
        uint32_t n0 = hi1 ^ c1 ^ k0;
        uint32_t n1 = lo1;
        uint32_t n2 = hi0 ^ c3 ^ k1;
        uint32_t n3 = lo0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    }
    sp_ctr out = {{c0, c1, c2, c3}};
    return out;
}

/*! sp_key_from_seed() : K = (seed & 0xffffffff, seed >> 32). */
SP_HOSTDEV sp_key sp_key_from_seed(uint64_t seed) {
    sp_key k = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    return k;
}

/*! sp_key_derive() : philox((tag,0,0,0), parent)[0..1]; used for streams
 *  (tag = SP_RNG_*) and for worker keys (tag = worker id under K_worker). */
SP_HOSTDEV sp_key sp_key_derive(sp_key parent, uint32_t tag) {
    sp_ctr c = {{tag, 0, 0, 0}};
    sp_ctr o = sp_philox4x32_10(c, parent);
    sp_key k = {{o.c[0], o.c[1]}};
    return k;
}

/*! sp_rng_key() : K_tag for a seed. */
SP_HOSTDEV sp_key sp_rng_key(uint64_t seed, uint32_t stream) {
    return sp_key_derive(sp_key_from_seed(seed), stream);
}

/*! sp_worker_key() : K_worker(w) = philox((w,0,0,0), K_4)[0..1]. Never reaches
 *  a batch byte in the default mode. */
SP_HOSTDEV sp_key sp_worker_key(uint64_t seed, uint32_t worker) {
    return sp_key_derive(sp_rng_key(seed, SP_RNG_WORKER), worker);
}

/*! sp_sample_draw() : draw block j of op k for sample i at epoch e:
 *  philox((j, k, i, e), K_augment). i is the 32-bit global sample index. */
SP_HOSTDEV sp_ctr sp_sample_draw(sp_key k_augment, uint32_t block, uint32_t op,
                                 uint32_t sample, uint32_t epoch) {
    sp_ctr c = {{block, op, sample, epoch}};
    return sp_philox4x32_10(c, k_augment);
}

/*! sp_u01f() / sp_u01d() : (x >> 8) * 2^-24, uniform in [0, 1), exact. */
SP_HOSTDEV float sp_u01f(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
SP_HOSTDEV double sp_u01d(uint32_t x) { return (double)(x >> 8) * (1.0 / 16777216.0); }

/*! sp_uniform_int() : an integer in [0, n) from one 32-bit word by
 *  multiply-shift: (x * n) >> 32. n must be >= 1 and <= 2^32. */
SP_HOSTDEV uint32_t sp_uniform_int(uint32_t x, uint64_t n) {
    return (uint32_t)(((uint64_t)x * n) >> 32);
}

#ifdef __cplusplus
}
#endif
#endif
