/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_twem_util.h: what test_compat_twem_parse.c and test_compat_twemproxy.c share: the suite's scratch directory, nutcracker's crc16, and the fixed vector pools (keys, placements, their YAML). */
#ifndef MCR_TEST_COMPAT_TWEM_UTIL_H
#define MCR_TEST_COMPAT_TWEM_UTIL_H

#include <stddef.h>
#include <stdint.h>

extern char *g_dir; /* the suite's temporary directory (tu_tmpdir), or NULL */

/* Make g_dir if it is not made yet. */
void make_dir(void);
/* With MCR_TEST_KEEP=1, tu_tmpdir_free() keeps it and prints its path. */
void remove_dir(void);

/* nutcracker 0.5.0's "crc16": the 16-bit XMODEM CRC in the low half, the
 * two previous high bytes above it (test_compat_twem_util.c says how). */
uint32_t nc_crc16(const void *data, size_t len);

/* The fixed vector pools (test_compat_twem_util.c): the keys, and for each
 * pool its hash, distribution, tag and the server nutcracker 0.5.0 puts each
 * key on. The sizes are given here, since the suites need them as
 * constants: a table with more entries draws a warning (an error with
 * MCR_WERROR), and test_vectors fails on one with fewer (the missing entry
 * is zero-filled). */
extern const char *const vec_keys[10];
#define NVEC_KEYS (sizeof(vec_keys) / sizeof(vec_keys[0]))

typedef struct vec_pool {
    const char *hash;
    const char *dist;
    const char *tag;
    const char *want[NVEC_KEYS]; /* the server name of each key */
} vec_pool;

extern const vec_pool vec_pools[14];
#define NVEC_POOLS (sizeof(vec_pools) / sizeof(vec_pools[0]))

/* The server name nutcracker puts key `key` of vector pool `pool` on. */
const char *v_want(size_t pool, size_t key);

/* The YAML of vector pool i, its servers at the given "host:port" texts. */
size_t vec_pool_yaml(char *out, size_t cap, size_t i, const char *name, int listen_port,
                     const char *const hostports[3]);

#endif
