/* SPDX-License-Identifier: BSD-3-Clause */
/* test_ringsearch.c: Check suite of the search over large continua (ringsearch.h: the packed points of large rings) against a plain bisection over the points. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement_internal.h"
#include "mcroute.h"
#include "placement/ringsearch.h"
#include "testutil.h"

/* Packed points start here (ringsearch.c's PACK_MIN_POINTS). */
#define PACK_MIN ((size_t)1 << 18)

/* What a ring's lookups must give, worked out from its public point list. */
typedef struct ref {
    uint32_t *v, *s;
    size_t n;
} ref;

static ref ref_of(const mcr_ring *r)
{
    ref f;
    f.n = mcr_ring_point_count(r);
    f.v = malloc(f.n * sizeof(*f.v));
    f.s = malloc(f.n * sizeof(*f.s));
    ck_assert(f.v != NULL && f.s != NULL);
    for (size_t i = 0; i < f.n; i++)
        ck_assert_int_eq(mcr_ring_point(r, i, &f.v[i], &f.s[i]), MCR_OK);
    return f;
}

static void ref_free(ref *f)
{
    free(f->v);
    free(f->s);
}

/* The first point with value >= h, f->n if none: a plain bisection. */
static size_t first_at_least(const ref *f, uint32_t h)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->v[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

enum rule { SUCC, SUCC_LAST, PRED, BUCKETS };

/* The point owning h under a rule (mcr_mode(3)), the slow obvious way. */
static size_t rule_point(const ref *f, enum rule rule, uint32_t h)
{
    size_t i;
    switch (rule) {
    case SUCC_LAST:
        i = first_at_least(f, h);
        if (i == f->n)
            i = 0;
        while (i + 1 < f->n && f->v[i + 1] == f->v[i])
            i++;
        return i;
    case PRED: /* the last point <= h, else the last point */
        i = h == UINT32_MAX ? f->n : first_at_least(f, h + 1);
        return i == 0 ? f->n - 1 : i - 1;
    case BUCKETS:
        i = first_at_least(f, (h % 1024u) * (0xffffffffu / 1024u));
        return i == f->n ? 0 : i;
    default:
        i = first_at_least(f, h);
        return i == f->n ? 0 : i;
    }
}

/* Probes and mismatches of one ring. */
typedef struct checker {
    const mcr_ring *r;
    const ref *f;
    enum rule rule;
    const mcr__search *s; /* a search built over the ring's own points */
    const mcr__point *p;
    size_t probes, bad;
    uint32_t first_bad;
} checker;

static void probe(checker *c, uint32_t h)
{
    size_t i = c->rule == SUCC ? first_at_least(c->f, h) : 0;
    size_t want = c->rule == SUCC ? (i == c->f->n ? 0 : i) : rule_point(c->f, c->rule, h);
    bool ok = mcr_ring_find_point(c->r, h) == want && mcr_ring_find(c->r, h) == c->f->s[want];
    if (c->rule == SUCC) {
        /* the search itself: index n is the first sentinel (the wrap) */
        uint32_t srv = c->f->s[want];
        ok = ok && mcr__search_index(c->s, c->p, h) == i &&
             mcr__search_server(c->s, c->p, h) == srv;
    }
    c->probes++;
    if (!ok && c->bad++ == 0)
        c->first_bad = h;
}

/* Every point value v, v - 1 and v + 1; the ends; every bucket's first
 * and last hash; `nrandom` random hashes. */
static void check_ring(const mcr_ring *r, enum rule rule, bool want_packed, size_t nrandom,
                       uint64_t seed, const char *what)
{
    ref f = ref_of(r);
    mcr__search s;
    mcr_error err;
    const mcr__point *p = mcr__ring_points(r);
    ck_assert_int_eq(mcr__search_build(&s, p, f.n, mcr_ring_server_count(r), &err), MCR_OK);
    ck_assert_msg((s.packed != NULL) == want_packed, "%s: packed points %s", what,
                  s.packed ? "built" : "not built");

    checker c = {r, &f, rule, &s, p, 0, 0, 0};
    for (size_t i = 0; i < f.n; i++) {
        probe(&c, f.v[i]);
        probe(&c, f.v[i] - 1);
        probe(&c, f.v[i] + 1);
    }
    static const uint32_t ends[] = {0, 1, 2, UINT32_MAX - 1, UINT32_MAX, 0x7fffffffu, 0x80000000u};
    for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
        probe(&c, ends[i]);
    for (uint64_t b = 0; b < ((uint64_t)1 << (32 - s.shift)); b++) {
        probe(&c, (uint32_t)(b << s.shift));
        probe(&c, (uint32_t)(((b + 1) << s.shift) - 1));
    }
    tu_rng rng;
    tu_rng_init(&rng, seed);
    for (size_t k = 0; k < (size_t)tu_cases((int)nrandom); k++) /* fewer under sanitizers */
        probe(&c, (uint32_t)tu_rand(&rng));
    ck_assert_msg(c.bad == 0, "%s: %zu of %zu probes differ from the bisection, first hash %u",
                  what, c.bad, c.probes, (unsigned)c.first_bad);
    mcr__search_free(&s);
    ref_free(&f);
}

static mcr_config *config_of(size_t nservers, mcr_mode mode)
{
    mcr_config *cfg = mcr_config_new();
    static const uint32_t weights[] = {1, 2, 4, 2};
    ck_assert(cfg != NULL);
    for (size_t i = 0; i < nservers; i++) {
        char host[32];
        snprintf(host, sizeof(host), "10.%u.%u.%u", (unsigned)(i >> 16) + 1,
                 (unsigned)(i >> 8) & 255, (unsigned)i & 255);
        ck_assert_int_eq(mcr_config_add_server(cfg, host, 11211, weights[i % 4], NULL), MCR_OK);
    }
    ck_assert_int_eq(mcr_config_set_mode(cfg, mode), MCR_OK);
    return cfg;
}

/* Rings of the library's own modes, large enough for packed points. */
static const struct {
    const char *what;
    mcr_mode mode;
    mcr_hash hash; /* MCR_HASH_DEFAULT: the mode's */
    size_t nservers;
    enum rule rule;
    size_t nrandom;
} modes[] = {
    {"weighted md5, 10,000 servers", MCR_MODE_WEIGHTED, MCR_HASH_MD5, 10000, SUCC, 1u << 20},
    {"consistent fnv1a_32, 10,000 servers", MCR_MODE_CONSISTENT, MCR_HASH_FNV1A_32, 10000, SUCC,
     1u << 18},
    {"spymemcached (ties to the last), 2,000 servers", MCR_MODE_SPYMEMCACHED, MCR_HASH_DEFAULT,
     2000, SUCC_LAST, 1u << 18},
    {"dalli (predecessor), 2,000 servers", MCR_MODE_DALLI, MCR_HASH_DEFAULT, 2000, PRED, 1u << 18},
    {"php-memcache (buckets), 2,000 servers", MCR_MODE_PHP_MEMCACHE, MCR_HASH_DEFAULT, 2000,
     BUCKETS, 1u << 16},
};

START_TEST(modes_match_bisection)
{
    mcr_config *cfg = config_of(modes[_i].nservers, modes[_i].mode);
    if (modes[_i].hash != MCR_HASH_DEFAULT)
        ck_assert_int_eq(mcr_config_set_hash(cfg, modes[_i].hash), MCR_OK);
    mcr_ring *r = NULL;
    mcr_error err;
    ck_assert_msg(mcr_ring_new(cfg, &r, &err) == MCR_OK, "%s", err.message);
    ck_assert_msg(mcr_ring_point_count(r) >= PACK_MIN, "%s: %zu points", modes[_i].what,
                  mcr_ring_point_count(r));
    check_ring(r, modes[_i].rule, true, modes[_i].nrandom, 1000 + (uint64_t)_i, modes[_i].what);
    mcr_ring_free(r);
    mcr_config_free(cfg);
}
END_TEST

/* ---- crafted continua (mcr__ring_new_points sorts them) ---- */

typedef struct crafted {
    uint32_t *v, *s;
    size_t n, cap;
} crafted;

static void add(crafted *c, uint32_t v, uint32_t s)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 4096;
        c->v = realloc(c->v, c->cap * sizeof(*c->v));
        c->s = realloc(c->s, c->cap * sizeof(*c->s));
        ck_assert(c->v != NULL && c->s != NULL);
    }
    c->v[c->n] = v;
    c->s[c->n++] = s;
}

