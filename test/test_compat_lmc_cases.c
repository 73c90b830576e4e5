/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_lmc_cases.c: mcr_lmc against the real libmemcached 1.1.4 on written cases: fixed vectors, scripted state machines, IPv6 hosts, and rings past the reference's 100 servers. */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute_libmemcached.h"
#include "test_compat_lmc_util.h"
#include "testutil.h"

/* ------------------------------------------------------------------ fixed vectors */

static void check_vector(const char *opts, int b1, uint64_t v1, int b2, uint64_t v2,
                         const uint32_t want[8])
{
    static const char *const keys[8] = {"user:1", "user:2", "user:3", "session:abcdef",
                                        "a", "the quick brown fox", "k42", "x"};
    mcr_lmc *l = mcr_lmc_new();
    mcr_ring *ring = NULL;
    mcr_error e;
    ck_assert_msg(mcr_lmc_parse_options(l, opts, &e) == MCR_OK, "%s", e.message);
    if (b1 >= 0)
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)b1, v1, &e), MCR_OK);
    if (b2 >= 0)
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)b2, v2, &e), MCR_OK);
    ck_assert_int_eq(mcr_lmc_ring(l, &ring, &e), MCR_OK);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(mcr_ring_locate(ring, keys[i], strlen(keys[i])) == want[i],
                      "%s: key %s: got %u, want %u", opts, keys[i],
                      (unsigned)mcr_ring_locate(ring, keys[i], strlen(keys[i])),
                      (unsigned)want[i]);
    mcr_ring_free(ring);
    mcr_lmc_free(l);
}

/* Expected indices written down from libmemcached 1.1.4 (Debian 1.1.4-1). */
START_TEST(fixed_vectors)
{
    static const uint32_t v1[8] = {0, 1, 2, 1, 2, 2, 3, 0};
    static const uint32_t v2[8] = {3, 3, 3, 3, 3, 1, 0, 2};
    static const uint32_t v3[8] = {3, 1, 3, 0, 2, 1, 2, 1};
    static const uint32_t v4[8] = {1, 0, 3, 3, 3, 1, 2, 0};
    static const uint32_t v5[8] = {3, 0, 1, 2, 3, 1, 3, 1};
    const char *four = "--SERVER=10.0.1.1 --SERVER=10.0.1.2:11212 "
                       "--SERVER=cache-3.example.com --SERVER=cache-4.example.com:22122";
    char o[512];

    /* labels valued with one-at-a-time (the hash at the rebuild), keys
     * with fnv1a_32 */
    snprintf(o, sizeof(o), "%s --DISTRIBUTION=consistent --HASH=fnv1a_32", four);
    check_vector(o, -1, 0, -1, 0, v1);
    /* the other order: both with fnv1a_32 */
    snprintf(o, sizeof(o), "--HASH=fnv1a_32 %s --DISTRIBUTION=consistent", four);
    check_vector(o, -1, 0, -1, 0, v2);
    check_vector("--SERVER=10.0.1.1/?1 --SERVER=10.0.1.2:11212/?3 "
                 "--SERVER=cache-3.example.com/?2 --SERVER=cache-4.example.com:22122/?5",
                 MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1, -1, 0, v3);
    snprintf(o, sizeof(o), "%s --HASH=crc", four);
    check_vector(o, -1, 0, -1, 0, v4);
    snprintf(o, sizeof(o), "%s --NAMESPACE=\"app1:\" --HASH-WITH-NAMESPACE --SORT-HOSTS", four);
    check_vector(o, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY,
                 MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_MURMUR3, v5);
}
END_TEST

/* ------------------------------------------------------------------ state machine */

/* Build both sides from an option string and API steps written as text,
 * and compare on keys. Steps: "B<behavior>=<value>" or "A<host>:<port>/<w>". */
static void check_script(const char *opts, const char *const *steps, size_t nsteps)
{
    tu_rng r;
    memcached_st *m = opts ? memcached(opts, strlen(opts)) : memcached_create(NULL);
    mcr_lmc *l = mcr_lmc_new();
    mcr_ring *ring = NULL;
    mcr_error e;

    tu_rng_init(&r, 31);
    ck_assert_msg(m != NULL, "libmemcached refused %s", opts);
    if (opts)
        ck_assert_msg(mcr_lmc_parse_options(l, opts, &e) == MCR_OK, "%s", e.message);
    for (size_t i = 0; i < nsteps; i++) {
        if (steps[i][0] == 'B') {
            int b;
            unsigned long long v;
            ck_assert(sscanf(steps[i] + 1, "%d=%llu", &b, &v) == 2);
            ck_assert_int_eq(memcached_behavior_set(m, (memcached_behavior_t)b, v), MEMCACHED_SUCCESS);
            ck_assert_msg(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)b, v, &e) == MCR_OK, "%s",
                          e.message);
        } else {
            char host[128];
            int port;
            unsigned w;
            ck_assert(sscanf(steps[i] + 1, "%127[^:]:%d/%u", host, &port, &w) == 3);
            ck_assert_int_eq(memcached_server_add_with_weight(m, host, (in_port_t)port, w),
                             MEMCACHED_SUCCESS);
            ck_assert_msg(mcr_lmc_add_server(l, host, port, w, &e) == MCR_OK, "%s", e.message);
        }
    }
    ck_assert_msg(mcr_lmc_ring(l, &ring, &e) == MCR_OK, "%s", e.message);
    compare_keys(&r, m, ring, 20000, true, opts ? opts : "(script)");
    mcr_ring_free(ring);
    mcr_lmc_free(l);
    memcached_free(m);
}

