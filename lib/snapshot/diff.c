/* SPDX-License-Identifier: BSD-3-Clause */
/* diff.c: what moved between two snapshots: changed arcs, shares per server pair, per-key test. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement_internal.h"
#include "mcroute_snapshot.h"

/* Number of hash values: shares are counts over this. */
#define HASH_SPACE 4294967296.0
/* Both snapshots modula: ownership repeats every lcm(modulus, modulus) hash
 * values, and one period is walked run by run. Beyond this many values the
 * walk would take too long to be worth it (2^24 values: tens of ms). */
#define MODULA_PERIOD_MAX ((uint64_t)1 << 24)
/* A continuum against a modulus costs (continuum servers x modulus) steps;
 * beyond this the diff is refused rather than take seconds. */
#define MIXED_WORK_MAX ((uint64_t)1 << 26)
/* Marks "no server" in the old -> new index map. */
#define NONE MCR_NO_SERVER
/* "slots": the CRC-16 values a key can have. */
#define CRC_SPACE 65536.0
/* envoy-ring-hash: the key's XXH64, 2^64 values. */
#define WIDE_SPACE 18446744073709551616.0
/* The model diffs ("jump", "rendezvous") list every (from, to) pair with a
 * share; beyond this many the diff is refused rather than take seconds. */
#define MODEL_PAIRS_MAX ((uint64_t)1 << 24)

/* What a snapshot's owners are a function of, and so how a diff counts. */
typedef enum side_kind {
    SIDE_CONTINUUM, /* the 32-bit key hash, by a step function */
    SIDE_RESIDUES,  /* the 32-bit key hash, by its residue: modula, maglev */
    SIDE_JUMP,      /* jump: buckets, counted by the algorithm's model */
    SIDE_RENDEZVOUS,/* rendezvous: scores, counted by the model */
    SIDE_SLOTS,     /* slots: the key's CRC-16 */
    SIDE_WIDE       /* envoy-ring-hash: the key's XXH64, by a 64-bit continuum */
} side_kind;

/* One snapshot as the diff reads it: who owns each hash value. Ring servers
 * (the snapshot's active servers) are numbered as mcr_ring_find() does. */
typedef struct side {
    side_kind kind;
    const mcr_ring *ring;
    uint32_t nring;
    uint32_t *owner;     /* ring server -> owner key; equal keys on both
                            sides mean the same id (see owner_keys) */
    const char **id;     /* ring server -> its id, owned by the snapshot */
    /* Continuum modes: a step function, segment k covering the values
     * (end[k-1], end[k]] (from 0 for k == 0), the last ending at 2^32 - 1. */
    uint32_t *end;
    uint32_t *seg;       /* segment -> ring server owning it */
    size_t nseg;
    /* Residue modes: the owner of h is that of the block holding
     * h % period: block b covers the residues [block_end[b-1],
     * block_end[b]) and belongs to ring server block_srv[b]. */
    uint64_t period;     /* 0 unless SIDE_RESIDUES */
    uint64_t *block_end;
    uint32_t *block_srv;
    uint32_t nblocks;
    /* Jump and slots: the ring's table (ring indexes; jump: MCR__HOLE for
     * a bucket whose server is not active). */
    const uint32_t *table;
    size_t ntable;
} side;

/* Moved hash values per (old ring server, new ring server), open
 * addressing on the pair: a diff has at most a few entries per arc. */
typedef struct pair_slot {
    uint64_t key;        /* from << 32 | to, plus one; 0 = empty */
    double count;        /* hash values (a whole number, exact in a double
                            below 2^53), or a share (the model diffs) */
} pair_slot;

typedef struct pair_map {
    pair_slot *slots;
    size_t cap;          /* power of two, or 0 */
    size_t used;
} pair_map;

struct mcr_diff {
    mcr_snapshot *old_snap, *new_snap; /* references: ids point into them,
                                          and key_moved locates in them */
    uint32_t *old_to_new;   /* old snapshot index -> new snapshot index of
                               the same id, or NONE: makes key_moved O(1) */
    mcr_diff_arc *arcs;
    size_t narcs, arcs_cap;
    mcr_diff_pair *pairs;
    size_t npairs;
    double moved;           /* the share whose owner changed */
};

/* ------------------------------------------------------------ pair map */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* The (from, to) pair of a slot's key. */
static inline void pair_split(uint64_t key, uint32_t *x, uint32_t *y)
{
    *x = (uint32_t)((key - 1) >> 32);
    *y = (uint32_t)((key - 1) & UINT32_MAX);
}

