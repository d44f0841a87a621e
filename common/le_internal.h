/* le_internal.h - little-endian integers in byte buffers, the one set the
 * on-disk formats share (cache batch files, the dataset index, training
 * checkpoints) and the fingerprint feeders use.
 *
 * Not installed, not part of the API. Header-only (static inline), so the
 * training core can use it without linking anything of the loader's.
 */
#ifndef SEEDPIPE_LE_INTERNAL_H
#define SEEDPIPE_LE_INTERNAL_H

#include <stdint.h>

static inline void sp__le_put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void sp__le_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void sp__le_put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t sp__le_get16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t sp__le_get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t sp__le_get64(const uint8_t *p) {
    return sp__le_get32(p) | (uint64_t)sp__le_get32(p + 4) << 32;
}

#endif
