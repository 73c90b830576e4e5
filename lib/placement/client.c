/* SPDX-License-Identifier: BSD-3-Clause */
/* client.c: the table of other clients' placements, each a mode and hashes, and configs set up by a client's name. */
#include <string.h>

#include "placement_internal.h"

/*
 * What each name stands for is documented in mcr_client(3) and read in each
 * client's installed code (the README's table says how each was checked
 * against the real client). A client is only a mode and key hash here, plus
 * two rules a mode cannot carry: whether the client has weights at all,
 * and pylibmc's {"ketama": True}, whose continuum depends on whether any
 * server has a weight other than 1.
 */
typedef struct client_def {
    const char *name;
    mcr_mode mode;
    mcr_hash hash;
    bool weightless;  /* the client takes no weights: 1 only */
    const char *what; /* one line for listings */
} client_def;

static const client_def clients[] = {
    {"pymemcache", MCR_MODE_PYMEMCACHE, MCR_HASH_MD5, true,
     "pymemcache 3.5 HashClient (rendezvous, murmur3 of \"host:port-key\")"},
    {"python-memcached", MCR_MODE_BUCKETS, MCR_HASH_CMEMCACHE, false,
     "python-memcached 1.59 memcache.Client (weighted buckets, cmemcache_hash)"},
    {"pylibmc", MCR_MODE_MODULA, MCR_HASH_DEFAULT, false,
     "pylibmc 1.6 on libmemcached 1.1 defaults (modula, one-at-a-time; weights unused)"},
    {"pylibmc-ketama", MCR_MODE_CONSISTENT, MCR_HASH_DEFAULT, false,
     "pylibmc 1.6 {\"ketama\": True} (consistent; weighted continuum if any weight is not 1)"},
    {"spymemcached", MCR_MODE_SPYMEMCACHED, MCR_HASH_MD5, false,
     "spymemcached 2.12 KetamaNodeLocator, KETAMA_HASH, default key format"},
    {"spymemcached-libmemcached", MCR_MODE_SPYMEMCACHED_LIBMEMCACHED, MCR_HASH_MD5, false,
     "spymemcached 2.12 KetamaNodeLocator, KETAMA_HASH, LIBMEMCACHED key format"},
    {"spymemcached-arraymod", MCR_MODE_MODULA, MCR_HASH_HASHCODE, true,
     "spymemcached 2.12 ArrayModNodeLocator, NATIVE_HASH (String.hashCode)"},
    {"dalli", MCR_MODE_DALLI, MCR_HASH_CRC32A, false,
     "dalli 3.0 Dalli::Ring (SHA-1 points, predecessor rule, CRC-32 keys)"},
    {"gomemcache", MCR_MODE_MODULA, MCR_HASH_CRC32A, true,
     "gomemcache ServerList (CRC-32 modulo the servers)"},
    {"node-memcached", MCR_MODE_HASHRING, MCR_HASH_MD5, false,
     "npm memcached 2.2 with hashring 3.2 (ketama compatibility)"},
    {"memjs", MCR_MODE_MODULA, MCR_HASH_HASHCODE_ABS, true,
     "npm memjs 1.3 (|hashCode| modulo the servers)"},
    {"nginx", MCR_MODE_BUCKETS, MCR_HASH_CRC, false,
     "nginx 1.22 upstream `hash $key;` (Cache::Memcached buckets)"},
    {"nginx-consistent", MCR_MODE_NGINX_CONSISTENT, MCR_HASH_CRC32A, false,
     "nginx 1.22 upstream `hash $key consistent;`"},
    {"php-memcached", MCR_MODE_MODULA, MCR_HASH_DEFAULT, false,
     "php-memcached 3.2 on libmemcached 1.1 defaults (modula, one-at-a-time; weights unused)"},
    {"php-memcached-ketama", MCR_MODE_WEIGHTED, MCR_HASH_MD5, false,
     "php-memcached 3.2 OPT_LIBKETAMA_COMPATIBLE (libmemcached's weighted ketama)"},
    {"php-memcache", MCR_MODE_PHP_MEMCACHE, MCR_HASH_CRC32A, false,
     "php-memcache 4.0 (consistent strategy, crc32, 1024 buckets)"},
    {"mcrouter-ch3", MCR_MODE_MCROUTER_CH3, MCR_HASH_MD5, true,
     "mcrouter HashRoute, hash_func Ch3 (furc_hash of the routing key)"},
    {"memcached-proxy-jump", MCR_MODE_MEMCACHED_PROXY_JUMP, MCR_HASH_MD5, true,
     "memcached proxy mcp.pool() default (jump hash of the key's XXH3-64)"},
    {"envoy-maglev", MCR_MODE_ENVOY_MAGLEV, MCR_HASH_MD5, false,
     "Envoy MAGLEV defaults (table 65537, XXH64 of the address and of the key)"},
    {"envoy-ring-hash", MCR_MODE_ENVOY_RING_HASH, MCR_HASH_MD5, false,
     "Envoy RING_HASH defaults (XXH64 points \"address_i\", ring of 1024 to 8M)"},
    {"memcached-proxy-ring-ketama", MCR_MODE_MEMCACHED_PROXY_RING_KETAMA, MCR_HASH_MD5, true,
     "memcached proxy mcp.dist_ring_hash, omode \"ketama\", hash mcp.dist_ring_hash.hash"},
    {"mcrouter-wch3", MCR_MODE_MCROUTER_WCH3, MCR_HASH_MD5, false,
     "mcrouter HashRoute, hash_func WeightedCh3 (weights in [0,1], missing ones 0.5)"},
};
#define NCLIENTS (sizeof(clients) / sizeof(clients[0]))
#define PYLIBMC_KETAMA 3

