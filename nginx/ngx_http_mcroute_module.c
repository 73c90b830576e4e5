/* SPDX-License-Identifier: BSD-3-Clause */
/* ngx_http_mcroute_module.c: an nginx upstream method (`mcroute` in an upstream block) that sends each request to the server an mcroute snapshot places its key on: the servers from a host's state, a snapshot file or a list, followed as they change; during a resize's switched phase a miss at the new owner may be retried at the old one. */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <netdb.h>

#include "mcroute.h"
#include "mcroute_args.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "mcroute_state.h"

/* How often a worker looks at a snapshot file for a change, seconds. */
#define MCROUTE_FILE_CHECK 1

typedef enum { SRC_SERVERS, SRC_SNAPSHOT, SRC_STATE } mcroute_source;

/* The addresses of one snapshot's servers, resolved (a worker's). */
typedef struct {
    mcr_snapshot *snap; /* a reference */
    ngx_uint_t n;
    ngx_addr_t *addrs; /* malloc'd, each sockaddr and name malloc'd */
} mcroute_table_t;

/* An upstream block's configuration, and in each worker its router. */
typedef struct {
    mcroute_source src;
    ngx_str_t arg;                 /* the list, or the path */
    ngx_str_t mode, client;        /* with servers= */
    ngx_http_complex_value_t *key; /* default $memcached_key */
    /* the worker's (made at its first request through the upstream) */
    mcr_router *router;
    uint64_t generation;           /* of the tables below */
    mcroute_table_t cur;           /* the current snapshot's servers */
    mcroute_table_t from;          /* a switched migration's old servers, or empty */
    struct stat file;              /* SRC_SNAPSHOT: the file as last loaded */
    time_t checked;                /* and when it was looked at */
    ngx_uint_t broken;             /* the router could not be made (logged) */
    ngx_uint_t servers_before;     /* `server` lines before the directive */
} mcroute_conf_t;

/* A request's two candidates: the owner, and the old owner to retry a
 * miss at (during a switched migration, when the key moved). */
typedef struct {
    ngx_addr_t *owner, *previous;
    ngx_uint_t tried;
} mcroute_peer_t;

static void *mcroute_create_conf(ngx_conf_t *cf);
static char *mcroute_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t mcroute_init_upstream(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us);
static ngx_int_t mcroute_init_peer(ngx_http_request_t *r, ngx_http_upstream_srv_conf_t *us);
static void mcroute_exit_process(ngx_cycle_t *cycle);

static ngx_command_t mcroute_commands[] = {
    {ngx_string("mcroute"), NGX_HTTP_UPS_CONF | NGX_CONF_1MORE, mcroute_directive,
     NGX_HTTP_SRV_CONF_OFFSET, 0, NULL},
    ngx_null_command};

static ngx_http_module_t mcroute_module_ctx = {
    NULL, NULL,                /* preconfiguration, postconfiguration */
    NULL, NULL,                /* main conf */
    mcroute_create_conf, NULL, /* server conf (the upstream block's) */
    NULL, NULL                 /* location conf */
};

ngx_module_t ngx_http_mcroute_module = {
    NGX_MODULE_V1, &mcroute_module_ctx, mcroute_commands, NGX_HTTP_MODULE,
    NULL, NULL, NULL, NULL, NULL, mcroute_exit_process, NULL, NGX_MODULE_V1_PADDING};

/* ------------------------------------------------------------ configuration */

static void *mcroute_create_conf(ngx_conf_t *cf)
{
    return ngx_pcalloc(cf->pool, sizeof(mcroute_conf_t));
}

/* A NUL-terminated copy of s from the configuration's pool. */
static char *cstr(ngx_pool_t *pool, ngx_str_t *s)
{
    char *p = ngx_pnalloc(pool, s->len + 1);
    if (p != NULL) {
        ngx_memcpy(p, s->data, s->len);
        p[s->len] = '\0';
    }
    return p;
}

/* The snapshot of a server list with mode or client, as `mcroute locate
 * -s` makes it; NULL with err filled. */
static mcr_snapshot *list_snapshot(const char *list, const char *mode, const char *client,
                                   mcr_error *err)
{
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    mcr_mode m = MCR_MODE_KETAMA;
    int rc = cfg != NULL ? MCR_OK : MCR_ERR_NOMEM;
    if (rc == MCR_OK && mode != NULL && mcr_mode_from_name(mode, &m) != MCR_OK) {
        ngx_snprintf((u_char *)err->message, sizeof(err->message), "unknown mode \"%s\"%Z",
                     mode);
        rc = MCR_ERR_UNKNOWN;
    }
    if (rc == MCR_OK)
        rc = mcr_config_set_mode(cfg, m);
    if (rc == MCR_OK && client != NULL)
        rc = mcr_config_set_client(cfg, client, err);
    if (rc == MCR_OK)
        rc = mcr_config_add_servers(cfg, list, err);
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, 1, &s, err);
    if (rc == MCR_ERR_NOMEM)
        ngx_snprintf((u_char *)err->message, sizeof(err->message), "out of memory%Z");
    mcr_config_free(cfg);
    return rc == MCR_OK ? s : NULL;
}

