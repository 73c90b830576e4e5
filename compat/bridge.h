/* SPDX-License-Identifier: BSD-3-Clause */
/* bridge.h: the state of an attached libmemcached handle and libmemcached's own functions, shared by bridge.c (attach, detach, the list kept current, the hash) and bridge_wrap.c (the entry points the program calls); never installed. */
#ifndef MCR_BRIDGE_H
#define MCR_BRIDGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "mcroute_memcached_attach.h"

/* libmemcached's functions, found in its own object (not through the
 * global search order, where this library's entry points come first).
 * X(name, return type, parameters) for each one the bridge defines or
 * calls on an attached handle. */
#define MCR__LMC_FUNCTIONS(X)                                                                    \
    X(memcached_create, memcached_st *, (memcached_st *))                                       \
    X(memcached, memcached_st *, (const char *, size_t))                                        \
    X(memcached_clone, memcached_st *, (memcached_st *, const memcached_st *))                  \
    X(memcached_free, void, (memcached_st *))                                                   \
    X(memcached_get, char *,                                                                    \
      (memcached_st *, const char *, size_t, size_t *, uint32_t *, memcached_return_t *))       \
    X(memcached_get_by_key, char *,                                                             \
      (memcached_st *, const char *, size_t, const char *, size_t, size_t *, uint32_t *,        \
       memcached_return_t *))                                                                   \
    X(memcached_mget_by_key, memcached_return_t,                                                \
      (memcached_st *, const char *, size_t, const char *const *, const size_t *, size_t))      \
    X(memcached_mget_execute, memcached_return_t,                                               \
      (memcached_st *, const char *const *, const size_t *, size_t, memcached_execute_fn *,     \
       void *, uint32_t))                                                                       \
    X(memcached_mget_execute_by_key, memcached_return_t,                                        \
      (memcached_st *, const char *, size_t, const char *const *, const size_t *, size_t,       \
       memcached_execute_fn *, void *, uint32_t))                                               \
    X(memcached_set, memcached_return_t,                                                        \
      (memcached_st *, const char *, size_t, const char *, size_t, time_t, uint32_t))           \
    X(memcached_add, memcached_return_t,                                                        \
      (memcached_st *, const char *, size_t, const char *, size_t, time_t, uint32_t))           \
    X(memcached_replace, memcached_return_t,                                                    \
      (memcached_st *, const char *, size_t, const char *, size_t, time_t, uint32_t))           \
    X(memcached_append, memcached_return_t,                                                     \
      (memcached_st *, const char *, size_t, const char *, size_t, time_t, uint32_t))           \
    X(memcached_prepend, memcached_return_t,                                                    \
      (memcached_st *, const char *, size_t, const char *, size_t, time_t, uint32_t))           \
    X(memcached_cas, memcached_return_t,                                                        \
      (memcached_st *, const char *, size_t, const char *, size_t, time_t, uint32_t, uint64_t)) \
    X(memcached_set_by_key, memcached_return_t,                                                 \
      (memcached_st *, const char *, size_t, const char *, size_t, const char *, size_t,        \
       time_t, uint32_t))                                                                       \
    X(memcached_add_by_key, memcached_return_t,                                                 \
      (memcached_st *, const char *, size_t, const char *, size_t, const char *, size_t,        \
       time_t, uint32_t))                                                                       \
    X(memcached_replace_by_key, memcached_return_t,                                             \
      (memcached_st *, const char *, size_t, const char *, size_t, const char *, size_t,        \
       time_t, uint32_t))                                                                       \
    X(memcached_append_by_key, memcached_return_t,                                              \
      (memcached_st *, const char *, size_t, const char *, size_t, const char *, size_t,        \
       time_t, uint32_t))                                                                       \
    X(memcached_prepend_by_key, memcached_return_t,                                             \
      (memcached_st *, const char *, size_t, const char *, size_t, const char *, size_t,        \
       time_t, uint32_t))                                                                       \
    X(memcached_cas_by_key, memcached_return_t,                                                 \
      (memcached_st *, const char *, size_t, const char *, size_t, const char *, size_t,        \
       time_t, uint32_t, uint64_t))                                                             \
    X(memcached_delete, memcached_return_t, (memcached_st *, const char *, size_t, time_t))     \
    X(memcached_delete_by_key, memcached_return_t,                                              \
      (memcached_st *, const char *, size_t, const char *, size_t, time_t))                     \
    X(memcached_increment, memcached_return_t,                                                  \
      (memcached_st *, const char *, size_t, uint32_t, uint64_t *))                             \
    X(memcached_decrement, memcached_return_t,                                                  \
      (memcached_st *, const char *, size_t, uint32_t, uint64_t *))                             \
    X(memcached_increment_by_key, memcached_return_t,                                           \
      (memcached_st *, const char *, size_t, const char *, size_t, uint64_t, uint64_t *))       \
    X(memcached_decrement_by_key, memcached_return_t,                                           \
      (memcached_st *, const char *, size_t, const char *, size_t, uint64_t, uint64_t *))       \
    X(memcached_increment_with_initial, memcached_return_t,                                     \
      (memcached_st *, const char *, size_t, uint64_t, uint64_t, time_t, uint64_t *))           \
    X(memcached_decrement_with_initial, memcached_return_t,                                     \
      (memcached_st *, const char *, size_t, uint64_t, uint64_t, time_t, uint64_t *))           \
    X(memcached_increment_with_initial_by_key, memcached_return_t,                              \
      (memcached_st *, const char *, size_t, const char *, size_t, uint64_t, uint64_t, time_t,  \
       uint64_t *))                                                                             \
    X(memcached_decrement_with_initial_by_key, memcached_return_t,                              \
      (memcached_st *, const char *, size_t, const char *, size_t, uint64_t, uint64_t, time_t,  \
       uint64_t *))                                                                             \
    X(memcached_touch, memcached_return_t, (memcached_st *, const char *, size_t, time_t))      \
    X(memcached_touch_by_key, memcached_return_t,                                               \
      (memcached_st *, const char *, size_t, const char *, size_t, time_t))                     \
    X(memcached_exist, memcached_return_t, (memcached_st *, const char *, size_t))              \
    X(memcached_exist_by_key, memcached_return_t,                                               \
      (memcached_st *, const char *, size_t, const char *, size_t))                             \
    X(memcached_server_by_key, const memcached_instance_st *,                                   \
      (memcached_st *, const char *, size_t, memcached_return_t *))                             \
    X(memcached_generate_hash, uint32_t, (const memcached_st *, const char *, size_t))          \
    X(memcached_behavior_set, memcached_return_t,                                               \
      (memcached_st *, const memcached_behavior_t, const uint64_t))                             \
    X(memcached_behavior_get, uint64_t, (memcached_st *, const memcached_behavior_t))           \
    X(memcached_behavior_set_distribution, memcached_return_t,                                  \
      (memcached_st *, memcached_server_distribution_t))                                        \
    X(memcached_behavior_set_key_hash, memcached_return_t, (memcached_st *, memcached_hash_t))  \
    X(memcached_behavior_set_distribution_hash, memcached_return_t,                             \
      (memcached_st *, memcached_hash_t))                                                       \
    X(memcached_set_hashkit, memcached_return_t, (memcached_st *, hashkit_st *))                \
    X(memcached_get_hashkit, const hashkit_st *, (const memcached_st *))                        \
    X(memcached_server_add, memcached_return_t, (memcached_st *, const char *, in_port_t))      \
    X(memcached_server_add_with_weight, memcached_return_t,                                     \
      (memcached_st *, const char *, in_port_t, uint32_t))                                      \
    X(memcached_server_add_udp, memcached_return_t, (memcached_st *, const char *, in_port_t))  \
    X(memcached_server_add_udp_with_weight, memcached_return_t,                                 \
      (memcached_st *, const char *, in_port_t, uint32_t))                                      \
    X(memcached_server_add_unix_socket, memcached_return_t, (memcached_st *, const char *))     \
    X(memcached_server_add_unix_socket_with_weight, memcached_return_t,                         \
      (memcached_st *, const char *, uint32_t))                                                 \
    X(memcached_server_push, memcached_return_t, (memcached_st *, const memcached_server_list_st)) \
    X(memcached_servers_reset, void, (memcached_st *))                                          \
    X(memcached_server_count, uint32_t, (const memcached_st *))                                 \
    X(memcached_fetch_result, memcached_result_st *,                                           \
      (memcached_st *, memcached_result_st *, memcached_return_t *))                            \
    X(memcached_callback_get, void *,                                                           \
      (memcached_st *, const memcached_callback_t, memcached_return_t *))

