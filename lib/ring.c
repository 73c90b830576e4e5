/* ring.c: building the immutable continuum from a config, and the key lookups on it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* libmemcached: MEMCACHED_POINTS_PER_SERVER (unweighted consistent modes). */
#define LMC_POINTS_PER_SERVER 100
/* libmemcached and twemproxy: points per server at average weight, weighted. */
#define KETAMA_POINTS_PER_SERVER 160
/* Points drawn from one MD5 digest: four little-endian 32-bit words. */
#define POINTS_PER_DIGEST MCR__POINTS_PER_DIGEST
/* stable-ketama: labels per unit of weight (160 points, as a libmemcached
 * server of average weight). */
#define STABLE_LABELS_PER_WEIGHT 40
/* libketama: labels per server at average weight (160 points / 4 per digest). */
#define LIBKETAMA_LABELS_PER_SERVER 40.0
/* libmemcached (MEMCACHED_MAX_KEY - 1): with HASH_WITH_NAMESPACE, a
 * namespace + key longer than this hashes to 0 instead of being hashed. */
#define LMC_PREFIXED_KEY_MAX 250
/* Largest bucket index: 2^22 buckets (16 MiB) is plenty for 1.6 M points. */
#define INDEX_BITS_MAX 22
/* A bucket holding at most this many points is resolved by counting, without
 * branches, how many of the next SCAN_WIDTH points lie below the hash; larger
 * buckets (rare) are bisected. The points array ends with SCAN_WIDTH sentinels
 * so the count never reads past it. */
#define SCAN_WIDTH MCR__RING_PAD
_Static_assert(SCAN_WIDTH == 4, "find_point() counts exactly four points");

typedef mcr__point point;

typedef struct ring_server {
    const char *host; /* points into ring->strings */
    const char *name; /* "host:port" / "[host]:port", into ring->strings */
    int port;
    uint32_t weight;
} ring_server;

struct mcr_ring {
    mcr_mode mode;
    mcr_hash key_hash;
    uint32_t nservers;
    size_t npoints;
    point *points;        /* ascending by value; ties in server order; then
                             SCAN_WIDTH sentinels {UINT32_MAX, owner of
                             points[0]} that make the wrap-around implicit */
    uint32_t *index;      /* index[b]: first point with value >= b << shift */
    unsigned shift;       /* 32 - index bits */
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
};

/* ------------------------------------------------------------ building */

uint32_t mcr__labels_for(mcr_mode mode, uint32_t weight, uint64_t total_weight, uint32_t n,
                         uint32_t *per_label)
{
    float pct = (float)weight / (float)total_weight;

    switch (mode) {
    case MCR_MODE_KETAMA:
        /* libketama: floorf(pct * 40.0 * (float)numservers); the product is
         * a double, converted to float by floorf's parameter. */
        *per_label = POINTS_PER_DIGEST;
        return (uint32_t)floorf((float)(pct * LIBKETAMA_LABELS_PER_SERVER * (float)n));
    case MCR_MODE_WEIGHTED:
    case MCR_MODE_SPY_WEIGHTED: {
        /* libmemcached: floorf((float)(pct * 160 / 4 * live + 1e-10F)) * 4
         * points, all in float arithmetic. */
        float f = pct * (float)KETAMA_POINTS_PER_SERVER / (float)POINTS_PER_DIGEST * (float)n +
                  0.0000000001F;
        *per_label = POINTS_PER_DIGEST;
        return (uint32_t)floorf(f);
    }
    case MCR_MODE_TWEMPROXY_KETAMA: {
        /* nutcracker: floorf((float)(pct * 160 / 4 * live + 0.0000000001)) * 4
         * points: float products, the epsilon added in double. */
        float f = pct * (float)KETAMA_POINTS_PER_SERVER / (float)POINTS_PER_DIGEST * (float)n;
        *per_label = POINTS_PER_DIGEST;
        return (uint32_t)floorf((float)((double)f + 0.0000000001));
    }
    case MCR_MODE_CONSISTENT:
    case MCR_MODE_SPY:
        *per_label = 1;
        return LMC_POINTS_PER_SERVER;
    case MCR_MODE_STABLE_KETAMA: /* its own weight only: nobody else's count moves */
        *per_label = POINTS_PER_DIGEST;
        return STABLE_LABELS_PER_WEIGHT * weight;
    default:
        *per_label = 0;
        return 0;
    }
}

