/* SPDX-License-Identifier: BSD-3-Clause */
/* test_proxies.c: Check suite of the proxies' placements (--client mcrouter-ch3, memcached-proxy-jump): the projects' own test vectors, and the properties each algorithm promises on random configurations. */
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

static Suite *proxies_suite(void)
{
    Suite *s = suite_create("proxies");
    TCase *tv = tcase_create("vectors");
    tcase_add_test(tv, jump_reference_vectors);
    tcase_add_test(tv, furc_mcrouter_vectors);
    tcase_add_test(tv, mcrouter_routing_keys);
    tcase_add_test(tv, ch3_ring_vectors);
    suite_add_tcase(s, tv);

    TCase *tp = tcase_create("properties");
    tcase_set_timeout(tp, 600);
    tcase_add_loop_test(tp, random_growth, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, random_balance, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, random_snapshots, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, refusals, 0, (int)NPROXIES);
    suite_add_tcase(s, tp);
    return s;
}

int main(void)
{
    return tu_run(proxies_suite());
}
