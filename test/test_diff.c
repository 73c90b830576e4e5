/* SPDX-License-Identifier: BSD-3-Clause */
/* test_diff.c: Check suite of diffs and replicas: diffs agree with lookups, shares are exact, replicas spread. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"
#include "testutil.h"

#define TWO32 4294967296.0
#define MAX_SERVERS 64


/* ------------------------------------------------------------ pools */

/* A server list to build snapshots from; ids and zones empty = none. */
typedef struct spec {
    char host[32];
    int port;
    uint32_t weight;
    char id[32];
    char zone[16];
} spec;

typedef struct pool {
    spec s[MAX_SERVERS];
    size_t n;
    mcr_mode mode;
    mcr_hash hash;
    const char *prefix; /* libmemcached namespace, or NULL */
    const char *tag;    /* twemproxy hash tag, or NULL */
} pool;

static unsigned next_host; /* makes every generated address new */

static void new_spec(tu_rng *r, spec *s, unsigned zones)
{
    unsigned h = next_host++;
    snprintf(s->host, sizeof(s->host), "10.%u.%u.%u", (h >> 16) & 255, (h >> 8) & 255, h & 255);
    s->port = tu_below(r, 4) == 0 ? 11211 + (int)tu_below(r, 100) : 11211;
    s->weight = 1 + tu_below(r, 4);
    s->id[0] = '\0';
    if (tu_below(r, 3) == 0)
        snprintf(s->id, sizeof(s->id), "node-%u", h);
    s->zone[0] = '\0';
    if (zones > 0 && tu_below(r, 8) != 0)
        snprintf(s->zone, sizeof(s->zone), "z%u", tu_below(r, zones));
}

static void random_pool(tu_rng *r, pool *p, size_t n, mcr_mode mode, unsigned zones)
{
    memset(p, 0, sizeof(*p));
    p->n = n;
    p->mode = mode;
    p->hash = MCR_HASH_MD5;
    if (mode == MCR_MODE_CONSISTENT || mode == MCR_MODE_SPY) {
        static const mcr_hash hs[] = {MCR_HASH_DEFAULT, MCR_HASH_MD5, MCR_HASH_FNV1A_32,
                                      MCR_HASH_MURMUR, MCR_HASH_CRC};
        p->hash = hs[tu_below(r, 5)];
    }
    for (size_t i = 0; i < n; i++)
        new_spec(r, &p->s[i], zones);
}

static mcr_config *config_of(const pool *p)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    EXPECT_INT(mcr_config_set_mode(cfg, p->mode), ==, MCR_OK);
    EXPECT_INT(mcr_config_set_hash(cfg, p->hash), ==, MCR_OK);
    if (p->prefix != NULL)
        EXPECT_INT(mcr_config_set_key_prefix(cfg, p->prefix, strlen(p->prefix)), ==, MCR_OK);
    if (p->tag != NULL)
        EXPECT_INT(mcr_config_set_hash_tag(cfg, p->tag), ==, MCR_OK);
    for (size_t i = 0; i < p->n; i++) {
        const spec *s = &p->s[i];
        mcr_server_desc d = {.id = s->id[0] ? s->id : NULL, .host = s->host, .port = s->port,
                             .weight = s->weight,
                             .zone = s->zone[0] ? s->zone : NULL, .state = MCR_STATE_ACTIVE};
        int rc = mcr_config_add_server_desc(cfg, &d, &err);
        EXPECT_MSG(rc == MCR_OK, "add %s: %s", s->host, err.message);
    }
    return cfg;
}

static mcr_snapshot *snap_of(const pool *p)
{
    mcr_error err;
    mcr_snapshot *s = NULL;
    mcr_config *cfg = config_of(p);
    int rc = mcr_snapshot_new(cfg, 1, &s, &err);
    EXPECT_MSG(rc == MCR_OK, "snapshot_new: %s", err.message);
    mcr_config_free(cfg);
    return s;
}

/* q = p changed: some servers removed, some added, some reweighted, and a
 * named one moved to another address (same id). Never empty. */
static void mutate(tu_rng *r, const pool *p, pool *q, unsigned zones)
{
    *q = *p;
    unsigned removes = tu_below(r, 3), adds = tu_below(r, 3), reweights = tu_below(r, 3);
    for (unsigned k = 0; k < removes && q->n > 1; k++) {
        size_t i = tu_below(r, (uint32_t)q->n);
        memmove(&q->s[i], &q->s[i + 1], (q->n - i - 1) * sizeof(spec));
        q->n--;
    }
    for (unsigned k = 0; k < adds && q->n < MAX_SERVERS; k++) {
        size_t i = tu_below(r, (uint32_t)q->n + 1);
        memmove(&q->s[i + 1], &q->s[i], (q->n - i) * sizeof(spec));
        new_spec(r, &q->s[i], zones);
        q->n++;
    }
    for (unsigned k = 0; k < reweights; k++)
        q->s[tu_below(r, (uint32_t)q->n)].weight = 1 + tu_below(r, 4);
    for (size_t i = 0; i < q->n; i++) {
        if (q->s[i].id[0] != '\0' && tu_below(r, 4) == 0) {
            unsigned h = next_host++;
            snprintf(q->s[i].host, sizeof(q->s[i].host), "10.%u.%u.%u", (h >> 16) & 255,
                     (h >> 8) & 255, h & 255);
            break;
        }
    }
}

/* ------------------------------------------------------------ lookups */

static const char *id_at(const mcr_snapshot *s, uint32_t index)
{
    mcr_server_desc d;
    EXPECT_INT(mcr_snapshot_server(s, index, &d), ==, MCR_OK);
    return d.id;
}

/* Id of the owner of hash value h, by the ring's own lookup. */
static const char *owner(const mcr_snapshot *s, uint32_t h)
{
    const mcr_ring *ring = mcr_snapshot_ring(s);
    return id_at(s, mcr_snapshot_ring_server(s, mcr_ring_find(ring, h)));
}

static int is_modula(const mcr_snapshot *s)
{
    mcr_mode m = mcr_ring_mode(mcr_snapshot_ring(s));
    return m == MCR_MODE_MODULA || m == MCR_MODE_TWEMPROXY_MODULA;
}

