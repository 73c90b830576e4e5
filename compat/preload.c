/* SPDX-License-Identifier: BSD-3-Clause */
/* preload.c: libmcroute_preload.so: the process's router from MCROUTE_STATE, MCROUTE_SNAPSHOT or MCROUTE_SERVERS (with MCROUTE_MODE, MCROUTE_CLIENT), and every libmemcached handle the program creates attached to it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "mcroute_snapshot.h"
#include "mcroute_state.h"
#include "preload.h"

/* Where the servers come from. */
typedef enum source { SRC_UNREAD, SRC_NONE, SRC_BAD, SRC_STATE, SRC_SNAPSHOT, SRC_SERVERS } source;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic source g_src = SRC_UNREAD; /* written under g_mu, once */
static char *g_arg;                      /* the variable's value (a copy) */
static char *g_mode, *g_client;          /* MCROUTE_MODE, MCROUTE_CLIENT (copies) */
static _Atomic(mcr_router *) g_router;   /* once made, for the process's life */
static _Atomic time_t g_tried;           /* the last attempt or file check */
static struct stat g_file;               /* MCROUTE_SNAPSHOT as last loaded */

/* What the environment says; SRC_BAD with a line on stderr when it says
 * two things at once. g_mu held. */
static source read_env(void)
{
    const char *state = getenv("MCROUTE_STATE"), *snap = getenv("MCROUTE_SNAPSHOT"),
               *servers = getenv("MCROUTE_SERVERS");
    int n = (state != NULL && *state != '\0') + (snap != NULL && *snap != '\0') +
            (servers != NULL && *servers != '\0');
    if (n == 0)
        return SRC_NONE;
    if (n > 1) {
        fprintf(stderr, "mcroute: set one of MCROUTE_STATE, MCROUTE_SNAPSHOT and "
                        "MCROUTE_SERVERS, not %d: libmemcached's handles get no servers\n",
                n);
        return SRC_BAD;
    }
    /* A copy: a process may rewrite its environment's memory (PHP-FPM's
     * master puts the process title there) or clear it in its children. */
    source src = state != NULL && *state != '\0' ? SRC_STATE
                 : snap != NULL && *snap != '\0' ? SRC_SNAPSHOT
                                                  : SRC_SERVERS;
    const char *mode = getenv("MCROUTE_MODE"), *client = getenv("MCROUTE_CLIENT");
    g_arg = strdup(src == SRC_STATE ? state : src == SRC_SNAPSHOT ? snap : servers);
    g_mode = mode != NULL && *mode != '\0' ? strdup(mode) : NULL;
    g_client = client != NULL && *client != '\0' ? strdup(client) : NULL;
    if (g_arg == NULL || (mode != NULL && *mode != '\0' && g_mode == NULL) ||
        (client != NULL && *client != '\0' && g_client == NULL)) {
        fprintf(stderr, "mcroute: out of memory reading the environment\n");
        return SRC_BAD;
    }
    return src;
}

/* MCROUTE_SERVERS with MCROUTE_MODE or MCROUTE_CLIENT: a snapshot of
 * epoch 1, or NULL with the reason in err. */
static mcr_snapshot *servers_snapshot(mcr_error *err)
{
    const char *mode = g_mode, *client = g_client;
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    mcr_mode m;
    int rc = cfg != NULL ? MCR_OK : MCR_ERR_NOMEM;
    if (rc == MCR_OK && mode != NULL && client != NULL) {
        snprintf(err->message, sizeof(err->message),
                 "MCROUTE_MODE and MCROUTE_CLIENT both set: give one");
        rc = MCR_ERR_INVALID;
    } else if (rc == MCR_OK && mode != NULL) {
        if (mcr_mode_from_name(mode, &m) != MCR_OK) {
            snprintf(err->message, sizeof(err->message), "MCROUTE_MODE: unknown mode \"%.60s\"",
                     mode);
            rc = MCR_ERR_UNKNOWN;
        } else {
            rc = mcr_config_set_mode(cfg, m);
        }
    } else if (rc == MCR_OK && client != NULL) {
        rc = mcr_config_set_client(cfg, client, err);
    }
    if (rc == MCR_OK)
        rc = mcr_config_add_servers(cfg, g_arg, err);
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, 1, &s, err);
    if (rc == MCR_ERR_NOMEM)
        snprintf(err->message, sizeof(err->message), "out of memory");
    mcr_config_free(cfg);
    return rc == MCR_OK ? s : NULL;
}

