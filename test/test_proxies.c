/* SPDX-License-Identifier: BSD-3-Clause */
/* test_proxies.c: Check suite of the proxies' placements (--client mcrouter-ch3, memcached-proxy-jump, envoy-maglev, envoy-ring-hash): the projects' own test vectors, and the properties each algorithm promises on random configurations. */
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"
#include "placement/placement_internal.h"
#include "testutil.h"

/*
 * The proxies are not installed here (mcrouter, a memcached built with its
 * proxy, Envoy): the reference is each project's own unit tests, whose
 * expected values are copied below with the file they come from. The
 * random tests then check what each algorithm promises, through the ring,
 * the batch lookup and the snapshot alike.
 */

#define KEY_MAX 250

/* ------------------------------------------------------------ vectors */

/* github.com/dgryski/go-jump, jump_test.go (TestHash: "Generated from the
 * reference C++ code" of Lamping and Veach): bucket[i] = Hash(key, i + 1). */
static const struct {
    uint64_t key;
    int n;
    int32_t bucket[20];
} jump_vectors[] = {
    {0, 20, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
    {1, 19, {0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 17, 17}},
    {0xdeadbeef, 19, {0, 1, 2, 3, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 16, 16, 16}},
    {0x0ddc0ffeebadf00d, 19, {0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 15, 15, 15, 15}},
};

START_TEST(jump_reference_vectors)
{
    for (size_t v = 0; v < sizeof(jump_vectors) / sizeof(jump_vectors[0]); v++)
        for (int i = 0; i < jump_vectors[v].n; i++)
            ck_assert_int_eq((int32_t)mcr__jump(jump_vectors[v].key, (uint32_t)i + 1),
                             jump_vectors[v].bucket[i]);
}
END_TEST

/* github.com/facebook/mcrouter, mcrouter/lib/test/Ch3HashTest.cpp
 * (Ch3Func.basic, Ch3Func.ch3_3, Ch3HashFunc.ch3_10). */
START_TEST(furc_mcrouter_vectors)
{
    char key[256];
    ck_assert_uint_eq(mcr__furc("sample", 6, 100), 97);
    ck_assert_uint_eq(mcr__furc("sample", 6, 1), 0);
    ck_assert_uint_eq(mcr__furc("", 0, 100), 72);
    ck_assert_uint_eq(mcr__furc("", 0, 1), 0);
    ck_assert_uint_eq(mcr__furc("", 0, MCR__FURC_MAX), 6173600);
    ck_assert_uint_eq(mcr__furc("sample", 6, MCR__FURC_MAX), 5167780);
    for (int i = 0; i < 256; i++) /* -128 .. 127 */
        key[i] = (char)(i - 128);
    ck_assert_uint_eq(mcr__furc(key, 256, 99999), 31015);
    for (int i = 0; i < 256; i++) /* 127 .. -128 */
        key[i] = (char)(127 - i);
    ck_assert_uint_eq(mcr__furc(key, 256, 99999), 67101);

    unsigned c3[3] = {0}, c10[10] = {0};
    static const unsigned want3[3] = {307, 342, 351};
    static const unsigned want10[10] = {995, 955, 1046, 968, 1032, 972, 1016, 1038, 1010, 968};
    for (unsigned i = 0; i < 10000; i++) {
        int n = snprintf(key, sizeof(key), "%u", i);
        if (i < 1000)
            c3[mcr__furc(key, (size_t)n, 3)]++;
        c10[mcr__furc(key, (size_t)n, 10)]++;
    }
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(c3[i], want3[i]);
    for (int i = 0; i < 10; i++)
        ck_assert_uint_eq(c10[i], want10[i]);
}
END_TEST

/* mcrouter's routing key (mcrouter/lib/carbon/Keys-inl.h, Keys::update). */
START_TEST(mcrouter_routing_keys)
{
    static const struct {
        const char *key, *rk;
    } v[] = {
        {"sample", "sample"},
        {"/region/cluster/sample", "sample"},
        {"/region/cluster/", ""},
        {"/region/cluster", "/region/cluster"},    /* no second '/': kept whole */
        {"/r/c/a/b", "a/b"},                       /* only two components */
        {"sample|#|suffix", "sample"},
        {"/r/c/sample|#|x|#|y", "sample"},
        {"a|#", "a|#"},
        {"|#|", ""},
        {"x/r/c/y", "x/r/c/y"},                    /* not a leading '/' */
        {"//c/k", "k"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        const void *rk;
        size_t n;
        mcr__mcrouter_routing_key(v[i].key, strlen(v[i].key), &rk, &n);
        ck_assert_msg(n == strlen(v[i].rk) && memcmp(rk, v[i].rk, n) == 0,
                      "routing key of \"%s\": \"%.*s\", not \"%s\"", v[i].key, (int)n,
                      (const char *)rk, v[i].rk);
    }
}
END_TEST

/* Envoy's test hosts: "127.0.0.1:90" ... in list order. */
static void envoy_hosts(int first, size_t n, char names[][32], const char **name, size_t *len)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], 32, "127.0.0.1:%d", first + (int)i);
        name[i] = names[i];
        len[i] = strlen(names[i]);
    }
}

/* github.com/envoyproxy/envoy,
 * test/extensions/load_balancing_policies/maglev/maglev_lb_test.cc:
 * MaglevLoadBalancerTest.Basic (6 hosts 127.0.0.1:90..95, table 7: entry
 * i -> host expected_assignments[i]) and .Weighted (127.0.0.1:90 weight 1,
 * :91 weight 2, table 17, 6 and 11 entries). The tests give the request
 * hash directly: entry = hash % size. */
START_TEST(envoy_maglev_vectors)
{
    char names[6][32];
    const char *name[6];
    size_t len[6];
    uint32_t table[17];
    static const uint32_t ones[6] = {1, 1, 1, 1, 1, 1};
    static const uint32_t basic[7] = {2, 4, 0, 1, 5, 0, 3};
    envoy_hosts(90, 6, names, name, len);
    ck_assert_int_eq(mcr__envoy_maglev_fill(name, len, ones, 6, 7, table), MCR_OK);
    for (int i = 0; i < 7; i++)
        ck_assert_uint_eq(table[i], basic[i]);

    static const uint32_t w[2] = {1, 2};
    static const uint32_t weighted[17] = {1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1};
    ck_assert_int_eq(mcr__envoy_maglev_fill(name, len, w, 2, 17, table), MCR_OK);
    unsigned count[2] = {0};
    for (int i = 0; i < 17; i++) {
        ck_assert_uint_eq(table[i], weighted[i]);
        count[table[i]]++;
    }
    ck_assert_uint_eq(count[0], 6); /* min_entries_per_host */
    ck_assert_uint_eq(count[1], 11); /* max_entries_per_host */

    /* the list order does not matter: Envoy sorts the hosts by address
     * (MaglevLoadBalancerTest.BasicStability) */
    const char *rname[6];
    size_t rlen[6];
    for (int i = 0; i < 6; i++) {
        rname[i] = name[5 - i];
        rlen[i] = len[5 - i];
    }
    ck_assert_int_eq(mcr__envoy_maglev_fill(rname, rlen, ones, 6, 7, table), MCR_OK);
    for (int i = 0; i < 7; i++)
        ck_assert_uint_eq(table[i], 5 - basic[i]);
}
END_TEST

