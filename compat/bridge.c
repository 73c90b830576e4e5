/* SPDX-License-Identifier: BSD-3-Clause */
/* bridge.c: a libmemcached handle attached to a router: libmemcached's own functions found, the handle's distribution, hash and server list taken over, the list made current when a call starts, and what was taken given back at detach. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bridge.h"
#ifdef MCR_PRELOAD
#include "preload.h"
#endif

/* The code, and a message in err (may be NULL). */
static int fail(mcr_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(mcr_error *err, int code, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        err->sys_errno = 0;
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ------------------------------------------------------------ libmemcached */

static mcr__lmc g_lmc;
static const char *g_why;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* libmemcached's object is the one that holds an entry point the bridge
 * does not define; its functions are looked up there, so that this
 * library's own entry points (first in the search order) are passed by. */
static void find_lmc(void)
{
    Dl_info info;
    union {
        const char *(*fn)(void);
        void *p;
    } probe = {memcached_lib_version};
    if (dladdr(probe.p, &info) == 0 || info.dli_fname == NULL ||
        strstr(info.dli_fname, "libmemcached") == NULL) {
        g_why = "libmemcached's library cannot be found among the loaded objects";
        return;
    }
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD); /* kept: never closed */
    if (h == NULL) {
        g_why = "libmemcached's library cannot be opened again";
        return;
    }
    union {
        void *p;
        void (*fn)(void);
    } sym;
#define MCR__LMC_FIND(name, ret, params)                                                         \
    if ((sym.p = dlsym(h, #name)) == NULL) {                                                     \
        g_why = "libmemcached has no " #name;                                                    \
        return;                                                                                  \
    }                                                                                            \
    g_lmc.name = (ret(*) params)sym.fn;
    MCR__LMC_FUNCTIONS(MCR__LMC_FIND)
#undef MCR__LMC_FIND
}

/* The table once found: every call of every entry point asks for it, so
 * the common case is one load, without pthread_once's call. */
static _Atomic(const mcr__lmc *) g_ready;

const mcr__lmc *mcr__lmc_get(const char **why)
{
    const mcr__lmc *l = atomic_load_explicit(&g_ready, memory_order_acquire);
    if (l != NULL)
        return l;
    pthread_once(&g_once, find_lmc);
    if (g_why != NULL) {
        if (why != NULL)
            *why = g_why;
        return NULL;
    }
    atomic_store_explicit(&g_ready, &g_lmc, memory_order_release);
    return &g_lmc;
}

/* ------------------------------------------------------------ the hash */

/* The position of the key's owner: its ring index in the snapshot the list
 * was made from (the list is the ring's servers in order). libmemcached
 * takes it modulo the server count, which leaves it as it is. */
static uint32_t bridge_hash(const char *key, size_t len, void *context)
{
    mcr__bridge *b = context;
    if (b->route >= 0)
        return (uint32_t)b->route; /* a call sent to one owner */
    if (b->depth == 0 && !b->bypass_told) {
        /* libmemcached hashes a key of a call the bridge did not see begin */
        b->bypass_told = true;
        fprintf(stderr, "mcroute: a libmemcached call reached the bridge without passing its "
                        "entry points (the program binds libmemcached directly: RTLD_DEEPBIND, "
                        "-Bsymbolic, or libmemcached before the bridge in the search order): "
                        "its server list follows the router only at the calls the bridge sees\n");
    }
    return b->ring != NULL ? mcr_ring_locate(b->ring, key, len) : 0;
}

mcr__bridge *mcr__bridge_of(const memcached_st *memc)
{
    const mcr__lmc *l = mcr__lmc_get(NULL);
    const hashkit_st *hk = l != NULL && memc != NULL ? l->memcached_get_hashkit(memc) : NULL;
    if (hk == NULL || hk->base_hash.function != bridge_hash)
        return NULL;
    mcr__bridge *b = hk->base_hash.context;
    /* a copy of another handle's hashkit (a clone made without the bridge
     * seeing it) is not an attachment of this one */
    return b != NULL && b->memc == memc ? b : NULL;
}

/* ------------------------------------------------------------ the list */

static bool same_servers(const mcr_ring *a, const mcr_ring *b)
{
    size_t n = mcr_ring_server_count(a);
    if (n != mcr_ring_server_count(b))
        return false;
    for (size_t i = 0; i < n; i++)
        if (mcr_ring_server_port(a, i) != mcr_ring_server_port(b, i) ||
            strcmp(mcr_ring_server_host(a, i), mcr_ring_server_host(b, i)) != 0)
            return false;
    return true;
}

/* Server i of ring r's index in ring c, or -1. */
static int64_t index_in(const mcr_ring *c, const mcr_ring *r, size_t i)
{
    size_t n = mcr_ring_server_count(c);
    for (size_t j = 0; j < n; j++)
        if (mcr_ring_server_port(c, j) == mcr_ring_server_port(r, i) &&
            strcmp(mcr_ring_server_host(c, j), mcr_ring_server_host(r, i)) == 0)
            return (int64_t)j;
    return -1;
}

/* The handle's list made the servers of ring r, then those of ring o (may
 * be NULL) that r has not, with pos (o's ring index -> list position). On
 * failure the list is empty and the bridge holds no snapshot, so that the
 * next call starts again. */
static memcached_return_t set_list(mcr__bridge *b, const mcr_ring *r, const mcr_ring *o,
                                   const uint32_t *pos)
{
    const mcr__lmc *l = &g_lmc;
    l->memcached_servers_reset(b->memc);
    size_t n = mcr_ring_server_count(r), no = o != NULL ? mcr_ring_server_count(o) : 0;
    for (size_t i = 0; i < n + no; i++) {
        const mcr_ring *x = i < n ? r : o;
        size_t k = i < n ? i : i - n;
        if (i >= n && pos[k] < n)
            continue; /* the current snapshot has it */
        memcached_return_t rc = l->memcached_server_add_with_weight(
            b->memc, mcr_ring_server_host(x, k), (in_port_t)mcr_ring_server_port(x, k),
            mcr_ring_server_weight(x, k));
        if (rc != MEMCACHED_SUCCESS) {
            fprintf(stderr, "mcroute: libmemcached refused server %s (%s): the handle has no "
                            "servers until its next call\n",
                    mcr_ring_server_name(x, k), memcached_strerror(b->memc, rc));
            l->memcached_servers_reset(b->memc);
            mcr_snapshot_unref(b->snap);
            b->snap = NULL;
            b->ring = NULL;
            b->generation = 0;
            return rc;
        }
    }
    return MEMCACHED_SUCCESS;
}

/* The other ring of a migration in phase p (NULL: none in force). */
static const mcr_ring *other_of(const mcr_router_migration *m, mcr_migration_phase p)
{
    if (p == MCR_MIGRATION_COPYING)
        return mcr_snapshot_ring(m->to);
    if (p == MCR_MIGRATION_SWITCHED || p == MCR_MIGRATION_GRACE || p == MCR_MIGRATION_CLOSING)
        return mcr_snapshot_ring(m->from);
    return NULL;
}

/* The list made for the router's snapshot of generation `g` (or a later
 * one), with its migration: apart from mcr__bridge_sync(), whose common
 * case (nothing changed) then needs no large frame. */
static __attribute__((noinline)) memcached_return_t sync_list(mcr__bridge *b, uint64_t g)
{
    mcr_snapshot *s = mcr_router_current(b->router); /* g's snapshot or a later one */
    if (s == NULL) {
        time_t now = time(NULL);
        if (now != b->warned_at) {
            b->warned_at = now;
            fprintf(stderr, "mcroute: the router has no snapshot yet: no servers\n");
        }
        return MEMCACHED_NO_SERVERS;
    }
    const mcr_ring *r = mcr_snapshot_ring(s);
    /* The migration, if one is in force for this snapshot. */
    mcr_router_migration m;
    memset(&m, 0, sizeof(m));
    mcr_migration_phase p = MCR_MIGRATION_NONE;
    if (mcr_router_get_migration(b->router, &m) == MCR_OK)
        p = mcr_migration_phase_at(&m, mcr_snapshot_epoch(s));
    const mcr_ring *o = other_of(&m, p);
    uint32_t *pos = NULL;
    if (o != NULL) {
        size_t n = mcr_ring_server_count(r), no = mcr_ring_server_count(o), extra = 0;
        pos = malloc((no > 0 ? no : 1) * sizeof(*pos));
        if (pos == NULL) {
            mcr_router_migration_clear(&m);
            mcr_snapshot_unref(s);
            return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        }
        for (size_t i = 0; i < no; i++) {
            int64_t j = index_in(r, o, i);
            pos[i] = j >= 0 ? (uint32_t)j : (uint32_t)(n + extra++);
        }
    }
    bool same_other = (o == NULL && b->other == NULL) ||
                      (o != NULL && b->other != NULL && same_servers(b->other, o));
    if (b->snap == NULL || !same_servers(b->ring, r) || !same_other) {
        memcached_return_t rc = set_list(b, r, o, pos);
        if (rc != MEMCACHED_SUCCESS) {
            free(pos);
            mcr_router_migration_clear(&m);
            mcr_snapshot_unref(s);
            return rc;
        }
    }
    mcr_snapshot_unref(b->snap);
    mcr_router_migration_clear(&b->mig);
    free(b->other_pos);
    b->snap = s;
    b->ring = r;
    b->mig = m; /* its references keep `o` */
    b->phase = o != NULL ? p : MCR_MIGRATION_NONE;
    b->other = o;
    b->other_pos = pos;
    b->generation = g;
    return MEMCACHED_SUCCESS;
}

memcached_return_t mcr__bridge_sync(mcr__bridge *b)
{
#ifdef MCR_PRELOAD
    mcr_router *pr = mcr__preload_router(); /* made, or its snapshot file looked at */
    if (b->router == NULL)
        b->router = pr;
#endif
    if (b->router == NULL)
        return MEMCACHED_NO_SERVERS; /* the preload said why */
    uint64_t g = mcr_router_generation(b->router);
    if (b->snap != NULL && g == b->generation)
        return MEMCACHED_SUCCESS;
    return sync_list(b, g);
}

memcached_return_t mcr__bridge_refuse(mcr__bridge *b, const char *what, const char *host,
                                      unsigned port)
{
    if ((b->flags & MCR_MEMCACHED_ACCEPT) == 0)
        return MEMCACHED_NOT_SUPPORTED;
    if (host != NULL && !b->told) {
        bool known = false;
        size_t n = b->ring != NULL ? mcr_ring_server_count(b->ring) : 0;
        for (size_t i = 0; i < n && !known; i++)
            known = (unsigned)mcr_ring_server_port(b->ring, i) == port &&
                    strcmp(mcr_ring_server_host(b->ring, i), host) == 0;
        if (!known) {
            b->told = true;
            fprintf(stderr,
                    "mcroute: %s(%s:%u) not applied: this handle's servers are mcroute's "
                    "(%zu now)\n",
                    what, host, port, n);
        }
    }
    return MEMCACHED_SUCCESS;
}

/* ------------------------------------------------------------ attach */

/* Take memc over for router (NULL: the preload's, once it exists);
 * `saved`: what to give back at detach, or NULL to save the handle's own
 * settings now. */
static int attach(memcached_st *memc, mcr_router *router, unsigned flags,
                  const mcr__bridge *saved, mcr_error *err)
{
    const mcr__lmc *l = &g_lmc;
    mcr__bridge *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return fail(err, MCR_ERR_NOMEM, "out of memory attaching a memcached_st");
    b->memc = memc;
    b->router = router;
    b->flags = flags;
    b->route = -1;
    if (saved != NULL) {
        hashkit_clone(&b->saved_hashkit, &saved->saved_hashkit);
        b->saved_distribution = saved->saved_distribution;
        b->saved_sort_hosts = saved->saved_sort_hosts;
    } else {
        hashkit_clone(&b->saved_hashkit, l->memcached_get_hashkit(memc));
        b->saved_distribution = l->memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION);
        b->saved_sort_hosts = l->memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS);
    }
    /* Before the hash is the bridge's, the handle is not attached yet:
     * what libmemcached calls of its own entry points passes through. */
    l->memcached_servers_reset(memc);
    l->memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS, 0);
    l->memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                              MEMCACHED_DISTRIBUTION_MODULA);
    /* The handle's hashkit with the bridge's function: an encoding key
     * (memcached_set_encoding_key()) stays. */
    hashkit_st hk;
    if (hashkit_clone(&hk, l->memcached_get_hashkit(memc)) == NULL ||
        hashkit_set_custom_function(&hk, bridge_hash, b) != HASHKIT_SUCCESS ||
        l->memcached_set_hashkit(memc, &hk) != MEMCACHED_SUCCESS) {
        hashkit_free(&hk);
        l->memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION, b->saved_distribution);
        l->memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS, b->saved_sort_hosts);
        hashkit_free(&b->saved_hashkit);
        free(b);
        return fail(err, MCR_ERR_NOMEM, "out of memory setting the handle's hash");
    }
    hashkit_free(&hk);
    (void)mcr__bridge_sync(b); /* a router without a snapshot: calls fail until it has one */
    return MCR_OK;
}