/* The router of the configuration's source, made now; NULL with err. */
static mcr_router *make_router(mcroute_conf_t *c, ngx_pool_t *pool, mcr_error *err)
{
    char *arg = cstr(pool, &c->arg);
    char *mode = c->mode.len ? cstr(pool, &c->mode) : NULL;
    char *client = c->client.len ? cstr(pool, &c->client) : NULL;
    mcr_snapshot *s = NULL;
    mcr_router *r = NULL;
    if (arg == NULL || (c->mode.len && mode == NULL) || (c->client.len && client == NULL)) {
        ngx_snprintf((u_char *)err->message, sizeof(err->message), "out of memory%Z");
        return NULL;
    }
    switch (c->src) {
    case SRC_STATE:
        return mcr_router_new_from_state(arg, 0, &r, err) == MCR_OK ? r : NULL;
    case SRC_SNAPSHOT:
        if (stat(arg, &c->file) != 0) {
            ngx_snprintf((u_char *)err->message, sizeof(err->message), "%s: %s%Z", arg,
                         strerror(errno));
            return NULL;
        }
        c->checked = ngx_time();
        if (mcr_snapshot_load(arg, NULL, 0, &s, err) != MCR_OK)
            return NULL;
        break;
    case SRC_SERVERS:
        if ((s = list_snapshot(arg, mode, client, err)) == NULL)
            return NULL;
        break;
    }
    if (mcr_router_new(s, &r, err) != MCR_OK)
        r = NULL;
    mcr_snapshot_unref(s);
    return r;
}

/* mcroute snapshot=PATH | state=PATH | servers=LIST [mode=M | client=NAME]
 *         [key=$VARIABLE...] */
static char *mcroute_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    mcroute_conf_t *c = conf;
    ngx_str_t *value = cf->args->elts, key = ngx_string("$memcached_key");
    (void)cmd;
    if (c->arg.data != NULL)
        return "is duplicate";
    /* the parameters checked by mcroute_args.c, which the fuzz target
     * test/fuzz/fuzz_ngx_args.c runs too */
    ngx_uint_t n = cf->args->nelts - 1;
    mcr_ngx_str *params = ngx_palloc(cf->pool, (n ? n : 1) * sizeof(mcr_ngx_str));
    if (params == NULL)
        return NGX_CONF_ERROR;
    for (ngx_uint_t i = 0; i < n; i++) {
        params[i].p = (const char *)value[i + 1].data;
        params[i].len = value[i + 1].len;
    }
    mcr_ngx_args a;
    char why[512];
    if (mcr_ngx_parse_args(params, n, &a, why, sizeof(why)) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "mcroute: %s", why);
        return NGX_CONF_ERROR;
    }
    c->src = a.src == MCR_NGX_SNAPSHOT ? SRC_SNAPSHOT
             : a.src == MCR_NGX_STATE  ? SRC_STATE
                                       : SRC_SERVERS;
#define NGX_STR(x) ((ngx_str_t){(x).len, (u_char *)(x).p})
    c->arg = NGX_STR(a.arg);
    c->mode = NGX_STR(a.mode);
    c->client = NGX_STR(a.client);
    if (a.key.p != NULL)
        key = NGX_STR(a.key);
#undef NGX_STR
    ngx_http_compile_complex_value_t ccv;
    ngx_memzero(&ccv, sizeof(ccv));
    c->key = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (c->key == NULL)
        return NGX_CONF_ERROR;
    ccv.cf = cf;
    ccv.value = &key;
    ccv.complex_value = c->key;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK)
        return NGX_CONF_ERROR;
    /* nginx -t: the source must give servers now (made here and freed:
     * each worker makes its own router at its first request) */
    mcr_error err;
    ngx_memzero(&err, sizeof(err));
    mcr_router *r = make_router(c, cf->pool, &err);
    if (r == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "mcroute: %s", err.message);
        return NGX_CONF_ERROR;
    }
    mcr_router_free(r);
    ngx_http_upstream_srv_conf_t *uscf =
        ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);
    if (uscf->peer.init_upstream)
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0, "load balancing method redefined");
    uscf->peer.init_upstream = mcroute_init_upstream;
    uscf->flags = NGX_HTTP_UPSTREAM_CREATE;
    /* nginx refuses an upstream block without a server: one placeholder,
     * never connected to (the peers are the snapshot's) */
    c->servers_before = uscf->servers->nelts;
    ngx_http_upstream_server_t *ph = ngx_array_push(uscf->servers);
    if (ph == NULL)
        return NGX_CONF_ERROR;
    ngx_memzero(ph, sizeof(*ph));
    ngx_str_set(&ph->name, "mcroute");
    ph->weight = 1;
    return NGX_CONF_OK;
}

