/* SPDX-License-Identifier: BSD-3-Clause */
/* routercache.c: each thread's counted references to the snapshots of the routers it reads: slots, their eviction, and their release at thread exit or on request. */

/*
 * Why a cache (lib/router/router.c says the rest). liburcu-bp's read side, as we
 * may not inline it (no _LGPL_SOURCE), is two calls into the shared
 * library per section, each finding the thread's reader slot through
 * thread-local storage and checking that the thread is registered: with a
 * cheap key hash a lookup through the router cost about 1.5x a bare one
 * (bench_router). So
 * a thread keeps, per router it reads, a counted reference to the
 * router's current snapshot: while it is still the router's current one
 * (a pointer compare), acquire returns it with no RCU section at all; the first acquire after a change takes an RCU section once to
 * reference the new snapshot, and drops the old reference.
 *
 * What it costs: a thread keeps the last snapshot it got from a router
 * alive (its memory) until its next acquire on that router, its exit,
 * mcr_router_reclaim() with MCR_ROUTER_FLUSH_THREAD, mcr_router_free() of that router in this
 * thread, or the eviction of its slot (it reads more than
 * MCR__RCACHE_SLOTS routers in turn). The router's own reclamation
 * (the count, the bound, mcr_router_reclaim()) is unchanged:
 * it counts the router's references, and a cached one is not the
 * router's.
 *
 * Exit: a pthread key whose destructor drops the thread's references. The
 * key's value is the thread's own cache (the destructor runs before the
 * thread's static TLS goes away). A thread whose key cannot be set (no key
 * could be created, or pthread_setspecific() failed) caches nothing: all
 * its sections are RCU sections, as before the cache.
 */
#include <pthread.h>
#include <string.h>

#include "mcroute_router.h"
#include "routercache.h"

_Thread_local mcr__rcache mcr__rcache_tls __attribute__((tls_model("initial-exec")));

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int key_ok;

static void drop_all(mcr__rcache *c)
{
    for (int i = 0; i < MCR__RCACHE_SLOTS; i++) {
        mcr_snapshot *snap = c->slot[i].snap;
        memset(&c->slot[i], 0, sizeof c->slot[i]);
        mcr_snapshot_unref(snap);
    }
}

/* The key's destructor, at thread exit. A later acquire from another
 * destructor of the same thread registers again (glibc calls destructors
 * again for keys set meanwhile, PTHREAD_DESTRUCTOR_ITERATIONS times). */
static void thread_exit(void *arg)
{
    mcr__rcache *c = arg;
    drop_all(c);
    c->state = 0;
}

static void make_key(void)
{
    key_ok = pthread_key_create(&key, thread_exit) == 0;
}

/* Unloading the library (dlclose, and process exit): no thread may run
 * thread_exit() from unloaded code afterwards, so the key goes first; the
 * cached references of threads still alive are left to the process. */
__attribute__((destructor)) static void unload(void)
{
    if (key_ok)
        pthread_key_delete(key);
}

static int registered(mcr__rcache *c)
{
    if (c->state == 0) {
        (void)pthread_once(&key_once, make_key);
        c->state = key_ok && pthread_setspecific(key, c) == 0 ? 1 : -1;
    }
    return c->state > 0;
}

/* Move slot i to the front, the others down by one. */
static void to_front(mcr__rcache *c, int i)
{
    if (i > 0) {
        mcr__rcache_slot s = c->slot[i];
        memmove(&c->slot[1], &c->slot[0], (size_t)i * sizeof c->slot[0]);
        c->slot[0] = s;
    }
}

static int find(const mcr__rcache *c, const void *router)
{
    for (int i = 0; i < MCR__RCACHE_SLOTS; i++)
        if (c->slot[i].router == router)
            return i;
    return -1;
}

mcr__rcache_slot *mcr__rcache_lookup(mcr__rcache *c, const void *router)
{
    int i = find(c, router);
    if (i < 0)
        return NULL;
    to_front(c, i);
    return &c->slot[0];
}

mcr__rcache_slot *mcr__rcache_claim(mcr__rcache *c, const void *router)
{
    int i;

    if (!registered(c))
        return NULL;
    i = find(c, router);
    if (i < 0) {
        /* An empty slot (router NULL) or the least recently used. */
        i = find(c, NULL);
        if (i < 0)
            i = MCR__RCACHE_SLOTS - 1;
        c->slot[i].router = router;
    }
    to_front(c, i);
    return &c->slot[0];
}

void mcr__rcache_forget(const void *router)
{
    mcr__rcache *c = &mcr__rcache_tls;
    int i = find(c, router);
    mcr_snapshot *snap;

    if (router == NULL || i < 0)
        return;
    snap = c->slot[i].snap;
    /* Keep the used slots first: an empty one is what claim takes. */
    memmove(&c->slot[i], &c->slot[i + 1], (size_t)(MCR__RCACHE_SLOTS - 1 - i) * sizeof c->slot[0]);
    memset(&c->slot[MCR__RCACHE_SLOTS - 1], 0, sizeof c->slot[0]);
    mcr_snapshot_unref(snap);
}

void mcr__rcache_flush(void)
{
    drop_all(&mcr__rcache_tls);
}