/* The table: lmc.memcached_get and so on. */
typedef struct mcr__lmc {
#define MCR__LMC_FIELD(name, ret, params) ret(*name) params;
    MCR__LMC_FUNCTIONS(MCR__LMC_FIELD)
#undef MCR__LMC_FIELD
} mcr__lmc;

/* libmemcached's functions, found once (thread-safe): the table, or NULL
 * with the reason in `why` (a static string). */
const mcr__lmc *mcr__lmc_get(const char **why);

/* An attached handle. */
typedef struct mcr__bridge {
    memcached_st *memc;
    mcr_router *router;       /* the caller's, not owned; NULL: the preload's,
                                 not made yet */
    unsigned flags;
    uint64_t generation;      /* the router's generation the list was made for */
    mcr_snapshot *snap;       /* that snapshot (a reference): where the hash
                                 looks keys up; NULL before the first */
    const mcr_ring *ring;     /* its ring: its servers are the list's first
                                 ones, in ring order */
    /* The router's migration at the last sync (a resize in progress): its
     * phase for the current snapshot, and the other snapshot's ring (`to`
     * while copying, `from` once switched), whose servers that the current
     * one has not follow in the list; other_pos: its ring index -> list
     * position. phase MCR_MIGRATION_NONE and other NULL without one. */
    mcr_router_migration mig;
    mcr_migration_phase phase;
    const mcr_ring *other;
    uint32_t *other_pos;
    int64_t route;            /* >= 0: the hash answers this list position
                                 (a call sent to one owner); -1 */
    struct mcr__mget *mget;   /* a multi-get's fallback reads (switched) */
    unsigned depth;           /* calls of the handle in progress (libmemcached
                                 calls its own entry points: only the outer
                                 one may replace the list) */
    bool told;                /* MCR_MEMCACHED_ACCEPT: the line was printed */
    time_t warned_at;         /* when "no snapshot yet" was printed last */
    bool bypass_told;         /* a call that bypassed the entry points was said */
    /* What attach replaced, given back by detach. */
    hashkit_st saved_hashkit;
    uint64_t saved_distribution, saved_sort_hosts;
} mcr__bridge;

