/* SPDX-License-Identifier: BSD-3-Clause */
/* snapshot.c: immutable reference-counted placement snapshots: building one (from scratch or from an old one) and reading it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement_internal.h"
#include "mcroute_snapshot.h"
#include "snapshot.h"

/*
 * Why the incremental path is cheap. A server's point values depend only on
 * its label prefix (fixed for the server's life), the point hash and how
 * many labels it has; the label count is all that a change can alter. So
 * each server keeps its values, in label order, in a point cache (pcache)
 * shared by reference between the snapshots it appears in, and every point
 * of a continuum carries its label number (in a parallel array). Building
 * the next continuum is then:
 *
 *   - filter the old continuum, keeping a point when its server stays
 *     active and its label number is below the server's new label count
 *     (removed servers keep nothing, shrunk ones keep a prefix);
 *   - hash what is new: the labels of added servers, and of servers whose
 *     count grew, beyond what their cache holds (a new cache copies the old
 *     values and hashes the rest only);
 *   - sort only those new points, and merge the two sorted runs.
 *
 * Both runs are ordered by (value, ring index), the order a from-scratch
 * build produces (a stable sort of points generated in server order), so
 * the result is the same array: mcr_snapshot_new() is this very code with
 * no old snapshot. Cost: linear in the points, plus hashing and sorting the
 * new points. Line digests of the canonical text (see snaptext.c) are
 * reused for servers that did not change, so the checksum costs one MD5 of
 * 16 bytes per server. Changes are collected and turned into the next
 * snapshot's entries by changes.c.
 */

/* Seed of the per-server point hash (the "digest" of a server line). */
#define ROLL_SEED MCR__ROLL_SEED
/* No ring index: the server is not active. */
#define NO_RING UINT32_MAX
/* An old ring index whose server leaves the continuum. */
#define DROP UINT32_MAX

/* ------------------------------------------------------------ point caches */

struct mcr__pcache {
    atomic_size_t refs;
    uint32_t nlabels;   /* labels hashed */
    uint32_t per_label; /* points per label: 4 (MD5 words) or 1 */
    uint64_t *roll;     /* roll[k]: hash of the values of labels 0..k-1 */
    uint32_t v[];       /* nlabels * per_label values, label order */
};

mcr__pcache *mcr__pcache_ref(mcr__pcache *c)
{
    if (c != NULL)
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    return c;
}

static void pcache_unref(mcr__pcache *c)
{
    if (c == NULL)
        return;
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        free(c);
}

static uint64_t roll_step(uint64_t h, const uint32_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        h = (h ^ v[i]) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
    }
    return h;
}

/* A cache of `want` labels for server s: the values of `old` (same server,
 * fewer labels, or NULL) and the missing labels hashed. NULL when out of
 * memory. */
static mcr__pcache *pcache_grow(const mcr__pcache *old, const mcr__server *s,
                                const mcr__params *p, uint32_t want, uint32_t per_label)
{
    size_t nv = (size_t)want * per_label;
    size_t voff = offsetof(mcr__pcache, v) + nv * sizeof(uint32_t);
    size_t roff = (voff + 7) & ~(size_t)7;
    mcr__pcache *c = malloc(roff + ((size_t)want + 1) * sizeof(uint64_t));
    uint32_t have = old != NULL ? old->nlabels : 0;
    char label[MCR__NAME_BUF];

    if (c == NULL)
        return NULL;
    atomic_init(&c->refs, 1);
    c->nlabels = want;
    c->per_label = per_label;
    c->roll = (uint64_t *)(void *)((char *)c + roff);
    if (have > 0) {
        memcpy(c->v, old->v, (size_t)have * per_label * sizeof(uint32_t));
        memcpy(c->roll, old->roll, ((size_t)have + 1) * sizeof(uint64_t));
    } else {
        c->roll[0] = ROLL_SEED;
    }
    size_t plen = mcr__label_prefix(p->mode, s, label);
    if (plen == 0) { /* a name lookup ran out of memory */
        free(c);
        return NULL;
    }
    mcr__label_values(p->mode, label, plen, per_label, p->point_hash, have, want,
                      c->v + (size_t)have * per_label);
    for (uint32_t k = have; k < want; k++)
        c->roll[k + 1] = roll_step(c->roll[k], c->v + (size_t)k * per_label, per_label);
    return c;
}

