/* SPDX-License-Identifier: BSD-3-Clause */
/* bridge_wrap.c: libmemcached's entry points as the program calls them: on an attached handle the list is made current when a call that starts a request begins and what the bridge owns is kept; every call goes on to libmemcached's own function. */
#include <stdio.h>
#include <stdlib.h>

#include "bridge.h"
#ifdef MCR_PRELOAD
#include "preload.h"
#endif

/* libmemcached's functions: this library is linked with it, so they are
 * there; if they could not be found no call could go on. */
static const mcr__lmc *lmc(void)
{
    const char *why = NULL;
    const mcr__lmc *l = mcr__lmc_get(&why);
    if (l == NULL) {
        fprintf(stderr, "mcroute: %s\n", why);
        abort();
    }
    return l;
}

/* The attached handle whose call this thread is in, and its bridge: the
 * calls libmemcached makes of its own entry points during it find the
 * bridge here, without asking the handle's hashkit again. Initial-exec:
 * read without a call to __tls_get_addr (a get passes here five times);
 * the 16 bytes fit the static TLS glibc keeps for objects opened later. */
#define MCR_TLS __thread __attribute__((tls_model("initial-exec")))
static MCR_TLS const memcached_st *t_memc;
static MCR_TLS mcr__bridge *t_bridge;

/* The start of a call on `memc`: its bridge (NULL: not attached) with the
 * call counted, and, for the outer call of one that starts a request, the
 * list made current (*rc: its outcome). */
static mcr__bridge *enter(const memcached_st *memc, bool request, memcached_return_t *rc)
{
    *rc = MEMCACHED_SUCCESS;
    mcr__bridge *b = memc != NULL && memc == t_memc ? t_bridge
                     : memc != NULL                 ? mcr__bridge_of(memc)
                                                    : NULL;
    if (b != NULL && b->depth++ == 0) {
        t_memc = memc;
        t_bridge = b;
        if (request) {
            if (b->mget != NULL)
                mcr__bridge_mget_end(b); /* a new request: a multi-get's fallback is over */
            *rc = mcr__bridge_sync(b);
        }
    }
    return b;
}

static void leave(mcr__bridge *b)
{
    if (b != NULL && --b->depth == 0 && t_bridge == b) {
        t_memc = NULL;
        t_bridge = NULL;
    }
}

/* A call that starts a request and returns a status. */
#define WRAP_RC(name, decl, args)                                                                \
    MCR_EXTERN memcached_return_t name decl                                                      \
    {                                                                                            \
        memcached_return_t rc;                                                                   \
        mcr__bridge *b = enter(ptr, true, &rc);                                                  \
        if (rc == MEMCACHED_SUCCESS)                                                             \
            rc = lmc()->name args;                                                               \
        leave(b);                                                                                \
        return rc;                                                                               \
    }

/* The same for a call that returns a value and its status in *error. */
#define WRAP_VALUE(type, name, decl, args)                                                       \
    MCR_EXTERN type name decl                                                                    \
    {                                                                                            \
        memcached_return_t rc;                                                                   \
        mcr__bridge *b = enter(ptr, true, &rc);                                                  \
        type v = NULL;                                                                           \
        if (rc == MEMCACHED_SUCCESS)                                                             \
            v = lmc()->name args;                                                                \
        else if (error != NULL)                                                                  \
            *error = rc;                                                                         \
        leave(b);                                                                                \
        return v;                                                                                \
    }

/* ------------------------------------------------------------ reads */

/* A get: through the migration when one is in force. memcached_get() is
 * libmemcached's memcached_get_by_key() with no group (its own definition
 * is that call); the bridge calls the latter for both, which spares a get
 * a pass through this file's entry point for the inner call. */
static char *get(memcached_st *ptr, const char *group, size_t group_len, const char *key,
                 size_t key_len, size_t *value_length, uint32_t *flags, memcached_return_t *error)
{
    memcached_return_t rc;
    mcr__bridge *b = enter(ptr, true, &rc);
    char *v = NULL;
    if (rc != MEMCACHED_SUCCESS) {
        if (error != NULL)
            *error = rc;
    } else if (b != NULL && b->other != NULL && b->depth == 1) {
        v = mcr__bridge_get(b, group, group_len, key, key_len, value_length, flags, error);
    } else {
        v = lmc()->memcached_get_by_key(ptr, group, group_len, key, key_len, value_length, flags,
                                        error);
    }
    leave(b);
    return v;
}

