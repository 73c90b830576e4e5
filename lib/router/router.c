/* SPDX-License-Identifier: BSD-3-Clause */
/* router.c: the current snapshot behind an RCU-protected pointer: lock-free lookups, serialized publishes and local-overlay changes, hooks. */

/*
 * Why userspace RCU, and why its "bp" flavor.
 *
 * Readers must take no lock and never touch freed memory, however often the
 * snapshot is replaced. The candidates:
 *
 *  - a reader-writer lock: readers write the lock word, so every lookup on
 *    every core bounces one cache line, and a writer stalls all readers;
 *  - an atomic reference count on the snapshot, taken by each lookup: the
 *    same shared cache line on every lookup, and the load-then-increment
 *    race needs a second mechanism anyway (split counts, hazard pointers);
 *  - hazard pointers: correct and bounded, but a store + full fence per
 *    lookup and a scan per retire; hand-written, so unproven;
 *  - epoch-based reclamation / RCU: readers only mark "I am reading" in
 *    their own cache line; the writer waits for a grace period before
 *    freeing. liburcu (userspace RCU, the design of the Linux kernel's RCU,
 *    LGPL, packaged by Debian as liburcu-dev, used by LTTng and Knot DNS)
 *    is the proven implementation.
 *
 * liburcu's flavors differ in what they ask of reader threads. "qsbr" and
 * "memb" need every reader thread registered (and qsbr needs periodic
 * quiescent-state calls): a library cannot impose that on the application's
 * threads. "bp" (bulletproof) registers a thread on its first read-side
 * section and unregisters it when the thread exits, so any thread may look
 * keys up with no setup. Its read side is a counter update in the thread's
 * own slot and a compiler barrier (the kernel's sys_membarrier() moves the
 * memory barrier to the writer); as we do not define _LGPL_SOURCE (that
 * would inline LGPL code into ours), it is also two calls into the shared
 * library and their thread-local lookups: about 4 ns per section, which
 * bench_router measures. Its slower grace periods do not matter: no
 * publisher waits for one (below).
 *
 * The thread cache (lib/router/routercache.c). Those two calls per section cost a
 * lookup with a cheap hash about half of a bare one, so most sections are
 * no RCU section at all: each thread keeps a counted reference to the
 * current snapshot of each router it reads (a few), and
 * mcr_router_acquire() returns it while it is still the router's `current`:
 * one thread-local access, one load of `current` (compared, not
 * dereferenced), two compares. The comparison is of the snapshot itself,
 * so a cached answer is exactly what an RCU reader would get at that
 * moment: never older than what the thread saw before through another
 * call (mcr_router_current(), a nested section). (A per-router change
 * counter stored after `current` was tried first: in the window between
 * the two stores a thread could get the new snapshot from
 * mcr_router_current() and then the old one from the cache, and
 * test_router's stress test caught the epoch going backwards under TSan.)
 * The cached reference keeps its snapshot from being freed, so its address
 * cannot be reused by another one; a router freed and another made at its
 * address either has that very snapshot as current (the right answer) or
 * another (a refresh). The first acquire after a change takes an RCU
 * section once, references the new snapshot and drops the old one; release
 * decrements a counter. Sections still
 * nest: a slot's reference is dropped only when none of its thread's
 * sections is open; a nested acquire that finds no fresh slot is an RCU
 * section of its own, as every section was before. The cost, stated in
 * mcroute_router.h: a thread keeps the last snapshot it read alive until
 * its next acquire on that router, its exit or a reclaim with MCR_ROUTER_FLUSH_THREAD.
 * It keeps no reader in a grace period: the router's reclamation below is
 * unchanged, and counts only the router's references.
 *
 * Deferred, bounded reclamation. A publish must not wait for a grace
 * period: pools set their ejections in the local overlay from their event
 * loop (a change of the current snapshot like a publish), and a grace period
 * lasts as long as the slowest reader section in progress (on a loaded
 * machine, a reader preempted inside one; urcu-bp also sleeps 10 ms between
 * its polls of the readers): synchronize_rcu() there held loops for up to
 * 265 ms, longer than the requests' timeouts. So the replaced snapshot is
 * handed to call_rcu() (urcu_bp_call_rcu()), whose worker thread, one per
 * process and started by liburcu on first use, waits for the grace period
 * and runs reclaim_cb(), which drops the router's reference. The cost for
 * the publisher is an allocation and a wait-free enqueue.
 *
 * call_rcu alone is unbounded: under a publish storm, or while one reader
 * sits in a section, replaced snapshots pile up. Each router counts its own
 * (nretired) and allows MCR__ROUTER_RETIRED_MAX; the count is raised with
 * the writer mutex held, so it never goes past the bound. At
 * the bound, the blocking writers wait (on reclaim_cv, signalled by
 * reclaim_cb()) for one to be reclaimed: the old behaviour, but only past
 * the bound; the try_ variants refuse (MCR_ERR_BUSY) instead. mcr_router_free() waits for all of its own
 * (rcu_barrier() would wait for every callback of the process).
 *
 * Who frees. The call_rcu thread frees what blocking writers replaced.
 * What the try_ variants replaced it only pushes on a stack, and the
 * writer's own thread frees it (collect(): at its next try_ call, or when a
 * loop calls mcr_router_reclaim() with MCR_ROUTER_NOWAIT). glibc gives each thread its malloc
 * arena, and a free from another thread takes the lock of the arena the
 * memory came from: the call_rcu thread freeing a loop's snapshots held
 * the loop's arena lock while the loop allocated, and when it was
 * preempted holding it the loop waited a whole time slice (bench_publish:
 * 3-4 of 5,000 publishes blocked, up to 3.3 ms, on __lll_lock_wait_private).
 *
 * The writer mutex. A loop must not wait behind another writer either
 * (another pool's ejection, a watcher, an application's publish and its
 * hooks), so every writer (write_op()) makes its plan, the next published
 * snapshot, overlay and effective snapshot, before taking the mutex, from
 * the published snapshot and overlay of then, and under the mutex carries
 * it out if those are still the router's (else makes it again, from the
 * new ones, under the mutex: no update is lost, epochs stay +1 per apply).
 * The mutex is held only for the swap, the diff and the hooks. The try_
 * variants take it with a try-lock and return MCR_ERR_BUSY when another
 * writer holds it; the pool keeps the change and tries again on a later
 * turn of its loop, in order.
 *
 * The local overlay (overlay.c says why). Three pointers, each replaced
 * whole under the writer mutex: the published snapshot (`base`), the
 * overlay (immutable once stored) and the effective snapshot (`current`,
 * what readers get; `base` itself when no override applies). A change
 * retires in one record whatever it replaced of the three.
 *
 * ThreadSanitizer. liburcu is not instrumented, and its grace period rests
 * on membarrier()/fences TSan cannot see. Three consequences, three
 * measures:
 *
 *  1. The pointer itself is published with C11 atomics (release store,
 *     acquire load) instead of rcu_assign_pointer()/rcu_dereference(),
 *     whose inline assembly and volatile accesses TSan does not model. On
 *     x86 the instructions are the same (on weakly ordered CPUs an acquire
 *     load costs a few cycles more than a dependent load), and the edge
 *     "snapshot built -> snapshot read" is visible to TSan.
 *  2. The edge "reader done with the old snapshot -> its free" exists
 *     only through the grace period. We tell TSan about it: each read-side
 *     exit does __tsan_release() on a per-router address, and reclaim_cb(),
 *     which call_rcu runs only after a grace period that started after the
 *     swap, does __tsan_acquire() on it before the unref that frees.
 *     TSan's release accumulates (joins) the vector clocks of every
 *     releasing thread, and the grace period ends only after every section
 *     that could see the old pointer has called release, so the acquire
 *     orders all of them before the free. Without them TSan reports every
 *     free of a snapshot as racing with the readers (and, the other way
 *     round, it still reports a real race if the grace period is removed:
 *     the stress test of test_router.c was checked to fail that way).
 *  3. The retired record goes from the publisher to the call_rcu thread
 *     through liburcu's queue, which TSan does not see either: the
 *     publisher releases the record's address before call_rcu(), the
 *     callback acquires it first.
 *
 * These annotations are compiled only under TSan.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urcu-bp.h>

#include "placement/placement_internal.h"
#include "mcroute_router.h"
#include "snapshot/overlay.h"
#include "routercache.h"
#include "router_internal.h"
#include "snapshot/snapshot.h" /* the fast path of mcr_router_locate_index() */

