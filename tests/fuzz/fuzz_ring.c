/* fuzz_ring - validation of a shared-memory region header: what a client
 * (sp__client_attach) and `seedpipe status` check before trusting a region
 * they did not create (sp__ring_validate, sp__service_validate), plus the
 * region-name check.
 *
 * The header is built from a valid template (2 slots, 4 positions, 2
 * ranks, 12-byte samples, a start state) and the input changes it:
 *   byte 0 even: the rest is XOR'ed onto the header bytes (zeros = valid);
 *   byte 0 odd:  the rest is patches (u16 offset, u8 length, bytes).
 * The mapping handed to the validator is min(header's region_size, 4 MiB)
 * bytes (less by byte 1 when bit 1 of byte 0 is set, to test truncation).
 * When validation passes, every slot array the client would touch is read
 * at both ends: ASan reports any offset outside the mapping. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool/ring_internal.h"
#include "service/region_internal.h"
#include "seedpipe/state.h"
#include "augment/pipeline_internal.h"

static sp__ring_hdr tmpl;

static void make_template(void) {
    memset(&tmpl, 0, sizeof tmpl);
    tmpl.magic = SP__RING_MAGIC;
    tmpl.version = SP__RING_VERSION;
    tmpl.nslots = 2;
    tmpl.cap = 4;
    tmpl.nranks = 2;
    tmpl.world = 2;
    tmpl.sample_bytes = 12;
    if (sp__ring_layout(&tmpl, NULL) != 0) abort();
    tmpl.fp_hi = 0x1122334455667788ull;
    tmpl.fp_lo = 0x99aabbccddeeff00ull;
    tmpl.owner_pid = 1;
    tmpl.nworkers = 2;
    tmpl.start_abs = 0;
    tmpl.batches_per_epoch = 3;
    tmpl.epochs = 2;
    tmpl.total = 6;
    tmpl.owner_uid = 0;
    sp_loader_state st;
    memset(&st, 0, sizeof st);
    st.fingerprint.hi = tmpl.fp_hi;
    st.fingerprint.lo = tmpl.fp_lo;
    st.seed = 7;
    st.samples = 10;
    st.batch_size = 4;
    st.dtype = SP_DTYPE_UINT8;
    st.layout = SP_LAYOUT_NCHW;
    st.c = 1;
    st.h = 2;
    st.w = 6;
    int n = sp_loader_state_format(&st, tmpl.state_text, sizeof tmpl.state_text);
    if (n <= 0 || (size_t)n >= sizeof tmpl.state_text) abort();
    sp_loader_state chk;
    if (sp__service_validate(&tmpl, tmpl.region_size, &chk, NULL) != 0) abort();
}

static void touch(const uint8_t *p, size_t n) {
    volatile uint8_t a = p[0];
    a ^= p[n - 1];
    (void)a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) { make_template(); init = 1; }
    if (size < 1) return 0;
    uint8_t mode = data[0];
    uint8_t shrink = size > 1 ? data[1] : 0;
    data++;
    size--;
    sp__ring_hdr h = tmpl;
    uint8_t *hb = (uint8_t *)&h;
    if (!(mode & 1)) {
        for (size_t i = 0; i < size && i < sizeof h; i++) hb[i] ^= data[i];
    } else {
        size_t i = 0;
        while (i + 3 <= size) {
            size_t off = ((size_t)data[i] | (size_t)data[i + 1] << 8) % sizeof h;
            size_t n = data[i + 2];
            i += 3;
            if (n > size - i) n = size - i;
            if (n > sizeof h - off) n = sizeof h - off;
            memcpy(hb + off, data + i, n);
            i += n;
        }
    }
    size_t mapped = h.region_size < (4u << 20) ? (size_t)h.region_size : (4u << 20);
    if (mapped < sizeof h) mapped = sizeof h;
    if ((mode & 2) && mapped > shrink) mapped -= shrink;
    uint8_t *buf = calloc(1, mapped < sizeof h ? sizeof h : mapped);
    if (!buf) return 0;
    memcpy(buf, &h, sizeof h);
    const sp__ring_hdr *hp = (const sp__ring_hdr *)buf;
    sp_error err;
    int rc = sp__ring_validate(hp, mapped, &err);
    if (rc == 0) {
        if (hp->region_size > mapped) abort();
        for (uint32_t s = 0; s < hp->nslots; s++) {
            touch((const uint8_t *)sp__slot(hp, s), sizeof(sp__slot_hdr));
            touch((const uint8_t *)sp__slot_state(hp, s), 8 * (size_t)hp->cap);
            touch((const uint8_t *)sp__slot_crash(hp, s), 4 * (size_t)hp->cap);
            touch((const uint8_t *)sp__slot_items(hp, s), sizeof(sp__item) * (size_t)hp->cap);
            touch((const uint8_t *)sp__slot_indices(hp, s), 8 * (size_t)hp->cap);
            touch((const uint8_t *)sp__slot_labels(hp, s), 4 * (size_t)hp->cap);
            touch((const uint8_t *)sp__slot_skipped(hp, s), 8 * (size_t)hp->cap);
            touch((const uint8_t *)sp__slot_subst(hp, s), 16 * (size_t)hp->cap);
            touch((const uint8_t *)sp__slot_ranks(hp, s),
                  sizeof(sp__rank_slice) * (size_t)hp->nranks);
            touch(sp__slot_images(hp, s), (size_t)(hp->sample_bytes * hp->cap));
        }
        sp_loader_state st0;
        if (sp__service_validate(hp, mapped, &st0, &err) == 0) {
            if (hp->nranks < 1 || hp->nranks > SP__RING_MAX_RANKS) abort();
            if ((uint64_t)st0.c * st0.h * st0.w * sp__dtype_size(st0.dtype) != hp->sample_bytes)
                abort();
        }
    } else if (err.msg[0] == '\0') {
        abort();
    }
    free(buf);
    /* the region-name rule: 1..200 of [A-Za-z0-9._-] */
    char name[260];
    size_t nl = size < sizeof name - 1 ? size : sizeof name - 1;
    memcpy(name, data, nl);
    name[nl] = '\0';
    if (sp__region_name_check(name, NULL) == 0) {
        size_t l = strlen(name);
        if (l < 1 || l > 200 || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                              "0123456789._-") != l)
            abort();
    }
    return 0;
}