/* github.com/envoyproxy/envoy,
 * test/extensions/load_balancing_policies/ring_hash/ring_hash_lb_test.cc:
 * RingHashLoadBalancerTest.Basic (6 hosts 127.0.0.1:90..95,
 * minimum_ring_size 12: the ring of 12 points it lists, and its lookups
 * of hashes 0, 2^64 - 1, 3551244743356806947 and the next). */
START_TEST(envoy_ring_hash_vectors)
{
    char names[6][32];
    const char *name[6];
    size_t len[6];
    static const uint32_t ones[6] = {1, 1, 1, 1, 1, 1};
    static const struct {
        int port;
        uint64_t value;
    } ring[12] = {
        {94, 833437586790550860u},   {92, 928266305478181108u},   {90, 1033482794131418490u},
        {95, 3551244743356806947u},  {93, 3851675632748031481u},  {91, 5583722120771150861u},
        {91, 6311230543546372928u},  {93, 7700377290971790572u},  {95, 13144177310400110813u},
        {92, 13444792449719432967u}, {94, 15516499411664133160u}, {90, 16117243373044804889u},
    };
    uint64_t *value;
    uint32_t *server;
    size_t n;
    envoy_hosts(90, 6, names, name, len);
    ck_assert_int_eq(mcr__envoy_ring_points(name, len, ones, 6, 12, &value, &server, &n), MCR_OK);
    ck_assert_uint_eq(n, 12); /* ring_hash_lb.size */
    for (size_t i = 0; i < 12; i++) {
        ck_assert_uint_eq(value[i], ring[i].value);
        ck_assert_uint_eq(server[i], (uint32_t)(ring[i].port - 90));
    }
    ck_assert_uint_eq(server[mcr__envoy_ring_find(value, n, 0)], 4);
    ck_assert_uint_eq(server[mcr__envoy_ring_find(value, n, UINT64_MAX)], 4);
    ck_assert_uint_eq(server[mcr__envoy_ring_find(value, n, 3551244743356806947u)], 5);
    ck_assert_uint_eq(server[mcr__envoy_ring_find(value, n, 3551244743356806948u)], 3);
    ck_assert_uint_eq(server[mcr__envoy_ring_find(value, n, 16117243373044804880u)], 0);
    free(value);
    free(server);
}
END_TEST

/* ------------------------------------------------------------ configs */

typedef struct proxy {
    const char *client;
    mcr_mode mode;
} proxy;

static const proxy proxies[] = {
    {"memcached-proxy-jump", MCR_MODE_MEMCACHED_PROXY_JUMP},
    {"mcrouter-ch3", MCR_MODE_MCROUTER_CH3},
};
#define NPROXIES (sizeof(proxies) / sizeof(proxies[0]))

/* A config of client c with n servers 10.x.y.z:port, numbered from `first`. */
static mcr_config *proxy_config(const char *client, size_t first, size_t n)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_client(cfg, client, &err), MCR_OK);
    for (size_t i = first; i < first + n; i++) {
        char host[32];
        snprintf(host, sizeof(host), "10.%zu.%zu.%zu", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        ck_assert_int_eq(mcr_config_add_server(cfg, host, 11211 + (int)(i % 3), 1, &err), MCR_OK);
    }
    return cfg;
}

static mcr_ring *ring_of(const mcr_config *cfg)
{
    mcr_error err;
    mcr_ring *r = NULL;
    int rc = mcr_ring_new(cfg, &r, &err);
    ck_assert_msg(rc == MCR_OK, "mcr_ring_new: %s", err.message);
    return r;
}

/* A random key of 1..KEY_MAX bytes: printable, or any bytes (non-ASCII,
 * UTF-8 or not), sometimes with mcrouter's routing prefix or hash stop. */
static size_t random_key(tu_rng *rng, unsigned char *buf)
{
    size_t len;
    switch (tu_below(rng, 4)) {
    case 0:
        len = 1 + tu_below(rng, KEY_MAX);
        tu_bytes(rng, buf, len);
        return len;
    case 1: {
        static const char *const words[] = {"/r/c/", "|#|", "\xc3\xa9t\xc3\xa9", "\xe2\x82\xac",
                                            "user:", "/", "|"};
        len = 0;
        while (len < 200) {
            const char *w = words[tu_below(rng, 7)];
            memcpy(buf + len, w, strlen(w));
            len += strlen(w);
            if (tu_below(rng, 4) == 0)
                break;
        }
        return len;
    }
    default:
        return tu_key(rng, (char *)buf, KEY_MAX);
    }
}

/* What the proxy computes directly, for n servers. */
static uint32_t direct(mcr_mode mode, const unsigned char *key, size_t len, uint32_t n)
{
    if (n == 1)
        return 0;
    if (mode == MCR_MODE_MEMCACHED_PROXY_JUMP) {
        /* XXH3-64: libxxhash (Debian), the library memcached's proxy vendors */
        return mcr__jump(XXH3_64bits_withSeed(key, len, 0), n);
    }
    const void *rk;
    size_t rl;
    mcr__mcrouter_routing_key(key, len, &rk, &rl);
    return mcr__furc(rk, rl, n);
}

/* ------------------------------------------------------------ properties */

/* Through the config, the ring and the batch lookup: the proxy's function;
 * growing the list by one server moves keys only to the new server, about
 * 1/(n+1) of them. */