#define B(b, v) "B" #b "=" #v
START_TEST(state_machine_cases)
{
    const char *base = "--SERVER=zeta.example --SERVER=alpha.example:11300 "
                       "--SERVER=alpha.example:11299 --SERVER=mid.example";
    /* SORT_HOSTS sorts in modula too, and the order stays after turning it
     * off: later servers are appended after the sorted ones. */
    const char *s1[] = {B(12, 1), B(12, 0), "Aaaa.example:11211/1"};
    check_script(base, s1, 3);
    /* The same with adds while sorting, a weight turning weighting on, and
     * sorting turned on again (mcr_lmc defers the sort; the order must be
     * libmemcached's at every step). */
    const char *s10[] = {B(12, 1), "Abbb.example:11211/1", B(9, 1), "Aaab.example:11300/1",
                         B(12, 0), "Aaaa.example:11211/2", "A0ne.example:11211/1",
                         B(2, 5), B(12, 1), "Accc.example:11211/1", B(12, 0),
                         "Aaaa.example:11212/1"};
    check_script(base, s10, 12);
    check_script("--SORT-HOSTS --SERVER=zeta.example --SERVER=alpha.example:11300 "
                 "--DISTRIBUTION=consistent --SERVER=alpha.example:11299 --SERVER=mid.example",
                 s1, 3);
    /* KETAMA_WEIGHTED=0 means KETAMA=1: consistent ketama, weighting off. */
    const char *s2[] = {"Aw1.example:11211/3", B(16, 1), B(16, 0)};
    check_script(base, s2, 3);
    /* Weighting survives MODULA and applies again under SPY. */
    const char *s3[] = {B(16, 1), B(9, 0), B(9, 4), "Aw2.example:5000/9"};
    check_script(base, s3, 4);
    /* KETAMA=0 keeps the weighting flag; weight 0 is stored as 1. */
    const char *s4[] = {B(9, 5), B(3, 0), "Aw3.example:11211/0", B(9, 4)};
    check_script(base, s4, 4);
    /* HASH after the last rebuild only changes the key hash... */
    const char *s5[] = {B(9, 1), B(2, 6)};
    check_script(base, s5, 2);
    /* ...KETAMA_HASH changes nothing, SORT_HOSTS=0 still rebuilds. */
    const char *s6[] = {B(9, 1), B(2, 6), B(17, 2), B(12, 0)};
    check_script(base, s6, 4);
    /* HASH_WITH_PREFIX_KEY without a namespace: keys over 250 bytes hash to 0. */
    const char *s7[] = {B(25, 1), B(9, 2)};
    check_script(base, s7, 2);
    const char *s9[] = {B(9, 1)};
    check_script("--SERVER=abc --HASH=md5 RESET --SERVER=def.example --SERVER=ghi.example",
                 s9, 1);
    check_script("--SERVER=abc.example END --this is ignored", NULL, 0);
    check_script("# a comment\n --SERVER=abc.example \n# another\n --SERVER=1.2.3.4:5/?2 "
                 "--DISTRIBUTION=consistent",
                 NULL, 0);
    check_script("--SERVER=abc.example:0 --SERVER=def.example/?0 --DISTRIBUTION=consistent,crc "
                 "--HASH=murmur",
                 NULL, 0);
    check_script("--BINARY-PROTOCOL --NAMESPACE=\"name space\" --HASH-WITH-NAMESPACE "
                 "--SERVER=abc.example --SERVER=def.example",
                 NULL, 0);
    check_script("--NAMESPACE=L\"xy\" --HASH-WITH-NAMESPACE --SERVER=abc.example "
                 "--SERVER=def.example --HASH=jenkins",
                 NULL, 0);
}
END_TEST