size_t mcr__label_prefix(mcr_mode mode, const mcr__server *s, char *buf)
{
    if (s->label != NULL && (mode == MCR_MODE_KETAMA || mode == MCR_MODE_TWEMPROXY_KETAMA ||
                             mode == MCR_MODE_STABLE_KETAMA))
        return (size_t)sprintf(buf, "%s-", s->label);
    switch (mode) {
    case MCR_MODE_KETAMA: /* libketama: the address as written, "host:port-" */
    case MCR_MODE_STABLE_KETAMA: /* the default id, "host:port-" */
        if (s->ipv6)
            return (size_t)sprintf(buf, "[%s]:%d-", s->host, s->port);
        return (size_t)sprintf(buf, "%s:%d-", s->host, s->port);
    case MCR_MODE_SPY:
    case MCR_MODE_SPY_WEIGHTED: /* spymemcached's "/host:port-" */
        return (size_t)sprintf(buf, "/%s:%d-", s->host, s->port);
    default: /* libmemcached drops the default port */
        if (s->port == MCR_DEFAULT_PORT)
            return (size_t)sprintf(buf, "%s-", s->host);
        return (size_t)sprintf(buf, "%s:%d-", s->host, s->port);
    }
}

static size_t put_uint(char *p, uint32_t v)
{
    char tmp[10];
    size_t n = 0, i;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

void mcr__label_values(char *prefix, size_t plen, uint32_t per_label, mcr_hash point_hash,
                       uint32_t from, uint32_t to, uint32_t *out)
{
    for (uint32_t j = from; j < to; j++) {
        size_t len = plen + put_uint(prefix + plen, j);
        if (per_label == POINTS_PER_DIGEST) {
            mcr__md5_words(prefix, len, out);
            out += POINTS_PER_DIGEST;
        } else {
            *out++ = mcr__hash_key(point_hash, prefix, len);
        }
    }
}

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
    unsigned bits = 1;
    while (bits < INDEX_BITS_MAX && ((size_t)1 << (bits + 1)) <= r->npoints)
        bits++;
    size_t nb = (size_t)1 << bits;
    r->shift = 32 - bits;
    r->index = malloc((nb + 1) * sizeof(*r->index));
    if (r->index == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for the continuum index");
    /* index[b], the first point whose bucket is >= b, is the number of
     * points in buckets below b: count the points of each bucket (into the
     * slot after it), then sum. No data-dependent branch, unlike walking
     * buckets and points together, whose mispredictions cost ~8x as much
     * (publishing a snapshot pays this for every build). */
    const point *pts = r->points;
    uint32_t *idx = r->index, n = (uint32_t)r->npoints, sum = 0;
    uint32_t prev = 0, nservers = r->nservers, bad = 0;
    unsigned shift = r->shift;
    memset(idx, 0, (nb + 1) * sizeof(*idx));
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = pts[i].value;
        bad |= (uint32_t)(v < prev) | (uint32_t)(pts[i].server >= nservers);
        prev = v;
        idx[(v >> shift) + 1]++;
    }
    if (bad)
        return mcr__error(err, MCR_ERR_INVALID,
                          "internal error: continuum not sorted, or a point names no server");
    for (size_t b = 0; b <= nb; b++) {
        sum += idx[b];
        idx[b] = sum;
    }
    return MCR_OK;
}

