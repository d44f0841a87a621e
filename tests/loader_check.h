/* loader_check.h - a loader's sp_loader_info in one expression, for the C
 * tests (loader.h sp_loader_info_get(); a failing call fails the test).
 */
#ifndef SP_TESTS_LOADER_CHECK_H
#define SP_TESTS_LOADER_CHECK_H
#include "check.h"
#include "seedpipe/loader.h"

static inline sp_loader_info ld_info(const sp_loader *ld) {
    sp_loader_info li;
    memset(&li, 0, sizeof li);
    li.struct_size = sizeof li;
    CHECK(sp_loader_info_get(ld, &li) == 0);
    return li;
}
#endif
