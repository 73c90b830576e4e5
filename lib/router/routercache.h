/* SPDX-License-Identifier: BSD-3-Clause */
/* routercache.h: each thread's counted references to the snapshots of the routers it reads (lib/router/routercache.c), behind lib/router/router.c's acquire and release. */
#ifndef MCR_ROUTERCACHE_H
#define MCR_ROUTERCACHE_H

#include <stdint.h>

#include "mcroute_snapshot.h"

/* Routers whose snapshot one thread keeps: a thread reading more routers
 * than this in turn takes the slow path (an RCU section and a reference)
 * at each change of router. Mirrored by MCR_ROUTER_THREAD_CACHE in
 * mcroute_router.h, which says what it costs. */
#define MCR__RCACHE_SLOTS 4
/* Sections a thread may nest and still be served from its cache; deeper
 * ones are RCU sections of their own (rcu_levels has one bit a level). */
#define MCR__RCACHE_NEST 64

typedef struct mcr__rcache_slot {
    /* The router (compared, never dereferenced: it may have been freed),
     * or NULL for an empty slot. */
    const void *router;
    /* One counted reference to what the router's current snapshot was
     * then, or NULL (the router held none). */
    mcr_snapshot *snap;
} mcr__rcache_slot;

typedef struct mcr__rcache {
    /* Most recently used first: acquire's fast path looks at slot[0]. */
    mcr__rcache_slot slot[MCR__RCACHE_SLOTS];
    /* Read-side sections open in this thread (mcr_router_acquire() not yet
     * released), of both kinds: a slot's reference may be dropped only
     * when it is 0, since an open section may use it. */
    unsigned depth;
    /* Of those, the RCU sections (liburcu-bp read lock held): bit d of
     * rcu_levels for the section at depth d below MCR__RCACHE_NEST; every
     * section at or past it is one. */
    unsigned nrcu;
    uint64_t rcu_levels;
    /* 0: not registered yet; 1: registered (the exit destructor will drop
     * the references); -1: cannot be (no pthread key): never cache. */
    int state;
} mcr__rcache;

/* This thread's cache. Accessed only by its thread, and by the key's
 * destructor when the thread exits. */
/* initial-exec: one %fs-relative load instead of a __tls_get_addr() call per
 * lookup in the shared library (its few hundred bytes come from the static
 * TLS surplus glibc keeps for libraries, dlopen()ed ones included). */
extern _Thread_local mcr__rcache mcr__rcache_tls __attribute__((tls_model("initial-exec")));

/* The slot of `router`, moved to the front, or NULL when the thread has
 * none. Never drops a reference: allowed at any depth. */
mcr__rcache_slot *mcr__rcache_lookup(mcr__rcache *c, const void *router);

/* The slot of `router` at the front, taken (its old reference
 * still in `snap`, for the caller to replace and drop) from the least
 * recently used one if the thread has none; NULL when the thread cannot
 * be registered for the exit destructor (then nothing may be cached).
 * Only with depth 0: the reference it leaves to drop may be another
 * router's. */
mcr__rcache_slot *mcr__rcache_claim(mcr__rcache *c, const void *router);

/* Drop the calling thread's reference for `router`, if it has one
 * (mcr_router_free(): the router's address may be reused). Depth 0. */
void mcr__rcache_forget(const void *router);

/* Drop the calling thread's cached references (no section may be open:
 * mcr_router_reclaim() checks). */
void mcr__rcache_flush(void);

#endif /* MCR_ROUTERCACHE_H */
