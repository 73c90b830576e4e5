/* SPDX-License-Identifier: BSD-3-Clause */
/* router_internal.h: the router's struct and its retired records, shared by router.c (readers, writers, reclamation, hooks) and router_migration.c; never installed. */
#ifndef MCR_ROUTER_INTERNAL_H
#define MCR_ROUTER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <urcu-bp.h>

#include "mcroute_router.h"
#include "snapshot/overlay.h"

/* How many changes of one router may await reclamation of what they
 * replaced (mcroute_router.h, "Reclamation": 256). */
#define MCR__ROUTER_RETIRED_MAX 256u

typedef struct hook {
    mcr_router_hook fn;
    void *arg;
} hook;

/* What one change replaced, on its way to reclamation: allocated by the
 * writer before it takes the mutex (so that running out of memory publishes
 * nothing), handed to call_rcu() after the swap, freed by reclaim_cb() or
 * collect(). A publish replaces the effective snapshot and the published
 * one (the same snapshot, referenced twice, when no override is in force),
 * and the overlay when a publish drops or holds overrides; an overlay
 * change replaces the overlay, and the effective snapshot when the states
 * change. */
typedef struct retired {
    struct rcu_head head;
    mcr_router *router;
    mcr_snapshot *snaps[2]; /* references to drop, or NULL */
    mcr__overlay *overlay;  /* to free, or NULL */
    /* Retired by a try_ variant: after the grace period,
     * reclaim_cb() does not free it but pushes it on the router's
     * `collectable` stack, and a writer's thread frees it (collect()). */
    int deferred;
    struct retired *next;
} retired;

struct mcr_router {
    /* The effective snapshot (what readers get: `base` with the applied
     * overrides of `overlay`), or NULL. Written only with write_mu held
     * (release), read by anyone inside a read-side section (acquire). The
     * router owns one reference to it. */
    _Atomic(mcr_snapshot *) current;
    /* A router fed from a state (router_state.c): the generation in its
     * PATH.shm (NULL: not fed from a state; never unmapped while the
     * router lives), and the generation last looked at. Next to `current`:
     * every read loads the pointer. */
    _Atomic(_Atomic uint64_t *) state_gen;
    _Atomic uint64_t state_seen;
    struct mcr__router_state *state;
    /* The published snapshot (what publish and apply were given), and the
     * local overlay, resolved against it (NULL: no override). The same
     * rules as `current`; one reference to `base` of its own (also when it
     * is `current`); the overlay is immutable once stored here. */
    _Atomic(mcr_snapshot *) base;
    _Atomic(mcr__overlay *) overlay;
    /* Raised (release) by each change of `current`, after the store. */
    _Atomic uint64_t generation;
    /* Serializes publishers, and guards the hook list (publishes read it). */
    pthread_mutex_t write_mu;
    hook *hooks;
    size_t nhooks, hooks_cap;
    /* Replaced snapshots handed to call_rcu() and not yet reclaimed, at
     * most MCR__ROUTER_RETIRED_MAX. Raised by writers with write_mu held
     * (one at a time, so the bound is exact) and without reclaim_mu: a
     * writer that need not wait takes no other lock. Lowered by
     * reclaim_cb() with reclaim_mu held, which then broadcasts reclaim_cv
     * to whoever waits (under reclaim_mu) for it to fall. */
    pthread_mutex_t reclaim_mu;
    pthread_cond_t reclaim_cv;
    atomic_size_t nretired;
    /* The deferred records whose grace period has ended, a stack: pushed by
     * reclaim_cb() with reclaim_mu held (a CAS loop), taken whole by
     * collect() with one exchange and no lock. `ndeferred` counts the
     * deferred records not collected yet (grace period or not); `nwaiters`
     * the threads in wait_retired(), which a collect() lowering nretired
     * must wake (see wait_retired()). */
    _Atomic(retired *) collectable;
    atomic_size_t ndeferred;
    atomic_size_t nwaiters;
    /* Only its address matters: the TSan synchronization object of the
     * grace period (see the top of the file). */
    char tsan_grace_period;
    /* The migration (mcr_router_set_migration()): two references, or
     * NULL; guarded by trans_mu alone (a swap, never a hook or a wait). */
    pthread_mutex_t trans_mu;
    mcr_snapshot *t_from, *t_to;
    unsigned t_flags;
    uint64_t t_deadline_ns; /* CLOCK_MONOTONIC; 0: until ended */
    uint64_t t_serial;
};

/* ---- router_state.c: a router fed from a state (mcroute_state.h) ---- */

/* Look at the state again: adopt its new generation, claim a slot after a
 * fork. Called by every read when the generation moved. */
void mcr__router_state_refresh(mcr_router *r);
/* Release the state's slot and mappings (mcr_router_free()). */
void mcr__router_state_free(mcr_router *r);
/* 1 when this thread is inside a read-side section (router.c): no
 * publish then. */
int mcr__router_in_section(void);

/* What every read of a router does first: one load of the state's
 * generation when fed from one. */
static inline void mcr__router_state_check(mcr_router *r)
{
    _Atomic uint64_t *g = atomic_load_explicit(&r->state_gen, memory_order_relaxed);
    if (__builtin_expect(g != NULL, 0) &&
        atomic_load_explicit(g, memory_order_acquire) !=
            atomic_load_explicit(&r->state_seen, memory_order_relaxed))
        mcr__router_state_refresh(r);
}

#endif /* MCR_ROUTER_INTERNAL_H */
