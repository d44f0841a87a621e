/* fuzz_trace - the trace-file reader of `seedpipe trace-summary`: the input
 * is written to a temporary file and read with sp_trace_summary_read()
 * (3 gaps kept). Any bytes give 0 or a named error (SP_EFORMAT, SP_ELIMIT)
 * with nothing allocated; a summary that reads holds together: its
 * processes and gaps within their counts, every name NUL-terminated and
 * free of control bytes (escaped as \xNN), gaps longest first. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "seedpipe/trace.h"

/* 1 if s (n bytes) is NUL-terminated and prints no control byte. */
static int clean(const char *s, size_t n) {
    const char *z = memchr(s, '\0', n);
    if (!z) return 0;
    for (const char *c = s; c < z; c++) {
        unsigned char u = (unsigned char)*c;
        if (u < 0x20 || u == 0x7f || (u >= 0x80 && u <= 0x9f)) return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    char *path = fz_write("trace.json", data, size);
    sp_trace_summary s;
    sp_error err;
    int rc = sp_trace_summary_read(path, 3, &s, &err);
    if (rc == 0) {
        if (s.ngaps > 3 || (s.nprocs && !s.procs)) abort();
        for (size_t i = 0; i < s.nprocs; i++)
            if (!clean(s.procs[i].name, sizeof s.procs[i].name)) abort();
        for (size_t i = 0; i < s.ngaps; i++) {
            if (!clean(s.gaps[i].waited, sizeof s.gaps[i].waited)) abort();
            if (i && s.gaps[i].dur_us > s.gaps[i - 1].dur_us) abort();
        }
        sp_trace_summary_free(&s);
    } else if ((rc != SP_EFORMAT && rc != SP_ELIMIT && rc != SP_ENOMEM) || err.msg[0] == '\0' ||
               s.procs || s.gaps) {
        abort();
    }
    free(path);
    return 0;
}
