/* SPDX-License-Identifier: BSD-3-Clause */
/* ringsearch.c: building a continuum's search structure (bucket index, and for large rings one cache line per bucket on huge pages). */
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
#define LINES_MIN_POINTS ((size_t)1 << 18)
/* Mean points per line: the fewest buckets with at most this many points
 * each on average. With uniform values a bucket's count is about Poisson,
 * and P(more than 15) is 0.1% at a mean of 6, 0.8% at 8 (the worst case):
 * the rare full bucket costs a bisection in the points. */
#define LINE_LOAD 8
/* Transparent huge pages: an array at least this large is aligned to it
 * and advised (MADV_HUGEPAGE), so that a few TLB entries cover it. */
#define HUGE_PAGE ((size_t)2 << 20)

/* `bytes` for an array that random lookups read: on huge pages where the
 * kernel gives them (THP "always" or "madvise"); harmless elsewhere.
 * NULL when out of memory. */
static void *alloc_lookup_array(size_t bytes)
{
    size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    size_t size = (bytes + align - 1) / align * align;
    void *p = aligned_alloc(align, size);

    if (p == NULL)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE)
        (void)madvise(p, size, MADV_HUGEPAGE); /* before the first touch */
#endif
    return p;
}

/* One line per bucket from the index (s->index complete). */
static void build_lines(mcr__search *s, const mcr__point *pts)
{
    const uint32_t *idx = s->index;
    uint32_t mask = s->mask;

    for (size_t b = 0; b < s->nlines; b++) {
        mcr__ring_line *l = &s->lines[b];
        uint32_t lo = idx[b], hi = idx[b + 1];
        if (MCR__UNLIKELY(hi - lo >= MCR__LINE_SLOTS)) {
            memset(l->low, 0xff, sizeof(l->low)); /* every hash counts 0 ... */
            for (int i = 0; i < MCR__LINE_SLOTS; i++)
                l->server[i] = MCR__LINE_FULL; /* ... and finds the mark */
            continue;
        }
        /* Without branches on the count: slot i is point lo + i below hi,
         * then padding with the owner of point hi (the next bucket's first
         * point, or a sentinel: point 0's owner). */
        for (uint32_t i = 0; i < MCR__LINE_SLOTS; i++) {
            uint32_t j = lo + i, in = j < hi, k = in ? j : hi;
            l->low[i] = (uint16_t)(in ? pts[k].value & mask : 0xffffu);
            l->server[i] = (uint16_t)pts[k].server;
        }
    }
}

int mcr__search_build(mcr__search *s, const mcr__point *pts, size_t n, uint32_t nservers,
                      mcr_error *err)
{
    bool lines = n >= LINES_MIN_POINTS && nservers < MCR__LINE_FULL;
    unsigned bits = 1;

    memset(s, 0, sizeof(*s));
    if (lines) {
        bits = 16;
        while (bits < INDEX_BITS_MAX && n > ((size_t)LINE_LOAD << bits))
            bits++;
    } else {
        while (bits < INDEX_BITS_MAX && ((size_t)1 << (bits + 1)) <= n)
            bits++;
    }
    size_t nb = (size_t)1 << bits;
    s->shift = 32 - bits;
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
    if (!lines)
        return MCR_OK;
    s->lines = alloc_lookup_array(nb * sizeof(*s->lines));
    if (s->lines == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu lines of the continuum", nb);
    s->nlines = nb;
    s->mask = ((uint32_t)1 << shift) - 1;
    build_lines(s, pts);
    return MCR_OK;
}

uint32_t mcr__search_server_lines(const mcr__search *s, const mcr__point *p, uint32_t h)
{
    const mcr__ring_line *l = &s->lines[h >> s->shift];
    uint32_t srv = l->server[mcr__line_rank(l, h & s->mask)];

    if (MCR__LIKELY(srv != MCR__LINE_FULL))
        return srv;
    return p[mcr__search_index(s, p, h)].server; /* a full bucket: bisected */
}

void mcr__search_free(mcr__search *s)
{
    free(s->index);
    free(s->lines);
    s->index = NULL;
    s->lines = NULL;
}
