/* SPDX-License-Identifier: BSD-3-Clause */
/* memcached_st.c: builds the mcroute ring equivalent to a live libmemcached memcached_st. */
/*
 * Only public libmemcached API and public fields of struct memcached_st
 * (libmemcached-1.0/struct/memcached.h) are used; see the header for the
 * method. This file is outside libmcroute proper, so it uses only the
 * public mcroute API too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute_memcached_st.h"

/* Probe keys compared between the handle and a candidate ring; a ring must
 * agree on all of them. They rule out almost every wrong label hash: when
 * both spread their values over 32 bits, a wrong candidate agrees with a key
 * with probability about 1/servers. Not when the key hash has few values
 * (crc: 15 bits), where candidates can agree on most or all keys; those
 * that pass are told apart afterwards (from_unweighted). */
#define PROBE_KEYS 320
#define PROBE_KEY_MAX 48
/* libmemcached MEMCACHED_POINTS_PER_SERVER: points per server, unweighted. */
#define LMC_POINTS_PER_SERVER 100
/* libmemcached: at most 160 / 4 labels per server at average weight, so a
 * server has at most 40 * servers labels. */
#define LMC_LABELS_PER_SERVER 40
/* Highest hash value a memcached_st can be set to (murmur3); 11 is custom. */
#define LMC_HASH_LAST 10

/* What was read from the handle. */
typedef struct source {
    memcached_st *memc; /* the caller's handle; libmemcached's getters take a
                           non-const pointer but only read */
    uint32_t n;
    mcr_mode mode;
    mcr_hash key_hash;
    bool prefix_on;
    const char *ns;
    size_t ns_len;
    const char **hosts; /* owned by memc */
    int *ports;
} source;

typedef struct probe {
    char key[PROBE_KEY_MAX];
    size_t len;
} probe;

/* Fixed, printable probe keys of 1..PROBE_KEY_MAX bytes (an LCG, so every
 * call probes the same keys). */
static void make_probes(probe *p)
{
    uint64_t s = 0x6d63726f75746531ULL;
    for (size_t i = 0; i < PROBE_KEYS; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i].len = 1 + (size_t)((s >> 33) % PROBE_KEY_MAX);
        for (size_t j = 0; j < p[i].len; j++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            p[i].key[j] = (char)(0x21 + (s >> 33) % 94); /* '!'..'~' */
        }
    }
}

/* Number of probes in [from, to) on which ring and handle agree. */
static size_t agree(const source *src, const mcr_ring *ring, const probe *p, size_t from,
                    size_t to)
{
    size_t ok = 0;
    for (size_t i = from; i < to; i++)
        ok += memcached_generate_hash(src->memc, p[i].key, p[i].len) ==
              mcr_ring_locate(ring, p[i].key, p[i].len);
    return ok;
}

/* Release what read_source() allocated. */
static void free_source(source *src)
{
    free(src->hosts);
    free(src->ports);
}

/* Fill err with code and "memcached_st: msg"; returns code. */
static int fail(mcr_error *err, int code, const char *msg)
{
    if (err != NULL) {
        err->code = code;
        err->sys_errno = 0;
        snprintf(err->message, sizeof(err->message), "memcached_st: %.230s", msg);
    }
    return code;
}

/* Read the placement state that libmemcached exposes. On error nothing
 * stays allocated. */