static ngx_int_t mcroute_init_upstream(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    mcroute_conf_t *c = ngx_http_conf_upstream_srv_conf(us, ngx_http_mcroute_module);
    if (c->servers_before > 0 || us->servers->nelts != 1) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "mcroute: upstream \"%V\" has \"server\" lines: its servers are "
                      "mcroute's source's, give them there",
                      &us->host);
        return NGX_ERROR;
    }
    us->peer.init = mcroute_init_peer;
    return NGX_OK;
}

/* ------------------------------------------------------------ a worker's tables */

static void table_clear(mcroute_table_t *t)
{
    for (ngx_uint_t i = 0; t->addrs != NULL && i < t->n; i++) {
        free(t->addrs[i].sockaddr);
        free(t->addrs[i].name.data);
    }
    free(t->addrs);
    mcr_snapshot_unref(t->snap);
    ngx_memzero(t, sizeof(*t));
}

/* The addresses of s's servers (blocking name resolution for a server
 * given by name: rare, at a membership change). */
static ngx_int_t table_build(mcroute_table_t *t, mcr_snapshot *s, ngx_log_t *log)
{
    size_t n = mcr_snapshot_server_count(s);
    t->addrs = calloc(n ? n : 1, sizeof(ngx_addr_t));
    if (t->addrs == NULL)
        return NGX_ERROR;
    t->n = n;
    t->snap = mcr_snapshot_ref(s);
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        char port[16], name[NI_MAXHOST + 16];
        struct addrinfo hints, *ai = NULL;
        if (mcr_snapshot_server(s, i, &d) != MCR_OK)
            return NGX_ERROR;
        ngx_memzero(&hints, sizeof(hints));
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        ngx_snprintf((u_char *)port, sizeof(port), "%d%Z", d.port);
        int rc = getaddrinfo(d.host, port, &hints, &ai);
        if (rc != 0) {
            ngx_log_error(NGX_LOG_ERR, log, 0, "mcroute: server %s (%s): %s", d.id, d.host,
                          gai_strerror(rc));
            continue; /* its keys fail with 502; the others are served */
        }
        u_char *end = ngx_snprintf((u_char *)name, sizeof(name),
                                   ngx_strchr(d.host, ':') ? "[%s]:%d" : "%s:%d", d.host,
                                   d.port);
        t->addrs[i].sockaddr = malloc(ai->ai_addrlen);
        t->addrs[i].name.data = malloc(end - (u_char *)name);
        if (t->addrs[i].sockaddr == NULL || t->addrs[i].name.data == NULL) {
            freeaddrinfo(ai);
            return NGX_ERROR;
        }
        ngx_memcpy(t->addrs[i].sockaddr, ai->ai_addr, ai->ai_addrlen);
        t->addrs[i].socklen = ai->ai_addrlen;
        t->addrs[i].name.len = end - (u_char *)name;
        ngx_memcpy(t->addrs[i].name.data, name, t->addrs[i].name.len);
        freeaddrinfo(ai);
    }
    return NGX_OK;
}

/* A snapshot file that changed: loaded and published (an older epoch or
 * a bad file refused, logged). At most once a second, no system call
 * otherwise. */
static void follow_file(mcroute_conf_t *c, ngx_http_request_t *r)
{
    if (ngx_time() - c->checked < MCROUTE_FILE_CHECK)
        return;
    c->checked = ngx_time();
    char *path = cstr(r->pool, &c->arg);
    struct stat st;
    if (path == NULL || stat(path, &st) != 0 ||
        (st.st_mtim.tv_sec == c->file.st_mtim.tv_sec &&
         st.st_mtim.tv_nsec == c->file.st_mtim.tv_nsec && st.st_ino == c->file.st_ino &&
         st.st_size == c->file.st_size))
        return;
    c->file = st;
    mcr_snapshot *cur = mcr_router_published(c->router), *s = NULL;
    mcr_error err;
    ngx_memzero(&err, sizeof(err));
    if (mcr_snapshot_load(path, cur, 0, &s, &err) != MCR_OK ||
        mcr_router_publish(c->router, s, &err) != MCR_OK)
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "mcroute: %s not taken: %s", path,
                      err.message);
    mcr_snapshot_unref(s);
    mcr_snapshot_unref(cur);
}

/* The worker's router made (once), followed, and its tables current: 0,
 * or -1 when there is nothing to route by (logged). */