/* ---- TSan annotations (see the top of the file) ---- */

#if defined(__SANITIZE_THREAD__)
#define MCR__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MCR__TSAN 1
#endif
#endif

#ifdef MCR__TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define MCR__TSAN_RELEASE(addr) __tsan_release(addr)
#define MCR__TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#else
#define MCR__TSAN_RELEASE(addr) ((void)(addr))
#define MCR__TSAN_ACQUIRE(addr) ((void)(addr))
#endif

/* Routers whose hooks are running in this thread, innermost first: a
 * publish from a hook would wait forever for the writer mutex its own
 * thread holds. A list because a hook may publish to another router, whose
 * hooks may in turn try the first. */
typedef struct hook_frame {
    const mcr_router *router;
    const struct hook_frame *up;
} hook_frame;

static _Thread_local const hook_frame *tls_hook_frames;


/* Whether the calling thread has a read-side section open: of the thread
 * cache (depth), or of liburcu (the router's own short sections). */
static int in_section(void)
{
    return mcr__rcache_tls.depth > 0 || urcu_bp_read_ongoing();
}

static int in_own_hook(const mcr_router *router)
{
    for (const hook_frame *f = tls_hook_frames; f != NULL; f = f->up)
        if (f->router == router)
            return 1;
    return 0;
}

