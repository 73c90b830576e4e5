/* SPDX-License-Identifier: BSD-3-Clause */
/* ring.c: what every ring shares: its servers and key rules, the dispatch to
 * its family (ring_internal.h), walks and inspection. */
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"

/* libmemcached (MEMCACHED_MAX_KEY - 1): with HASH_WITH_NAMESPACE, a
 * namespace + key longer than this hashes to 0 instead of being hashed. */
#define LMC_PREFIXED_KEY_MAX 250

/* ------------------------------------------------------------ building */

static int copy_servers(mcr_ring *r, const mcr__server *servers, size_t n, mcr_error *err)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += 3 * servers[i].host_len + 24;
    r->servers = calloc(n, sizeof(*r->servers));
    r->strings = malloc(bytes);
    if (r->servers == NULL || r->strings == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory copying servers");
    char *p = r->strings;
    for (size_t i = 0; i < n; i++) {
        const mcr__server *s = &servers[i];
        mcr__ring_server *d = &r->servers[i];
        d->port = s->port;
        d->weight = s->weight;
        d->host = p;
        memcpy(p, s->host, s->host_len + 1);
        p += s->host_len + 1;
        d->name = p;
        if (s->ipv6)
            *p++ = '[';
        memcpy(p, s->host, s->host_len);
        p += s->host_len;
        if (s->ipv6)
            *p++ = ']';
        *p++ = ':';
        p += mcr__put_uint(p, (uint32_t)s->port); /* not sprintf: 1,000 servers a publish */
        *p++ = '\0';
        d->pyname = d->name;
        d->pylen = (size_t)(p - 1 - d->name);
        if (s->ipv6) {
            d->pyname = p;
            memcpy(p, s->host, s->host_len);
            p += s->host_len;
            *p++ = ':';
            p += mcr__put_uint(p, (uint32_t)s->port);
            *p++ = '\0';
            d->pylen = (size_t)(p - 1 - d->pyname);
        }
    }
    return MCR_OK;
}

const mcr__family *mcr__mode_family(mcr_mode m)
{
    switch (m) {
    case MCR_MODE_MODULA: return &mcr__family_modula;
    case MCR_MODE_TWEMPROXY_MODULA:
    case MCR_MODE_BUCKETS: return &mcr__family_wmodula;
    case MCR_MODE_JUMP: return &mcr__family_jump;
    case MCR_MODE_MEMCACHED_PROXY_JUMP:
    case MCR_MODE_MCROUTER_CH3:
    case MCR_MODE_MCROUTER_WCH3: return &mcr__family_keyjump;
    case MCR_MODE_ENVOY_MAGLEV: return &mcr__family_envoy_maglev;
    case MCR_MODE_ENVOY_RING_HASH: return &mcr__family_envoy_ring;
    case MCR_MODE_MAGLEV: return &mcr__family_maglev;
    case MCR_MODE_SLOTS: return &mcr__family_slots;
    case MCR_MODE_RENDEZVOUS: return &mcr__family_rendezvous;
    case MCR_MODE_PYMEMCACHE: return &mcr__family_pymemcache;
    default: return &mcr__family_points;
    }
}

int mcr__mode_has_points(mcr_mode m)
{
    return mcr__mode_family(m) == &mcr__family_points;
}

int mcr__ring_alloc(const mcr__params *p, const mcr__server *servers, size_t n, mcr_ring **out,
                    mcr_error *err)
{
    mcr_ring *r;

    if (n == 0)
        return mcr__error(err, MCR_ERR_EMPTY, "no servers configured");
    if (n > UINT32_MAX / 2)
        return mcr__error(err, MCR_ERR_RANGE, "too many servers: %zu", n);
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a ring");
    r->mode = p->mode;
    r->family = mcr__mode_family(p->mode);
    r->key_hash = p->key_hash;
    r->nservers = (uint32_t)n;
    r->prefix_on = p->prefix_on;
    r->prefix_len = p->prefix_len;
    memcpy(r->prefix, p->prefix, p->prefix_len);
    r->tag_on = p->tag_on;
    memcpy(r->tag, p->tag, sizeof(r->tag));
    r->empty_is_zero =
        p->mode == MCR_MODE_TWEMPROXY_KETAMA || p->mode == MCR_MODE_TWEMPROXY_MODULA;
    int rc = copy_servers(r, servers, n, err);
    if (rc != MCR_OK) {
        mcr_ring_free(r);
        return rc;
    }
    *out = r;
    return MCR_OK;
}

