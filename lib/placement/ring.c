/* SPDX-License-Identifier: BSD-3-Clause */
/* ring.c: building the immutable continuum (or table) from a config, and the key lookups on it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement_internal.h"
#include "ringsearch.h"

/* libmemcached (MEMCACHED_MAX_KEY - 1): with HASH_WITH_NAMESPACE, a
 * namespace + key longer than this hashes to 0 instead of being hashed. */
#define LMC_PREFIXED_KEY_MAX 250
/* The points array ends with this many sentinels (see ringsearch.h). */
#define SCAN_WIDTH MCR__RING_PAD
/* "jump": jumps tried from new keys before a key that lands in a hole
 * settles for the list of buckets that are not (see jump_next). With half
 * the buckets holes, 64 misses in a row happen once in 2^64 keys. */
#define JUMP_TRIES 64
/* The walks of "jump" and "slots" (replicas, bounded loads): new keys, or
 * probed slots, tried per active server before the sweep takes over, and
 * at most this many in all. */
#define WALK_PER_SERVER 4
#define WALK_MAX 1024
/* The walk of "rendezvous" selects its first candidates by scanning every
 * server's time; beyond this many it sorts them once. */
#define RDV_SCANS 4

typedef mcr__point point;

/* Which point of a continuum owns a key hash h (see mcr_mode(3)). */
enum lookup_rule {
    RULE_SUCC,      /* the first point >= h, wrapping; of equal points the
                       first (libmemcached, libketama, twemproxy, ...) */
    RULE_SUCC_LAST, /* the same, but of equal points the last
                       (spymemcached's TreeMap: a later put overwrites) */
    RULE_PRED,      /* the last point <= h, wrapping to the last point (dalli) */
    RULE_BUCKETS    /* php-memcache: bucket h % 1024, each bucket the
                       successor of an evenly spaced position */
};
/* php-memcache (memcache_consistent_hash.c): MMC_CONSISTENT_BUCKETS, and the
 * position of bucket b, b x (0xffffffff / 1024). */
#define PHP_BUCKETS 1024u
#define PHP_BUCKET_STEP (0xffffffffu / PHP_BUCKETS)

typedef struct ring_server {
    const char *host; /* points into ring->strings */
    const char *name; /* "host:port" / "[host]:port", into ring->strings */
    const char *pyname; /* "host:port" without brackets: pymemcache's node */
    size_t pylen;       /* strlen(pyname), not counted again per key */
    int port;
    uint32_t weight;
} ring_server;

struct mcr_ring {
    mcr_mode mode;
    mcr__kind kind;
    mcr_hash key_hash;
    uint32_t nservers;
    size_t npoints;
    point *points;        /* ascending by value; ties in server order; then
                             SCAN_WIDTH sentinels {UINT32_MAX, owner of
                             points[0]} that make the wrap-around implicit */
    mcr__search search;   /* which point owns a hash (ringsearch.h) */
    ring_server *servers;
    char *strings;        /* hosts and names of all servers */
    bool special_hash;    /* any of the key rules below: take the slow path */
    bool empty_is_zero;   /* twemproxy: an empty key hashes to 0 */
    bool tag_on;          /* twemproxy hash_tag */
    char tag[2];
    uint64_t *cum_weight; /* twemproxy-modula: running sums of the weights */
    uint64_t total_weight;
    bool prefix_on;       /* libmemcached HASH_WITH_NAMESPACE rules apply */
    size_t prefix_len;
    unsigned char prefix[256];
    bool crc_keys;        /* "slots": keys hash with CRC-16/XMODEM */
    uint32_t *table;      /* "jump": bucket -> ring index or MCR__HOLE;
                             "maglev", "slots": entry -> ring index */
    uint32_t ntable;
    uint32_t njump;       /* "jump": the buckets jumped over: up to the last
                             that is not a hole (trailing holes would only
                             send keys elsewhere that had their place) */
    uint32_t *live;       /* "jump": the buckets that are not holes */
    uint32_t nlive;
    uint64_t *seeds;      /* "rendezvous": per server, mcr__id_seed(id) */
    enum lookup_rule rule;
    uint32_t *bucket_point; /* RULE_BUCKETS: bucket -> point index */
};