MCR_EXTERN char *memcached_get(memcached_st *ptr, const char *key, size_t key_length,
                               size_t *value_length, uint32_t *flags, memcached_return_t *error)
{
    return get(ptr, NULL, 0, key, key_length, value_length, flags, error);
}

MCR_EXTERN char *memcached_get_by_key(memcached_st *ptr, const char *group_key,
                                      size_t group_key_length, const char *key,
                                      size_t key_length, size_t *value_length, uint32_t *flags,
                                      memcached_return_t *error)
{
    return get(ptr, group_key, group_key_length, key, key_length, value_length, flags, error);
}

/* A multi-get: its keys kept for the fallback reads when switched.
 * memcached_mget() is memcached_mget_by_key() with no group, as for get. */
static memcached_return_t mget(memcached_st *ptr, const char *group, size_t group_len,
                               const char *const *keys, const size_t *lens, size_t n)
{
    memcached_return_t rc;
    mcr__bridge *b = enter(ptr, true, &rc);
    if (rc == MEMCACHED_SUCCESS)
        rc = lmc()->memcached_mget_by_key(ptr, group, group_len, keys, lens, n);
    if (b != NULL && b->other != NULL && b->depth == 1 &&
        (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_SOME_ERRORS))
        mcr__bridge_mget_begin(b, group, group_len, keys, lens, n);
    leave(b);
    return rc;
}

MCR_EXTERN memcached_return_t memcached_mget(memcached_st *ptr, const char *const *keys,
                                             const size_t *key_length, size_t number_of_keys)
{
    return mget(ptr, NULL, 0, keys, key_length, number_of_keys);
}

MCR_EXTERN memcached_return_t memcached_mget_by_key(memcached_st *ptr, const char *group_key,
                                                    size_t group_key_length,
                                                    const char *const *keys,
                                                    const size_t *key_length,
                                                    const size_t number_of_keys)
{
    return mget(ptr, group_key, group_key_length, keys, key_length, number_of_keys);
}

/* The results of a multi-get, with those of its fallback reads. */
MCR_EXTERN memcached_result_st *memcached_fetch_result(memcached_st *ptr,
                                                       memcached_result_st *result,
                                                       memcached_return_t *error)
{
    if (atomic_load_explicit(&mcr__mget_pending, memory_order_relaxed) == 0)
        return lmc()->memcached_fetch_result(ptr, result, error); /* no fallback anywhere */
    memcached_return_t rc;
    mcr__bridge *b = enter(ptr, false, &rc);
    memcached_result_st *r = b != NULL && b->mget != NULL && b->depth == 1
                                 ? mcr__bridge_fetch_result(b, result, error)
                                 : lmc()->memcached_fetch_result(ptr, result, error);
    leave(b);
    return r;
}
WRAP_RC(memcached_mget_execute,
        (memcached_st * ptr, const char *const *keys, const size_t *key_length,
         const size_t number_of_keys, memcached_execute_fn *callback, void *context,
         const uint32_t number_of_callbacks),
        (ptr, keys, key_length, number_of_keys, callback, context, number_of_callbacks))
WRAP_RC(memcached_mget_execute_by_key,
        (memcached_st * ptr, const char *group_key, size_t group_key_length,
         const char *const *keys, const size_t *key_length, size_t number_of_keys,
         memcached_execute_fn *callback, void *context, const uint32_t number_of_callbacks),
        (ptr, group_key, group_key_length, keys, key_length, number_of_keys, callback, context,
         number_of_callbacks))
WRAP_RC(memcached_exist, (memcached_st * ptr, const char *key, size_t key_length),
        (ptr, key, key_length))
