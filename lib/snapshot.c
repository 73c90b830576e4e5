/* SPDX-License-Identifier: BSD-3-Clause */
/* snapshot.c: immutable reference-counted placement snapshots, and membership changes applied to them incrementally. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
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
 * new points. Line digests of the canonical text (see snapfile.c) are
 * reused for servers that did not change, so the checksum costs one MD5 of
 * 16 bytes per server.
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

static mcr__pcache *pcache_ref(mcr__pcache *c)
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
    mcr__label_values(label, plen, per_label, p->point_hash, have, want,
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

static uint64_t str_hash(const char *s, size_t len, uint64_t h)
{
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

static size_t map_cap(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
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
    size_t cap = map_cap(s->nservers), mask = cap - 1;
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
        size_t j = (size_t)str_hash(e->id, strlen(e->id), FNV_OFFSET) & mask;
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
            j = (size_t)str_hash(e->zone, strlen(e->zone), FNV_OFFSET) & mask;
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
            j = (size_t)str_hash(e->host, e->host_len, FNV_OFFSET ^ (uint64_t)e->port) & mask;
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
        if (x->weight > wmax) {
            rc = mcr__error(err, MCR_ERR_RANGE,
                            "weight %u of server \"%s\" is above %u, the limit of %s",
                            (unsigned)x->weight, mcr__quote(q, sizeof(q), x->id, strlen(x->id)),
                            (unsigned)wmax, mcr_mode_name(p->mode));
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
    return MCR_OK;
}

long mcr_snapshot_find(const mcr_snapshot *s, const char *id)
{
    if (s == NULL || id == NULL)
        return -1;
    size_t mask = s->idmap_mask;
    for (size_t j = (size_t)str_hash(id, strlen(id), FNV_OFFSET) & mask;; j = (j + 1) & mask) {
        uint32_t x = s->idmap[j];
        if (x == 0)
            return -1;
        if (strcmp(s->servers[x - 1].id, id) == 0)
            return (long)x - 1;
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

size_t mcr_snapshot_table_size(const mcr_snapshot *s)
{
    size_t n = 0;
    if (s == NULL)
        return 0;
    if (s->map != NULL)
        return s->nmap;
    if (s->params.mode == MCR_MODE_MAGLEV)
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
    if (s->params.mode != MCR_MODE_MAGLEV)
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

/* ------------------------------------------------------------ changes */

typedef enum ch_kind { CH_ADD, CH_REMOVE, CH_WEIGHT, CH_STATE, CH_SLOTS } ch_kind;

typedef struct change {
    ch_kind kind;
    char *id;            /* always set: given, or the default for an add */
    bool named;          /* add: the id was given */
    char *host;          /* add */
    size_t host_len;
    int port;
    uint32_t weight;     /* add, set weight */
    char *zone;          /* add: NULL for none */
    mcr_server_state state; /* add, set state */
    uint32_t first, last;   /* move slots: the range, to server `id` */
} change;

struct mcr_changes {
    change *v;
    size_t n, cap;
};

mcr_changes *mcr_changes_new(void)
{
    return calloc(1, sizeof(mcr_changes));
}

static void change_free(change *c)
{
    free(c->id);
    free(c->host);
    free(c->zone);
}

void mcr_changes_clear(mcr_changes *ch)
{
    if (ch == NULL)
        return;
    for (size_t i = 0; i < ch->n; i++)
        change_free(&ch->v[i]);
    ch->n = 0;
}

void mcr_changes_free(mcr_changes *ch)
{
    if (ch == NULL)
        return;
    mcr_changes_clear(ch);
    free(ch->v);
    free(ch);
}

size_t mcr_changes_count(const mcr_changes *ch)
{
    return ch == NULL ? 0 : ch->n;
}

static int push_change(mcr_changes *ch, change *c, mcr_error *err)
{
    if (ch->n == ch->cap) {
        size_t cap = ch->cap ? 2 * ch->cap : 8;
        change *v = realloc(ch->v, cap * sizeof(*v));
        if (v == NULL) {
            change_free(c);
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory recording a change");
        }
        ch->v = v;
        ch->cap = cap;
    }
    ch->v[ch->n++] = *c;
    return MCR_OK;
}