/* ------------------------------------------------------------ building */

/* Stable sort by value. Points are generated in server order, so stability
 * gives the references' tie rule (their merge-based qsort keeps insertion
 * order): among equal values the earlier server comes first. */
MCR__DEFINE_STABLE_SORT(stable_sort_points, point)

int mcr__sort_points(point *p, size_t n)
{
    return stable_sort_points(p, n);
}

/* Index r->points, checking on the way what the lookup relies on: values
 * ascending, servers in range. MCR_OK, MCR_ERR_NOMEM, or MCR_ERR_INVALID
 * (with `err` filled) for a broken continuum. */
static int build_index(mcr_ring *r, mcr_error *err)
{
    return mcr__search_build(&r->search, r->points, r->npoints, r->nservers, err);
}

static inline uint32_t find_index(const mcr_ring *r, uint32_t h);

/* Sort (unless `sorted`), check and index r->points (r->npoints of them). */
static int finish_points(mcr_ring *r, bool sorted, mcr_error *err)
{
    if (!sorted && mcr__sort_points(r->points, r->npoints) != MCR_OK)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory sorting %zu points", r->npoints);
    for (size_t i = 0; i < SCAN_WIDTH; i++) {
        r->points[r->npoints + i].value = UINT32_MAX;
        r->points[r->npoints + i].server = r->npoints > 0 ? r->points[0].server : 0;
    }
    int rc = build_index(r, err);
    if (rc != MCR_OK || r->rule != RULE_BUCKETS || r->npoints == 0)
        return rc;
    /* php-memcache's buckets: the owner of each bucket's position, and the
     * servers again as a table (the diffs read it as residues) */
    r->bucket_point = malloc(PHP_BUCKETS * sizeof(*r->bucket_point));
    r->table = malloc(PHP_BUCKETS * sizeof(*r->table));
    if (r->bucket_point == NULL || r->table == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %u buckets",
                          (unsigned)PHP_BUCKETS);
    for (uint32_t b = 0; b < PHP_BUCKETS; b++) {
        uint32_t i = find_index(r, b * PHP_BUCKET_STEP);
        r->bucket_point[b] = i == r->npoints ? 0 : i;
        r->table[b] = r->points[r->bucket_point[b]].server;
    }
    r->ntable = PHP_BUCKETS;
    return MCR_OK;
}

static int build_points(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    mcr__params par;
    mcr__config_params(cfg, &par);
    uint64_t total_weight = 0;
    size_t total = 0;
    uint32_t per_label, n = (uint32_t)cfg->count;
    char label[MCR__NAME_BUF];

    for (size_t i = 0; i < cfg->count; i++)
        total_weight += cfg->servers[i].weight;
    for (size_t i = 0; i < cfg->count; i++)
        total += (size_t)mcr__labels_for(par.mode, cfg->servers[i].weight, total_weight, n,
                                         &per_label) *
                 per_label;
    if (total > UINT32_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "continuum of %zu points is too large", total);
    r->points = malloc((total + SCAN_WIDTH) * sizeof(*r->points));
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
        ring_server *d = &r->servers[i];
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

/* ---- the native table modes ---- */

int mcr__default_map(const mcr__params *p, const uint32_t *weight, size_t n, uint32_t **map,
                     size_t *nmap, mcr_error *err)
{
    uint64_t total = 0;
    uint32_t *m, *quota = NULL;

    if (p->mode == MCR_MODE_JUMP) {
        for (size_t i = 0; i < n; i++)
            total += weight[i];
        if (total > MCR__JUMP_BUCKETS_MAX)
            return mcr__error(err, MCR_ERR_RANGE,
                              "jump: %llu buckets (the total weight) are more than %u",
                              (unsigned long long)total, (unsigned)MCR__JUMP_BUCKETS_MAX);
    } else {
        total = p->table_size;
    }
    m = malloc((total > 0 ? total : 1) * sizeof(*m));
    if (p->mode == MCR_MODE_SLOTS)
        quota = malloc((n > 0 ? n : 1) * sizeof(*quota));
    if (m == NULL || (p->mode == MCR_MODE_SLOTS &&
                      (quota == NULL || mcr__quotas(weight, n, (uint32_t)total, quota) != MCR_OK))) {
        free(m);
        free(quota);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a table of %llu entries",
                          (unsigned long long)total);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t j = 0, c = quota != NULL ? quota[i] : weight[i]; j < c; j++)
            m[k++] = (uint32_t)i;
    free(quota);
    *map = m;
    *nmap = (size_t)total;
    return MCR_OK;
}

