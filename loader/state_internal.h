/* state_internal.h - a blend's part of a loader state (state_blend.c),
 * used by state.c's make, check, write and read. Not installed. */
#ifndef SEEDPIPE_STATE_INTERNAL_H
#define SEEDPIPE_STATE_INTERNAL_H

#include "seedpipe/state.h"
#include "common/json_internal.h"
#include "common/json_write_internal.h"

#include <stddef.h>

/* The blend_ fields of ld's state (nothing for another loader). */
void sp__state_blend_at(const sp_loader *ld, sp_loader_state *st);
/* 1 and a reason into why when both are blend states that differ (the
 * identity, or the weights and their switch); 0 otherwise. */
int sp__state_blend_check(const sp_loader_state *me, const sp_loader_state *st, char *why,
                          size_t cap);
/* sp_loader_resume()'s blend part: me is ld's state before; the state's
 * switch adopted, or a switch made at st's position (weights that
 * differ). *changed = 1 when ld changed (the caller then checks st with
 * ld's new fingerprint); 0 and nothing done when ld or st is no blend or
 * the identities differ (the caller's check names it). */
int sp__state_blend_resume(sp_loader *ld, const sp_loader_state *me, const sp_loader_state *st,
                           int *changed, sp_error *err);
/* The blend_ keys and their values, as members of the object w is in
 * (nothing when st is no blend). */
void sp__state_blend_write(const sp_loader_state *st, sp__jw *w);
/* The blend_ keys of a parsed state: `present` of the four were given. */
int sp__state_blend_parse(const sp__json *j, int present, sp_loader_state *st, sp_error *err);

#endif