/* Sort (unless `sorted`), check and index r->points (r->npoints of them). */
static int finish_points(mcr_ring *r, bool sorted, mcr_error *err)
{
    if (!sorted && mcr__sort_points(r->points, r->npoints) != MCR_OK)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory sorting %zu points", r->npoints);
    for (size_t i = 0; i < SCAN_WIDTH; i++) {
        r->points[r->npoints + i].value = UINT32_MAX;
        r->points[r->npoints + i].server = r->npoints > 0 ? r->points[0].server : 0;
    }
    return build_index(r, err);
}

static int build_points(mcr_ring *r, const mcr_config *cfg, mcr_error *err)
{
    uint64_t total_weight = 0;
    size_t total = 0;
    uint32_t per_label, n = (uint32_t)cfg->count;
    char label[MCR__NAME_BUF];

    for (size_t i = 0; i < cfg->count; i++) {
        const mcr__server *s = &cfg->servers[i];
        if (cfg->mode == MCR_MODE_STABLE_KETAMA && s->weight > MCR_STABLE_WEIGHT_MAX)
            return mcr__error(err, MCR_ERR_RANGE,
                              "weight %u of %s is above %u, the limit of stable-ketama",
                              (unsigned)s->weight, mcr__server_id(s, label),
                              (unsigned)MCR_STABLE_WEIGHT_MAX);
        total_weight += s->weight;
    }
    for (size_t i = 0; i < cfg->count; i++)
        total += (size_t)mcr__labels_for(cfg->mode, cfg->servers[i].weight, total_weight, n,
                                         &per_label) *
                 per_label;
    if (total > UINT32_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "continuum of %zu points is too large", total);
    r->points = malloc((total + SCAN_WIDTH) * sizeof(*r->points));
    if (r->points == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu points", total);

    size_t k = 0;
    for (size_t i = 0; i < cfg->count; i++) {
        const mcr__server *s = &cfg->servers[i];
        uint32_t nl = mcr__labels_for(cfg->mode, s->weight, total_weight, n, &per_label);
        size_t pl = mcr__label_prefix(cfg->mode, s, label);
        for (uint32_t j = 0; j < nl; j++) {
            size_t len = pl + put_uint(label + pl, j);
            if (per_label == POINTS_PER_DIGEST) {
                uint32_t w[4];
                mcr__md5_words(label, len, w);
                for (int x = 0; x < 4; x++) {
                    r->points[k].value = w[x];
                    r->points[k++].server = (uint32_t)i;
                }
            } else {
                r->points[k].value = mcr__hash_key(cfg->point_hash, label, len);
                r->points[k++].server = (uint32_t)i;
            }
        }
    }
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
        bytes += 2 * servers[i].host_len + 16;
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
        p += put_uint(p, (uint32_t)s->port); /* not sprintf: 1,000 servers a publish */
        *p++ = '\0';
    }
    return MCR_OK;
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
    r->key_hash = p->key_hash;
    r->nservers = (uint32_t)n;
    r->prefix_on = p->prefix_on;
    r->prefix_len = p->prefix_len;
    memcpy(r->prefix, p->prefix, p->prefix_len);
    r->tag_on = p->tag_on;
    memcpy(r->tag, p->tag, sizeof(r->tag));
    r->empty_is_zero =
        p->mode == MCR_MODE_TWEMPROXY_KETAMA || p->mode == MCR_MODE_TWEMPROXY_MODULA;
    r->special_hash = r->prefix_on || r->tag_on || r->empty_is_zero;
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
                    mcr__point *points, size_t npoints, mcr_ring **out, mcr_error *err)
{
    mcr_ring *r;
    int rc;
    bool modula = p->mode == MCR_MODE_MODULA || p->mode == MCR_MODE_TWEMPROXY_MODULA;

    if (out == NULL || (int)p->mode < 0 || p->mode >= MCR_MODE_COUNT ||
        modula != (points == NULL)) {
        free(points);
        return mcr__error(err, MCR_ERR_INVALID, "invalid ring parameters");
    }
    rc = ring_alloc(p, servers, n, &r, err);
    if (rc != MCR_OK) {
        free(points);
        return rc;
    }
    if (p->mode == MCR_MODE_TWEMPROXY_MODULA) {
        rc = build_cum_weights(r, servers, n, err);
    } else if (!modula) {
        r->points = points;
        r->npoints = npoints;
        if (npoints > UINT32_MAX)
            rc = mcr__error(err, MCR_ERR_RANGE, "continuum of %zu points is too large", npoints);
        else
            rc = finish_points(r, true, err);
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

int mcr_ring_new(const mcr_config *cfg, mcr_ring **out, mcr_error *err)
{
    mcr_ring *r;
    int rc;

    if (out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL output");
    rc = ring_alloc_cfg(cfg, &r, err);
    if (rc != MCR_OK)
        return rc;
    if (r->mode == MCR_MODE_TWEMPROXY_MODULA)
        rc = build_cum_weights(r, cfg->servers, cfg->count, err);
    else if (r->mode != MCR_MODE_MODULA)
        rc = build_points(r, cfg, err);
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
    free(r->index);
    free(r->cum_weight);
    free(r->servers);
    free(r->strings);
    free(r);
}

/* ------------------------------------------------------------ lookups */

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
    return mcr__hash_key(r->key_hash, buf, total);
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
    return mcr__hash_key(r->key_hash, key, len);
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
    uint32_t b = h >> r->shift;
    uint32_t lo = r->index[b], hi = r->index[b + 1];
    const point *p = r->points;

    if (MCR__LIKELY(hi - lo <= SCAN_WIDTH)) {
        lo += (uint32_t)(p[lo].value < h) + (uint32_t)(p[lo + 1].value < h) +
              (uint32_t)(p[lo + 2].value < h) + (uint32_t)(p[lo + 3].value < h);
    } else {
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (p[mid].value < h)
                lo = mid + 1;
            else
                hi = mid;
        }
    }
    return lo;
}

static inline uint32_t find_point(const mcr_ring *r, uint32_t h)
{
    /* The answer is in [lo, hi] of h's bucket; points from hi on are >= h (or
     * are sentinels), so counting those below h gives the lower bound; an
     * index of npoints is a sentinel, which carries the wrap to point 0. */
    return r->points[find_index(r, h)].server;
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

static inline uint32_t ring_find(const mcr_ring *r, uint32_t hash)
{
    if (r->mode == MCR_MODE_MODULA)
        return hash % r->nservers;
    if (r->mode == MCR_MODE_TWEMPROXY_MODULA)
        return weighted_modula(r, hash);
    if (MCR__UNLIKELY(r->npoints == 0))
        return 0;
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
    size_t i = find_index(r, hash);
    return i == r->npoints ? 0 : i;
}

uint32_t mcr_ring_locate(const mcr_ring *r, const void *key, size_t len)
{
    if (r->nservers == 1)
        return 0; /* libmemcached does not even hash */
    return ring_find(r, ring_hash(r, key, len));
}

void mcr_ring_locate_many(const mcr_ring *r, const void *const *keys, const size_t *lens,
                          size_t n, uint32_t *out)
{
    if (r->nservers == 1) {
        for (size_t i = 0; i < n; i++)
            out[i] = 0;
        return;
    }
    /* Hash a chunk of keys first (MD5 several keys at a time in SIMD lanes),
     * touching the index for each hash so the cache misses of many keys
     * overlap, then resolve the chunk. */
    enum { CHUNK = 64 };
    for (size_t base = 0; base < n; base += CHUNK) {
        size_t m = n - base < CHUNK ? n - base : CHUNK;
        uint32_t *h = out + base;
        if (!r->special_hash)
            mcr__hash_many(r->key_hash, keys + base, lens + base, m, h);
        else
            for (size_t i = 0; i < m; i++)
                h[i] = ring_hash(r, keys[base + i], lens[base + i]);
        if (r->npoints != 0)
            for (size_t i = 0; i < m; i++)
                __builtin_prefetch(&r->index[h[i] >> r->shift]);
        for (size_t i = 0; i < m; i++)
            h[i] = ring_find(r, h[i]);
    }
}

/* ------------------------------------------------------------ inspection */

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