START_TEST(random_growth)
{
    const proxy *p = &proxies[_i % NPROXIES];
    tu_rng rng;
    tu_rng_init(&rng, 4000 + (uint64_t)_i);
    unsigned char keys[64][KEY_MAX + 1];
    const void *kp[64];
    size_t kl[64];
    uint32_t out[64];
    int rounds = tu_cases(24);

    for (int round = 0; round < rounds; round++) {
        size_t n = round < 4 ? (size_t)round + 1 : 1 + tu_below(&rng, 999);
        mcr_config *a = proxy_config(p->client, 0, n), *b = proxy_config(p->client, 0, n + 1);
        mcr_ring *ra = ring_of(a), *rb = ring_of(b);
        ck_assert_int_eq(mcr_ring_mode(ra), p->mode);
        unsigned moved = 0, total = 0;
        for (int batch = 0; batch < 16; batch++) {
            for (int k = 0; k < 64; k++) {
                kl[k] = random_key(&rng, keys[k]);
                kp[k] = keys[k];
            }
            mcr_ring_locate_many(ra, kp, kl, 64, out);
            for (int k = 0; k < 64; k++) {
                uint32_t x = mcr_ring_locate(ra, kp[k], kl[k]);
                uint32_t y = mcr_ring_locate(rb, kp[k], kl[k]);
                ck_assert_uint_eq(x, direct(p->mode, keys[k], kl[k], (uint32_t)n));
                ck_assert_uint_eq(out[k], x);
                ck_assert_uint_lt(x, n);
                if (x != y) {
                    ck_assert_msg(y == n, "%s: a key moved from %u to %u, not to the new %zu",
                                  p->client, x, y, n);
                    moved++;
                }
                total++;
            }
        }
        /* 1,024 keys: the share moved is 1/(n+1), binomial; loosely, since
         * the keys built of routing prefixes and hash stops repeat a few
         * routing keys ("", "/") */
        double want = (double)total / (double)(n + 1);
        ck_assert_msg((double)moved < want + 8.0 * __builtin_sqrt(want) + 24,
                      "%s: %u of %u keys moved to server %zu of %zu", p->client, moved, total,
                      n + 1, n + 1);
        mcr_ring_free(ra);
        mcr_ring_free(rb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
}
END_TEST

/* Balance: 20,000 keys over 10 servers, each server's count within 6
 * standard deviations of 2,000 (mcrouter's own test wants 15%). */
START_TEST(random_balance)
{
    const proxy *p = &proxies[_i % NPROXIES];
    tu_rng rng;
    tu_rng_init(&rng, 4100 + (uint64_t)_i);
    mcr_config *cfg = proxy_config(p->client, 0, 10);
    mcr_ring *r = ring_of(cfg);
    unsigned count[10] = {0};
    unsigned char key[KEY_MAX + 1];
    for (int i = 0; i < 20000; i++) {
        size_t len = tu_key(&rng, (char *)key, 40);
        count[mcr_ring_locate(r, key, len)]++;
    }
    for (int i = 0; i < 10; i++)
        ck_assert_msg(count[i] > 2000 - 6 * 42 && count[i] < 2000 + 6 * 42,
                      "%s: server %d has %u of 20000 keys", p->client, i, count[i]);
    mcr_ring_free(r);
    mcr_config_free(cfg);
}
END_TEST

/* A snapshot places as the ring; saved and parsed back it places the same
 * and keeps its mode; a server set DOWN places as the proxy with the list
 * of active servers; a diff of the two counts what moved. */
START_TEST(random_snapshots)
{
    const proxy *p = &proxies[_i % NPROXIES];
    tu_rng rng;
    tu_rng_init(&rng, 4200 + (uint64_t)_i);
    mcr_error err;
    int rounds = tu_cases(8);

    for (int round = 0; round < rounds; round++) {
        size_t n = 2 + tu_below(&rng, round < 4 ? 20 : 999);
        mcr_config *cfg = proxy_config(p->client, 0, n);
        mcr_snapshot *s1, *s2, *s3;
        ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s1, &err), MCR_OK);
        char *text;
        size_t tlen;
        ck_assert_int_eq(mcr_snapshot_text(s1, &text, &tlen, &err), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_parse(text, tlen, NULL, NULL, 0, &s2, &err), MCR_OK);
        ck_assert_int_eq(mcr_ring_mode(mcr_snapshot_ring(s2)), p->mode);
        ck_assert_ptr_nonnull(strstr(text, mcr_mode_name(p->mode)));
        free(text);

        /* server `down` DOWN: the proxy given the list without it */
        size_t down = tu_below(&rng, (uint32_t)n);
        mcr_server_desc d;
        ck_assert_int_eq(mcr_snapshot_server(s1, down, &d), MCR_OK);
        mcr_changes *ch = mcr_changes_new();
        ck_assert_int_eq(mcr_changes_set_state(ch, d.id, MCR_STATE_DOWN, &err), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_apply(s1, ch, &s3, &err), MCR_OK);
        mcr_changes_free(ch);
        mcr_diff *diff;
        ck_assert_int_eq(mcr_diff_new(s1, s3, &diff, &err), MCR_OK);

        mcr_ring *ring = ring_of(cfg);
        unsigned char key[KEY_MAX + 1];
        unsigned moved = 0, total = 2000;
        for (unsigned k = 0; k < total; k++) {
            size_t len = random_key(&rng, key);
            uint32_t x = mcr_ring_locate(ring, key, len);
            ck_assert_uint_eq(mcr_snapshot_locate(s1, key, len), x);
            ck_assert_uint_eq(mcr_snapshot_locate(s2, key, len), x);
            uint32_t y = direct(p->mode, key, len, (uint32_t)n - 1);
            uint32_t z = mcr_snapshot_locate(s3, key, len);
            ck_assert_uint_eq(z, y < down ? y : y + 1); /* ring index -> listed index */
            moved += z != x;
            ck_assert_int_eq(mcr_diff_key_moved(diff, key, len), z != x);
        }
        /* the diff's model share against the keys' (2,000 keys) */
        double share = (double)moved / total;
        ck_assert_msg(__builtin_fabs(share - mcr_diff_moved(diff)) < 0.08,
                      "%s, %zu servers, %zu down: %f of keys moved, the diff says %f", p->client,
                      n, down, share, mcr_diff_moved(diff));
        mcr_diff_free(diff);
        mcr_ring_free(ring);
        mcr_snapshot_unref(s1);
        mcr_snapshot_unref(s2);
        mcr_snapshot_unref(s3);
        mcr_config_free(cfg);
    }
}
END_TEST

/* What the proxies do not have: weights; and a hash alone places no key. */
START_TEST(refusals)
{
    const proxy *p = &proxies[_i % NPROXIES];
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_ring *r = NULL;
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_config_set_client(cfg, p->client, &err), MCR_OK);
    ck_assert_str_eq(mcr_config_client(cfg), p->client);
    ck_assert_int_eq(mcr_config_add_servers(cfg, "10.0.0.1,10.0.0.2:11211:2", &err), MCR_OK);
    ck_assert_int_eq(mcr_ring_new(cfg, &r, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_config_set_mode(cfg, p->mode), MCR_OK); /* the mode alone too */
    ck_assert_int_eq(mcr_ring_new(cfg, &r, &err), MCR_ERR_RANGE);
    mcr_config_free(cfg);

    cfg = proxy_config(p->client, 0, 3);
    r = ring_of(cfg);
    ck_assert_uint_eq(mcr_ring_find(r, 12345), MCR_NO_SERVER);
    ck_assert_uint_eq(mcr_ring_point_count(r), 0);
    mcr_ring_free(r);
    mcr_config_free(cfg);
}
END_TEST

/* The ring places "sample" as mcrouter's Ch3HashTest does (100 servers:
 * 97), whatever routing prefix or hash stop surrounds it. */