static void check_crafted(crafted *c, size_t nservers, bool want_packed, const char *what)
{
    mcr_config *cfg = config_of(nservers, MCR_MODE_KETAMA);
    mcr_ring *r = NULL;
    mcr_error err;
    ck_assert_msg(mcr__ring_new_points(cfg, c->v, c->s, c->n, &r, &err) == MCR_OK, "%s: %s", what,
                  err.message);
    check_ring(r, SUCC, want_packed, 1u << 18, c->n, what);
    mcr_ring_free(r);
    mcr_config_free(cfg);
    free(c->v);
    free(c->s);
    memset(c, 0, sizeof(*c));
}

START_TEST(runs_of_equal_values)
{
    /* runs of 1 to 40 equal values (buckets of more entries than one group
     * of the count, all equal: the first of them owns the hash) */
    tu_rng rng;
    tu_rng_init(&rng, 7);
    crafted c = {0};
    while (c.n < 600000) {
        uint32_t v = (uint32_t)tu_rand(&rng), run = 1 + (uint32_t)(tu_rand(&rng) % 40);
        for (uint32_t k = 0; k < run; k++)
            add(&c, v, (uint32_t)(tu_rand(&rng) % 300));
    }
    check_crafted(&c, 300, true, "runs of equal values");
}
END_TEST