static bool valid_state(mcr_server_state st)
{
    return st == MCR_STATE_ACTIVE || st == MCR_STATE_DRAINING || st == MCR_STATE_DOWN;
}

int mcr_changes_add(mcr_changes *ch, const mcr_server_desc *d, mcr_error *err)
{
    char q[80], buf[MCR__NAME_BUF];
    int rc;

    if (ch == NULL || d == NULL || d->host == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL changes, description or host");
    size_t hl = strlen(d->host);
    if ((rc = mcr__check_host(d->host, hl, err)) != MCR_OK)
        return rc;
    if (d->port < 1 || d->port > 65535)
        return mcr__error(err, MCR_ERR_RANGE, "port %d of \"%s\" is outside 1..65535", d->port,
                          mcr__quote(q, sizeof(q), d->host, hl));
    if (d->weight < 1 || d->weight > MCR_WEIGHT_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "weight %u of \"%s\" is outside 1..%u",
                          (unsigned)d->weight, mcr__quote(q, sizeof(q), d->host, hl),
                          (unsigned)MCR_WEIGHT_MAX);
    if (d->id != NULL && (rc = mcr__check_name("id", d->id, err)) != MCR_OK)
        return rc;
    const char *zone = d->zone != NULL && d->zone[0] != '\0' ? d->zone : NULL;
    if (zone != NULL && (rc = mcr__check_name("zone", zone, err)) != MCR_OK)
        return rc;
    if (!valid_state(d->state))
        return mcr__error(err, MCR_ERR_INVALID, "unknown server state %d", (int)d->state);
    if (d->id == NULL)
        mcr__default_id(d->host, d->port, buf);
    change c = {.kind = CH_ADD,
                .id = strdup(d->id != NULL ? d->id : buf),
                .named = d->id != NULL,
                .host = strdup(d->host),
                .host_len = hl,
                .port = d->port,
                .weight = d->weight,
                .zone = zone != NULL ? strdup(zone) : NULL,
                .state = d->state};
    if (c.id == NULL || c.host == NULL || (zone != NULL && c.zone == NULL)) {
        change_free(&c);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory recording a change");
    }
    return push_change(ch, &c, err);
}

static int record_id_change(mcr_changes *ch, ch_kind kind, const char *id, uint32_t weight,
                            mcr_server_state state, mcr_error *err)
{
    int rc;

    if (ch == NULL || id == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL changes or id");
    if ((rc = mcr__check_name("id", id, err)) != MCR_OK)
        return rc;
    change c = {.kind = kind, .id = strdup(id), .weight = weight, .state = state};
    if (c.id == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory recording a change");
    return push_change(ch, &c, err);
}

int mcr_changes_remove(mcr_changes *ch, const char *id, mcr_error *err)
{
    return record_id_change(ch, CH_REMOVE, id, 0, MCR_STATE_ACTIVE, err);
}

int mcr_changes_set_weight(mcr_changes *ch, const char *id, uint32_t weight, mcr_error *err)
{
    if (ch != NULL && id != NULL && (weight < 1 || weight > MCR_WEIGHT_MAX))
        return mcr__error(err, MCR_ERR_RANGE, "weight %u is outside 1..%u", (unsigned)weight,
                          (unsigned)MCR_WEIGHT_MAX);
    return record_id_change(ch, CH_WEIGHT, id, weight, MCR_STATE_ACTIVE, err);
}

int mcr_changes_set_state(mcr_changes *ch, const char *id, mcr_server_state state,
                          mcr_error *err)
{
    if (ch != NULL && id != NULL && !valid_state(state))
        return mcr__error(err, MCR_ERR_INVALID, "unknown server state %d", (int)state);
    return record_id_change(ch, CH_STATE, id, 0, state, err);
}

int mcr_changes_move_slots(mcr_changes *ch, uint32_t first, uint32_t last, const char *id,
                           mcr_error *err)
{
    if (ch != NULL && id != NULL && (first > last || last >= MCR_SLOTS_MAX))
        return mcr__error(err, MCR_ERR_RANGE, "slots %u-%u: not a range within 0..%u",
                          (unsigned)first, (unsigned)last, (unsigned)MCR_SLOTS_MAX - 1);
    int rc = record_id_change(ch, CH_SLOTS, id, 0, MCR_STATE_ACTIVE, err);
    if (rc == MCR_OK) {
        ch->v[ch->n - 1].first = first;
        ch->v[ch->n - 1].last = last;
    }
    return rc;
}

/* The working list of an apply: entries (live or gone) and two hash sets
 * over them, of ids and of addresses; a gone entry stays in the sets and is
 * skipped by lookups. */
typedef struct work {
    mcr__entry *e;
    long *from;
    bool *gone;
    size_t n;
    uint32_t *ids, *addrs; /* index + 1, 0 = empty */
    size_t mask;
    /* The map modes: the map in work indexes. A removed server keeps its
     * entries until the end of the batch (work_finish_map): a server
     * re-added under its id takes them back. */
    uint32_t *map;
    size_t nmap, map_cap;
    uint32_t *cnt;         /* jump: buckets of each work index in map */
    uint32_t *drop;        /* jump: how many of its highest buckets to free
                              at the end (a lower weight) */
    bool orphans_ok;       /* slots (the planner): slots left by a removed
                              server become MCR__HOLE instead of an error */
} work;

static long work_find_id(const work *w, const char *id)
{
    for (size_t j = (size_t)str_hash(id, strlen(id), FNV_OFFSET) & w->mask;;
         j = (j + 1) & w->mask) {
        uint32_t x = w->ids[j];
        if (x == 0)
            return -1;
        if (!w->gone[x - 1] && strcmp(w->e[x - 1].id, id) == 0)
            return (long)x - 1;
    }
}

/* The removed entry with id `id` that still holds buckets, or -1. There is
 * at most one: re-adding an id takes its buckets. */
static long work_find_gone(const work *w, const char *id)
{
    for (size_t j = (size_t)str_hash(id, strlen(id), FNV_OFFSET) & w->mask;;
         j = (j + 1) & w->mask) {
        uint32_t x = w->ids[j];
        if (x == 0)
            return -1;
        if (w->gone[x - 1] && w->cnt[x - 1] > 0 && strcmp(w->e[x - 1].id, id) == 0)
            return (long)x - 1;
    }
}

static long work_find_addr(const work *w, const char *host, size_t hl, int port)
{
    for (size_t j = (size_t)str_hash(host, hl, FNV_OFFSET ^ (uint64_t)port) & w->mask;;
         j = (j + 1) & w->mask) {
        uint32_t x = w->addrs[j];
        if (x == 0)
            return -1;
        const mcr__entry *o = &w->e[x - 1];
        if (!w->gone[x - 1] && o->port == port && o->host_len == hl &&
            memcmp(o->host, host, hl) == 0)
            return (long)x - 1;
    }
}

static void work_insert(work *w, size_t i)
{
    const mcr__entry *x = &w->e[i];
    size_t j = (size_t)str_hash(x->id, strlen(x->id), FNV_OFFSET) & w->mask;
    while (w->ids[j] != 0)
        j = (j + 1) & w->mask;
    w->ids[j] = (uint32_t)i + 1;
    j = (size_t)str_hash(x->host, x->host_len, FNV_OFFSET ^ (uint64_t)x->port) & w->mask;
    while (w->addrs[j] != 0)
        j = (j + 1) & w->mask;
    w->addrs[j] = (uint32_t)i + 1;
}

static const char *const state_names[] = {"active", "draining", "down"};

/* jump: give work index i `target` buckets: cancel pending frees, append
 * new buckets at the end, or free its highest ones at the end. */
static int jump_set_weight(work *w, size_t i, uint32_t target, size_t k, const char *qid,
                           mcr_error *err)
{
    uint32_t eff = w->cnt[i] - w->drop[i];
    if (target <= eff) {
        w->drop[i] += eff - target;
        return MCR_OK;
    }
    uint32_t more = target - eff, back = more < w->drop[i] ? more : w->drop[i];
    w->drop[i] -= back;
    more -= back;
    if (w->nmap + more > MCR__JUMP_BUCKETS_MAX)
        return mcr__error(err, MCR_ERR_RANGE,
                          "change %zu: \"%s\": jump would have more than %u buckets", k, qid,
                          (unsigned)MCR__JUMP_BUCKETS_MAX);
    if (w->nmap + more > w->map_cap) {
        size_t cap = w->map_cap ? w->map_cap : 64;
        while (cap < w->nmap + more)
            cap *= 2;
        uint32_t *m = realloc(w->map, cap * sizeof(*m));
        if (m == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu buckets", cap);
        w->map = m;
        w->map_cap = cap;
    }
    for (uint32_t j = 0; j < more; j++)
        w->map[w->nmap++] = (uint32_t)i;
    w->cnt[i] += more;
    return MCR_OK;
}

/* Apply change c (number k, 1-based, for messages) to the working list. */
static int work_apply(work *w, const mcr_snapshot *old, const change *c, size_t k,
                      mcr_error *err)
{
    char q[80];
    const char *qid = mcr__quote(q, sizeof(q), c->id, strlen(c->id));

    if (c->kind == CH_ADD) {
        if (work_find_id(w, c->id) >= 0)
            return mcr__error(err, MCR_ERR_DUPLICATE, "change %zu: add \"%s\": id already present",
                              k, qid);
        if (work_find_addr(w, c->host, c->host_len, c->port) >= 0)
            return mcr__error(err, MCR_ERR_DUPLICATE,
                              "change %zu: add \"%s\": address %s%s%s:%d already present", k, qid,
                              memchr(c->host, ':', c->host_len) ? "[" : "", c->host,
                              memchr(c->host, ':', c->host_len) ? "]" : "", c->port);
        if (c->weight > mcr__weight_max(old->params.mode))
            return mcr__error(err, MCR_ERR_RANGE,
                              "change %zu: add \"%s\": weight %u is above %u, the limit of %s",
                              k, qid, (unsigned)c->weight,
                              (unsigned)mcr__weight_max(old->params.mode),
                              mcr_mode_name(old->params.mode));
        mcr__entry *x = &w->e[w->n];
        memset(x, 0, sizeof(*x));
        x->id = c->id;
        x->named = c->named;
        x->host = c->host;
        x->host_len = c->host_len;
        x->ipv6 = memchr(c->host, ':', c->host_len) != NULL;
        x->port = c->port;
        x->weight = c->weight;
        x->zone = c->zone;
        x->state = c->state;
        w->from[w->n] = -1;
        w->gone[w->n] = false;
        size_t xi = w->n++;
        work_insert(w, xi);
        if (old->params.mode != MCR_MODE_JUMP)
            return MCR_OK;
        w->cnt[xi] = w->drop[xi] = 0;
        long g = work_find_gone(w, c->id);
        if (g >= 0) { /* back under its id (a new address): its buckets */
            for (size_t b = 0; b < w->nmap; b++)
                if (w->map[b] == (uint32_t)g)
                    w->map[b] = (uint32_t)xi;
            w->cnt[xi] = w->cnt[g];
            w->drop[xi] = w->drop[g];
            w->cnt[g] = w->drop[g] = 0;
        }
        return jump_set_weight(w, xi, c->weight, k, qid, err);
    }
    long i = work_find_id(w, c->id);
    static const char *const verbs[] = {"add", "remove", "set weight of", "set state of",
                                        "move slots to"};
    if (i < 0)
        return mcr__error(err, MCR_ERR_UNKNOWN, "change %zu: %s \"%s\": no server has this id", k,
                          verbs[c->kind], qid);
    switch (c->kind) {
    case CH_REMOVE:
        w->gone[i] = true;
        break;
    case CH_WEIGHT:
        if (c->weight > mcr__weight_max(old->params.mode))
            return mcr__error(err, MCR_ERR_RANGE,
                              "change %zu: set weight of \"%s\": %u is above %u, the limit of %s",
                              k, qid, (unsigned)c->weight,
                              (unsigned)mcr__weight_max(old->params.mode),
                              mcr_mode_name(old->params.mode));
        w->e[i].weight = c->weight;
        if (old->params.mode == MCR_MODE_JUMP)
            return jump_set_weight(w, (size_t)i, c->weight, k, qid, err);
        break;
    case CH_SLOTS:
        if (old->params.mode != MCR_MODE_SLOTS)
            return mcr__error(err, MCR_ERR_INVALID,
                              "change %zu: move slots to \"%s\": the mode is %s, not slots", k,
                              qid, mcr_mode_name(old->params.mode));
        if (c->last >= w->nmap)
            return mcr__error(err, MCR_ERR_RANGE,
                              "change %zu: move slots %u-%u to \"%s\": there are %zu slots", k,
                              (unsigned)c->first, (unsigned)c->last, qid, w->nmap);
        for (uint32_t sl = c->first; sl <= c->last; sl++)
            w->map[sl] = (uint32_t)i;
        break;
    default:
        w->e[i].state = c->state;
        break;
    }
    return MCR_OK;
}

/* The end of a batch for the map modes. jump: the buckets of removed
 * servers and those a lower weight drops are freed, highest first, each by
 * moving the last bucket's server into it and dropping the last bucket.
 * slots: a slot of a removed server goes to the server re-added under its
 * id, or is an error (a hole for the planner). */
static int work_finish_map(work *w, const mcr_snapshot *old, mcr_error *err)
{
    char q[80];

    if (old->params.mode == MCR_MODE_JUMP) {
        for (size_t i = 0; i < w->n; i++)
            if (w->gone[i])
                w->drop[i] = w->cnt[i];
        bool *freed = calloc(w->nmap ? w->nmap : 1, sizeof(*freed));
        if (freed == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu buckets", w->nmap);
        for (size_t b = w->nmap; b-- > 0;) {
            uint32_t i = w->map[b];
            if (w->drop[i] > 0) {
                freed[b] = true;
                w->drop[i]--;
            }
        }
        /* Descending: every freed bucket above b is gone or refilled
         * already, so the last bucket, when above b, is one to keep. */
        size_t n = w->nmap;
        for (size_t b = w->nmap; b-- > 0;) {
            if (!freed[b])
                continue;
            if (b != n - 1)
                w->map[b] = w->map[n - 1];
            n--;
        }
        w->nmap = n;
        free(freed);
        return MCR_OK;
    }
    if (old->params.mode != MCR_MODE_SLOTS)
        return MCR_OK;
    long *heir = malloc((w->n ? w->n : 1) * sizeof(*heir));
    if (heir == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu servers", w->n);
    for (size_t i = 0; i < w->n; i++)
        heir[i] = w->gone[i] ? work_find_id(w, w->e[i].id) : (long)i;
    int rc = MCR_OK;
    for (size_t sl = 0; sl < w->nmap && rc == MCR_OK; sl++) {
        uint32_t i = w->map[sl];
        if (i == MCR__HOLE || heir[i] >= 0) {
            if (i != MCR__HOLE)
                w->map[sl] = (uint32_t)heir[i];
            continue;
        }
        if (w->orphans_ok) {
            w->map[sl] = MCR__HOLE;
            continue;
        }
        size_t end = sl;
        while (end + 1 < w->nmap && w->map[end + 1] == i)
            end++;
        rc = mcr__error(err, MCR_ERR_INVALID,
                        "slots %zu-%zu belong to \"%s\", which the changes remove: move its "
                        "slots to other servers first (mcr_changes_move_slots, mcr_slots_plan)",
                        sl, end, mcr__quote(q, sizeof(q), w->e[i].id, strlen(w->e[i].id)));
    }
    free(heir);
    return rc;
}

static void work_release(work *w)
{
    free(w->e);
    free(w->from);
    free(w->gone);
    free(w->ids);
    free(w->addrs);
    free(w->map);
    free(w->cnt);
    free(w->drop);
    memset(w, 0, sizeof(*w));
}

/* The working list of `old` with the changes of `ch` applied (entries not
 * compacted: removed ones are marked gone). */
static int work_run(const mcr_snapshot *old, const mcr_changes *ch, bool orphans_ok, work *w,
                    mcr_error *err)
{
    size_t adds = 0, cap;
    int rc = MCR_OK;

    memset(w, 0, sizeof(*w));
    w->orphans_ok = orphans_ok;
    for (size_t k = 0; k < ch->n; k++)
        adds += ch->v[k].kind == CH_ADD;
    cap = old->nservers + adds;
    w->e = malloc((cap > 0 ? cap : 1) * sizeof(*w->e));
    w->from = malloc((cap > 0 ? cap : 1) * sizeof(*w->from));
    w->gone = malloc((cap > 0 ? cap : 1) * sizeof(*w->gone));
    w->mask = map_cap(cap) - 1;
    w->ids = calloc(w->mask + 1, sizeof(*w->ids));
    w->addrs = calloc(w->mask + 1, sizeof(*w->addrs));
    bool has_map = mcr__mode_has_map(old->params.mode);
    if (has_map) {
        w->map_cap = old->nmap;
        w->map = malloc((old->nmap ? old->nmap : 1) * sizeof(*w->map));
        w->cnt = calloc(cap > 0 ? cap : 1, sizeof(*w->cnt));
        w->drop = calloc(cap > 0 ? cap : 1, sizeof(*w->drop));
    }
    if (w->e == NULL || w->from == NULL || w->gone == NULL || w->ids == NULL ||
        w->addrs == NULL || (has_map && (w->map == NULL || w->cnt == NULL || w->drop == NULL)))
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory applying changes");
    memcpy(w->e, old->servers, old->nservers * sizeof(*w->e));
    for (size_t i = 0; i < old->nservers; i++) {
        w->from[i] = (long)i;
        w->gone[i] = false;
        work_insert(w, i);
        if (has_map)
            w->cnt[i] = old->servers[i].owned;
    }
    w->n = old->nservers;
    if (has_map) {
        memcpy(w->map, old->map, old->nmap * sizeof(*w->map));
        w->nmap = old->nmap;
    }
    for (size_t k = 0; k < ch->n && rc == MCR_OK; k++)
        rc = work_apply(w, old, &ch->v[k], k + 1, err);
    if (rc == MCR_OK && has_map)
        rc = work_finish_map(w, old, err);
    return rc;
}

int mcr_snapshot_apply(const mcr_snapshot *old, const mcr_changes *ch, mcr_snapshot **out,
                       mcr_error *err)
{
    work w;
    int rc;

    if (old == NULL || ch == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL snapshot, changes or output");
    if (old->epoch == UINT64_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "epoch %llu cannot grow",
                          (unsigned long long)old->epoch);
    rc = work_run(old, ch, false, &w, err);
    if (rc != MCR_OK)
        goto out;

    /* Compact: the build takes the entries (and a reference to each cache)
     * and the map, renumbered. */
    uint32_t *newidx = w.map != NULL ? malloc((w.n ? w.n : 1) * sizeof(*newidx)) : NULL;
    if (w.map != NULL && newidx == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory applying changes");
        goto out;
    }
    size_t n = 0;
    for (size_t i = 0; i < w.n; i++) {
        if (w.gone[i])
            continue;
        if (newidx != NULL)
            newidx[i] = (uint32_t)n;
        w.e[n] = w.e[i];
        w.from[n] = w.from[i];
        pcache_ref(w.e[n].pc);
        n++;
    }
    for (size_t b = 0; b < w.nmap; b++)
        w.map[b] = newidx[w.map[b]];
    free(newidx);
    rc = mcr__snapshot_build(&old->params, w.e, n, w.from, old, old->epoch + 1, false, w.map,
                             w.nmap, out, err);
    w.e = NULL; /* taken over */
    w.map = NULL;
out:
    work_release(&w);
    return rc;
}

/* ------------------------------------------------------------ slot plans */

int mcr_slots_plan(const mcr_snapshot *snap, mcr_changes *ch, size_t *moved, mcr_error *err)
{
    work w;
    uint32_t *weight = NULL, *quota = NULL, *have = NULL, *give = NULL;
    size_t nmoved = 0, recorded;
    int rc;

    if (snap == NULL || ch == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL snapshot or changes");
    recorded = ch->n;
    if (snap->params.mode != MCR_MODE_SLOTS)
        return mcr__error(err, MCR_ERR_INVALID, "the snapshot's mode is %s, not slots",
                          mcr_mode_name(snap->params.mode));
    rc = work_run(snap, ch, true, &w, err);
    if (rc != MCR_OK)
        goto out;
    size_t n = w.n ? w.n : 1;
    weight = calloc(n, sizeof(*weight));
    quota = calloc(n, sizeof(*quota));
    have = calloc(n, sizeof(*have));
    give = malloc(w.nmap * sizeof(*give));
    if (weight == NULL || quota == NULL || have == NULL || give == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory planning slot moves");
        goto out;
    }
    /* Quotas by weight among the servers that stay and are not draining
     * (a DOWN server keeps its share: the fallback serves it meanwhile). */
    size_t eligible = 0;
    for (size_t i = 0; i < w.n; i++)
        if (!w.gone[i] && w.e[i].state != MCR_STATE_DRAINING) {
            weight[i] = w.e[i].weight;
            eligible++;
        }
    if (eligible == 0) {
        rc = mcr__error(err, MCR_ERR_EMPTY, "no server left to own the slots");
        goto out;
    }
    if (mcr__quotas(weight, w.n, (uint32_t)w.nmap, quota) != MCR_OK) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory planning slot moves");
        goto out;
    }
    for (size_t sl = 0; sl < w.nmap; sl++)
        if (w.map[sl] != MCR__HOLE)
            have[w.map[sl]]++;
    /* Donors give their highest slots beyond their quota; slots without an
     * owner go too. give[sl]: MCR__HOLE for a slot that stays. */
    for (size_t sl = w.nmap; sl-- > 0;) {
        uint32_t i = w.map[sl];
        give[sl] = MCR__HOLE;
        if (i == MCR__HOLE || have[i] > quota[i]) {
            give[sl] = 0;
            if (i != MCR__HOLE)
                have[i]--;
        }
    }
    /* Receivers, in snapshot order, take the donated slots in ascending
     * order until their quota: consecutive slots to one server, one move. */
    size_t r = 0;
    for (size_t sl = 0; sl < w.nmap; sl++) {
        if (give[sl] == MCR__HOLE)
            continue;
        while (r < w.n && have[r] >= quota[r])
            r++;
        if (r == w.n) { /* cannot happen: quotas add up to the slot count */
            rc = mcr__error(err, MCR_ERR_INVALID, "internal error: slot %zu has no taker", sl);
            goto out;
        }
        give[sl] = (uint32_t)r;
        have[r]++;
        nmoved++;
    }
    for (size_t sl = 0; sl < w.nmap && rc == MCR_OK; sl++) {
        if (give[sl] == MCR__HOLE)
            continue;
        size_t end = sl;
        while (end + 1 < w.nmap && give[end + 1] == give[sl])
            end++;
        rc = mcr_changes_move_slots(ch, (uint32_t)sl, (uint32_t)end, w.e[give[sl]].id, err);
        sl = end;
    }
    if (rc == MCR_OK && moved != NULL)
        *moved = nmoved;
    while (rc != MCR_OK && ch->n > recorded) /* nothing half done */
        change_free(&ch->v[--ch->n]);
out:
    free(weight);
    free(quota);
    free(have);
    free(give);
    work_release(&w);
    return rc;
}

const char *mcr__state_name(mcr_server_state st)
{
    return valid_state(st) ? state_names[st] : NULL;
}