/* ------------------------------------------------------------ snapshots */

static void entry_server(const mcr__entry *e, mcr__server *s)
{
    s->host = (char *)e->host; /* read only: the ring copies it */
    s->host_len = e->host_len;
    s->port = e->port;
    s->weight = e->weight;
    s->ipv6 = e->ipv6;
    s->label = e->named ? (char *)e->id : NULL;
    s->zone = (char *)e->zone;
}

static void entries_free(mcr__entry *e, size_t n)
{
    if (e == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        pcache_unref(e[i].pc);
    free(e);
}

static void snapshot_free(mcr_snapshot *s)
{
    entries_free(s->servers, s->nservers);
    mcr_ring_free(s->ring);
    free(s->ring_map);
    free(s->labels);
    free(s->idmap);
    free(s->map);
    free(s->owned_start);
    free(s->owned_list);
    free(s->strings);
    free(s);
}

mcr_snapshot *mcr_snapshot_ref(const mcr_snapshot *snap)
{
    /* The count is the one mutable part of an immutable snapshot; every
     * snapshot is allocated writable (mcr_snapshot_new()), so dropping the
     * const is defined. */
    mcr_snapshot *s = (mcr_snapshot *)(uintptr_t)snap;
    if (s != NULL)
        atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    return s;
}

void mcr_snapshot_unref(mcr_snapshot *s)
{
    if (s == NULL)
        return;
    /* Release: this thread's reads of the snapshot happen before the free.
     * Acquire: so do every other thread's, whose decrements came first. (A
     * release decrement plus an acquire fence on the last one is the
     * classic form; GCC's ThreadSanitizer does not support fences.) */
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        snapshot_free(s);
}

/* Copy every string of the entries into one block owned by the snapshot
 * and point the entries at it; ids not given get "host:port". */
static int arena_strings(mcr_snapshot *s, mcr_error *err)
{
    size_t bytes = 0;
    for (size_t i = 0; i < s->nservers; i++) {
        const mcr__entry *e = &s->servers[i];
        bytes += e->host_len + 1 + (e->id ? strlen(e->id) : e->host_len + 8) + 1;
        if (e->zone != NULL)
            bytes += strlen(e->zone) + 1;
    }
    s->strings = malloc(bytes > 0 ? bytes : 1);
    if (s->strings == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory copying server names");
    char *p = s->strings;
    for (size_t i = 0; i < s->nservers; i++) {
        mcr__entry *e = &s->servers[i];
        memcpy(p, e->host, e->host_len + 1);
        e->host = p;
        p += e->host_len + 1;
        if (e->id != NULL) {
            size_t l = strlen(e->id) + 1;
            memcpy(p, e->id, l);
            e->id = p;
            p += l;
        } else {
            e->id = p;
            p += sprintf(p, e->ipv6 ? "[%s]:%d" : "%s:%d", e->host, e->port) + 1;
        }
        if (e->zone != NULL) {
            size_t l = strlen(e->zone) + 1;
            memcpy(p, e->zone, l);
            e->zone = p;
            p += l;
        }
    }
    return MCR_OK;
}

/* The id map of the snapshot, zone numbers, and (with `check`) the
 * uniqueness of ids and addresses. */
static int index_servers(mcr_snapshot *s, bool check, mcr_error *err)
{
    size_t cap = mcr__map_cap(s->nservers), mask = cap - 1;
    char q[80];
    int rc = MCR_OK;

    s->idmap = calloc(cap, sizeof(*s->idmap));
    uint32_t *zmap = calloc(cap, sizeof(*zmap));
    uint32_t *amap = check ? calloc(cap, sizeof(*amap)) : NULL;
    if (s->idmap == NULL || zmap == NULL || (check && amap == NULL)) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory indexing servers");
        goto out;
    }
    s->idmap_mask = mask;
    s->nzones = 0;
    for (size_t i = 0; i < s->nservers; i++) {
        mcr__entry *e = &s->servers[i];
        size_t j = (size_t)mcr__str_hash(e->id, strlen(e->id), MCR__FNV_OFFSET) & mask;
        for (; s->idmap[j] != 0; j = (j + 1) & mask) {
            if (strcmp(s->servers[s->idmap[j] - 1].id, e->id) == 0) {
                rc = mcr__error(err, MCR_ERR_DUPLICATE,
                                "duplicate server id \"%s\" (servers %u and %zu)",
                                mcr__quote(q, sizeof(q), e->id, strlen(e->id)),
                                (unsigned)s->idmap[j] - 1, i);
                goto out;
            }
        }
        s->idmap[j] = (uint32_t)i + 1;
        e->zone_no = 0;
        if (e->zone != NULL) {
            j = (size_t)mcr__str_hash(e->zone, strlen(e->zone), MCR__FNV_OFFSET) & mask;
            for (; zmap[j] != 0; j = (j + 1) & mask)
                if (strcmp(s->servers[zmap[j] - 1].zone, e->zone) == 0)
                    break;
            if (zmap[j] == 0) {
                zmap[j] = (uint32_t)i + 1;
                e->zone_no = (uint32_t)++s->nzones;
            } else {
                e->zone_no = s->servers[zmap[j] - 1].zone_no;
            }
        }
        if (check) {
            j = (size_t)mcr__str_hash(e->host, e->host_len, MCR__FNV_OFFSET ^ (uint64_t)e->port) & mask;
            for (; amap[j] != 0; j = (j + 1) & mask) {
                const mcr__entry *o = &s->servers[amap[j] - 1];
                if (o->port == e->port && strcmp(o->host, e->host) == 0) {
                    rc = mcr__error(err, MCR_ERR_DUPLICATE,
                                    "duplicate server %s%s%s:%d (servers %u and %zu)",
                                    e->ipv6 ? "[" : "",
                                    mcr__quote(q, sizeof(q), e->host, e->host_len),
                                    e->ipv6 ? "]" : "", e->port, (unsigned)amap[j] - 1, i);
                    goto out;
                }
            }
            amap[j] = (uint32_t)i + 1;
        }
    }
out:
    free(zmap);
    free(amap);
    return rc;
}

/* A point being placed: value, new ring index, label number. */
typedef struct tpoint {
    uint32_t value;
    uint32_t server;
    uint32_t label;
} tpoint;

/* Stable sort by value (LSD radix; insertion sort when small). The points
 * come in ring order, so ties end up by ring index. */
MCR__DEFINE_STABLE_SORT(sort_tpoints, tpoint)

/* The continuum of s (its entries have ring indexes, caches and label
 * counts): old's points that stay, merged with the new ones. `from[i]` is
 * the index in `old` of entry i, or -1 (all -1 without old). */
static int build_continuum(mcr_snapshot *s, const mcr_snapshot *old, const long *from,
                           mcr__point **out_points, mcr_error *err)
{
    uint32_t per_label = s->per_label;
    size_t old_active = old != NULL ? old->nactive : 0;
    uint32_t *newr = NULL, *keep = NULL;
    tpoint *add = NULL;
    mcr__point *pts = NULL;
    size_t nadd = 0, total = 0;
    int rc = MCR_OK;

    if (old_active > 0) {
        newr = malloc(old_active * sizeof(*newr));
        keep = malloc(old_active * sizeof(*keep));
        if (newr == NULL || keep == NULL)
            goto nomem;
        for (size_t r = 0; r < old_active; r++) {
            newr[r] = DROP;
            keep[r] = 0;
        }
    }
    for (size_t i = 0; i < s->nservers; i++) {
        mcr__entry *e = &s->servers[i];
        if (e->ring == NO_RING)
            continue;
        uint32_t start = 0;
        if (from[i] >= 0) {
            const mcr__entry *o = &old->servers[from[i]];
            if (o->ring != NO_RING) {
                start = o->labels < e->labels ? o->labels : e->labels;
                newr[o->ring] = e->ring;
                keep[o->ring] = start;
            }
        }
        nadd += (size_t)(e->labels - start) * per_label;
        total += (size_t)e->labels * per_label;
    }
    if (total > UINT32_MAX) {
        rc = mcr__error(err, MCR_ERR_RANGE, "continuum of %zu points is too large", total);
        goto out;
    }
    pts = malloc((total + MCR__RING_PAD) * sizeof(*pts));
    s->labels = malloc((total + 1) * sizeof(*s->labels)); /* + 1: see the filter */
    add = malloc((nadd > 0 ? nadd : 1) * sizeof(*add));
    if (pts == NULL || s->labels == NULL || add == NULL)
        goto nomem;

    /* The new points, in ring order (so ties sort by ring index). */
    size_t k = 0;
    for (size_t i = 0; i < s->nservers; i++) {
        const mcr__entry *e = &s->servers[i];
        if (e->ring == NO_RING)
            continue;
        uint32_t start = 0;
        if (from[i] >= 0 && old->servers[from[i]].ring != NO_RING)
            start = keep[old->servers[from[i]].ring];
        for (uint32_t l = start; l < e->labels; l++)
            for (uint32_t x = 0; x < per_label; x++) {
                add[k].value = e->pc->v[(size_t)l * per_label + x];
                add[k].server = e->ring;
                add[k++].label = l;
            }
    }
    if (sort_tpoints(add, nadd) != MCR_OK)
        goto nomem;

    /* Merge by (value, ring index): the kept old points are in that order
     * already, because ring indexes keep their relative order. */
    size_t o = 0, a = 0, w = 0;
    size_t on = old_active > 0 ? old->npoints : 0;
    const mcr__point *op = on > 0 ? old->points : NULL;
    const uint32_t *ol = on > 0 ? old->labels : NULL;
    bool identity = on > 0;
    for (size_t r = 0; r < old_active && identity; r++)
        identity = newr[r] == r && keep[r] == old->servers[old->ring_map[r]].labels;
    if (identity) {
        /* Every old point stays, with its ring index (servers were only
         * appended, or grew): copy the runs between the new points, found
         * by bisection, instead of testing each old point. */
        for (; a < nadd; a++) {
            size_t lo = o, hi = on;
            while (lo < hi) { /* first old point after add[a]; ties: old first */
                size_t mid = lo + (hi - lo) / 2;
                if (op[mid].value < add[a].value ||
                    (op[mid].value == add[a].value && op[mid].server <= add[a].server))
                    lo = mid + 1;
                else
                    hi = mid;
            }
            memcpy(pts + w, op + o, (lo - o) * sizeof(*pts));
            memcpy(s->labels + w, ol + o, (lo - o) * sizeof(*s->labels));
            w += lo - o;
            o = lo;
            pts[w].value = add[a].value;
            pts[w].server = add[a].server;
            s->labels[w++] = add[a].label;
        }
        memcpy(pts + w, op + o, (on - o) * sizeof(*pts));
        memcpy(s->labels + w, ol + o, (on - o) * sizeof(*s->labels));
        w += on - o;
        o = on;
    }
    if (o < on) {
        /* Keep the old points that stay, without a branch (a dropped
         * point is written and then overwritten): keep[] is 0 for the
         * servers that leave, so their label test fails. */
        uint32_t *lab = s->labels;
        for (; o < on; o++) {
            uint32_t r = op[o].server, l = ol[o];
            pts[w].value = op[o].value;
            pts[w].server = newr[r];
            lab[w] = l;
            w += l < keep[r];
        }
        /* Merge the new points in from the back, in place. Few of them (a
         * server joined): bisect for each one and move the run after it;
         * many: one element at a time. */
        size_t i = w, d = total; /* next kept point to move; its destination end */
        bool bisect = nadd < w / 32;
        for (size_t j = nadd; j > 0; j--) {
            const tpoint *x = &add[j - 1];
            size_t lo;
            if (bisect) {
                size_t l0 = 0, hi = i;
                while (l0 < hi) { /* first kept point after x; ties: kept first */
                    size_t mid = l0 + (hi - l0) / 2;
                    if (pts[mid].value < x->value ||
                        (pts[mid].value == x->value && pts[mid].server <= x->server))
                        l0 = mid + 1;
                    else
                        hi = mid;
                }
                lo = l0;
            } else {
                lo = i;
                while (lo > 0 && (pts[lo - 1].value > x->value ||
                                  (pts[lo - 1].value == x->value && pts[lo - 1].server > x->server)))
                    lo--;
            }
            memmove(pts + d - (i - lo), pts + lo, (i - lo) * sizeof(*pts));
            memmove(lab + d - (i - lo), lab + lo, (i - lo) * sizeof(*lab));
            d -= i - lo;
            i = lo;
            d--;
            pts[d].value = x->value;
            pts[d].server = x->server;
            lab[d] = x->label;
        }
        w += nadd;
        a = nadd;
    }
    for (; a < nadd; a++) {
        pts[w].value = add[a].value;
        pts[w].server = add[a].server;
        s->labels[w++] = add[a].label;
    }
    if (w != total) {
        rc = mcr__error(err, MCR_ERR_INVALID, "internal error: merged %zu points of %zu", w, total);
        goto out;
    }
    s->npoints = total;
    *out_points = pts;
    pts = NULL;
    goto out;
nomem:
    rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory building a continuum of %zu points", total);
out:
    free(newr);
    free(keep);
    free(add);
    free(pts);
    return rc;
}

/* Check the map of a map mode against its entries (their weights) and
 * list what each server owns (s->owned_start, s->owned_list, e->owned,
 * e->pdigest). */
static int index_map(mcr_snapshot *s, mcr_error *err)
{
    size_t n = s->nservers;
    uint64_t want = 0;

    if (s->params.mode == MCR_MODE_JUMP) {
        for (size_t i = 0; i < n; i++)
            want += s->servers[i].weight;
    } else {
        want = s->params.table_size;
    }
    if (s->nmap != want || s->nmap == 0)
        return mcr__error(err, MCR_ERR_INVALID, "%s: %zu %s listed, %llu expected",
                          mcr_mode_name(s->params.mode), s->nmap,
                          s->params.mode == MCR_MODE_JUMP ? "buckets" : "slots",
                          (unsigned long long)want);
    s->owned_start = calloc(n + 1, sizeof(*s->owned_start));
    s->owned_list = malloc(s->nmap * sizeof(*s->owned_list));
    if (s->owned_start == NULL || s->owned_list == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a map of %zu entries", s->nmap);
    for (size_t b = 0; b < s->nmap; b++) {
        if (s->map[b] >= n)
            return mcr__error(err, MCR_ERR_INVALID, "%s: entry %zu names no server",
                              mcr_mode_name(s->params.mode), b);
        s->owned_start[s->map[b] + 1]++;
    }
    for (size_t i = 0; i < n; i++) {
        mcr__entry *x = &s->servers[i];
        x->owned = s->owned_start[i + 1];
        if (s->params.mode == MCR_MODE_JUMP && x->owned != x->weight) {
            char q[80];
            return mcr__error(err, MCR_ERR_INVALID,
                              "jump: server \"%s\" of weight %u owns %u buckets",
                              mcr__quote(q, sizeof(q), x->id, strlen(x->id)), (unsigned)x->weight,
                              (unsigned)x->owned);
        }
        s->owned_start[i + 1] += s->owned_start[i];
    }
    uint32_t *at = malloc((n ? n : 1) * sizeof(*at));
    if (at == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a map of %zu entries", s->nmap);
    memcpy(at, s->owned_start, n * sizeof(*at));
    for (size_t b = 0; b < s->nmap; b++)
        s->owned_list[at[s->map[b]]++] = (uint32_t)b;
    free(at);
    for (size_t i = 0; i < n; i++) {
        mcr__entry *x = &s->servers[i];
        x->pdigest = roll_step(ROLL_SEED, s->owned_list + s->owned_start[i], x->owned);
    }
    return MCR_OK;
}

/* "maglev": what each server owns of the ring's table, for its line. */
static int maglev_owned(mcr_snapshot *s, mcr_error *err)
{
    size_t m, n = s->nservers;
    const uint32_t *t = mcr__ring_table(s->ring, &m);
    uint32_t *start = calloc(n + 1, sizeof(*start)), *list = malloc((m ? m : 1) * sizeof(*list));
    if (start == NULL || list == NULL) {
        free(start);
        free(list);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a table of %zu entries", m);
    }
    for (size_t c = 0; c < m; c++)
        start[s->ring_map[t[c]] + 1]++;
    for (size_t i = 0; i < n; i++) {
        s->servers[i].owned = start[i + 1];
        start[i + 1] += start[i];
    }
    for (size_t c = 0; c < m; c++)
        list[start[s->ring_map[t[c]]]++] = (uint32_t)c;
    for (size_t i = 0, b = 0; i < n; i++) { /* start[i] is now the end of i */
        mcr__entry *x = &s->servers[i];
        x->pdigest = roll_step(ROLL_SEED, list + b, x->owned);
        b += x->owned;
    }
    free(start);
    free(list);
    return MCR_OK;
}

int mcr__snapshot_build(const mcr__params *p, mcr__entry *e, size_t n, const long *from,
                        const mcr_snapshot *old, uint64_t epoch, bool check, uint32_t *map,
                        size_t nmap, mcr_snapshot **out, mcr_error *err)
{
    mcr_snapshot *s = calloc(1, sizeof(*s));
    mcr__server *rs = NULL;
    mcr__point *pts = NULL;
    uint32_t *rmap = NULL;
    uint64_t total_weight = 0;
    uint32_t wmax = mcr__weight_max(p->mode);
    char q[80];
    int rc;

    if (s == NULL) {
        entries_free(e, n);
        free(map);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a snapshot");
    }
    atomic_init(&s->refs, 1);
    s->epoch = epoch;
    s->params = *p;
    s->servers = e;
    s->nservers = n;
    s->map = map;
    s->nmap = nmap;
    rc = arena_strings(s, err);
    if (rc != MCR_OK)
        goto fail;
    rc = index_servers(s, check, err);
    if (rc != MCR_OK)
        goto fail;

    /* Ring indexes, label counts, caches. */
    for (size_t i = 0; i < n; i++) {
        mcr__entry *x = &e[i];
        if (x->weight > wmax || x->weight < mcr__weight_min(p->mode)) {
            rc = mcr__error(err, MCR_ERR_RANGE,
                            "weight %u of server \"%s\" is outside %u..%u, the weights of %s",
                            (unsigned)x->weight, mcr__quote(q, sizeof(q), x->id, strlen(x->id)),
                            (unsigned)mcr__weight_min(p->mode), (unsigned)wmax,
                            mcr_mode_name(p->mode));
            goto fail;
        }
        x->ring = NO_RING;
        x->labels = 0;
        x->owned = 0;
        if (x->state == MCR_STATE_ACTIVE) {
            x->ring = (uint32_t)s->nactive++;
            total_weight += x->weight;
        }
    }
    s->active_weight = total_weight;
    if (s->nactive == 0) {
        rc = mcr__error(err, MCR_ERR_EMPTY, n == 0 ? "no servers" : "no active server");
        goto fail;
    }
    if (s->nactive > UINT32_MAX / 2) {
        rc = mcr__error(err, MCR_ERR_RANGE, "too many servers: %zu", s->nactive);
        goto fail;
    }
    /* Before any table is built: a table the servers do not justify. */
    if (p->mode == MCR_MODE_MAGLEV &&
        (rc = mcr__maglev_check_limit(p->table_size, n, err)) != MCR_OK)
        goto fail;
    s->ring_map = malloc(s->nactive * sizeof(*s->ring_map));
    rs = malloc(s->nactive * sizeof(*rs));
    if (s->ring_map == NULL || rs == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu servers", s->nactive);
        goto fail;
    }
    if (mcr__mode_has_map(p->mode)) {
        if (s->map == NULL) { /* the default: every server listed, in order */
            uint32_t *w = malloc(n * sizeof(*w));
            if (w == NULL) {
                rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu servers", n);
                goto fail;
            }
            for (size_t i = 0; i < n; i++)
                w[i] = e[i].weight;
            rc = mcr__default_map(p, w, n, &s->map, &s->nmap, err);
            free(w);
            if (rc != MCR_OK)
                goto fail;
        }
        if ((rc = index_map(s, err)) != MCR_OK)
            goto fail;
        rmap = malloc(s->nmap * sizeof(*rmap));
        if (rmap == NULL) {
            rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory for a map of %zu entries", s->nmap);
            goto fail;
        }
        for (size_t b = 0; b < s->nmap; b++)
            rmap[b] = e[s->map[b]].ring; /* NO_RING is MCR__HOLE */
    } else if (s->map != NULL) {
        rc = mcr__error(err, MCR_ERR_INVALID, "internal error: a map for mode %s",
                        mcr_mode_name(p->mode));
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        mcr__entry *x = &e[i];
        mcr__server sv;
        entry_server(x, &sv);
        if (x->ring == NO_RING) {
            if (!mcr__mode_has_map(p->mode))
                x->pdigest = ROLL_SEED;
            continue;
        }
        s->ring_map[x->ring] = (uint32_t)i;
        rs[x->ring] = sv;
        uint32_t per_label;
        uint32_t want = mcr__labels_for(p->mode, x->weight, total_weight, (uint32_t)s->nactive,
                                        &per_label);
        s->per_label = per_label;
        if (per_label == 0) {
            if (!mcr__mode_has_map(p->mode))
                x->pdigest = ROLL_SEED;
            continue;
        }
        if (x->pc == NULL || x->pc->nlabels < want) {
            mcr__pcache *c = pcache_grow(x->pc, &sv, p, want, per_label);
            if (c == NULL) {
                rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory for the points of %s", x->id);
                goto fail;
            }
            pcache_unref(x->pc);
            x->pc = c;
        }
        x->labels = want;
        x->pdigest = x->pc->roll[want];
    }
    if (s->per_label != 0) {
        rc = build_continuum(s, old, from, &pts, err);
        if (rc != MCR_OK)
            goto fail;
    }
    rc = mcr__ring_build(p, rs, s->nactive, pts, s->npoints, rmap, rmap != NULL ? s->nmap : 0,
                         &s->ring, err);
    pts = NULL; /* taken over by the ring */
    rmap = NULL;
    if (rc != MCR_OK)
        goto fail;
    s->points = mcr__ring_points(s->ring);
    if (p->mode == MCR_MODE_MAGLEV && (rc = maglev_owned(s, err)) != MCR_OK)
        goto fail;
    rc = mcr__snapshot_digest(s, old, from, err);
    if (rc != MCR_OK)
        goto fail;
    free(rs);
    *out = s;
    return MCR_OK;
fail:
    free(rs);
    free(pts);
    free(rmap);
    snapshot_free(s);
    return rc;
}

int mcr_snapshot_new(const mcr_config *cfg, uint64_t epoch, mcr_snapshot **out, mcr_error *err)
{
    mcr__params p;
    mcr__entry *e;

    if (cfg == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config or output");
    if (cfg->count == 0)
        return mcr__error(err, MCR_ERR_EMPTY, "no servers configured");
    int crc = mcr__config_check_client(cfg, err);
    if (crc != MCR_OK)
        return crc;
    mcr__config_params(cfg, &p);
    e = calloc(cfg->count, sizeof(*e));
    long *from = malloc(cfg->count * sizeof(*from));
    if (e == NULL || from == NULL) {
        free(e);
        free(from);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu servers", cfg->count);
    }
    for (size_t i = 0; i < cfg->count; i++) {
        const mcr__server *s = &cfg->servers[i];
        e[i].id = s->label; /* NULL: "host:port", made by the build */
        e[i].named = s->label != NULL;
        e[i].host = s->host;
        e[i].host_len = s->host_len;
        e[i].ipv6 = s->ipv6;
        e[i].port = s->port;
        e[i].weight = s->weight;
        e[i].zone = s->zone;
        e[i].state = MCR_STATE_ACTIVE;
        from[i] = -1;
    }
    int rc = mcr__snapshot_build(&p, e, cfg->count, from, NULL, epoch, true, NULL, 0, out, err);
    free(from);
    return rc;
}

/* ------------------------------------------------------------ reading */

uint64_t mcr_snapshot_epoch(const mcr_snapshot *s)
{
    return s == NULL ? 0 : s->epoch;
}

const char *mcr_snapshot_checksum(const mcr_snapshot *s)
{
    return s == NULL ? NULL : s->checksum;
}

const mcr_ring *mcr_snapshot_ring(const mcr_snapshot *s)
{
    return s == NULL ? NULL : s->ring;
}

size_t mcr_snapshot_server_count(const mcr_snapshot *s)
{
    return s == NULL ? 0 : s->nservers;
}

size_t mcr_snapshot_active_count(const mcr_snapshot *s)
{
    return s == NULL ? 0 : s->nactive;
}

int mcr_snapshot_server(const mcr_snapshot *s, size_t i, mcr_server_desc *out)
{
    if (s == NULL || out == NULL || i >= s->nservers)
        return MCR_ERR_INVALID;
    const mcr__entry *e = &s->servers[i];
    out->id = e->id;
    out->host = e->host;
    out->port = e->port;
    out->weight = e->weight;
    out->zone = e->zone;
    out->state = e->state;
    out->id_is_default = !e->named;
    memset(out->reserved, 0, sizeof(out->reserved));
    return MCR_OK;
}

uint32_t mcr_snapshot_find(const mcr_snapshot *s, const char *id)
{
    if (s == NULL || id == NULL)
        return MCR_NO_SERVER;
    size_t mask = s->idmap_mask;
    for (size_t j = (size_t)mcr__str_hash(id, strlen(id), MCR__FNV_OFFSET) & mask;; j = (j + 1) & mask) {
        uint32_t x = s->idmap[j];
        if (x == 0)
            return MCR_NO_SERVER;
        if (strcmp(s->servers[x - 1].id, id) == 0)
            return x - 1;
    }
}

uint32_t mcr_snapshot_ring_server(const mcr_snapshot *s, uint32_t ring_index)
{
    if (s == NULL || ring_index >= s->nactive)
        return UINT32_MAX;
    return s->ring_map[ring_index];
}

size_t mcr_snapshot_zone_count(const mcr_snapshot *s)
{
    return s == NULL ? 0 : s->nzones;
}

uint32_t mcr_snapshot_server_zone(const mcr_snapshot *s, size_t i)
{
    if (s == NULL || i >= s->nservers)
        return 0;
    return s->servers[i].zone_no;
}

uint32_t mcr_snapshot_locate(const mcr_snapshot *s, const void *key, size_t len)
{
    return s->ring_map[mcr_ring_locate(s->ring, key, len)];
}

void mcr_snapshot_locate_many(const mcr_snapshot *s, const void *const *keys, const size_t *lens,
                              size_t n, uint32_t *out)
{
    if (n == 0)
        return;
    mcr_ring_locate_many(s->ring, keys, lens, n, out);
    for (size_t i = 0; i < n; i++)
        out[i] = s->ring_map[out[i]];
}

size_t mcr_snapshot_table_size(const mcr_snapshot *s)
{
    size_t n = 0;
    if (s == NULL)
        return 0;
    if (s->map != NULL)
        return s->nmap;
    if (s->params.mode == MCR_MODE_MAGLEV || s->params.mode == MCR_MODE_ENVOY_MAGLEV)
        (void)mcr__ring_table(s->ring, &n);
    return n;
}

uint32_t mcr_snapshot_table_entry(const mcr_snapshot *s, size_t i)
{
    size_t n;
    if (s == NULL)
        return UINT32_MAX;
    if (s->map != NULL)
        return i < s->nmap ? s->map[i] : UINT32_MAX;
    if (s->params.mode != MCR_MODE_MAGLEV && s->params.mode != MCR_MODE_ENVOY_MAGLEV)
        return UINT32_MAX;
    const uint32_t *t = mcr__ring_table(s->ring, &n);
    return i < n ? s->ring_map[t[i]] : UINT32_MAX;
}

uint32_t mcr_snapshot_key_slot(const mcr_snapshot *s, const void *key, size_t len)
{
    if (s == NULL || s->params.mode != MCR_MODE_SLOTS || (key == NULL && len > 0))
        return UINT32_MAX;
    return (uint32_t)(mcr_ring_hash(s->ring, key, len) % s->nmap);
}