/* IPv6 hosts through the API (the option language cannot express them). */
START_TEST(ipv6_api)
{
    static const char *const hosts[] = {"::1", "fe80::1", "2001:db8::7", "10.1.1.1"};
    for (int dist = 0; dist < 6; dist++) {
        if (dist == MEMCACHED_DISTRIBUTION_RANDOM)
            continue;
        tu_rng r;
        memcached_st *m = memcached_create(NULL);
        mcr_lmc *l = mcr_lmc_new();
        mcr_ring *ring = NULL;
        tu_rng_init(&r, 40 + (uint64_t)dist);
        memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, (uint64_t)dist);
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                              (uint64_t)dist, NULL),
                         MCR_OK);
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(memcached_server_add_with_weight(m, hosts[i], (in_port_t)(11211 + i), (uint32_t)i + 1),
                             MEMCACHED_SUCCESS);
            ck_assert_int_eq(mcr_lmc_add_server(l, hosts[i], 11211 + i, (uint32_t)i + 1, NULL), MCR_OK);
        }
        ck_assert_int_eq(mcr_lmc_ring(l, &ring, NULL), MCR_OK);
        compare_keys(&r, m, ring, 5000, false, "ipv6");
        mcr_ring_free(ring);
        mcr_lmc_free(l);
        memcached_free(m);
    }
}
END_TEST

/* ------------------------------------------------------------------ beyond the reference */

/* More servers than libmemcached can handle in the consistent modes: no
 * reference, but the ring must build and place every key on a server. */
START_TEST(many_servers)
{
    static const int dists[] = {MEMCACHED_DISTRIBUTION_MODULA, MEMCACHED_DISTRIBUTION_CONSISTENT,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED};
    tu_rng r;
    tu_rng_init(&r, 60);
    for (size_t d = 0; d < sizeof(dists) / sizeof(dists[0]); d++) {
        const int n = 1500;
        mcr_lmc *l = mcr_lmc_new();
        mcr_ring *ring = NULL;
        mcr_error e;
        /* half through one option string, half through the API */
        char *opts = malloc((size_t)n * 48);
        size_t o = 0;
        for (int i = 0; i < n / 2; i++)
            o += (size_t)sprintf(opts + o, "%s--SERVER=node%d.example:%d/?%d", i ? " " : "", i,
                                 11211 + i % 5, 1 + i % 4);
        ck_assert_int_eq(mcr_lmc_parse_options(l, opts, &e), MCR_OK);
        free(opts);
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                              (uint64_t)dists[d], &e),
                         MCR_OK);
        for (int i = n / 2; i < n; i++) {
            char host[32];
            snprintf(host, sizeof(host), "10.%d.%d.%d", i / 65536, (i / 256) % 256, i % 256);
            ck_assert_int_eq(mcr_lmc_add_server(l, host, 11211, (uint32_t)(1 + i % 3), &e), MCR_OK);
        }
        ck_assert_int_eq(mcr_lmc_ring(l, &ring, &e), MCR_OK);
        ck_assert_uint_eq(mcr_ring_server_count(ring), (size_t)n);
        if (dists[d] == MEMCACHED_DISTRIBUTION_MODULA)
            ck_assert_uint_eq(mcr_ring_point_count(ring), 0);
        else if (dists[d] == MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED)
            ck_assert(mcr_ring_point_count(ring) > (size_t)n * 150);
        else /* the string's weights > 1 turned weighting on, except after CONSISTENT */
            ck_assert(mcr_ring_point_count(ring) >= (size_t)n * 100);
        size_t hit[1500] = {0};
        for (int k = 0; k < 200000; k++) {
            unsigned char key[320];
            size_t len = gen_key(&r, key, false);
            uint32_t s = mcr_ring_locate(ring, key, len);
            EXPECT_UINT(s, <, (uint32_t)n);
            hit[s]++;
        }
        size_t used = 0;
        for (int i = 0; i < n; i++)
            used += hit[i] != 0;
        ck_assert_msg(used > (size_t)n * 9 / 10, "only %zu of %d servers got keys", used, n);
        mcr_ring_free(ring);
        mcr_lmc_free(l);
    }
}
END_TEST

/* True if servers [from, to) of the ring are in SORT_HOSTS order. */
static bool sorted_range(const mcr_ring *ring, size_t from, size_t to)
{
    for (size_t i = from + 1; i < to; i++) {
        int c = strcmp(mcr_ring_server_host(ring, i - 1), mcr_ring_server_host(ring, i));
        if (c > 0 || (c == 0 && mcr_ring_server_port(ring, i - 1) >= mcr_ring_server_port(ring, i)))
            return false;
    }
    return true;
}

/* SORT_HOSTS with 10,000 servers (libmemcached re-sorts at every add; so
 * must the result, not the cost): through one option string, and through
 * SORT_HOSTS=1 then API adds, then SORT_HOSTS=0 and more adds, which go
 * after the sorted ones. */