/* The Maglev table of the ring's servers (ids as mcr__server_id gives them). */
static int build_maglev(mcr_ring *r, const mcr__server *servers, uint32_t m, mcr_error *err)
{
    size_t n = r->nservers;
    uint32_t *offset = malloc(n * sizeof(*offset)), *skip = malloc(n * sizeof(*skip));
    uint32_t *weight = malloc(n * sizeof(*weight));
    char buf[MCR__NAME_BUF];
    int rc = MCR_ERR_NOMEM;

    r->table = malloc((size_t)m * sizeof(*r->table));
    if (offset != NULL && skip != NULL && weight != NULL && r->table != NULL) {
        for (size_t i = 0; i < n; i++) {
            const char *id = mcr__server_id(&servers[i], buf);
            mcr__maglev_perm(id, strlen(id), m, &offset[i], &skip[i]);
            weight[i] = servers[i].weight;
        }
        rc = mcr__maglev_fill(offset, skip, weight, n, m, r->table);
    }
    free(offset);
    free(skip);
    free(weight);
    if (rc != MCR_OK)
        return mcr__error(err, rc, "out of memory for a maglev table of %u entries", (unsigned)m);
    r->ntable = m;
    return MCR_OK;
}

/* The table of a ring in a table mode; `map` (jump, slots) is taken over. */
static int build_table(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                       uint32_t *map, size_t nmap, mcr_error *err)
{
    char buf[MCR__NAME_BUF];
    int rc = MCR_OK;

    switch (p->mode) {
    case MCR_MODE_JUMP:
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
    case MCR_MODE_SLOTS:
        if (map == NULL || nmap != p->table_size || nmap == 0 || nmap > MCR_SLOTS_MAX) {
            free(map);
            return mcr__error(err, MCR_ERR_INVALID, "internal error: a slot map of %zu slots",
                              nmap);
        }
        for (size_t i = 0; i < nmap && rc == MCR_OK; i++)
            if (map[i] != MCR__HOLE && map[i] >= r->nservers)
                rc = mcr__error(err, MCR_ERR_INVALID, "internal error: slot %zu names no server",
                                i);
        r->table = rc == MCR_OK ? malloc(nmap * sizeof(*r->table)) : NULL;
        if (rc == MCR_OK && (r->table == NULL || mcr__slots_resolve(r->table, map, (uint32_t)nmap,
                                                                     r->nservers) != MCR_OK))
            rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu slots", nmap);
        r->ntable = (uint32_t)nmap;
        free(map);
        return rc;
    case MCR_MODE_MAGLEV:
        free(map);
        if (p->table_size < 2 || p->table_size > MCR_MAGLEV_SIZE_MAX ||
            !mcr__is_prime(p->table_size))
            return mcr__error(err, MCR_ERR_RANGE,
                              "maglev: table size %u is not a prime in 2..%u",
                              (unsigned)p->table_size, (unsigned)MCR_MAGLEV_SIZE_MAX);
        if ((uint64_t)r->nservers * MCR__MAGLEV_MIN_FACTOR > p->table_size)
            return mcr__error(err, MCR_ERR_RANGE,
                              "maglev: a table of %u entries holds at most %u servers (100 "
                              "entries each), not %u: build with a larger table "
                              "(mcr_config_set_table_size)",
                              (unsigned)p->table_size,
                              (unsigned)(p->table_size / MCR__MAGLEV_MIN_FACTOR),
                              (unsigned)r->nservers);
        return build_maglev(r, servers, p->table_size, err);
    case MCR_MODE_RENDEZVOUS:
        free(map);
        r->seeds = malloc(r->nservers * sizeof(*r->seeds));
        if (r->seeds == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %u servers",
                              (unsigned)r->nservers);
        for (uint32_t i = 0; i < r->nservers; i++) {
            const char *id = mcr__server_id(&servers[i], buf);
            r->seeds[i] = mcr__id_seed(id, strlen(id));
        }
        return MCR_OK;
    default:
        free(map);
        return mcr__error(err, MCR_ERR_INVALID, "internal error: mode %d has no table",
                          (int)p->mode);
    }
}