START_TEST(ch3_ring_vectors)
{
    mcr_config *cfg = proxy_config("mcrouter-ch3", 0, 100);
    mcr_ring *r = ring_of(cfg);
    static const char *const keys[] = {"sample", "/region/cluster/sample", "sample|#|x",
                                       "/a/b/sample|#|"};
    for (size_t i = 0; i < 4; i++)
        ck_assert_uint_eq(mcr_ring_locate(r, keys[i], strlen(keys[i])), 97);
    ck_assert_uint_eq(mcr_ring_locate(r, "", 0), 72);
    ck_assert_uint_eq(mcr_ring_locate(r, "/region/cluster/", 16), 72);
    mcr_ring_free(r);
    mcr_config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------ Envoy */

/*
 * Envoy's tests fix tables and rings of a few hosts (the vectors above);
 * beyond them, what its algorithms promise, on random configurations of 1
 * to 1,000 servers with weights, through the config, the ring, the batch
 * lookup and the snapshot.
 */

static const proxy envoys[] = {
    {"envoy-maglev", MCR_MODE_ENVOY_MAGLEV},
    {"envoy-ring-hash", MCR_MODE_ENVOY_RING_HASH},
};
#define NENVOYS (sizeof(envoys) / sizeof(envoys[0]))

/* A config of client c with n servers 10.x.y.z:port from `first`, weights
 * 1..wmax (all 1 when wmax is 1). */
static mcr_config *envoy_config(const char *client, size_t first, size_t n, tu_rng *rng,
                                uint32_t wmax)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_client(cfg, client, &err), MCR_OK);
    for (size_t i = first; i < first + n; i++) {
        char host[32];
        snprintf(host, sizeof(host), "10.%zu.%zu.%zu", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        uint32_t w = wmax > 1 ? 1 + tu_below(rng, wmax) : 1;
        ck_assert_int_eq(mcr_config_add_server(cfg, host, 11211 + (int)(i % 3), w, &err), MCR_OK);
    }
    return cfg;
}

/* The host keys and weights of a ring's servers, as Envoy sees them. */
typedef struct envoy_hosts_of {
    const char **name;
    size_t *len;
    uint32_t *weight;
    size_t n;
} envoy_hosts_of;

static envoy_hosts_of hosts_of(const mcr_ring *r)
{
    envoy_hosts_of h;
    h.n = mcr_ring_server_count(r);
    h.name = malloc(h.n * sizeof(*h.name));
    h.len = malloc(h.n * sizeof(*h.len));
    h.weight = malloc(h.n * sizeof(*h.weight));
    ck_assert(h.name != NULL && h.len != NULL && h.weight != NULL);
    for (size_t i = 0; i < h.n; i++) {
        h.name[i] = mcr_ring_server_name(r, i);
        h.len[i] = strlen(h.name[i]);
        h.weight[i] = mcr_ring_server_weight(r, i);
    }
    return h;
}

static void hosts_free(envoy_hosts_of *h)
{
    free(h->name);
    free(h->len);
    free(h->weight);
}

/* Maglev: the table is full, and each host's entries are its weight's
 * share within the fill's rounding: a host of normalised weight w takes
 * an entry in 1 + floor(R w / max_w) of the R rounds, so its count is
 * (65537 - about n) w + 1, give or take one. Ring hash: the ring has the
 * size Envoy computes (scale = min(ceil(min_w 1024) / min_w, 8388608),
 * each host the points its running sum gives it), the points ascend and
 * each is XXH64 of "address_i". Both: the ring, the batch lookup and the
 * direct lookup agree. */
START_TEST(envoy_random_structure)
{
    const proxy *p = &envoys[_i % NENVOYS];
    tu_rng rng;
    tu_rng_init(&rng, 4300 + (uint64_t)_i);
    int rounds = tu_cases(12);

    for (int round = 0; round < rounds; round++) {
        size_t n = round < 3 ? (size_t)round + 1 : 1 + tu_below(&rng, 1000);
        uint32_t wmax = round % 3 == 0 ? 1 : round % 3 == 1 ? 5 : 1000;
        mcr_config *cfg = envoy_config(p->client, 0, n, &rng, wmax);
        mcr_ring *r = ring_of(cfg);
        envoy_hosts_of h = hosts_of(r);
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += h.weight[i];
        unsigned char key[KEY_MAX + 1];

        if (p->mode == MCR_MODE_ENVOY_MAGLEV) {
            uint32_t *table = malloc(MCR__ENVOY_MAGLEV_SIZE * sizeof(*table));
            unsigned *count = calloc(n, sizeof(*count));
            ck_assert(table != NULL && count != NULL);
            for (uint32_t e = 0; e < MCR__ENVOY_MAGLEV_SIZE; e++)
                table[e] = UINT32_MAX;
            ck_assert_int_eq(mcr__envoy_maglev_fill(h.name, h.len, h.weight, n,
                                                    MCR__ENVOY_MAGLEV_SIZE, table),
                             MCR_OK);
            for (uint32_t e = 0; e < MCR__ENVOY_MAGLEV_SIZE; e++) {
                ck_assert_uint_lt(table[e], n); /* full */
                count[table[e]]++;
            }
            for (size_t i = 0; i < n; i++) {
                double w = (double)h.weight[i] / (double)sum;
                double want = (MCR__ENVOY_MAGLEV_SIZE - (double)n) * w + 1;
                ck_assert_msg(count[i] >= 1 && fabs(count[i] - want) <= 2.0 + (double)n * w,
                              "%zu servers: server %zu (weight %u of %llu) has %u entries, "
                              "about %.1f expected",
                              n, i, h.weight[i], (unsigned long long)sum, count[i], want);
            }
            for (int k = 0; k < 500; k++) {
                size_t len = random_key(&rng, key);
                uint32_t want = n == 1 ? 0 : table[XXH64(key, len, 0) % MCR__ENVOY_MAGLEV_SIZE];
                ck_assert_uint_eq(mcr_ring_locate(r, key, len), want);
            }
            free(table);
            free(count);
        } else {
            double min_w = 1.0;
            for (size_t i = 0; i < n; i++)
                min_w = fmin(min_w, (double)h.weight[i] / (double)sum);
            double scale = fmin(ceil(min_w * 1024) / min_w, 8388608.0);
            uint64_t *value;
            uint32_t *server;
            size_t np;
            ck_assert_int_eq(mcr__envoy_ring_points(h.name, h.len, h.weight, n, 1024, &value,
                                                    &server, &np),
                             MCR_OK);
            /* ring_hash_lb.size: ceil(scale), the running sums' rounding aside */
            ck_assert_msg(fabs((double)np - ceil(scale)) <= 1.0, "%zu servers: %zu points, scale %f",
                          n, np, scale);
            ck_assert_uint_ge(np, 1024 < scale ? 1024 : (size_t)floor(scale));
            unsigned *count = calloc(n, sizeof(*count));
            ck_assert_ptr_nonnull(count);
            for (size_t j = 0; j < np; j++) {
                ck_assert(j == 0 || value[j - 1] <= value[j]);
                count[server[j]]++;
            }
            double cur = 0, target = 0;
            for (size_t i = 0; i < n; i++) {
                target += scale * ((double)h.weight[i] / (double)sum);
                unsigned c = 0;
                for (; cur < target; cur++)
                    c++;
                ck_assert_uint_eq(count[i], c);
                ck_assert_uint_ge(c, 1); /* min_hashes_per_host */
            }
            /* a point of each server, by its label */
            for (size_t i = 0; i < n; i += 1 + n / 16) {
                char label[64];
                int ll = snprintf(label, sizeof(label), "%s_%u", h.name[i], count[i] - 1);
                uint64_t v = XXH64(label, (size_t)ll, 0);
                size_t at = mcr__envoy_ring_find(value, np, v);
                ck_assert_uint_eq(value[at], v);
                ck_assert_uint_eq(server[at], i);
            }
            for (int k = 0; k < 500; k++) {
                size_t len = random_key(&rng, key);
                uint64_t hk = XXH64(key, len, 0);
                /* the first point >= h, or point 0 past the last */
                size_t j = mcr__envoy_ring_find(value, np, hk);
                if (j == 0)
                    ck_assert(hk <= value[0] || hk > value[np - 1]);
                else
                    ck_assert(value[j - 1] < hk && hk <= value[j]);
                uint32_t want = n == 1 ? 0 : server[j];
                ck_assert_uint_eq(mcr_ring_locate(r, key, len), want);
            }
            free(count);
            free(value);
            free(server);
        }

        /* the batch lookup answers as the single one */
        unsigned char keys[64][KEY_MAX + 1];
        const void *kp[64];
        size_t kl[64];
        uint32_t out[64];
        for (int k = 0; k < 64; k++) {
            kl[k] = random_key(&rng, keys[k]);
            kp[k] = keys[k];
        }
        mcr_ring_locate_many(r, kp, kl, 64, out);
        for (int k = 0; k < 64; k++)
            ck_assert_uint_eq(out[k], mcr_ring_locate(r, kp[k], kl[k]));
        hosts_free(&h);
        mcr_ring_free(r);
        mcr_config_free(cfg);
    }
}
END_TEST