WRAP_RC(memcached_exist_by_key,
        (memcached_st * ptr, const char *group_key, size_t group_key_length, const char *key,
         size_t key_length),
        (ptr, group_key, group_key_length, key, key_length))

/* ------------------------------------------------------------ writes */

/* A write call: the outer call makes the list current; with a migration
 * in force it goes through it (bridge_migrate.c), else straight on. */
#define WRAP_WRITE(name, op, decl, args, ...)                                                    \
    MCR_EXTERN memcached_return_t name decl                                                      \
    {                                                                                            \
        memcached_return_t rc;                                                                   \
        mcr__bridge *b = enter(ptr, true, &rc);                                                  \
        if (rc == MEMCACHED_SUCCESS && b != NULL && b->other != NULL && b->depth == 1) {         \
            const mcr__wargs a = {__VA_ARGS__};                                                  \
            rc = mcr__bridge_write(b, op, &a);                                                   \
        } else if (rc == MEMCACHED_SUCCESS) {                                                    \
            rc = lmc()->name args;                                                               \
        }                                                                                        \
        leave(b);                                                                                \
        return rc;                                                                               \
    }
#define WRAP_STORE(name, op)                                                                     \
    WRAP_WRITE(name, op,                                                                         \
               (memcached_st * ptr, const char *key, size_t key_length, const char *value,       \
                size_t value_length, time_t expiration, uint32_t flags),                         \
               (ptr, key, key_length, value, value_length, expiration, flags), .key = key,       \
               .key_len = key_length, .value = value, .value_len = value_length,                 \
               .expiration = expiration, .flags = flags)
#define WRAP_STORE_BY_KEY(name, op)                                                              \
    WRAP_WRITE(name, op,                                                                         \
               (memcached_st * ptr, const char *group_key, size_t group_key_length,              \
                const char *key, size_t key_length, const char *value, size_t value_length,      \
                time_t expiration, uint32_t flags),                                              \
               (ptr, group_key, group_key_length, key, key_length, value, value_length,          \
                expiration, flags),                                                              \
               .group = group_key, .group_len = group_key_length, .key = key,                    \
               .key_len = key_length, .value = value, .value_len = value_length,                 \
               .expiration = expiration, .flags = flags)
WRAP_STORE(memcached_set, MCR__W_SET)
WRAP_STORE(memcached_add, MCR__W_ADD)
WRAP_STORE(memcached_replace, MCR__W_REPLACE)
WRAP_STORE(memcached_append, MCR__W_APPEND)
WRAP_STORE(memcached_prepend, MCR__W_PREPEND)
WRAP_STORE_BY_KEY(memcached_set_by_key, MCR__W_SET)
WRAP_STORE_BY_KEY(memcached_add_by_key, MCR__W_ADD)
WRAP_STORE_BY_KEY(memcached_replace_by_key, MCR__W_REPLACE)
WRAP_STORE_BY_KEY(memcached_append_by_key, MCR__W_APPEND)
WRAP_STORE_BY_KEY(memcached_prepend_by_key, MCR__W_PREPEND)
WRAP_WRITE(memcached_cas, MCR__W_CAS,
           (memcached_st * ptr, const char *key, size_t key_length, const char *value,
            size_t value_length, time_t expiration, uint32_t flags, uint64_t cas),
           (ptr, key, key_length, value, value_length, expiration, flags, cas), .key = key,
           .key_len = key_length, .value = value, .value_len = value_length,
           .expiration = expiration, .flags = flags, .cas = cas)
WRAP_WRITE(memcached_cas_by_key, MCR__W_CAS,
           (memcached_st * ptr, const char *group_key, size_t group_key_length, const char *key,
            size_t key_length, const char *value, size_t value_length, time_t expiration,
            uint32_t flags, uint64_t cas),
           (ptr, group_key, group_key_length, key, key_length, value, value_length, expiration,
            flags, cas),
           .group = group_key, .group_len = group_key_length, .key = key, .key_len = key_length,
           .value = value, .value_len = value_length, .expiration = expiration, .flags = flags,
           .cas = cas)