START_TEST(crowded_buckets_and_ends)
{
    /* points at 0 and UINT32_MAX, low 16 bits 0 and 0xffff, and crowds:
     * thousands of points in a few buckets (counted in hundreds of groups) */
    tu_rng rng;
    tu_rng_init(&rng, 8);
    crafted c = {0};
    for (uint32_t k = 0; k < 5; k++) {
        add(&c, 0, k);
        add(&c, UINT32_MAX, 100 + k);
        add(&c, UINT32_MAX - 1, 110 + k);
        add(&c, 1, 120 + k);
    }
    for (uint32_t k = 0; k < 20000; k++) {
        uint32_t hi = (uint32_t)tu_rand(&rng) & 0xffff0000u;
        add(&c, hi, k % 299);
        add(&c, hi | 0xffffu, (k + 1) % 299);
        add(&c, hi | 0x3fffu, (k + 2) % 299);
        add(&c, hi | 0x4000u, (k + 3) % 299);
    }
    for (uint32_t k = 0; k < 60000; k++) /* crowds */
        add(&c, 0x12340000u + (uint32_t)(tu_rand(&rng) % 3000), k % 299);
    for (uint32_t k = 0; k < 5000; k++)
        add(&c, 0xfffff000u + (uint32_t)(tu_rand(&rng) % 4096), k % 299);
    while (c.n < 400000)
        add(&c, (uint32_t)tu_rand(&rng), (uint32_t)(tu_rand(&rng) % 299));
    check_crafted(&c, 299, true, "crowded buckets and ends");
}
END_TEST

/* A crowded bucket: 16-bit offsets from a group's base no longer fit
 * groups that have buckets after it, so the groups shrink to those that
 * do. _i 0: 70,000 points in bucket 0x1237, the last of its group of 8
 * (groups of 8, gbits 3); _i 1: in bucket 0x1234, the first of its pair
 * (one bucket a group, gbits 0); _i 2 and 3: 65,535 and 65,536 points in
 * bucket 0, the other 63 of its group empty (the largest offset that fits,
 * in groups of 64, and one more, in groups of one). */