/* Growth by one server (equal weights) moves few keys: maglev about the
 * new server's share and the table's disruption (below 2 N / M); the ring
 * its share and the keys of the points each server loses when the ring's
 * points per server shrink (ceil(1024 / n) before, ceil(1024 / (n + 1))
 * after). */
START_TEST(envoy_random_growth)
{
    const proxy *p = &envoys[_i % NENVOYS];
    tu_rng rng;
    tu_rng_init(&rng, 4400 + (uint64_t)_i);
    int rounds = tu_cases(16);
    unsigned char key[KEY_MAX + 1];

    for (int round = 0; round < rounds; round++) {
        size_t n = round < 3 ? (size_t)round + 1 : 1 + tu_below(&rng, 999);
        mcr_config *a = envoy_config(p->client, 0, n, &rng, 1);
        mcr_config *b = envoy_config(p->client, 0, n + 1, &rng, 1);
        mcr_ring *ra = ring_of(a), *rb = ring_of(b);
        unsigned moved = 0, total = 4096;
        for (unsigned k = 0; k < total; k++) {
            size_t len = tu_key(&rng, (char *)key, KEY_MAX);
            moved += mcr_ring_locate(ra, key, len) != mcr_ring_locate(rb, key, len);
        }
        double lost = 0;
        if (p->mode == MCR_MODE_ENVOY_RING_HASH) {
            double ca = ceil(1024.0 / (double)n), cb = ceil(1024.0 / (double)(n + 1));
            lost = 1.0 - cb / ca;
        } else {
            /* Maglev's disruption beside the share: entries that change
             * hands between old servers as the permutations refill, which
             * grows with N / M (measured here: about 1.1 N / M) */
            lost = 2.0 * (double)n / MCR__ENVOY_MAGLEV_SIZE;
        }
        double want = 1.0 / (double)(n + 1) + lost;
        double share = (double)moved / total;
        ck_assert_msg(share <= want + 4.0 * sqrt(want / total) + 0.005,
                      "%s: %zu -> %zu servers moved %f of the keys, at most %f expected",
                      p->client, n, n + 1, share, want);
        mcr_ring_free(ra);
        mcr_ring_free(rb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
}
END_TEST

/* Snapshots: text round trips place identically and keep the mode; a
 * server DOWN places as Envoy with the active servers (their weights
 * renormalised); diffs count what moved: envoy-maglev's the table entries
 * that changed, envoy-ring-hash's the 64-bit arcs. */
START_TEST(envoy_random_snapshots)
{
    const proxy *p = &envoys[_i % NENVOYS];
    tu_rng rng;
    tu_rng_init(&rng, 4500 + (uint64_t)_i);
    mcr_error err;
    int rounds = tu_cases(6);

    for (int round = 0; round < rounds; round++) {
        size_t n = 2 + tu_below(&rng, round < 3 ? 20 : 999);
        mcr_config *cfg = envoy_config(p->client, 0, n, &rng, round % 2 ? 100 : 1);
        mcr_snapshot *s1, *s2, *s3;
        ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s1, &err), MCR_OK);
        char *text;
        size_t tlen;
        ck_assert_int_eq(mcr_snapshot_text(s1, &text, &tlen, &err), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_parse(text, tlen, NULL, NULL, 0, &s2, &err), MCR_OK);
        ck_assert_int_eq(mcr_ring_mode(mcr_snapshot_ring(s2)), p->mode);
        ck_assert_ptr_nonnull(strstr(text, mcr_mode_name(p->mode)));
        free(text);

        size_t down = tu_below(&rng, (uint32_t)n);
        mcr_server_desc d;
        ck_assert_int_eq(mcr_snapshot_server(s1, down, &d), MCR_OK);
        mcr_changes *ch = mcr_changes_new();
        ck_assert_int_eq(mcr_changes_set_state(ch, d.id, MCR_STATE_DOWN, &err), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_apply(s1, ch, &s3, &err), MCR_OK);
        mcr_changes_free(ch);
        /* Envoy given the list without the server */
        mcr_config *less = mcr_config_new();
        ck_assert_int_eq(mcr_config_set_client(less, p->client, &err), MCR_OK);
        for (size_t i = 0; i < n; i++) {
            mcr_server_desc x;
            ck_assert_int_eq(mcr_snapshot_server(s1, i, &x), MCR_OK);
            if (i != down)
                ck_assert_int_eq(mcr_config_add_server(less, x.host, x.port, x.weight, &err),
                                 MCR_OK);
        }
        mcr_ring *rless = ring_of(less);
        mcr_diff *diff = NULL;
        ck_assert_int_eq(mcr_diff_new(s1, s3, &diff, &err), MCR_OK);

        mcr_ring *ring = ring_of(cfg);
        unsigned char key[KEY_MAX + 1];
        unsigned moved = 0, total = 2000;
        for (unsigned k = 0; k < total; k++) {
            size_t len = random_key(&rng, key);
            uint32_t x = mcr_ring_locate(ring, key, len);
            ck_assert_uint_eq(mcr_snapshot_locate(s1, key, len), x);
            ck_assert_uint_eq(mcr_snapshot_locate(s2, key, len), x);
            uint32_t y = mcr_ring_locate(rless, key, len);
            uint32_t z = mcr_snapshot_locate(s3, key, len);
            ck_assert_uint_eq(z, y < down ? y : y + 1);
            moved += z != x;
            ck_assert_int_eq(mcr_diff_key_moved(diff, key, len), z != x);
        }
        double share = (double)moved / total;
        ck_assert_msg(fabs(share - mcr_diff_moved(diff)) < 0.05,
                      "%s, %zu servers, %zu down: %f of keys moved, the diff says %f",
                      p->client, n, down, share, mcr_diff_moved(diff));
        mcr_diff_free(diff);
        mcr_ring_free(ring);
        mcr_ring_free(rless);
        mcr_config_free(less);
        mcr_snapshot_unref(s1);
        mcr_snapshot_unref(s2);
        mcr_snapshot_unref(s3);
        mcr_config_free(cfg);
    }
}
END_TEST

