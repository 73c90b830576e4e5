/* SPDX-License-Identifier: BSD-3-Clause */
/* ringsearch.c: building a continuum's search structure (bucket index, and for large rings packed points, on huge pages from 2 MiB up). */
#define _DEFAULT_SOURCE /* madvise() beside _POSIX_C_SOURCE */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ringsearch.h"

/* Largest bucket index: 2^22 buckets (16 MiB) is plenty for 1.6 M points. */
#define INDEX_BITS_MAX 22
/* Rings with fewer points keep the index alone: up to here (about 1,600
 * servers of libmemcached's weighted mode) index and points take 2.3 MiB,
 * which the caches of this machine (1 MiB L2, a large L3) mostly hold,
 * and 16-bit low parts need 2^16 buckets or more. */
#define PACK_MIN_POINTS ((size_t)1 << 18)
/* Mean packed points per bucket at most: the fewest buckets with at most
 * this many points each on average (so 12.5 to 25). More buckets mean a
 * larger index, which stops staying in L2; fewer, more buckets of over 32
 * points (a bucket's count is about Poisson: about 5% of them at 25),
 * whose rest the count bisects. With 25, the weighted 10,000-
 * server ring (1.58 M points) has 2^16 buckets: a 128 KiB index. Measured
 * on that ring (a throwaway program, 21 interleaved rounds of 50,000
 * lookups of MD5 hashes): 2^16 buckets with 16-bit offsets 198-212 ns a
 * lookup, with 32-bit ones 227-242, 2^17 buckets (the load of 13 before)
 * with 16-bit offsets 228-240 and 32-bit ones 253-258. */
#define PACK_LOAD 25
/* Buckets per base of the packed index: 64, fewer when a group of them
 * holds more than 65,535 points (a 16-bit offset). */
#define PACK_GROUP_BITS 6
/* Transparent huge pages: an array at least this large is aligned to it
 * and advised (MADV_HUGEPAGE), so that a few TLB entries cover it. */
#define HUGE_PAGE ((size_t)2 << 20)

/* `bytes` for an array that random lookups read: from 2 MiB up, aligned to
 * a huge page and its whole huge pages advised (MADV_HUGEPAGE) where the
 * kernel gives them (THP "always" or "madvise"; harmless elsewhere), the
 * tail past the last whole one on normal pages: an index of 2^k + 1
 * entries takes no extra huge page for its one entry more. Smaller arrays
 * are cache-line aligned. NULL when out of memory. */
static void *alloc_lookup_array(size_t bytes)
{
    size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    void *p = NULL;

    if (posix_memalign(&p, align, bytes) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE) /* before the first touch */
        (void)madvise(p, bytes / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE);
#endif
    return p;
}

int mcr__search_build(mcr__search *s, const mcr__point *pts, size_t n, uint32_t nservers,
                      mcr_error *err)
{
    bool pack = n >= PACK_MIN_POINTS && nservers <= MCR__PACK_SERVERS_MAX;
    unsigned bits = 1;

    memset(s, 0, sizeof(*s));
    if (pack) {
        bits = 16;
        while (bits < INDEX_BITS_MAX && n > ((size_t)PACK_LOAD << bits))
            bits++;
    } else {
        while (bits < INDEX_BITS_MAX && ((size_t)1 << (bits + 1)) <= n)
            bits++;
    }
    size_t nb = (size_t)1 << bits;
    s->shift = 32 - bits;
    /* with packed points, a step to the compact index built below */
    s->index = malloc((nb + 1) * sizeof(*s->index));
    if (s->index == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for the continuum index");
    /* index[b], the first point whose bucket is >= b, is the number of
     * points in buckets below b: count the points of each bucket (into the
     * slot after it), then sum. No data-dependent branch, unlike walking
     * buckets and points together, whose mispredictions cost ~8x as much
     * (publishing a snapshot pays this for every build). */
    uint32_t *idx = s->index, sum = 0;
    uint32_t prev = 0, bad = 0;
    unsigned shift = s->shift;
    memset(idx, 0, (nb + 1) * sizeof(*idx));
    for (size_t i = 0; i < n; i++) {
        uint32_t v = pts[i].value;
        bad |= (uint32_t)(v < prev) | (uint32_t)(pts[i].server >= nservers);
        prev = v;
        idx[(v >> shift) + 1]++;
    }
    if (bad)
        return mcr__error(err, MCR_ERR_INVALID,
                          "internal error: continuum not sorted, or a point names no server");
    for (size_t b = 0; b <= nb; b++) {
        sum += idx[b];
        idx[b] = sum;
    }
    if (!pack)
        return MCR_OK;
    s->packed = alloc_lookup_array((n + MCR__PACK_PAD) * sizeof(*s->packed));
    if (s->packed == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu packed points", n);
    s->mask = ((uint32_t)1 << shift) - 1;
    for (size_t i = 0; i < n; i++)
        s->packed[i] = (pts[i].value & s->mask) << 16 | pts[i].server;
    /* after the last point, the owner of a hash above it: point 0's (the
     * first sentinel's server); never below a hash, never counted */
    for (size_t i = n; i < n + MCR__PACK_PAD; i++)
        s->packed[i] = UINT32_MAX << 16 | pts[n].server;
    /* The compact index: the widest groups whose offsets fit 16 bits (the
     * points of one group: about 1,600 for a hashed ring; a crafted one
     * may crowd a bucket). */
    unsigned g = PACK_GROUP_BITS;
    for (; g > 0; g--) {
        uint32_t most = 0;
        for (size_t b = 0; b <= nb; b++) {
            uint32_t d = idx[b] - idx[b >> g << g];
            most = d > most ? d : most;
        }
        if (most <= UINT16_MAX)
            break;
    }
    s->gbits = g;
    s->off = alloc_lookup_array((nb + 1) * sizeof(*s->off));
    s->base = malloc(((nb >> g) + 1) * sizeof(*s->base));
    if (s->off == NULL || s->base == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for the packed index");
    for (size_t b = 0; b <= nb; b += (size_t)1 << g)
        s->base[b >> g] = idx[b];
    for (size_t b = 0; b <= nb; b++)
        s->off[b] = (uint16_t)(idx[b] - s->base[b >> g]);
    free(s->index);
    s->index = NULL;
    return MCR_OK;
}

uint32_t mcr__search_server_packed(const mcr__search *s, uint32_t h)
{
    uint32_t b = h >> s->shift;
    uint32_t lo = mcr__pack_start(s, b), hi = mcr__pack_start(s, b + 1);

    return s->packed[lo + mcr__pack_rank(s->packed + lo, hi - lo, (h & s->mask) << 16)] &
           0xffffu;
}

void mcr__search_free(mcr__search *s)
{
    free(s->index);
    free(s->packed);
    free(s->off);
    free(s->base);
    s->index = NULL;
    s->packed = NULL;
    s->off = NULL;
    s->base = NULL;
}