int mcr_memcached_attach(memcached_st *memc, mcr_router *router, unsigned flags,
                         mcr_error *err)
{
    const char *why = NULL;
    if (memc == NULL || router == NULL)
        return fail(err, MCR_ERR_INVALID, "mcr_memcached_attach: NULL argument");
    if ((flags & ~MCR_MEMCACHED_ACCEPT) != 0)
        return fail(err, MCR_ERR_INVALID, "mcr_memcached_attach: unknown flags 0x%x",
                              flags & ~MCR_MEMCACHED_ACCEPT);
    const mcr__lmc *l = mcr__lmc_get(&why);
    if (l == NULL)
        return fail(err, MCR_ERR_UNSUPPORTED, "mcr_memcached_attach: %s", why);
    /* The program's calls must reach this library's entry points. */
    union {
        void *p;
        char *(*fn)(memcached_st *, const char *, size_t, size_t *, uint32_t *,
                    memcached_return_t *);
    } global;
    global.p = dlsym(RTLD_DEFAULT, "memcached_get");
    if (global.p != NULL && global.fn == l->memcached_get)
        return fail(err, MCR_ERR_UNSUPPORTED,
                              "mcr_memcached_attach: libmemcached comes before "
                              "libmcroute_libmemcached in the program's search order, so the "
                              "bridge would not see its calls: link -lmcroute_libmemcached "
                              "before -lmemcached, or load it with LD_PRELOAD");
    if (mcr__bridge_of(memc) != NULL)
        return fail(err, MCR_ERR_INVALID,
                              "mcr_memcached_attach: the handle is attached already");
    return attach(memc, router, flags, NULL, err);
}