static mcr_diff *diff_of(const mcr_snapshot *a, const mcr_snapshot *b)
{
    mcr_error err;
    mcr_diff *d = NULL;
    int rc = mcr_diff_new(a, b, &d, &err);
    EXPECT_MSG(rc == MCR_OK, "diff_new: %s", err.message);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* The arc holding h, or -1. */
static long arc_of(const mcr_diff *d, uint32_t h)
{
    size_t lo = 0, hi = mcr_diff_arc_count(d);
    mcr_diff_arc a;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        mcr_diff_arc_get(d, mid, &a);
        if (a.last < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == mcr_diff_arc_count(d))
        return -1;
    mcr_diff_arc_get(d, lo, &a);
    return a.first <= h ? (long)lo : -1;
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

/* Hash values whose owner changed, counted without the diff: between two
 * consecutive point values of either continuum both owners are constant,
 * so mcr_ring_find() at the end of each such interval decides it. */
static uint64_t moved_by_intervals(const mcr_snapshot *a, const mcr_snapshot *b)
{
    const mcr_ring *ra = mcr_snapshot_ring(a), *rb = mcr_snapshot_ring(b);
    size_t na = mcr_ring_point_count(ra), nb = mcr_ring_point_count(rb), n = 0;
    uint32_t *v = malloc((na + nb + 1) * sizeof(*v));
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < na; i++)
        mcr_ring_point(ra, i, &v[n++], NULL);
    for (size_t i = 0; i < nb; i++)
        mcr_ring_point(rb, i, &v[n++], NULL);
    v[n++] = UINT32_MAX;
    qsort(v, n, sizeof(*v), cmp_u32);
    uint64_t moved = 0, start = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && v[i] == v[i - 1])
            continue;
        if (strcmp(owner(a, v[i]), owner(b, v[i])) != 0)
            moved += (uint64_t)v[i] - start + 1;
        start = (uint64_t)v[i] + 1;
    }
    free(v);
    return moved;
}

/* #{h in [s, e] : lo <= h % p < hi}. */
static uint64_t residues_in(uint64_t s, uint64_t e, uint64_t p, uint64_t lo, uint64_t hi)
{
    /* F(x) = #{h < x : lo <= h % p < hi} */
    uint64_t fe, fs;
    uint64_t x = e + 1;
    uint64_t r = x % p;
    fe = x / p * (hi - lo) + (r > lo ? (r < hi ? r : hi) - lo : 0);
    x = s;
    r = x % p;
    fs = x / p * (hi - lo) + (r > lo ? (r < hi ? r : hi) - lo : 0);
    return fe - fs;
}

/* Continuum `c` against modula `m` (either old): hash values whose owner
 * changed, from each interval of c and the residue block of the server of m
 * with the same id. */
static uint64_t moved_continuum_modula(const mcr_snapshot *c, const mcr_snapshot *m)
{
    const mcr_ring *rc = mcr_snapshot_ring(c), *rm = mcr_snapshot_ring(m);
    int weighted = mcr_ring_mode(rm) == MCR_MODE_TWEMPROXY_MODULA;
    size_t nm = mcr_ring_server_count(rm), np = mcr_ring_point_count(rc);
    uint64_t lo[MAX_SERVERS + 1], p = 0;
    for (size_t i = 0; i < nm; i++) {
        lo[i] = p;
        p += weighted ? mcr_ring_server_weight(rm, i) : 1;
    }
    lo[nm] = p;
    uint32_t *v = malloc((np + 1) * sizeof(*v));
    size_t n = 0;
    for (size_t i = 0; i < np; i++)
        mcr_ring_point(rc, i, &v[n++], NULL);
    v[n++] = UINT32_MAX;
    uint64_t stayed = 0, start = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && v[i] == v[i - 1])
            continue;
        const char *id = owner(c, v[i]);
        for (size_t k = 0; k < nm; k++) {
            if (strcmp(id_at(m, mcr_snapshot_ring_server(m, (uint32_t)k)), id) == 0)
                stayed += residues_in(start, v[i], p, lo[k], lo[k + 1]);
        }
        start = (uint64_t)v[i] + 1;
    }
    free(v);
    return ((uint64_t)1 << 32) - stayed;
}

/* Two modula snapshots whose owners repeat every `period` values: count
 * one period by lookups, and the leftover start once more. */
static uint64_t moved_modula_modula(const mcr_snapshot *a, const mcr_snapshot *b, uint64_t period)
{
    uint64_t full = 0, head = 0, rest = ((uint64_t)1 << 32) % period;
    for (uint64_t h = 0; h < period; h++) {
        if (strcmp(owner(a, (uint32_t)h), owner(b, (uint32_t)h)) != 0) {
            full++;
            if (h < rest)
                head++;
        }
    }
    return full * (((uint64_t)1 << 32) / period) + head;
}