/* A 32-bit hash places no key; the other maglev's snapshots and a
 * continuum's do not diff against envoy-maglev's, nor a 32-bit continuum
 * against envoy-ring-hash's. */
START_TEST(envoy_refusals)
{
    mcr_error err;
    tu_rng rng;
    tu_rng_init(&rng, 4600);
    for (size_t e = 0; e < NENVOYS; e++) {
        mcr_config *cfg = envoy_config(envoys[e].client, 0, 3, &rng, 3);
        mcr_ring *r = ring_of(cfg);
        ck_assert_uint_eq(mcr_ring_find(r, 12345), MCR_NO_SERVER);
        ck_assert_uint_eq(mcr_ring_point_count(r), 0);
        mcr_ring_free(r);
        mcr_config_free(cfg);
    }
    static const struct {
        const char *client;
        mcr_mode other;
    } pairs[] = {{"envoy-maglev", MCR_MODE_MAGLEV},
                 {"envoy-maglev", MCR_MODE_KETAMA},
                 {"envoy-maglev", MCR_MODE_ENVOY_RING_HASH},
                 {"envoy-ring-hash", MCR_MODE_KETAMA}};
    for (size_t o = 0; o < sizeof(pairs) / sizeof(pairs[0]); o++) {
        mcr_config *a = envoy_config(pairs[o].client, 0, 5, &rng, 1);
        mcr_config *b = envoy_config(pairs[o].client, 0, 5, &rng, 1);
        ck_assert_int_eq(mcr_config_set_mode(b, pairs[o].other), MCR_OK);
        mcr_snapshot *sa, *sb;
        mcr_diff *d;
        ck_assert_int_eq(mcr_snapshot_new(a, 1, &sa, &err), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_new(b, 1, &sb, &err), MCR_OK);
        ck_assert_int_eq(mcr_diff_new(sa, sb, &d, &err), MCR_ERR_UNSUPPORTED);
        ck_assert_int_eq(mcr_diff_new(sb, sa, &d, &err), MCR_ERR_UNSUPPORTED);
        mcr_snapshot_unref(sa);
        mcr_snapshot_unref(sb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
}
END_TEST

/* ------------------------------------------------------------ memcached's ring hash */

/*
 * memcached-proxy-ring-ketama, computed here from memcached's
 * proxy_ring_hash.c (github.com/memcached/memcached; the same in the stored
 * commits 2a903f04 and 84fae8a9) with nothing of libmcroute: OpenSSL's MD5,
 * glibc's qsort with the proxy's comparator (ketama_compare: by point
 * alone; glibc sorts with a merge sort when it can allocate, so equal
 * points keep the list's order) and the proxy's lookup (ketama_get_server:
 * libketama's bisection). memcached's own tests (t/proxy*.t, t/proxy*.lua)
 * place no key through mcp.dist_ring_hash: there are no vectors of theirs
 * to copy, so the reference is this computation, and libketama's continuum
 * where the two agree (ring_ketama_is_libketama_but).
 */
typedef struct cpoint {
    unsigned int point;
    unsigned int id; /* 1-based, as the pool's backends */
} cpoint;

static int ketama_compare(const void *p1, const void *p2)
{
    const cpoint *a = p1, *b = p2;
    return (a->point < b->point) ? -1 : ((a->point > b->point) ? 1 : 0);
}

static void md5_of(const void *s, size_t len, unsigned char d[16])
{
    unsigned int dl = 0;
    ck_assert_int_eq(EVP_Digest(s, len, d, &dl, EVP_md5(), NULL), 1);
}

/* _add_server_ketama: obuckets (160) / 4 labels "addr:port-k", four
 * little-endian words of each digest; then the qsort. */
static cpoint *proxy_continuum(char hosts[][32], const int *ports, size_t n, size_t *count)
{
    cpoint *c = malloc(n * 160 * sizeof(*c));
    ck_assert_ptr_nonnull(c);
    unsigned cont = 0;
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 160 / 4; k++) {
            char label[64];
            unsigned char d[16];
            int len = snprintf(label, sizeof(label), "%s:%d-%d", hosts[i], ports[i], k);
            md5_of(label, (size_t)len, d);
            for (int h = 0; h < 4; h++) {
                c[cont].point = (unsigned)d[3 + h * 4] << 24 | (unsigned)d[2 + h * 4] << 16 |
                                (unsigned)d[1 + h * 4] << 8 | d[h * 4];
                c[cont].id = (unsigned)i + 1;
                cont++;
            }
        }
    }
    qsort(c, cont, sizeof(cpoint), ketama_compare);
    *count = cont;
    return c;
}

/* ketama_key_hasher: the low 32 bits of MD5(key), little-endian. */
static unsigned proxy_key_hash(const void *key, size_t len)
{
    unsigned char d[16];
    md5_of(key, len, d);
    return (unsigned)d[3] << 24 | (unsigned)d[2] << 16 | (unsigned)d[1] << 8 | d[0];
}

/* ketama_get_server, zero-based. */
static unsigned proxy_get_server(const cpoint *c, unsigned total, unsigned h)
{
    int highp = (int)total, lowp = 0, midp;
    unsigned midval, midval1;
    for (;;) {
        midp = (lowp + highp) / 2;
        if (midp == (int)total)
            return c[0].id - 1;
        midval = c[midp].point;
        midval1 = midp == 0 ? 0 : c[midp - 1].point;
        if (h <= midval && h > midval1)
            return c[midp].id - 1;
        if (midval < h)
            lowp = midp + 1;
        else
            highp = midp - 1;
        if (lowp > highp)
            return c[0].id - 1;
    }
}

