/* fuzz_state - the loader-state reader (`--resume`): any bytes give 0 or
 * SP_EFORMAT; a parsed state formats and re-parses to the same state. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "seedpipe/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_loader_state st, st2;
    sp_error err;
    int rc = sp_loader_state_parse((const char *)data, size, &st, &err);
    if (rc != 0) {
        if (rc != SP_EFORMAT || err.msg[0] == '\0') abort();
        return 0;
    }
    char buf[SP_STATE_MAX_BYTES];
    int n = sp_loader_state_format(&st, buf, sizeof buf);
    if (n <= 0 || (size_t)n >= sizeof buf) abort();
    if (sp_loader_state_parse(buf, (size_t)n, &st2, &err) != 0) abort();
    char buf2[SP_STATE_MAX_BYTES];
    int n2 = sp_loader_state_format(&st2, buf2, sizeof buf2);
    if (n2 != n || memcmp(buf, buf2, (size_t)n) != 0) abort();
    return 0;
}