START_TEST(many_servers_sorted)
{
    const int n = 10000;
    char *opts = malloc((size_t)n * 48 + 64);
    size_t o = (size_t)sprintf(opts, "--SORT-HOSTS --DISTRIBUTION=consistent");
    mcr_lmc *l = mcr_lmc_new();
    mcr_ring *ring = NULL;
    mcr_error e;

    ck_assert(opts != NULL && l != NULL);
    for (int i = 0; i < n; i++) /* a scrambled order, several ports per host */
        o += (size_t)sprintf(opts + o, " --SERVER=node%d.example:%d", (i * 7919) % (n / 2),
                             11211 + (i * 7919) / (n / 2) % n);
    ck_assert_msg(mcr_lmc_parse_options(l, opts, &e) == MCR_OK, "%s", e.message);
    free(opts);
    ck_assert_msg(mcr_lmc_ring(l, &ring, &e) == MCR_OK, "%s", e.message);
    ck_assert_uint_eq(mcr_ring_server_count(ring), (size_t)n);
    ck_assert_uint_eq(mcr_ring_point_count(ring), (size_t)n * 100);
    ck_assert(sorted_range(ring, 0, (size_t)n));
    for (int k = 0; k < 1000; k++) {
        char key[16];
        int len = snprintf(key, sizeof(key), "k%d", k);
        ck_assert_uint_lt(mcr_ring_locate(ring, key, (size_t)len), (uint32_t)n);
    }
    /* the same placement as mcroute's own sort of the same servers */
    mcr_config *cfg = NULL;
    mcr_ring *ring2 = NULL;
    ck_assert_int_eq(mcr_lmc_config(l, &cfg, NULL), MCR_OK);
    ck_assert_int_eq(mcr_config_sort_servers(cfg), MCR_OK);
    ck_assert_int_eq(mcr_ring_new(cfg, &ring2, NULL), MCR_OK);
    for (size_t i = 0; i < (size_t)n; i += 97)
        ck_assert_str_eq(mcr_ring_server_name(ring, i), mcr_ring_server_name(ring2, i));
    mcr_ring_free(ring2);
    mcr_config_free(cfg);
    mcr_ring_free(ring);
    mcr_lmc_free(l);

    l = mcr_lmc_new();
    ck_assert_int_eq(mcr_lmc_set_behavior(l, MCR_LMC_SORT_HOSTS, 1, NULL), MCR_OK);
    for (int i = 0; i < n; i++) {
        char host[32];
        snprintf(host, sizeof(host), "10.%d.%d.%d", (i * 7919) % n / 65536, (i * 7919) % n / 256 % 256,
                 (i * 7919) % n % 256);
        ck_assert_int_eq(mcr_lmc_add_server(l, host, 11211, 1, &e), MCR_OK);
    }
    ck_assert_int_eq(mcr_lmc_set_behavior(l, MCR_LMC_DISTRIBUTION, MCR_LMC_DIST_CONSISTENT_KETAMA_SPY, NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_set_behavior(l, MCR_LMC_SORT_HOSTS, 0, NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_add_server(l, "zz.example", 11211, 1, &e), MCR_OK);
    ck_assert_int_eq(mcr_lmc_add_server(l, "00.example", 11211, 1, &e), MCR_OK);
    ck_assert_int_eq(mcr_lmc_add_server(l, "10.0.0.0", 11211, 1, &e), MCR_ERR_DUPLICATE);
    ck_assert_msg(mcr_lmc_ring(l, &ring, &e) == MCR_OK, "%s", e.message);
    ck_assert_uint_eq(mcr_ring_server_count(ring), (size_t)n + 2);
    ck_assert_uint_eq(mcr_ring_point_count(ring), ((size_t)n + 2) * 100);
    ck_assert(sorted_range(ring, 0, (size_t)n));
    ck_assert_str_eq(mcr_ring_server_host(ring, 0), "10.0.0.0");
    ck_assert_str_eq(mcr_ring_server_host(ring, (size_t)n), "zz.example");
    ck_assert_str_eq(mcr_ring_server_host(ring, (size_t)n + 1), "00.example");
    for (int k = 0; k < 1000; k++) {
        char key[16];
        int len = snprintf(key, sizeof(key), "k%d", k);
        ck_assert_uint_lt(mcr_ring_locate(ring, key, (size_t)len), (uint32_t)n + 2);
    }
    mcr_ring_free(ring);
    mcr_lmc_free(l);
}
END_TEST

static Suite *compat_suite(void)
{
    Suite *s = suite_create("compat_lmc_cases");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, fixed_vectors);
    tcase_add_test(t, state_machine_cases);
    tcase_add_test(t, ipv6_api);
    tcase_add_test(t, many_servers);
    tcase_add_test(t, many_servers_sorted);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(compat_suite());
}
