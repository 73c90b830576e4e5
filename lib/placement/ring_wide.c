/* SPDX-License-Identifier: BSD-3-Clause */
/* ring_wide.c: "envoy-ring-hash": Envoy's RING_HASH, a continuum of 64-bit points kept apart from the 32-bit continua. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ring_internal.h"

/*
 * Written from Envoy's published source, not copied:
 * source/extensions/load_balancing_policies/ring_hash/ring_hash_lb.cc
 * (RingHashLoadBalancer::Ring::Ring, Ring::chooseHost) with the weights
 * normalised as .../common/thread_aware_lb_impl.cc does, in the same
 * double arithmetic and order. test/test_proxies.c has the fixed vectors
 * of Envoy's ring_hash_lb_test.cc.
 *
 * The points are 64-bit: r->wide (values) and r->wide_server, apart from
 * the 32-bit r->points that the other continua search inline, whose
 * layout and lookups this family leaves as they are.
 */

typedef struct wide_point {
    uint64_t value;
    uint32_t server;
} wide_point;

/* Envoy sorts by hash alone with std::sort (not stable); equal hashes
 * would need equal XXH64 of distinct "address_i" strings, so ties are
 * broken by server index only to be deterministic. */
static int wide_cmp(const void *a, const void *b)
{
    const wide_point *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    return (x->server > y->server) - (x->server < y->server);
}

/* Host i's "name_" + decimal j, hashed. */
static uint64_t point_hash(char *buf, size_t len, uint64_t j)
{
    char digits[24];
    size_t nd = 0;
    do {
        digits[nd++] = (char)('0' + j % 10);
        j /= 10;
    } while (j != 0);
    for (size_t d = 0; d < nd; d++)
        buf[len + d] = digits[nd - 1 - d];
    return XXH64(buf, len + nd, 0);
}

int mcr__envoy_ring_points(const char *const *name, const size_t *len, const uint32_t *weight,
                           size_t n, uint64_t min_size, uint64_t **value, uint32_t **server,
                           size_t *npoints)
{
    /* normalizeHostWeights: weight * 1.0 / sum; min_w starts at 1.0 */
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += weight[i];
    double min_w = 1.0;
    for (size_t i = 0; i < n; i++) {
        double w = (double)weight[i] * 1.0 / (double)sum;
        if (w < min_w)
            min_w = w;
    }
    /* std::min(ceil(min_w * min_ring_size) / min_w, max_ring_size) */
    double scale = ceil(min_w * (double)min_size) / min_w;
    if ((double)MCR__ENVOY_RING_MAX < scale)
        scale = (double)MCR__ENVOY_RING_MAX;

    /* First count the points (the running sums, no hashing), then make
     * them: the count is ceil(scale) or a point more or less. */
    size_t total = 0;
    double current = 0.0, target = 0.0;
    for (size_t i = 0; i < n; i++) {
        target += scale * ((double)weight[i] * 1.0 / (double)sum);
        while (current < target) {
            current++;
            total++;
        }
    }
    wide_point *pt = malloc((total ? total : 1) * sizeof(*pt));
    size_t maxlen = 0;
    for (size_t i = 0; i < n; i++)
        maxlen = len[i] > maxlen ? len[i] : maxlen;
    char *buf = malloc(maxlen + 24);
    if (pt == NULL || buf == NULL) {
        free(pt);
        free(buf);
        return MCR_ERR_NOMEM;
    }
    size_t k = 0;
    current = 0.0, target = 0.0;
    for (size_t i = 0; i < n; i++) {
        memcpy(buf, name[i], len[i]);
        buf[len[i]] = '_';
        target += scale * ((double)weight[i] * 1.0 / (double)sum);
        for (uint64_t j = 0; current < target; j++, current++) {
            pt[k].value = point_hash(buf, len[i] + 1, j);
            pt[k++].server = (uint32_t)i;
        }
    }
    free(buf);
    qsort(pt, k, sizeof(*pt), wide_cmp);
    *value = malloc((k ? k : 1) * sizeof(**value));
    *server = malloc((k ? k : 1) * sizeof(**server));
    if (*value == NULL || *server == NULL) {
        free(pt);
        free(*value);
        free(*server);
        *value = NULL;
        *server = NULL;
        return MCR_ERR_NOMEM;
    }
    for (size_t i = 0; i < k; i++) {
        (*value)[i] = pt[i].value;
        (*server)[i] = pt[i].server;
    }
    free(pt);
    *npoints = k;
    return MCR_OK;
}

/* Envoy's chooseHost is libketama's bisection (ketama_get_server): it
 * answers the first point >= h, and point 0 when h is above them all or
 * at most the first (h = 0 included). Here a bisection without branches
 * on the data (a conditional move a step), which a random key's hash
 * would mispredict half the time. */
size_t mcr__envoy_ring_find(const uint64_t *value, size_t n, uint64_t h)
{
    const uint64_t *base = value;
    size_t len = n;
    while (len > 1) {
        size_t half = len / 2;
        base = base[half - 1] < h ? base + half : base;
        len -= half;
    }
    size_t i = (size_t)(base - value) + (*base < h);
    return i == n ? 0 : i;
}

static int wide_adopt(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                      mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                      mcr_error *err)
{
    (void)p, (void)servers, (void)points, (void)npoints, (void)map, (void)nmap;
    mcr__envoy_hosts h;
    int rc = mcr__envoy_hosts_of(r, &h, err);
    if (rc != MCR_OK)
        return rc;
    rc = mcr__envoy_ring_points(h.name, h.len, h.weight, r->nservers, MCR__ENVOY_RING_MIN,
                                &r->wide, &r->wide_server, &r->nwide);
    mcr__envoy_hosts_clear(&h);
    if (rc != MCR_OK)
        return mcr__error(err, rc, "out of memory for a ring of %u servers",
                          (unsigned)r->nservers);
    return MCR_OK;
}

static int wide_build(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    return wide_adopt(r, NULL, cfg->servers, NULL, 0, NULL, 0, err);
}

static uint32_t wide_locate(const mcr_ring *r, const void *key, size_t len)
{
    return r->wide_server[mcr__envoy_ring_find(r->wide, r->nwide, XXH64(key, len, 0))];
}

/* The servers of the next points along the ring, as Envoy's retries walk
 * (midp + attempt); every server has a point. */
static void wide_walk_init(mcr__walk *w, const void *key, size_t len)
{
    const mcr_ring *r = w->r;
    w->pos = mcr__envoy_ring_find(r->wide, r->nwide, XXH64(key, len, 0));
    w->own = r->nwide;
}

static uint32_t wide_walk_step(mcr__walk *w, size_t s)
{
    const mcr_ring *r = w->r;
    size_t i = w->pos + s;
    return r->wide_server[i < r->nwide ? i : i - r->nwide];
}

const uint64_t *mcr__ring_wide(const mcr_ring *r, const uint32_t **server, size_t *n)
{
    *server = r->wide_server;
    *n = r->nwide;
    return r->wide;
}

static mcr__shape wide_shape(const mcr_ring *r)
{
    (void)r;
    return MCR__SHAPE_WIDE;
}

const mcr__family mcr__family_envoy_ring = {
    .name = "envoy-ring-hash",
    .build = wide_build,
    .adopt = wide_adopt,
    .find = mcr__find_no_server, /* the key places it (.locate) */
    .locate = wide_locate,
    .walk_init = wide_walk_init,
    .walk_step = wide_walk_step,
    .shape = wide_shape,
};