WRAP_WRITE(memcached_delete, MCR__W_DELETE,
           (memcached_st * ptr, const char *key, size_t key_length, time_t expiration),
           (ptr, key, key_length, expiration), .key = key, .key_len = key_length,
           .expiration = expiration)
WRAP_WRITE(memcached_delete_by_key, MCR__W_DELETE,
           (memcached_st * ptr, const char *group_key, size_t group_key_length, const char *key,
            size_t key_length, time_t expiration),
           (ptr, group_key, group_key_length, key, key_length, expiration), .group = group_key,
           .group_len = group_key_length, .key = key, .key_len = key_length,
           .expiration = expiration)
WRAP_WRITE(memcached_touch, MCR__W_TOUCH,
           (memcached_st * ptr, const char *key, size_t key_length, time_t expiration),
           (ptr, key, key_length, expiration), .key = key, .key_len = key_length,
           .expiration = expiration)
WRAP_WRITE(memcached_touch_by_key, MCR__W_TOUCH,
           (memcached_st * ptr, const char *group_key, size_t group_key_length, const char *key,
            size_t key_length, time_t expiration),
           (ptr, group_key, group_key_length, key, key_length, expiration), .group = group_key,
           .group_len = group_key_length, .key = key, .key_len = key_length,
           .expiration = expiration)

/* ------------------------------------------------------------ counters */

WRAP_WRITE(memcached_increment, MCR__W_INCR,
           (memcached_st * ptr, const char *key, size_t key_length, uint32_t offset,
            uint64_t *value),
           (ptr, key, key_length, offset, value), .key = key, .key_len = key_length,
           .offset = offset, .number = value)
WRAP_WRITE(memcached_decrement, MCR__W_DECR,
           (memcached_st * ptr, const char *key, size_t key_length, uint32_t offset,
            uint64_t *value),
           (ptr, key, key_length, offset, value), .key = key, .key_len = key_length,
           .offset = offset, .number = value)
WRAP_WRITE(memcached_increment_by_key, MCR__W_INCR,
           (memcached_st * ptr, const char *group_key, size_t group_key_length, const char *key,
            size_t key_length, uint64_t offset, uint64_t *value),
           (ptr, group_key, group_key_length, key, key_length, offset, value),
           .group = group_key, .group_len = group_key_length, .key = key, .key_len = key_length,
           .offset = offset, .number = value)
WRAP_WRITE(memcached_decrement_by_key, MCR__W_DECR,
           (memcached_st * ptr, const char *group_key, size_t group_key_length, const char *key,
            size_t key_length, uint64_t offset, uint64_t *value),
           (ptr, group_key, group_key_length, key, key_length, offset, value),
           .group = group_key, .group_len = group_key_length, .key = key, .key_len = key_length,
           .offset = offset, .number = value)
WRAP_WRITE(memcached_increment_with_initial, MCR__W_INCR_INIT,
           (memcached_st * ptr, const char *key, size_t key_length, uint64_t offset,
            uint64_t initial, time_t expiration, uint64_t *value),
           (ptr, key, key_length, offset, initial, expiration, value), .key = key,
           .key_len = key_length, .offset = offset, .initial = initial,
           .expiration = expiration, .number = value)
WRAP_WRITE(memcached_decrement_with_initial, MCR__W_DECR_INIT,
           (memcached_st * ptr, const char *key, size_t key_length, uint64_t offset,
            uint64_t initial, time_t expiration, uint64_t *value),
           (ptr, key, key_length, offset, initial, expiration, value), .key = key,
           .key_len = key_length, .offset = offset, .initial = initial,
           .expiration = expiration, .number = value)
WRAP_WRITE(memcached_increment_with_initial_by_key, MCR__W_INCR_INIT,
           (memcached_st * ptr, const char *group_key, size_t group_key_length, const char *key,
            size_t key_length, uint64_t offset, uint64_t initial, time_t expiration,
            uint64_t *value),
           (ptr, group_key, group_key_length, key, key_length, offset, initial, expiration,
            value),
           .group = group_key, .group_len = group_key_length, .key = key, .key_len = key_length,
           .offset = offset, .initial = initial, .expiration = expiration, .number = value)
