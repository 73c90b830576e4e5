/* SPDX-License-Identifier: BSD-3-Clause */
/* ringsearch.h: the search structure over a continuum's sorted points (which point owns a hash), for ring.c; never installed. */
#ifndef MCR_RINGSEARCH_H
#define MCR_RINGSEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "placement_internal.h"

/*
 * Every ring has a bucket index: bucket b = h >> shift, index[b] the first
 * point whose value is >= b << shift, so a key's point lies in
 * [index[b], index[b + 1]] and the search reads the index, then the points.
 * On a small ring both arrays stay in the caches. On a large one (10,000
 * servers: 1.6 M points of 8 bytes, 12.6 MB, and the index) they do not,
 * and those two reads are two dependent cache and TLB misses, 5x the cost
 * of the key's MD5 on this machine (issue 16).
 *
 * Large rings therefore also get a packed copy of the points, in the same
 * order: 4 bytes a point, (value & mask) << 16 | server, where value & mask
 * (the low 16 bits or fewer) is all that tells apart the points of one
 * bucket, and a compact index over them: bucket b starts at point
 * base[b >> gbits] + off[b], 16-bit offsets from a 32-bit base per group
 * of 2^gbits buckets (64, or fewer where a group holds more than 65,535
 * points). A lookup reads the bucket's start and the next one's, then
 * counts the packed points of the bucket below the hash: the entry after
 * them is the owner, whether it is the bucket's or the next one's, or the
 * sentinel after the last point (which carries the wrap to point 0's
 * server). For 1.58 M points that is 6.3 MB of points and 2^16 buckets of
 * about 24 points: 128 KiB of offsets and 4 KiB of bases, small enough to
 * stay in a core's 512 KiB L2 while the points' lines come and go, so
 * that a lookup misses once (the points) where a 512 KiB index of 32-bit
 * entries made it miss twice (measured: 200-210 ns a lookup against
 * 250-260 for the same hashes on the earlier layout, on a morning when the
 * host's memory was slow). Points of 2 MiB or more are allocated on
 * transparent huge pages where the kernel has them, so that a few TLB
 * entries cover them.
 */

/* Sentinels after the packed points: the count reads 32 entries from the
 * bucket's first, up to 32 past the last point. */
#define MCR__PACK_PAD 32
/* The most servers the packed points' 16-bit server numbers hold. */
#define MCR__PACK_SERVERS_MAX 65536u

typedef struct mcr__search {
    uint32_t *index;  /* 2^(32 - shift) + 1 entries; NULL with packed points */
    unsigned shift;   /* 32 - bucket bits */
    uint32_t mask;    /* (1 << shift) - 1 with packed points (shift <= 16) */
    uint32_t *packed; /* large rings: n + MCR__PACK_PAD entries; else NULL */
    uint16_t *off;    /* with packed: 2^(32 - shift) + 1 offsets, bucket b */
    uint32_t *base;   /* starting at base[b >> gbits] + off[b] */
    unsigned gbits;
} mcr__search;

/* Index `n` points `pts` (sorted by value, followed by MCR__RING_PAD
 * sentinels {UINT32_MAX, owner of pts[0]}), checking on the way what the
 * lookups rely on: values ascending, servers < nservers. The packed points
 * are built when n is large enough and nservers fits their 16 bits. On
 * error *s holds what was allocated (mcr__search_free frees it). MCR_OK,
 * MCR_ERR_NOMEM, or MCR_ERR_INVALID (with `err` filled) for a broken
 * continuum. */
int mcr__search_build(mcr__search *s, const mcr__point *pts, size_t n, uint32_t nservers,
                      mcr_error *err);
/* Frees what mcr__search_build allocated; *s may be all zero. */
void mcr__search_free(mcr__search *s);

/* The first packed point of bucket b (b up to the bucket count: the end). */
static inline uint32_t mcr__pack_start(const mcr__search *s, uint32_t b)
{
    return s->base[b >> s->gbits] + s->off[b];
}

/* How many of the m packed entries from e lie below `key` (the hash's low
 * part << 16): the first 32 in a fixed loop the compiler turns into vector
 * compares (the lanes past m masked off, no branch on m); the rest of a
 * bucket that holds more (about 5% of them at the load chosen, or a
 * crafted ring's crowd of thousands) by bisection, since a bucket's
 * entries are sorted (equal high bits, ascending low ones). */
static inline uint32_t mcr__pack_rank(const uint32_t *e, uint32_t m, uint32_t key)
{
    uint32_t c = 0;
    for (uint32_t k = 0; k < MCR__PACK_PAD; k++)
        c += (uint32_t)(k < m) & (uint32_t)(e[k] < key);
    if (MCR__UNLIKELY(m > MCR__PACK_PAD)) {
        uint32_t lo = MCR__PACK_PAD, hi = m;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (e[mid] < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        c += lo - MCR__PACK_PAD;
    }
    return c;
}

/* The first point with value >= h: an index in [0, n], n being the first
 * sentinel, which carries the wrap to point 0. */
static inline uint32_t mcr__search_index(const mcr__search *s, const mcr__point *p, uint32_t h)
{
    uint32_t b = h >> s->shift;

    if (s->packed != NULL) {
        uint32_t lo = mcr__pack_start(s, b), hi = mcr__pack_start(s, b + 1);
        return lo + mcr__pack_rank(s->packed + lo, hi - lo, (h & s->mask) << 16);
    }
    uint32_t lo = s->index[b], hi = s->index[b + 1];
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

/* mcr__search_server on a ring with packed points (ringsearch.c): out of
 * line, so that the small rings' inlined path stays as short as it was. */
uint32_t mcr__search_server_packed(const mcr__search *s, uint32_t h);

/* The server of the first point >= h, wrapping (the successor rule). */
static inline uint32_t mcr__search_server(const mcr__search *s, const mcr__point *p, uint32_t h)
{
    if (MCR__UNLIKELY(s->packed != NULL))
        return mcr__search_server_packed(s, h);
    return p[mcr__search_index(s, p, h)].server;
}

/* Start loading what mcr__search_server(s, p, h) reads first: its index
 * entries (with packed points, the bucket's offset; the bases are few). */
static inline void mcr__search_prefetch(const mcr__search *s, uint32_t h)
{
    if (s->packed != NULL)
        __builtin_prefetch(&s->off[h >> s->shift]);
    else
        __builtin_prefetch(&s->index[h >> s->shift]);
}

/* Then, some time after mcr__search_prefetch (its index entry loaded or on
 * the way), what it reads second on a ring with packed points: the
 * bucket's first ones. Nothing on other rings. */
static inline void mcr__search_prefetch_second(const mcr__search *s, uint32_t h)
{
    if (s->packed != NULL)
        __builtin_prefetch(&s->packed[mcr__pack_start(s, h >> s->shift)]);
}

#endif
