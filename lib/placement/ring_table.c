/* SPDX-License-Identifier: BSD-3-Clause */
/* ring_table.c: the modes that look a key up in a table, entry hash % size:
 * "maglev" (a table computed from the servers' permutations), "slots"
 * (Redis Cluster's CRC-16 slots, a map kept by the snapshot) and
 * "envoy-maglev" (Envoy's Maglev table, entry XXH64(key) % 65537). */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ring_internal.h"

static uint32_t table_find(const mcr_ring *r, uint32_t hash)
{
    return r->table[hash % r->ntable];
}

/* ---- maglev ---- */

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

static int maglev_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                        mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                        mcr_error *err)
{
    (void)points, (void)npoints, (void)map, (void)nmap;
    if (p->table_size < 2 || p->table_size > MCR_MAGLEV_SIZE_MAX || !mcr__is_prime(p->table_size))
        return mcr__error(err, MCR_ERR_RANGE, "maglev: table size %u is not a prime in 2..%u",
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
}

static int maglev_build(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    mcr__params p;
    mcr__config_params(cfg, &p);
    return maglev_adopt(r, &p, cfg->servers, NULL, 0, NULL, 0, err);
}

/* The next entries of the table, then the sweep. */
static void maglev_walk_init(mcr__walk *w, const void *key, size_t len)
{
    (void)key, (void)len;
    w->pos = w->hash % w->r->ntable;
    w->own = w->r->ntable;
    w->sweep = true;
}

static uint32_t maglev_walk_step(mcr__walk *w, size_t s)
{
    return w->r->table[(w->pos + s) % w->r->ntable];
}

static mcr__shape maglev_shape(const mcr_ring *r)
{
    (void)r;
    return MCR__SHAPE_RESIDUES; /* the runs of equal entries */
}

/* ---- envoy-maglev ---- */

/*
 * Written from Envoy's published source, not copied:
 * source/extensions/load_balancing_policies/maglev/maglev_lb.cc
 * (MaglevTable::constructMaglevTableInternal, OriginalMaglevTable::
 * constructImplementationInternals) with the weights normalised as
 * .../common/thread_aware_lb_impl.cc (normalizeHostWeights) does: the same
 * double arithmetic in the same order, so that a weighted table is the
 * same entry for entry. test/test_proxies.c has the fixed vectors of
 * Envoy's maglev_lb_test.cc.
 */

typedef struct envoy_entry {
    const char *name; /* the host key: the address as Envoy prints it */
    size_t len;
    uint32_t host;    /* the index given */
    uint64_t offset, skip, next;
    double weight, target;
} envoy_entry;

/* std::sort of (key, ...) tuples: the keys' bytes, unsigned, then length.
 * Keys are distinct (a config refuses a server twice). */
static int envoy_entry_cmp(const void *a, const void *b)
{
    const envoy_entry *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, n);
    if (c != 0)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

int mcr__envoy_maglev_fill(const char *const *name, const size_t *len, const uint32_t *weight,
                           size_t n, uint32_t size, uint32_t *table)
{
    envoy_entry *e = malloc((n ? n : 1) * sizeof(*e));
    unsigned char *taken = calloc(size, 1);
    if (e == NULL || taken == NULL) {
        free(e);
        free(taken);
        return MCR_ERR_NOMEM;
    }
    /* normalizeHostWeights: weight * 1.0 / sum, and the largest */
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += weight[i];
    double max_w = 0.0;
    for (size_t i = 0; i < n; i++) {
        double w = (double)weight[i] * 1.0 / (double)sum;
        if (w > max_w)
            max_w = w;
        e[i] = (envoy_entry){name[i], len[i], (uint32_t)i, 0, 0, 0, w, 0.0};
    }
    qsort(e, n, sizeof(*e), envoy_entry_cmp);
    for (size_t i = 0; i < n; i++) {
        e[i].offset = XXH64(e[i].name, e[i].len, 0) % size;
        e[i].skip = XXH64(e[i].name, e[i].len, 1) % (size - 1) + 1;
    }
    /* The paper's listing 1, each host taking a turn every max_w / w
     * rounds: a host at the largest weight takes one every round. */
    uint64_t filled = 0;
    for (uint32_t iteration = 1; filled < size; iteration++) {
        for (size_t i = 0; i < n && filled < size; i++) {
            envoy_entry *x = &e[i];
            if ((double)iteration * x->weight < x->target)
                continue;
            x->target += max_w;
            uint64_t c = (x->offset + x->skip * x->next) % size;
            while (taken[c]) {
                x->next++;
                c = (x->offset + x->skip * x->next) % size;
            }
            taken[c] = 1;
            table[c] = x->host;
            x->next++;
            filled++;
        }
    }
    free(e);
    free(taken);
    return MCR_OK;
}

/* Envoy's weights: 1 or more each (load_balancing_weight), their sum a
 * uint32_t (validateEndpoints). */
int mcr__envoy_hosts_of(const mcr_ring *r, mcr__envoy_hosts *h, mcr_error *err)
{
    size_t n = r->nservers;
    uint64_t sum = 0;
    memset(h, 0, sizeof(*h));
    for (size_t i = 0; i < n; i++)
        sum += r->servers[i].weight;
    if (sum > UINT32_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "%s: the weights sum to %llu, Envoy's limit is %u",
                          mcr_mode_name(r->mode), (unsigned long long)sum, (unsigned)UINT32_MAX);
    h->name = malloc((n ? n : 1) * sizeof(*h->name));
    h->len = malloc((n ? n : 1) * sizeof(*h->len));
    h->weight = malloc((n ? n : 1) * sizeof(*h->weight));
    if (h->name == NULL || h->len == NULL || h->weight == NULL) {
        mcr__envoy_hosts_clear(h);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu hosts", n);
    }
    for (size_t i = 0; i < n; i++) {
        h->name[i] = r->servers[i].name;
        h->len[i] = strlen(h->name[i]);
        h->weight[i] = r->servers[i].weight;
    }
    return MCR_OK;
}

void mcr__envoy_hosts_clear(mcr__envoy_hosts *h)
{
    free(h->name);
    free(h->len);
    free(h->weight);
    memset(h, 0, sizeof(*h));
}

static int envoy_maglev_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                              mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                              mcr_error *err)
{
    (void)p, (void)servers, (void)points, (void)npoints, (void)map, (void)nmap;
    mcr__envoy_hosts h;
    int rc = mcr__envoy_hosts_of(r, &h, err);
    if (rc != MCR_OK)
        return rc;
    r->table = malloc(MCR__ENVOY_MAGLEV_SIZE * sizeof(*r->table));
    rc = r->table != NULL ? mcr__envoy_maglev_fill(h.name, h.len, h.weight, r->nservers,
                                                  MCR__ENVOY_MAGLEV_SIZE, r->table)
                          : MCR_ERR_NOMEM;
    mcr__envoy_hosts_clear(&h);
    if (rc != MCR_OK)
        return mcr__error(err, rc, "out of memory for a maglev table of %u entries",
                          (unsigned)MCR__ENVOY_MAGLEV_SIZE);
    r->ntable = MCR__ENVOY_MAGLEV_SIZE;
    return MCR_OK;
}