int mcr__ring_alloc_cfg(const mcr_config *cfg, mcr_ring **out, mcr_error *err)
{
    mcr__params p;

    if (cfg == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config");
    mcr__config_params(cfg, &p);
    return mcr__ring_alloc(&p, cfg->servers, cfg->count, out, err);
}

void mcr__ring_finish(mcr_ring *r)
{
    r->special_hash = r->prefix_on || r->tag_on || r->empty_is_zero || r->crc_keys;
    r->succ = r->family == &mcr__family_points && r->npoints > 0 && r->rule == MCR__RULE_SUCC;
}

int mcr__ring_build(const mcr__params *p, const mcr__server *servers, size_t n,
                    mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                    mcr_ring **out, mcr_error *err)
{
    mcr_ring *r;
    bool valid = out != NULL && (int)p->mode >= 0 && p->mode < MCR_MODE_COUNT;
    const mcr__family *fam = valid ? mcr__mode_family(p->mode) : NULL;

    if (!valid || (fam == &mcr__family_points) == (points == NULL) ||
        (fam->default_map != NULL) == (map == NULL)) {
        free(points);
        free(map);
        return mcr__error(err, MCR_ERR_INVALID, "invalid ring parameters");
    }
    int rc = mcr__ring_alloc(p, servers, n, &r, err);
    if (rc != MCR_OK) {
        free(points);
        free(map);
        return rc;
    }
    rc = fam->adopt(r, p, servers, points, npoints, map, nmap, err);
    if (rc != MCR_OK) {
        mcr_ring_free(r);
        return rc;
    }
    mcr__ring_finish(r);
    *out = r;
    return MCR_OK;
}

int mcr__default_map(const mcr__params *p, const uint32_t *weight, size_t n, uint32_t **map,
                     size_t *nmap, mcr_error *err)
{
    const mcr__family *fam = mcr__mode_family(p->mode);
    if (fam->default_map == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "internal error: mode %s has no map",
                          mcr_mode_name(p->mode));
    return fam->default_map(p, weight, n, map, nmap, err);
}

int mcr__ring_build_map(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    mcr__params p;
    uint32_t *map = NULL;
    size_t nmap = 0;

    mcr__config_params(cfg, &p);
    uint32_t *w = malloc(cfg->count * sizeof(*w));
    if (w == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu servers", cfg->count);
    for (size_t i = 0; i < cfg->count; i++)
        w[i] = cfg->servers[i].weight;
    int rc = r->family->default_map(&p, w, cfg->count, &map, &nmap, err);
    free(w);
    if (rc != MCR_OK)
        return rc;
    return r->family->adopt(r, &p, cfg->servers, NULL, 0, map, nmap, err);
}

int mcr_ring_new(const mcr_config *cfg, mcr_ring **out, mcr_error *err)
{
    mcr_ring *r;
    char label[MCR__NAME_BUF];
    int rc;

    if (out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL output");
    if (cfg != NULL) {
        if ((rc = mcr__config_check_client(cfg, err)) != MCR_OK)
            return rc;
        uint32_t wmax = mcr__weight_max(cfg->mode);
        for (size_t i = 0; i < cfg->count; i++) {
            const mcr__server *s = &cfg->servers[i];
            if (s->weight > wmax)
                return mcr__error(err, MCR_ERR_RANGE, "weight %u of %s is above %u, the limit of %s",
                                  (unsigned)s->weight, mcr__server_id(s, label), (unsigned)wmax,
                                  mcr_mode_name(cfg->mode));
        }
    }
    if (cfg != NULL && cfg->mode == MCR_MODE_MAGLEV && cfg->count > 0) {
        mcr__params p;
        mcr__config_params(cfg, &p);
        if ((rc = mcr__maglev_check_limit(p.table_size, cfg->count, err)) != MCR_OK)
            return rc;
    }
    rc = mcr__ring_alloc_cfg(cfg, &r, err);
    if (rc != MCR_OK)
        return rc;
    rc = r->family->build(r, cfg, err);
    if (rc != MCR_OK) {
        mcr_ring_free(r);
        return rc;
    }
    mcr__ring_finish(r);
    *out = r;
    return MCR_OK;
}

void mcr_ring_free(mcr_ring *r)
{
    if (r == NULL)
        return;
    free(r->points);
    mcr__search_free(&r->search);
    free(r->cum_weight);
    free(r->servers);
    free(r->strings);
    free(r->table);
    free(r->live);
    free(r->seeds);
    free(r->bucket_point);
    free(r->accept);
    free(r->wide);
    free(r->wide_server);
    free(r);
}

/* ------------------------------------------------------------ lookups */

/* What the special rules below hash their bytes with: the key hash, or in
 * "slots" CRC-16/XMODEM (Redis Cluster's slot hash). */
static uint32_t bytes_hash(const mcr_ring *r, const void *p, size_t len)
{
    if (r->crc_keys)
        return mcr__crc16(p, len);
    return mcr__hash_key(r->key_hash, p, len);
}

/* libmemcached builds namespace + key in a fixed buffer with strncpy: too
 * long gives 0, and key bytes after a NUL become NUL. Out of line so the
 * common path keeps a small stack frame. */
static __attribute__((noinline)) uint32_t prefixed_hash(const mcr_ring *r, const void *key,
                                                        size_t len)
{
    unsigned char buf[LMC_PREFIXED_KEY_MAX + 1];
    size_t total = r->prefix_len + len;
    if (total > LMC_PREFIXED_KEY_MAX)
        return 0;
    memcpy(buf, r->prefix, r->prefix_len);
    const unsigned char *k = key;
    size_t i = 0;
    for (; i < len && k[i] != 0; i++)
        buf[r->prefix_len + i] = k[i];
    memset(buf + r->prefix_len + i, 0, len - i);
    return bytes_hash(r, buf, total);
}

/* twemproxy's key rules: the hash tag narrows the key; an empty key is 0. */
static __attribute__((noinline)) uint32_t special_hash(const mcr_ring *r, const void *key,
                                                       size_t len)
{
    if (r->tag_on) {
        const char *k = key;
        const char *open = len ? memchr(k, r->tag[0], len) : NULL;
        if (open != NULL) {
            size_t rest = len - (size_t)(open + 1 - k);
            const char *close = rest ? memchr(open + 1, r->tag[1], rest) : NULL;
            if (close != NULL && close - open > 1) {
                key = open + 1;
                len = (size_t)(close - open - 1);
            }
        }
    }
    if (r->empty_is_zero && len == 0)
        return 0;
    if (r->prefix_on)
        return prefixed_hash(r, key, len);
    return bytes_hash(r, key, len);
}

static inline uint32_t ring_hash(const mcr_ring *r, const void *key, size_t len)
{
    if (MCR__LIKELY(!r->special_hash))
        return mcr__hash_key(r->key_hash, key, len);
    return special_hash(r, key, len);
}

uint32_t mcr_ring_hash(const mcr_ring *r, const void *key, size_t len)
{
    return ring_hash(r, key, len);
}

/* The successor rule's continuum inline (the common case); every other
 * lookup through its family. */
static inline uint32_t ring_find(const mcr_ring *r, uint32_t hash)
{
    if (MCR__LIKELY(r->succ)) /* npoints is a sentinel carrying the wrap */
        return mcr__search_server(&r->search, r->points, hash);
    return r->family->find(r, hash);
}

uint32_t mcr_ring_find(const mcr_ring *r, uint32_t hash)
{
    return ring_find(r, hash);
}

uint32_t mcr_ring_locate(const mcr_ring *r, const void *key, size_t len)
{
    if (r->nservers == 1)
        return 0; /* libmemcached does not even hash */
    if (MCR__UNLIKELY(r->family->locate != NULL))
        return r->family->locate(r, key, len);
    return ring_find(r, ring_hash(r, key, len));
}

void mcr_ring_locate_many(const mcr_ring *r, const void *const *keys, const size_t *lens,
                          size_t n, uint32_t *out)
{
    if (r->nservers == 1 || r->family->locate != NULL) {
        for (size_t i = 0; i < n; i++)
            out[i] = r->nservers == 1 ? 0 : r->family->locate(r, keys[i], lens[i]);
        return;
    }
    /* Hash a chunk of keys first (MD5 several keys at a time in SIMD lanes),
     * touching the index for each hash, then (large rings) the packed points
     * the index gives, so that the cache misses of many keys overlap; then
     * resolve the chunk. */
    enum { CHUNK = 64 };
    for (size_t base = 0; base < n; base += CHUNK) {
        size_t m = n - base < CHUNK ? n - base : CHUNK;
        uint32_t *h = out + base;
        if (!r->special_hash)
            mcr__hash_many(r->key_hash, keys + base, lens + base, m, h);
        else
            for (size_t i = 0; i < m; i++)
                h[i] = ring_hash(r, keys[base + i], lens[base + i]);
        if (r->npoints != 0) {
            for (size_t i = 0; i < m; i++)
                mcr__search_prefetch(&r->search, h[i]);
            if (r->search.packed != NULL)
                for (size_t i = 0; i < m; i++)
                    mcr__search_prefetch_second(&r->search, h[i]);
        }
        for (size_t i = 0; i < m; i++)
            h[i] = ring_find(r, h[i]);
    }
}

/* ------------------------------------------------------------ walks */

void mcr__walk_init(mcr__walk *w, const mcr_ring *r, const void *key, size_t len)
{
    memset(w, 0, offsetof(mcr__walk, local));
    w->r = r;
    w->hash = ring_hash(r, key, len);
    w->primary = r->nservers == 1 ? 0 : mcr_ring_locate(r, key, len);
    r->family->walk_init(w, key, len);
}

uint32_t mcr__walk_next(mcr__walk *w)
{
    const mcr_ring *r = w->r;
    size_t s = w->step++;

    if (s == 0)
        return w->primary;
    if (s < w->own)
        return r->family->walk_step(w, s);
    /* The sweep, for the families that ask for it: the continuum and modula
     * modes meet only servers that own something, as their references do. */
    if (!w->sweep)
        return UINT32_MAX;
    s -= w->own;
    if (s >= r->nservers - 1)
        return UINT32_MAX;
    return (uint32_t)((w->primary + 1 + s) % r->nservers);
}

void mcr__walk_release(mcr__walk *w)
{
    if (w->times != NULL && w->times != w->local)
        free(w->times);
    w->times = NULL;
}

/* ------------------------------------------------------------ inspection */

const uint32_t *mcr__ring_table(const mcr_ring *r, size_t *n)
{
    *n = r->table != NULL ? r->ntable : 0;
    return r->table;
}

uint32_t mcr__find_no_server(const mcr_ring *r, uint32_t hash)
{
    (void)r, (void)hash;
    return MCR_NO_SERVER;
}

size_t mcr_ring_wide_point_count(const mcr_ring *r)
{
    return r == NULL ? 0 : r->nwide;
}

int mcr_ring_wide_point(const mcr_ring *r, size_t i, uint64_t *value, uint32_t *server)
{
    if (r == NULL || i >= r->nwide)
        return MCR_ERR_INVALID;
    if (value != NULL)
        *value = r->wide[i];
    if (server != NULL)
        *server = r->wide_server[i];
    return MCR_OK;
}

const uint32_t *mcr__ring_accept(const mcr_ring *r)
{
    return r->accept;
}

size_t mcr_ring_server_count(const mcr_ring *r)
{
    return r == NULL ? 0 : r->nservers;
}

size_t mcr_ring_point_count(const mcr_ring *r)
{
    return r == NULL ? 0 : r->npoints;
}

int mcr_ring_point(const mcr_ring *r, size_t i, uint32_t *value, uint32_t *server)
{
    if (r == NULL || i >= r->npoints)
        return MCR_ERR_INVALID;
    if (value != NULL)
        *value = r->points[i].value;
    if (server != NULL)
        *server = r->points[i].server;
    return MCR_OK;
}

const char *mcr_ring_server_name(const mcr_ring *r, size_t i)
{
    return (r == NULL || i >= r->nservers) ? NULL : r->servers[i].name;
}

const char *mcr_ring_server_host(const mcr_ring *r, size_t i)
{
    return (r == NULL || i >= r->nservers) ? NULL : r->servers[i].host;
}

int mcr_ring_server_port(const mcr_ring *r, size_t i)
{
    return (r == NULL || i >= r->nservers) ? 0 : r->servers[i].port;
}

uint32_t mcr_ring_server_weight(const mcr_ring *r, size_t i)
{
    return (r == NULL || i >= r->nservers) ? 0 : r->servers[i].weight;
}

mcr_mode mcr_ring_mode(const mcr_ring *r)
{
    return r->mode;
}

mcr_hash mcr_ring_key_hash(const mcr_ring *r)
{
    return r->key_hash;
}

mcr__shape mcr__ring_shape(const mcr_ring *r)
{
    return r->family->shape(r);
}
