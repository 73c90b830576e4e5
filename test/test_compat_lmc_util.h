/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_lmc_util.h: what test_compat_libmemcached.c, test_compat_lmc_options.c and test_compat_lmc_cases.c share: random keys, the key-by-key comparison with libmemcached, the counts, option-string appending. */
#ifndef MCR_TEST_COMPAT_LMC_UTIL_H
#define MCR_TEST_COMPAT_LMC_UTIL_H

#include <libmemcached/memcached.h>
#include <stdbool.h>
#include <stddef.h>

#include "mcroute.h"
#include "testutil.h"

/* The size of an option string buffer (append() keeps within it). */
#define OPTS_MAX 16384

/* Counts of the current test (each test runs in its own process). */
extern size_t g_keys, g_configs;

void print_counts(const char *test);

/* Append s at offset o of buf (OPTS_MAX bytes); returns the new end. */
size_t append(char *buf, size_t o, const char *s);

/* A random key: printable or arbitrary bytes, 1..250 bytes, and with
 * `longer` sometimes up to 300 (libmemcached's prefixed-key limit). */
size_t gen_key(tu_rng *r, unsigned char *buf, bool longer);

/* Compare placement of `nkeys` random keys. Returns the number compared. */
size_t compare_keys(tu_rng *r, memcached_st *m, const mcr_ring *ring, size_t nkeys,
                    bool longer, const char *what);

#endif
