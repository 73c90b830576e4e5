/* SPDX-License-Identifier: BSD-3-Clause */
/* ring_points.c: the continuum modes: points from the servers' labels, the
 * rule that picks a key's point, and the walk along the continuum. */
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"

/* Stable sort by value. Points are generated in server order, so stability
 * gives the references' tie rule (their merge-based qsort keeps insertion
 * order): among equal values the earlier server comes first. */
MCR__DEFINE_STABLE_SORT(stable_sort_points, mcr__point)

int mcr__sort_points(mcr__point *p, size_t n)
{
    return stable_sort_points(p, n);
}

static mcr__rule mode_rule(mcr_mode m)
{
    switch (m) {
    case MCR_MODE_SPYMEMCACHED:
    case MCR_MODE_SPYMEMCACHED_LIBMEMCACHED: return MCR__RULE_SUCC_LAST;
    case MCR_MODE_DALLI: return MCR__RULE_PRED;
    case MCR_MODE_PHP_MEMCACHE: return MCR__RULE_BUCKETS;
    default: return MCR__RULE_SUCC;
    }
}

/* php-memcache's buckets: the owner of each bucket's position, and the
 * servers again as a table (the diffs read it as residues). */
static int build_buckets(mcr_ring *r, mcr_error *err)
{
    r->bucket_point = malloc(MCR__PHP_BUCKETS * sizeof(*r->bucket_point));
    r->table = malloc(MCR__PHP_BUCKETS * sizeof(*r->table));
    if (r->bucket_point == NULL || r->table == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %u buckets",
                          (unsigned)MCR__PHP_BUCKETS);
    for (uint32_t b = 0; b < MCR__PHP_BUCKETS; b++) {
        uint32_t i = mcr__ring_succ_index(r, b * MCR__PHP_BUCKET_STEP);
        r->bucket_point[b] = i == r->npoints ? 0 : i;
        r->table[b] = r->points[r->bucket_point[b]].server;
    }
    r->ntable = MCR__PHP_BUCKETS;
    return MCR_OK;
}

/* Sort (unless `sorted`), check and index r->points (r->npoints of them):
 * MCR_OK, MCR_ERR_NOMEM, or MCR_ERR_INVALID (with `err` filled) for a
 * broken continuum (values not ascending, a server out of range). */
static int finish_points(mcr_ring *r, bool sorted, mcr_error *err)
{
    r->rule = mode_rule(r->mode);
    if (!sorted && mcr__sort_points(r->points, r->npoints) != MCR_OK)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory sorting %zu points", r->npoints);
    for (size_t i = 0; i < MCR__SCAN_WIDTH; i++) {
        r->points[r->npoints + i].value = UINT32_MAX;
        r->points[r->npoints + i].server = r->npoints > 0 ? r->points[0].server : 0;
    }
    int rc = mcr__search_build(&r->search, r->points, r->npoints, r->nservers, err);
    if (rc != MCR_OK || r->rule != MCR__RULE_BUCKETS || r->npoints == 0)
        return rc;
    return build_buckets(r, err);
}

/* memcached's proxy has no weights: MCR_ERR_RANGE naming a server whose
 * weight is not 1. */
static int check_weightless(const mcr_ring *r, mcr_error *err)
{
    if (r->mode != MCR_MODE_MEMCACHED_PROXY_RING_KETAMA)
        return MCR_OK;
    for (uint32_t i = 0; i < r->nservers; i++)
        if (r->servers[i].weight != 1)
            return mcr__error(err, MCR_ERR_RANGE, "%s has no weights: server %s has weight %u",
                              mcr_mode_name(r->mode), r->servers[i].name,
                              (unsigned)r->servers[i].weight);
    return MCR_OK;
}

