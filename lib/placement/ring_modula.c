/* SPDX-License-Identifier: BSD-3-Clause */
/* ring_modula.c: "modula" (hash % servers) and the weighted modula of
 * "twemproxy-modula" and "buckets" (each server `weight` entries in a row,
 * entry hash % total weight). */
#include <stdlib.h>

#include "ring_internal.h"

static int modula_build(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    (void)r, (void)cfg, (void)err;
    return MCR_OK;
}

static int modula_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                        mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                        mcr_error *err)
{
    (void)r, (void)p, (void)servers, (void)points, (void)npoints, (void)map, (void)nmap;
    (void)err;
    return MCR_OK;
}

static uint32_t modula_find(const mcr_ring *r, uint32_t hash)
{
    return hash % r->nservers;
}

static int build_cum_weights(mcr_ring *r, const mcr__server *servers, size_t n,
                             mcr_error *err)
{
    r->cum_weight = malloc(n * sizeof(*r->cum_weight));
    if (r->cum_weight == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu weights", n);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += servers[i].weight;
        r->cum_weight[i] = sum;
    }
    r->total_weight = sum;
    return MCR_OK;
}

static int wmodula_build(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    return build_cum_weights(r, cfg->servers, cfg->count, err);
}

static int wmodula_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                         mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                         mcr_error *err)
{
    (void)p, (void)points, (void)npoints, (void)map, (void)nmap;
    return build_cum_weights(r, servers, r->nservers, err);
}

/* nutcracker lays every server out `weight` times in a row and takes entry
 * hash % total; the same entry is found here by bisecting the running sums. */
static uint32_t wmodula_find(const mcr_ring *r, uint32_t hash)
{
    uint64_t e = hash % r->total_weight;
    size_t lo = 0, hi = r->nservers - 1;
    while (lo < hi) { /* first i with cum_weight[i] > e */
        size_t mid = lo + (hi - lo) / 2;
        if (r->cum_weight[mid] > e)
            hi = mid;
        else
            lo = mid + 1;
    }
    return (uint32_t)lo;
}

/* Both walk to the next servers in order, every server once, no sweep. */
static void modula_walk_init(mcr__walk *w, const void *key, size_t len)
{
    (void)key, (void)len;
    w->own = w->r->nservers;
}

static uint32_t modula_walk_step(mcr__walk *w, size_t s)
{
    return (uint32_t)((w->primary + s) % w->r->nservers);
}

static mcr__shape modula_shape(const mcr_ring *r)
{
    (void)r;
    return MCR__SHAPE_RESIDUES;
}

uint32_t mcr__ring_residues(const mcr_ring *r, uint32_t b)
{
    return r->cum_weight != NULL ? r->servers[b].weight : 1;
}

const mcr__family mcr__family_modula = {
    .name = "modula",
    .build = modula_build,
    .adopt = modula_adopt,
    .find = modula_find,
    .locate = NULL,
    .walk_init = modula_walk_init,
    .walk_step = modula_walk_step,
    .shape = modula_shape,
};

const mcr__family mcr__family_wmodula = {
    .name = "weighted modula",
    .build = wmodula_build,
    .adopt = wmodula_adopt,
    .find = wmodula_find,
    .locate = NULL,
    .walk_init = modula_walk_init,
    .walk_step = modula_walk_step,
    .shape = modula_shape,
};
