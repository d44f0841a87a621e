/* fuzz_pipeline - the pipeline spec parser: any string gives a pipeline or
 * SP_ESPEC with a message; a parsed pipeline's canonical form parses again
 * to the same canonical form, and its output dims are computable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "seedpipe/pipeline.h"
#include "augment/pipeline_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    if (s[0] == '@') s[0] = ' ';   /* "@file" would read files: not this target's job */
    sp_pipeline *p = NULL;
    sp_error err;
    if (sp_pipeline_parse(s, &p, &err) == 0) {
        const char *c1 = sp__pipeline_canonical(p);
        sp_pipeline *q = NULL;
        if (sp_pipeline_parse(c1, &q, &err) != 0) abort();   /* canonical must parse */
        if (strcmp(c1, sp__pipeline_canonical(q)) != 0) abort();
        int h, w, c;
        (void)sp__pipeline_output_dims(p, 28, 28, &h, &w, &c, &err);
        (void)sp__pipeline_output_dims(p, 0, 0, &h, &w, &c, &err);
        (void)sp_pipeline_has_normalize(p);
        sp_pipeline_destroy(q);
        sp_pipeline_destroy(p);
    } else if (p != NULL || err.msg[0] == '\0') {
        abort();
    }
    free(s);
    return 0;
}