static int envoy_maglev_build(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    return envoy_maglev_adopt(r, NULL, cfg->servers, NULL, 0, NULL, 0, err);
}

static uint32_t envoy_maglev_locate(const mcr_ring *r, const void *key, size_t len)
{
    return r->table[XXH64(key, len, 0) % MCR__ENVOY_MAGLEV_SIZE];
}

/* As "maglev": the next entries of the table from the key's, then the
 * sweep. */
static void envoy_maglev_walk_init(mcr__walk *w, const void *key, size_t len)
{
    w->pos = XXH64(key, len, 0) % MCR__ENVOY_MAGLEV_SIZE;
    w->own = w->r->ntable;
    w->sweep = true;
}

/* ---- slots ---- */

/* The table's slots shared out by largest remainders of the weights, each
 * server's slots in a row. */
static int slots_default_map(const mcr__params *p, const uint32_t *weight, size_t n,
                             uint32_t **map, size_t *nmap, mcr_error *err)
{
    uint32_t total = p->table_size;
    uint32_t *m = malloc((total > 0 ? total : 1) * sizeof(*m));
    uint32_t *quota = malloc((n > 0 ? n : 1) * sizeof(*quota));

    if (m == NULL || quota == NULL || mcr__quotas(weight, n, total, quota) != MCR_OK) {
        free(m);
        free(quota);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a table of %llu entries",
                          (unsigned long long)total);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < quota[i]; j++)
            m[k++] = (uint32_t)i;
    free(quota);
    *map = m;
    *nmap = total;
    return MCR_OK;
}

