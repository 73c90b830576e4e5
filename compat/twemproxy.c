/* SPDX-License-Identifier: BSD-3-Clause */
/* twemproxy.c: a nutcracker configuration's accessors, its pools' placement and pool options. */
/*
 * The accessors of a configuration read by twem_read.c (pools, options,
 * servers), its pools' placement as mcroute configs and rings, and their
 * options as a connection pool's.
 *
 * Pool options. nutcracker arms no timer when its timeout is 0 or -1
 * (msg_tmo_insert), and ejects a server once its failure count, incremented
 * first, is not below server_failure_limit (server_failure in nc_server.c),
 * so a limit of 0 acts as 1; mcr_twem_fill_pool_options maps accordingly.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute_pool.h"
#include "twem_internal.h"

/* Length of the pool list in mcr_twem_pool_index's message. */
#define POOL_LIST_MAX 120

/* ---------------------------------------------------------------- errors, freeing */

int mcr__twem_error(mcr_error *err, const char *src, twem_pos pos, int code, const char *fmt,
                    ...)
{
    char msg[MCR_ERROR_MESSAGE_SIZE];
    char qs[QUOTE_MAX + 8];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    mcr__quote(qs, sizeof(qs), src, strlen(src));
    if (pos.line == 0)
        return mcr__error(err, code, "%s: %s", qs, msg);
    return mcr__error(err, code, "%s:%zu:%zu: %s", qs, pos.line, pos.col, msg);
}

void mcr__twem_server_free(twem_server *s)
{
    free(s->text);
    free(s->host);
    free(s->name);
    free(s->kname);
}

static void pool_free(twem_pool *p)
{
    free(p->name);
    for (int i = 0; i < MCR_TWEM_TEXT_COUNT; i++)
        free(p->text[i]);
    for (size_t i = 0; i < p->nservers; i++)
        mcr__twem_server_free(&p->servers[i]);
    free(p->servers);
}

void mcr_twem_free(mcr_twem *twem)
{
    if (twem == NULL)
        return;
    for (size_t i = 0; i < twem->npools; i++)
        pool_free(&twem->pools[i]);
    free(twem->pools);
    free(twem->source);
    free(twem);
}

/* ---------------------------------------------------------------- getters */

const char *mcr_twem_source(const mcr_twem *twem)
{
    return twem == NULL ? NULL : twem->source;
}

size_t mcr_twem_pool_count(const mcr_twem *twem)
{
    return twem == NULL ? 0 : twem->npools;
}

const char *mcr_twem_pool_name(const mcr_twem *twem, size_t pool)
{
    if (twem == NULL || pool >= twem->npools)
        return NULL;
    return twem->pools[pool].name;
}

