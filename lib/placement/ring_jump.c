/* SPDX-License-Identifier: BSD-3-Clause */
/* ring_jump.c: "jump": jump consistent hashing over a map of buckets, each
 * a server or a hole; a key that lands in a hole jumps again. And the
 * proxies whose key jumps straight into their list of servers:
 * "memcached-proxy-jump" (jump hash of XXH3-64) and "mcrouter-ch3" (furc). */
#include <stdlib.h>
#include <xxhash.h>

#include "ring_internal.h"

/* Jumps tried from new keys before a key that lands in a hole settles for
 * the list of buckets that are not (see jump_next). With half the buckets
 * holes, 64 misses in a row happen once in 2^64 keys. */
#define JUMP_TRIES 64

/* One bucket per unit of weight, in server order. */
static int jump_default_map(const mcr__params *p, const uint32_t *weight, size_t n,
                            uint32_t **map, size_t *nmap, mcr_error *err)
{
    uint64_t total = 0;
    (void)p;
    for (size_t i = 0; i < n; i++)
        total += weight[i];
    if (total > MCR__JUMP_BUCKETS_MAX)
        return mcr__error(err, MCR_ERR_RANGE,
                          "jump: %llu buckets (the total weight) are more than %u",
                          (unsigned long long)total, (unsigned)MCR__JUMP_BUCKETS_MAX);
    uint32_t *m = malloc((total > 0 ? total : 1) * sizeof(*m));
    if (m == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a table of %llu entries",
                          (unsigned long long)total);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < weight[i]; j++)
            m[k++] = (uint32_t)i;
    *map = m;
    *nmap = (size_t)total;
    return MCR_OK;
}

static int jump_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                      mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                      mcr_error *err)
{
    (void)p, (void)servers, (void)points, (void)npoints;
    if (map == NULL || nmap == 0 || nmap > MCR__JUMP_BUCKETS_MAX) {
        free(map);
        return mcr__error(err, MCR_ERR_INVALID, "internal error: a jump table of %zu buckets",
                          nmap);
    }
    r->table = map;
    r->ntable = (uint32_t)nmap;
    r->live = malloc(nmap * sizeof(*r->live));
    if (r->live == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu buckets", nmap);
    for (uint32_t b = 0; b < r->ntable; b++) {
        if (map[b] != MCR__HOLE && map[b] >= r->nservers)
            return mcr__error(err, MCR_ERR_INVALID, "internal error: bucket %u names no server",
                              (unsigned)b);
        if (map[b] != MCR__HOLE)
            r->live[r->nlive++] = b;
    }
    if (r->nlive == 0)
        return mcr__error(err, MCR_ERR_INVALID, "internal error: every bucket is a hole");
    r->njump = r->live[r->nlive - 1] + 1;
    return MCR_OK;
}

/* The server of the bucket that key *k jumps to; if that bucket is a hole
 * (its server is not active), the same for the next key mix(*k), and so on;
 * after JUMP_TRIES holes in a row, a bucket that is not a hole chosen by
 * the last key. *k is left at the key after the one used, where the walk
 * (replicas) goes on. */
static uint32_t jump_next(const mcr_ring *r, uint64_t *k)
{
    for (int t = 0; t < JUMP_TRIES; t++) {
        uint64_t key = *k;
        *k = mcr__mix64(key);
        uint32_t s = r->table[mcr__jump(key, r->njump)];
        if (s != MCR__HOLE)
            return s;
    }
    return r->table[r->live[*k % r->nlive]];
}

static uint32_t jump_find(const mcr_ring *r, uint32_t hash)
{
    uint64_t k = mcr__key64(hash);
    return jump_next(r, &k);
}

/* The walk goes on jumping from the primary's last key, a few keys per
 * server, then sweeps. */
static void jump_walk_init(mcr__walk *w, const void *key, size_t len)
{
    const mcr_ring *r = w->r;
    (void)key, (void)len;
    w->key = mcr__key64(w->hash);
    if (r->nservers > 1)
        (void)jump_next(r, &w->key); /* the primary's keys */
    w->own = mcr__walk_budget(r);
    w->sweep = true;
}

static uint32_t jump_walk_step(mcr__walk *w, size_t s)
{
    (void)s;
    return jump_next(w->r, &w->key);
}

static mcr__shape jump_shape(const mcr_ring *r)
{
    (void)r;
    return MCR__SHAPE_JUMP;
}

/* ---- memcached-proxy-jump, mcrouter-ch3, mcrouter-wch3 ---- */

/*
 * The bucket of these modes is the server's index in the list of active
 * servers: no map, no holes, no weights, as in the proxies. The ring's
 * table is that identity, so that a diff reads them as jump buckets: furc,
 * like jump, moves a key to a new last bucket with probability 1/n and
 * never elsewhere, which is the model the diff counts with.
 */
static int keyjump_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                         mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                         mcr_error *err)
{
    bool wch3 = r->mode == MCR_MODE_MCROUTER_WCH3;
    (void)p, (void)servers, (void)points, (void)npoints, (void)map, (void)nmap;
    for (uint32_t i = 0; i < r->nservers && !wch3; i++)
        if (r->servers[i].weight != 1)
            return mcr__error(err, MCR_ERR_RANGE, "%s has no weights: server %s has weight %u",
                              mcr_mode_name(r->mode), r->servers[i].name,
                              (unsigned)r->servers[i].weight);
    if (r->mode != MCR_MODE_MEMCACHED_PROXY_JUMP && r->nservers > MCR__FURC_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "%s: %u servers, furc_hash takes at most %u",
                          mcr_mode_name(r->mode), (unsigned)r->nservers,
                          (unsigned)MCR__FURC_MAX);
    if (wch3) { /* WeightedCh3's thresholds, from weights in millionths */
        r->accept = malloc(r->nservers * sizeof(*r->accept));
        if (r->accept == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %u servers",
                              (unsigned)r->nservers);
        for (uint32_t i = 0; i < r->nservers; i++) {
            if (r->servers[i].weight > MCR_WCH3_WEIGHT_ONE)
                return mcr__error(err, MCR_ERR_RANGE,
                                  "mcrouter-wch3: server %s has weight %u millionths, above 1.0",
                                  r->servers[i].name, (unsigned)r->servers[i].weight);
            r->accept[i] = mcr__wch3_accept(r->servers[i].weight);
        }
    }
    r->table = malloc(r->nservers * sizeof(*r->table));
    if (r->table == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %u servers",
                          (unsigned)r->nservers);
    for (uint32_t i = 0; i < r->nservers; i++)
        r->table[i] = i;
    r->ntable = r->nservers;
    return MCR_OK;
}