static int ring_alloc(const mcr__params *p, const mcr__server *servers, size_t n,
                      mcr_ring **out, mcr_error *err)
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
    r->kind = mcr__mode_kind(p->mode);
    r->key_hash = p->key_hash;
    r->nservers = (uint32_t)n;
    r->prefix_on = p->prefix_on;
    r->prefix_len = p->prefix_len;
    memcpy(r->prefix, p->prefix, p->prefix_len);
    r->tag_on = p->tag_on;
    memcpy(r->tag, p->tag, sizeof(r->tag));
    r->empty_is_zero =
        p->mode == MCR_MODE_TWEMPROXY_KETAMA || p->mode == MCR_MODE_TWEMPROXY_MODULA;
    r->crc_keys = p->mode == MCR_MODE_SLOTS;
    r->rule = p->mode == MCR_MODE_SPYMEMCACHED || p->mode == MCR_MODE_SPYMEMCACHED_LIBMEMCACHED
                  ? RULE_SUCC_LAST
              : p->mode == MCR_MODE_DALLI        ? RULE_PRED
              : p->mode == MCR_MODE_PHP_MEMCACHE ? RULE_BUCKETS
                                                 : RULE_SUCC;
    if (p->mode == MCR_MODE_PYMEMCACHE)
        for (size_t i = 0; i < n; i++)
            if (servers[i].weight != 1) {
                free(r);
                return mcr__error(err, MCR_ERR_RANGE,
                                  "pymemcache has no weights: server %s has weight %u",
                                  servers[i].host, (unsigned)servers[i].weight);
            }
    r->special_hash = r->prefix_on || r->tag_on || r->empty_is_zero || r->crc_keys;
    int rc = copy_servers(r, servers, n, err);
    if (rc != MCR_OK) {
        mcr_ring_free(r);
        return rc;
    }
    *out = r;
    return MCR_OK;
}

