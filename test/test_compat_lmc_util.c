/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_lmc_util.c: what test_compat_libmemcached.c, test_compat_lmc_options.c and test_compat_lmc_cases.c share (test_compat_lmc_util.h). */
#include <stdio.h>
#include <string.h>

#include "test_compat_lmc_util.h"
#include "testutil.h"

size_t g_keys, g_configs;

void print_counts(const char *test)
{
    printf("%s: %zu configurations, %zu keys compared\n", test, g_configs, g_keys);
    fflush(stdout);
}

size_t append(char *buf, size_t o, const char *s)
{
    size_t n = strlen(s);
    ck_assert_msg(o + n + 1 < OPTS_MAX, "option string too long");
    memcpy(buf + o, s, n + 1);
    return o + n;
}

/* A random key: printable or arbitrary bytes, 1..250 bytes, and with
 * `longer` sometimes up to 300 (libmemcached's prefixed-key limit). */
size_t gen_key(tu_rng *r, unsigned char *buf, bool longer)
{
    size_t max = longer && tu_below(r, 8) == 0 ? 300 : 250;
    if (tu_below(r, 2))
        return tu_key(r, (char *)buf, max);
    size_t len = 1 + tu_below(r, (uint32_t)max);
    tu_bytes(r, buf, len);
    if (tu_below(r, 4) == 0) /* NUL bytes matter with HASH_WITH_NAMESPACE */
        buf[tu_below(r, (uint32_t)len)] = 0;
    return len;
}

/* Compare placement of `nkeys` random keys. Returns the number compared. */
size_t compare_keys(tu_rng *r, memcached_st *m, const mcr_ring *ring, size_t nkeys,
                    bool longer, const char *what)
{
    unsigned char key[320];
    ck_assert_uint_eq(mcr_ring_server_count(ring), memcached_server_count(m));
    for (uint32_t i = 0; i < memcached_server_count(m); i++) {
        const memcached_instance_st *in = memcached_server_instance_by_position(m, i);
        ck_assert_msg(strcmp(mcr_ring_server_host(ring, i), memcached_server_name(in)) == 0 &&
                          mcr_ring_server_port(ring, i) == memcached_server_port(in),
                      "server %u: %s:%d vs libmemcached %s:%u; %s", (unsigned)i,
                      mcr_ring_server_host(ring, i), mcr_ring_server_port(ring, i),
                      memcached_server_name(in), (unsigned)memcached_server_port(in), what);
    }
    g_keys += nkeys;
    for (size_t k = 0; k < nkeys; k++) {
        size_t len = gen_key(r, key, longer);
        uint32_t want = memcached_generate_hash(m, (const char *)key, len);
        uint32_t got = mcr_ring_locate(ring, key, len);
        if (want != got) {
            char hex[700];
            for (size_t i = 0; i < len; i++)
                sprintf(hex + 2 * i, "%02x", key[i]);
            ck_abort_msg("key %s (%zu bytes): libmemcached %u, mcroute %u; %s", hex, len,
                         (unsigned)want, (unsigned)got, what);
        }
    }
    return nkeys;
}
