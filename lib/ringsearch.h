/* SPDX-License-Identifier: BSD-3-Clause */
/* ringsearch.h: the search structure over a continuum's sorted points (which point owns a hash), for ring.c; never installed. */
#ifndef MCR_RINGSEARCH_H
#define MCR_RINGSEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/*
 * Every ring has a bucket index: bucket b = h >> shift, index[b] the first
 * point whose value is >= b << shift, so a key's point lies in
 * [index[b], index[b + 1]] and the search reads the index, then the points.
 * On a small ring both arrays stay in the caches. On a large one (10,000
 * servers: 1.6 M points, 12.6 MB, plus the index) they do not, and those
 * two reads are two dependent cache and TLB misses, 5x the cost of the key's
 * MD5 on this machine (issue 16).
 *
 * Large rings therefore also get lines: one 64-byte cache line per bucket
 * that holds what a lookup needs, the low 16 bits of the bucket's values
 * (its high bits are the bucket number) and their servers, and after them
 * the owner of the next point (the next bucket's first, or the wrap to
 * point 0): a lookup counts the values below the hash and reads the server
 * at that count, one line and no other memory. The lines are allocated on
 * transparent huge pages (2 MiB) where the kernel has them, so that the TLB
 * covers them. A bucket with more points than a line holds (about 0.1 to 1%
 * of them at the load chosen) is marked, and resolved by the index.
 */

/* Points per line, of which the last slot is always padding (so a count
 * of the values below a hash stays < MCR__LINE_SLOTS). */
#define MCR__LINE_SLOTS 16
/* server[] of a bucket too full for its line. */
#define MCR__LINE_FULL 0xffffu

typedef struct mcr__ring_line {
    /* value & mask of the bucket's points, ascending, then 0xffff: padding
     * is never below a hash, and a point whose low bits are 0xffff is
     * counted as padding would be, which gives the same answer */
    uint16_t low[MCR__LINE_SLOTS];
    /* server[i]: the owner of a hash that i of low[] lie below */
    uint16_t server[MCR__LINE_SLOTS];
} __attribute__((aligned(64))) mcr__ring_line;

typedef struct mcr__search {
    uint32_t *index;  /* 2^(32 - shift) + 1 entries */
    unsigned shift;   /* 32 - bucket bits */
    uint32_t mask;    /* (1 << shift) - 1 with lines (shift <= 16) */
    mcr__ring_line *lines; /* large rings: one per bucket; else NULL */
    size_t nlines;
} mcr__search;

/* Index `n` points `pts` (sorted by value, followed by MCR__RING_PAD
 * sentinels {UINT32_MAX, owner of pts[0]}), checking on the way what the
 * lookups rely on: values ascending, servers < nservers. Lines are built
 * when n is large enough and nservers fits their 16-bit servers. On error
 * *s holds what was allocated (mcr__search_free frees it). MCR_OK,
 * MCR_ERR_NOMEM, or MCR_ERR_INVALID (with `err` filled) for a broken
 * continuum. */
int mcr__search_build(mcr__search *s, const mcr__point *pts, size_t n, uint32_t nservers,
                      mcr_error *err);
/* Frees what mcr__search_build allocated; *s may be all zero. */
void mcr__search_free(mcr__search *s);

/* How many of a line's values lie below the low part `hl` of a hash: a
 * fixed loop the compiler turns into vector compares. */
static inline uint32_t mcr__line_rank(const mcr__ring_line *l, uint32_t hl)
{
    uint32_t c = 0;
    for (int i = 0; i < MCR__LINE_SLOTS; i++)
        c += (uint32_t)(l->low[i] < hl);
    return c;
}

/* The first point with value >= h: an index in [0, n], n being the first
 * sentinel, which carries the wrap to point 0. */
static inline uint32_t mcr__search_index(const mcr__search *s, const mcr__point *p, uint32_t h)
{
    uint32_t b = h >> s->shift;
    uint32_t lo = s->index[b], hi = s->index[b + 1];

    if (s->lines != NULL && hi - lo < MCR__LINE_SLOTS)
        return lo + mcr__line_rank(&s->lines[b], h & s->mask);
    if (MCR__LIKELY(hi - lo <= MCR__RING_PAD)) {
        /* points from hi on are >= h (or sentinels): count those below h */
        _Static_assert(MCR__RING_PAD == 4, "the count reads exactly four points");
        lo += (uint32_t)(p[lo].value < h) + (uint32_t)(p[lo + 1].value < h) +
              (uint32_t)(p[lo + 2].value < h) + (uint32_t)(p[lo + 3].value < h);
    } else {
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (p[mid].value < h)
                lo = mid + 1;
            else
                hi = mid;
        }
    }
    return lo;
}

/* mcr__search_server on a ring with lines (ringsearch.c): out of line, so
 * that the small rings' inlined path stays as short as it was; a call is
 * nothing next to the large ring's cache miss. */
uint32_t mcr__search_server_lines(const mcr__search *s, const mcr__point *p, uint32_t h);

/* The server of the first point >= h, wrapping (the successor rule). */
static inline uint32_t mcr__search_server(const mcr__search *s, const mcr__point *p, uint32_t h)
{
    if (MCR__UNLIKELY(s->lines != NULL))
        return mcr__search_server_lines(s, p, h);
    return p[mcr__search_index(s, p, h)].server;
}

/* Start loading what mcr__search_server(s, p, h) reads first. */
static inline void mcr__search_prefetch(const mcr__search *s, uint32_t h)
{
    if (s->lines != NULL)
        __builtin_prefetch(&s->lines[h >> s->shift]);
    else
        __builtin_prefetch(&s->index[h >> s->shift]);
}

#endif