/* n servers: IPv4 addresses, host names, IPv6 addresses (no brackets in
 * the label: the proxy's backend host), random ports. */
static mcr_config *ring_ketama_config(tu_rng *rng, size_t n, char hosts[][32], int *ports)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_client(cfg, "memcached-proxy-ring-ketama", &err), MCR_OK);
    for (size_t i = 0; i < n; i++) {
        switch (tu_below(rng, 3)) {
        case 0:
            snprintf(hosts[i], 32, "10.%zu.%zu.%zu", (i >> 16) & 255, (i >> 8) & 255, i & 255);
            break;
        case 1: snprintf(hosts[i], 32, "cache-%u.example", (unsigned)i); break;
        default: snprintf(hosts[i], 32, "2001:db8::%zx", i + 1); break;
        }
        ports[i] = 1 + (int)tu_below(rng, 65535);
        ck_assert_msg(mcr_config_add_server(cfg, hosts[i], ports[i], 1, &err) == MCR_OK, "%s",
                      err.message);
    }
    return cfg;
}

/* The whole continuum, point by point, and random keys (1..250 bytes, any
 * bytes) through the ring, the batch lookup, a snapshot and its text read
 * back, against the proxy computed above; and the continuum's edges. */
START_TEST(ring_ketama_random)
{
    tu_rng rng;
    tu_rng_init(&rng, 4400 + (uint64_t)_i);
    mcr_error err;
    int rounds = tu_cases(10);
    static char hosts[1001][32];
    static int ports[1001];

    for (int round = 0; round < rounds; round++) {
        size_t n = round < 3 ? (size_t)round + 1 : round == 3 ? 1000 : 1 + tu_below(&rng, 1000);
        mcr_config *cfg = ring_ketama_config(&rng, n, hosts, ports);
        mcr_ring *r = ring_of(cfg);
        ck_assert_int_eq(mcr_ring_mode(r), MCR_MODE_MEMCACHED_PROXY_RING_KETAMA);
        size_t total;
        cpoint *c = proxy_continuum(hosts, ports, n, &total);
        ck_assert_uint_eq(mcr_ring_point_count(r), total);
        for (size_t i = 0; i < total; i++) {
            uint32_t v, s;
            ck_assert_int_eq(mcr_ring_point(r, i, &v, &s), MCR_OK);
            ck_assert_uint_eq(v, c[i].point);
            ck_assert_uint_eq(s, c[i].id - 1);
        }
        mcr_snapshot *s1, *s2;
        ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s1, &err), MCR_OK);
        char *text;
        size_t tlen;
        ck_assert_int_eq(mcr_snapshot_text(s1, &text, &tlen, &err), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_parse(text, tlen, NULL, NULL, 0, &s2, &err), MCR_OK);
        ck_assert_ptr_nonnull(strstr(text, "memcached-proxy-ring-ketama"));
        free(text);
        unsigned char keys[64][KEY_MAX + 1];
        const void *kp[64];
        size_t kl[64];
        uint32_t out[64];
        for (int batch = 0; batch < 8; batch++) {
            for (int k = 0; k < 64; k++) {
                kl[k] = random_key(&rng, keys[k]);
                kp[k] = keys[k];
            }
            mcr_ring_locate_many(r, kp, kl, 64, out);
            for (int k = 0; k < 64; k++) {
                uint32_t want =
                    n == 1 ? 0 : proxy_get_server(c, (unsigned)total, proxy_key_hash(kp[k], kl[k]));
                ck_assert_uint_eq(mcr_ring_locate(r, kp[k], kl[k]), want);
                ck_assert_uint_eq(out[k], want);
                ck_assert_uint_eq(mcr_snapshot_locate(s1, kp[k], kl[k]), want);
                ck_assert_uint_eq(mcr_snapshot_locate(s2, kp[k], kl[k]), want);
            }
        }
        /* the edges: 0, each side of points, past the last (wrapping) */
        for (int e = 0; e < 64 && n > 1; e++) {
            size_t i = tu_below(&rng, (uint32_t)total);
            uint32_t hs[] = {0, 1, UINT32_MAX, c[i].point, c[i].point - 1, c[i].point + 1};
            for (size_t j = 0; j < sizeof(hs) / sizeof(hs[0]); j++)
                ck_assert_uint_eq(mcr_ring_find(r, hs[j]),
                                  proxy_get_server(c, (unsigned)total, hs[j]));
        }
        free(c);
        mcr_snapshot_unref(s1);
        mcr_snapshot_unref(s2);
        mcr_ring_free(r);
        mcr_config_free(cfg);
    }
}
END_TEST

/* Equal points keep the list's order (glibc's merge sort): two servers of
 * the same host and port text cannot be configured, so ties are made on
 * the points themselves, through mcr__sort_points against qsort. */
START_TEST(ring_ketama_ties)
{
    tu_rng rng;
    tu_rng_init(&rng, 4500);
    enum { N = 4000 };
    cpoint *c = malloc(N * sizeof(*c));
    mcr__point *p = malloc(N * sizeof(*p));
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(p);
    for (unsigned i = 0; i < N; i++) {
        c[i].point = tu_below(&rng, 64); /* many ties */
        c[i].id = i / 40 + 1;
        p[i].value = c[i].point;
        p[i].server = c[i].id - 1;
    }
    qsort(c, N, sizeof(cpoint), ketama_compare);
    ck_assert_int_eq(mcr__sort_points(p, N), MCR_OK);
    for (unsigned i = 0; i < N; i++) {
        ck_assert_uint_eq(p[i].value, c[i].point);
        ck_assert_uint_eq(p[i].server, c[i].id - 1);
    }
    free(c);
    free(p);
}
END_TEST

/* Is it libketama's continuum ("ketama") with every weight 1? The same
 * labels and points, but libketama gives each server
 * floorf(1/n * 40.0 * n) labels in float arithmetic, which is 39, not 40,
 * for 61, 122, 237, 244, 474, 488, 933, ... servers: not an alias. */