/* Everything a diff says, checked against lookups in both snapshots. */
static void check_diff(const mcr_snapshot *a, const mcr_snapshot *b, const mcr_diff *d,
                       tu_rng *r)
{
    double moved = mcr_diff_moved(d);
    EXPECT(moved >= 0.0 && moved <= 1.0);

    /* Pairs: sorted, positive, adding up to the total exactly. */
    size_t np = mcr_diff_pair_count(d);
    double sum = 0;
    mcr_diff_pair prev = {.from = NULL, .to = NULL, .fraction = 0};
    for (size_t i = 0; i < np; i++) {
        mcr_diff_pair p;
        EXPECT_INT(mcr_diff_pair_get(d, i, &p), ==, MCR_OK);
        EXPECT(p.fraction > 0 && p.fraction <= 1);
        EXPECT_STR(p.from, !=, p.to);
        EXPECT(mcr_snapshot_find(a, p.from) != MCR_NO_SERVER);
        EXPECT(mcr_snapshot_find(b, p.to) != MCR_NO_SERVER);
        if (i > 0) {
            EXPECT(prev.fraction >= p.fraction);
            if (prev.fraction == p.fraction) {
                int c = strcmp(prev.from, p.from);
                EXPECT(c < 0 || (c == 0 && strcmp(prev.to, p.to) < 0));
            }
        }
        sum += p.fraction;
        prev = p;
    }
    EXPECT_MSG(sum == moved, "pairs add up to %.17g, moved %.17g", sum, moved);
    EXPECT_INT(np == 0, ==, moved == 0);

    size_t na = mcr_diff_arc_count(d);
    int modula = is_modula(a) || is_modula(b);
    if (modula) {
        EXPECT_UINT(na, ==, 0);
    } else {
        /* Arcs: ascending, disjoint, maximal, owners as the lookups say. */
        uint64_t total = 0;
        mcr_diff_arc arc, last = {.first = 0, .last = 0, .from = NULL, .to = NULL};
        for (size_t i = 0; i < na; i++) {
            EXPECT_INT(mcr_diff_arc_get(d, i, &arc), ==, MCR_OK);
            EXPECT(arc.first <= arc.last);
            EXPECT_STR(arc.from, !=, arc.to);
            if (i > 0) {
                EXPECT(arc.first > last.last);
                if (arc.first == last.last + 1)
                    EXPECT(strcmp(arc.from, last.from) != 0 || strcmp(arc.to, last.to) != 0);
            }
            uint32_t probes[6] = {arc.first, arc.last, arc.first + (arc.last - arc.first) / 2};
            for (int k = 3; k < 6; k++)
                probes[k] = arc.first + (uint32_t)(tu_rand(r) % ((uint64_t)arc.last - arc.first + 1));
            for (int k = 0; k < 6; k++) {
                EXPECT_STR(owner(a, probes[k]), ==, arc.from);
                EXPECT_STR(owner(b, probes[k]), ==, arc.to);
            }
            /* Just outside: unchanged, unless another arc starts there. */
            if (arc.first > 0 && (i == 0 || last.last != arc.first - 1))
                EXPECT_STR(owner(a, arc.first - 1), ==, owner(b, arc.first - 1));
            if (arc.last < UINT32_MAX && arc_of(d, arc.last + 1) < 0)
                EXPECT_STR(owner(a, arc.last + 1), ==, owner(b, arc.last + 1));
            total += (uint64_t)arc.last - arc.first + 1;
            last = arc;
        }
        EXPECT_MSG((double)total / TWO32 == moved, "arcs cover %llu values, moved %.17g",
                      (unsigned long long)total, moved);
        EXPECT_UINT(total, ==, moved_by_intervals(a, b));

        /* Every pair's share is the length of its arcs. */
        for (size_t i = 0; i < np; i++) {
            mcr_diff_pair p;
            uint64_t len = 0;
            mcr_diff_pair_get(d, i, &p);
            for (size_t k = 0; k < na; k++) {
                mcr_diff_arc_get(d, k, &arc);
                if (strcmp(arc.from, p.from) == 0 && strcmp(arc.to, p.to) == 0)
                    len += (uint64_t)arc.last - arc.first + 1;
            }
            EXPECT((double)len / TWO32 == p.fraction);
        }

        /* Hash values at and around the points of both continua, and
         * random ones: in an arc exactly when their owner changed. */
        for (int k = 0; k < 3000; k++) {
            uint32_t h;
            const mcr_ring *ring = mcr_snapshot_ring(k & 1 ? a : b);
            size_t pts = mcr_ring_point_count(ring);
            if (k % 3 == 2 || pts == 0)
                h = (uint32_t)tu_rand(r);
            else
                mcr_ring_point(ring, tu_below(r, (uint32_t)pts), &h, NULL);
            h += (uint32_t)(k % 5) - 2;
            int changed = strcmp(owner(a, h), owner(b, h)) != 0;
            EXPECT_MSG(changed == (arc_of(d, h) >= 0), "hash %u: changed %d", h, changed);
        }
    }
    if (modula && is_modula(a) != is_modula(b))
        EXPECT((double)moved_continuum_modula(is_modula(a) ? b : a, is_modula(a) ? a : b) /
                      TWO32 == moved);

    /* Random hash values: the share that moved is near the diff's. */
    int hits = 0, samples = 20000;
    for (int k = 0; k < samples; k++) {
        uint32_t h = (uint32_t)tu_rand(r);
        hits += strcmp(owner(a, h), owner(b, h)) != 0;
    }
    EXPECT_MSG(fabs((double)hits / samples - moved) < 0.02, "sampled %g, diff %g",
                  (double)hits / samples, moved);

    /* Keys: moved exactly when their owners' ids differ. */
    for (int k = 0; k < 500; k++) {
        char key[64];
        size_t len = k == 0 ? 0 : tu_key(r, key, 40);
        int changed = strcmp(id_at(a, mcr_snapshot_locate(a, key, len)),
                             id_at(b, mcr_snapshot_locate(b, key, len))) != 0;
        EXPECT_INT(mcr_diff_key_moved(d, key, len), ==, changed);
    }
}

/* ------------------------------------------------------------ diffs */

static const mcr_mode continuum_modes[] = {
    MCR_MODE_KETAMA,           MCR_MODE_CONSISTENT,    MCR_MODE_WEIGHTED,
    MCR_MODE_SPY,              MCR_MODE_SPY_WEIGHTED,  MCR_MODE_TWEMPROXY_KETAMA,
    MCR_MODE_STABLE_KETAMA,
};
#define NCONT (sizeof(continuum_modes) / sizeof(continuum_modes[0]))