/* The bridge of `memc` when it is attached, else NULL: its hashkit's
 * function is the bridge's, whose context is the bridge. */
mcr__bridge *mcr__bridge_of(const memcached_st *memc);

/* The outer call that starts a request on an attached handle: the list
 * made current when the router's snapshot changed. MEMCACHED_SUCCESS, or
 * MEMCACHED_NO_SERVERS when the router has no snapshot yet (a line on
 * standard error, at most once a second), or libmemcached's error adding
 * a server. */
memcached_return_t mcr__bridge_sync(mcr__bridge *b);

/* A call that would change what the bridge owns (`what` names it for the
 * line): MEMCACHED_NOT_SUPPORTED, or MEMCACHED_SUCCESS with
 * MCR_MEMCACHED_ACCEPT. `host` (may be NULL) a server the program names:
 * the one line is printed with MCR_MEMCACHED_ACCEPT, the first time the
 * handle names a server mcroute's list does not have. */
memcached_return_t mcr__bridge_refuse(mcr__bridge *b, const char *what, const char *host,
                                      unsigned port);

/* Attach `memc` to the preload's router (libmcroute_preload.so), with
 * MCR_MEMCACHED_ACCEPT; a line on standard error when it cannot be. */
void mcr__bridge_attach_preload(memcached_st *memc);

/* A new attachment of `dst` like that of `src` (memcached_clone()). */
void mcr__bridge_clone(const mcr__bridge *src, memcached_st *dst);

/* ---- resizes (bridge_migrate.c) ---- */

/* The list position of the owner of `key` (`len` bytes, as the caller
 * gave it: the namespace is added when the handle hashes with it) in the
 * migration's other snapshot when it differs from the current owner's;
 * -1 when the key does not move or there is no migration. */
int64_t mcr__bridge_moved(const mcr__bridge *b, const char *key, size_t len);

/* The storage and other write calls of a key through a migration (the
 * pool's rules, mcroute_pool.h, Migrations). `op` names the call; the
 * arguments are those of the _by_key form (group_key NULL: the key). */
typedef enum mcr__wop {
    MCR__W_SET, MCR__W_ADD, MCR__W_REPLACE, MCR__W_APPEND, MCR__W_PREPEND, MCR__W_CAS,
    MCR__W_DELETE, MCR__W_TOUCH, MCR__W_INCR, MCR__W_DECR, MCR__W_INCR_INIT, MCR__W_DECR_INIT
} mcr__wop;
typedef struct mcr__wargs {
    const char *group, *key, *value;
    size_t group_len, key_len, value_len;
    time_t expiration;
    uint32_t flags;
    uint64_t cas, offset, initial;
    uint64_t *number; /* incr, decr: the new value */
} mcr__wargs;
memcached_return_t mcr__bridge_write(mcr__bridge *b, mcr__wop op, const mcr__wargs *a);

/* A get through a migration: the current owner, and once switched a miss
 * of a moved key read at its previous owner. */
char *mcr__bridge_get(mcr__bridge *b, const char *group, size_t group_len, const char *key,
                      size_t key_len, size_t *value_length, uint32_t *flags,
                      memcached_return_t *error);

/* A multi-get's keys, kept once switched to read those that miss at their
 * previous owners (mcr__bridge_fetch_result()); dropped at the next one. */
void mcr__bridge_mget_begin(mcr__bridge *b, const char *group, size_t group_len,
                            const char *const *keys, const size_t *lens, size_t n);
void mcr__bridge_mget_end(mcr__bridge *b);

/* The multi-gets of all handles of the process whose fallback reads are
 * pending (between mcr__bridge_mget_begin() keeping keys and
 * mcr__bridge_mget_end()): while none is, memcached_fetch_result() goes
 * straight on to libmemcached, without looking for its handle's bridge
 * (a multi-get calls it once per key). Only a thread with a multi-get of
 * its own pending needs to see its own increment, which it made. */
extern _Atomic unsigned mcr__mget_pending;
/* memcached_fetch_result() through the fallback reads. */
memcached_result_st *mcr__bridge_fetch_result(mcr__bridge *b, memcached_result_st *result,
                                              memcached_return_t *error);

/* Detach without giving anything back (the handle is being freed). */
void mcr__bridge_drop(mcr__bridge *b);

#endif /* MCR_BRIDGE_H */
