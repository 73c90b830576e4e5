/* SPDX-License-Identifier: BSD-3-Clause */
/* router_count.h: mcr_router_reclaim() as a count, for the suites that watch reclamation. */
#ifndef MCR_TEST_ROUTER_COUNT_H
#define MCR_TEST_ROUTER_COUNT_H

#include <check.h>
#include <stddef.h>

#include "mcroute_router.h"

/* Changes awaiting reclamation (MCR_ROUTER_PEEK: nothing freed). */
static inline size_t tu_router_retired(mcr_router *r)
{
    size_t n = 0;
    ck_assert_int_eq(mcr_router_reclaim(r, MCR_ROUTER_PEEK, &n), MCR_OK);
    return n;
}

/* Free what the NOWAIT writes replaced, when ready; the count left. */
static inline size_t tu_router_collect(mcr_router *r)
{
    size_t n = 0;
    ck_assert_int_eq(mcr_router_reclaim(r, MCR_ROUTER_NOWAIT, &n), MCR_OK);
    return n;
}

#endif
