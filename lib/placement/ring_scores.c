/* SPDX-License-Identifier: BSD-3-Clause */
/* ring_scores.c: the modes where every server scores a key and the best
 * wins: "rendezvous" (weighted, from the key hash) and "pymemcache"
 * (pymemcache's RendezvousHash, from the key itself, no weights). */
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"

/* The walk selects its first candidates by scanning every server's time;
 * beyond this many it sorts them once. */
#define RDV_SCANS 4

static int rendezvous_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                            mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                            mcr_error *err)
{
    char buf[MCR__NAME_BUF];
    (void)p, (void)points, (void)npoints, (void)map, (void)nmap;

    r->seeds = malloc(r->nservers * sizeof(*r->seeds));
    if (r->seeds == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %u servers",
                          (unsigned)r->nservers);
    for (uint32_t i = 0; i < r->nservers; i++) {
        const char *id = mcr__server_id(&servers[i], buf);
        r->seeds[i] = mcr__id_seed(id, strlen(id));
    }
    return MCR_OK;
}

static int rendezvous_build(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    return rendezvous_adopt(r, NULL, cfg->servers, NULL, 0, NULL, 0, err);
}

/* The server with the lowest time -ln(u) / weight, which is the highest
 * score -weight / ln(u); ties to the lower index. */
static uint32_t rendezvous_find(const mcr_ring *r, uint32_t hash)
{
    uint64_t k = mcr__key64(hash);
    uint32_t best = 0;
    double bt = mcr__rdv_time(k, r->seeds[0], r->servers[0].weight);
    for (uint32_t i = 1; i < r->nservers; i++) {
        double t = mcr__rdv_time(k, r->seeds[i], r->servers[i].weight);
        if (t < bt) {
            bt = t;
            best = i;
        }
    }
    return best;
}

/* pymemcache has no weights: MCR_ERR_RANGE naming a server whose is not 1. */
static int pymemcache_check(const mcr_ring *r, mcr_error *err)
{
    for (uint32_t i = 0; i < r->nservers; i++)
        if (r->servers[i].weight != 1)
            return mcr__error(err, MCR_ERR_RANGE,
                              "pymemcache has no weights: server %s has weight %u",
                              r->servers[i].host, (unsigned)r->servers[i].weight);
    return MCR_OK;
}

static int pymemcache_build(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    (void)cfg;
    return pymemcache_check(r, err);
}

static int pymemcache_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                            mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                            mcr_error *err)
{
    (void)p, (void)servers, (void)points, (void)npoints, (void)map, (void)nmap;
    return pymemcache_check(r, err);
}

/* pymemcache's RendezvousHash.get_node: the highest score, of equal scores
 * the larger node name. */
static uint32_t pymemcache_locate(const mcr_ring *r, const void *key, size_t len)
{
    uint32_t best = 0;
    const char *bn = r->servers[0].pyname;
    uint32_t bs = mcr__pymemcache_score(bn, r->servers[0].pylen, key, len);
    for (uint32_t i = 1; i < r->nservers; i++) {
        const char *nm = r->servers[i].pyname;
        uint32_t sc = mcr__pymemcache_score(nm, r->servers[i].pylen, key, len);
        if (sc > bs || (sc == bs && strcmp(nm, bn) > 0)) {
            bs = sc;
            bn = nm;
            best = i;
        }
    }
    return best;
}

/* ---- the walk: the servers by score, best first ---- */

static int rdv_before(const mcr__walk *w, uint32_t a, uint32_t b)
{
    if (w->times[a] != w->times[b])
        return w->times[a] < w->times[b];
    if (w->r->family == &mcr__family_pymemcache) /* equal scores: the larger name first */
        return strcmp(w->r->servers[a].pyname, w->r->servers[b].pyname) > 0;
    return a < b;
}

/* Sort w->order (every server) by time into the walk's order: a merge sort
 * with `tmp` as scratch, since qsort's comparison could see the times only
 * through a global, and walks run in many threads at once. */
static void rdv_sort(mcr__walk *w, uint32_t *tmp)
{
    uint32_t n = w->r->nservers, *a = w->order, *b = tmp;
    for (uint32_t width = 1; width < n; width *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * width) {
            uint32_t mid = lo + width < n ? lo + width : n;
            uint32_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                b[k++] = rdv_before(w, a[j], a[i]) ? a[j++] : a[i++];
            while (i < mid)
                b[k++] = a[i++];
            while (j < hi)
                b[k++] = a[j++];
        }
        uint32_t *t = a;
        a = b;
        b = t;
    }
    if (a != w->order)
        memcpy(w->order, a, n * sizeof(*a));
}

/* Every server's time (pymemcache: its score, negated), kept in the walk;
 * without memory for them the walk is the primary and the sweep. */
static void scores_walk_init(mcr__walk *w, const void *key, size_t len)
{
    const mcr_ring *r = w->r;
    uint32_t n = r->nservers;
    size_t bytes = (size_t)n * (sizeof(double) + 2 * sizeof(uint32_t));
    bool py = r->family == &mcr__family_pymemcache;

    w->times = bytes <= sizeof(w->local) ? w->local : malloc(bytes);
    if (w->times == NULL) {
        w->own = 1;
        w->sweep = true;
        return;
    }
    w->order = (uint32_t *)(void *)(w->times + n);
    uint64_t k = mcr__key64(w->hash);
    for (uint32_t i = 0; i < n; i++)
        w->times[i] =
            py ? -(double)mcr__pymemcache_score(r->servers[i].pyname, r->servers[i].pylen, key, len)
               : mcr__rdv_time(k, r->seeds[i], r->servers[i].weight);
    w->own = n;
    w->last = w->primary;
}

static uint32_t scores_walk_step(mcr__walk *w, size_t s)
{
    const mcr_ring *r = w->r;

    if (s < RDV_SCANS) { /* the best after the last one */
        uint32_t best = UINT32_MAX;
        for (uint32_t i = 0; i < r->nservers; i++)
            if (rdv_before(w, w->last, i) && (best == UINT32_MAX || rdv_before(w, i, best)))
                best = i;
        return w->last = best;
    }
    if (s == RDV_SCANS) {
        for (uint32_t i = 0; i < r->nservers; i++)
            w->order[i] = i;
        rdv_sort(w, w->order + r->nservers);
    }
    return w->last = w->order[s];
}

static mcr__shape scores_shape(const mcr_ring *r)
{
    (void)r;
    return MCR__SHAPE_SCORES;
}

const mcr__family mcr__family_rendezvous = {
    .name = "rendezvous",
    .build = rendezvous_build,
    .adopt = rendezvous_adopt,
    .find = rendezvous_find,
    .locate = NULL,
    .walk_init = scores_walk_init,
    .walk_step = scores_walk_step,
    .shape = scores_shape,
};

const mcr__family mcr__family_pymemcache = {
    .name = "pymemcache",
    .build = pymemcache_build,
    .adopt = pymemcache_adopt,
    .find = mcr__find_no_server, /* the key places it (.locate) */
    .locate = pymemcache_locate,
    .walk_init = scores_walk_init,
    .walk_step = scores_walk_step,
    .shape = scores_shape,
};
