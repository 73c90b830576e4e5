/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_twem_util.c: what test_compat_twem_parse.c and test_compat_twemproxy.c share (test_compat_twem_util.h). */
#include <stdio.h>

#include "test_compat_twem_util.h"
#include "testutil.h"

char *g_dir; /* the suite's temporary directory (tu_tmpdir), or NULL */

void make_dir(void)
{
    if (g_dir == NULL)
        g_dir = tu_tmpdir("twem");
}

/* With MCR_TEST_KEEP=1, tu_tmpdir_free() keeps it and prints its path. */
void remove_dir(void)
{
    tu_tmpdir_free(g_dir);
    g_dir = NULL;
}

/* nutcracker 0.5.0's "crc16" (hash_crc16 in src/hashkit/nc_crc16.c), as
 * its placement shows (test_live_hash proves it on every run): the XMODEM
 * table (polynomial 0x1021, initial value 0, MSB first), but the
 * accumulator is a uint32_t that is never cut to 16 bits, so the hash is
 * (hi(x[n-2]) << 24) | (hi(x[n-1]) << 16) | x[n] where x[i] is the 16-bit
 * CRC of the first i bytes and hi(v) = v >> 8: a 32-bit value whose low
 * half is the CRC-16. */
uint32_t nc_crc16(const void *data, size_t len)
{
    static uint16_t table[256];
    const unsigned char *p = data;
    uint32_t crc = 0;

    if (table[1] == 0)
        for (unsigned i = 0; i < 256; i++) {
            unsigned c = i << 8;
            for (int b = 0; b < 8; b++)
                c = (c & 0x8000) ? (c << 1) ^ 0x1021 : c << 1;
            table[i] = (uint16_t)c;
        }
    for (size_t i = 0; i < len; i++)
        crc = (crc << 8) ^ table[((crc >> 8) ^ p[i]) & 0xff];
    return crc;
}

/* ================================================================== vectors */

/* Fixed placements, observed through nutcracker 0.5.0 (test_live_vectors
 * checks them against it on every run): three named servers alpha (weight
 * 1), beta (2) and gamma (1); each pool one hash, ketama; the last pool
 * modula with fnv1a_64. */
const char *const vec_keys[] = {"foo",       "bar",     "baz",     "qux",
                                "user:1000", "user:1001", "session:{abc}",
                                "mcroute",   "twemproxy", "k"};
static const char *const vec_names[] = {"alpha", "beta", "gamma"};
static const uint32_t vec_weights[] = {1, 2, 1};

const vec_pool vec_pools[] = {
    {"one_at_a_time", "ketama", NULL,
     {"alpha", "beta", "gamma", "alpha", "gamma", "beta", "alpha", "beta", "beta", "beta"}},
    {"md5", "ketama", NULL,
     {"beta", "beta", "alpha", "gamma", "beta", "alpha", "beta", "alpha", "gamma", "alpha"}},
    {"crc16", "ketama", NULL,
     {"gamma", "beta", "beta", "gamma", "beta", "beta", "gamma", "gamma", "alpha", "alpha"}},
    {"crc32", "ketama", NULL,
     {"alpha", "alpha", "alpha", "alpha", "alpha", "alpha", "alpha", "alpha", "alpha", "alpha"}},
    {"crc32a", "ketama", NULL,
     {"alpha", "beta", "alpha", "alpha", "alpha", "beta", "gamma", "gamma", "beta", "gamma"}},
    {"fnv1_64", "ketama", NULL,
     {"alpha", "alpha", "alpha", "alpha", "gamma", "gamma", "beta", "gamma", "alpha", "gamma"}},
    {"fnv1a_64", "ketama", NULL,
     {"gamma", "gamma", "gamma", "gamma", "beta", "beta", "gamma", "gamma", "alpha", "gamma"}},
    {"fnv1_32", "ketama", NULL,
     {"beta", "alpha", "alpha", "beta", "alpha", "alpha", "beta", "beta", "beta", "beta"}},
    {"fnv1a_32", "ketama", NULL,
     {"beta", "gamma", "alpha", "alpha", "alpha", "gamma", "gamma", "beta", "beta", "gamma"}},
    {"hsieh", "ketama", NULL,
     {"beta", "beta", "beta", "beta", "beta", "beta", "beta", "beta", "beta", "alpha"}},
    {"murmur", "ketama", NULL,
     {"alpha", "alpha", "gamma", "beta", "gamma", "gamma", "gamma", "beta", "beta", "gamma"}},
    {"jenkins", "ketama", NULL,
     {"gamma", "gamma", "gamma", "beta", "beta", "gamma", "beta", "beta", "beta", "beta"}},
    {"fnv1a_64", "ketama", "{}",
     {"gamma", "gamma", "gamma", "gamma", "beta", "beta", "beta", "gamma", "alpha", "gamma"}},
    {"fnv1a_64", "modula", NULL,
     {"gamma", "alpha", "alpha", "beta", "beta", "alpha", "gamma", "alpha", "alpha", "alpha"}},
};

const char *v_want(size_t pool, size_t key)
{
    return vec_pools[pool].want[key];
}

/* The YAML of vector pool i, its servers at the given "host:port" texts. */
size_t vec_pool_yaml(char *out, size_t cap, size_t i, const char *name, int listen_port,
                     const char *const hostports[3])
{
    const vec_pool *v = &vec_pools[i];
    size_t n = (size_t)snprintf(out, cap,
                                "%s:\n  listen: 127.0.0.1:%d\n  hash: %s\n  distribution: %s\n"
                                "  timeout: 5000\n",
                                name, listen_port, v->hash, v->dist);
    if (v->tag != NULL)
        n += (size_t)snprintf(out + n, cap - n, "  hash_tag: \"%s\"\n", v->tag);
    n += (size_t)snprintf(out + n, cap - n, "  servers:\n");
    for (int s = 2; s >= 0; s--) /* file order differs from nutcracker's */
        n += (size_t)snprintf(out + n, cap - n, "   - %s:%u %s\n", hostports[s],
                              (unsigned)vec_weights[s], vec_names[s]);
    return n;
}
