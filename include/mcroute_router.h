/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_router.h: the current snapshot, published atomically to lock-free readers, with hooks and a file watcher.
 * Library: libmcroute, `pkg-config --cflags --libs mcroute`.
 *
 * INTRODUCTION
 *
 * A router holds the current snapshot (mcroute_snapshot.h) of a placement.
 * Request threads look keys up through it; one writer at a time replaces the
 * snapshot (a new server list, a weight, a server going down). A lookup sees
 * one whole snapshot, the old or the new, never a mix, and never waits.
 *
 *   mcr_router   The current snapshot, its epoch, the local overlay, the
 *                hooks. Any number of threads may use one router at once.
 *   mcr_watcher  A thread that reloads a server file or a snapshot file when
 *                it changes and publishes the result through a router.
 *
 * Readers. mcr_router_acquire() returns the current snapshot and enters a
 * read-side section; mcr_router_release() leaves it. In between the
 * snapshot stays valid even if a writer publishes another one, so several
 * lookups (mcr_snapshot_locate(), _replicas(), ...) can be made against the
 * same placement. Neither call takes a lock or fails, and only the first
 * acquire of a router after a change does more than a few loads (see
 * "Thread caches" below). mcr_router_locate() is one acquire + locate +
 * release. mcr_router_current() returns a counted reference instead, for a
 * snapshot kept beyond a short section (a connection pool built for one
 * epoch).
 *
 * Thread caches: how long a replaced snapshot lives. Each thread keeps a
 * counted reference to the current snapshot of each router it reads, up
 * to MCR_ROUTER_THREAD_CACHE routers, and acquire returns it as long as the
 * router has not changed (no RCU section, no reference taken: a load and
 * two compares). The first acquire after a change of the current snapshot
 * enters a userspace RCU section once, takes a reference to the new
 * snapshot and drops the one it kept (which frees the old snapshot when it
 * was the last reference: then on this thread). So a snapshot that the
 * router replaced stays alive, besides the router's own reclamation below,
 * for as long as some thread that got it from acquire (or
 * mcr_router_locate(), mcr_router_epoch()) and has not read that router
 * since: until that thread's next acquire of the router, its
 * mcr_router_reclaim() with MCR_ROUTER_FLUSH_THREAD, its mcr_router_free()
 * of the router, its
 * reading MCR_ROUTER_THREAD_CACHE other routers since, or its exit,
 * whichever comes first. An idle thread keeps it forever: at most
 * MCR_ROUTER_THREAD_CACHE snapshots per thread that ever read a router. A
 * thread that goes idle for long, or a program that wants memory back at a
 * given moment, calls mcr_router_reclaim(NULL, MCR_ROUTER_FLUSH_THREAD,
 * NULL). (The first acquire in a
 * thread also registers a thread-exit destructor, pthread_setspecific().)
 *
 * Writers. mcr_router_publish() replaces the snapshot with one of a higher
 * epoch; mcr_router_apply() builds the next snapshot from the published one
 * and a batch of changes and publishes it; with MCR_ROUTER_NOWAIT it never
 * waits, for an event loop. Writers are serialized by a
 * mutex, held only for the swap, the diff and the hooks (the snapshots are
 * built before it is taken).
 *
 * Published and effective snapshots: the local overlay. A router keeps the
 * snapshot it was last given (publish, apply, a watcher): the *published*
 * snapshot, mcr_router_published(), which in a fleet is the same epoch N
 * in every process. On top of it, a set of *local states*: overrides of
 * the state of some servers (id -> ACTIVE, DRAINING or DOWN) that this
 * process decided alone, typically a connection pool that stopped reaching
 * a server (MCR_POLICY_EJECT, mcroute_pool.h). Readers get the *effective*
 * snapshot: the published one with the local states applied, under the
 * published snapshot's epoch (an override never takes an epoch, so the
 * fleet's next one is never refused as stale), and with the checksum of
 * its own content. Without local states in force the effective snapshot
 * is the published one itself. mcr_router_set_local_state() and
 * mcr_router_clear_local_state() (MCR_ROUTER_NOWAIT for event loops)
 * change the overlay; mcr_router_local_state() and
 * mcr_router_local_states() read it. Every publish and apply builds from
 * the published snapshot, never from the effective one (an override is
 * never baked into an epoch), and re-applies the local states to the new
 * one: those whose id it no longer lists, or lists at another address, are
 * dropped; the others stay. A local state that takes an ACTIVE server out
 * (DOWN or DRAINING on a server ACTIVE in the published snapshot) applies
 * only while another ACTIVE server remains: they are applied in the order
 * they were first set, and those that would leave none are held (kept, not
 * in force, applied again as soon as a change of the published snapshot or
 * of the overlay lets them). Setting one that would be held is refused.
 * mcr_router_generation() changes at every change of the effective
 * snapshot (a publish, or an overlay change that changes a state): what a
 * reader compares to notice a new snapshot, where the epoch may stay the
 * same.
 *
 * Reclamation. A publish does not wait for the readers of the replaced
 * snapshot: it hands the snapshot to liburcu's call_rcu thread (one per
 * process, started on the first publish that replaces a snapshot), which
 * drops the router's reference once no reader can be using it, after an
 * RCU grace period (typically microseconds to milliseconds, as long as the
 * longest section in progress). The memory this holds is bounded: at most
 * 256 changes per router await reclamation of what they replaced
 * (mcr_router_reclaim() with MCR_ROUTER_PEEK counts them): the effective
 * snapshot,
 * and, for a publish while local states are in force, the published one
 * too. At the bound, the blocking writers (publish, apply, set and clear
 * a local state) wait on the caller's thread for one to be reclaimed, and
 * with MCR_ROUTER_NOWAIT they refuse with MCR_ERR_BUSY.
 * mcr_router_reclaim() waits for all of them; mcr_router_free() too. What
 * the NOWAIT writes replace is the exception to "freed by the call_rcu
 * thread": after the grace period it waits for the writer's own thread,
 * which frees it on its next NOWAIT write or mcr_router_reclaim() with
 * MCR_ROUTER_NOWAIT (a pool does so from its loop). A free from the
 * call_rcu thread takes the lock of the malloc arena
 * (glibc) of the thread that allocated the memory, and an event loop that
 * allocates meanwhile would wait for it.
 *
 * Hooks. After each change of the effective snapshot, the hooks registered
 * with mcr_router_add_hook() are called, in registration order, in the
 * writing thread (the caller of mcr_router_publish(), _apply(),
 * _set_local_state(), ..., or a watcher's thread), with the writer mutex
 * held: hooks of one router never run concurrently, and they see the
 * changes in the order they were made (epochs never decrease; an overlay
 * change keeps the epoch). They get the old effective snapshot, the new
 * one and their diff (mcr_diff_new()), valid during the call (take a
 * reference to keep a snapshot). An overlay change that changes no state
 * (a local state held, or equal to the published one) calls no hook. A
 * hook must not write to (publish, apply, set or clear a local state),
 * nor add or remove hooks of, a router whose hooks are running in its
 * thread: these calls return MCR_ERR_INVALID instead of deadlocking. A hook may look keys up in any router, and may
 * publish to another router B, provided no hook of B publishes back to this
 * one (two threads publishing to both at once would wait for each other's
 * writer mutex).
 *
 * Rules for read-side sections (between acquire and release):
 *   - release in the thread that acquired, with the router acquired from;
 *     sections nest (also across routers) and are released in reverse
 *     order;
 *   - keep them short: a section served from the thread cache holds its
 *     snapshot by a reference, but a nested one that is not (its router
 *     changed since the outer section began, or this thread has no
 *     cached snapshot of it) is an RCU section, and the snapshots replaced
 *     meanwhile are reclaimed only once every RCU section in progress has
 *     ended, and past 256 of them publishes wait;
 *   - no mcr_router_publish(), _apply(), _set_local_state(),
 *     _clear_local_state() (with or without MCR_ROUTER_NOWAIT), _reclaim()
 *     (but with MCR_ROUTER_NOWAIT or MCR_ROUTER_PEEK),
 *     _add_hook(), _remove_hook(), _free(), mcr_watcher_new() or _free()
 *     inside one: they could wait for the section that waits for them.
 *     The writers and reclaim detect it and return MCR_ERR_INVALID; the
 *     others must not be called there.
 *
 * Lifetime. A router takes its own reference to every snapshot it is given;
 * the caller keeps (and must drop) its own. mcr_router_free() may only be
 * called once no other thread uses the router, no section is open and no
 * watcher is attached. The snapshots the router gave out stay valid as long
 * as their references: those of the thread caches too (above).
 *
 * Threads and processes. Reader threads need no registration: the
 * "bulletproof" flavor of liburcu registers a thread on its first read-side
 * section and unregisters it when the thread exits, and the thread cache
 * drops its references when the thread exits (a pthread key destructor;
 * the main thread's are dropped only if it calls pthread_exit(), or
 * mcr_router_reclaim() with MCR_ROUTER_FLUSH_THREAD). A process that forks
 * without exec and uses routers in the child must follow liburcu-bp's fork
 * protocol (urcu_bp_before_fork(), urcu_bp_after_fork_parent(),
 * urcu_bp_after_fork_child()), and, as publishes use call_rcu, its
 * call_rcu one too (urcu_bp_call_rcu_before_fork(),
 * urcu_bp_call_rcu_after_fork_parent(), urcu_bp_call_rcu_after_fork_child()).
 * While a router fed from a state exists in the process
 * (mcr_router_new_from_state(), mcroute_state.h), the library does both
 * for every fork, through pthread_atfork(3): do not call them then (the
 * protocol's locks would be taken twice).
 *
 * Errors follow mcroute.h: MCR_OK or a negative mcr_status, details in an
 * optional mcr_error. A call that fails publishes nothing and calls no hook.
 */
#ifndef MCROUTE_ROUTER_H
#define MCROUTE_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==================================================================== */
/*  Router                                                               */
/* ==================================================================== */

typedef struct mcr_router mcr_router;

/* mcr_router_new: a router whose current snapshot is `initial` (the router
 * takes its own reference), or that holds none yet when `initial` is NULL:
 * then acquire returns NULL and the first publish may have any epoch.
 * Errors (*out unchanged): MCR_ERR_INVALID (NULL out), MCR_ERR_NOMEM,
 * MCR_ERR_SYSTEM (a mutex or condition variable not created). */
MCR_EXTERN int mcr_router_new(const mcr_snapshot *initial, mcr_router **out, mcr_error *err);

/* mcr_router_free: wait until the snapshots the router replaced are
 * reclaimed (see "Reclamation" above: a grace period, as long as the
 * longest reader section in progress), drop the router's reference to its
 * snapshot and free the router. NULL is a no-op. See "Lifetime" above. */
MCR_EXTERN void mcr_router_free(mcr_router *router);

/* ---- readers: any thread, no lock ---- */

/* mcr_router_acquire: enter a read-side section and return the current
 * (effective) snapshot, valid until the matching mcr_router_release(); NULL when the
 * router holds none yet (release anyway). `router` must not be NULL. Cannot
 * fail; does not block. From the thread cache while the router has not
 * changed since this thread's last acquire of it; else it references the
 * new snapshot and drops the thread's reference to the old one, which may
 * free it (see "Thread caches" above). */
MCR_EXTERN const mcr_snapshot *mcr_router_acquire(mcr_router *router);

/* mcr_router_release: leave the section entered by mcr_router_acquire() on
 * `router`; `snap` is what it returned (unused, for symmetry and checking
 * tools). The snapshot must not be used afterwards. `router` must not be
 * NULL (it is not checked). Cannot fail. */
MCR_EXTERN void mcr_router_release(mcr_router *router, const mcr_snapshot *snap);

/* How many routers' snapshots one thread keeps (see "Thread caches"
 * above): the most recently read ones. */
#define MCR_ROUTER_THREAD_CACHE 4


/* Where mcr_router_locate() sent a key: copied out, so it stays valid after
 * the snapshot is replaced. */
typedef struct mcr_route {
    uint64_t epoch;                     /* epoch of the snapshot used */
    uint32_t index;                     /* server index in that snapshot */
    int port;
    char host[MCR_HOSTNAME_MAX + 1];    /* NUL-terminated, no brackets */
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_route;

/* mcr_router_locate: the server owning `key` (`len` bytes) in the current
 * snapshot, as mcr_snapshot_locate() picks it. MCR_OK, MCR_ERR_EMPTY (the
 * router holds no snapshot yet; *out untouched) or MCR_ERR_INVALID (NULL
 * router or out, or NULL key with len > 0). Lock-free, like acquire. */
MCR_EXTERN int mcr_router_locate(mcr_router *router, const void *key, size_t len,
                                 mcr_route *out);

/* mcr_router_locate_index: the index (into the server table of the current
 * snapshot, as mcr_snapshot_locate() returns it) of the server owning `key`
 * (`len` bytes), and, when `epoch` is not NULL, that snapshot's epoch in
 * *epoch: one acquire, lookup and release in one call, without the host
 * copy of mcr_router_locate(), for an application that keeps its own
 * connections by index for each epoch (and finds the epoch changed when it
 * must remap them). MCR_NO_SERVER when the router holds no snapshot yet
 * (*epoch untouched). `router` must not be NULL (not checked); `key` may be
 * NULL only with `len` 0. Cannot fail otherwise; lock-free and never
 * blocks; the thread cache's rules and cost are acquire's. */
MCR_EXTERN uint32_t mcr_router_locate_index(mcr_router *router, const void *key, size_t len,
                                            uint64_t *epoch);

/* mcr_router_current: a new reference to the current (effective) snapshot
 * (release it with mcr_snapshot_unref()), or NULL when there is none (or
 * router is NULL). Lock-free. */
MCR_EXTERN mcr_snapshot *mcr_router_current(mcr_router *router);

/* mcr_router_epoch: the current snapshot's epoch (that of the published
 * snapshot: local states do not change it), 0 when there is none or
 * `router` is NULL. Lock-free. */
MCR_EXTERN uint64_t mcr_router_epoch(mcr_router *router);

/* mcr_router_published: a new reference to the published snapshot, the one
 * the last publish or apply gave the router (release it with
 * mcr_snapshot_unref()), without the local states; NULL when there is none
 * (or router is NULL). It is the current snapshot itself when no local
 * state is in force. Lock-free. */
MCR_EXTERN mcr_snapshot *mcr_router_published(mcr_router *router);

/* mcr_router_generation: a counter raised by one at every change of the
 * current (effective) snapshot: every publish and apply, and every change
 * of the local overlay that changes a server's state; 0 for a router that
 * has had no change since mcr_router_new() (or a NULL router). Two equal
 * values mean the same current snapshot: compare it, not the epoch, to
 * notice a new one. A reader that reads the generation and then the
 * current snapshot gets that generation's snapshot or a later one. One
 * atomic load; never blocks. */
MCR_EXTERN uint64_t mcr_router_generation(mcr_router *router);

/* One local state (see "Published and effective snapshots" above). */
typedef struct mcr_local_state {
    const char *id;         /* the server's id */
    const char *host;       /* its address in the published snapshot when the */
    int port;               /* state was set (a new address drops the state) */
    mcr_server_state state; /* the state it is given */
    int applied;            /* 1: in force in the current snapshot; 0: held
                               (it would leave no ACTIVE server) */
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_local_state;

/* mcr_router_local_state: whether server `id` has a local state: MCR_OK,
 * and its state in *state and 1 (in force) or 0 (held) in *applied (each
 * may be NULL), or MCR_ERR_UNKNOWN (none; nothing written), MCR_ERR_INVALID
 * (NULL router or id). Lock-free. */
MCR_EXTERN int mcr_router_local_state(mcr_router *router, const char *id,
                                      mcr_server_state *state, int *applied);

/* mcr_router_local_states: a copy of every local state, in the order they
 * were first set, all of one moment: *out (NULL when there is none), to be
 * freed with mcr_router_local_states_free(), and their number in *count.
 * MCR_OK, MCR_ERR_INVALID (NULL argument), MCR_ERR_NOMEM (*out and *count
 * unchanged). Lock-free (it allocates). */
MCR_EXTERN int mcr_router_local_states(mcr_router *router, mcr_local_state **out,
                                       size_t *count, mcr_error *err);

/* mcr_router_local_states_free: free what mcr_router_local_states()
 * returned, strings included. NULL is a no-op. */
MCR_EXTERN void mcr_router_local_states_free(mcr_local_state *states);

/* ---- writers: serialized ---- */

/* Flags of the writers (mcr_router_apply(), mcr_router_set_local_state(),
 * mcr_router_clear_local_state()) and of mcr_router_reclaim(). */
#define MCR_ROUTER_NOWAIT 1u       /* never block: see each call */
#define MCR_ROUTER_PEEK 2u         /* mcr_router_reclaim(): only count */
#define MCR_ROUTER_FLUSH_THREAD 4u /* mcr_router_reclaim(): this thread's cache */

/* At most 256 changes of one router await reclamation of what they
 * replaced (see "Reclamation" above): at 1,000 changes a second, grace
 * periods of up to about 100 ms (a reader preempted inside a section on a
 * loaded machine; call_rcu waits for one per batch) pass unnoticed. The
 * memory it allows is this many snapshots (twice as many for publishes
 * made while local states are in force): 256 KiB each for the default
 * maglev table, a few tens of KiB for a ketama ring of ten servers. A
 * writer at the bound waits for a reclamation, or with MCR_ROUTER_NOWAIT
 * returns MCR_ERR_BUSY. */

/* mcr_router_publish: make `snap` the published snapshot (the router takes
 * its own reference) and current with the local states re-applied (see
 * "Published and effective snapshots" above: `snap` itself when none
 * applies), call the hooks, and hand the replaced snapshots to RCU
 * reclamation (the router's references are dropped after a grace period,
 * in liburcu's call_rcu thread). The epoch of `snap` must be above the
 * current one. Blocks only while another writer holds the router (for its swap,
 * diff and hooks), and, when 256 replaced snapshots await reclamation,
 * until one is reclaimed. Never waits for a grace period
 * otherwise. Errors (nothing published, no hook called): MCR_ERR_INVALID
 * (NULL argument; called inside a read-side section, or from a hook of this
 * router in its thread), MCR_ERR_STALE (epoch not above the current
 * one), and MCR_ERR_NOMEM (also when hooks need a diff and it cannot be
 * built). */
MCR_EXTERN int mcr_router_publish(mcr_router *router, const mcr_snapshot *snap, mcr_error *err);

/* mcr_router_apply: build the next snapshot (epoch + 1) from the published
 * one (never from the current one: local states are not baked in) and
 * `changes` with mcr_snapshot_apply(), and publish it as
 * mcr_router_publish() does. The snapshots are built before the writer
 * mutex is taken; if another writer changed the router meanwhile, they are
 * built again, with the mutex held, from what that writer left: concurrent
 * writers never lose an update, and every apply raises the epoch by
 * exactly 1. A change of a server's state applies to the published
 * snapshot: a local state of the server still overrides it. Blocks as
 * mcr_router_publish() does. `flags` 0, or MCR_ROUTER_NOWAIT, for event
 * loops: it never blocks (the writer mutex taken with a try-lock, no wait
 * for reclamation); its cost is building the snapshot, the diff (when
 * hooks are registered), the hooks (which run in the calling thread) and
 * an enqueue, and first it frees what the NOWAIT writes of the router
 * replaced whose grace period has ended (as mcr_router_reclaim() with
 * MCR_ROUTER_NOWAIT). Errors (nothing published): those of
 * mcr_router_publish(), MCR_ERR_INVALID also for unknown flags,
 * MCR_ERR_EMPTY (the router holds no snapshot yet), those of
 * mcr_snapshot_apply(): MCR_ERR_UNKNOWN, MCR_ERR_DUPLICATE, MCR_ERR_EMPTY
 * (no active server would remain), ...; and with MCR_ROUTER_NOWAIT,
 * MCR_ERR_BUSY when it would have to wait (another writer holds the
 * router, or 256 changes await reclamation): no hook is called; call
 * again later (the changes are not kept), keeping the order of changes
 * that depend on each other. */
MCR_EXTERN int mcr_router_apply(mcr_router *router, const mcr_changes *changes, unsigned flags,
                                mcr_error *err);

/* mcr_router_set_local_state: give server `id` of the published snapshot
 * the local state `state` (see "Published and effective snapshots"
 * above): the current snapshot becomes the published one with it, under
 * the same epoch; the hooks are called with the old and new current
 * snapshots when a state changes, and mcr_router_generation() moves. A
 * local state of the same id is replaced (keeping its place in the
 * order); setting the state it has already changes nothing (MCR_OK). A
 * state equal to the published one is kept as a local state all the same
 * (it holds the server there when a later publish changes it). The
 * effective snapshot is built before the writer mutex is taken, as apply
 * builds. Blocks as mcr_router_publish() does. Errors (nothing changed, no
 * hook called): MCR_ERR_INVALID (NULL router or id; not a server state;
 * called inside a read-side section or from a hook of this router in its
 * thread), MCR_ERR_EMPTY (the router holds no snapshot; or the state takes
 * the server out and would leave no ACTIVE server, counting the local
 * states in force), MCR_ERR_UNKNOWN (the published snapshot has no server
 * `id`), MCR_ERR_NOMEM. `flags`: 0, or MCR_ROUTER_NOWAIT (never blocks, as
 * for mcr_router_apply(): MCR_ERR_BUSY when it would have to wait; call
 * again later; a pool's ejections use it). */
MCR_EXTERN int mcr_router_set_local_state(mcr_router *router, const char *id,
                                          mcr_server_state state, unsigned flags,
                                          mcr_error *err);

/* mcr_router_clear_local_state: remove the local state of `id`: the server
 * is back to its state in the published snapshot in the current one (same
 * epoch; hooks and generation as for a set). Never refused for leaving no
 * ACTIVE server: local states that would then leave none are held
 * instead. Blocks as mcr_router_publish() does. Errors (nothing changed):
 * MCR_ERR_INVALID (NULL router or id; inside a read-side section or from
 * a hook of this router), MCR_ERR_EMPTY (the router holds no snapshot),
 * MCR_ERR_UNKNOWN (`id` has no local state: never set, cleared already, or
 * dropped by a publish that no longer lists it), MCR_ERR_NOMEM. `flags`
 * as for mcr_router_set_local_state() (a pool's re-adds use
 * MCR_ROUTER_NOWAIT). */
MCR_EXTERN int mcr_router_clear_local_state(mcr_router *router, const char *id, unsigned flags,
                                            mcr_error *err);

/* mcr_router_reclaim: reclamation of what the router's changes replaced
 * (see "Reclamation" above), by `flags`:
 *   0                  wait until nothing the router replaced awaits
 *                      reclamation (a grace period: as long as the longest
 *                      reader section in progress; while other threads keep
 *                      publishing, their snapshots too); the router's
 *                      references are then dropped (thread caches may still
 *                      hold theirs). For a caller that wants the memory back
 *                      now, or a test; publishes need not call it. Not from
 *                      an event loop that must not block. *pending: 0.
 *   MCR_ROUTER_NOWAIT  free, on the calling thread, what the NOWAIT writes
 *                      replaced and no reader can hold any more (the grace
 *                      period has ended); never blocks, never waits.
 *                      *pending: how many of their changes remain to free
 *                      (0: nothing left). An event loop calls it on a
 *                      timer while *pending is above 0, so that the memory
 *                      its changes replaced goes back to its own allocator
 *                      arena; the NOWAIT writes, the waiting reclaim and
 *                      mcr_router_free() do it too. Allowed inside a
 *                      read-side section and from hooks.
 *   MCR_ROUTER_PEEK    only *pending: how many changes of the router await
 *                      reclamation, of any kind (0 to 256); frees nothing,
 *                      never blocks.
 * MCR_ROUTER_FLUSH_THREAD (with one of the above, or alone with a NULL
 * router) first drops the calling thread's cached references to the
 * snapshots of every router it read (see "Thread caches" above), so that
 * those replaced since are freed now rather than at this thread's next
 * acquire or exit: for a thread about to go idle for long. `pending` may
 * be NULL. MCR_OK, or MCR_ERR_INVALID (nothing done): a NULL router but
 * with MCR_ROUTER_FLUSH_THREAD alone; unknown flags, or NOWAIT with PEEK;
 * a wait or MCR_ROUTER_FLUSH_THREAD inside a read-side section (the wait
 * would be for itself; the cache may be in use). */
MCR_EXTERN int mcr_router_reclaim(mcr_router *router, unsigned flags, size_t *pending);

/* A hook: `old_snap` is the current snapshot replaced, `new_snap` the new
 * current one (published, or the same epoch with a local state changed)
 * and `diff` their diff (mcr_diff_new()). `old_snap` and `diff` are NULL for
 * the first snapshot of a router created empty; `diff` alone is NULL when
 * the two cannot be compared (different key hashes, see mcr_diff_new()).
 * All three are valid during the call only. */
typedef void (*mcr_router_hook)(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                                const mcr_diff *diff, void *arg);

/* mcr_router_add_hook: call `fn(old, new, diff, arg)` after every later
 * change of the current snapshot (publishes, applies, and the overlay
 * changes that change a state). The same pair may be added twice (then called twice). MCR_OK,
 * MCR_ERR_INVALID (NULL router or fn; from a hook of this router),
 * MCR_ERR_NOMEM. Takes the writer mutex: waits for a publish in progress. */
MCR_EXTERN int mcr_router_add_hook(mcr_router *router, mcr_router_hook fn, void *arg);

/* mcr_router_remove_hook: remove the first registration of (fn, arg); it is
 * not called by changes that start after this returns. MCR_OK,
 * MCR_ERR_UNKNOWN (not registered), MCR_ERR_INVALID (as add_hook). */
MCR_EXTERN int mcr_router_remove_hook(mcr_router *router, mcr_router_hook fn, void *arg);

/* ---- migrations: a resize in progress ---- */

/* A migration is a resize, from snapshot `from` (the placement before) to
 * `to` (after, a higher epoch): one noun at every layer. A router holds the
 * migration in force, its pools read and write through it
 * (mcroute_pool.h), mcr_migrate_run() copies its moving keys
 * (mcroute_migrate.h), and a fleet records it in etcd and walks every
 * process through its phases (mcroute_fleet.h); mcroute(7), MIGRATIONS,
 * tells the whole story once. A router's migration pairs the two
 * snapshots so that pools of the router
 * lose no cached key while the fleet moves from one to the other: during
 * the copy, and while processes run different epochs (mcroute_pool.h,
 * "Migrations", says what a pool does). Which half applies follows the
 * router's current epoch E, read by each pool at every change:
 *
 *   from.epoch <= E < to.epoch  MCR_MIGRATION_COPYING: keys are read from
 *                               their owner in the current snapshot; writes of a
 *                               key whose owner in `to` differs reach both.
 *   E >= to.epoch               MCR_MIGRATION_SWITCHED: keys are read from
 *                               their current owner, and a miss of a key
 *                               whose owner in `from` differs is read there
 *                               (served from there, never written to the
 *                               current owner); writes reach both.
 *   E >= to.epoch, flag         MCR_MIGRATION_CLOSING: as switched, but a
 *   MCR_MIGRATION_FLAG_CLOSING  miss is the answer (no read at the old
 *                               owner); writes still reach both, and one
 *                               that misses at the current owner deletes
 *                               the old owner's copy.
 *   E < from.epoch              not in force.
 *
 * So a resize is: mcr_router_set_migration(from, to) while `from` is
 * current, copy the moving keys (mcroute_migrate.h), mcr_router_publish(to)
 * (the switch: no moment without the migration), and after a grace period
 * (grace_ms, or mcr_router_clear_migration()) the migration ends. Where
 * other processes follow the same resize at their own pace (a fleet), the
 * end takes one more step: the migration set again with
 * MCR_MIGRATION_FLAG_CLOSING, and ended only once every process has it; a
 * process that ended its migration writes the new owners only, and one
 * still reading misses at the old owners would find there a copy that the
 * first deleted at the new owner (mcroute_fleet.h, phase closing). A router
 * holds at most one migration; it is not part of a snapshot, not
 * published in an epoch and calls no hook; mcr_router_generation() moves
 * when it is set or ended, so pools adopt it at their next request. */

/* Flags of mcr_router_set_migration(). (1u was MCR_TRANSITION_WARM, which
 * did nothing since 0.3 and is gone: a read served by a previous owner is
 * never added to the current one, mcroute_pool.h, Migrations.) */
#define MCR_MIGRATION_FLAG_CLOSING 2u /* once switched, reads no longer fall
                                         back to the old owner
                                         (MCR_MIGRATION_CLOSING) */

/* The phases of a migration, in order; DONE and ABORTED are final. A
 * router's migration is in COPYING, SWITCHED or CLOSING (its current epoch
 * and flags say which: mcr_migration_phase_at()); a fleet's record goes
 * through all of them (mcroute_fleet.h, "Migrations"). */
typedef enum mcr_migration_phase {
    MCR_MIGRATION_NONE = 0,     /* no migration */
    MCR_MIGRATION_PLANNED = 1,  /* recorded; nothing changes yet */
    MCR_MIGRATION_COPYING = 2,  /* writes of moving keys reach both owners;
                                   keys are read from their current owner
                                   while they are copied to the new one */
    MCR_MIGRATION_SWITCHED = 3, /* `to` is current: reads that miss at a new
                                   owner fall back to the old one */
    MCR_MIGRATION_GRACE = 4,    /* as SWITCHED, until the grace ends */
    MCR_MIGRATION_CLOSING = 5,  /* a miss at a new owner is the answer;
                                   writes still reach both owners */
    MCR_MIGRATION_DONE = 6,     /* the migration ended */
    MCR_MIGRATION_ABORTED = 7   /* given up; the migration ended */
} mcr_migration_phase;

/* A migration as mcr_router_get_migration() reports it. */
typedef struct mcr_router_migration {
    mcr_snapshot *from;    /* counted references: mcr_router_migration_clear() */
    mcr_snapshot *to;
    unsigned flags;        /* MCR_MIGRATION_FLAG_* */
    uint64_t remaining_ms; /* until the grace period ends; 0: until ended */
    uint64_t serial;       /* different for every migration set on the router */
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_router_migration;

/* mcr_router_set_migration: make (from, to) the router's migration,
 * replacing any other; it ends by itself `grace_ms` milliseconds after
 * this call (0: only with mcr_router_clear_migration(), or a later set).
 * The router takes its own references. It does not change the current
 * snapshot: publish `to` when the copy is done. Thread-safe: takes a mutex
 * of its own for a pointer swap (never the writer mutex, never waits for a
 * grace period); allowed in a hook. Errors (nothing changed):
 * MCR_ERR_INVALID (NULL argument; to's epoch not above from's; unknown
 * flags). It allocates nothing. */
MCR_EXTERN int mcr_router_set_migration(mcr_router *router, const mcr_snapshot *from,
                                         const mcr_snapshot *to, uint64_t grace_ms,
                                         unsigned flags, mcr_error *err);

/* mcr_router_clear_migration: end the router's migration now. Pools stop
 * reading through it at their next request; their connections to servers
 * only `from` or `to` named close once idle. MCR_OK, MCR_ERR_EMPTY (none,
 * or its grace period is over), MCR_ERR_INVALID (NULL router).
 * Thread-safe, as mcr_router_set_migration(). */
MCR_EXTERN int mcr_router_clear_migration(mcr_router *router);

/* mcr_router_get_migration: the router's migration into *out, with counted
 * references to its snapshots (release with mcr_router_migration_clear()).
 * MCR_OK; MCR_ERR_EMPTY (none: never set, ended, or its grace period
 * over; *out zeroed); MCR_ERR_INVALID (NULL argument). Thread-safe. */
MCR_EXTERN int mcr_router_get_migration(mcr_router *router, mcr_router_migration *out);

/* mcr_router_migration_clear: drop the references of *t and zero it. NULL is a
 * no-op. */
MCR_EXTERN void mcr_router_migration_clear(mcr_router_migration *t);

/* mcr_migration_phase_at: the phase of `t` for a router whose current
 * epoch is `epoch` (the table above); MCR_MIGRATION_NONE for NULL or an empty
 * migration. Pure. */
MCR_EXTERN mcr_migration_phase mcr_migration_phase_at(const mcr_router_migration *t, uint64_t epoch);

/* mcr_migration_phase_name: "none", "planned", "copying", "switched",
 * "grace", "closing", "done", "aborted"; "unknown" for other values. A
 * static string. */
MCR_EXTERN const char *mcr_migration_phase_name(mcr_migration_phase phase);

/* ==================================================================== */
/*  Watcher                                                              */
/* ==================================================================== */

typedef struct mcr_watcher mcr_watcher;

typedef enum mcr_watch_format {
    /* A server file, read by mcr_config_load_server_file() (one server a
     * line, `host[:port[:weight]]` or `host[:port] [weight=W] [zone=Z]
     * [id=NAME]`). The file is the whole list: it becomes the changes that
     * turn the published snapshot (mcr_router_published(): local states
     * are not the file's business, and stay) into it (servers added, removed,
     * re-weighted, moved to another address or zone under the same id),
     * published as one snapshot of epoch + 1; a file that changes nothing
     * publishes nothing. Servers are matched by id ("host:port" unless
     * given). The file says nothing about states: a server it keeps keeps
     * its state (DOWN or DRAINING set with mcr_changes_set_state()), a new
     * one joins ACTIVE; a file whose servers would leave no ACTIVE one is
     * refused (MCR_ERR_EMPTY). In "slots" mode a file that drops a server
     * still owning slots is refused (MCR_ERR_INVALID) until its slots are
     * moved (mcr_slots_plan() and mcr_router_apply()); a server the file
     * adds owns no slot until then. In "jump" a server the file drops frees
     * its buckets as mcr_mode(3) says (the debounce keeps a server that
     * flaps faster than settle_ms from being dropped at all). */
    MCR_WATCH_SERVER_FILE = 0,
    /* A snapshot file (mcr_snapshot_save()): loaded with its checksum
     * verified; published when its epoch is above the current one; the
     * published snapshot itself (same epoch and checksum) is "no change";
     * anything older is refused as stale (MCR_ERR_STALE). */
    MCR_WATCH_SNAPSHOT_FILE = 1
} mcr_watch_format;

/* What a watcher reports after each attempt to load its file. */
typedef struct mcr_watch_event {
    const char *path;      /* the watched file */
    int status;            /* MCR_OK: loaded; else why the file was refused */
    const mcr_error *err;  /* status != MCR_OK: the details (file, line); else NULL */
    int published;         /* 1: a new snapshot was published */
    uint64_t epoch;        /* the router's epoch after this attempt */
} mcr_watch_event;

typedef void (*mcr_watch_fn)(const mcr_watch_event *ev, void *arg);

/* Watcher settings; all-zero means the defaults. */
typedef struct mcr_watch_options {
    /* How often the file's identity (device, inode, size, mtime, ctime) is
     * checked, in ms. 0: MCR_WATCH_POLL_MS. */
    unsigned poll_ms;
    /* Debounce: a changed file is read only after its identity has stayed
     * the same for at least this long (and at least one poll), so a file
     * still being written is not read. 0: MCR_WATCH_SETTLE_MS. */
    unsigned settle_ms;
    /* Called in the watcher's thread after each load attempt, success or
     * not (NULL: nothing reported). It must not free its own watcher. */
    mcr_watch_fn report;
    void *report_arg;
    uint64_t reserved[8]; /* zero; room for later fields (mcroute.h) */
} mcr_watch_options;

#define MCR_WATCH_POLL_MS 500u
#define MCR_WATCH_SETTLE_MS 1000u

/* mcr_watcher_new: load `path` now, publish it through `router` if it
 * changes anything, then start a thread that reloads the file whenever it
 * changes (debounced, see mcr_watch_options) and publishes the result.
 *
 * A file that cannot be read or parsed, is incomplete (a snapshot file
 * whose checksum does not match), stale, or would leave no active server
 * never replaces the current snapshot: the error is reported and the file is
 * tried again once it changes. The file should be replaced atomically
 * (written to a temporary file and renamed): a server file has no checksum,
 * and only the debounce protects against reading one half-written. A file
 * that changes while being read is read again later.
 *
 * `tmpl` matters only for a server file when the router holds no snapshot
 * yet: the first snapshot (epoch 1) then takes the parameters of `tmpl`
 * (mode, hashes, hash tag, key prefix, table sizes), which must hold no
 * server; the file's servers are added to a copy of it, never to `tmpl`
 * itself, which the call does not change (also when it fails), so one
 * template may serve any number of watchers. The caller keeps ownership of
 * `tmpl`; it is not used after the call returns. Otherwise `tmpl` is not used and may be NULL: the parameters of
 * the current snapshot carry over to the next. `opts` may be NULL (defaults); it is
 * copied.
 *
 * Returns MCR_OK and the watcher in *out, or an error and no watcher:
 * MCR_ERR_INVALID (NULL router, path or out; an unknown format; a server
 * file, an empty router and no usable `tmpl`), the errors of reading the
 * file (those of mcr_config_load_server_file() or mcr_snapshot_load():
 * MCR_ERR_IO, MCR_ERR_SYNTAX, MCR_ERR_RANGE, MCR_ERR_DUPLICATE,
 * MCR_ERR_EMPTY, MCR_ERR_CORRUPT, ...), of applying it (mcr_snapshot_apply())
 * and of publishing it (MCR_ERR_STALE for a stale snapshot file); the router is
 * then unchanged. MCR_ERR_NOMEM: out of memory; MCR_ERR_SYSTEM: the thread,
 * its mutex or condition could not be created (err->sys_errno; the first
 * load may have been published then). Publishes run the
 * router's hooks in the thread that publishes: this one for the first load,
 * the watcher's thread afterwards. */
MCR_EXTERN int mcr_watcher_new(mcr_router *router, const char *path, mcr_watch_format format,
                               const mcr_config *tmpl, const mcr_watch_options *opts,
                               mcr_watcher **out, mcr_error *err);

/* mcr_watcher_free: stop the watcher's thread, wait for it (a load in
 * progress completes first) and free the watcher. The router stays as it
 * is. NULL is a no-op. Must not be called from the watcher's own report
 * callback. */
MCR_EXTERN void mcr_watcher_free(mcr_watcher *watcher);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_ROUTER_H */
