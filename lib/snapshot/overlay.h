/* SPDX-License-Identifier: BSD-3-Clause */
/* overlay.h: a router's local overlay (server id -> state overrides on the published snapshot) and the effective snapshot it gives, for router.c; never installed. */
#ifndef MCR_OVERLAY_H
#define MCR_OVERLAY_H

#include <stdbool.h>
#include <stddef.h>

#include "placement/placement_internal.h"
#include "mcroute_snapshot.h"

/* One override: server `id`, at the address it had in the published
 * snapshot when the override was set, is given `state`. */
typedef struct mcr__override {
    char *id;
    char *host;
    int port;
    mcr_server_state state;
    /* In force in the effective snapshot; false: held (it would leave no
     * ACTIVE server, see mcr__overlay_resolve()). */
    bool applied;
} mcr__override;

/* The overrides of a router, in the order they were first set. Once a
 * router has stored one it is immutable (readers look at it inside
 * read-side sections) and is replaced whole; writers work on copies. Every
 * function takes NULL for the empty overlay. */
typedef struct mcr__overlay {
    size_t n;
    mcr__override *v;
} mcr__overlay;

void mcr__overlay_free(mcr__overlay *ov);

/* A deep copy of `in` (an empty overlay, never NULL, for NULL) into *out.
 * MCR_OK or MCR_ERR_NOMEM. */
int mcr__overlay_copy(const mcr__overlay *in, mcr__overlay **out, mcr_error *err);

/* Whether a and b hold the same overrides in the same order, applied
 * flags included. */
bool mcr__overlay_equal(const mcr__overlay *a, const mcr__overlay *b);

/* The index of `id`'s override, or -1. */
long mcr__overlay_find(const mcr__overlay *ov, const char *id);

/* Give server `id` of `base` the state `st` in `ov` (an override of the
 * same id is replaced, keeping its place in the order). MCR_ERR_UNKNOWN (`base` lists no such id), MCR_ERR_INVALID
 * (not a state), MCR_ERR_NOMEM. Applied flags are left to
 * mcr__overlay_resolve(). */
int mcr__overlay_set(mcr__overlay *ov, const mcr_snapshot *base, const char *id,
                     mcr_server_state st, mcr_error *err);

/* Remove `id`'s override from `ov`: MCR_OK or MCR_ERR_UNKNOWN (none). */
int mcr__overlay_clear(mcr__overlay *ov, const char *id, mcr_error *err);

/* Fit `ov` to the published snapshot `base`: an override whose id `base`
 * no longer lists, or lists at another address, is dropped; then the
 * applied flags. An override that leaves the ACTIVE servers of `base` as
 * they are (to ACTIVE, or on a server not ACTIVE in `base`) is always
 * applied; those that take an ACTIVE server out (DOWN or DRAINING) are
 * applied in the order they were set as long as one ACTIVE server
 * remains, and the rest are held. */
void mcr__overlay_resolve(mcr__overlay *ov, const mcr_snapshot *base);

/* Whether two overlays resolved against `base` give the same states to
 * its servers (so the same effective snapshot). */
bool mcr__overlay_same_effect(const mcr__overlay *a, const mcr__overlay *b,
                              const mcr_snapshot *base);

/* The effective snapshot of `base` under `ov` (resolved against it) into
 * *out, a new reference: `base` itself when no applied override changes a
 * state, else `base` with those states changed, built with the epoch of
 * `base` (its checksum is that of its own content). MCR_OK or
 * MCR_ERR_NOMEM. */
int mcr__overlay_effective(const mcr__overlay *ov, const mcr_snapshot *base, mcr_snapshot **out,
                           mcr_error *err);

#endif