static ngx_int_t sync_tables(mcroute_conf_t *c, ngx_http_request_t *r)
{
    ngx_log_t *log = r->connection->log;
    if (c->router == NULL) {
        if (c->broken)
            return -1;
        mcr_error err;
        ngx_memzero(&err, sizeof(err));
        if ((c->router = make_router(c, ngx_cycle->pool, &err)) == NULL) {
            c->broken = 1;
            ngx_log_error(NGX_LOG_ERR, log, 0, "mcroute: %s", err.message);
            return -1;
        }
    }
    if (c->src == SRC_SNAPSHOT)
        follow_file(c, r);
    uint64_t g = mcr_router_generation(c->router);
    if (c->cur.snap != NULL && g == c->generation)
        return 0;
    mcr_snapshot *s = mcr_router_current(c->router);
    if (s == NULL)
        return -1;
    if (s != c->cur.snap) {
        table_clear(&c->cur);
        if (table_build(&c->cur, s, log) != NGX_OK) {
            table_clear(&c->cur);
            mcr_snapshot_unref(s);
            return -1;
        }
    }
    /* a migration whose reads fall back to the old owners now */
    mcr_router_migration m;
    ngx_memzero(&m, sizeof(m));
    mcr_snapshot *from = NULL;
    if (mcr_router_get_migration(c->router, &m) == MCR_OK) {
        mcr_migration_phase p = mcr_migration_phase_at(&m, mcr_snapshot_epoch(s));
        if (p == MCR_MIGRATION_SWITCHED || p == MCR_MIGRATION_GRACE)
            from = m.from;
    }
    if (from != c->from.snap) {
        table_clear(&c->from);
        if (from != NULL && table_build(&c->from, from, log) != NGX_OK)
            table_clear(&c->from);
    }
    mcr_router_migration_clear(&m);
    mcr_snapshot_unref(s);
    c->generation = g;
    return 0;
}

/* ------------------------------------------------------------ requests */

static ngx_int_t mcroute_get_peer(ngx_peer_connection_t *pc, void *data)
{
    mcroute_peer_t *p = data;
    ngx_addr_t *a = p->tried++ == 0 ? p->owner : p->previous;
    if (a == NULL || a->sockaddr == NULL)
        return NGX_BUSY; /* 502: the server's address could not be resolved */
    pc->sockaddr = a->sockaddr;
    pc->socklen = a->socklen;
    pc->name = &a->name;
    return NGX_OK;
}

static void mcroute_free_peer(ngx_peer_connection_t *pc, void *data, ngx_uint_t state)
{
    (void)data;
    (void)state;
    if (pc->tries > 0)
        pc->tries--;
}

static ngx_int_t mcroute_init_peer(ngx_http_request_t *r, ngx_http_upstream_srv_conf_t *us)
{
    mcroute_conf_t *c = ngx_http_conf_upstream_srv_conf(us, ngx_http_mcroute_module);
    mcroute_peer_t *p = ngx_pcalloc(r->pool, sizeof(*p));
    ngx_str_t key;
    if (p == NULL || ngx_http_complex_value(r, c->key, &key) != NGX_OK)
        return NGX_ERROR;
    if (sync_tables(c, r) != 0)
        return NGX_ERROR;
    uint32_t i = mcr_snapshot_locate(c->cur.snap, key.data, key.len);
    p->owner = i < c->cur.n ? &c->cur.addrs[i] : NULL;
    if (c->from.snap != NULL) {
        uint32_t j = mcr_snapshot_locate(c->from.snap, key.data, key.len);
        ngx_addr_t *old = j < c->from.n ? &c->from.addrs[j] : NULL;
        if (old != NULL && p->owner != NULL &&
            (old->name.len != p->owner->name.len ||
             ngx_memcmp(old->name.data, p->owner->name.data, old->name.len) != 0))
            p->previous = old; /* the key moved: a miss may be retried there */
    }
    r->upstream->peer.data = p;
    r->upstream->peer.get = mcroute_get_peer;
    r->upstream->peer.free = mcroute_free_peer;
    r->upstream->peer.tries = p->previous != NULL ? 2 : 1;
    return NGX_OK;
}

/* ------------------------------------------------------------ exit */

static void mcroute_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_upstream_main_conf_t *umcf =
        ngx_http_cycle_get_module_main_conf(cycle, ngx_http_upstream_module);
    if (umcf == NULL)
        return;
    ngx_http_upstream_srv_conf_t **us = umcf->upstreams.elts;
    for (ngx_uint_t i = 0; i < umcf->upstreams.nelts; i++) {
        if (us[i]->peer.init_upstream != mcroute_init_upstream)
            continue;
        mcroute_conf_t *c = ngx_http_conf_upstream_srv_conf(us[i], ngx_http_mcroute_module);
        table_clear(&c->cur);
        table_clear(&c->from);
        mcr_router_free(c->router); /* a state's slot given back */
        c->router = NULL;
    }
}