const char *mcr_client_name(size_t i)
{
    return i < NCLIENTS ? clients[i].name : NULL;
}

const char *mcr_client_summary(size_t i)
{
    return i < NCLIENTS ? clients[i].what : NULL;
}

int mcr_config_set_client(mcr_config *cfg, const char *name, mcr_error *err)
{
    if (cfg == NULL || name == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config or client name");
    for (size_t i = 0; i < NCLIENTS; i++) {
        if (!mcr__ascii_caseeq(name, clients[i].name))
            continue;
        int rc = mcr__config_check_mode_change(cfg, clients[i].mode, err);
        if (rc != MCR_OK)
            return rc;
        cfg->mode = clients[i].mode;
        cfg->key_hash = clients[i].hash;
        cfg->point_hash = clients[i].hash;
        cfg->key_hash_set = true;
        cfg->point_hash_set = false;
        cfg->client = (int)i + 1;
        return MCR_OK;
    }
    char q[80];
    return mcr__error(err, MCR_ERR_UNKNOWN,
                      "unknown client \"%s\" (mcroute clients lists them: pymemcache, "
                      "python-memcached, pylibmc, spymemcached, dalli, gomemcache, "
                      "node-memcached, memjs, nginx, php-memcached, php-memcache, ...)",
                      mcr__quote(q, sizeof(q), name, strlen(name)));
}

const char *mcr_config_client(const mcr_config *cfg)
{
    if (cfg == NULL || cfg->client <= 0 || (size_t)cfg->client > NCLIENTS)
        return NULL;
    return clients[cfg->client - 1].name;
}

int mcr__config_check_client(const mcr_config *cfg, mcr_error *err)
{
    if (cfg->client <= 0 || !clients[cfg->client - 1].weightless)
        return MCR_OK;
    for (size_t i = 0; i < cfg->count; i++) {
        const mcr__server *sv = &cfg->servers[i];
        if (sv->weight != 1)
            return mcr__error(err, MCR_ERR_RANGE,
                              "%s has no weights: server %s%s%s:%d has weight %u",
                              clients[cfg->client - 1].name, sv->ipv6 ? "[" : "", sv->host,
                              sv->ipv6 ? "]" : "", sv->port, (unsigned)sv->weight);
    }
    return MCR_OK;
}

void mcr__client_params(const mcr_config *cfg, mcr__params *p)
{
    if (cfg->client != PYLIBMC_KETAMA + 1)
        return;
    /* pylibmc {"ketama": True}: libmemcached's weighted continuum (MD5
     * points) as soon as a server has a weight, keys still one-at-a-time */
    for (size_t i = 0; i < cfg->count; i++) {
        if (cfg->servers[i].weight != 1) {
            p->mode = MCR_MODE_WEIGHTED;
            p->point_hash = MCR_HASH_MD5;
            return;
        }
    }
}
