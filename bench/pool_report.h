/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_report.h: bench_pool's results: RESULT lines of the medians, GOAL and INFO lines, the table, the pools' counters. */
#ifndef MCR_POOL_REPORT_H
#define MCR_POOL_REPORT_H

#include <stdbool.h>

#include "mcroute_pool.h"

/* Takes the medians of every series of S that ran and prints its RESULT
 * line. */
void summarize(void);

/* The GOAL lines of the pool (text protocol) and the INFO lines of its
 * variants and of the ratios with no goal, from S's medians (after
 * summarize()). `phase_skipped`: --phase or --system left something out,
 * so a goal without data says NOT RUN rather than MISS. */
void goals(bool phase_skipped);

/* The medians of S as a table. */
void table(void);

/* INFO lines of `p`'s per-server counters (--verbose). */
void pool_info(mcr_pool *p, const char *name);

#endif
