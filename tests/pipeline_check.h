/* pipeline_check.h - the pipeline-spec checks the op tests share: a spec
 * that must parse, one that must fail naming a word, and a canonical form
 * that must come back from its own parse (include/seedpipe/pipeline.h).
 * Header-only: each test is its own program; needs check.h's CHECK*.
 */
#ifndef SEEDPIPE_TESTS_PIPELINE_CHECK_H
#define SEEDPIPE_TESTS_PIPELINE_CHECK_H

#include "seedpipe/pipeline.h"
#include "check.h"

#include <string.h>
#include "augment/pipeline_internal.h"

/* spec parsed, or the test fails with the parser's message. */
static inline sp_pipeline *parse_ok(const char *spec) {
    sp_pipeline *p = NULL;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp_pipeline_parse(spec, &p, &err), &err);
    return p;
}

/* spec refused (SP_ESPEC, nothing returned) with `needle` in the message. */
static inline void expect_spec_error(const char *spec, const char *needle) {
    sp_pipeline *p = NULL;
    sp_error err;
    sp_error_clear(&err);
    CHECK_MSG(sp_pipeline_parse(spec, &p, &err) == SP_ESPEC && !p, "%s", spec);
    CHECK_MSG(strstr(err.msg, needle), "%s: \"%s\" lacks \"%s\"", spec, err.msg, needle);
}

/* spec's canonical form is canon, and canon parses to itself. */
static inline void expect_canonical(const char *spec, const char *canon) {
    sp_pipeline *p = parse_ok(spec);
    CHECK_MSG(strcmp(sp__pipeline_canonical(p), canon) == 0, "%s -> %s", spec,
              sp__pipeline_canonical(p));
    sp_pipeline *q = parse_ok(sp__pipeline_canonical(p));
    CHECK(strcmp(sp__pipeline_canonical(q), canon) == 0);
    sp_pipeline_destroy(q);
    sp_pipeline_destroy(p);
}

#endif
