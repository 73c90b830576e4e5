/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_memcached_attach.h: route every call of a libmemcached handle
 * through an mcroute router.
 * Library: libmcroute_libmemcached, `pkg-config --cflags --libs
 * mcroute-libmemcached` (link it before libmemcached: see LINKING).
 *
 * INTRODUCTION
 *
 * A program written for libmemcached keeps its calls (memcached_get(),
 * memcached_mget() and memcached_fetch_result(), memcached_set() and the
 * other storage calls, memcached_delete(), memcached_increment(),
 * memcached_touch(), the _by_key forms, memcached_server_by_key(), ...)
 * and gets mcroute's placement: after mcr_memcached_attach(memc, router),
 * each call on `memc` goes to the server the router's current snapshot
 * places the key on (mcr_snapshot_locate()), whatever the mode (any of
 * mcr_mode(3), any number of servers), and follows the router when its
 * snapshot changes (a fleet's follower, a host's state, a publish).
 *
 * How. libmemcached's MODULA distribution sends a key to server
 * hash(key) % server_count, and a handle's hash may be a custom function
 * (hashkit_set_custom_function()). An attached handle has the MODULA
 * distribution, a hash that returns the position of mcroute's owner of the
 * key, and as its server list the active servers of the router's snapshot
 * in ring order (memcached_server_instance_by_position(memc, i) is ring
 * server i, mcr_ring_server_name()). The key is the one libmemcached
 * hashes: the key, or the group key of a _by_key call, or the namespace
 * and the key with MEMCACHED_BEHAVIOR_HASH_WITH_NAMESPACE.
 *
 * When the list changes. The server list is replaced only when a call
 * that starts a request (get, mget, a storage call, delete, increment or
 * decrement, touch, exist, server_by_key, generate_hash) begins and the
 * router's snapshot changed since the last one (mcr_router_generation()):
 * never during a call, and never between a multi-get and its fetches (a
 * snapshot that arrives then is taken by the next call that starts a
 * request). A snapshot with the same active servers in the same order (a
 * new epoch, other weights) keeps the list and its connections; another
 * replaces the whole list, and libmemcached opens its connections again
 * as they are used.
 *
 * What the bridge owns. While attached, the placement is mcroute's: the
 * distribution, the key hash, the continuum's hash, SORT_HOSTS, the
 * hashkit and the server list. Calls that would change them
 * (memcached_behavior_set() of MEMCACHED_BEHAVIOR_DISTRIBUTION, _HASH,
 * _KETAMA, _KETAMA_WEIGHTED, _KETAMA_HASH, _SORT_HOSTS;
 * memcached_behavior_set_distribution(), _set_key_hash(),
 * _set_distribution_hash(); memcached_set_hashkit(); memcached_server_add()
 * and its forms, memcached_server_push(), memcached_servers_reset()) are
 * not applied: they return MEMCACHED_NOT_SUPPORTED, or with
 * MCR_MEMCACHED_ACCEPT MEMCACHED_SUCCESS (what a program that cannot be
 * changed expects), and with MCR_MEMCACHED_ACCEPT the first that names
 * servers other than mcroute's prints one line on standard error. The
 * other behaviours keep their meaning: the binary protocol, the namespace
 * (MEMCACHED_CALLBACK_NAMESPACE), timeouts, no-block, buffering, the
 * retry timeout and AUTO_EJECT_HOSTS' failure counting, which with MODULA
 * mark a failing server dead (its requests fail fast until the retry
 * timeout) without sending its keys elsewhere: where a key goes is the
 * router's to say (a pool that ejects servers, mcr_router_set_local_state(),
 * changes it for every handle at once).
 *
 * Resizes. While the router holds a migration (mcr_router_set_migration(),
 * a fleet's resize), the handle goes through it as a pool does
 * (mcroute_pool.h, Migrations): its list has the servers of both
 * snapshots (the current ones first, in ring order); writes of a key whose
 * owner differs in the other snapshot reach both owners (a set both, the
 * other writes the current owner first and the other by its answer);
 * once switched, a get's miss of such a key, and those of a multi-get
 * read with memcached_fetch_result(), are read at the previous owner, and
 * a write that misses at the new owner goes to the previous one; closing,
 * a miss is the answer and a write that misses deletes the previous
 * owner's copy. memcached_fetch(), memcached_fetch_execute() and
 * memcached_mget_execute() read the current owners only.
 *
 * memcached_clone() of an attached handle is attached to the same router
 * with the same flags; memcached_free() detaches first.
 *
 * THREADS. libmemcached's rule stands: a handle is used by one thread at a
 * time. A router may serve any number of handles in any threads: the
 * handle only reads it, lock-free.
 *
 * LINKING. The bridge sees each call by defining libmemcached's entry
 * points itself, which the dynamic linker prefers when
 * libmcroute_libmemcached comes before libmemcached in the program's
 * search order: link with -lmcroute_libmemcached before -lmemcached (the
 * pkg-config line does), or load it with LD_PRELOAD. Each forwards to
 * libmemcached's own function; on a handle that is not attached it does
 * nothing else. mcr_memcached_attach() checks that the order holds and
 * fails otherwise (MCR_ERR_UNSUPPORTED), rather than route with a list
 * that no call would keep current.
 */
#ifndef MCROUTE_MEMCACHED_ATTACH_H
#define MCROUTE_MEMCACHED_ATTACH_H

#include <libmemcached/memcached.h>

#include "mcroute.h"
#include "mcroute_router.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of mcr_memcached_attach(). */
#define MCR_MEMCACHED_ACCEPT 1u /* calls that would change the placement or
                                   the server list succeed without effect
                                   (see "What the bridge owns") instead of
                                   returning MEMCACHED_NOT_SUPPORTED */

/* mcr_memcached_attach: route every later call on `memc` through `router`
 * (see INTRODUCTION): the handle's distribution becomes MODULA, its hash
 * mcroute's, SORT_HOSTS off, and its server list that of the router's
 * current snapshot (connections to the servers it had are closed). A
 * router with no snapshot yet is accepted: until it has one, calls that
 * start a request fail with MEMCACHED_NO_SERVERS. The router must outlive
 * the attachment (mcr_memcached_detach() or memcached_free()); it is not
 * freed by the bridge. Errors (nothing changed, err filled):
 *   MCR_ERR_INVALID      a NULL argument, unknown flags, or `memc` is
 *                        attached already (detach first).
 *   MCR_ERR_UNSUPPORTED  libmemcached comes before this library in the
 *                        search order (see LINKING), or its functions
 *                        cannot be found.
 *   MCR_ERR_NOMEM        out of memory.
 * Not thread-safe on one handle (libmemcached's rule). */
MCR_EXTERN int mcr_memcached_attach(memcached_st *memc, mcr_router *router, unsigned flags,
                                    mcr_error *err);

/* mcr_memcached_detach: end the attachment: the handle keeps the server
 * list it has, and gets back the distribution, hashes and SORT_HOSTS it
 * had before mcr_memcached_attach(). MCR_OK, or MCR_ERR_INVALID when
 * `memc` is NULL or not attached. */
MCR_EXTERN int mcr_memcached_detach(memcached_st *memc);

/* mcr_memcached_router: the router `memc` is attached to, or NULL. */
MCR_EXTERN mcr_router *mcr_memcached_router(const memcached_st *memc);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_MEMCACHED_ATTACH_H */