WRAP_WRITE(memcached_decrement_with_initial_by_key, MCR__W_DECR_INIT,
           (memcached_st * ptr, const char *group_key, size_t group_key_length, const char *key,
            size_t key_length, uint64_t offset, uint64_t initial, time_t expiration,
            uint64_t *value),
           (ptr, group_key, group_key_length, key, key_length, offset, initial, expiration,
            value),
           .group = group_key, .group_len = group_key_length, .key = key, .key_len = key_length,
           .offset = offset, .initial = initial, .expiration = expiration, .number = value)

/* ------------------------------------------------------------ placement */

WRAP_VALUE(const memcached_instance_st *, memcached_server_by_key,
           (memcached_st * ptr, const char *key, size_t key_length, memcached_return_t *error),
           (ptr, key, key_length, error))

MCR_EXTERN uint32_t memcached_generate_hash(const memcached_st *ptr, const char *key,
                                            size_t key_length)
{
    memcached_return_t rc;
    mcr__bridge *b = enter(ptr, true, &rc);
    uint32_t v = rc == MEMCACHED_SUCCESS ? lmc()->memcached_generate_hash(ptr, key, key_length)
                                         : UINT32_MAX;
    leave(b);
    return v;
}

/* What the bridge owns: the distribution, the hashes and SORT_HOSTS. */
static const char *owned_behavior(memcached_behavior_t flag)
{
    switch (flag) {
    case MEMCACHED_BEHAVIOR_DISTRIBUTION: return "MEMCACHED_BEHAVIOR_DISTRIBUTION";
    case MEMCACHED_BEHAVIOR_HASH: return "MEMCACHED_BEHAVIOR_HASH";
    case MEMCACHED_BEHAVIOR_KETAMA: return "MEMCACHED_BEHAVIOR_KETAMA";
    case MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED: return "MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED";
    case MEMCACHED_BEHAVIOR_KETAMA_HASH: return "MEMCACHED_BEHAVIOR_KETAMA_HASH";
    case MEMCACHED_BEHAVIOR_SORT_HOSTS: return "MEMCACHED_BEHAVIOR_SORT_HOSTS";
    default: return NULL;
    }
}

MCR_EXTERN memcached_return_t memcached_behavior_set(memcached_st *ptr,
                                                     const memcached_behavior_t flag,
                                                     uint64_t data)
{
    mcr__bridge *b = mcr__bridge_of(ptr);
    const char *what = owned_behavior(flag);
    if (b != NULL && what != NULL)
        return mcr__bridge_refuse(b, what, NULL, 0);
    return lmc()->memcached_behavior_set(ptr, flag, data);
}