START_TEST(ring_ketama_is_libketama_but)
{
    static const struct {
        size_t n;
        size_t ketama_points; /* libketama's continuum, weights 1 */
    } cases[] = {{1, 160}, {3, 3 * 160}, {60, 60 * 160}, {61, 61 * 156}, {62, 62 * 160},
                 {122, 122 * 156}, {237, 237 * 156}};
    for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
        size_t n = cases[t].n;
        mcr_config *a = proxy_config("memcached-proxy-ring-ketama", 0, n);
        mcr_config *b = proxy_config("memcached-proxy-ring-ketama", 0, n);
        ck_assert_int_eq(mcr_config_set_mode(b, MCR_MODE_KETAMA), MCR_OK);
        mcr_ring *ra = ring_of(a), *rb = ring_of(b);
        /* both hash keys as mcp.dist_ring_hash.hash */
        ck_assert_uint_eq(mcr_ring_hash(ra, "user:1", 6), proxy_key_hash("user:1", 6));
        ck_assert_uint_eq(mcr_ring_hash(rb, "user:1", 6), proxy_key_hash("user:1", 6));
        ck_assert_uint_eq(mcr_ring_point_count(ra), n * 160);
        ck_assert_uint_eq(mcr_ring_point_count(rb), cases[t].ketama_points);
        int same = mcr_ring_point_count(ra) == mcr_ring_point_count(rb);
        for (size_t i = 0; same && i < n * 160; i++) {
            uint32_t va, sa, vb, sb;
            mcr_ring_point(ra, i, &va, &sa);
            mcr_ring_point(rb, i, &vb, &sb);
            ck_assert(va == vb && sa == sb);
        }
        mcr_ring_free(ra);
        mcr_ring_free(rb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
}
END_TEST

/* Growth: a server added at the end takes keys only from the others,
 * about 1/(n+1) of them; a server set DOWN places as the proxy without it,
 * and the continuum diff counts the keys that move. */
START_TEST(ring_ketama_growth_and_down)
{
    tu_rng rng;
    tu_rng_init(&rng, 4600 + (uint64_t)_i);
    mcr_error err;
    int rounds = tu_cases(8);
    static char hosts[1001][32];
    static int ports[1001];

    for (int round = 0; round < rounds; round++) {
        size_t n = 2 + tu_below(&rng, round < 3 ? 10 : 998);
        tu_rng copy = rng;
        mcr_config *a = ring_ketama_config(&rng, n, hosts, ports);
        rng = copy;
        mcr_config *b = ring_ketama_config(&rng, n + 1, hosts, ports);
        mcr_ring *ra = ring_of(a), *rb = ring_of(b);
        mcr_snapshot *s1, *s3;
        ck_assert_int_eq(mcr_snapshot_new(a, 1, &s1, &err), MCR_OK);
        size_t down = tu_below(&rng, (uint32_t)n);
        mcr_server_desc d;
        ck_assert_int_eq(mcr_snapshot_server(s1, down, &d), MCR_OK);
        mcr_changes *ch = mcr_changes_new();
        ck_assert_int_eq(mcr_changes_set_state(ch, d.id, MCR_STATE_DOWN, &err), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_apply(s1, ch, &s3, &err), MCR_OK);
        mcr_changes_free(ch);
        mcr_diff *diff;
        ck_assert_int_eq(mcr_diff_new(s1, s3, &diff, &err), MCR_OK);
        /* the proxy with the list without server `down` */
        char (*less)[32] = malloc(n * 32);
        int *lports = malloc(n * sizeof(int));
        ck_assert_ptr_nonnull(less);
        ck_assert_ptr_nonnull(lports);
        for (size_t i = 0, j = 0; i < n; i++)
            if (i != down) {
                memcpy(less[j], hosts[i], 32);
                lports[j++] = ports[i];
            }
        size_t total;
        cpoint *c = proxy_continuum(less, lports, n - 1, &total);

        unsigned moved = 0, gone = 0, keys = 2000;
        unsigned char key[KEY_MAX + 1];
        for (unsigned k = 0; k < keys; k++) {
            size_t len = random_key(&rng, key);
            uint32_t x = mcr_ring_locate(ra, key, len), y = mcr_ring_locate(rb, key, len);
            if (x != y) {
                ck_assert_msg(y == n, "a key moved from %u to %u, not to the new %zu", x, y, n);
                moved++;
            }
            uint32_t z = mcr_snapshot_locate(s3, key, len);
            uint32_t w = n - 1 == 1 ? 0 : proxy_get_server(c, (unsigned)total, proxy_key_hash(key, len));
            ck_assert_uint_eq(z, w < down ? w : w + 1);
            ck_assert_int_eq(mcr_diff_key_moved(diff, key, len), z != x);
            ck_assert(z == x || x == down); /* only the down server's keys move */
            gone += z != x;
        }
        double want = (double)keys / (double)(n + 1);
        ck_assert_msg((double)moved < want + 8.0 * sqrt(want) + 24, "%u of %u keys moved", moved,
                      keys);
        ck_assert_msg(fabs((double)gone / keys - mcr_diff_moved(diff)) < 0.08,
                      "%u of %u keys moved, the diff says %f", gone, keys, mcr_diff_moved(diff));
        free(c);
        free(less);
        free(lports);
        mcr_diff_free(diff);
        mcr_snapshot_unref(s1);
        mcr_snapshot_unref(s3);
        mcr_ring_free(ra);
        mcr_ring_free(rb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
}
END_TEST

/* No weights: the client refuses any weight but 1, the mode any above 1,
 * in rings and snapshots. */
START_TEST(ring_ketama_refusals)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_ring *r = NULL;
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_config_set_client(cfg, "memcached-proxy-ring-ketama", &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_servers(cfg, "10.0.0.1,10.0.0.2:11211:2", &err), MCR_OK);
    ck_assert_int_eq(mcr_ring_new(cfg, &r, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_MEMCACHED_PROXY_RING_KETAMA), MCR_OK);
    ck_assert_int_eq(mcr_ring_new(cfg, &r, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_ERR_RANGE);
    mcr_config_free(cfg);
}
END_TEST

static Suite *proxies_suite(void)
{
    Suite *s = suite_create("proxies");
    TCase *tv = tcase_create("vectors");
    tcase_add_test(tv, jump_reference_vectors);
    tcase_add_test(tv, furc_mcrouter_vectors);
    tcase_add_test(tv, mcrouter_routing_keys);
    tcase_add_test(tv, ch3_ring_vectors);
    tcase_add_test(tv, envoy_maglev_vectors);
    tcase_add_test(tv, envoy_ring_hash_vectors);
    suite_add_tcase(s, tv);

    TCase *tp = tcase_create("properties");
    tcase_set_timeout(tp, 600);
    tcase_add_loop_test(tp, random_growth, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, random_balance, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, random_snapshots, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, refusals, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, envoy_random_structure, 0, (int)NENVOYS);
    tcase_add_loop_test(tp, envoy_random_growth, 0, (int)NENVOYS);
    tcase_add_loop_test(tp, envoy_random_snapshots, 0, (int)NENVOYS);
    tcase_add_test(tp, envoy_refusals);
    tcase_add_loop_test(tp, ring_ketama_random, 0, 2);
    tcase_add_test(tp, ring_ketama_ties);
    tcase_add_test(tp, ring_ketama_is_libketama_but);
    tcase_add_loop_test(tp, ring_ketama_growth_and_down, 0, 2);
    tcase_add_test(tp, ring_ketama_refusals);
    suite_add_tcase(s, tp);
    return s;
}

int main(void)
{
    return tu_run(proxies_suite());
}
