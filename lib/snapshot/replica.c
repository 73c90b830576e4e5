/* SPDX-License-Identifier: BSD-3-Clause */
/* replica.c: where a key's copies go (the primary, then distinct servers in the mode's order, new zones first), and lookups with bounded loads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement_internal.h"
#include "mcroute_snapshot.h"
#include "snapshot.h"

/* Servers (and zones) up to this many are tracked in a bitmap on the stack
 * (1 KiB); beyond, on the heap. */
#define LOCAL_BITS 8192

/* A bitmap of `n` bits, on the stack when small. When the heap fails the
 * map is unavailable (bits == NULL) and callers fall back to scanning. */
typedef struct bitmap {
    uint64_t *bits;
    uint64_t local[LOCAL_BITS / 64];
} bitmap;

static void bitmap_init(bitmap *b, size_t n)
{
    size_t words = (n + 63) / 64;
    if (n <= LOCAL_BITS) {
        b->bits = b->local;
        memset(b->local, 0, words * sizeof(uint64_t));
    } else {
        b->bits = calloc(words, sizeof(uint64_t));
    }
}

static void bitmap_release(bitmap *b)
{
    if (b->bits != b->local)
        free(b->bits);
}

/* Set bit i; returns whether it was already set. */
static int bitmap_test_set(bitmap *b, size_t i)
{
    uint64_t m = (uint64_t)1 << (i % 64);
    int was = (b->bits[i / 64] & m) != 0;
    b->bits[i / 64] |= m;
    return was;
}

/* The zone number (0: none) of ring server r. */
static uint32_t zone_of(const mcr_snapshot *snap, uint32_t r)
{
    return mcr_snapshot_server_zone(snap, mcr_snapshot_ring_server(snap, r));
}

/* How many distinct zones the active servers span, and how many of them
 * have no zone. O(active servers): the snapshot counts zones among all its
 * listed servers, which is the answer only when all are active. Done only
 * when an answer needs it (see census). */
static void zone_census(const mcr_snapshot *snap, uint32_t m, uint32_t *zones,
                        uint32_t *zoneless)
{
    size_t listed_zones = mcr_snapshot_zone_count(snap);
    int all_active = mcr_snapshot_active_count(snap) == mcr_snapshot_server_count(snap);
    bitmap seen;

    *zones = 0;
    *zoneless = 0;
    if (listed_zones == 0) {
        *zoneless = m;
        return;
    }
    seen.bits = NULL;
    if (!all_active)
        bitmap_init(&seen, listed_zones + 1);
    for (uint32_t r = 0; r < m; r++) {
        uint32_t z = zone_of(snap, r);
        if (z == 0)
            (*zoneless)++;
        else if (seen.bits != NULL && !bitmap_test_set(&seen, z))
            (*zones)++;
    }
    if (seen.bits == NULL) /* all active, or no memory: the listed count */
        *zones = (uint32_t)listed_zones;
    else
        bitmap_release(&seen);
}

/* The zone counts, each taken on first need: a walk that finds n servers
 * in n distinct zones, the usual case, needs neither; the number of zones
 * is O(1) when every server is active; only the number of zoneless servers
 * (to stop early when zones are fewer than n) always costs a census. */
typedef struct census {
    int zones_known, all_known;
    uint32_t zones, zoneless;
} census;

static void census_all(census *c, const mcr_snapshot *snap, uint32_t m)
{
    if (!c->all_known) {
        zone_census(snap, m, &c->zones, &c->zoneless);
        c->zones_known = c->all_known = 1;
    }
}

static uint32_t census_zones(census *c, const mcr_snapshot *snap, uint32_t m)
{
    if (!c->zones_known) {
        if (mcr_snapshot_active_count(snap) == mcr_snapshot_server_count(snap)) {
            c->zones = (uint32_t)mcr_snapshot_zone_count(snap);
            c->zones_known = 1;
        } else {
            census_all(c, snap, m);
        }
    }
    return c->zones;
}

static uint32_t census_zoneless(census *c, const mcr_snapshot *snap, uint32_t m)
{
    census_all(c, snap, m);
    return c->zoneless;
}

/* The walk's state. out[] holds ring indexes until the end, in three runs:
 * out[0 .. taken) the servers taken (each bringing a new zone, the primary
 * first), then the servers set aside, best first: out[taken .. taken+aside0)
 * those without a zone, then those in a zone already used, aside in all.
 * taken + aside <= n: a server that would rank past n is dropped, and would
 * be dropped again if met again (taken + aside0 and taken + aside never
 * decrease), so dropping it is final. */
typedef struct walk {
    uint32_t *out;
    size_t n;
    size_t taken, aside, aside0;
    uint32_t zones_used;
} walk;

/* Take ring server r (its zone, if any, is new): it goes after the taken
 * ones, pushing the set-aside ones down and dropping the last if full. */
static void take(walk *w, const mcr_snapshot *snap, uint32_t r)
{
    size_t tail = w->aside;
    if (w->taken + tail == w->n) {
        tail--; /* the last set-aside server ranks past n now */
        if (w->aside0 > tail)
            w->aside0 = tail;
    }
    memmove(w->out + w->taken + 1, w->out + w->taken, tail * sizeof(*w->out));
    w->out[w->taken++] = r;
    w->aside = tail;
    if (zone_of(snap, r) != 0)
        w->zones_used++;
}