void mcr__bridge_attach_preload(memcached_st *memc)
{
    mcr_error err;
    if (mcr__lmc_get(NULL) == NULL || mcr__bridge_of(memc) != NULL)
        return;
    if (attach(memc, NULL, MCR_MEMCACHED_ACCEPT, NULL, &err) != MCR_OK)
        fprintf(stderr, "mcroute: a libmemcached handle is not attached: %s\n", err.message);
}

void mcr__bridge_clone(const mcr__bridge *src, memcached_st *dst)
{
    mcr_error err;
    if (attach(dst, src->router, src->flags, src, &err) == MCR_OK)
        return;
    /* Not attached: the copy gets the settings the source had before its
     * attachment, not a hash whose context is the source's bridge. */
    const mcr__lmc *l = &g_lmc;
    l->memcached_set_hashkit(dst, (hashkit_st *)&src->saved_hashkit);
    l->memcached_behavior_set(dst, MEMCACHED_BEHAVIOR_SORT_HOSTS, src->saved_sort_hosts);
    l->memcached_behavior_set(dst, MEMCACHED_BEHAVIOR_DISTRIBUTION, src->saved_distribution);
    fprintf(stderr, "mcroute: a clone of an attached handle is not attached: %s\n",
            err.message);
}

void mcr__bridge_drop(mcr__bridge *b)
{
    mcr__bridge_mget_end(b);
    mcr_router_migration_clear(&b->mig);
    free(b->other_pos);
    mcr_snapshot_unref(b->snap);
    hashkit_free(&b->saved_hashkit);
    free(b);
}

int mcr_memcached_detach(memcached_st *memc)
{
    mcr__bridge *b = mcr__bridge_of(memc);
    if (b == NULL)
        return MCR_ERR_INVALID;
    const mcr__lmc *l = &g_lmc;
    /* The hash first: from then on the handle is not attached, and what
     * libmemcached calls of its entry points passes through. */
    l->memcached_set_hashkit(memc, &b->saved_hashkit);
    l->memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS, b->saved_sort_hosts);
    l->memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION, b->saved_distribution);
    mcr__bridge_drop(b);
    return MCR_OK;
}

mcr_router *mcr_memcached_router(const memcached_st *memc)
{
    const mcr__bridge *b = mcr__bridge_of(memc);
    return b != NULL ? b->router : NULL;
}
