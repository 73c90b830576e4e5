/* SPDX-License-Identifier: BSD-3-Clause */
/* test_ring.c: Check suite of the continuum: successor rule, point counts, labels, index, 10,000 servers. */
#include <math.h>
#include <stdint.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement_internal.h"
#include "mcroute.h"
#include "testutil.h"
#include "testutil_config.h"

static mcr_ring *ring_of(const mcr_config *cfg)
{
    mcr_error err;
    mcr_ring *ring = NULL;
    int rc = mcr_ring_new(cfg, &ring, &err);
    ck_assert_msg(rc == MCR_OK, "ring_new: %s", err.message);
    return ring;
}

/* The reference successor rule, written the slow obvious way: first point
 * with value >= h, else the first point. */
static uint32_t naive_find(const mcr_ring *ring, uint32_t h)
{
    size_t n = mcr_ring_point_count(ring);
    uint32_t v, s;
    for (size_t i = 0; i < n; i++) {
        mcr_ring_point(ring, i, &v, &s);
        if (v >= h)
            return s;
    }
    mcr_ring_point(ring, 0, &v, &s);
    return s;
}

/* ---- the seeds' worked example: ring 0..99, A 20, B 50, C 80, then D 35 ---- */

START_TEST(worked_example)
{
    mcr_config *cfg = tu_config("A:1,B:1,C:1,D:1", MCR_MODE_CONSISTENT, MCR_HASH_DEFAULT);
    enum { A, B, C, D };
    mcr_ring *r3 = NULL, *r4 = NULL, *back = NULL;
    mcr_error err;

    uint32_t v3[] = {20, 50, 80}, s3[] = {A, B, C};
    ck_assert_int_eq(mcr__ring_new_points(cfg, v3, s3, 3, &r3, &err), MCR_OK);
    /* A owns (80, 20], B (20, 50], C (50, 80]; 90 wraps to A. */
    ck_assert_uint_eq(mcr_ring_find(r3, 20), A);
    ck_assert_uint_eq(mcr_ring_find(r3, 21), B);
    ck_assert_uint_eq(mcr_ring_find(r3, 50), B);
    ck_assert_uint_eq(mcr_ring_find(r3, 51), C);
    ck_assert_uint_eq(mcr_ring_find(r3, 80), C);
    ck_assert_uint_eq(mcr_ring_find(r3, 81), A);
    ck_assert_uint_eq(mcr_ring_find(r3, 90), A);
    ck_assert_uint_eq(mcr_ring_find(r3, 0), A);
    ck_assert_uint_eq(mcr_ring_find(r3, UINT32_MAX), A);

    /* Add D at 35: it takes (20, 35] from B and nothing else. */
    uint32_t v4[] = {20, 50, 80, 35}, s4[] = {A, B, C, D};
    ck_assert_int_eq(mcr__ring_new_points(cfg, v4, s4, 4, &r4, &err), MCR_OK);
    uint32_t keys[] = {10, 30, 45, 70, 90}, want[] = {A, D, B, C, A};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(mcr_ring_find(r4, keys[i]) == want[i], "key at %u", keys[i]);
    for (uint32_t h = 0; h < 100; h++) {
        uint32_t before = mcr_ring_find(r3, h), after = mcr_ring_find(r4, h);
        if (h > 20 && h <= 35)
            ck_assert_msg(before == B && after == D, "h=%u", h);
        else
            ck_assert_msg(before == after, "h=%u moved without reason", h);
    }
    /* Remove D: B regains (20, 35]. */
    ck_assert_int_eq(mcr__ring_new_points(cfg, v3, s3, 3, &back, &err), MCR_OK);
    for (uint32_t h = 0; h < 100; h++)
        ck_assert_uint_eq(mcr_ring_find(back, h), mcr_ring_find(r3, h));
    ck_assert_uint_eq(mcr_ring_find(back, 30), B);

    mcr_ring_free(r3);
    mcr_ring_free(r4);
    mcr_ring_free(back);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(ties_go_to_earlier_server)
{
    mcr_config *cfg = tu_config("a,b,c", MCR_MODE_CONSISTENT, MCR_HASH_DEFAULT);
    mcr_ring *r = NULL;
    /* Servers 2 and 1 share 500; server 1 comes first in server order. */
    uint32_t v[] = {100, 500, 500, 900}, s[] = {0, 1, 2, 2};
    ck_assert_int_eq(mcr__ring_new_points(cfg, v, s, 4, &r, NULL), MCR_OK);
    ck_assert_uint_eq(mcr_ring_find(r, 500), 1);
    ck_assert_uint_eq(mcr_ring_find(r, 101), 1);
    ck_assert_uint_eq(mcr_ring_find(r, 501), 2);
    ck_assert_uint_eq(mcr_ring_find(r, 901), 0);
    mcr_ring_free(r);
    /* Bad server index is refused. */
    uint32_t bad[] = {7};
    mcr_error err;
    ck_assert_int_eq(mcr__ring_new_points(cfg, v, bad, 1, &r, &err), MCR_ERR_INVALID);
    mcr_config_free(cfg);
}
END_TEST

/* ---- every lookup equals the naive rule, at and around every point ---- */

/* Index of the first point >= h, or 0 past the end: the point rule. */
static size_t naive_point(const mcr_ring *ring, uint32_t h)
{
    size_t n = mcr_ring_point_count(ring);
    uint32_t v;
    for (size_t i = 0; i < n; i++) {
        mcr_ring_point(ring, i, &v, NULL);
        if (v >= h)
            return i;
    }
    return 0;
}

static void check_against_naive(const mcr_ring *ring, tu_rng *rng, int randoms)
{
    size_t n = mcr_ring_point_count(ring);
    uint32_t v;
    for (size_t i = 0; i < n; i += 1 + n / 2000) {
        mcr_ring_point(ring, i, &v, NULL);
        uint32_t probes[] = {v, v - 1, v + 1};
        for (int p = 0; p < 3; p++)
            ck_assert_msg(mcr_ring_find(ring, probes[p]) == naive_find(ring, probes[p]),
                          "hash %u (point %zu)", probes[p], i);
    }
    uint32_t edges[] = {0, 1, UINT32_MAX, UINT32_MAX - 1};
    for (int e = 0; e < 4; e++)
        ck_assert_uint_eq(mcr_ring_find(ring, edges[e]), naive_find(ring, edges[e]));
    for (int k = 0; k < randoms; k++) {
        uint32_t h = (uint32_t)tu_rand(rng);
        ck_assert_msg(mcr_ring_find(ring, h) == naive_find(ring, h), "hash %u", h);
        if (k % 8 == 0)
            ck_assert_uint_eq(mcr_ring_find_point(ring, h), naive_point(ring, h));
    }
    for (int e = 0; e < 4; e++)
        ck_assert_uint_eq(mcr_ring_find_point(ring, edges[e]), naive_point(ring, edges[e]));
}

START_TEST(lookup_matches_naive_rule)
{
    tu_rng rng;
    tu_rng_init(&rng, 11 + (uint64_t)_i);
    mcr_mode modes[] = {MCR_MODE_KETAMA, MCR_MODE_CONSISTENT, MCR_MODE_WEIGHTED, MCR_MODE_SPY,
                        MCR_MODE_SPY_WEIGHTED};
    for (int round = 0; round < 6; round++) {
        char list[8192];
        size_t o = 0;
        uint32_t n = 1 + tu_below(&rng, 60);
        for (uint32_t i = 0; i < n; i++)
            o += (size_t)snprintf(list + o, sizeof(list) - o, "%s10.%u.%u.%u:%u:%u", i ? "," : "",
                                  tu_below(&rng, 256), tu_below(&rng, 256), i & 255,
                                  11211 + tu_below(&rng, 3), 1 + tu_below(&rng, 5));
        mcr_config *cfg = tu_config(list, modes[(size_t)round % 5], (mcr_hash)tu_below(&rng, 11));
        mcr_ring *ring = ring_of(cfg);
        check_against_naive(ring, &rng, 3000);
        mcr_ring_free(ring);
        mcr_config_free(cfg);
    }
}
END_TEST

/* ---- point counts and labels, computed independently here ---- */

static void md5_words(const char *s, uint32_t w[4])
{
    unsigned char d[16];
    unsigned int len = 0;
    EVP_Digest(s, strlen(s), d, &len, EVP_md5(), NULL);
    for (int a = 0; a < 4; a++)
        w[a] = (uint32_t)d[4 * a] | (uint32_t)d[4 * a + 1] << 8 | (uint32_t)d[4 * a + 2] << 16 |
               (uint32_t)d[4 * a + 3] << 24;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Is `value` a point of `ring` owned by `server`? */
static int has_point(const mcr_ring *ring, uint32_t value, uint32_t server)
{
    size_t lo = 0, hi = mcr_ring_point_count(ring);
    uint32_t v, s;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        mcr_ring_point(ring, mid, &v, NULL);
        if (v < value)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < mcr_ring_point_count(ring); lo++) {
        mcr_ring_point(ring, lo, &v, &s);
        if (v != value)
            return 0;
        if (s == server)
            return 1;
    }
    return 0;
}

START_TEST(ketama_points_and_labels)
{
    /* libketama: floorf(pct * 40.0 * n) labels "host:port-k", 4 points each. */
    mcr_config *cfg = tu_config("10.0.0.1:11211:100,10.0.0.2:11212:300,cache-a:11211:50,[::1]:11213:7",
                               MCR_MODE_KETAMA, MCR_HASH_MD5);
    mcr_ring *ring = ring_of(cfg);
    const char *addr[] = {"10.0.0.1:11211", "10.0.0.2:11212", "cache-a:11211", "[::1]:11213"};
    uint32_t weight[] = {100, 300, 50, 7}, total = 457, sum = 0;
    for (uint32_t i = 0; i < 4; i++) {
        float pct = (float)weight[i] / (float)total;
        uint32_t ks = (uint32_t)floorf((float)(pct * 40.0 * 4.0f));
        sum += ks * 4;
        for (uint32_t k = 0; k < ks; k++) {
            char label[64];
            uint32_t w[4];
            snprintf(label, sizeof(label), "%s-%u", addr[i], k);
            md5_words(label, w);
            for (int a = 0; a < 4; a++)
                ck_assert_msg(has_point(ring, w[a], i), "label %s word %d", label, a);
        }
    }
    ck_assert_uint_eq(mcr_ring_point_count(ring), sum);
    ck_assert_str_eq(mcr_ring_server_name(ring, 3), "[::1]:11213");
    ck_assert_str_eq(mcr_ring_server_host(ring, 3), "::1");
    ck_assert_int_eq(mcr_ring_server_port(ring, 3), 11213);
    ck_assert_uint_eq(mcr_ring_server_weight(ring, 1), 300);
    mcr_ring_free(ring);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(libmemcached_labels)
{
    /* Unweighted consistent: 100 labels, port 11211 dropped; spy: "/host:port-i". */
    mcr_config *cfg = tu_config("alpha,beta:22122", MCR_MODE_CONSISTENT, MCR_HASH_FNV1A_32);
    mcr_ring *ring = ring_of(cfg);
    ck_assert_uint_eq(mcr_ring_point_count(ring), 200);
    uint32_t pts[200];
    size_t n = 0;
    for (int i = 0; i < 100; i++) {
        char l[64];
        snprintf(l, sizeof(l), "alpha-%d", i);
        pts[n++] = mcr_hash_key(MCR_HASH_FNV1A_32, l, strlen(l));
        ck_assert(has_point(ring, pts[n - 1], 0));
        snprintf(l, sizeof(l), "beta:22122-%d", i);
        pts[n++] = mcr_hash_key(MCR_HASH_FNV1A_32, l, strlen(l));
        ck_assert(has_point(ring, pts[n - 1], 1));
    }
    qsort(pts, n, sizeof(pts[0]), cmp_u32);
    for (size_t i = 0; i < n; i++) {
        uint32_t v;
        mcr_ring_point(ring, i, &v, NULL);
        ck_assert_uint_eq(v, pts[i]);
    }
    mcr_ring_free(ring);

    /* A fixed point hash differs from the key hash when set. */
    mcr_config_set_point_hash(cfg, MCR_HASH_DEFAULT);
    mcr_config_set_mode(cfg, MCR_MODE_SPY);
    ring = ring_of(cfg);
    ck_assert_int_eq(mcr_ring_key_hash(ring), MCR_HASH_FNV1A_32);
    ck_assert(has_point(ring, mcr_hash_key(MCR_HASH_DEFAULT, "/alpha:11211-0", 14), 0));
    ck_assert(has_point(ring, mcr_hash_key(MCR_HASH_DEFAULT, "/beta:22122-99", 14), 1));
    mcr_ring_free(ring);

    /* Weighted: floorf(pct*160/4*n + 1e-10f)*4 points, MD5 of "host-i". */
    mcr_config_free(cfg);
    cfg = tu_config("alpha:11211:3,beta:22122:1", MCR_MODE_WEIGHTED, MCR_HASH_MD5);
    ring = ring_of(cfg);
    float p0 = 3.0f / 4.0f, p1 = 1.0f / 4.0f;
    uint32_t n0 = (uint32_t)floorf(p0 * 160.0f / 4.0f * 2.0f + 0.0000000001F) * 4;
    uint32_t n1 = (uint32_t)floorf(p1 * 160.0f / 4.0f * 2.0f + 0.0000000001F) * 4;
    ck_assert_uint_eq(mcr_ring_point_count(ring), n0 + n1);
    uint32_t w[4];
    md5_words("alpha-59", w);
    ck_assert(has_point(ring, w[3], 0));
    md5_words("beta:22122-19", w);
    ck_assert(has_point(ring, w[0], 1));
    mcr_ring_free(ring);
    mcr_config_set_mode(cfg, MCR_MODE_SPY_WEIGHTED);
    ring = ring_of(cfg);
    md5_words("/alpha:11211-0", w);
    ck_assert(has_point(ring, w[2], 0));
    mcr_ring_free(ring);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(modula_and_single_server)
{
    mcr_config *cfg = tu_config("a,b,c,d,e", MCR_MODE_MODULA, MCR_HASH_CRC);
    mcr_ring *ring = ring_of(cfg);
    ck_assert_uint_eq(mcr_ring_point_count(ring), 0);
    for (int i = 0; i < 1000; i++) {
        char k[16];
        snprintf(k, sizeof(k), "key%d", i);
        ck_assert_uint_eq(mcr_ring_locate(ring, k, strlen(k)),
                          mcr_hash_key(MCR_HASH_CRC, k, strlen(k)) % 5);
    }
    ck_assert_int_eq(mcr_ring_point(ring, 0, NULL, NULL), MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_ring_find_point(ring, 123), MCR_NO_POINT);
    mcr_ring_free(ring);
    mcr_config_free(cfg);

    for (int m = 0; m < MCR_MODE_COUNT; m++) {
        /* spymemcached resolves a name: an address, so no DNS is asked */
        cfg = tu_config(m == MCR_MODE_SPYMEMCACHED ? "127.0.0.9:1234" : "only:1234", (mcr_mode)m,
                        MCR_HASH_MD5);
        ring = ring_of(cfg);
        for (int i = 0; i < 100; i++) {
            char k[16];
            snprintf(k, sizeof(k), "k%d", i);
            ck_assert_uint_eq(mcr_ring_locate(ring, k, strlen(k)), 0);
        }
        mcr_ring_free(ring);
        mcr_config_free(cfg);
    }
}
END_TEST

START_TEST(key_prefix_rules)
{
    mcr_config *cfg = tu_config("a,b,c", MCR_MODE_CONSISTENT, MCR_HASH_FNV1A_32);
    ck_assert_int_eq(mcr_config_set_key_prefix(cfg, "ns:", 3), MCR_OK);
    mcr_ring *ring = ring_of(cfg);
    ck_assert_uint_eq(mcr_ring_hash(ring, "key", 3), mcr_hash_key(MCR_HASH_FNV1A_32, "ns:key", 6));
    /* namespace + key over 250 bytes hashes to 0 */
    char big[300];
    memset(big, 'x', sizeof(big));
    ck_assert_uint_ne(mcr_ring_hash(ring, big, 247), 0);
    ck_assert_uint_eq(mcr_ring_hash(ring, big, 248), 0);
    /* key bytes after a NUL count as NUL */
    ck_assert_uint_eq(mcr_ring_hash(ring, "ab\0cd", 5),
                      mcr_hash_key(MCR_HASH_FNV1A_32, "ns:ab\0\0\0", 8));
    mcr_ring_free(ring);
    ck_assert_int_eq(mcr_config_set_key_prefix(cfg, NULL, 0), MCR_OK);
    ring = ring_of(cfg);
    ck_assert_uint_eq(mcr_ring_hash(ring, "key", 3), mcr_hash_key(MCR_HASH_FNV1A_32, "key", 3));
    ck_assert_uint_ne(mcr_ring_hash(ring, big, 300), 0);
    mcr_ring_free(ring);
    ck_assert_int_eq(mcr_config_set_key_prefix(cfg, NULL, 3), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_config_set_key_prefix(cfg, big, 256), MCR_ERR_INVALID);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(locate_many_equals_locate)
{
    tu_rng rng;
    tu_rng_init(&rng, 5);
    mcr_config *cfg = tu_config("a,b:2,c:3:4,d,e,f,g", MCR_MODE_WEIGHTED, MCR_HASH_MD5);
    mcr_ring *ring = ring_of(cfg);
    enum { N = 500 };
    static char keys[N][64];
    const void *kp[N];
    size_t lens[N];
    uint32_t out[N];
    for (int i = 0; i < N; i++) {
        lens[i] = tu_key(&rng, keys[i], 60);
        kp[i] = keys[i];
    }
    mcr_ring_locate_many(ring, kp, lens, N, out);
    for (int i = 0; i < N; i++)
        ck_assert_uint_eq(out[i], mcr_ring_locate(ring, keys[i], lens[i]));
    mcr_ring_free(ring);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(ten_thousand_servers)
{
    /* libmemcached aborts above 100 servers in its consistent modes; mcroute
     * must serve 10,000 in every mode, with correct lookups. */
    tu_rng rng;
    tu_rng_init(&rng, 10000);
    mcr_mode modes[] = {MCR_MODE_KETAMA, MCR_MODE_CONSISTENT, MCR_MODE_WEIGHTED, MCR_MODE_MODULA};
    /* weighted: libmemcached's all-float formula gives floorf(39.9999962) = 39
     * labels per server at this size; libketama's double product gives 40. */
    size_t want_points[] = {160 * 10000, 100 * 10000, 156 * 10000, 0};
    for (int m = 0; m < 4; m++) {
        mcr_config *cfg = mcr_config_new();
        mcr_config_set_mode(cfg, modes[m]);
        for (int i = 0; i < 10000; i++) {
            char host[32];
            snprintf(host, sizeof(host), "10.%d.%d.%d", i >> 16, (i >> 8) & 255, i & 255);
            ck_assert_int_eq(mcr_config_add_server(cfg, host, 11211, 1, NULL), MCR_OK);
        }
        mcr_ring *ring = ring_of(cfg);
        ck_assert_uint_eq(mcr_ring_server_count(ring), 10000);
        ck_assert_uint_eq(mcr_ring_point_count(ring), want_points[m]);
        if (modes[m] != MCR_MODE_MODULA) {
            /* Compare with a bisection over the public point list: random
             * hashes, then the hashes where answers change (a point's
             * value and its neighbours, every 61st point: a prime stride,
             * so every offset within a cache line of points comes up) and
             * the ends. Every point of rings this large, and the lines'
             * edge cases, are test_ringsearch's. */
            size_t n = mcr_ring_point_count(ring);
            const size_t stride = 61, nedge = 3 * (n / stride + 1);
            for (size_t k = 0; k < 20000 + nedge + 4; k++) {
                uint32_t h = (uint32_t)tu_rand(&rng), v, s;
                if (k >= 20000 + nedge) {
                    static const uint32_t ends[] = {0, 1, UINT32_MAX - 1, UINT32_MAX};
                    h = ends[k - 20000 - nedge];
                } else if (k >= 20000) {
                    size_t j = k - 20000, pt = (j / 3) * stride;
                    mcr_ring_point(ring, pt < n ? pt : n - 1, &v, NULL);
                    h = v + (uint32_t)(j % 3) - 1; /* v - 1, v, v + 1 */
                }
                size_t lo = 0, hi = n;
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    mcr_ring_point(ring, mid, &v, NULL);
                    if (v < h)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                mcr_ring_point(ring, lo == n ? 0 : lo, NULL, &s);
                ck_assert_uint_eq(mcr_ring_find(ring, h), s);
            }
            /* Every server owns some keys: no server fell off the ring. */
            uint32_t *hits = calloc(10000, sizeof(uint32_t));
            for (size_t i = 0; i < n; i++) {
                uint32_t s;
                mcr_ring_point(ring, i, NULL, &s);
                hits[s]++;
            }
            for (int i = 0; i < 10000; i++)
                ck_assert_uint_gt(hits[i], 0);
            free(hits);
        }
        mcr_ring_free(ring);
        mcr_config_free(cfg);
    }
}
END_TEST

START_TEST(ring_errors)
{
    mcr_error err;
    mcr_ring *ring = (mcr_ring *)0x1;
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_eq(mcr_ring_new(cfg, &ring, &err), MCR_ERR_EMPTY);
    ck_assert_ptr_eq(ring, (mcr_ring *)0x1); /* untouched on failure */
    ck_assert(strstr(err.message, "no servers") != NULL);
    ck_assert_int_eq(mcr_ring_new(NULL, &ring, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_ring_new(cfg, NULL, NULL), MCR_ERR_INVALID);
    mcr_config_free(cfg);
    mcr_ring_free(NULL);
    ck_assert_ptr_null(mcr_ring_server_name(NULL, 0));
    ck_assert_uint_eq(mcr_ring_point_count(NULL), 0);
}
END_TEST

START_TEST(ring_outlives_config)
{
    mcr_config *cfg = tu_config("x:1,y:2,z:3", MCR_MODE_KETAMA, MCR_HASH_MD5);
    mcr_ring *ring = ring_of(cfg);
    uint32_t before = mcr_ring_locate(ring, "hello", 5);
    mcr_config_add_servers(cfg, "w:4", NULL);
    mcr_config_free(cfg);
    ck_assert_uint_eq(mcr_ring_locate(ring, "hello", 5), before);
    ck_assert_str_eq(mcr_ring_server_name(ring, 2), "z:3");
    mcr_ring_free(ring);
}
END_TEST

START_TEST(twemproxy_modes)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_config_set_mode(cfg, MCR_MODE_TWEMPROXY_KETAMA);
    mcr_config_set_hash(cfg, MCR_HASH_FNV1A_64);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "10.0.0.1", 11211, 1, NULL, &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "10.0.0.2", 11212, 3, NULL, &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "10.0.0.3", 11213, 2, "cache-c", &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "10.0.0.4", 1, 1, "", &err), MCR_ERR_SYNTAX);
    mcr_ring *ring = ring_of(cfg);
    /* labels: "host" for port 11211, "host:port" otherwise, the name if any;
     * floorf((float)(pct*160/4*n + 1e-10)) labels of 4 MD5 points */
    const char *label[] = {"10.0.0.1", "10.0.0.2:11212", "cache-c"};
    uint32_t w[] = {1, 3, 2}, total = 0;
    for (uint32_t i = 0; i < 3; i++) {
        float pct = (float)w[i] / 6.0f;
        float f = pct * 160.0f / 4.0f * 3.0f;
        uint32_t nl = (uint32_t)floorf((float)((double)f + 0.0000000001));
        total += nl * 4;
        for (uint32_t k = 0; k < nl; k++) {
            char l[64];
            uint32_t d[4];
            snprintf(l, sizeof(l), "%s-%u", label[i], k);
            md5_words(l, d);
            ck_assert_msg(has_point(ring, d[k & 3], i), "%s", l);
        }
    }
    ck_assert_uint_eq(mcr_ring_point_count(ring), total);
    /* an empty key hashes to 0 under twemproxy's rules */
    ck_assert_uint_eq(mcr_ring_hash(ring, "", 0), 0);
    ck_assert_uint_eq(mcr_ring_locate(ring, "", 0), mcr_ring_find(ring, 0));
    mcr_ring_free(ring);

    /* modula: each server `weight` times in order, entry hash % total */
    mcr_config_set_mode(cfg, MCR_MODE_TWEMPROXY_MODULA);
    ring = ring_of(cfg);
    uint32_t table[] = {0, 1, 1, 1, 2, 2};
    for (int i = 0; i < 2000; i++) {
        char k[16];
        snprintf(k, sizeof(k), "k%d", i);
        uint32_t h = mcr_hash_key(MCR_HASH_FNV1A_64, k, strlen(k));
        ck_assert_uint_eq(mcr_ring_locate(ring, k, strlen(k)), table[h % 6]);
    }
    mcr_ring_free(ring);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(hash_tag_rule)
{
    mcr_config *cfg = tu_config("a,b,c", MCR_MODE_CONSISTENT, MCR_HASH_FNV1A_32);
    ck_assert_int_eq(mcr_config_set_hash_tag(cfg, "{}"), MCR_OK);
    ck_assert_int_eq(mcr_config_set_hash_tag(cfg, "{"), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_config_set_hash_tag(cfg, "{}}"), MCR_ERR_INVALID);
    mcr_ring *ring = ring_of(cfg);
    const struct { const char *key, *hashed; } cases[] = {
        {"user:{42}:cart", "42"}, {"{x}", "x"},          {"a{}b", "a{}b"},
        {"no tag", "no tag"},     {"open{only", "open{only"}, {"}{ab}", "ab"},
        {"{a{b}c}", "a{b"},       {"{}{x}", "{}{x}"},    {"x{y}", "y"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(mcr_ring_hash(ring, cases[i].key, strlen(cases[i].key)) ==
                          mcr_hash_key(MCR_HASH_FNV1A_32, cases[i].hashed, strlen(cases[i].hashed)),
                      "key %s", cases[i].key);
    mcr_ring_free(ring);
    ck_assert_int_eq(mcr_config_set_hash_tag(cfg, NULL), MCR_OK);
    ring = ring_of(cfg);
    ck_assert_uint_eq(mcr_ring_hash(ring, "x{y}", 4), mcr_hash_key(MCR_HASH_FNV1A_32, "x{y}", 4));
    mcr_ring_free(ring);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(ketama_label_as_written)
{
    /* libketama hashes the address as written in its file */
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "cache-a", 11211, 1, "cache-a", NULL), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "cache-b", 11211, 1, NULL, NULL), MCR_OK);
    mcr_ring *ring = ring_of(cfg);
    uint32_t d[4];
    md5_words("cache-a-0", d);
    ck_assert(has_point(ring, d[0], 0));
    md5_words("cache-b:11211-0", d);
    ck_assert(has_point(ring, d[0], 1));
    ck_assert_str_eq(mcr_ring_server_name(ring, 0), "cache-a:11211");
    mcr_ring_free(ring);
    mcr_config_free(cfg);
}
END_TEST

/* A ring is immutable: many threads look keys up in it at once, with no
 * lock, and all see what one thread sees (run under TSan by the CI too). */
enum { THREADS = 4, THREAD_KEYS = 20000 };

typedef struct reader {
    const mcr_ring *ring;
    const uint32_t *want;
    int id;
    int mismatches;
} reader;

static void *reader_main(void *arg)
{
    reader *rd = arg;
    char key[32];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < THREAD_KEYS; i++) {
            int k = (i * 7 + rd->id * 1000 + round) % THREAD_KEYS;
            int len = snprintf(key, sizeof(key), "key:%d", k);
            if (mcr_ring_locate(rd->ring, key, (size_t)len) != rd->want[k])
                rd->mismatches++;
        }
    }
    return NULL;
}

START_TEST(concurrent_readers)
{
    mcr_config *cfg = tu_config("a:1:1,b:2:2,c:3:3,d:4:4,e:5:5", MCR_MODE_WEIGHTED, MCR_HASH_MD5);
    mcr_ring *ring = ring_of(cfg);
    uint32_t *want = malloc(THREAD_KEYS * sizeof(*want));
    char key[32];
    for (int k = 0; k < THREAD_KEYS; k++) {
        int len = snprintf(key, sizeof(key), "key:%d", k);
        want[k] = mcr_ring_locate(ring, key, (size_t)len);
    }
    pthread_t th[THREADS];
    reader rd[THREADS];
    for (int t = 0; t < THREADS; t++) {
        rd[t] = (reader){ring, want, t, 0};
        ck_assert_int_eq(pthread_create(&th[t], NULL, reader_main, &rd[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        ck_assert_int_eq(rd[t].mismatches, 0);
    }
    free(want);
    mcr_ring_free(ring);
    mcr_config_free(cfg);
}
END_TEST

static Suite *ring_suite(void)
{
    Suite *s = suite_create("ring");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, worked_example);
    tcase_add_test(tc, ties_go_to_earlier_server);
    tcase_add_loop_test(tc, lookup_matches_naive_rule, 0, 4);
    tcase_add_test(tc, ketama_points_and_labels);
    tcase_add_test(tc, libmemcached_labels);
    tcase_add_test(tc, modula_and_single_server);
    tcase_add_test(tc, key_prefix_rules);
    tcase_add_test(tc, locate_many_equals_locate);
    tcase_add_test(tc, ten_thousand_servers);
    tcase_add_test(tc, ring_errors);
    tcase_add_test(tc, ring_outlives_config);
    tcase_add_test(tc, twemproxy_modes);
    tcase_add_test(tc, hash_tag_rule);
    tcase_add_test(tc, ketama_label_as_written);
    suite_add_tcase(s, tc);
    /* The tests with threads: the only ones a TSan build runs
     * (THREADS_CASE in test/CMakeLists.txt). */
    TCase *tt = tcase_create("threads");
    tcase_set_timeout(tt, 600);
    tcase_add_test(tt, concurrent_readers);
    suite_add_tcase(s, tt);
    return s;
}

int main(void)
{
    return tu_run(ring_suite());
}