static void set_aside_zoneless(walk *w, uint32_t r)
{
    size_t at = w->taken + w->aside0;
    if (at == w->n)
        return; /* ranks past n */
    size_t tail = w->aside - w->aside0; /* servers in used zones, after it */
    if (at + 1 + tail > w->n)
        tail--;
    memmove(w->out + at + 1, w->out + at, tail * sizeof(*w->out));
    w->out[at] = r;
    w->aside0++;
    w->aside = w->aside0 + tail;
}

static void set_aside_used(walk *w, uint32_t r)
{
    if (w->taken + w->aside < w->n)
        w->out[w->taken + w->aside++] = r;
}

/* Whether ring server r's zone z is one of the taken servers'. */
static int zone_used(const walk *w, const mcr_snapshot *snap, uint32_t z)
{
    for (size_t i = 0; i < w->taken; i++)
        if (zone_of(snap, w->out[i]) == z)
            return 1;
    return 0;
}

/* Whether r is already in out[] (the fallback when no bitmap is at hand:
 * a server dropped before would be dropped again, see walk). */
static int listed(const walk *w, uint32_t r)
{
    for (size_t i = 0; i < w->taken + w->aside; i++)
        if (w->out[i] == r)
            return 1;
    return 0;
}

size_t mcr_snapshot_replicas(const mcr_snapshot *snap, const void *key, size_t len, size_t n,
                             uint32_t *out, int *under_replicated)
{
    if (n == 0) {
        if (under_replicated != NULL)
            *under_replicated = 0;
        return 0;
    }
    const mcr_ring *ring = mcr_snapshot_ring(snap);
    uint32_t m = (uint32_t)mcr_ring_server_count(ring);
    census cen = {0, 0, 0, 0};

    /* The primary exactly as mcr_ring_locate() finds it (one server: no
     * hashing), then the mode's order: clockwise over the continuum, up
     * from the primary in the modula modes, the native modes' own (see
     * mcr__walk). */
    mcr__walk wk;
    mcr__walk_init(&wk, ring, key, len);
    uint32_t primary = mcr__walk_next(&wk);

    walk w = {out, n, 0, 0, 0, 0};
    bitmap seen;
    bitmap_init(&seen, m);
    /* Without the bitmap (no memory for one), a dropped server met again
     * counts as new: the counts below are then unknown, and only the walk's
     * length bounds it. */
    int counted = seen.bits != NULL;
    uint32_t unseen = m - 1, zoneless_seen = zone_of(snap, primary) == 0;
    if (counted)
        bitmap_test_set(&seen, primary);
    take(&w, snap, primary);

    while (w.taken < n && (unseen > 0 || !counted)) {
        uint32_t r = mcr__walk_next(&wk);
        if (r == UINT32_MAX)
            break;
        if (counted ? bitmap_test_set(&seen, r) : listed(&w, r))
            continue;
        unseen--;
        uint32_t z = zone_of(snap, r);
        if (z == 0) {
            zoneless_seen++;
            set_aside_zoneless(&w, r);
        } else if (zone_used(&w, snap, z)) {
            set_aside_used(&w, r);
        } else {
            take(&w, snap, r);
        }
        /* Settled once nothing met later can rank within n: full, no zone
         * left to bring, and either only zoneless servers set aside (later
         * ones would rank after them) or no zoneless server left to meet. */
        if (w.taken + w.aside == n && w.zones_used == census_zones(&cen, snap, m) &&
            (w.aside == w.aside0 ||
             (counted && zoneless_seen == census_zoneless(&cen, snap, m))))
            break;
    }
    if (counted)
        bitmap_release(&seen);
    mcr__walk_release(&wk);

    size_t count = w.taken + w.aside;
    for (size_t i = 0; i < count; i++)
        out[i] = mcr_snapshot_ring_server(snap, out[i]);
    if (under_replicated != NULL) {
        if (count < n)
            *under_replicated = 1;
        else if (w.zones_used >= n) /* as many zones as servers asked */
            *under_replicated = 0;
        else {
            uint32_t zones = census_zones(&cen, snap, m);
            *under_replicated = w.zones_used < (n < zones ? n : zones);
        }
    }
    return count;
}

uint32_t mcr_snapshot_locate_bounded(const mcr_snapshot *snap, const void *key, size_t len,
                                     const uint32_t *load, uint64_t total, double epsilon)
{
    const mcr_ring *ring = snap->ring;

    if (snap->nactive == 1)
        return snap->ring_map[0];
    if (!(epsilon >= 0)) /* negative or NaN */
        epsilon = 0;
    /* Capacity of a server of weight w: ceil((1 + eps) (total + 1) w / W),
     * the load the paper allows once this request is counted. The
     * capacities add up to at least (1 + eps) (total + 1) > total, so some
     * server has room whenever `total` is the sum of the loads. */
    double scale = (1.0 + epsilon) * ((double)total + 1.0) / (double)snap->active_weight;
    mcr__walk wk;
    mcr__walk_init(&wk, ring, key, len);
    uint32_t r = mcr__walk_next(&wk), pick = snap->ring_map[r]; /* the primary */
    for (; r != UINT32_MAX; r = mcr__walk_next(&wk)) {
        uint32_t i = snap->ring_map[r];
        if ((double)load[i] + 1.0 <= ceil(scale * (double)snap->servers[i].weight)) {
            pick = i;
            break;
        }
    }
    mcr__walk_release(&wk);
    return pick;
}