int mcr_router_new(const mcr_snapshot *initial, mcr_router **out, mcr_error *err)
{
    mcr_router *r;

    if (out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_router_new: NULL output argument");
    r = calloc(1, sizeof *r);
    if (r == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "mcr_router_new: out of memory");
    int e;
    if ((e = pthread_mutex_init(&r->write_mu, NULL)) != 0) {
        free(r);
        return mcr__error_sys(err, e, "mcr_router_new: cannot create a mutex");
    }
    if ((e = pthread_mutex_init(&r->reclaim_mu, NULL)) != 0) {
        pthread_mutex_destroy(&r->write_mu);
        free(r);
        return mcr__error_sys(err, e, "mcr_router_new: cannot create a mutex");
    }
    if ((e = pthread_cond_init(&r->reclaim_cv, NULL)) != 0) {
        pthread_mutex_destroy(&r->reclaim_mu);
        pthread_mutex_destroy(&r->write_mu);
        free(r);
        return mcr__error_sys(err, e, "mcr_router_new: cannot create a condition");
    }
    atomic_init(&r->current, initial ? mcr_snapshot_ref(initial) : NULL);
    atomic_init(&r->base, initial ? mcr_snapshot_ref(initial) : NULL);
    atomic_init(&r->overlay, NULL);
    atomic_init(&r->generation, 0);
    atomic_init(&r->nretired, 0);
    atomic_init(&r->collectable, NULL);
    atomic_init(&r->ndeferred, 0);
    atomic_init(&r->nwaiters, 0);
    atomic_init(&r->state_gen, NULL);
    atomic_init(&r->state_seen, 0);
    if ((e = pthread_mutex_init(&r->trans_mu, NULL)) != 0) {
        mcr_snapshot_unref(atomic_load_explicit(&r->current, memory_order_relaxed));
        mcr_snapshot_unref(atomic_load_explicit(&r->base, memory_order_relaxed));
        pthread_cond_destroy(&r->reclaim_cv);
        pthread_mutex_destroy(&r->reclaim_mu);
        pthread_mutex_destroy(&r->write_mu);
        free(r);
        return mcr__error_sys(err, e, "mcr_router_new: cannot create a mutex");
    }
    *out = r;
    return MCR_OK;
}

/* Drop what a record holds, and the record. */
static void retired_release(retired *rec)
{
    mcr_snapshot_unref(rec->snaps[0]);
    mcr_snapshot_unref(rec->snaps[1]);
    mcr__overlay_free(rec->overlay);
    free(rec);
}

/* Free, on this thread, the deferred records whose grace period has ended.
 * Takes no lock unless a thread waits in wait_retired(): the count falls
 * without reclaim_mu, so a waiter that read it before the fall must be
 * woken. Both sides use sequentially consistent operations (the waiter
 * raises nwaiters, then reads nretired; we lower nretired, then read
 * nwaiters), so either the waiter sees the new count or we see the waiter,
 * and our broadcast under the mutex cannot fall between its check and its
 * wait. */
static size_t collect(mcr_router *router)
{
    retired *rec = atomic_exchange_explicit(&router->collectable, NULL, memory_order_acquire);
    size_t n = 0;

    while (rec != NULL) {
        retired *next = rec->next;
        retired_release(rec);
        n++;
        rec = next;
    }
    if (n > 0) {
        atomic_fetch_sub(&router->ndeferred, n);
        atomic_fetch_sub(&router->nretired, n);
        if (atomic_load(&router->nwaiters) > 0) {
            (void)pthread_mutex_lock(&router->reclaim_mu);
            (void)pthread_cond_broadcast(&router->reclaim_cv);
            (void)pthread_mutex_unlock(&router->reclaim_mu);
        }
    }
    return n;
}

/* Wait until at most `limit` replaced snapshots of `router` await
 * reclamation, collecting the deferred ones (on this thread) as their
 * grace periods end. */
static void wait_retired(mcr_router *router, size_t limit)
{
    (void)pthread_mutex_lock(&router->reclaim_mu);
    atomic_fetch_add(&router->nwaiters, 1);
    while (atomic_load(&router->nretired) > limit) {
        if (atomic_load(&router->collectable) != NULL) {
            (void)pthread_mutex_unlock(&router->reclaim_mu);
            collect(router);
            (void)pthread_mutex_lock(&router->reclaim_mu);
            continue;
        }
        (void)pthread_cond_wait(&router->reclaim_cv, &router->reclaim_mu);
    }
    atomic_fetch_sub(&router->nwaiters, 1);
    (void)pthread_mutex_unlock(&router->reclaim_mu);
}

void mcr_router_free(mcr_router *router)
{
    if (router == NULL)
        return;
    mcr__router_state_free(router);
    /* This thread's cached reference (other threads drop theirs later: a
     * new router at this address matches one only if that very snapshot is
     * its current one, which is then the right answer). */
    mcr__rcache_forget(router);
    /* The replaced snapshots still queued in call_rcu point at the router:
     * wait for their callbacks (no section of this thread is open, by
     * contract, so the grace periods can end). */
    wait_retired(router, 0);
    /* No reader may be left (the contract), so no grace period for the
     * current one: the reference can go at once. */
    mcr_snapshot_unref(atomic_load_explicit(&router->current, memory_order_relaxed));
    mcr_snapshot_unref(atomic_load_explicit(&router->base, memory_order_relaxed));
    mcr__overlay_free(atomic_load_explicit(&router->overlay, memory_order_relaxed));
    mcr_snapshot_unref(router->t_from);
    mcr_snapshot_unref(router->t_to);
    pthread_mutex_destroy(&router->trans_mu);
    pthread_cond_destroy(&router->reclaim_cv);
    pthread_mutex_destroy(&router->reclaim_mu);
    pthread_mutex_destroy(&router->write_mu);
    free(router->hooks);
    free(router);
}

/* ---- readers ---- */

int mcr__router_in_section(void)
{
    return mcr__rcache_tls.depth != 0 || mcr__rcache_tls.nrcu != 0;
}

/* Acquire when slot[0] is not the router's fresh snapshot (see the top of
 * the file): another slot, a refresh (depth 0 only), or an RCU section.
 * Not inlined: the fast path would save the registers it needs. */
static __attribute__((noinline)) const mcr_snapshot *acquire_slow(mcr_router *router,
                                                                   mcr__rcache *c)
{
    const mcr_snapshot *now = atomic_load_explicit(&router->current, memory_order_acquire);
    mcr__rcache_slot *s = NULL;
    mcr_snapshot *snap, *old;

    if (c->depth < MCR__RCACHE_NEST) {
        s = mcr__rcache_lookup(c, router);
        if (s != NULL && s->snap == now) {
            c->depth++;
            return s->snap;
        }
        /* Refresh or take a slot only when no section of this thread is
         * open: one may be using the reference that would be dropped. */
        s = c->depth == 0 ? mcr__rcache_claim(c, router) : NULL;
    }
    if (s == NULL) {
        /* An RCU section, as before the cache: no reference taken. */
        if (c->depth < MCR__RCACHE_NEST)
            c->rcu_levels |= (uint64_t)1 << c->depth;
        c->nrcu++;
        c->depth++;
        urcu_bp_read_lock();
        return atomic_load_explicit(&router->current, memory_order_acquire);
    }
    /* `current` again, inside the section: it may have changed since. */
    urcu_bp_read_lock();
    snap = atomic_load_explicit(&router->current, memory_order_acquire);
    if (snap != NULL)
        mcr_snapshot_ref(snap);
    MCR__TSAN_RELEASE(&router->tsan_grace_period);
    urcu_bp_read_unlock();
    old = s->snap;
    s->snap = snap;
    c->depth++;
    /* Perhaps the last reference (a thread that had not read since the
     * router reclaimed its own): then this frees it, on this thread. */
    mcr_snapshot_unref(old);
    return snap;
}

const mcr_snapshot *mcr_router_acquire(mcr_router *router)
{
    mcr__rcache *c = &mcr__rcache_tls;

    mcr__router_state_check(router);
    const mcr_snapshot *cur = atomic_load_explicit(&router->current, memory_order_acquire);
    unsigned d = c->depth;

    if (MCR__LIKELY(c->slot[0].router == router && c->slot[0].snap == cur &&
                    d < MCR__RCACHE_NEST)) {
        c->depth = d + 1;
        return cur;
    }
    return acquire_slow(router, c);
}

/* Release of a section when some of this thread's are RCU sections. */
static __attribute__((noinline)) void release_slow(mcr_router *router, mcr__rcache *c)
{
    unsigned d = c->depth;

    if (d < MCR__RCACHE_NEST) {
        if (((c->rcu_levels >> d) & 1) == 0)
            return; /* a cached one */
        c->rcu_levels &= ~((uint64_t)1 << d);
    }
    c->nrcu--;
    /* Before the unlock: once unlocked, the writer may already be past its
     * grace period, and the release would come too late to order our reads
     * before its free. */
    MCR__TSAN_RELEASE(&router->tsan_grace_period);
    urcu_bp_read_unlock();
}

void mcr_router_release(mcr_router *router, const mcr_snapshot *snap)
{
    mcr__rcache *c = &mcr__rcache_tls;

    (void)snap;
    c->depth--;
    if (MCR__UNLIKELY(c->nrcu != 0))
        release_slow(router, c);
}

int mcr_router_locate(mcr_router *router, const void *key, size_t len, mcr_route *out)
{
    const mcr_snapshot *snap;
    mcr_server_desc d;
    int rc = MCR_ERR_EMPTY;

    if (router == NULL || out == NULL || (key == NULL && len > 0))
        return MCR_ERR_INVALID;
    snap = mcr_router_acquire(router);
    if (snap != NULL) {
        uint32_t i = mcr_snapshot_locate(snap, key, len);
        rc = mcr_snapshot_server(snap, i, &d);
        if (rc == MCR_OK) {
            size_t n = strlen(d.host);
            if (n > MCR_HOSTNAME_MAX) /* hosts are at most that long: cannot happen */
                n = MCR_HOSTNAME_MAX;
            out->epoch = mcr_snapshot_epoch(snap);
            out->index = i;
            out->port = d.port;
            memcpy(out->host, d.host, n);
            out->host[n] = '\0';
            memset(out->reserved, 0, sizeof(out->reserved));
        }
    }
    mcr_router_release(router, snap);
    return rc;
}

/* mcr_router_locate_index() when slot[0] is not the router's fresh snapshot. */
static __attribute__((noinline)) uint32_t locate_index_slow(mcr_router *router, const void *key,
                                                            size_t len, uint64_t *epoch)
{
    const mcr_snapshot *snap = mcr_router_acquire(router);
    uint32_t i = UINT32_MAX;

    if (snap != NULL) {
        i = mcr_snapshot_locate(snap, key, len);
        if (epoch != NULL)
            *epoch = mcr_snapshot_epoch(snap);
    }
    mcr_router_release(router, snap);
    return i;
}

/* The cached snapshot is used without a section of its own: its slot's
 * reference is dropped only by this thread (a claim at depth 0 inside an
 * acquire, a flush, a free of the router, the thread's exit), and nothing
 * between the check and the lookup of the fast path does any of those. */
uint32_t mcr_router_locate_index(mcr_router *router, const void *key, size_t len,
                                 uint64_t *epoch)
{
    mcr__rcache *c = &mcr__rcache_tls;
    mcr__router_state_check(router);
    const mcr_snapshot *cur = atomic_load_explicit(&router->current, memory_order_acquire);

    if (MCR__LIKELY(c->slot[0].router == router && c->slot[0].snap == cur && cur != NULL)) {
        /* mcr_snapshot_locate() and mcr_snapshot_epoch(), read in place:
         * two calls fewer, which at a cheap hash are most of the cost of
         * this call over a bare lookup. */
        uint32_t i = cur->ring_map[mcr_ring_locate(cur->ring, key, len)];
        if (epoch != NULL)
            *epoch = cur->epoch;
        return i;
    }
    return locate_index_slow(router, key, len, epoch);
}

/* A counted reference to the snapshot in `slot` (current or published),
 * taken inside an RCU section. */
static mcr_snapshot *ref_of(mcr_router *router, _Atomic(mcr_snapshot *) *slot)
{
    mcr_snapshot *snap;

    if (router == NULL)
        return NULL;
    urcu_bp_read_lock();
    snap = atomic_load_explicit(slot, memory_order_acquire);
    /* Inside the section the snapshot cannot be freed, so its count is
     * above zero and may be raised. */
    if (snap != NULL)
        mcr_snapshot_ref(snap);
    MCR__TSAN_RELEASE(&router->tsan_grace_period);
    urcu_bp_read_unlock();
    return snap;
}

mcr_snapshot *mcr_router_current(mcr_router *router)
{
    if (router == NULL)
        return NULL;
    mcr__router_state_check(router);
    return ref_of(router, &router->current);
}

uint64_t mcr_router_epoch(mcr_router *router)
{
    const mcr_snapshot *snap;
    uint64_t epoch;

    if (router == NULL)
        return 0;
    snap = mcr_router_acquire(router);
    epoch = snap ? mcr_snapshot_epoch(snap) : 0;
    mcr_router_release(router, snap);
    return epoch;
}

mcr_snapshot *mcr_router_published(mcr_router *router)
{
    if (router == NULL)
        return NULL;
    mcr__router_state_check(router);
    return ref_of(router, &router->base);
}

uint64_t mcr_router_generation(mcr_router *router)
{
    if (router == NULL)
        return 0;
    mcr__router_state_check(router);
    return atomic_load_explicit(&router->generation, memory_order_acquire);
}

int mcr_router_local_state(mcr_router *router, const char *id, mcr_server_state *state,
                           int *applied)
{
    const mcr__overlay *ov;
    long k;
    int rc = MCR_ERR_UNKNOWN;

    if (router == NULL || id == NULL)
        return MCR_ERR_INVALID;
    urcu_bp_read_lock();
    ov = atomic_load_explicit(&router->overlay, memory_order_acquire);
    k = mcr__overlay_find(ov, id);
    if (k >= 0) {
        if (state != NULL)
            *state = ov->v[k].state;
        if (applied != NULL)
            *applied = ov->v[k].applied;
        rc = MCR_OK;
    }
    MCR__TSAN_RELEASE(&router->tsan_grace_period);
    urcu_bp_read_unlock();
    return rc;
}

int mcr_router_local_states(mcr_router *router, mcr_local_state **out, size_t *count,
                            mcr_error *err)
{
    const mcr__overlay *ov;
    mcr_local_state *v = NULL;
    size_t n, bytes;
    int rc = MCR_OK;

    if (router == NULL || out == NULL || count == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_router_local_states: NULL argument");
    urcu_bp_read_lock();
    ov = atomic_load_explicit(&router->overlay, memory_order_acquire);
    n = ov != NULL ? ov->n : 0;
    /* One block: the array, then the strings. */
    bytes = n * sizeof(*v);
    for (size_t i = 0; i < n; i++)
        bytes += strlen(ov->v[i].id) + strlen(ov->v[i].host) + 2;
    if (n > 0 && (v = malloc(bytes)) == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "mcr_router_local_states: out of memory");
    } else if (n > 0) {
        char *o = (char *)(v + n);
        for (size_t i = 0; i < n; i++) {
            const mcr__override *x = &ov->v[i];
            size_t li = strlen(x->id) + 1, lh = strlen(x->host) + 1;
            v[i].id = memcpy(o, x->id, li);
            o += li;
            v[i].host = memcpy(o, x->host, lh);
            o += lh;
            v[i].port = x->port;
            v[i].state = x->state;
            v[i].applied = x->applied;
            memset(v[i].reserved, 0, sizeof(v[i].reserved));
        }
    }
    MCR__TSAN_RELEASE(&router->tsan_grace_period);
    urcu_bp_read_unlock();
    if (rc == MCR_OK) {
        *out = v;
        *count = n;
    }
    return rc;
}

void mcr_router_local_states_free(mcr_local_state *states)
{
    free(states);
}

/* ---- reclamation ---- */

/* Runs in liburcu's call_rcu thread, after a grace period that began after
 * the snapshot was replaced: no reader can still hold it. */
static void reclaim_cb(struct rcu_head *head)
{
    retired *rec = caa_container_of(head, retired, head);
    mcr_router *router;

    MCR__TSAN_ACQUIRE(rec);
    router = rec->router;
    MCR__TSAN_ACQUIRE(&router->tsan_grace_period);
    if (rec->deferred) {
        /* Freed by a writer's thread (collect()): memory goes back to the
         * allocator from the thread that allocated it. A free from this
         * thread would take the lock of the writer's malloc arena (glibc),
         * and a writer that allocates meanwhile, an event loop, would wait
         * for this thread, for a whole time slice when it is preempted
         * holding it: bench_publish saw 3-4 of 5,000 loop publishes block
         * so, for up to 3.3 ms. The push is made under the mutex for the
         * same reason as the count below: mcr_router_free() must not free
         * the router before this callback is done with it. */
        retired *top;
        (void)pthread_mutex_lock(&router->reclaim_mu);
        top = atomic_load_explicit(&router->collectable, memory_order_relaxed);
        do {
            rec->next = top;
        } while (!atomic_compare_exchange_weak_explicit(&router->collectable, &top, rec,
                                                        memory_order_release,
                                                        memory_order_relaxed));
        (void)pthread_cond_broadcast(&router->reclaim_cv);
        (void)pthread_mutex_unlock(&router->reclaim_mu);
        return;
    }
    retired_release(rec);
    /* The last touch of the router: mcr_router_free() may free it as soon
     * as the mutex is released. */
    (void)pthread_mutex_lock(&router->reclaim_mu);
    atomic_fetch_sub(&router->nretired, 1);
    (void)pthread_cond_broadcast(&router->reclaim_cv);
    (void)pthread_mutex_unlock(&router->reclaim_mu);
}

int mcr_router_reclaim(mcr_router *router, unsigned flags, size_t *pending)
{
    const unsigned known = MCR_ROUTER_NOWAIT | MCR_ROUTER_PEEK | MCR_ROUTER_FLUSH_THREAD;
    unsigned mode = flags & (MCR_ROUTER_NOWAIT | MCR_ROUTER_PEEK);
    if ((flags & ~known) != 0 || mode == (MCR_ROUTER_NOWAIT | MCR_ROUTER_PEEK))
        return MCR_ERR_INVALID;
    if (router == NULL && flags != MCR_ROUTER_FLUSH_THREAD)
        return MCR_ERR_INVALID;
    /* The grace periods would wait for this thread's own section, and the
     * cache's references may be that section's. */
    if (((flags & MCR_ROUTER_FLUSH_THREAD) || mode == 0) && in_section())
        return MCR_ERR_INVALID;
    if (flags & MCR_ROUTER_FLUSH_THREAD)
        mcr__rcache_flush();
    size_t left = 0;
    if (router != NULL) {
        if (mode == MCR_ROUTER_PEEK) {
            left = atomic_load(&router->nretired);
        } else if (mode == MCR_ROUTER_NOWAIT) {
            collect(router);
            left = atomic_load(&router->ndeferred);
        } else {
            wait_retired(router, 0);
        }
    }
    if (pending != NULL)
        *pending = left;
    return MCR_OK;
}

/* ---- writers ---- */

/* Refuses the calls that would deadlock: from a read-side section (a
 * publish at the bound waits for a grace period, which would wait for the
 * caller), from this router's hooks (the writer mutex is held by the
 * caller). */
static int check_writer(const mcr_router *router, const char *what, mcr_error *err)
{
    if (in_section())
        return mcr__error(err, MCR_ERR_INVALID,
                          "%s: called between mcr_router_acquire() and mcr_router_release(); "
                          "it could wait for that section forever",
                          what);
    if (in_own_hook(router))
        return mcr__error(err, MCR_ERR_INVALID,
                          "%s: called from a hook of the same router; hooks must not "
                          "change the router that calls them",
                          what);
    return MCR_OK;
}

static void lock(mcr_router *router)
{
    /* Cannot fail with a default mutex taken by a thread that does not hold
     * it (check_writer() ruled out the recursive case). */
    (void)pthread_mutex_lock(&router->write_mu);
}

static void unlock(mcr_router *router)
{
    (void)pthread_mutex_unlock(&router->write_mu);
}

/* Reserve a place for one more retired record: wait for one to be
 * reclaimed when MCR__ROUTER_RETIRED_MAX are pending, or, with `nowait`,
 * refuse. Writer mutex held: no other writer raises the count meanwhile. */
static int reserve_retired(mcr_router *router, int nowait, const char *what, mcr_error *err)
{
    if (atomic_load(&router->nretired) >= MCR__ROUTER_RETIRED_MAX) {
        if (nowait)
            return mcr__error(err, MCR_ERR_BUSY,
                              "%s: %u changes await reclamation of what they replaced (a reader "
                              "section is long, or changes come faster than grace periods "
                              "end); try again later",
                              what, (unsigned)MCR__ROUTER_RETIRED_MAX);
        wait_retired(router, MCR__ROUTER_RETIRED_MAX - 1);
    }
    atomic_fetch_add(&router->nretired, 1);
    return MCR_OK;
}

/* One writer call: a publish, an apply, or a change of the overlay. */
typedef enum wop { W_PUBLISH, W_APPLY, W_SET, W_CLEAR } wop;

typedef struct wreq {
    wop op;
    const char *what;              /* the public function, for messages */
    const mcr_snapshot *snap;      /* W_PUBLISH */
    const mcr_changes *changes;    /* W_APPLY */
    const char *id;                /* W_SET, W_CLEAR */
    mcr_server_state state;        /* W_SET */
} wreq;

/* What a writer call changes, made from one state (published snapshot,
 * overlay) of the router. Each field NULL / false: that part stays. */
typedef struct plan {
    mcr_snapshot *base;   /* the next published snapshot (a reference) */
    bool ov_changed;      /* the overlay changes: to `ov` */
    mcr__overlay *ov;     /* owned; NULL: no override */
    mcr_snapshot *eff;    /* the next effective snapshot (a reference) */
} plan;

static void plan_release(plan *pl)
{
    mcr_snapshot_unref(pl->base);
    mcr__overlay_free(pl->ov);
    mcr_snapshot_unref(pl->eff);
    memset(pl, 0, sizeof(*pl));
}

/* The plan of `rq` for a router whose published snapshot is `base0` and
 * overlay `ov0` (resolved against it). Touches no router: it may run with
 * or without the writer mutex. */
static int make_plan(const wreq *rq, const mcr_snapshot *base0, const mcr__overlay *ov0,
                     plan *pl, mcr_error *err)
{
    char q[80];
    mcr_snapshot *nb = NULL;
    mcr__overlay *ov = NULL;
    const mcr_snapshot *target;
    int rc;

    memset(pl, 0, sizeof(*pl));
    switch (rq->op) {
    case W_PUBLISH:
        if (base0 != NULL && mcr_snapshot_epoch(rq->snap) <= mcr_snapshot_epoch(base0))
            return mcr__error(err, MCR_ERR_STALE,
                              "mcr_router_publish: stale snapshot: epoch %llu is not above the "
                              "current epoch %llu",
                              (unsigned long long)mcr_snapshot_epoch(rq->snap),
                              (unsigned long long)mcr_snapshot_epoch(base0));
        nb = mcr_snapshot_ref(rq->snap);
        break;
    case W_APPLY:
        if (base0 == NULL)
            return mcr__error(err, MCR_ERR_EMPTY,
                              "%s: the router holds no snapshot to apply changes to", rq->what);
        rc = mcr_snapshot_apply(base0, rq->changes, &nb, err);
        if (rc != MCR_OK)
            return rc;
        break;
    default:
        if (base0 == NULL)
            return mcr__error(err, MCR_ERR_EMPTY,
                              "%s: the router holds no snapshot: no server \"%s\" to give a "
                              "local state",
                              rq->what, mcr__quote(q, sizeof(q), rq->id, strlen(rq->id)));
        break;
    }
    target = nb != NULL ? nb : base0;
    rc = mcr__overlay_copy(ov0, &ov, err);
    if (rc == MCR_OK && rq->op == W_SET)
        rc = mcr__overlay_set(ov, base0, rq->id, rq->state, err);
    else if (rc == MCR_OK && rq->op == W_CLEAR)
        rc = mcr__overlay_clear(ov, rq->id, err);
    if (rc != MCR_OK) {
        mcr__overlay_free(ov);
        mcr_snapshot_unref(nb);
        return rc;
    }
    /* The same state set again: the checks below still say whether it is
     * in force, and the plan comes out empty. */
    mcr__overlay_resolve(ov, target);
    if (rq->op == W_SET && !ov->v[mcr__overlay_find(ov, rq->id)].applied) {
        mcr__overlay_free(ov);
        return mcr__error(err, MCR_ERR_EMPTY,
                          "%s: \"%s\" %s would leave no ACTIVE server in the effective "
                          "snapshot (epoch %llu)",
                          rq->what, mcr__quote(q, sizeof(q), rq->id, strlen(rq->id)),
                          rq->state == MCR_STATE_DOWN ? "down" : "draining",
                          (unsigned long long)mcr_snapshot_epoch(base0));
    }
    if (nb != NULL || !mcr__overlay_same_effect(ov, ov0, base0)) {
        rc = mcr__overlay_effective(ov, target, &pl->eff, err);
        if (rc != MCR_OK) {
            mcr__overlay_free(ov);
            mcr_snapshot_unref(nb);
            return rc;
        }
    }
    pl->base = nb;
    pl->ov_changed = !mcr__overlay_equal(ov, ov0);
    if (pl->ov_changed && ov->n > 0)
        pl->ov = ov;
    else
        mcr__overlay_free(ov);
    return MCR_OK;
}

/* Carry out `pl`, writer mutex held: the stores, the hooks, the retired
 * record. `rec` (not NULL) becomes the record of what is replaced; *rec is
 * set to NULL when it was used. The plan's references and overlay are
 * taken over on success. */
static int commit_locked(mcr_router *router, plan *pl, retired **rec, int nowait,
                         const char *what, mcr_error *err)
{
    mcr_snapshot *old_eff = atomic_load_explicit(&router->current, memory_order_relaxed);
    mcr_snapshot *old_base = atomic_load_explicit(&router->base, memory_order_relaxed);
    mcr__overlay *old_ov = atomic_load_explicit(&router->overlay, memory_order_relaxed);
    mcr_snapshot *eff = pl->eff;
    mcr_diff *diff = NULL;
    bool need_rec;
    int rc;

    if (pl->base == NULL && !pl->ov_changed && eff == NULL)
        return MCR_OK; /* nothing changes */
    /* The diff before the swap, so that running out of memory publishes
     * nothing. Snapshots that cannot be compared (different key hashes, a
     * modula period too long to count) are still published: the hooks get
     * a NULL diff. */
    if (eff != NULL && old_eff != NULL && router->nhooks > 0) {
        mcr_error derr = {0};
        rc = mcr_diff_new(old_eff, eff, &diff, &derr);
        if (rc != MCR_OK && rc != MCR_ERR_UNSUPPORTED) {
            if (err != NULL)
                *err = derr;
            return rc;
        }
    }
    need_rec = (eff != NULL && old_eff != NULL) || (pl->base != NULL && old_base != NULL) ||
               (pl->ov_changed && old_ov != NULL);
    if (need_rec) {
        rc = reserve_retired(router, nowait, what, err);
        if (rc != MCR_OK) {
            mcr_diff_free(diff);
            return rc;
        }
    }

    if (pl->base != NULL)
        atomic_store_explicit(&router->base, pl->base, memory_order_release);
    if (pl->ov_changed)
        atomic_store_explicit(&router->overlay, pl->ov, memory_order_release);
    if (eff != NULL) {
        atomic_store_explicit(&router->current, eff, memory_order_release);
        atomic_fetch_add_explicit(&router->generation, 1, memory_order_release);
    }

    if (eff != NULL && router->nhooks > 0) {
        hook_frame frame = {router, tls_hook_frames};
        tls_hook_frames = &frame;
        for (size_t i = 0; i < router->nhooks; i++)
            router->hooks[i].fn(old_eff, eff, diff, router->hooks[i].arg);
        tls_hook_frames = frame.up;
    }
    mcr_diff_free(diff);

    if (need_rec) {
        /* Every section that may hold what was replaced started before the
         * stores above; call_rcu runs reclaim_cb() once all of them have
         * ended. */
        (*rec)->router = router;
        (*rec)->snaps[0] = eff != NULL ? old_eff : NULL;
        (*rec)->snaps[1] = pl->base != NULL ? old_base : NULL;
        (*rec)->overlay = pl->ov_changed ? old_ov : NULL;
        (*rec)->deferred = nowait;
        if (nowait)
            atomic_fetch_add(&router->ndeferred, 1);
        MCR__TSAN_RELEASE(*rec);
        urcu_bp_call_rcu(&(*rec)->head, reclaim_cb);
        *rec = NULL;
    }
    /* Taken over. */
    pl->base = NULL;
    pl->ov = NULL;
    pl->eff = NULL;
    pl->ov_changed = false;
    return MCR_OK;
}

/* Every writer call. The plan is made before the writer mutex is taken,
 * from the router's state then (see the top of the file); under the mutex
 * it is carried out if that state is still the router's, else made again
 * from the router's state, mutex held, so that no concurrent change is
 * lost. */
static int write_op(mcr_router *router, const wreq *rq, int nowait, mcr_error *err)
{
    mcr_snapshot *base0;
    const mcr_snapshot *base1;
    mcr__overlay *ov0 = NULL;
    const mcr__overlay *ov1;
    mcr_error perr = {0};
    plan pl;
    retired *rec;
    int rc, prc;

    rc = check_writer(router, rq->what, err);
    if (rc != MCR_OK)
        return rc;
    /* The loop's own garbage first: what its earlier changes replaced and
     * no reader holds any more (see reclaim_cb()). */
    if (nowait)
        collect(router);
    rec = calloc(1, sizeof *rec);
    if (rec == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "%s: out of memory", rq->what);
    urcu_bp_read_lock();
    base0 = atomic_load_explicit(&router->base, memory_order_acquire);
    if (base0 != NULL)
        mcr_snapshot_ref(base0);
    prc = mcr__overlay_copy(atomic_load_explicit(&router->overlay, memory_order_acquire), &ov0,
                            &perr);
    MCR__TSAN_RELEASE(&router->tsan_grace_period);
    urcu_bp_read_unlock();
    if (prc != MCR_OK) {
        mcr_snapshot_unref(base0);
        free(rec);
        if (err != NULL)
            *err = perr;
        return prc;
    }
    /* The two loads above may come from different changes: then the
     * comparison below fails and the plan is made again. */
    prc = make_plan(rq, base0, ov0, &pl, &perr);
    if (!nowait) {
        lock(router);
    } else if (pthread_mutex_trylock(&router->write_mu) != 0) {
        rc = mcr__error(err, MCR_ERR_BUSY,
                        "%s: another writer holds the router; nothing was changed, try "
                        "again later",
                        rq->what);
        goto out;
    }
    /* Only writers change the router, and we are the writer: no section
     * needed to read it. `base0` is referenced, so its address cannot have
     * been reused. */
    base1 = atomic_load_explicit(&router->base, memory_order_relaxed);
    ov1 = atomic_load_explicit(&router->overlay, memory_order_relaxed);
    if (base1 != base0 || !mcr__overlay_equal(ov0, ov1)) {
        plan_release(&pl);
        perr = (mcr_error){0};
        prc = make_plan(rq, base1, ov1, &pl, &perr);
    }
    if (prc != MCR_OK) {
        rc = prc;
        if (err != NULL)
            *err = perr;
    } else {
        rc = commit_locked(router, &pl, &rec, nowait, rq->what, err);
    }
    unlock(router);
out:
    plan_release(&pl);
    mcr_snapshot_unref(base0);
    mcr__overlay_free(ov0);
    free(rec); /* NULL when used */
    return rc;
}

int mcr_router_publish(mcr_router *router, const mcr_snapshot *snap, mcr_error *err)
{
    wreq rq = {.op = W_PUBLISH, .what = "mcr_router_publish", .snap = snap};

    if (router == NULL || snap == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_router_publish: NULL argument");
    return write_op(router, &rq, 0, err);
}

static int apply(mcr_router *router, const mcr_changes *changes, int nowait, const char *what,
                 mcr_error *err)
{
    wreq rq = {.op = W_APPLY, .what = what, .changes = changes};

    if (router == NULL || changes == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "%s: NULL argument", what);
    return write_op(router, &rq, nowait, err);
}

int mcr_router_apply(mcr_router *router, const mcr_changes *changes, unsigned flags,
                     mcr_error *err)
{
    if ((flags & ~MCR_ROUTER_NOWAIT) != 0)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_router_apply: unknown flags 0x%x", flags);
    return apply(router, changes, flags != 0, "mcr_router_apply", err);
}

/* ---- the local overlay ---- */

static int set_local(mcr_router *router, const char *id, mcr_server_state st, int nowait,
                     const char *what, mcr_error *err)
{
    wreq rq = {.op = W_SET, .what = what, .id = id, .state = st};

    if (router == NULL || id == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "%s: NULL argument", what);
    return write_op(router, &rq, nowait, err);
}

static int clear_local(mcr_router *router, const char *id, int nowait, const char *what,
                       mcr_error *err)
{
    wreq rq = {.op = W_CLEAR, .what = what, .id = id};

    if (router == NULL || id == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "%s: NULL argument", what);
    return write_op(router, &rq, nowait, err);
}

int mcr_router_set_local_state(mcr_router *router, const char *id, mcr_server_state state,
                               unsigned flags, mcr_error *err)
{
    if ((flags & ~MCR_ROUTER_NOWAIT) != 0)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_router_set_local_state: unknown flags 0x%x",
                          flags);
    return set_local(router, id, state, flags != 0, "mcr_router_set_local_state", err);
}

int mcr_router_clear_local_state(mcr_router *router, const char *id, unsigned flags,
                                 mcr_error *err)
{
    if ((flags & ~MCR_ROUTER_NOWAIT) != 0)
        return mcr__error(err, MCR_ERR_INVALID,
                          "mcr_router_clear_local_state: unknown flags 0x%x", flags);
    return clear_local(router, id, flags != 0, "mcr_router_clear_local_state", err);
}

/* ---- hooks ---- */

int mcr_router_add_hook(mcr_router *router, mcr_router_hook fn, void *arg)
{
    int rc;

    if (router == NULL || fn == NULL)
        return MCR_ERR_INVALID;
    rc = check_writer(router, "mcr_router_add_hook", NULL);
    if (rc != MCR_OK)
        return rc;
    lock(router);
    if (router->nhooks == router->hooks_cap) {
        size_t cap = router->hooks_cap ? 2 * router->hooks_cap : 4;
        hook *h = realloc(router->hooks, cap * sizeof *h);
        if (h == NULL) {
            unlock(router);
            return MCR_ERR_NOMEM;
        }
        router->hooks = h;
        router->hooks_cap = cap;
    }
    router->hooks[router->nhooks].fn = fn;
    router->hooks[router->nhooks].arg = arg;
    router->nhooks++;
    unlock(router);
    return MCR_OK;
}

int mcr_router_remove_hook(mcr_router *router, mcr_router_hook fn, void *arg)
{
    int rc = MCR_ERR_UNKNOWN;

    if (router == NULL || fn == NULL)
        return MCR_ERR_INVALID;
    if (check_writer(router, "mcr_router_remove_hook", NULL) != MCR_OK)
        return MCR_ERR_INVALID;
    lock(router);
    for (size_t i = 0; i < router->nhooks; i++) {
        if (router->hooks[i].fn == fn && router->hooks[i].arg == arg) {
            memmove(&router->hooks[i], &router->hooks[i + 1],
                    (router->nhooks - i - 1) * sizeof router->hooks[0]);
            router->nhooks--;
            rc = MCR_OK;
            break;
        }
    }
    unlock(router);
    return rc;
}