static int points_build(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    mcr__params par;
    mcr__config_params(cfg, &par);
    uint64_t total_weight = 0;
    size_t total = 0;
    uint32_t per_label, n = (uint32_t)cfg->count;
    char label[MCR__NAME_BUF];
    int rc = check_weightless(r, err);

    if (rc != MCR_OK)
        return rc;
    for (size_t i = 0; i < cfg->count; i++)
        total_weight += cfg->servers[i].weight;
    for (size_t i = 0; i < cfg->count; i++)
        total += (size_t)mcr__labels_for(par.mode, cfg->servers[i].weight, total_weight, n,
                                         &per_label) *
                 per_label;
    if (total > UINT32_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "continuum of %zu points is too large", total);
    r->points = malloc((total + MCR__SCAN_WIDTH) * sizeof(*r->points));
    if (r->points == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu points", total);

    /* The values of each server's labels are computed into the value
     * fields, then the server numbers are filled in behind them. */
    uint32_t *v = malloc((total > 0 ? total : 1) * sizeof(*v));
    if (v == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu points", total);
    size_t k = 0;
    for (size_t i = 0; i < cfg->count; i++) {
        const mcr__server *s = &cfg->servers[i];
        uint32_t nl = mcr__labels_for(par.mode, s->weight, total_weight, n, &per_label);
        size_t pl = mcr__label_prefix(par.mode, s, label);
        if (pl == 0) {
            free(v);
            return mcr__error(err, MCR_ERR_NOMEM,
                              "out of memory looking up the name of server %s:%d", s->host,
                              s->port);
        }
        mcr__label_values(par.mode, label, pl, per_label, par.point_hash, 0, nl, v + k);
        for (size_t e = k + (size_t)nl * per_label; k < e; k++) {
            r->points[k].value = v[k];
            r->points[k].server = (uint32_t)i;
        }
    }
    free(v);
    r->npoints = k;
    return finish_points(r, false, err);
}

static int points_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                        mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                        mcr_error *err)
{
    (void)p, (void)servers, (void)map, (void)nmap;
    r->points = points;
    r->npoints = npoints;
    int rc = check_weightless(r, err);
    if (rc != MCR_OK)
        return rc;
    if (npoints > UINT32_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "continuum of %zu points is too large", npoints);
    return finish_points(r, true, err);
}

int mcr__ring_new_points(const mcr_config *cfg, const uint32_t *values,
                         const uint32_t *servers, size_t n, mcr_ring **out, mcr_error *err)
{
    mcr_ring *r;
    int rc;

    if (out == NULL || (n > 0 && (values == NULL || servers == NULL)))
        return mcr__error(err, MCR_ERR_INVALID, "NULL output or points");
    rc = mcr__ring_alloc_cfg(cfg, &r, err);
    if (rc != MCR_OK)
        return rc;
    r->family = &mcr__family_points;
    r->points = malloc((n + MCR__SCAN_WIDTH) * sizeof(*r->points));
    if (r->points == NULL) {
        mcr_ring_free(r);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu points", n);
    }
    for (size_t i = 0; i < n; i++) {
        if (servers[i] >= r->nservers) {
            rc = mcr__error(err, MCR_ERR_INVALID, "point %zu names server %u of %u", i,
                            (unsigned)servers[i], (unsigned)r->nservers);
            mcr_ring_free(r);
            return rc;
        }
        r->points[i].value = values[i];
        r->points[i].server = servers[i];
    }
    r->npoints = n;
    rc = n > 0 ? finish_points(r, false, err) : mcr__error(err, MCR_ERR_EMPTY, "no points");
    if (rc != MCR_OK) {
        mcr_ring_free(r);
        return rc;
    }
    mcr__ring_finish(r);
    *out = r;
    return MCR_OK;
}

/* The point that owns h (npoints > 0). */
static uint32_t rule_point(const mcr_ring *r, uint32_t h)
{
    const mcr__point *p = r->points;
    uint32_t n = (uint32_t)r->npoints, i;

    switch (r->rule) {
    case MCR__RULE_SUCC_LAST:
        i = mcr__ring_succ_index(r, h);
        if (i == n)
            i = 0;
        while (i + 1 < n && p[i + 1].value == p[i].value)
            i++;
        return i;
    case MCR__RULE_PRED:
        i = h == UINT32_MAX ? n : mcr__ring_succ_index(r, h + 1); /* the first point > h */
        return i == 0 ? n - 1 : i - 1;
    case MCR__RULE_BUCKETS:
        return r->bucket_point[h % MCR__PHP_BUCKETS];
    default:
        i = mcr__ring_succ_index(r, h);
        return i == n ? 0 : i;
    }
}

size_t mcr_ring_find_point(const mcr_ring *r, uint32_t hash)
{
    if (r->npoints == 0)
        return SIZE_MAX;
    return rule_point(r, hash);
}

/* The rules other than the successor one, and a continuum without points
 * (every weight 0), whose keys go to server 0. */
static uint32_t points_find(const mcr_ring *r, uint32_t hash)
{
    if (r->npoints == 0)
        return 0;
    return r->points[rule_point(r, hash)].server;
}

static void points_walk_init(mcr__walk *w, const void *key, size_t len)
{
    const mcr_ring *r = w->r;
    (void)key, (void)len;
    w->own = r->npoints;
    w->pos = r->npoints == 0 ? 0 : rule_point(r, w->hash);
}

/* The servers of the next points, as the references walk for replicas;
 * no sweep: the walk meets only servers that own points. */
static uint32_t points_walk_step(mcr__walk *w, size_t s)
{
    const mcr_ring *r = w->r;
    size_t i = w->pos + s;
    return r->points[i < r->npoints ? i : i - r->npoints].server;
}

static mcr__shape points_shape(const mcr_ring *r)
{
    /* php-memcache's 1024 buckets are residues of the key hash (one
     * server: not even hashed) */
    if (r->rule == MCR__RULE_BUCKETS && r->nservers > 1)
        return MCR__SHAPE_RESIDUES;
    return MCR__SHAPE_CONTINUUM;
}

int mcr__ring_rule_is_succ(const mcr_ring *r)
{
    return r->rule == MCR__RULE_SUCC;
}

const mcr__point *mcr__ring_points(const mcr_ring *r)
{
    return r->points;
}

const mcr__family mcr__family_points = {
    .name = "continuum",
    .build = points_build,
    .adopt = points_adopt,
    .find = points_find,
    .locate = NULL,
    .walk_init = points_walk_init,
    .walk_step = points_walk_step,
    .shape = points_shape,
};