static int slots_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                       mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                       mcr_error *err)
{
    int rc = MCR_OK;
    (void)servers, (void)points, (void)npoints;

    r->crc_keys = true;
    if (map == NULL || nmap != p->table_size || nmap == 0 || nmap > MCR_SLOTS_MAX) {
        free(map);
        return mcr__error(err, MCR_ERR_INVALID, "internal error: a slot map of %zu slots", nmap);
    }
    for (size_t i = 0; i < nmap && rc == MCR_OK; i++)
        if (map[i] != MCR__HOLE && map[i] >= r->nservers)
            rc = mcr__error(err, MCR_ERR_INVALID, "internal error: slot %zu names no server", i);
    r->table = rc == MCR_OK ? malloc(nmap * sizeof(*r->table)) : NULL;
    if (rc == MCR_OK &&
        (r->table == NULL || mcr__slots_resolve(r->table, map, (uint32_t)nmap, r->nservers) != MCR_OK))
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu slots", nmap);
    r->ntable = (uint32_t)nmap;
    free(map);
    return rc;
}

/* The slots the key's slot probes (not the contiguous next ones), a few
 * per server, then the sweep. */
static void slots_walk_init(mcr__walk *w, const void *key, size_t len)
{
    (void)key, (void)len;
    w->pos = w->hash % w->r->ntable;
    w->own = mcr__walk_budget(w->r);
    w->sweep = true;
}

static uint32_t slots_walk_step(mcr__walk *w, size_t s)
{
    const mcr_ring *r = w->r;
    return r->table[mcr__slot_probe((uint32_t)w->pos, (uint32_t)s, r->ntable)];
}

static mcr__shape slots_shape(const mcr_ring *r)
{
    (void)r;
    return MCR__SHAPE_SLOTS;
}

const mcr__family mcr__family_maglev = {
    .name = "maglev",
    .build = maglev_build,
    .adopt = maglev_adopt,
    .find = table_find,
    .locate = NULL,
    .walk_init = maglev_walk_init,
    .walk_step = maglev_walk_step,
    .shape = maglev_shape,
};

const mcr__family mcr__family_slots = {
    .name = "slots",
    .build = mcr__ring_build_map,
    .adopt = slots_adopt,
    .find = table_find,
    .locate = NULL,
    .walk_init = slots_walk_init,
    .walk_step = slots_walk_step,
    .shape = slots_shape,
    .default_map = slots_default_map,
};

/* The table's entries are residues of the key's XXH64 rather than of the
 * 32-bit key hash, but a diff between two of them counts the same entries:
 * the share of the table that changed (lib/snapshot/diff.c compares them
 * with nothing else). */
const mcr__family mcr__family_envoy_maglev = {
    .name = "envoy-maglev",
    .build = envoy_maglev_build,
    .adopt = envoy_maglev_adopt,
    .find = mcr__find_no_server, /* the key places it (.locate) */
    .locate = envoy_maglev_locate,
    .walk_init = envoy_maglev_walk_init,
    .walk_step = maglev_walk_step,
    .shape = maglev_shape,
};