START_TEST(diff_random_continua)
{
    tu_rng r;
    tu_rng_init(&r, 1);
    const int n = tu_cases(500);
    for (int t = 0; t < n; t++) {
        pool p, q;
        mcr_mode mode = continuum_modes[t % NCONT];
        random_pool(&r, &p, 1 + tu_below(&r, t < n / 2 ? 6 : 40), mode, tu_below(&r, 4));
        mutate(&r, &p, &q, 3);
        mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
        mcr_diff *d = diff_of(a, b);
        check_diff(a, b, d, &r);
        mcr_diff_free(d);
        /* and back */
        d = diff_of(b, a);
        check_diff(b, a, d, &r);
        mcr_diff_free(d);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
}
END_TEST

/* Between two modes (same key hash): still a diff of hash values. */
START_TEST(diff_across_modes)
{
    tu_rng r;
    tu_rng_init(&r, 2);
    for (int t = 0; t < 30; t++) {
        pool p, q;
        random_pool(&r, &p, 2 + tu_below(&r, 20), MCR_MODE_KETAMA, 0);
        mutate(&r, &p, &q, 0);
        q.mode = t % 2 ? MCR_MODE_STABLE_KETAMA : MCR_MODE_WEIGHTED;
        mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
        mcr_diff *d = diff_of(a, b);
        check_diff(a, b, d, &r);
        mcr_diff_free(d);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
}
END_TEST

/* The CRC point hash gives 15-bit point values: many ties between servers,
 * points at small values (0 among them, sometimes) and one huge
 * wrap-around arc from 32767 to the first point. */
START_TEST(diff_ties_and_wrap)
{
    tu_rng r;
    tu_rng_init(&r, 3);
    int ties = 0;
    for (int t = 0; t < 40; t++) {
        pool p, q;
        random_pool(&r, &p, 5 + tu_below(&r, 40), t % 2 ? MCR_MODE_CONSISTENT : MCR_MODE_SPY, 0);
        p.hash = MCR_HASH_CRC;
        mutate(&r, &p, &q, 0);
        mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
        const mcr_ring *ring = mcr_snapshot_ring(a);
        for (size_t i = 1; i < mcr_ring_point_count(ring); i++) {
            uint32_t v0, v1;
            mcr_ring_point(ring, i - 1, &v0, NULL);
            mcr_ring_point(ring, i, &v1, NULL);
            ties += v0 == v1;
        }
        mcr_diff *d = diff_of(a, b);
        check_diff(a, b, d, &r);
        /* The wrap-around: values above every point belong to the owner
         * of 0, in both; a change there is two arcs, never one that wraps. */
        EXPECT_STR(owner(a, 0), ==, owner(a, UINT32_MAX));
        EXPECT_STR(owner(b, 0), ==, owner(b, UINT32_MAX));
        EXPECT_INT(arc_of(d, UINT32_MAX) >= 0, ==, arc_of(d, 0) >= 0);
        if (arc_of(d, 0) >= 0) {
            mcr_diff_arc first, last;
            mcr_diff_arc_get(d, 0, &first);
            mcr_diff_arc_get(d, mcr_diff_arc_count(d) - 1, &last);
            EXPECT_UINT(first.first, ==, 0);
            EXPECT_UINT(last.last, ==, UINT32_MAX);
            EXPECT_UINT(mcr_diff_arc_count(d), >, 1);
        }
        mcr_diff_free(d);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
    EXPECT_INT(ties, >, 0);
}
END_TEST

/* Keys with special rules: twemproxy's empty key (hash 0) and hash tag,
 * libmemcached's namespace (a prefixed key over 250 bytes hashes to 0),
 * and the one-server shortcut. The per-key test locates them as lookups
 * do, and agrees with the arc of their hash. */
START_TEST(diff_special_keys)
{
    tu_rng r;
    tu_rng_init(&r, 4);
    char key[400];
    for (int t = 0; t < 60; t++) {
        pool p, q;
        int kind = t % 3;
        random_pool(&r, &p, 1 + tu_below(&r, 8),
                    kind == 0 ? MCR_MODE_TWEMPROXY_KETAMA : MCR_MODE_CONSISTENT, 0);
        if (kind == 0)
            p.tag = "{}";
        if (kind == 1)
            p.prefix = "ns:";
        if (kind == 2)
            p.n = 1; /* one server: keys are not even hashed */
        mutate(&r, &p, &q, 0);
        mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
        mcr_diff *d = diff_of(a, b);
        check_diff(a, b, d, &r);
        const mcr_ring *ring = mcr_snapshot_ring(b);
        for (int k = 0; k < 300; k++) {
            size_t len;
            if (k == 0) {
                len = 0;
            } else if (k % 3 == 0) { /* over 250 bytes with the prefix */
                len = 248 + tu_below(&r, 100);
                memset(key, 'k', len);
                key[tu_below(&r, (uint32_t)len)] = 'x';
            } else if (k % 3 == 1) {
                len = (size_t)snprintf(key, sizeof(key), "{user%u}.%u", tu_below(&r, 50),
                                       (unsigned)tu_rand(&r));
            } else {
                len = tu_key(&r, key, 40);
            }
            int changed = strcmp(id_at(a, mcr_snapshot_locate(a, key, len)),
                                 id_at(b, mcr_snapshot_locate(b, key, len))) != 0;
            EXPECT_INT(mcr_diff_key_moved(d, key, len), ==, changed);
            uint32_t h = mcr_ring_hash(ring, key, len);
            EXPECT_UINT(h, ==, mcr_ring_hash(mcr_snapshot_ring(a), key, len));
            EXPECT_INT(changed, ==, arc_of(d, h) >= 0);
        }
        mcr_diff_free(d);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
}
END_TEST

START_TEST(diff_identical)
{
    tu_rng r;
    tu_rng_init(&r, 5);
    for (int t = 0; t < 40; t++) {
        pool p;
        mcr_mode mode = t % 4 == 3 ? (t % 8 == 3 ? MCR_MODE_MODULA : MCR_MODE_TWEMPROXY_MODULA)
                                   : continuum_modes[t % NCONT];
        random_pool(&r, &p, 1 + tu_below(&r, 30), mode, 2);
        mcr_snapshot *a = snap_of(&p), *b = snap_of(&p);
        for (int same = 0; same < 2; same++) {
            mcr_diff *d = diff_of(a, same ? a : b);
            EXPECT(mcr_diff_moved(d) == 0.0);
            EXPECT_UINT(mcr_diff_arc_count(d), ==, 0);
            EXPECT_UINT(mcr_diff_pair_count(d), ==, 0);
            for (int k = 0; k < 200; k++) {
                char key[64];
                size_t len = tu_key(&r, key, 40);
                EXPECT_INT(mcr_diff_key_moved(d, key, len), ==, 0);
            }
            mcr_diff_free(d);
        }
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
}
END_TEST

/* A named server moved to another address keeps its id; in the native
 * modes its labels hash the id, so nothing moves. */
START_TEST(diff_same_id_new_address)
{
    tu_rng r;
    tu_rng_init(&r, 6);
    for (int t = 0; t < 20; t++) {
        pool p, q;
        random_pool(&r, &p, 2 + tu_below(&r, 20),
                    t % 2 ? MCR_MODE_KETAMA : MCR_MODE_STABLE_KETAMA, 0);
        size_t i = tu_below(&r, (uint32_t)p.n);
        snprintf(p.s[i].id, sizeof(p.s[i].id), "moving-%d", t);
        q = p;
        snprintf(q.s[i].host, sizeof(q.s[i].host), "192.168.7.%d", t);
        mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
        mcr_diff *d = diff_of(a, b);
        EXPECT(mcr_diff_moved(d) == 0.0);
        EXPECT_UINT(mcr_diff_arc_count(d), ==, 0);
        mcr_diff_free(d);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
}
END_TEST

/* Adding one server to N moves about 1/(N+1) of the ring, all of it to the
 * new server, in the modes where other servers keep their points. */
START_TEST(diff_add_one_server)
{
    static const mcr_mode modes[] = {MCR_MODE_STABLE_KETAMA, MCR_MODE_CONSISTENT,
                                     MCR_MODE_SPY};
    tu_rng r;
    tu_rng_init(&r, 7);
    for (size_t m = 0; m < 3; m++) {
        double ratio_sum = 0;
        int trials = 100;
        for (int t = 0; t < trials; t++) {
            pool p, q;
            size_t n = 1 + tu_below(&r, 50);
            random_pool(&r, &p, n, modes[m], 0);
            p.hash = MCR_HASH_MD5;
            for (size_t i = 0; i < n; i++)
                p.s[i].weight = 1;
            q = p;
            new_spec(&r, &q.s[n], 0);
            q.s[n].weight = 1;
            q.n = n + 1;
            mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
            const char *added = id_at(b, (uint32_t)n);
            mcr_diff *d = diff_of(a, b);
            for (size_t i = 0; i < mcr_diff_arc_count(d); i++) {
                mcr_diff_arc arc;
                mcr_diff_arc_get(d, i, &arc);
                EXPECT_STR(arc.to, ==, added);
            }
            for (size_t i = 0; i < mcr_diff_pair_count(d); i++) {
                mcr_diff_pair pr;
                mcr_diff_pair_get(d, i, &pr);
                EXPECT_STR(pr.to, ==, added);
            }
            double want = 1.0 / (double)(n + 1), got = mcr_diff_moved(d);
            /* 100 or 160 points per server: a share within +-50% is over
             * five standard deviations. */
            EXPECT_MSG(fabs(got - want) < 0.5 * want, "mode %d, %zu servers: moved %g",
                          (int)modes[m], n, got);
            ratio_sum += got / want;
            if (t < 10)
                check_diff(a, b, d, &r);
            mcr_diff_free(d);
            mcr_snapshot_unref(a);
            mcr_snapshot_unref(b);
        }
        /* 100 trials: the mean is within 5% with over four deviations. */
        EXPECT_MSG(fabs(ratio_sum / trials - 1.0) < 0.05, "mode %d: mean ratio %g",
                      (int)modes[m], ratio_sum / trials);
    }
}
END_TEST

/* Removing one server moves exactly its share, all of it from it. */
START_TEST(diff_remove_one_server)
{
    tu_rng r;
    tu_rng_init(&r, 8);
    for (int t = 0; t < 40; t++) {
        pool p, q;
        mcr_mode mode = t % 2 ? MCR_MODE_STABLE_KETAMA : MCR_MODE_CONSISTENT;
        random_pool(&r, &p, 2 + tu_below(&r, 30), mode, 0);
        q = p;
        size_t gone = tu_below(&r, (uint32_t)p.n);
        memmove(&q.s[gone], &q.s[gone + 1], (q.n - gone - 1) * sizeof(spec));
        q.n--;
        mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
        const char *id = id_at(a, (uint32_t)gone);
        mcr_diff *d = diff_of(a, b);
        for (size_t i = 0; i < mcr_diff_pair_count(d); i++) {
            mcr_diff_pair pr;
            mcr_diff_pair_get(d, i, &pr);
            EXPECT_STR(pr.from, ==, id);
        }
        /* Its share in the old continuum, point by point. */
        const mcr_ring *ring = mcr_snapshot_ring(a);
        size_t np = mcr_ring_point_count(ring);
        uint64_t share = 0, start = 0;
        uint32_t v, last = 0;
        for (size_t i = 0; i < np; i++) {
            mcr_ring_point(ring, i, &v, NULL);
            if (i > 0 && v == last)
                continue;
            if (strcmp(owner(a, v), id) == 0)
                share += (uint64_t)v - start + 1;
            start = (uint64_t)v + 1;
            last = v;
        }
        if (strcmp(owner(a, UINT32_MAX), id) == 0 && start <= UINT32_MAX)
            share += ((uint64_t)1 << 32) - start;
        EXPECT((double)share / TWO32 == mcr_diff_moved(d));
        mcr_diff_free(d);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
}
END_TEST

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static uint64_t period_of(const mcr_snapshot *s)
{
    const mcr_ring *ring = mcr_snapshot_ring(s);
    if (mcr_ring_mode(ring) == MCR_MODE_MODULA)
        return mcr_ring_server_count(ring);
    uint64_t w = 0;
    for (size_t i = 0; i < mcr_ring_server_count(ring); i++)
        w += mcr_ring_server_weight(ring, i);
    return w;
}

/* Modula against modula: no arcs, exact shares (one period counted by
 * lookups here). Adding a server to "modula" moves all but about 1/(N+1). */
START_TEST(diff_modula)
{
    tu_rng r;
    tu_rng_init(&r, 9);
    for (int t = 0; t < 40; t++) {
        pool p, q;
        mcr_mode mode = t % 2 ? MCR_MODE_MODULA : MCR_MODE_TWEMPROXY_MODULA;
        random_pool(&r, &p, 1 + tu_below(&r, 12), mode, 0);
        mutate(&r, &p, &q, 0);
        if (t % 4 == 0) /* and a mixed pair of modula modes */
            q.mode = mode == MCR_MODE_MODULA ? MCR_MODE_TWEMPROXY_MODULA : MCR_MODE_MODULA;
        mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
        mcr_diff *d = diff_of(a, b);
        check_diff(a, b, d, &r);
        uint64_t pa = period_of(a), pb = period_of(b);
        uint64_t period = pa / gcd(pa, pb) * pb;
        EXPECT((double)moved_modula_modula(a, b, period) / TWO32 == mcr_diff_moved(d));
        mcr_diff_free(d);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }

    /* N -> N+1 in "modula": a key stays when h % N == h % (N+1), i.e. when
     * h % (N(N+1)) < N: a share of about 1/(N+1) stays. */
    for (size_t n = 1; n < 20; n++) {
        pool p, q;
        random_pool(&r, &p, n, MCR_MODE_MODULA, 0);
        q = p;
        new_spec(&r, &q.s[n], 0);
        q.n = n + 1;
        mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
        mcr_diff *d = diff_of(a, b);
        uint64_t l = n * (n + 1), stayed = 0;
        for (uint64_t i = 0; i < n; i++)
            stayed += (((uint64_t)1 << 32) - 1 - i) / l + 1;
        EXPECT((double)(((uint64_t)1 << 32) - stayed) / TWO32 == mcr_diff_moved(d));
        mcr_diff_free(d);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
}
END_TEST

/* A continuum against a modula snapshot (a migration from modula to
 * consistent hashing, or back): no arcs, exact shares. */
START_TEST(diff_modula_to_continuum)
{
    tu_rng r;
    tu_rng_init(&r, 10);
    for (int t = 0; t < 30; t++) {
        pool p, q;
        mcr_mode mode = t % 2 ? MCR_MODE_MODULA : MCR_MODE_TWEMPROXY_MODULA;
        random_pool(&r, &p, 1 + tu_below(&r, 20), mode, 0);
        mutate(&r, &p, &q, 0);
        q.mode = continuum_modes[t % NCONT];
        mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
        if (t % 3 == 0) { /* and the other way */
            mcr_snapshot *x = a;
            a = b;
            b = x;
        }
        mcr_diff *d = diff_of(a, b);
        check_diff(a, b, d, &r);
        mcr_diff_free(d);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
}
END_TEST

START_TEST(diff_refusals)
{
    tu_rng r;
    tu_rng_init(&r, 11);
    mcr_error err;
    mcr_diff *d = NULL;
    pool p, q;

    random_pool(&r, &p, 5, MCR_MODE_CONSISTENT, 0);
    p.hash = MCR_HASH_MD5;
    q = p;
    q.hash = MCR_HASH_CRC;
    mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
    EXPECT_INT(mcr_diff_new(a, b, &d, &err), ==, MCR_ERR_UNSUPPORTED);
    EXPECT_INT(err.code, ==, MCR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(d);
    EXPECT_INT(mcr_diff_new(NULL, b, &d, &err), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_diff_new(a, NULL, &d, &err), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_diff_new(a, a, NULL, &err), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_diff_new(a, a, NULL, NULL), ==, MCR_ERR_INVALID);
    ck_assert_ptr_null(d);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);

    /* twemproxy-modula with large coprime total weights: the period is
     * about 10^12 values. */
    random_pool(&r, &p, 1, MCR_MODE_TWEMPROXY_MODULA, 0);
    q = p;
    p.s[0].weight = 999983; /* prime */
    q.s[0].weight = 999979; /* prime */
    a = snap_of(&p);
    b = snap_of(&q);
    EXPECT_INT(mcr_diff_new(a, b, &d, &err), ==, MCR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(d);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    /* A modulus of 2 x 10^6 against a continuum of 64 servers: over 10^8
     * steps. */
    random_pool(&r, &p, 2, MCR_MODE_TWEMPROXY_MODULA, 0);
    p.s[0].weight = p.s[1].weight = MCR_WEIGHT_MAX;
    random_pool(&r, &q, MAX_SERVERS, MCR_MODE_CONSISTENT, 0);
    q.hash = p.hash;
    a = snap_of(&p);
    b = snap_of(&q);
    EXPECT_INT(mcr_diff_new(a, b, &d, &err), ==, MCR_ERR_UNSUPPORTED);
    EXPECT_INT(mcr_diff_new(b, a, &d, &err), ==, MCR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(d);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);

    /* Readers accept NULL. */
    mcr_diff_arc arc;
    mcr_diff_pair pr;
    mcr_diff_free(NULL);
    EXPECT(mcr_diff_moved(NULL) == 0.0);
    EXPECT_UINT(mcr_diff_arc_count(NULL), ==, 0);
    EXPECT_UINT(mcr_diff_pair_count(NULL), ==, 0);
    EXPECT_INT(mcr_diff_arc_get(NULL, 0, &arc), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_diff_pair_get(NULL, 0, &pr), ==, MCR_ERR_INVALID);
}
END_TEST

/* Out-of-range readers, and ids that outlive the caller's references. */
START_TEST(diff_owns_references)
{
    tu_rng r;
    tu_rng_init(&r, 12);
    pool p, q;
    random_pool(&r, &p, 10, MCR_MODE_STABLE_KETAMA, 0);
    q = p;
    q.n = 9;
    mcr_snapshot *a = snap_of(&p), *b = snap_of(&q);
    mcr_diff *d = diff_of(a, b);
    char want[32];
    snprintf(want, sizeof(want), "%s", id_at(a, 9));
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);

    mcr_diff_arc arc, keep = {.first = 1, .last = 2, .from = "x", .to = "y"};
    mcr_diff_pair pr, keep_pr = {.from = "x", .to = "y", .fraction = 0.5};
    size_t na = mcr_diff_arc_count(d), np = mcr_diff_pair_count(d);
    EXPECT_UINT(na, >, 0);
    for (size_t i = 0; i < na; i++) {
        EXPECT_INT(mcr_diff_arc_get(d, i, &arc), ==, MCR_OK);
        EXPECT_STR(arc.from, ==, want);
    }
    arc = keep;
    EXPECT_INT(mcr_diff_arc_get(d, na, &arc), ==, MCR_ERR_INVALID);
    EXPECT(arc.first == keep.first && arc.from == keep.from);
    EXPECT_INT(mcr_diff_arc_get(d, 0, NULL), ==, MCR_ERR_INVALID);
    EXPECT_UINT(np, >, 0);
    pr = keep_pr;
    EXPECT_INT(mcr_diff_pair_get(d, np, &pr), ==, MCR_ERR_INVALID);
    EXPECT(pr.fraction == 0.5 && pr.from == keep_pr.from);
    int moved = 0;
    for (int k = 0; k < 1000; k++) {
        char key[32];
        size_t len = tu_key(&r, key, 20);
        moved += mcr_diff_key_moved(d, key, len);
    }
    EXPECT_INT(moved, >, 0);
    mcr_diff_free(d);
}
END_TEST

/* A snapshot from changes (mcr_snapshot_apply): states and removals, and
 * a diff of each step agreeing with lookups. */
START_TEST(diff_states)
{
    tu_rng r;
    tu_rng_init(&r, 13);
    mcr_error err;
    for (int t = 0; t < 20; t++) {
        pool p;
        random_pool(&r, &p, 3 + tu_below(&r, 20), continuum_modes[t % NCONT], 2);
        mcr_snapshot *a = snap_of(&p), *b = NULL;
        mcr_changes *ch = mcr_changes_new();
        ck_assert_ptr_nonnull(ch);
        const char *drain = id_at(a, 0), *down = id_at(a, 1);
        EXPECT_INT(mcr_changes_set_state(ch, drain, MCR_STATE_DRAINING, &err), ==, MCR_OK);
        EXPECT_INT(mcr_changes_set_state(ch, down, MCR_STATE_DOWN, &err), ==, MCR_OK);
        int rc = mcr_snapshot_apply(a, ch, &b, &err);
        EXPECT_MSG(rc == MCR_OK, "apply: %s", err.message);
        mcr_changes_free(ch);
        mcr_diff *d = diff_of(a, b);
        check_diff(a, b, d, &r);
        for (size_t i = 0; i < mcr_diff_pair_count(d); i++) {
            mcr_diff_pair pr;
            mcr_diff_pair_get(d, i, &pr);
            EXPECT(strcmp(pr.from, drain) == 0 || strcmp(pr.from, down) == 0 ||
                      p.mode != MCR_MODE_STABLE_KETAMA);
        }
        mcr_diff_free(d);
        d = diff_of(b, a);
        check_diff(b, a, d, &r);
        mcr_diff_free(d);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
}
END_TEST

/* ------------------------------------------------------------ replicas */

static const char *zone_at(const mcr_snapshot *s, uint32_t index)
{
    mcr_server_desc d;
    EXPECT_INT(mcr_snapshot_server(s, index, &d), ==, MCR_OK);
    return d.zone != NULL && d.zone[0] != '\0' ? d.zone : NULL;
}

static int zone_in(const mcr_snapshot *s, const uint32_t *list, size_t n, const char *z)
{
    for (size_t i = 0; i < n; i++) {
        const char *y = zone_at(s, list[i]);
        if (y != NULL && strcmp(y, z) == 0)
            return 1;
    }
    return 0;
}

static size_t zones_of(const mcr_snapshot *s, const uint32_t *list, size_t n)
{
    size_t zones = 0;
    for (size_t i = 0; i < n; i++) {
        const char *z = zone_at(s, list[i]);
        zones += z != NULL && !zone_in(s, list, i, z);
    }
    return zones;
}

/* The replicas by the definition, slowly: every distinct server clockwise
 * from the key's point, then new zones first, then servers without a zone,
 * then the rest, each in clockwise order. Returns the count. */
static size_t reference_replicas(const mcr_snapshot *s, const void *key, size_t len, size_t n,
                                 uint32_t *out)
{
    const mcr_ring *ring = mcr_snapshot_ring(s);
    uint32_t m = (uint32_t)mcr_ring_server_count(ring);
    uint32_t order[MAX_SERVERS], nd = 0;
    uint32_t primary = mcr_snapshot_locate(s, key, len);
    uint32_t p = 0;
    while (mcr_snapshot_ring_server(s, p) != primary)
        p++;
    if (is_modula(s)) {
        for (uint32_t k = 0; k < m; k++)
            order[nd++] = (p + k) % m;
    } else {
        size_t np = mcr_ring_point_count(ring);
        size_t start = mcr_ring_find_point(ring, mcr_ring_hash(ring, key, len));
        int seen[MAX_SERVERS] = {0};
        for (size_t k = 0; k < np; k++) {
            uint32_t srv;
            mcr_ring_point(ring, (start + k) % np, NULL, &srv);
            if (!seen[srv]) {
                seen[srv] = 1;
                order[nd++] = srv;
            }
        }
        EXPECT(nd > 0);
        EXPECT_UINT(order[0], ==, p);
    }
    uint32_t taken[MAX_SERVERS], none[MAX_SERVERS], again[MAX_SERVERS];
    size_t nt = 0, nn = 0, na = 0;
    for (uint32_t k = 0; k < nd; k++) {
        uint32_t idx = mcr_snapshot_ring_server(s, order[k]);
        const char *z = zone_at(s, idx);
        if (k == 0 || (z != NULL && !zone_in(s, taken, nt, z)))
            taken[nt++] = idx;
        else if (z == NULL)
            none[nn++] = idx;
        else
            again[na++] = idx;
    }
    size_t c = 0;
    for (size_t k = 0; k < nt && c < n; k++)
        out[c++] = taken[k];
    for (size_t k = 0; k < nn && c < n; k++)
        out[c++] = none[k];
    for (size_t k = 0; k < na && c < n; k++)
        out[c++] = again[k];
    return c;
}

/* Distinct zones among the active servers. */
static size_t active_zones(const mcr_snapshot *s)
{
    uint32_t act[MAX_SERVERS];
    size_t n = 0;
    for (size_t i = 0; i < mcr_snapshot_server_count(s); i++) {
        mcr_server_desc d;
        mcr_snapshot_server(s, i, &d);
        if (d.state == MCR_STATE_ACTIVE)
            act[n++] = (uint32_t)i;
    }
    return zones_of(s, act, n);
}

static void check_replicas(const mcr_snapshot *s, tu_rng *r, int keys)
{
    size_t m = mcr_snapshot_active_count(s), zones = active_zones(s);
    for (int k = 0; k < keys; k++) {
        char key[64];
        size_t len = tu_key(r, key, 40);
        size_t n = 1 + tu_below(r, (uint32_t)m + 2);
        uint32_t got[MAX_SERVERS + 2], want[MAX_SERVERS + 2];
        int under = -1;
        size_t c = mcr_snapshot_replicas(s, key, len, n, got, &under);
        size_t wc = reference_replicas(s, key, len, n, want);
        EXPECT_UINT(c, ==, wc);
        EXPECT_UINT(got[0], ==, mcr_snapshot_locate(s, key, len));
        for (size_t i = 0; i < c; i++) {
            EXPECT_MSG(got[i] == want[i], "key %s n %zu: replica %zu is %u, want %u", key, n,
                          i, got[i], want[i]);
            mcr_server_desc d;
            mcr_snapshot_server(s, got[i], &d);
            EXPECT_INT(d.state, ==, MCR_STATE_ACTIVE);
            for (size_t j = 0; j < i; j++)
                EXPECT_UINT(got[i], !=, got[j]);
        }
        /* As many servers as there are (every server has points here), and
         * as many zones as the primary leaves possible. */
        EXPECT_UINT(c, ==, n < m ? n : m);
        size_t z = zones_of(s, got, c), pz = zone_at(s, got[0]) != NULL;
        size_t best = pz + (n - 1 < zones - pz ? n - 1 : zones - pz);
        EXPECT_UINT(z, ==, best);
        int want_under = c < n || z < (n < zones ? n : zones);
        EXPECT_INT(under, ==, want_under);
        /* NULL flag accepted; same servers. */
        uint32_t again[MAX_SERVERS + 2];
        EXPECT_UINT(mcr_snapshot_replicas(s, key, len, n, again, NULL), ==, c);
        EXPECT(memcmp(again, got, c * sizeof(*got)) == 0);
    }
}

START_TEST(replicas_random)
{
    tu_rng r;
    tu_rng_init(&r, 20);
    for (int t = 0; t < tu_cases(400); t++) {
        pool p;
        mcr_mode mode = t % 5 == 4 ? (t % 10 == 4 ? MCR_MODE_MODULA : MCR_MODE_TWEMPROXY_MODULA)
                                   : continuum_modes[t % NCONT];
        random_pool(&r, &p, 1 + tu_below(&r, 30), mode, tu_below(&r, 6));
        mcr_snapshot *s = snap_of(&p);
        check_replicas(s, &r, 200);
        mcr_snapshot_unref(s);
    }
}
END_TEST

/* Three zones of four servers each: any n replicas span min(n, 3) zones,
 * and are complete (not under-replicated) up to 12. */
START_TEST(replicas_zones)
{
    tu_rng r;
    tu_rng_init(&r, 21);
    pool p;
    random_pool(&r, &p, 12, MCR_MODE_STABLE_KETAMA, 0);
    for (size_t i = 0; i < 12; i++)
        snprintf(p.s[i].zone, sizeof(p.s[i].zone), "zone-%zu", i % 3);
    mcr_snapshot *s = snap_of(&p);
    for (int k = 0; k < 2000; k++) {
        char key[64];
        size_t len = tu_key(&r, key, 40);
        uint32_t out[16];
        int under = -1;
        for (size_t n = 1; n <= 13; n++) {
            size_t c = mcr_snapshot_replicas(s, key, len, n, out, &under);
            EXPECT_UINT(c, ==, n > 12 ? 12 : n);
            EXPECT_UINT(zones_of(s, out, c), ==, n < 3 ? n : 3);
            EXPECT_INT(under, ==, n > 12);
        }
    }
    /* One zone for everything but one server: asking for 2 copies, the
     * second is the lone other zone whenever the primary is not in it. */
    for (size_t i = 0; i < 12; i++)
        snprintf(p.s[i].zone, sizeof(p.s[i].zone), "%s", i == 5 ? "alone" : "crowd");
    mcr_snapshot_unref(s);
    s = snap_of(&p);
    for (int k = 0; k < 500; k++) {
        char key[64];
        size_t len = tu_key(&r, key, 40);
        uint32_t out[4];
        int under = -1;
        EXPECT_UINT(mcr_snapshot_replicas(s, key, len, 2, out, &under), ==, 2);
        EXPECT_INT(under, ==, 0);
        EXPECT(out[0] == 5 || out[1] == 5);
        EXPECT_UINT(mcr_snapshot_replicas(s, key, len, 3, out, &under), ==, 3);
        EXPECT_INT(under, ==, 0); /* min(3, 2 zones) = 2 zones: complete */
    }
    mcr_snapshot_unref(s);
}
END_TEST

START_TEST(replicas_edges)
{
    tu_rng r;
    tu_rng_init(&r, 22);
    pool p;
    uint32_t out[8];
    int under = -1;

    random_pool(&r, &p, 1, MCR_MODE_KETAMA, 0);
    mcr_snapshot *s = snap_of(&p);
    EXPECT_UINT(mcr_snapshot_replicas(s, "k", 1, 0, NULL, &under), ==, 0);
    EXPECT_INT(under, ==, 0);
    EXPECT_UINT(mcr_snapshot_replicas(s, "k", 1, 1, out, &under), ==, 1);
    EXPECT_INT(under, ==, 0);
    EXPECT_UINT(out[0], ==, 0);
    EXPECT_UINT(mcr_snapshot_replicas(s, "k", 1, 3, out, &under), ==, 1);
    EXPECT_INT(under, ==, 1);
    mcr_snapshot_unref(s);

    /* No zones: the next distinct servers clockwise, never under-replicated
     * while there are enough servers. */
    random_pool(&r, &p, 5, MCR_MODE_CONSISTENT, 0);
    s = snap_of(&p);
    for (int k = 0; k < 200; k++) {
        char key[16];
        size_t len = tu_key(&r, key, 10);
        EXPECT_UINT(mcr_snapshot_replicas(s, key, len, 5, out, &under), ==, 5);
        EXPECT_INT(under, ==, 0);
        EXPECT_UINT(mcr_snapshot_replicas(s, key, len, 6, out, &under), ==, 5);
        EXPECT_INT(under, ==, 1);
    }
    /* An empty key is a key. */
    EXPECT_UINT(mcr_snapshot_replicas(s, "", 0, 2, out, &under), ==, 2);
    EXPECT_UINT(out[0], ==, mcr_snapshot_locate(s, "", 0));
    mcr_snapshot_unref(s);
}
END_TEST

/* Draining and down servers never hold a replica, and their zones do not
 * count. */
START_TEST(replicas_states)
{
    tu_rng r;
    tu_rng_init(&r, 23);
    mcr_error err;
    for (int t = 0; t < 30; t++) {
        pool p;
        mcr_mode mode = t % 4 == 3 ? MCR_MODE_MODULA : continuum_modes[t % NCONT];
        random_pool(&r, &p, 3 + tu_below(&r, 20), mode, 1 + tu_below(&r, 4));
        mcr_snapshot *a = snap_of(&p), *b = NULL;
        mcr_changes *ch = mcr_changes_new();
        ck_assert_ptr_nonnull(ch);
        for (size_t i = 0; i + 1 < p.n; i++) {
            unsigned x = tu_below(&r, 4);
            if (x == 0)
                mcr_changes_set_state(ch, id_at(a, (uint32_t)i), MCR_STATE_DOWN, &err);
            else if (x == 1)
                mcr_changes_set_state(ch, id_at(a, (uint32_t)i), MCR_STATE_DRAINING, &err);
        }
        int rc = mcr_snapshot_apply(a, ch, &b, &err);
        EXPECT_MSG(rc == MCR_OK, "apply: %s", err.message);
        mcr_changes_free(ch);
        check_replicas(b, &r, 200);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
    }
}
END_TEST

static Suite *diff_suite(void)
{
    Suite *s = suite_create("diff");
    TCase *tc = tcase_create("diff");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, diff_random_continua);
    tcase_add_test(tc, diff_across_modes);
    tcase_add_test(tc, diff_ties_and_wrap);
    tcase_add_test(tc, diff_special_keys);
    tcase_add_test(tc, diff_identical);
    tcase_add_test(tc, diff_same_id_new_address);
    tcase_add_test(tc, diff_add_one_server);
    tcase_add_test(tc, diff_remove_one_server);
    tcase_add_test(tc, diff_modula);
    tcase_add_test(tc, diff_modula_to_continuum);
    tcase_add_test(tc, diff_refusals);
    tcase_add_test(tc, diff_owns_references);
    tcase_add_test(tc, diff_states);
    suite_add_tcase(s, tc);

    TCase *tr = tcase_create("replicas");
    tcase_set_timeout(tr, 600);
    tcase_add_test(tr, replicas_random);
    tcase_add_test(tr, replicas_zones);
    tcase_add_test(tr, replicas_edges);
    tcase_add_test(tr, replicas_states);
    suite_add_tcase(s, tr);
    return s;
}

int main(void)
{
    return tu_run(diff_suite());
}