START_TEST(crowded_group)
{
    static const uint32_t bucket[] = {0x1237, 0x1234, 0, 0};
    static const uint32_t crowd[] = {70000, 70000, 65535, 65536};
    static const unsigned want[] = {3, 0, 6, 0};
    tu_rng rng;
    tu_rng_init(&rng, 13);
    crafted c = {0};
    for (uint32_t k = 0; k < crowd[_i]; k++)
        add(&c, bucket[_i] << 16 | (uint32_t)(tu_rand(&rng) & 0xffff), k % 500);
    while (c.n < 400000) {
        uint32_t v = (uint32_t)tu_rand(&rng);
        if (_i < 2 || v >= (uint32_t)64 << 16) /* _i 2, 3: none in bucket 0's group */
            add(&c, v, (uint32_t)(tu_rand(&rng) % 500));
    }
    mcr_config *cfg = config_of(500, MCR_MODE_KETAMA);
    mcr_ring *r = NULL;
    mcr_error err;
    ck_assert_int_eq(mcr__ring_new_points(cfg, c.v, c.s, c.n, &r, &err), MCR_OK);
    mcr__search s;
    ck_assert_int_eq(mcr__search_build(&s, mcr__ring_points(r), c.n, 500, &err), MCR_OK);
    ck_assert_msg(s.packed != NULL && s.shift == 16 && s.gbits == want[_i],
                  "a crowded bucket: shift %u, groups of 2^%u buckets, want 2^%u", s.shift,
                  s.gbits, want[_i]);
    mcr__search_free(&s);
    mcr_ring_free(r);
    mcr_config_free(cfg);
    static const char *const what[] = {"a crowd last in its group", "a crowd first in its pair",
                                       "65,535 points in a group", "65,536 points in a group"};
    check_crafted(&c, 500, true, what[_i]);
}
END_TEST

START_TEST(sparse_and_wrap)
{
    /* all points in [2^30, 2^31): empty buckets below (the first point)
     * and above (the wrap to point 0), spread over wide gaps */
    tu_rng rng;
    tu_rng_init(&rng, 9);
    crafted c = {0};
    while (c.n < 300000)
        add(&c, 0x40000000u + (uint32_t)(tu_rand(&rng) % 0x40000000u),
            (uint32_t)(tu_rand(&rng) % 1000));
    check_crafted(&c, 1000, true, "sparse, with the wrap");
}
END_TEST

/* Servers: 65,536 fit the packed points' 16-bit servers (server 65,535
 * used); one more does not, and the ring keeps the index and the points. */
START_TEST(server_count_limit)
{
    static const size_t counts[] = {65536, 65537};
    tu_rng rng;
    tu_rng_init(&rng, 10);
    crafted c = {0};
    size_t ns = counts[_i];
    for (uint32_t s = 0; s < ns; s++)
        add(&c, (uint32_t)tu_rand(&rng), s);
    while (c.n < 300000)
        add(&c, (uint32_t)tu_rand(&rng), (uint32_t)(ns - 1 - tu_rand(&rng) % 16));
    check_crafted(&c, ns, ns <= 65536, ns <= 65536 ? "65,536 servers" : "65,537 servers");
}
END_TEST

/* Just below the size for packed points, and at it. */
START_TEST(size_threshold)
{
    tu_rng rng;
    tu_rng_init(&rng, 11);
    crafted c = {0};
    size_t n = PACK_MIN - 1 + (size_t)_i;
    while (c.n < n)
        add(&c, (uint32_t)tu_rand(&rng), (uint32_t)(tu_rand(&rng) % 500));
    check_crafted(&c, 500, _i == 1, _i ? "2^18 points" : "2^18 - 1 points");
}
END_TEST

/* Over 25 x 2^17 points: an 18-bit index (a 14-bit mask on the packed
 * values), wider than the library's own rings reach (16 bits for 10,000
 * servers), of 2^18 + 1 offsets. */
START_TEST(wide_index)
{
    tu_rng rng;
    tu_rng_init(&rng, 12);
    crafted c = {0};
    while (c.n < 3500000)
        add(&c, (uint32_t)tu_rand(&rng), (uint32_t)(tu_rand(&rng) % 4000));
    mcr__point *p = malloc((c.n + MCR__RING_PAD) * sizeof(*p));
    ck_assert(p != NULL);
    mcr__search s;
    mcr_error err;
    for (size_t i = 0; i < c.n + MCR__RING_PAD; i++) /* sorted: i * 1227 < 2^32 */
        p[i] = (mcr__point){.value = i < c.n ? (uint32_t)(i * 1227) : UINT32_MAX, .server = 0};
    ck_assert_int_eq(mcr__search_build(&s, p, c.n, 4000, &err), MCR_OK);
    ck_assert_msg(s.packed != NULL && s.shift == 14, "3.5 M points: shift %u", s.shift);
    mcr__search_free(&s);
    free(p);
    check_crafted(&c, 4000, true, "3.5 M points, 18-bit index");
}
END_TEST