static int ring_alloc_cfg(const mcr_config *cfg, mcr_ring **out, mcr_error *err)
{
    mcr__params p;

    if (cfg == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config");
    mcr__config_params(cfg, &p);
    return ring_alloc(&p, cfg->servers, cfg->count, out, err);
}

int mcr__ring_build(const mcr__params *p, const mcr__server *servers, size_t n,
                    mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                    mcr_ring **out, mcr_error *err)
{
    mcr_ring *r;
    int rc = MCR_OK;
    mcr__kind kind = (int)p->mode < 0 || p->mode >= MCR_MODE_COUNT ? MCR__KIND_POINTS
                                                                    : mcr__mode_kind(p->mode);
    bool takes_map = mcr__mode_has_map(p->mode);

    if (out == NULL || (int)p->mode < 0 || p->mode >= MCR_MODE_COUNT ||
        (kind == MCR__KIND_POINTS) == (points == NULL) || takes_map == (map == NULL)) {
        free(points);
        free(map);
        return mcr__error(err, MCR_ERR_INVALID, "invalid ring parameters");
    }
    rc = ring_alloc(p, servers, n, &r, err);
    if (rc != MCR_OK) {
        free(points);
        free(map);
        return rc;
    }
    if (kind == MCR__KIND_WMODULA) {
        rc = build_cum_weights(r, servers, n, err);
    } else if (kind == MCR__KIND_POINTS) {
        r->points = points;
        r->npoints = npoints;
        if (npoints > UINT32_MAX)
            rc = mcr__error(err, MCR_ERR_RANGE, "continuum of %zu points is too large", npoints);
        else
            rc = finish_points(r, true, err);
    } else if (kind != MCR__KIND_MODULA && kind != MCR__KIND_PYMEMCACHE) {
        rc = build_table(r, p, servers, map, nmap, err);
    }
    if (rc != MCR_OK) {
        mcr_ring_free(r);
        return rc;
    }
    *out = r;
    return MCR_OK;
}

int mcr__ring_new_points(const mcr_config *cfg, const uint32_t *values,
                         const uint32_t *servers, size_t n, mcr_ring **out, mcr_error *err)
{
    mcr_ring *r;
    int rc;

    if (out == NULL || (n > 0 && (values == NULL || servers == NULL)))
        return mcr__error(err, MCR_ERR_INVALID, "NULL output or points");
    rc = ring_alloc_cfg(cfg, &r, err);
    if (rc != MCR_OK)
        return rc;
    r->points = malloc((n + SCAN_WIDTH) * sizeof(*r->points));
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
    *out = r;
    return MCR_OK;
}

/* A table mode's ring from a config: the default map (jump, slots). */
static int build_table_cfg(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    mcr__params p;
    uint32_t *map = NULL;
    size_t nmap = 0;

    mcr__config_params(cfg, &p);
    if (mcr__mode_has_map(p.mode)) {
        uint32_t *w = malloc(cfg->count * sizeof(*w));
        if (w == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu servers", cfg->count);
        for (size_t i = 0; i < cfg->count; i++)
            w[i] = cfg->servers[i].weight;
        int rc = mcr__default_map(&p, w, cfg->count, &map, &nmap, err);
        free(w);
        if (rc != MCR_OK)
            return rc;
    }
    return build_table(r, &p, cfg->servers, map, nmap, err);
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
    rc = ring_alloc_cfg(cfg, &r, err);
    if (rc != MCR_OK)
        return rc;
    switch (r->kind) {
    case MCR__KIND_WMODULA:
        rc = build_cum_weights(r, cfg->servers, cfg->count, err);
        break;
    case MCR__KIND_MODULA:
    case MCR__KIND_PYMEMCACHE:
        break;
    case MCR__KIND_POINTS:
        rc = build_points(r, cfg, err);
        break;
    default:
        rc = build_table_cfg(r, cfg, err);
        break;
    }
    if (rc != MCR_OK) {
        mcr_ring_free(r);
        return rc;
    }
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

static inline uint32_t find_index(const mcr_ring *r, uint32_t h)
{
    return mcr__search_index(&r->search, r->points, h);
}

/* The point that owns h under a rule other than RULE_SUCC (npoints > 0). */
static __attribute__((noinline)) uint32_t rule_point(const mcr_ring *r, uint32_t h)
{
    const point *p = r->points;
    uint32_t n = (uint32_t)r->npoints, i;

    switch (r->rule) {
    case RULE_SUCC_LAST:
        i = find_index(r, h);
        if (i == n)
            i = 0;
        while (i + 1 < n && p[i + 1].value == p[i].value)
            i++;
        return i;
    case RULE_PRED:
        i = h == UINT32_MAX ? n : find_index(r, h + 1); /* the first point > h */
        return i == 0 ? n - 1 : i - 1;
    case RULE_BUCKETS:
        return r->bucket_point[h % PHP_BUCKETS];
    default:
        i = find_index(r, h);
        return i == n ? 0 : i;
    }
}

static inline uint32_t find_point(const mcr_ring *r, uint32_t h)
{
    if (MCR__UNLIKELY(r->rule != RULE_SUCC))
        return r->points[rule_point(r, h)].server;
    /* an index of npoints is a sentinel, which carries the wrap to point 0 */
    return mcr__search_server(&r->search, r->points, h);
}

/* nutcracker lays every server out `weight` times in a row and takes entry
 * hash % total; the same entry is found here by bisecting the running sums. */
static uint32_t weighted_modula(const mcr_ring *r, uint32_t hash)
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

/* "jump": the server of the bucket that key *k jumps to; if that bucket is
 * a hole (its server is not active), the same for the next key mix(*k), and
 * so on; after JUMP_TRIES holes in a row, a bucket that is not a hole
 * chosen by the last key. *k is left at the key after the one used, where
 * the walk (replicas) goes on. */
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

/* "rendezvous": the server with the lowest time -ln(u) / weight, which is
 * the highest score -weight / ln(u); ties to the lower index. */
static uint32_t rendezvous(const mcr_ring *r, uint32_t hash)
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

/* pymemcache's RendezvousHash.get_node: the highest score, of equal scores
 * the larger node name. */
static uint32_t pymemcache_find(const mcr_ring *r, const void *key, size_t len)
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

static __attribute__((noinline)) uint32_t native_find(const mcr_ring *r, uint32_t hash)
{
    switch (r->kind) {
    case MCR__KIND_JUMP: {
        uint64_t k = mcr__key64(hash);
        return jump_next(r, &k);
    }
    case MCR__KIND_TABLE:
        return r->table[hash % r->ntable];
    case MCR__KIND_RENDEZVOUS:
        return rendezvous(r, hash);
    case MCR__KIND_PYMEMCACHE:
        return UINT32_MAX; /* a hash places no key: the key does */
    default:
        return 0;
    }
}

static inline uint32_t ring_find(const mcr_ring *r, uint32_t hash)
{
    if (r->mode == MCR_MODE_MODULA)
        return hash % r->nservers;
    if (r->kind == MCR__KIND_WMODULA)
        return weighted_modula(r, hash);
    if (MCR__UNLIKELY(r->npoints == 0))
        return r->kind == MCR__KIND_POINTS ? 0 : native_find(r, hash);
    return find_point(r, hash);
}

uint32_t mcr_ring_find(const mcr_ring *r, uint32_t hash)
{
    return ring_find(r, hash);
}

size_t mcr_ring_find_point(const mcr_ring *r, uint32_t hash)
{
    if (r->npoints == 0)
        return SIZE_MAX;
    if (r->rule != RULE_SUCC)
        return rule_point(r, hash);
    size_t i = find_index(r, hash);
    return i == r->npoints ? 0 : i;
}

uint32_t mcr_ring_locate(const mcr_ring *r, const void *key, size_t len)
{
    if (r->nservers == 1)
        return 0; /* libmemcached does not even hash */
    if (MCR__UNLIKELY(r->kind == MCR__KIND_PYMEMCACHE))
        return pymemcache_find(r, key, len);
    return ring_find(r, ring_hash(r, key, len));
}

void mcr_ring_locate_many(const mcr_ring *r, const void *const *keys, const size_t *lens,
                          size_t n, uint32_t *out)
{
    if (r->nservers == 1 || r->kind == MCR__KIND_PYMEMCACHE) {
        for (size_t i = 0; i < n; i++)
            out[i] = r->nservers == 1 ? 0 : pymemcache_find(r, keys[i], lens[i]);
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

static int rdv_before(const mcr__walk *w, uint32_t a, uint32_t b)
{
    if (w->times[a] != w->times[b])
        return w->times[a] < w->times[b];
    if (w->r->kind == MCR__KIND_PYMEMCACHE) /* equal scores: the larger name first */
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

void mcr__walk_init(mcr__walk *w, const mcr_ring *r, const void *key, size_t len)
{
    uint32_t hash = ring_hash(r, key, len);

    memset(w, 0, offsetof(mcr__walk, local));
    w->r = r;
    w->hash = hash;
    w->primary = r->nservers == 1 ? 0 : mcr_ring_locate(r, key, len);
    switch (r->kind) {
    case MCR__KIND_POINTS:
        w->own = r->npoints;
        w->pos = r->npoints == 0 ? 0 : mcr_ring_find_point(r, hash);
        break;
    case MCR__KIND_MODULA:
    case MCR__KIND_WMODULA:
        w->own = r->nservers;
        break;
    case MCR__KIND_JUMP:
        w->key = mcr__key64(hash);
        if (r->nservers > 1)
            (void)jump_next(r, &w->key); /* the primary's keys */
        w->own = (size_t)r->nservers * WALK_PER_SERVER;
        if (w->own > WALK_MAX)
            w->own = WALK_MAX;
        break;
    case MCR__KIND_TABLE:
        w->pos = hash % r->ntable;
        w->own = r->ntable;
        if (r->crc_keys) { /* slots: the probes, not the (contiguous) next slots */
            w->own = (size_t)r->nservers * WALK_PER_SERVER;
            if (w->own > WALK_MAX)
                w->own = WALK_MAX;
        }
        break;
    case MCR__KIND_PYMEMCACHE:
    case MCR__KIND_RENDEZVOUS: {
        uint32_t n = r->nservers;
        size_t bytes = (size_t)n * (sizeof(double) + 2 * sizeof(uint32_t));
        w->times = bytes <= sizeof(w->local) ? w->local : malloc(bytes);
        if (w->times == NULL) {
            w->own = 1; /* the primary, then the sweep */
            break;
        }
        w->order = (uint32_t *)(void *)(w->times + n);
        uint64_t k = mcr__key64(hash);
        for (uint32_t i = 0; i < n; i++)
            w->times[i] = r->kind == MCR__KIND_PYMEMCACHE
                              ? -(double)mcr__pymemcache_score(r->servers[i].pyname,
                                                               r->servers[i].pylen, key, len)
                              : mcr__rdv_time(k, r->seeds[i], r->servers[i].weight);
        w->own = n;
        w->last = w->primary;
        break;
    }
    }
}

uint32_t mcr__walk_next(mcr__walk *w)
{
    const mcr_ring *r = w->r;
    size_t s = w->step++;

    if (s == 0)
        return w->primary;
    if (s < w->own) {
        switch (r->kind) {
        case MCR__KIND_POINTS: {
            size_t i = w->pos + s;
            return r->points[i < r->npoints ? i : i - r->npoints].server;
        }
        case MCR__KIND_MODULA:
        case MCR__KIND_WMODULA:
            return (uint32_t)((w->primary + s) % r->nservers);
        case MCR__KIND_JUMP:
            return jump_next(r, &w->key);
        case MCR__KIND_TABLE:
            if (r->crc_keys)
                return r->table[mcr__slot_probe((uint32_t)w->pos, (uint32_t)s, r->ntable)];
            return r->table[(w->pos + s) % r->ntable];
        case MCR__KIND_PYMEMCACHE:
        case MCR__KIND_RENDEZVOUS:
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
    }
    /* The sweep, for the native table modes only: the continuum and modula
     * modes meet only servers that own something, as their references do. */
    if (r->kind == MCR__KIND_POINTS || r->kind == MCR__KIND_MODULA ||
        r->kind == MCR__KIND_WMODULA ||
        ((r->kind == MCR__KIND_RENDEZVOUS || r->kind == MCR__KIND_PYMEMCACHE) && w->times != NULL))
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

size_t mcr_ring_server_count(const mcr_ring *r)
{
    return r == NULL ? 0 : r->nservers;
}

const mcr__point *mcr__ring_points(const mcr_ring *r)
{
    return r->points;
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

int mcr__ring_rule_is_succ(const mcr_ring *r)
{
    return r->rule == RULE_SUCC;
}