static int read_source(const memcached_st *memc, source *src, mcr_error *err)
{
    memcached_return_t rc;
    char m[MCR_ERROR_MESSAGE_SIZE];

    memset(src, 0, sizeof(*src));
    src->memc = (memcached_st *)(uintptr_t)memc;
    src->n = memcached_server_count(memc);
    if (src->n == 0)
        return fail(err, MCR_ERR_EMPTY, "no servers");

    uint64_t dist = memcached_behavior_get(src->memc, MEMCACHED_BEHAVIOR_DISTRIBUTION);
    bool weighted = memc->ketama.weighted_;
    switch (dist) {
    case MEMCACHED_DISTRIBUTION_MODULA:
        src->mode = MCR_MODE_MODULA;
        break;
    case MEMCACHED_DISTRIBUTION_CONSISTENT:
    case MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA:
    case MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED:
        src->mode = weighted ? MCR_MODE_WEIGHTED : MCR_MODE_CONSISTENT;
        break;
    case MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY:
        src->mode = weighted ? MCR_MODE_SPY_WEIGHTED : MCR_MODE_SPY;
        break;
    case MEMCACHED_DISTRIBUTION_RANDOM:
        return fail(err, MCR_ERR_UNSUPPORTED,
                    "the random distribution picks a server at random for every key");
    default:
        snprintf(m, sizeof(m), "distribution %s is not supported",
                 libmemcached_string_distribution((memcached_server_distribution_t)dist));
        return fail(err, MCR_ERR_UNSUPPORTED, m);
    }

    uint64_t h = memcached_behavior_get(src->memc, MEMCACHED_BEHAVIOR_HASH);
    if (h > LMC_HASH_LAST)
        return fail(err, MCR_ERR_UNSUPPORTED,
                    "the key hash is a custom function (memcached_set_hashkit())");
    src->key_hash = (mcr_hash)h;

    if (memcached_behavior_get(src->memc, MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY)) {
        src->prefix_on = true;
        src->ns = memcached_callback_get(src->memc, MEMCACHED_CALLBACK_NAMESPACE, &rc);
        src->ns_len = src->ns ? strlen(src->ns) : 0;
    }

    src->hosts = calloc(src->n, sizeof(*src->hosts));
    src->ports = calloc(src->n, sizeof(*src->ports));
    if (src->hosts == NULL || src->ports == NULL) {
        free_source(src);
        return fail(err, MCR_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < src->n; i++) {
        const memcached_instance_st *in = memcached_server_instance_by_position(memc, i);
        const char *type = memcached_server_type(in);
        if (strcmp(type, "SOCKET") == 0) {
            snprintf(m, sizeof(m), "server %u (%.100s) is a UNIX socket, which has no port",
                     (unsigned)i, memcached_server_name(in));
            free_source(src);
            return fail(err, MCR_ERR_UNSUPPORTED, m);
        }
        src->hosts[i] = memcached_server_name(in);
        src->ports[i] = memcached_server_port(in);
    }
    return MCR_OK;
}

/* The mcroute config for `src` with the given label hash and weights
 * (NULL: all 1). */
static int make_config(const source *src, mcr_hash point_hash, const uint32_t *weights,
                       mcr_config **out, mcr_error *err)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error e;
    char m[MCR_ERROR_MESSAGE_SIZE];
    int rc;

    if (cfg == NULL)
        return fail(err, MCR_ERR_NOMEM, "out of memory");
    mcr_config_set_mode(cfg, src->mode);
    mcr_config_set_hash(cfg, src->key_hash);
    mcr_config_set_point_hash(cfg, point_hash);
    if (src->prefix_on)
        mcr_config_set_key_prefix(cfg, src->ns ? src->ns : "", src->ns_len);
    for (uint32_t i = 0; i < src->n; i++) {
        rc = mcr_config_add_server(cfg, src->hosts[i], src->ports[i], weights ? weights[i] : 1,
                                   &e);
        if (rc != MCR_OK) {
            mcr_config_free(cfg);
            snprintf(m, sizeof(m), "server %u: %.200s", (unsigned)i, e.message);
            return fail(err, rc, m);
        }
    }
    *out = cfg;
    return MCR_OK;
}

/* make_config(), then the ring. */
static int make_ring(const source *src, mcr_hash point_hash, const uint32_t *weights,
                     mcr_ring **out, mcr_error *err)
{
    mcr_config *cfg;
    int rc = make_config(src, point_hash, weights, &cfg, err);
    if (rc != MCR_OK)
        return rc;
    rc = mcr_ring_new(cfg, out, err);
    mcr_config_free(cfg);
    return rc;
}

/* ---------------------------------------------------------------- exact queries */

/* A hashkit function that returns the value written in the last 8 bytes of
 * the key as hex: with it, memcached_generate_hash() on a clone of the
 * handle tells which server owns any hash value. */