/* The router, made now, or NULL with the reason in err. g_mu held. */
static mcr_router *make_router(mcr_error *err)
{
    mcr_router *r = NULL;
    mcr_snapshot *s = NULL;
    switch (g_src) {
    case SRC_STATE:
        if (mcr_router_new_from_state(g_arg, 0, &r, err) != MCR_OK)
            return NULL;
        return r;
    case SRC_SNAPSHOT:
        if (stat(g_arg, &g_file) != 0 || mcr_snapshot_load(g_arg, NULL, 0, &s, err) != MCR_OK) {
            if (s == NULL && err->message[0] == '\0')
                snprintf(err->message, sizeof(err->message), "%.200s: cannot be read", g_arg);
            return NULL;
        }
        break;
    case SRC_SERVERS:
        if ((s = servers_snapshot(err)) == NULL)
            return NULL;
        break;
    default:
        return NULL;
    }
    if (mcr_router_new(s, &r, err) != MCR_OK)
        r = NULL;
    mcr_snapshot_unref(s);
    return r;
}

/* MCROUTE_SNAPSHOT changed on disk: its new snapshot published (a later
 * epoch; an older or equal one, or a bad file, is refused and said). */
static void reload(mcr_router *r)
{
    struct stat st;
    if (stat(g_arg, &st) != 0 ||
        (st.st_mtim.tv_sec == g_file.st_mtim.tv_sec &&
         st.st_mtim.tv_nsec == g_file.st_mtim.tv_nsec && st.st_ino == g_file.st_ino &&
         st.st_size == g_file.st_size))
        return;
    g_file = st;
    mcr_snapshot *cur = mcr_router_published(r), *s = NULL;
    mcr_error err = {0};
    if (mcr_snapshot_load(g_arg, cur, 0, &s, &err) != MCR_OK ||
        mcr_router_publish(r, s, &err) != MCR_OK)
        fprintf(stderr, "mcroute: MCROUTE_SNAPSHOT %s not taken: %s\n", g_arg, err.message);
    mcr_snapshot_unref(s);
    mcr_snapshot_unref(cur);
}

/* The router made, or a snapshot file looked at, at most once a second;
 * apart from the common case of mcr__preload_router() (a small frame for
 * the call every request makes). */
static __attribute__((noinline)) mcr_router *preload_router_slow(mcr_router *r)
{
    time_t now = time(NULL);
    if (r != NULL && atomic_load_explicit(&g_tried, memory_order_relaxed) == now)
        return r;
    if (r == NULL && atomic_load_explicit(&g_tried, memory_order_relaxed) == now)
        return NULL; /* tried this second */
    pthread_mutex_lock(&g_mu);
    atomic_store_explicit(&g_tried, now, memory_order_relaxed);
    r = atomic_load_explicit(&g_router, memory_order_relaxed);
    if (r != NULL) {
        reload(r);
    } else if (g_src == SRC_STATE || g_src == SRC_SNAPSHOT || g_src == SRC_SERVERS) {
        mcr_error err = {0};
        r = make_router(&err);
        if (r != NULL)
            atomic_store_explicit(&g_router, r, memory_order_release);
        else
            fprintf(stderr, "mcroute: no servers for libmemcached's handles yet (tried again "
                            "in a second): %s\n",
                    err.message);
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

mcr_router *mcr__preload_router(void)
{
    mcr_router *r = atomic_load_explicit(&g_router, memory_order_acquire);
    if (r != NULL && g_src != SRC_SNAPSHOT)
        return r; /* the common case: no clock read */
    return preload_router_slow(r);
}

void mcr__preload_created(memcached_st *memc)
{
    pthread_mutex_lock(&g_mu);
    if (g_src == SRC_UNREAD)
        g_src = read_env();
    source src = g_src;
    pthread_mutex_unlock(&g_mu);
    if (src == SRC_NONE)
        return; /* no variable: nothing changes */
    /* Attached even while there is no router yet (or the variables are
     * bad): its calls fail then, instead of going to the program's own
     * servers, which the rest of the fleet does not use. */
    mcr__bridge_attach_preload(memc);
}

/* PHP loads its extensions with RTLD_DEEPBIND, which binds php-memcached's
 * calls to libmemcached directly, past the bridge's entry points: with the
 * servers given (a MCROUTE_* variable), the libraries a program opens are
 * opened without it, in the global scope's order, where the bridge comes
 * first. Without the variables nothing changes. */
static void *(*g_real_dlopen)(const char *, int);
static pthread_once_t g_dlopen_once = PTHREAD_ONCE_INIT;

static void find_dlopen(void)
{
    union {
        void *p;
        void *(*fn)(const char *, int);
    } u = {dlsym(RTLD_NEXT, "dlopen")};
    g_real_dlopen = u.fn;
}

MCR_EXTERN void *dlopen(const char *file, int mode)
{
    pthread_once(&g_dlopen_once, find_dlopen);
    if ((mode & RTLD_DEEPBIND) != 0) {
        pthread_mutex_lock(&g_mu);
        if (g_src == SRC_UNREAD)
            g_src = read_env();
        bool on = g_src != SRC_NONE;
        pthread_mutex_unlock(&g_mu);
        if (on)
            mode &= ~RTLD_DEEPBIND;
    }
    return g_real_dlopen(file, mode);
}