static int pair_add(pair_map *m, uint32_t from, uint32_t to, double count)
{
    if (2 * (m->used + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        pair_slot *s = calloc(cap, sizeof(*s));
        if (s == NULL)
            return MCR_ERR_NOMEM;
        for (size_t i = 0; i < m->cap; i++) {
            if (m->slots[i].key == 0)
                continue;
            size_t j = (size_t)mix64(m->slots[i].key) & (cap - 1);
            while (s[j].key != 0)
                j = (j + 1) & (cap - 1);
            s[j] = m->slots[i];
        }
        free(m->slots);
        m->slots = s;
        m->cap = cap;
    }
    uint64_t key = ((uint64_t)from << 32 | to) + 1;
    size_t j = (size_t)mix64(key) & (m->cap - 1);
    while (m->slots[j].key != 0 && m->slots[j].key != key)
        j = (j + 1) & (m->cap - 1);
    if (m->slots[j].key == 0) {
        m->slots[j].key = key;
        m->used++;
    }
    m->slots[j].count += count;
    return MCR_OK;
}

/* ------------------------------------------------------------ sides */

static void side_release(side *s)
{
    free(s->owner);
    free(s->id);
    free(s->end);
    free(s->seg);
    free(s->block_end);
    free(s->block_srv);
}

/* The ids of the ring servers of `snap`, and their owner keys: for the new
 * snapshot its own index; for the old one the new index of the same id, or
 * (no such id in the new one) new_count + its old index, which matches no
 * new server. */
static int owner_keys(side *s, const mcr_snapshot *snap, const mcr_snapshot *new_snap,
                      int is_old, mcr_error *err)
{
    size_t new_count = mcr_snapshot_server_count(new_snap);

    s->owner = malloc(s->nring * sizeof(*s->owner));
    s->id = malloc(s->nring * sizeof(*s->id));
    if (s->owner == NULL || s->id == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %u servers", (unsigned)s->nring);
    for (uint32_t r = 0; r < s->nring; r++) {
        uint32_t i = mcr_snapshot_ring_server(snap, r);
        mcr_server_desc d;
        if (i == UINT32_MAX || mcr_snapshot_server(snap, i, &d) != MCR_OK)
            return mcr__error(err, MCR_ERR_INVALID,
                              "internal error: ring server %u has no snapshot server",
                              (unsigned)r);
        s->id[r] = d.id;
        if (!is_old) {
            s->owner[r] = i;
            continue;
        }
        uint32_t k = mcr_snapshot_find(new_snap, d.id);
        s->owner[r] = k != MCR_NO_SERVER ? (uint32_t)k : (uint32_t)(new_count + i);
    }
    return MCR_OK;
}

/* The continuum as a step function (see side). Among points of equal value
 * only the first owns anything, and the first point also owns the values
 * above the last one. */
static int u32_cmp(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* The step function of a continuum with another lookup rule (spymemcached:
 * of equal points the last; dalli: the predecessor). The owner can change
 * only just before or at a point's value, so the segments end at v - 1, v
 * and 2^32 - 1; each segment's owner is mcr_ring_find() of its end, and
 * neighbours with the same owner are merged. */
static int rule_steps(side *s, size_t np, mcr_error *err)
{
    uint32_t *c = malloc((2 * np + 1) * sizeof(*c));
    size_t nc = 0;

    if (c == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu points", np);
    for (size_t i = 0; i < np; i++) {
        uint32_t v;
        mcr_ring_point(s->ring, i, &v, NULL);
        if (v > 0)
            c[nc++] = v - 1;
        c[nc++] = v;
    }
    c[nc++] = UINT32_MAX;
    qsort(c, nc, sizeof(*c), u32_cmp);
    s->end = malloc((nc + 1) * sizeof(*s->end));
    s->seg = malloc((nc + 1) * sizeof(*s->seg));
    if (s->end == NULL || s->seg == NULL) {
        free(c);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu points", np);
    }
    size_t k = 0;
    for (size_t i = 0; i < nc; i++) {
        if (i > 0 && c[i] == c[i - 1])
            continue;
        uint32_t o = mcr_ring_find(s->ring, c[i]);
        if (k > 0 && s->seg[k - 1] == o) {
            s->end[k - 1] = c[i];
            continue;
        }
        s->end[k] = c[i];
        s->seg[k++] = o;
    }
    free(c);
    s->nseg = k;
    return MCR_OK;
}

static int continuum_steps(side *s, mcr_error *err)
{
    size_t np = mcr_ring_point_count(s->ring);

    if (np > 0 && !mcr__ring_rule_is_succ(s->ring))
        return rule_steps(s, np, err);

    s->end = malloc((np + 1) * sizeof(*s->end));
    s->seg = malloc((np + 1) * sizeof(*s->seg));
    if (s->end == NULL || s->seg == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu points", np);
    size_t k = 0;
    for (size_t i = 0; i < np; i++) {
        uint32_t v, srv;
        mcr_ring_point(s->ring, i, &v, &srv);
        if (k > 0 && s->end[k - 1] == v)
            continue; /* a tie: the earlier point owns it */
        s->end[k] = v;
        s->seg[k++] = srv;
    }
    if (k == 0) { /* no point at all: mcr_ring_find() answers server 0 */
        s->end[k] = UINT32_MAX;
        s->seg[k++] = 0;
    } else if (s->end[k - 1] != UINT32_MAX) {
        s->end[k] = UINT32_MAX; /* the wrap-around, back to the first point */
        s->seg[k] = s->seg[0];
        k++;
    }
    s->nseg = k;
    return MCR_OK;
}

/* The residue modes as blocks of residues (see side): "modula" is one
 * residue per server, "twemproxy-modula" `weight` residues per server,
 * "maglev" and php-memcache's buckets the runs of equal entries of their
 * tables. */
static int modula_blocks(side *s, mcr_error *err)
{
    size_t m;
    const uint32_t *t = mcr__ring_table(s->ring, &m);
    size_t cap = t != NULL ? m : s->nring;

    s->block_end = malloc(cap * sizeof(*s->block_end));
    s->block_srv = malloc(cap * sizeof(*s->block_srv));
    if (s->block_end == NULL || s->block_srv == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu residues", cap);
    uint64_t sum = 0;
    uint32_t k = 0;
    if (t != NULL) {
        for (size_t c = 0; c < m; c++) {
            if (k == 0 || s->block_srv[k - 1] != t[c])
                s->block_srv[k++] = t[c];
            s->block_end[k - 1] = ++sum;
        }
    } else {
        for (uint32_t b = 0; b < s->nring; b++) {
            sum += mcr__ring_residues(s->ring, b);
            s->block_end[k] = sum;
            s->block_srv[k++] = b;
        }
    }
    s->nblocks = k;
    s->period = sum;
    return MCR_OK;
}

static int side_init(side *s, const mcr_snapshot *snap, const mcr_snapshot *new_snap, int is_old,
                     mcr_error *err)
{
    memset(s, 0, sizeof(*s));
    s->ring = mcr_snapshot_ring(snap);
    s->nring = (uint32_t)mcr_ring_server_count(s->ring);
    if (s->ring == NULL || s->nring == 0)
        return mcr__error(err, MCR_ERR_INVALID, "internal error: a snapshot without a ring");
    int rc = owner_keys(s, snap, new_snap, is_old, err);
    if (rc != MCR_OK)
        return rc;
    switch (mcr__ring_shape(s->ring)) {
    case MCR__SHAPE_RESIDUES:
        s->kind = SIDE_RESIDUES;
        return modula_blocks(s, err);
    case MCR__SHAPE_SLOTS:
        s->kind = SIDE_SLOTS;
        s->table = mcr__ring_table(s->ring, &s->ntable);
        return MCR_OK;
    case MCR__SHAPE_JUMP:
        s->kind = SIDE_JUMP;
        s->table = mcr__ring_table(s->ring, &s->ntable);
        /* lookups jump over the buckets up to the last that is not a hole */
        while (s->ntable > 1 && s->table[s->ntable - 1] == MCR__HOLE)
            s->ntable--;
        return MCR_OK;
    case MCR__SHAPE_WIDE: /* envoy-ring-hash: its points are read as they are */
        s->kind = SIDE_WIDE;
        return MCR_OK;
    case MCR__SHAPE_SCORES: /* rendezvous, pymemcache: a race of scores */
        s->kind = SIDE_RENDEZVOUS;
        return MCR_OK;
    case MCR__SHAPE_CONTINUUM:
    default:
        s->kind = SIDE_CONTINUUM;
        return continuum_steps(s, err);
    }
}

/* ------------------------------------------------------------ building */

static int add_arc(mcr_diff *d, uint32_t first, uint32_t last, const char *from, const char *to)
{
    if (d->narcs > 0) {
        mcr_diff_arc *a = &d->arcs[d->narcs - 1];
        /* Same ring servers give the same id pointers. */
        if (a->last + 1 == first && a->from == from && a->to == to) {
            a->last = last;
            return MCR_OK;
        }
    }
    if (d->narcs == d->arcs_cap) {
        size_t cap = d->arcs_cap ? 2 * d->arcs_cap : 64;
        mcr_diff_arc *a = realloc(d->arcs, cap * sizeof(*a));
        if (a == NULL)
            return MCR_ERR_NOMEM;
        d->arcs = a;
        d->arcs_cap = cap;
    }
    d->arcs[d->narcs++] = (mcr_diff_arc){.first = first, .last = last, .from = from, .to = to};
    return MCR_OK;
}

/* Two continua: merge their step functions. Each step of the merge is a
 * range where both owners are constant; the ranges cover [0, 2^32) once. */
static int diff_continua(mcr_diff *d, const side *a, const side *b, pair_map *pm)
{
    uint64_t cur = 0;
    size_t ia = 0, ib = 0;

    while (cur <= UINT32_MAX) {
        uint32_t e = a->end[ia] < b->end[ib] ? a->end[ia] : b->end[ib];
        uint32_t oa = a->seg[ia], ob = b->seg[ib];
        if (a->owner[oa] != b->owner[ob]) {
            if (add_arc(d, (uint32_t)cur, e, a->id[oa], b->id[ob]) != MCR_OK ||
                pair_add(pm, oa, ob, (double)((uint64_t)e - cur + 1)) != MCR_OK)
                return MCR_ERR_NOMEM;
        }
        if (a->end[ia] == e)
            ia++;
        if (b->end[ib] == e)
            ib++;
        cur = (uint64_t)e + 1;
    }
    return MCR_OK;
}

static uint64_t gcd64(uint64_t x, uint64_t y)
{
    while (y != 0) {
        uint64_t t = x % y;
        x = y;
        y = t;
    }
    return x;
}

/* Two modula snapshots. Owners repeat every L = lcm of the two periods:
 * [0, 2^32) is q whole periods and the first r values of one more, so a
 * run [h, next) of one period with both owners constant stands for
 * q * (next - h) values plus its overlap with [0, r). */
static int diff_modula(const side *a, const side *b, pair_map *pm, mcr_error *err)
{
    uint64_t g = gcd64(a->period, b->period);
    uint64_t la = a->period / g;
    if (la > MODULA_PERIOD_MAX / b->period)
        return mcr__error(err, MCR_ERR_UNSUPPORTED,
                          "modula diff: ownership repeats only every %llu x %llu hash "
                          "values, too long to count (at most %llu)",
                          (unsigned long long)la, (unsigned long long)b->period,
                          (unsigned long long)MODULA_PERIOD_MAX);
    uint64_t period = la * b->period;
    uint64_t q = ((uint64_t)1 << 32) / period, r = ((uint64_t)1 << 32) % period;
    uint64_t h = 0, ra = 0, rb = 0; /* h % a->period, h % b->period */
    uint32_t ba = 0, bb = 0;        /* the blocks holding them */

    while (h < period) {
        uint64_t next = h + (a->block_end[ba] - ra);
        uint64_t nb = h + (b->block_end[bb] - rb);
        if (nb < next)
            next = nb;
        uint64_t len = next - h;
        uint32_t sa = a->block_srv[ba], sb = b->block_srv[bb];
        if (a->owner[sa] != b->owner[sb]) {
            uint64_t tail = next <= r ? len : (h < r ? r - h : 0);
            if (pair_add(pm, sa, sb, (double)(q * len + tail)) != MCR_OK)
                return mcr__error(err, MCR_ERR_NOMEM, "out of memory counting a modula diff");
        }
        ra += len;
        rb += len;
        if (ra == a->block_end[ba] && ++ba == a->nblocks)
            ba = 0, ra = 0;
        if (rb == b->block_end[bb] && ++bb == b->nblocks)
            bb = 0, rb = 0;
        h = next;
    }
    return MCR_OK;
}

/* Two 64-bit continua (envoy-ring-hash): the owner of h is the first point
 * >= h, wrapping. Walk the union of both rings' points: each segment
 * (lo, x] between consecutive ones has one owner on each side, the next
 * point of each; the segment that wraps past the last point and up to the
 * first belongs to point 0 of each. Counts are exact up to the double's
 * rounding of each segment. */
static int diff_wide(const side *a, const side *b, pair_map *pm, mcr_error *err)
{
    const uint32_t *sa, *sb;
    size_t na, nb, i = 0, j = 0;
    const uint64_t *va = mcr__ring_wide(a->ring, &sa, &na);
    const uint64_t *vb = mcr__ring_wide(b->ring, &sb, &nb);
    if (na == 0 || nb == 0)
        return mcr__error(err, MCR_ERR_INVALID, "internal error: a 64-bit ring without points");
    uint64_t first = va[0] < vb[0] ? va[0] : vb[0];
    uint64_t last = va[na - 1] > vb[nb - 1] ? va[na - 1] : vb[nb - 1];
    uint64_t lo = first;
    double wrap = first == last ? WIDE_SPACE : (double)(uint64_t)(first - last);
    if (a->owner[sa[0]] != b->owner[sb[0]] && pair_add(pm, sa[0], sb[0], wrap) != MCR_OK)
        return MCR_ERR_NOMEM;
    for (;;) {
        while (i < na && va[i] <= lo)
            i++;
        while (j < nb && vb[j] <= lo)
            j++;
        if (i == na && j == nb)
            break;
        uint64_t x = j == nb || (i < na && va[i] <= vb[j]) ? va[i] : vb[j];
        uint32_t oa = sa[i < na ? i : 0], ob = sb[j < nb ? j : 0];
        if (a->owner[oa] != b->owner[ob] && pair_add(pm, oa, ob, (double)(x - lo)) != MCR_OK)
            return MCR_ERR_NOMEM;
        lo = x;
    }
    return MCR_OK;
}

/* A continuum `c` against a modula snapshot `m`. For each continuum server,
 * count how many of its hash values fall on each residue: a segment of
 * length len covers every residue len / period times, plus a cyclic run of
 * len % period residues, added to a difference array. Then each modula
 * block sums its residues. Steps: segments + continuum servers x period. */
static int diff_mixed(const side *c, const side *m, int modula_is_old, pair_map *pm,
                      mcr_error *err)
{
    uint64_t p = m->period;
    if (p > MIXED_WORK_MAX / c->nring)
        return mcr__error(err, MCR_ERR_UNSUPPORTED,
                          "diff of a continuum of %u servers and a modulus of %llu: "
                          "too long to count (at most %llu steps)",
                          (unsigned)c->nring, (unsigned long long)p,
                          (unsigned long long)MIXED_WORK_MAX);

    /* Segments grouped by owner (a counting sort). */
    size_t *first = calloc((size_t)c->nring + 1, sizeof(*first));
    size_t *order = malloc(c->nseg * sizeof(*order));
    int64_t *delta = malloc(((size_t)p + 1) * sizeof(*delta));
    uint64_t *count = malloc(m->nblocks * sizeof(*count));
    int rc = MCR_OK;
    if (first == NULL || order == NULL || delta == NULL || count == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory counting a modula diff");
        goto done;
    }
    for (size_t k = 0; k < c->nseg; k++)
        first[c->seg[k] + 1]++;
    for (uint32_t o = 0; o < c->nring; o++)
        first[o + 1] += first[o];
    for (size_t k = 0; k < c->nseg; k++)
        order[first[c->seg[k]]++] = k;
    for (uint32_t o = c->nring; o > 0; o--) /* restore the starts */
        first[o] = first[o - 1];
    first[0] = 0;

    for (uint32_t o = 0; o < c->nring; o++) {
        if (first[o] == first[o + 1])
            continue; /* owns nothing */
        uint64_t whole = 0;
        memset(delta, 0, ((size_t)p + 1) * sizeof(*delta));
        for (size_t x = first[o]; x < first[o + 1]; x++) {
            size_t k = order[x];
            uint64_t s = k == 0 ? 0 : (uint64_t)c->end[k - 1] + 1;
            uint64_t len = (uint64_t)c->end[k] - s + 1;
            uint64_t rem = len % p, rs = s % p;
            whole += len / p;
            if (rem == 0)
                continue;
            delta[rs]++;
            if (rs + rem <= p) {
                delta[rs + rem]--;
            } else {
                delta[p]--;
                delta[0]++;
                delta[rs + rem - p]--;
            }
        }
        int64_t run = 0;
        uint32_t b = 0;
        memset(count, 0, m->nblocks * sizeof(*count));
        for (uint64_t res = 0; res < p; res++) {
            run += delta[res];
            if (res == m->block_end[b])
                b++;
            count[b] += whole + (uint64_t)run;
        }
        for (b = 0; b < m->nblocks; b++) {
            uint32_t sv = m->block_srv[b];
            if (count[b] == 0 || m->owner[sv] == c->owner[o])
                continue;
            rc = modula_is_old ? pair_add(pm, sv, o, (double)count[b])
                               : pair_add(pm, o, sv, (double)count[b]);
            if (rc != MCR_OK) {
                rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory counting a modula diff");
                goto done;
            }
        }
    }
done:
    free(first);
    free(order);
    free(delta);
    free(count);
    return rc;
}

/* Two "slots" snapshots: every CRC-16 value, each owned by the owner of
 * its slot (value mod slot count) on each side. */
static int diff_slots(const side *a, const side *b, pair_map *pm)
{
    for (uint32_t c = 0; c < (uint32_t)CRC_SPACE; c++) {
        uint32_t oa = a->table[c % a->ntable], ob = b->table[c % b->ntable];
        if (a->owner[oa] != b->owner[ob] && pair_add(pm, oa, ob, 1.0) != MCR_OK)
            return MCR_ERR_NOMEM;
    }
    return MCR_OK;
}

/* Two "jump" snapshots, by the algorithm's model: a key's jump lands in
 * each of B buckets with probability 1/B, independently for each of the
 * keys it tries after a hole. With B1 <= B2 buckets (else the same with the
 * sides swapped), one try gives buckets (j, j) with probability 1/B2 for
 * j < B1, and (i, j) with probability 1/(B1 B2) for i < B1 <= j < B2:
 * jump's monotonicity. Call p(x, y) that distribution over the servers of
 * the buckets, H standing for a hole. A key ends on (a, b) when one try
 * gives (a, b); or gives (a, H) and the later tries give b on side 2 alone,
 * with probability q2(b) = p2(b) / (1 - p2(H)) (p2 the marginal); or
 * (H, b) likewise; or (H, H) and it all starts again:
 *
 *   P(a, b) = (p(a, b) + p(a, H) q2(b) + p(H, b) q1(a)) / (1 - p(H, H)).
 *
 * (The lookup's last resort after 64 holes in a row is left out: it
 * weighs less than 2^-64 once holes are under half the buckets.) */
/* One try of the jump model: into *joint, the probability of each pair
 * (x, y) of ring servers of sides a and b, H (nring) standing for a hole.
 * MCR_OK, MCR_ERR_NOMEM, or MCR_ERR_UNSUPPORTED (too many pairs, in *err). */
static int jump_try_joint(const side *a, const side *b, pair_map *joint, mcr_error *err)
{
    const side *sm = a->ntable <= b->ntable ? a : b, *lg = sm == a ? b : a;
    double bs = (double)sm->ntable, bl = (double)lg->ntable;
    uint32_t ha = a->nring, hb = b->nring;
    double *cs = calloc((size_t)sm->nring + 1, sizeof(*cs));
    double *cl = calloc((size_t)lg->nring + 1, sizeof(*cl));
    int rc = MCR_OK;

    if (cs == NULL || cl == NULL)
        goto nomem;
    /* the shared buckets, then the product part */
    for (size_t j = 0; j < sm->ntable; j++) {
        uint32_t x = a->table[j] == MCR__HOLE ? ha : a->table[j];
        uint32_t y = b->table[j] == MCR__HOLE ? hb : b->table[j];
        if (pair_add(joint, x, y, 1.0 / bl) != MCR_OK)
            goto nomem;
        cs[sm->table[j] == MCR__HOLE ? sm->nring : sm->table[j]] += 1.0;
    }
    for (size_t j = sm->ntable; j < lg->ntable; j++)
        cl[lg->table[j] == MCR__HOLE ? lg->nring : lg->table[j]] += 1.0;
    uint64_t ns = 0, nl = 0;
    for (uint32_t x = 0; x <= sm->nring; x++)
        ns += cs[x] > 0;
    for (uint32_t y = 0; y <= lg->nring; y++)
        nl += cl[y] > 0;
    if (ns * nl > MODEL_PAIRS_MAX) {
        rc = mcr__error(err, MCR_ERR_UNSUPPORTED,
                        "jump diff: too many pairs of servers to weigh (more than %llu)",
                        (unsigned long long)MODEL_PAIRS_MAX);
        goto out;
    }
    for (uint32_t x = 0; x <= sm->nring && nl > 0; x++) {
        if (cs[x] == 0)
            continue;
        for (uint32_t y = 0; y <= lg->nring; y++) {
            if (cl[y] == 0)
                continue;
            double w = cs[x] * cl[y] / (bs * bl);
            if ((sm == a ? pair_add(joint, x, y, w) : pair_add(joint, y, x, w)) != MCR_OK)
                goto nomem;
        }
    }
    goto out;
nomem:
    rc = MCR_ERR_NOMEM;
out:
    free(cs);
    free(cl);
    return rc;
}

static int diff_jump(const side *a, const side *b, pair_map *pm, mcr_error *err)
{
    uint32_t ha = a->nring, hb = b->nring; /* H on each side */
    double *pa = calloc((size_t)ha + 1, sizeof(*pa)), *pb = calloc((size_t)hb + 1, sizeof(*pb));
    pair_map joint = {NULL, 0, 0};
    int rc = MCR_OK;

    if (pa == NULL || pb == NULL)
        goto nomem;
    for (size_t j = 0; j < a->ntable; j++)
        pa[a->table[j] == MCR__HOLE ? ha : a->table[j]] += 1.0 / (double)a->ntable;
    for (size_t j = 0; j < b->ntable; j++)
        pb[b->table[j] == MCR__HOLE ? hb : b->table[j]] += 1.0 / (double)b->ntable;
    rc = jump_try_joint(a, b, &joint, err);
    if (rc == MCR_ERR_NOMEM)
        goto nomem;
    if (rc != MCR_OK)
        goto out;
    /* The final owners: each (a, H) try pairs with every server of side
     * 2, each (H, b) with every server of side 1. */
    double phh = 0;
    uint64_t work = 0, s1 = 0, s2 = 0;
    for (uint32_t z = 0; z < ha; z++)
        s1 += pa[z] > 0;
    for (uint32_t z = 0; z < hb; z++)
        s2 += pb[z] > 0;
    for (size_t i = 0; i < joint.cap; i++) {
        uint64_t k = joint.slots[i].key;
        if (k == 0)
            continue;
        uint32_t x, y;
        pair_split(k, &x, &y);
        if (x == ha && y == hb)
            phh = joint.slots[i].count;
        work += x == ha ? (y == hb ? 0 : s1) : y == hb ? s2 : 1;
    }
    if (work > MODEL_PAIRS_MAX)
        goto too_many;
    double stay = 1.0 - phh;
    for (size_t i = 0; i < joint.cap; i++) {
        const pair_slot *sl = &joint.slots[i];
        if (sl->key == 0 || sl->count <= 0)
            continue;
        uint32_t x, y;
        pair_split(sl->key, &x, &y);
        if (x < ha && y < hb) {
            if (a->owner[x] != b->owner[y] && pair_add(pm, x, y, sl->count / stay) != MCR_OK)
                goto nomem;
        } else if (x < ha && y == hb) { /* side 2 tries again */
            for (uint32_t z = 0; z < hb; z++)
                if (pb[z] > 0 && a->owner[x] != b->owner[z] &&
                    pair_add(pm, x, z, sl->count * pb[z] / (1.0 - pb[hb]) / stay) != MCR_OK)
                    goto nomem;
        } else if (x == ha && y < hb) { /* side 1 tries again */
            for (uint32_t z = 0; z < ha; z++)
                if (pa[z] > 0 && a->owner[z] != b->owner[y] &&
                    pair_add(pm, z, y, sl->count * pa[z] / (1.0 - pa[ha]) / stay) != MCR_OK)
                    goto nomem;
        }
    }
    goto out;
too_many:
    rc = mcr__error(err, MCR_ERR_UNSUPPORTED,
                    "jump diff: too many pairs of servers to weigh (more than %llu)",
                    (unsigned long long)MODEL_PAIRS_MAX);
    goto out;
nomem:
    rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory counting a jump diff");
out:
    free(pa);
    free(pb);
    free(joint.slots);
    return rc;
}


/* What a side ends on when it goes on alone after a try the other side
 * accepted: G(x) = sum over t = 1..T-1 of D^(t-1) F_(T-t)(x), F_k the
 * distribution of k tries of its own (accepted at x, or all refused and
 * the last at x). Into g[0..n). */
static void wch3_alone(const double *acc, uint32_t n, double dd, double *g)
{
    double rho = 0;
    for (uint32_t x = 0; x < n; x++)
        rho += acc[x] / n;
    /* F_k(x) = acc/n sum_{s<k} (1-rho)^s + (1-rho)^(k-1) (1-acc)/n */
    double c1 = 0, c2 = 0, dpow = 1;
    for (int t = 1; t < MCR_WCH3_TRIES; t++) {
        int k = MCR_WCH3_TRIES - t;
        double geo = 0, q = 1;
        for (int s = 0; s < k; s++, q *= 1.0 - rho)
            geo += q;
        c1 += dpow * geo;
        c2 += dpow * pow(1.0 - rho, k - 1);
        dpow *= dd;
    }
    for (uint32_t x = 0; x < n; x++)
        g[x] = (c1 * acc[x] + c2 * (1.0 - acc[x])) / n;
}

/* Two "mcrouter-wch3" snapshots, by the model. A try is a furc on both
 * sides (jump_try_joint: pairs (x, y) with probability J(x, y), the
 * servers the buckets, no hole) and
 * one SpookyHash value u, uniform, the same on both sides (the same salted
 * key): side a accepts when u < A_x, side b when u < B_y (the thresholds
 * over 2^32). Tries are independent. While both refuse, both go on with
 * the same salts; once one side accepts, the other goes on alone; after 32
 * tries a side that accepted none ends on its last try's server. So
 *
 *   P(x, y) = S AA(x, y) + AR(x) G_b(y) + RA(y) G_a(x)
 *             + D^31 (AR + RA + RR)(x, y),
 *
 * AA = J min(A, B), AR = J max(0, A - B) (as a marginal AR(x): a accepts,
 * b refuses), RA likewise, RR = J (1 - max(A, B)), D = sum of RR (both
 * refuse), S = sum of D^(t-1) over the 32 tries, G as wch3_alone says. */
static int diff_wch3(const side *a, const side *b, pair_map *pm, mcr_error *err)
{
    uint32_t na = a->nring, nb = b->nring;
    const uint32_t *ta = mcr__ring_accept(a->ring), *tb = mcr__ring_accept(b->ring);
    double *al = malloc((size_t)na * sizeof(*al)), *be = malloc((size_t)nb * sizeof(*be));
    double *arx = calloc(na, sizeof(*arx)), *ray = calloc(nb, sizeof(*ray));
    double *ga = calloc(na, sizeof(*ga)), *gb = calloc(nb, sizeof(*gb));
    pair_map joint = {NULL, 0, 0};
    double dd = 0;
    int rc = MCR_OK;

    if (ta == NULL || tb == NULL || a->ntable != na || b->ntable != nb) {
        rc = mcr__error(err, MCR_ERR_INVALID, "internal error: a WeightedCh3 ring without weights");
        goto out;
    }
    if (al == NULL || be == NULL || arx == NULL || ray == NULL || ga == NULL || gb == NULL)
        goto nomem;
    if ((uint64_t)na * nb * 2 > MODEL_PAIRS_MAX) {
        rc = mcr__error(err, MCR_ERR_UNSUPPORTED,
                        "WeightedCh3 diff: too many pairs of servers to weigh (more than %llu)",
                        (unsigned long long)MODEL_PAIRS_MAX);
        goto out;
    }
    for (uint32_t x = 0; x < na; x++)
        al[x] = ta[x] / HASH_SPACE;
    for (uint32_t y = 0; y < nb; y++)
        be[y] = tb[y] / HASH_SPACE;
    rc = jump_try_joint(a, b, &joint, err); /* the tables: every server a bucket */
    if (rc == MCR_ERR_NOMEM)
        goto nomem;
    if (rc != MCR_OK)
        goto out;
    for (size_t i = 0; i < joint.cap; i++) {
        uint64_t k = joint.slots[i].key;
        if (k == 0)
            continue;
        uint32_t x, y;
        pair_split(k, &x, &y);
        double p = joint.slots[i].count;
        double hi = al[x] > be[y] ? al[x] : be[y];
        dd += p * (1.0 - hi);
        arx[x] += p * (al[x] > be[y] ? al[x] - be[y] : 0);
        ray[y] += p * (be[y] > al[x] ? be[y] - al[x] : 0);
    }
    double sum = 0, last = pow(dd, MCR_WCH3_TRIES - 1), dpow = 1;
    for (int t = 0; t < MCR_WCH3_TRIES; t++, dpow *= dd)
        sum += dpow;
    wch3_alone(al, na, dd, ga);
    wch3_alone(be, nb, dd, gb);
    for (size_t i = 0; i < joint.cap; i++) {
        uint64_t k = joint.slots[i].key;
        if (k == 0)
            continue;
        uint32_t x, y;
        pair_split(k, &x, &y);
        double p = joint.slots[i].count;
        double lo = al[x] < be[y] ? al[x] : be[y];
        /* both accept on the same try; or the last try decides either side
         * or neither (AR + RA + RR = 1 - min) */
        double w = p * (sum * lo + last * (1.0 - lo));
        if (a->owner[x] != b->owner[y] && w > 0 && pair_add(pm, x, y, w) != MCR_OK)
            goto nomem;
    }
    for (uint32_t x = 0; x < na; x++) {
        for (uint32_t y = 0; y < nb; y++) {
            double w = arx[x] * gb[y] + ray[y] * ga[x];
            if (a->owner[x] != b->owner[y] && w > 0 && pair_add(pm, x, y, w) != MCR_OK)
                goto nomem;
        }
    }
    goto out;
nomem:
    rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory counting a WeightedCh3 diff");
out:
    free(al);
    free(be);
    free(arx);
    free(ray);
    free(ga);
    free(gb);
    free(joint.slots);
    return rc;
}

/* One server of a rendezvous diff: its weights in both snapshots (0 where
 * it is absent or not active), its ring index on each side, and its ratio
 * old / new weight (0: added; INFINITY: removed). */
typedef struct rdv_srv {
    double wa, wb, ratio;
    uint32_t ra, rb;
} rdv_srv;

static int ratio_cmp(const void *x, const void *y)
{
    const rdv_srv *a = x, *b = y;
    return (a->ratio > b->ratio) - (a->ratio < b->ratio);
}

/* Two "rendezvous" snapshots, by the exponential race the logarithmic
 * method realizes: server k's time E_k / w_k, E_k exponential with mean 1
 * and the same in both snapshots (it hashes the key and the id), the
 * lowest wins. Keys go from i to j when i wins with the old weights a and j
 * with the new ones b. Writing x for i's old time, y = r x for j's new one
 * and integrating x out:
 *
 *   P(i -> j) = a_i b_j  integral over a_j/b_j < r < a_i/b_i of dr / G(r)^2,
 *   G(r) = sum over all servers k of max(a_k, b_k r),
 *
 * G is piecewise linear between the ratios a_k/b_k, so the integral is a
 * difference of F(r) = integral from 0 to r of dr / G^2, summed exactly
 * interval by interval: (r1 - r0) / (G(r0) G(r1)). */
static int diff_rendezvous(const mcr_snapshot *old, const mcr_snapshot *new_snap, const side *a,
                           const side *b, pair_map *pm, mcr_error *err)
{
    size_t nnew = mcr_snapshot_server_count(new_snap), nold = mcr_snapshot_server_count(old);
    size_t cap = nnew + nold;
    rdv_srv *v = calloc(cap ? cap : 1, sizeof(*v));
    double *f = NULL;
    int rc = MCR_OK;

    if (v == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory counting a rendezvous diff");
    /* Owner keys index the servers: new snapshot index, or nnew + old
     * index for an id the new snapshot lacks. */
    for (size_t k = 0; k < cap; k++)
        v[k].ra = v[k].rb = UINT32_MAX;
    for (uint32_t r = 0; r < a->nring; r++) {
        v[a->owner[r]].wa = mcr_ring_server_weight(a->ring, r);
        v[a->owner[r]].ra = r;
    }
    for (uint32_t r = 0; r < b->nring; r++) {
        v[b->owner[r]].wb = mcr_ring_server_weight(b->ring, r);
        v[b->owner[r]].rb = r;
    }
    size_t n = 0;
    for (size_t k = 0; k < cap; k++) {
        if (v[k].wa == 0 && v[k].wb == 0)
            continue;
        v[n] = v[k];
        v[n].ratio = v[n].wb == 0 ? INFINITY : v[n].wa / v[n].wb;
        n++;
    }
    qsort(v, n, sizeof(*v), ratio_cmp);
    /* Pairs: i (old weight) to j (new weight) with ratio_j < ratio_i. */
    uint64_t pairs = 0, lower = 0;
    for (size_t i = 0, j = 0; i < n; i++) {
        for (; j < n && v[j].ratio < v[i].ratio; j++)
            lower += v[j].wb > 0;
        pairs += v[i].wa > 0 ? lower : 0;
    }
    if (pairs > MODEL_PAIRS_MAX) {
        rc = mcr__error(err, MCR_ERR_UNSUPPORTED,
                        "rendezvous diff: %llu pairs of servers to weigh, more than %llu",
                        (unsigned long long)pairs, (unsigned long long)MODEL_PAIRS_MAX);
        goto out;
    }
    /* F at each server's ratio. Below ratio r, G(r) = alpha + beta r with
     * alpha the old weights of the servers whose ratio is above r, beta the
     * new weights of those at or below. */
    f = malloc((n ? n : 1) * sizeof(*f));
    if (f == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory counting a rendezvous diff");
        goto out;
    }
    double alpha = 0, beta = 0, r0 = 0, F = 0;
    for (size_t k = 0; k < n; k++)
        alpha += v[k].wa;
    for (size_t k = 0; k < n;) {
        double r1 = v[k].ratio;
        if (r1 > r0) {
            if (isinf(r1)) /* the tail to infinity: 1 / (beta G(r0)) */
                F += 1.0 / (beta * (alpha + beta * r0));
            else
                F += (r1 - r0) / ((alpha + beta * r0) * (alpha + beta * r1));
            r0 = r1;
        }
        size_t e = k;
        for (; e < n && v[e].ratio == r1; e++) {
            f[e] = F;
            alpha -= v[e].wa;
            beta += v[e].wb;
        }
        k = e;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i].wa == 0)
            continue;
        for (size_t j = 0; j < n && v[j].ratio < v[i].ratio; j++) {
            if (v[j].wb == 0)
                continue;
            double share = v[i].wa * v[j].wb * (f[i] - f[j]);
            if (share > 0 && pair_add(pm, v[i].ra, v[j].rb, share) != MCR_OK) {
                rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory counting a rendezvous diff");
                goto out;
            }
        }
    }
out:
    free(v);
    free(f);
    return rc;
}

/* Largest first; equal shares by ids, so the order is reproducible. */
static int pair_cmp(const void *x, const void *y)
{
    const mcr_diff_pair *a = x, *b = y;
    if (a->fraction != b->fraction)
        return a->fraction > b->fraction ? -1 : 1;
    int c = strcmp(a->from, b->from);
    return c != 0 ? c : strcmp(a->to, b->to);
}

/* The pairs, each count divided by `space` (the size of what was
 * counted; 1 for shares), and the moved share: their sum, in the pairs'
 * order, so that summing them again gives it exactly. */
static int collect_pairs(mcr_diff *d, const pair_map *pm, const side *a, const side *b,
                         double space)
{
    d->pairs = malloc((pm->used ? pm->used : 1) * sizeof(*d->pairs));
    if (d->pairs == NULL)
        return MCR_ERR_NOMEM;
    d->moved = 0;
    for (size_t i = 0; i < pm->cap; i++) {
        const pair_slot *s = &pm->slots[i];
        if (s->key == 0 || !(s->count > 0))
            continue;
        uint64_t k = s->key - 1;
        mcr_diff_pair *p = &d->pairs[d->npairs++];
        p->from = a->id[k >> 32];
        p->to = b->id[k & UINT32_MAX];
        p->fraction = s->count / space;
    }
    qsort(d->pairs, d->npairs, sizeof(*d->pairs), pair_cmp);
    for (size_t i = 0; i < d->npairs; i++)
        d->moved += d->pairs[i].fraction;
    return MCR_OK;
}

/* Whether two sides count the same thing, and over what. */
static int comparable(const side *a, const side *b, double *space)
{
    bool hash_a = a->kind == SIDE_CONTINUUM || a->kind == SIDE_RESIDUES;
    bool hash_b = b->kind == SIDE_CONTINUUM || b->kind == SIDE_RESIDUES;
    *space = a->kind == SIDE_SLOTS ? CRC_SPACE : hash_a ? HASH_SPACE : 1.0;
    /* two races compare only with the same scores */
    if (a->kind == SIDE_RENDEZVOUS && b->kind == SIDE_RENDEZVOUS)
        return mcr_ring_mode(a->ring) == mcr_ring_mode(b->ring);
    /* jump buckets too: "jump", "memcached-proxy-jump", "mcrouter-ch3"
     * and "mcrouter-wch3" send a key to unrelated buckets */
    if (a->kind == SIDE_JUMP && b->kind == SIDE_JUMP)
        return mcr_ring_mode(a->ring) == mcr_ring_mode(b->ring);
    /* 64-bit continua compare with each other only, over 2^64 values
     * (no arcs: those are 32-bit) */
    if (a->kind == SIDE_WIDE || b->kind == SIDE_WIDE) {
        *space = WIDE_SPACE;
        return a->kind == b->kind;
    }
    /* envoy-maglev's entries are residues of the key's XXH64: they compare
     * with each other's only */
    if ((mcr_ring_mode(a->ring) == MCR_MODE_ENVOY_MAGLEV) !=
            (mcr_ring_mode(b->ring) == MCR_MODE_ENVOY_MAGLEV))
        return 0;
    return (hash_a && hash_b) || a->kind == b->kind;
}

static const char *const side_names[] = {"a continuum", "a residue table", "jump buckets",
                                          "rendezvous scores", "slots",
                                          "a 64-bit continuum"};

/* old snapshot index -> new snapshot index of the same id. */
static int index_map(mcr_diff *d, const mcr_snapshot *old, const mcr_snapshot *new_snap,
                     mcr_error *err)
{
    size_t n = mcr_snapshot_server_count(old);
    d->old_to_new = malloc((n ? n : 1) * sizeof(*d->old_to_new));
    if (d->old_to_new == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu servers", n);
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc s;
        uint32_t k = mcr_snapshot_server(old, i, &s) == MCR_OK
                         ? mcr_snapshot_find(new_snap, s.id)
                         : MCR_NO_SERVER;
        d->old_to_new[i] = k;
    }
    return MCR_OK;
}

int mcr_diff_new(const mcr_snapshot *old, const mcr_snapshot *new_snap, mcr_diff **out,
                 mcr_error *err)
{
    side a, b;
    pair_map pm = {NULL, 0, 0};
    mcr_diff *d;
    int rc;

    if (old == NULL || new_snap == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL snapshot or output");
    mcr_hash ha = mcr_ring_key_hash(mcr_snapshot_ring(old));
    mcr_hash hb = mcr_ring_key_hash(mcr_snapshot_ring(new_snap));
    bool slots = mcr_ring_mode(mcr_snapshot_ring(old)) == MCR_MODE_SLOTS &&
                 mcr_ring_mode(mcr_snapshot_ring(new_snap)) == MCR_MODE_SLOTS;
    if (ha != hb && !slots) /* slots hash keys with CRC-16, whatever the key hash */
        return mcr__error(err, MCR_ERR_UNSUPPORTED,
                          "the snapshots hash keys differently (%s, %s): their hash "
                          "spaces do not describe the same keys",
                          mcr_hash_name(ha), mcr_hash_name(hb));
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a diff");
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    rc = side_init(&a, old, new_snap, 1, err);
    if (rc == MCR_OK)
        rc = side_init(&b, new_snap, new_snap, 0, err);
    if (rc == MCR_OK)
        rc = index_map(d, old, new_snap, err);
    double space = HASH_SPACE;
    if (rc == MCR_OK && !comparable(&a, &b, &space))
        rc = mcr__error(err, MCR_ERR_UNSUPPORTED,
                        "%s (%s) and %s (%s) place keys by different rules: their shares "
                        "cannot be compared",
                        side_names[a.kind], mcr_mode_name(mcr_ring_mode(a.ring)),
                        side_names[b.kind], mcr_mode_name(mcr_ring_mode(b.ring)));
    if (rc == MCR_OK) {
        if (a.kind == SIDE_CONTINUUM && b.kind == SIDE_CONTINUUM)
            rc = diff_continua(d, &a, &b, &pm);
        else if (a.kind == SIDE_RESIDUES && b.kind == SIDE_RESIDUES)
            rc = diff_modula(&a, &b, &pm, err);
        else if (a.kind == SIDE_RESIDUES && b.kind == SIDE_CONTINUUM)
            rc = diff_mixed(&b, &a, 1, &pm, err);
        else if (a.kind == SIDE_CONTINUUM)
            rc = diff_mixed(&a, &b, 0, &pm, err);
        else if (a.kind == SIDE_SLOTS)
            rc = diff_slots(&a, &b, &pm);
        else if (a.kind == SIDE_JUMP && mcr__ring_accept(a.ring) != NULL)
            rc = diff_wch3(&a, &b, &pm, err);
        else if (a.kind == SIDE_JUMP)
            rc = diff_jump(&a, &b, &pm, err);
        else if (a.kind == SIDE_WIDE)
            rc = diff_wide(&a, &b, &pm, err);
        else
            rc = diff_rendezvous(old, new_snap, &a, &b, &pm, err);
        if (rc == MCR_ERR_NOMEM)
            rc = mcr__error(err, rc, "out of memory for the arcs of a diff");
    }
    if (rc == MCR_OK && collect_pairs(d, &pm, &a, &b, space) != MCR_OK)
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory for the pairs of a diff");
    side_release(&a);
    side_release(&b);
    free(pm.slots);
    if (rc != MCR_OK) {
        mcr_diff_free(d);
        return rc;
    }
    /* The diff only reads the snapshots; a reference count is not part of
     * what "const" promises here. */
    d->old_snap = mcr_snapshot_ref(old);
    d->new_snap = mcr_snapshot_ref(new_snap);
    *out = d;
    return MCR_OK;
}

void mcr_diff_free(mcr_diff *d)
{
    if (d == NULL)
        return;
    mcr_snapshot_unref(d->old_snap);
    mcr_snapshot_unref(d->new_snap);
    free(d->old_to_new);
    free(d->arcs);
    free(d->pairs);
    free(d);
}

/* ------------------------------------------------------------ reading */

double mcr_diff_moved(const mcr_diff *d)
{
    return d == NULL ? 0.0 : d->moved;
}

size_t mcr_diff_arc_count(const mcr_diff *d)
{
    return d == NULL ? 0 : d->narcs;
}

int mcr_diff_arc_get(const mcr_diff *d, size_t i, mcr_diff_arc *out)
{
    if (d == NULL || out == NULL || i >= d->narcs)
        return MCR_ERR_INVALID;
    *out = d->arcs[i];
    memset(out->reserved, 0, sizeof(out->reserved));
    return MCR_OK;
}

size_t mcr_diff_pair_count(const mcr_diff *d)
{
    return d == NULL ? 0 : d->npairs;
}

int mcr_diff_pair_get(const mcr_diff *d, size_t i, mcr_diff_pair *out)
{
    if (d == NULL || out == NULL || i >= d->npairs)
        return MCR_ERR_INVALID;
    *out = d->pairs[i];
    memset(out->reserved, 0, sizeof(out->reserved));
    return MCR_OK;
}

int mcr_diff_key_moved(const mcr_diff *d, const void *key, size_t len)
{
    uint32_t o = mcr_snapshot_locate(d->old_snap, key, len);
    uint32_t n = mcr_snapshot_locate(d->new_snap, key, len);
    return d->old_to_new[o] != n;
}
