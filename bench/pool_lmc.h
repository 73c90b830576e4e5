/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_lmc.h: bench_pool's libmemcached reference: its setup on the servers, the set-batch sentinels, and its checked gets, sets and multi-gets. */
#ifndef MCR_POOL_LMC_H
#define MCR_POOL_LMC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool_bench.h"

/* A libmemcached handle on W.mc (KETAMA_WEIGHTED md5, NO_BLOCK,
 * BUFFER_REQUESTS, TCP_NODELAY) and its one result; false (a FAIL line
 * printed when libmemcached refused a setting) when it cannot be had. */
bool lmc_setup(void);

/* The server libmemcached places `key` on (its index in W.mc). */
uint32_t lmc_server_of(const char *key, size_t len);

/* Picks a key on each server and stores it through W.p_direct: the
 * sentinels whose mget closes a batch of buffered sets. */
bool lmc_setup_sentinels(void);

/* Frees the handle and its result (nothing when lmc_setup() did not run). */
void lmc_free(void);

/* libmemcached's version string. */
const char *lmc_version(void);

/* Gets in batches of `depth` keys (one mget each); W.lat[i] for key i. */
void lmc_gets(size_t n, unsigned depth, checker *ck);

/* Sets in buffered batches of `depth` closed by a sentinel mget; each set's
 * latency is its batch's. */
void lmc_sets(size_t n, unsigned depth, checker *ck);

/* `total` multi-gets of opt.mget_keys keys one after the other;
 * W.lat[0..total). */
void lmc_multiget(size_t total, checker *ck);

#endif