static uint32_t decode_hex_hash(const char *key, size_t len, void *context)
{
    uint32_t v = 0;
    (void)context;
    if (len < 8)
        return 0;
    for (size_t i = len - 8; i < len; i++) {
        char c = key[i];
        v = (v << 4) | (uint32_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    return v;
}

/* Exact ownership queries on a private libmemcached handle. */
typedef struct oracle {
    memcached_st *clone;
} oracle;

/* A private handle for exact queries, with the continuum of `src` and the
 * key hash replaced by decode_hex_hash. Without weighting it is built from
 * scratch (servers in the same order, labels valued with `relabel`). With
 * weighting the weights are needed, which only memcached_clone() copies;
 * the clone's continuum is then rebuilt with the handle's distribution and
 * weighting, because memcached_clone() rebuilds with the current key hash
 * and turns weighting on whenever a server has a weight > 1.
 * Returns MCR_OK; ORACLE_REFUSED, with err untouched, if this libmemcached
 * refuses `relabel` as a hash (then no handle can have it); or an error
 * code with err filled. */
#define ORACLE_REFUSED 1
static int oracle_open(const source *src, mcr_hash relabel, oracle *o, mcr_error *err)
{
    bool weighted = src->mode == MCR_MODE_WEIGHTED || src->mode == MCR_MODE_SPY_WEIGHTED;
    bool spy = src->mode == MCR_MODE_SPY || src->mode == MCR_MODE_SPY_WEIGHTED;
    hashkit_st *hk;

    o->clone = weighted ? memcached_clone(NULL, src->memc) : memcached_create(NULL);
    if (o->clone == NULL)
        return fail(err, MCR_ERR_NOMEM, "cannot create a libmemcached handle");
    if (memcached_behavior_set(o->clone, MEMCACHED_BEHAVIOR_HASH, (uint64_t)relabel) !=
        MEMCACHED_SUCCESS) {
        memcached_free(o->clone);
        return ORACLE_REFUSED;
    }
    /* A fresh handle is MODULA: adding the servers there builds no
     * continuum (under a consistent distribution every add would rebuild
     * it, quadratic in the servers); the distribution set next builds it
     * once, with `relabel`. */
    for (uint32_t i = 0; !weighted && i < src->n; i++)
        if (memcached_server_add_with_weight(o->clone, src->hosts[i], (in_port_t)src->ports[i],
                                             1) != MEMCACHED_SUCCESS) {
            memcached_free(o->clone);
            return fail(err, MCR_ERR_UNSUPPORTED, "cannot rebuild the continuum");
        }
    /* CONSISTENT turns weighting off, CONSISTENT_WEIGHTED on; SPY keeps it
     * (off on a fresh handle, on after CONSISTENT_WEIGHTED). */
    if (memcached_behavior_set(o->clone, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                               weighted ? MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED
                               : spy    ? MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY
                                        : MEMCACHED_DISTRIBUTION_CONSISTENT) != MEMCACHED_SUCCESS ||
        (weighted && spy &&
         memcached_behavior_set(o->clone, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY) !=
             MEMCACHED_SUCCESS)) {
        memcached_free(o->clone);
        return fail(err, MCR_ERR_UNSUPPORTED, "a private handle refuses the distribution");
    }
    hk = hashkit_create(NULL);
    if (hk == NULL) {
        memcached_free(o->clone);
        return fail(err, MCR_ERR_NOMEM, "out of memory");
    }
    hashkit_set_custom_function(hk, decode_hex_hash, NULL);
    memcached_set_hashkit(o->clone, hk);
    hashkit_free(hk);
    return MCR_OK;
}

/* The server that owns hash value v in the clone's continuum. */
static uint32_t oracle_owner(const oracle *o, uint32_t v)
{
    static const char hex[] = "0123456789abcdef";
    char key[8];
    for (int i = 0; i < 8; i++)
        key[i] = hex[(v >> (28 - 4 * i)) & 15];
    return memcached_generate_hash(o->clone, key, sizeof(key));
}

/* Free the private handle. */
static void oracle_close(oracle *o)
{
    memcached_free(o->clone);
}

/* True if the oracle and the ring agree on the owner of every point of the
 * ring and of every value in extra[0..nextra): the two step functions are
 * then equal, provided the oracle's points are among these values. */
static bool same_owners(const oracle *o, const mcr_ring *ring, const uint32_t *extra,
                        size_t nextra)
{
    size_t np = mcr_ring_point_count(ring);
    for (size_t i = 0; i < np; i++) {
        uint32_t v;
        mcr_ring_point(ring, i, &v, NULL);
        if (oracle_owner(o, v) != mcr_ring_find(ring, v))
            return false;
    }
    for (size_t i = 0; i < nextra; i++)
        if (oracle_owner(o, extra[i]) != mcr_ring_find(ring, extra[i]))
            return false;
    return oracle_owner(o, UINT32_MAX) == mcr_ring_find(ring, UINT32_MAX);
}

/* ---------------------------------------------------------------- unweighted */

/* Modula, or one server: nothing is hidden, just check. */
static int from_plain(const source *src, const probe *p, mcr_ring **out, mcr_error *err)
{
    mcr_ring *ring;
    int rc = make_ring(src, src->key_hash, NULL, &ring, err);
    if (rc != MCR_OK)
        return rc;
    if (agree(src, ring, p, 0, PROBE_KEYS) != PROBE_KEYS) {
        mcr_ring_free(ring);
        return fail(err, MCR_ERR_UNSUPPORTED,
                    "the placement differs from mcroute's (a key hash that differs, such as a "
                    "libhashkit without hsieh?)");
    }
    *out = ring;
    return MCR_OK;
}

/* One candidate label hash and the ring it gives. */
typedef struct candidate {
    mcr_hash hash;
    mcr_ring *ring;
} candidate;

/* Hash values lo..hi, inclusive. */
typedef struct span {
    uint32_t lo, hi;
} span;

/* The largest value the key hash can produce: crc keeps 15 bits. */
static uint32_t key_hash_max(mcr_hash h)
{
    return h == MCR_HASH_CRC ? 0x7fffu : UINT32_MAX;
}

/* The hash values in [0, hmax] that rings a and b (same servers, same
 * order) give to different servers, as ascending, disjoint, non-adjacent
 * spans in *out (malloc'd; NULL and 0 when the rings agree on all of them).
 * Between two consecutive point values of the merged point lists each ring
 * has a single owner (the next point, or the first one past the last), so
 * comparing the two owners at the right end of every such stretch is exact.
 * MCR_OK or MCR_ERR_NOMEM (err filled). */
static int disagreement(const mcr_ring *a, const mcr_ring *b, uint32_t hmax, span **out,
                        size_t *nout, mcr_error *err)
{
    size_t na = mcr_ring_point_count(a), nb = mcr_ring_point_count(b);
    size_t i = 0, j = 0, n = 0, cap = 0;
    span *s = NULL;
    uint32_t lo = 0;

    for (;;) {
        uint32_t v = hmax, va = 0, vb = 0;
        if (i < na) {
            mcr_ring_point(a, i, &va, NULL);
            if (va < v)
                v = va;
        }
        if (j < nb) {
            mcr_ring_point(b, j, &vb, NULL);
            if (vb < v)
                v = vb;
        }
        /* [lo, v] has one owner in each ring: the one at v. */
        if (mcr_ring_find(a, v) != mcr_ring_find(b, v)) {
            if (n > 0 && s[n - 1].hi + 1 == lo) {
                s[n - 1].hi = v;
            } else {
                if (n == cap) {
                    size_t c2 = cap ? 2 * cap : 16;
                    span *t = realloc(s, c2 * sizeof(*t));
                    if (t == NULL) {
                        free(s);
                        return fail(err, MCR_ERR_NOMEM, "out of memory");
                    }
                    s = t;
                    cap = c2;
                }
                s[n].lo = lo;
                s[n].hi = v;
                n++;
            }
        }
        if (v == hmax)
            break;
        /* v < hmax is a point value of a or b: step past it. */
        lo = v + 1;
        while (i < na && (mcr_ring_point(a, i, &va, NULL), va == v))
            i++;
        while (j < nb && (mcr_ring_point(b, j, &vb, NULL), vb == v))
            j++;
    }
    *out = s;
    *nout = n;
    return MCR_OK;
}

/* Keys tried, at most, to find one whose hash falls where two candidates
 * differ. They differ on at least one hash value; with crc (32,768 values,
 * the only key hash with which distinct candidates pass the probes) 2^21
 * keys all miss a given value with probability e^-64. */
#define SPLIT_KEYS_MAX (1u << 21)
#define SPLIT_KEY_MAX 24

/* Deterministic printable keys of 4..SPLIT_KEY_MAX bytes into key; returns
 * the length. */
static size_t next_split_key(uint64_t *state, char *key)
{
    uint64_t s = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t len = 4 + (size_t)((s >> 33) % (SPLIT_KEY_MAX - 3));
    for (size_t j = 0; j < len; j++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        key[j] = (char)(0x21 + (s >> 33) % 94); /* '!'..'~' */
    }
    *state = s;
    return len;
}

/* A key whose hash under `ring` (key hash and prefix, which every
 * candidate shares) lies in one of the spans s[0..n). False if none of
 * SPLIT_KEYS_MAX keys does. */
static bool split_key(const mcr_ring *ring, const span *s, size_t n, uint64_t *state,
                      char *key, size_t *len)
{
    for (uint32_t t = 0; t < SPLIT_KEYS_MAX; t++) {
        size_t l = next_split_key(state, key);
        uint32_t h = mcr_ring_hash(ring, key, l);
        size_t lo = 0, hi = n; /* first span with s.hi >= h */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (s[mid].hi < h)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n && s[lo].lo <= h) {
            *len = l;
            return true;
        }
    }
    return false;
}

/* Remove candidate i of c[0..*nc), freeing its ring. */
static void drop_candidate(candidate *c, size_t *nc, size_t i)
{
    mcr_ring_free(c[i].ring);
    memmove(&c[i], &c[i + 1], (*nc - i - 1) * sizeof(*c));
    (*nc)--;
}

/* Consistent or spy without weighting. The hash that valued the labels is
 * not readable: it is one of the hashes libmemcached accepts. Every
 * candidate whose ring agrees with the handle on all probes is kept and
 * checked to be libmemcached's own continuum for that hash. Two candidates
 * that agree on every value the key hash can produce are equivalent; for
 * two that do not, a key whose hash falls where they differ is asked of the
 * handle, which eliminates at least one. What remains is one equivalence
 * class, which contains the handle's real label hash. */
static int from_unweighted(const source *src, const probe *p, mcr_ring **out, mcr_error *err)
{
    char m[MCR_ERROR_MESSAGE_SIZE];
    uint32_t have = src->memc->ketama.continuum_points_counter;
    uint32_t want[PROBE_KEYS];
    candidate c[LMC_HASH_LAST + 1];
    size_t nc = 0;
    mcr_config *cfg = NULL;
    memcached_st *accepts = NULL;
    uint64_t state = 0x73706c69746b6579ULL;
    int rc = MCR_OK;

    if (have != src->n * LMC_POINTS_PER_SERVER) {
        snprintf(m, sizeof(m),
                 "the continuum has %u points where %u servers give %u (servers ejected by "
                 "AUTO_EJECT_HOSTS?)",
                 (unsigned)have, (unsigned)src->n, (unsigned)(src->n * LMC_POINTS_PER_SERVER));
        return fail(err, MCR_ERR_UNSUPPORTED, m);
    }
    for (size_t k = 0; k < PROBE_KEYS; k++)
        want[k] = memcached_generate_hash(src->memc, p[k].key, p[k].len);

    /* Every candidate that agrees on all probes, the key hash first (the
     * usual case, and the one kept when equivalent ones remain). */
    rc = make_config(src, src->key_hash, NULL, &cfg, err);
    if (rc != MCR_OK)
        return rc;
    accepts = memcached_create(NULL);
    if (accepts == NULL) {
        rc = fail(err, MCR_ERR_NOMEM, "cannot create a libmemcached handle");
        goto done;
    }
    for (int i = -1; i <= LMC_HASH_LAST; i++) {
        mcr_hash ph = i < 0 ? src->key_hash : (mcr_hash)i;
        mcr_ring *ring;
        size_t k;
        if (i >= 0 && ph == src->key_hash)
            continue;
        /* A hash libmemcached refuses cannot have valued the labels (this
         * libhashkit may lack hsieh). */
        if (memcached_behavior_set(accepts, MEMCACHED_BEHAVIOR_HASH, (uint64_t)ph) !=
            MEMCACHED_SUCCESS)
            continue;
        mcr_config_set_point_hash(cfg, ph);
        rc = mcr_ring_new(cfg, &ring, err);
        if (rc != MCR_OK)
            goto done;
        for (k = 0; k < PROBE_KEYS && mcr_ring_locate(ring, p[k].key, p[k].len) == want[k]; k++)
            ;
        if (k < PROBE_KEYS) {
            mcr_ring_free(ring);
            continue;
        }
        c[nc].hash = ph;
        c[nc].ring = ring;
        nc++;
    }
    mcr_config_free(cfg);
    cfg = NULL;
    memcached_free(accepts);
    accepts = NULL;

    /* Each must be the continuum libmemcached itself builds with that hash
     * (a libhashkit may compute a hash differently). */
    for (size_t i = 0; i < nc;) {
        oracle o;
        bool same;
        rc = oracle_open(src, c[i].hash, &o, err);
        if (rc == ORACLE_REFUSED) {
            drop_candidate(c, &nc, i);
            continue;
        }
        if (rc != MCR_OK)
            goto done;
        same = same_owners(&o, c[i].ring, NULL, 0);
        oracle_close(&o);
        if (!same) {
            snprintf(m, sizeof(m),
                     "libmemcached's continuum with label hash %s differs from mcroute's (a "
                     "libhashkit whose %s differs?)",
                     mcr_hash_name(c[i].hash), mcr_hash_name(c[i].hash));
            rc = fail(err, MCR_ERR_UNSUPPORTED, m);
            goto done;
        }
        i++;
    }

    /* Down to one equivalence class. */
    while (nc > 1) {
        uint32_t hmax = key_hash_max(src->key_hash);
        span *s = NULL;
        size_t ns = 0;
        while (nc > 1) {
            rc = disagreement(c[0].ring, c[1].ring, hmax, &s, &ns, err);
            if (rc != MCR_OK)
                goto done;
            if (ns > 0)
                break;
            drop_candidate(c, &nc, 1); /* equivalent to c[0] for every key */
        }
        if (nc == 1)
            break;
        char key[SPLIT_KEY_MAX];
        size_t len = 0;
        bool found = split_key(c[0].ring, s, ns, &state, key, &len);
        free(s);
        if (!found) {
            snprintf(m, sizeof(m),
                     "cannot tell whether label hash %s or %s valued the continuum: they place "
                     "differently only hash values that none of %u generated keys reaches",
                     mcr_hash_name(c[0].hash), mcr_hash_name(c[1].hash),
                     (unsigned)SPLIT_KEYS_MAX);
            rc = fail(err, MCR_ERR_UNSUPPORTED, m);
            goto done;
        }
        uint32_t t = memcached_generate_hash(src->memc, key, len);
        for (size_t i = 0; i < nc;) {
            if (mcr_ring_locate(c[i].ring, key, len) != t)
                drop_candidate(c, &nc, i);
            else
                i++;
        }
    }
    if (nc == 0) {
        rc = fail(err, MCR_ERR_UNSUPPORTED,
                  "no label hash reproduces the continuum (servers ejected, or a hash that "
                  "differs from mcroute's, such as a libhashkit without hsieh?)");
        goto done;
    }
    *out = c[0].ring;
    c[0].ring = NULL;
    rc = MCR_OK;
done:
    mcr_config_free(cfg);
    if (accepts != NULL)
        memcached_free(accepts);
    for (size_t i = 0; i < nc; i++)
        mcr_ring_free(c[i].ring);
    return rc;
}

/* ---------------------------------------------------------------- weighted */

/* A candidate point: one of the four MD5 words of a server's label. */
typedef struct cpoint {
    uint32_t value;
    uint32_t server;
    uint32_t label;
} cpoint;

/* Candidate points in libmemcached's continuum order: value, then server. */
static int cmp_cpoint(const void *a, const void *b)
{
    const cpoint *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    if (x->server != y->server)
        return x->server < y->server ? -1 : 1;
    return (x->label > y->label) - (x->label < y->label);
}

/* The four MD5 points of label `i` of server `s`, as libmemcached writes
 * the labels when weighting is on. */
static void label_points(const source *src, uint32_t s, uint32_t i, uint32_t out[4])
{
    char label[1100];
    unsigned char d[16];
    int len;

    if (src->mode == MCR_MODE_SPY_WEIGHTED)
        len = snprintf(label, sizeof(label), "/%s:%d-%u", src->hosts[s], src->ports[s],
                       (unsigned)i);
    else if (src->ports[s] == MCR_DEFAULT_PORT)
        len = snprintf(label, sizeof(label), "%s-%u", src->hosts[s], (unsigned)i);
    else
        len = snprintf(label, sizeof(label), "%s:%d-%u", src->hosts[s], src->ports[s],
                       (unsigned)i);
    if (len < 0 || (size_t)len >= sizeof(label))
        len = 0;
    mcr_md5(label, (size_t)len, d);
    for (int a = 0; a < 4; a++)
        out[a] = (uint32_t)d[4 * a] | (uint32_t)d[4 * a + 1] << 8 |
                 (uint32_t)d[4 * a + 2] << 16 | (uint32_t)d[4 * a + 3] << 24;
}

/* Whether point value v of server s is owned by s, or lost to an earlier
 * server t that has a point of the same value (libmemcached sorts ties by
 * server index; two 32-bit MD5 words do collide in large continua). The
 * servers before s have their label counts in lhat[] already. */
static bool owns(const source *src, const oracle *o, const uint32_t *lhat, uint32_t s,
                 uint32_t v)
{
    uint32_t t = oracle_owner(o, v);
    if (t == s)
        return true;
    if (t > s)
        return false;
    for (uint32_t j = 0; j < lhat[t]; j++) {
        uint32_t pt[4];
        label_points(src, t, j, pt);
        if (pt[0] == v || pt[1] == v || pt[2] == v || pt[3] == v)
            return true;
    }
    return false;
}

/* Points per server of a ring, into counts[0..n). */
static void count_points(const mcr_ring *ring, uint32_t *counts, uint32_t n)
{
    memset(counts, 0, n * sizeof(*counts));
    for (size_t i = 0, np = mcr_ring_point_count(ring); i < np; i++) {
        uint32_t s;
        mcr_ring_point(ring, i, NULL, &s);
        if (s < n)
            counts[s]++;
    }
}

/* A ring whose servers have exactly labels[s] labels each: tries weight
 * vectors that give those counts through libmemcached's formula. */
static int ring_with_labels(const source *src, const uint32_t *labels, uint32_t *w,
                            uint32_t *counts, mcr_ring **out, mcr_error *err)
{
    uint64_t sum = 0;
    uint32_t n = src->n;
    for (uint32_t s = 0; s < n; s++)
        sum += labels[s];
    /* With w = n * L + d and d = 40n - sum L, each server's share times 40n
     * is L + d/n, which floors to L when 0 <= d < n. Multiples of L are the
     * other natural guesses (the configured weights are often those). */
    int64_t d = (int64_t)LMC_LABELS_PER_SERVER * n - (int64_t)sum;
    for (int attempt = 0; attempt < 24; attempt++) {
        bool usable = true;
        for (uint32_t s = 0; s < n && usable; s++) {
            uint64_t v;
            if (attempt < 4) {
                if (d < 0)
                    usable = false;
                v = ((uint64_t)n * labels[s] + (uint64_t)(d < 0 ? 0 : d)) * (uint64_t)(attempt + 1);
            } else {
                v = (uint64_t)labels[s] * (uint64_t)(attempt - 3);
            }
            if (v == 0)
                v = 1;
            if (v > MCR_WEIGHT_MAX)
                usable = false;
            w[s] = (uint32_t)v;
        }
        if (!usable)
            continue;
        mcr_ring *ring;
        int rc = make_ring(src, src->key_hash, w, &ring, err);
        if (rc != MCR_OK)
            return rc;
        count_points(ring, counts, n);
        bool match = true;
        for (uint32_t s = 0; s < n && match; s++)
            match = counts[s] == 4 * labels[s];
        if (match) {
            *out = ring;
            return MCR_OK;
        }
        mcr_ring_free(ring);
    }
    return fail(err, MCR_ERR_UNSUPPORTED,
                "no weights reproduce the point counts of the continuum");
}

/* Weighting on: recover every server's label count from the continuum,
 * then weights giving those counts. */
static int from_weighted(const source *src, const probe *p, mcr_ring **out, mcr_error *err)
{
    uint32_t n = src->n;
    uint32_t lmax = LMC_LABELS_PER_SERVER * n;
    uint32_t total = src->memc->ketama.continuum_points_counter;
    uint32_t *lhat = NULL, *lo = NULL, *w = NULL, *counts = NULL, *values = NULL;
    cpoint *c = NULL;
    size_t nc = 0;
    oracle o;
    mcr_ring *ring = NULL;
    int rc;

    if (total % 4 != 0)
        return fail(err, MCR_ERR_UNSUPPORTED, "the continuum has a point count not a multiple of 4");
    rc = oracle_open(src, MCR_HASH_MD5, &o, err);
    if (rc == ORACLE_REFUSED)
        return fail(err, MCR_ERR_UNSUPPORTED, "a clone of the handle refuses the MD5 hash");
    if (rc != MCR_OK)
        return rc;
    if (o.clone->ketama.continuum_points_counter != total) {
        oracle_close(&o);
        return fail(err, MCR_ERR_UNSUPPORTED,
                    "a clone of the handle has a different continuum (servers ejected by "
                    "AUTO_EJECT_HOSTS?)");
    }
    lhat = calloc(n, sizeof(*lhat));
    lo = calloc(n, sizeof(*lo));
    w = calloc(n, sizeof(*w));
    counts = calloc(n, sizeof(*counts));
    if (lhat == NULL || lo == NULL || w == NULL || counts == NULL) {
        rc = fail(err, MCR_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* Labels 0..L-1 of a server are present, the others absent. A present
     * label's points are owned by their server. The first label whose points
     * are not all owned by the server is absent; labels before it are present
     * or, if absent, invisible: each of their points falls where the server
     * owns the next point anyway. */
    size_t sum = 0;
    for (uint32_t s = 0; s < n; s++) {
        uint32_t i;
        /* No server has more than lmax labels; a dominant server owns the
         * points of many absent labels too, so stop there. */
        for (i = 0; i < lmax; i++) {
            uint32_t pt[4];
            label_points(src, s, i, pt);
            if (!owns(src, &o, lhat, s, pt[0]) || !owns(src, &o, lhat, s, pt[1]) ||
                !owns(src, &o, lhat, s, pt[2]) || !owns(src, &o, lhat, s, pt[3]))
                break;
        }
        lhat[s] = i;
        sum += i;
    }
    c = malloc((sum ? sum : 1) * 4 * sizeof(*c));
    values = malloc((sum ? sum : 1) * 4 * sizeof(*values));
    if (c == NULL || values == NULL) {
        rc = fail(err, MCR_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t i = 0; i < lhat[s]; i++) {
            uint32_t pt[4];
            label_points(src, s, i, pt);
            for (int a = 0; a < 4; a++)
                c[nc++] = (cpoint){pt[a], s, i};
        }
    qsort(c, nc, sizeof(*c), cmp_cpoint);
    for (size_t k = 0; k < nc; k++)
        values[k] = c[k].value;

    /* The configured label counts are only known to lie between lo[s] and
     * lhat[s]: labels of a server whose every point is followed by another
     * point of the same server change nothing. The continuum's total point
     * count picks counts in that box. */
    {
        /* A label is removable if each of its points is followed by a point
         * of the same server: flag the labels with a point that is not. */
        uint8_t *bad = calloc(sum ? sum : 1, 1); /* per (server, label), flattened */
        size_t *base = calloc(n + 1, sizeof(*base));
        if (bad == NULL || base == NULL) {
            free(bad);
            free(base);
            rc = fail(err, MCR_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (uint32_t s = 0; s < n; s++)
            base[s + 1] = base[s] + lhat[s];
        for (size_t k = 0; k < nc; k++) {
            const cpoint *nx = &c[(k + 1) % nc];
            if (nx->server != c[k].server)
                bad[base[c[k].server] + c[k].label] = 1;
        }
        size_t want = total / 4, have = sum;
        for (uint32_t s = 0; s < n; s++) {
            lo[s] = lhat[s];
            while (lo[s] > 0 && !bad[base[s] + lo[s] - 1])
                lo[s]--;
        }
        free(bad);
        free(base);
        if (have < want) {
            rc = fail(err, MCR_ERR_UNSUPPORTED, "the continuum has points mcroute cannot place");
            goto done;
        }
        for (uint32_t s = 0; s < n && have > want; s++) {
            uint32_t cut = lhat[s] - lo[s];
            if (cut > have - want)
                cut = (uint32_t)(have - want);
            lhat[s] -= cut;
            have -= cut;
        }
        if (have != want) {
            rc = fail(err, MCR_ERR_UNSUPPORTED,
                      "the continuum's point count matches no label counts");
            goto done;
        }
    }
    rc = ring_with_labels(src, lhat, w, counts, &ring, err);
    if (rc != MCR_OK)
        goto done;
    /* Every point of either continuum is among `values`: equal owners there
     * mean equal owners for every hash value. */
    if (!same_owners(&o, ring, values, nc)) {
        rc = fail(err, MCR_ERR_UNSUPPORTED, "the recovered continuum differs from the handle's");
        goto done;
    }
    if (agree(src, ring, p, 0, PROBE_KEYS) != PROBE_KEYS) {
        rc = fail(err, MCR_ERR_UNSUPPORTED,
                  "the key hash places keys differently from mcroute's (a libhashkit without "
                  "hsieh?)");
        goto done;
    }
    *out = ring;
    ring = NULL;
    rc = MCR_OK;
done:
    mcr_ring_free(ring);
    oracle_close(&o);
    free(lhat);
    free(lo);
    free(w);
    free(counts);
    free(values);
    free(c);
    return rc;
}

int mcr_memcached_st_ring(const memcached_st *memc, mcr_ring **out, mcr_error *err)
{
    source src;
    probe *p;
    int rc;

    if (memc == NULL || out == NULL)
        return fail(err, MCR_ERR_INVALID, "NULL handle or output");
    rc = read_source(memc, &src, err);
    if (rc != MCR_OK)
        return rc;
    p = malloc(PROBE_KEYS * sizeof(*p));
    if (p == NULL) {
        free_source(&src);
        return fail(err, MCR_ERR_NOMEM, "out of memory");
    }
    make_probes(p);
    if (src.n == 1 || src.mode == MCR_MODE_MODULA)
        rc = from_plain(&src, p, out, err);
    else if (src.mode == MCR_MODE_CONSISTENT || src.mode == MCR_MODE_SPY)
        rc = from_unweighted(&src, p, out, err);
    else
        rc = from_weighted(&src, p, out, err);
    free(p);
    free_source(&src);
    return rc;
}
