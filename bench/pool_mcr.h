/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_mcr.h: bench_pool's mcroute side: pipelined gets and sets and multi-gets through an mcr_pool, and the pool's memory per request in flight. */
#ifndef MCR_POOL_MCR_H
#define MCR_POOL_MCR_H

#include <stdbool.h>
#include <stddef.h>

#include "mcroute_pool.h"
#include "pool_bench.h"

/* n requests (keys 0..n-1) through `pool`, sets of the current generation
 * or gets checked against it, `depth` in flight; with `batch`, in batches
 * of `depth` (libmemcached's way). Fills W.lat[0..n). */
void pool_pipeline(mcr_pool *pool, bool set, bool batch, size_t n, unsigned depth,
                   checker *ck);

/* `total` multi-gets of opt.mget_keys keys each, opt.mget_depth in flight;
 * W.lat[0..total). */
void pool_multiget(mcr_pool *pool, size_t total, checker *ck);

/* Prints the INFO line of W.p_direct's heap bytes per get and per
 * multi-get in flight (untimed; a failure counts in `failures`). */
void memory_info(mcr_pool *pool);

#endif