/* mcr_ring_locate_many on packed rings (its hashes in lanes, the second
 * index entry prefetched) against mcr_ring_locate, key by key, in batches
 * of 1 to 97 keys of 1 to 250 bytes. */
START_TEST(locate_many_matches_locate)
{
    mcr_config *cfg = config_of(modes[_i].nservers, modes[_i].mode);
    ck_assert_int_eq(mcr_config_set_hash(cfg, modes[_i].hash), MCR_OK);
    mcr_ring *r = NULL;
    mcr_error err;
    ck_assert_msg(mcr_ring_new(cfg, &r, &err) == MCR_OK, "%s", err.message);
    enum { BATCH = 97 };
    unsigned char buf[BATCH][250];
    const void *keys[BATCH];
    size_t lens[BATCH];
    uint32_t out[BATCH];
    tu_rng rng;
    tu_rng_init(&rng, 2000 + (uint64_t)_i);
    size_t total = (size_t)tu_cases(1 << 17), done = 0, bad = 0;
    while (done < total) {
        size_t n = 1 + (size_t)(tu_rand(&rng) % BATCH);
        for (size_t k = 0; k < n; k++) {
            lens[k] = 1 + (size_t)(tu_rand(&rng) % 250);
            for (size_t j = 0; j < lens[k]; j++)
                buf[k][j] = (unsigned char)tu_rand(&rng);
            keys[k] = buf[k];
        }
        mcr_ring_locate_many(r, keys, lens, n, out);
        for (size_t k = 0; k < n; k++)
            bad += out[k] != mcr_ring_locate(r, keys[k], lens[k]);
        done += n;
    }
    ck_assert_msg(bad == 0, "%s: %zu of %zu keys differ", modes[_i].what, bad, done);
    mcr_ring_free(r);
    mcr_config_free(cfg);
}
END_TEST

/* mcr__search_build's checks still hold with packed points. */
START_TEST(broken_continuum_rejected)
{
    size_t n = PACK_MIN;
    mcr__point *p = malloc((n + MCR__RING_PAD) * sizeof(*p));
    ck_assert(p != NULL);
    for (size_t i = 0; i < n + MCR__RING_PAD; i++) {
        p[i].value = i < n ? (uint32_t)(i * 16000) : UINT32_MAX;
        p[i].server = (uint32_t)(i % 7);
    }
    mcr__search s;
    mcr_error err;
    ck_assert_int_eq(mcr__search_build(&s, p, n, 7, &err), MCR_OK);
    ck_assert(s.packed != NULL);
    mcr__search_free(&s);
    p[n / 2].server = 7; /* names no server */
    ck_assert_int_eq(mcr__search_build(&s, p, n, 7, &err), MCR_ERR_INVALID);
    mcr__search_free(&s);
    p[n / 2].server = 0;
    p[n / 2].value = 5; /* out of order */
    ck_assert_int_eq(mcr__search_build(&s, p, n, 7, &err), MCR_ERR_INVALID);
    mcr__search_free(&s);
    free(p);
}
END_TEST

static Suite *ringsearch_suite(void)
{
    Suite *s = suite_create("ringsearch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, modes_match_bisection, 0, (int)(sizeof(modes) / sizeof(modes[0])));
    tcase_add_test(tc, runs_of_equal_values);
    tcase_add_test(tc, crowded_buckets_and_ends);
    tcase_add_loop_test(tc, crowded_group, 0, 4);
    tcase_add_test(tc, sparse_and_wrap);
    tcase_add_loop_test(tc, server_count_limit, 0, 2);
    tcase_add_loop_test(tc, size_threshold, 0, 2);
    tcase_add_test(tc, wide_index);
    tcase_add_loop_test(tc, locate_many_matches_locate, 0, 2); /* the two 10,000-server rings */
    tcase_add_test(tc, broken_continuum_rejected);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(ringsearch_suite());
}