static int keyjump_build(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    return keyjump_adopt(r, NULL, cfg->servers, NULL, 0, NULL, 0, err);
}

static uint32_t keyjump_locate(const mcr_ring *r, const void *key, size_t len)
{
    if (r->mode == MCR_MODE_MEMCACHED_PROXY_JUMP) /* proxy_jump_hash.c, seed 0 */
        return mcr__jump(XXH3_64bits_withSeed(key, len, 0), r->nservers);
    const void *rk;
    size_t rklen;
    mcr__mcrouter_routing_key(key, len, &rk, &rklen);
    if (r->accept != NULL) /* mcrouter-wch3 */
        return mcr__wch3(rk, rklen, r->accept, r->nservers);
    return mcr__furc(rk, rklen, r->nservers);
}

/* Neither proxy has replicas: the primary, then the sweep. */
static void keyjump_walk_init(mcr__walk *w, const void *key, size_t len)
{
    (void)key, (void)len;
    w->own = 1;
    w->sweep = true;
}

static uint32_t keyjump_walk_step(mcr__walk *w, size_t s)
{
    (void)s;
    return w->primary; /* never called: the sequence is the primary alone */
}

const mcr__family mcr__family_jump = {
    .name = "jump",
    .build = mcr__ring_build_map,
    .adopt = jump_adopt,
    .find = jump_find,
    .locate = NULL,
    .walk_init = jump_walk_init,
    .walk_step = jump_walk_step,
    .shape = jump_shape,
    .default_map = jump_default_map,
};

const mcr__family mcr__family_keyjump = {
    .name = "keyjump",
    .build = keyjump_build,
    .adopt = keyjump_adopt,
    .find = mcr__find_no_server, /* the key places it (.locate) */
    .locate = keyjump_locate,
    .walk_init = keyjump_walk_init,
    .walk_step = keyjump_walk_step,
    .shape = jump_shape,
};