#define WRAP_OWNED(name, decl, args)                                                             \
    MCR_EXTERN memcached_return_t name decl                                                      \
    {                                                                                            \
        mcr__bridge *b = mcr__bridge_of(ptr);                                                    \
        if (b != NULL)                                                                           \
            return mcr__bridge_refuse(b, #name, NULL, 0);                                        \
        return lmc()->name args;                                                                 \
    }
WRAP_OWNED(memcached_behavior_set_distribution,
           (memcached_st * ptr, memcached_server_distribution_t type), (ptr, type))
WRAP_OWNED(memcached_behavior_set_key_hash, (memcached_st * ptr, memcached_hash_t type),
           (ptr, type))
WRAP_OWNED(memcached_behavior_set_distribution_hash, (memcached_st * ptr, memcached_hash_t type),
           (ptr, type))
WRAP_OWNED(memcached_set_hashkit, (memcached_st * ptr, hashkit_st *hashk), (ptr, hashk))

/* ------------------------------------------------------------ the server list */

#define WRAP_SERVER(name, decl, host, port, args)                                                \
    MCR_EXTERN memcached_return_t name decl                                                      \
    {                                                                                            \
        mcr__bridge *b = mcr__bridge_of(ptr);                                                    \
        if (b != NULL)                                                                           \
            return mcr__bridge_refuse(b, #name, host, port);                                     \
        return lmc()->name args;                                                                 \
    }
WRAP_SERVER(memcached_server_add, (memcached_st * ptr, const char *hostname, in_port_t port),
            hostname, port, (ptr, hostname, port))
WRAP_SERVER(memcached_server_add_with_weight,
            (memcached_st * ptr, const char *hostname, in_port_t port, uint32_t weight), hostname,
            port, (ptr, hostname, port, weight))
WRAP_SERVER(memcached_server_add_udp, (memcached_st * ptr, const char *hostname, in_port_t port),
            hostname, port, (ptr, hostname, port))
WRAP_SERVER(memcached_server_add_udp_with_weight,
            (memcached_st * ptr, const char *hostname, in_port_t port, uint32_t weight), hostname,
            port, (ptr, hostname, port, weight))
WRAP_SERVER(memcached_server_add_unix_socket, (memcached_st * ptr, const char *filename),
            filename, 0, (ptr, filename))
WRAP_SERVER(memcached_server_add_unix_socket_with_weight,
            (memcached_st * ptr, const char *filename, uint32_t weight), filename, 0,
            (ptr, filename, weight))

MCR_EXTERN memcached_return_t memcached_server_push(memcached_st *ptr,
                                                    const memcached_server_list_st list)
{
    mcr__bridge *b = mcr__bridge_of(ptr);
    if (b == NULL)
        return lmc()->memcached_server_push(ptr, list);
    uint32_t n = list != NULL ? memcached_server_list_count(list) : 0;
    memcached_return_t rc = mcr__bridge_refuse(b, "memcached_server_push", NULL, 0);
    for (uint32_t i = 0; i < n && rc == MEMCACHED_SUCCESS; i++)
        rc = mcr__bridge_refuse(b, "memcached_server_push", list[i].hostname, list[i].port);
    return rc;
}

MCR_EXTERN void memcached_servers_reset(memcached_st *ptr)
{
    mcr__bridge *b = mcr__bridge_of(ptr);
    if (b != NULL) {
        (void)mcr__bridge_refuse(b, "memcached_servers_reset", NULL, 0);
        return;
    }
    lmc()->memcached_servers_reset(ptr);
}

/* ------------------------------------------------------------ handles */

#ifdef MCR_PRELOAD
/* In a memcached_clone(): its memcached_create() of the copy is not
 * attached there, the clone is once it has its source's settings. */
static MCR_TLS int t_cloning;
#endif

MCR_EXTERN memcached_st *memcached_create(memcached_st *ptr)
{
    memcached_st *m = lmc()->memcached_create(ptr);
#ifdef MCR_PRELOAD
    if (m != NULL && t_cloning == 0)
        mcr__preload_created(m);
#endif
    return m;
}

MCR_EXTERN memcached_st *memcached(const char *string, size_t string_length)
{
    memcached_st *m = lmc()->memcached(string, string_length);
#ifdef MCR_PRELOAD
    if (m != NULL && mcr__bridge_of(m) == NULL) /* memcached_create() may have attached it */
        mcr__preload_created(m);
#endif
    return m;
}

MCR_EXTERN memcached_st *memcached_clone(memcached_st *clone, const memcached_st *source)
{
#ifdef MCR_PRELOAD
    t_cloning++;
#endif
    memcached_st *m = lmc()->memcached_clone(clone, source);
#ifdef MCR_PRELOAD
    t_cloning--;
#endif
    if (m == NULL)
        return NULL;
    /* The copy has the source's hashkit: the bridge's function with the
     * source's bridge as context, which is no attachment of the copy. */
    const mcr__bridge *src = mcr__bridge_of(source);
    if (src != NULL)
        mcr__bridge_clone(src, m);
#ifdef MCR_PRELOAD
    else
        mcr__preload_created(m);
#endif
    return m;
}

MCR_EXTERN void memcached_free(memcached_st *ptr)
{
    mcr__bridge *b = mcr__bridge_of(ptr);
    if (b != NULL) {
        if (t_bridge == b) { /* freed from inside one of its calls */
            t_memc = NULL;
            t_bridge = NULL;
        }
        mcr__bridge_drop(b);
    }
    lmc()->memcached_free(ptr);
}