int mcr_twem_pool_index(const mcr_twem *twem, const char *name, size_t *out, mcr_error *err)
{
    char nb[QUOTE_MAX + 8], list[POOL_LIST_MAX + 8];
    size_t used = 0;

    if (twem == NULL || name == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL argument");
    for (size_t i = 0; i < twem->npools; i++)
        if (strcmp(twem->pools[i].name, name) == 0) {
            *out = i;
            return MCR_OK;
        }
    list[0] = '\0';
    for (size_t i = 0; i < twem->npools; i++) {
        const char *pn = twem->pools[i].name;
        size_t need = strlen(pn) + (i ? 2 : 0);
        if (used + need > POOL_LIST_MAX) {
            snprintf(list + used, sizeof(list) - used, ", ...");
            break;
        }
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", pn);
    }
    return mcr__error(err, MCR_ERR_UNKNOWN, "no pool \"%s\" in %s; its pools: %s",
                      twem_q(nb, sizeof(nb), name, strlen(name)), twem->source, list);
}

int mcr_twem_pool_option(const mcr_twem *twem, size_t pool, mcr_twem_option opt, int64_t *value)
{
    if (twem == NULL || value == NULL || pool >= twem->npools || (int)opt < 0 ||
        opt >= MCR_TWEM_OPTION_COUNT)
        return MCR_ERR_INVALID;
    *value = twem->pools[pool].opt[opt];
    return MCR_OK;
}

int mcr_twem_pool_is_set(const mcr_twem *twem, size_t pool, mcr_twem_option opt)
{
    if (twem == NULL || pool >= twem->npools || (int)opt < 0 || opt >= MCR_TWEM_OPTION_COUNT)
        return 0;
    if (opt == MCR_TWEM_LISTEN_PORT)
        return 1;
    return twem->pools[pool].opt_set[opt] ? 1 : 0;
}

const char *mcr_twem_pool_text(const mcr_twem *twem, size_t pool, mcr_twem_text what)
{
    if (twem == NULL || pool >= twem->npools || (int)what < 0 || what >= MCR_TWEM_TEXT_COUNT)
        return NULL;
    if (what == MCR_TWEM_HASH_NAME)
        return twem->pools[pool].hash_name;
    if (what == MCR_TWEM_DISTRIBUTION_NAME)
        return twem->pools[pool].dist_name;
    return twem->pools[pool].text[what];
}

size_t mcr_twem_server_count(const mcr_twem *twem, size_t pool)
{
    if (twem == NULL || pool >= twem->npools)
        return 0;
    return twem->pools[pool].nservers;
}

int mcr_twem_server_get(const mcr_twem *twem, size_t pool, size_t i, mcr_twem_server *out)
{
    if (twem == NULL || out == NULL || pool >= twem->npools || i >= twem->pools[pool].nservers)
        return MCR_ERR_INVALID;
    const twem_server *s = &twem->pools[pool].servers[i];
    out->host = s->host;
    out->port = s->port;
    out->weight = s->weight;
    out->name = s->name;
    out->ketama_name = s->kname;
    out->line = s->pos.line;
    memset(out->reserved, 0, sizeof(out->reserved));
    return MCR_OK;
}

/* ---------------------------------------------------------------- placement */

int mcr_twem_config(const mcr_twem *twem, size_t pool, mcr_config **out, mcr_error *err)
{
    char pb[QUOTE_MAX + 8], sb[QUOTE_MAX + 8];
    uint64_t total = 0;
    mcr_config *cfg;
    int rc;

    if (twem == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL argument");
    if (pool >= twem->npools)
        return mcr__error(err, MCR_ERR_INVALID, "pool %zu does not exist (%s has %zu)", pool,
                          twem->source, twem->npools);
    const twem_pool *p = &twem->pools[pool];
    twem_q(pb, sizeof(pb), p->name, strlen(p->name));
    if (p->opt[MCR_TWEM_DISTRIBUTION] == MCR_TWEM_DIST_RANDOM)
        return mcr__twem_error(err, twem->source, p->opt_pos[MCR_TWEM_DISTRIBUTION],
                               MCR_ERR_UNSUPPORTED,
                               "pool \"%s\": distribution random picks a server at random for "
                               "every request: no placement to reproduce",
                               pb);
    for (size_t i = 0; i < p->nservers; i++) {
        const twem_server *s = &p->servers[i];
        if (s->name != NULL && s->name[0] == '\0')
            return mcr__twem_error(err, twem->source, s->pos, MCR_ERR_UNSUPPORTED,
                                   "pool \"%s\": server \"%s\" ends with a space, so nutcracker "
                                   "names it \"\": mcroute's labels cannot be empty",
                                   pb, twem_q(sb, sizeof(sb), s->text, strlen(s->text)));
        if (s->port == 0)
            return mcr__twem_error(err, twem->source, s->pos, MCR_ERR_UNSUPPORTED,
                                   "pool \"%s\": server \"%s\" is a unix socket: mcroute places "
                                   "keys on TCP servers only",
                                   pb, twem_q(sb, sizeof(sb), s->text, strlen(s->text)));
        total += s->weight;
    }
    if (total > UINT32_MAX)
        return mcr__twem_error(err, twem->source, p->pos, MCR_ERR_UNSUPPORTED,
                               "pool \"%s\": a total weight of %llu overflows nutcracker's 32-bit "
                               "sum",
                               pb, (unsigned long long)total);

    cfg = mcr_config_new();
    if (cfg == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    mcr_config_set_mode(cfg, p->opt[MCR_TWEM_DISTRIBUTION] == MCR_TWEM_DIST_MODULA
                                 ? MCR_MODE_TWEMPROXY_MODULA
                                 : MCR_MODE_TWEMPROXY_KETAMA);
    mcr_config_set_hash(cfg, (mcr_hash)p->opt[MCR_TWEM_HASH]);
    if (p->text[MCR_TWEM_HASH_TAG] != NULL)
        mcr_config_set_hash_tag(cfg, p->text[MCR_TWEM_HASH_TAG]);
    for (size_t i = 0; i < p->nservers; i++) {
        const twem_server *s = &p->servers[i];
        mcr_error e;
        rc = mcr_config_add_server_named(cfg, s->host, s->port, s->weight, s->name, &e);
        if (rc == MCR_OK)
            continue;
        mcr_config_free(cfg);
        twem_q(sb, sizeof(sb), s->text, strlen(s->text));
        if (rc == MCR_ERR_DUPLICATE)
            return mcr__twem_error(err, twem->source, s->pos, rc,
                                   "pool \"%s\": server \"%s\" has the address of another server "
                                   "of the pool under another name: nutcracker allows it, "
                                   "mcroute's "
                                   "config does not",
                                   pb, sb);
        if (rc == MCR_ERR_NOMEM)
            return mcr__error(err, rc, "out of memory");
        return mcr__twem_error(err, twem->source, s->pos, rc, "pool \"%s\": server \"%s\": %s", pb,
                               sb, e.message);
    }
    *out = cfg;
    return MCR_OK;
}

int mcr_twem_ring(const mcr_twem *twem, size_t pool, mcr_ring **out, mcr_error *err)
{
    mcr_config *cfg = NULL;
    int rc;

    if (out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL argument");
    rc = mcr_twem_config(twem, pool, &cfg, err);
    if (rc != MCR_OK)
        return rc;
    rc = mcr_ring_new(cfg, out, err);
    mcr_config_free(cfg);
    return rc;
}

/* ---------------------------------------------------------------- pool options */

/* A written millisecond directive `opt` of pool `p` as a pool timeout:
 * nutcracker's 0 and -1 (not written) wait forever, which a pool cannot:
 * 0, the pool's default. Above a day: MCR_ERR_RANGE. */
static int twem_ms(const mcr_twem *twem, const twem_pool *p, mcr_twem_option opt,
                   const char *name, unsigned *out, mcr_error *err)
{
    char pb[QUOTE_MAX + 8];
    int64_t v = p->opt[opt];

    if (v > (int64_t)MCR_POOL_TIMEOUT_MAX_MS)
        return mcr__twem_error(err, twem->source, p->opt_pos[opt], MCR_ERR_RANGE,
                               "pool \"%s\": %s %lld ms is above the connection pool's limit of "
                               "%u ms (one day)",
                               twem_q(pb, sizeof(pb), p->name, strlen(p->name)), name, (long long)v,
                               MCR_POOL_TIMEOUT_MAX_MS);
    *out = v > 0 ? (unsigned)v : 0;
    return MCR_OK;
}

int mcr_twem_fill_pool_options(const mcr_twem *twem, size_t pool, mcr_pool_options *opts,
                               mcr_error *err)
{
    char pb[QUOTE_MAX + 8];
    mcr_pool_options o;
    int64_t v;
    int rc;

    if (twem == NULL || opts == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL argument");
    if (pool >= twem->npools)
        return mcr__error(err, MCR_ERR_INVALID, "pool %zu does not exist (%s has %zu)", pool,
                          twem->source, twem->npools);
    const twem_pool *p = &twem->pools[pool];
    twem_q(pb, sizeof(pb), p->name, strlen(p->name));
    if (p->opt[MCR_TWEM_REDIS])
        return mcr__twem_error(err, twem->source, p->opt_pos[MCR_TWEM_REDIS], MCR_ERR_UNSUPPORTED,
                               "pool \"%s\": a redis pool; the connection pool speaks the "
                               "memcached "
                               "protocol only",
                               pb);
    o = *opts;

    v = p->opt[MCR_TWEM_SERVER_CONNECTIONS]; /* >= 1: the loader refuses 0 */
    if (v > (int64_t)MCR_POOL_CONNECTIONS_MAX)
        return mcr__twem_error(err, twem->source, p->opt_pos[MCR_TWEM_SERVER_CONNECTIONS],
                               MCR_ERR_RANGE,
                               "pool \"%s\": server_connections %lld is above the connection "
                               "pool's "
                               "limit of %u per server",
                               pb, (long long)v, MCR_POOL_CONNECTIONS_MAX);
    o.connections = (unsigned)v;
    o.eager = p->opt[MCR_TWEM_PRECONNECT] != 0;

    /* One nutcracker timeout bounds both the connect and the reply. */
    rc = twem_ms(twem, p, MCR_TWEM_TIMEOUT, "timeout", &o.request_timeout_ms, err);
    if (rc != MCR_OK)
        return rc;
    o.connect_timeout_ms = o.request_timeout_ms;

    o.policy = p->opt[MCR_TWEM_AUTO_EJECT_HOSTS] ? MCR_POLICY_EJECT : MCR_POLICY_FAIL_FAST;

    /* nutcracker counts the failure, then ejects unless the count is below
     * the limit (server_failure in nc_server.c): 0 ejects at once, like 1. */
    v = p->opt[MCR_TWEM_SERVER_FAILURE_LIMIT];
    if (v > (int64_t)MCR_POOL_FAILURE_LIMIT_MAX)
        return mcr__twem_error(err, twem->source, p->opt_pos[MCR_TWEM_SERVER_FAILURE_LIMIT],
                               MCR_ERR_RANGE,
                               "pool \"%s\": server_failure_limit %lld is above the connection "
                               "pool's limit of %u",
                               pb, (long long)v, MCR_POOL_FAILURE_LIMIT_MAX);
    o.server_failure_limit = v > 0 ? (unsigned)v : 1;

    /* 0 retries at the next rebuild; a pool's 0 would mean its default. */
    rc = twem_ms(twem, p, MCR_TWEM_SERVER_RETRY_TIMEOUT, "server_retry_timeout",
                 &o.retry_timeout_ms, err);
    if (rc != MCR_OK)
        return rc;
    if (o.retry_timeout_ms == 0)
        o.retry_timeout_ms = 1;

    *opts = o;
    return MCR_OK;
}
