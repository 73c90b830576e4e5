/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.c: mcroute stats: how evenly a placement spreads the hash space, and a set of keys, over its servers; and which keys are hot (--top). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute.h"

#include "cli.h"

/* The hash space: every 32-bit value. */
#define HASH_SPACE 4294967296.0
#define HASH_VALUES ((uint64_t)1 << 32)

const char cli_usage_stats[] =
    "Usage: mcroute stats SOURCE [--keys FILE] [--top N] [--json]\n"
    "How evenly SOURCE spreads the hash space, and the keys of FILE (one per line,\n"
    "'-' for standard input), over its servers. Sections begin with a line\n"
    "[NAME], the only lines without a TAB. [servers]: one line per server, in\n"
    "server order:\n"
    "  SERVER<TAB>WEIGHT<TAB>POINTS<TAB>RING_SHARE<TAB>EXPECTED\n"    "(WEIGHT as the list writes it: a decimal in mcrouter-wch3)\n"
    "and with --keys <TAB>KEYS<TAB>KEY_SHARE at the end.\n"
    "RING_SHARE is the fraction of the 2^32 hash values that the server owns (a\n"
    "point owns the values above the previous point up to its own, the first point\n"
    "also those above the last; modula: the values whose remainder picks it).\n"
    "The modes that place the key itself give the share of its hash it owns\n"
    "(envoy-ring-hash: of 2^64, envoy-maglev: of the table's entries), or their\n"
    "model's: 1/N for memcached-proxy-jump, mcrouter-ch3 and pymemcache, and for\n"
    "mcrouter-wch3 furc's 1/N through its weighted tries.\n"
    "EXPECTED is its weight / the total weight, or 1/N in the modes that ignore\n"
    "weights (consistent, spy, modula). KEYS is the number of keys it owns and\n"
    "KEY_SHARE that number / the number of keys.\n"
    "Then a line [ring] and NAME<TAB>VALUE lines mode, hash, servers, points,\n"
    "peak_to_mean (largest share / mean share), cv (coefficient of variation:\n"
    "population standard deviation / mean) and peak_to_expected (the largest\n"
    "share / EXPECTED of a server); with --keys, a line [keys] and total, then\n"
    "peak_to_mean, cv and peak_to_expected of the key counts ('-' when there is\n"
    "no key).\n"
    "With --top N (keys from --keys FILE, else from standard input): a line [top]\n"
    "and the N most frequent keys, most frequent first (equal counts in byte\n"
    "order): KEY<TAB>COUNT<TAB>SHARE<TAB>SERVER, SHARE the key's count / the\n"
    "number of keys read, SERVER its owner.\n"
    "Fractions have 12 decimals.\n"
    "With --json: {\"servers\": [{\"server\", \"weight\", \"points\", \"ring_share\",\n"
    "\"expected_share\", \"keys\", \"key_share\"}, ...], \"ring\": {...}, \"keys\": {...},\n"
    "\"top\": [{\"key\", \"count\", \"share\", \"server\"}, ...]}, the same numbers, null\n"
    "for '-'.\n"
    "SOURCE: as for locate (see mcroute --help)\n";

/* The balance of one distribution of shares over the servers. */
typedef struct balance {
    double peak_to_mean, cv, peak_to_expected;
} balance;

/* x[i]: shares summing to 1 (or all 0, then defined = 0). */
static balance balance_of(const double *x, const double *expected, size_t n)
{
    balance b = {0, 0, 0};
    double sum = 0, max = 0, max_rel = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
        if (x[i] > max)
            max = x[i];
        if (x[i] / expected[i] > max_rel)
            max_rel = x[i] / expected[i];
    }
    double mean = sum / (double)n;
    if (mean <= 0)
        return b;
    double var = 0;
    for (size_t i = 0; i < n; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= (double)n;
    b.peak_to_mean = max / mean;
    b.cv = sqrt(var) / mean;
    b.peak_to_expected = max_rel;
    return b;
}

/* The number of hash values each server owns, by the rule of the ring's
 * mode (see mcr_ring_find), exactly: the counts add up to 2^32. */
static void ring_counts(const mcr_ring *r, uint64_t *count, size_t *points)
{
    size_t n = mcr_ring_server_count(r);
    mcr_mode m = mcr_ring_mode(r);

    if (m == MCR_MODE_MODULA) {
        /* server hash % n: q values of every remainder, one more for the
         * first HASH_VALUES % n remainders */
        uint64_t q = HASH_VALUES / n, rem = HASH_VALUES % n;
        for (size_t i = 0; i < n; i++)
            count[i] = q + (i < rem);
        return;
    }
    if (m == MCR_MODE_TWEMPROXY_MODULA || m == MCR_MODE_BUCKETS) {
        /* server i is entries [start, start + weight) of hash % total */
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += mcr_ring_server_weight(r, i);
        uint64_t q = HASH_VALUES / total, rem = HASH_VALUES % total, start = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t w = mcr_ring_server_weight(r, i), end = start + w;
            count[i] = w * q;
            if (rem > start)
                count[i] += (end < rem ? end : rem) - start;
            start = end;
        }
        return;
    }
    size_t np = mcr_ring_point_count(r);
    if (np == 0) { /* no point at all: mcr_ring_find() answers 0 */
        count[0] = HASH_VALUES;
        return;
    }
    uint32_t first, last, v, s, prev;
    mcr_ring_point(r, np - 1, &last, NULL);
    mcr_ring_point(r, 0, &first, &s);
    /* the first point: 0 up to its value, and the wrap above the last */
    count[s] += (uint64_t)first + 1 + (UINT32_MAX - (uint64_t)last);
    points[s]++;
    prev = first;
    for (size_t i = 1; i < np; i++) {
        mcr_ring_point(r, i, &v, &s);
        count[s] += (uint64_t)(v - prev); /* 0 for a tie: the earlier point owns it */
        points[s]++;
        prev = v;
    }
}



/* The modes whose key itself places it, not a 32-bit key hash: each
 * server's share of the keys, the placement's own where it has one (the
 * 2^64 key hashes of envoy-ring-hash's points; envoy-maglev's table, in
 * table_shares), else its model's: an equal share in the modes that jump
 * or race over equal servers (memcached-proxy-jump, mcrouter-ch3,
 * pymemcache); in mcrouter-wch3, furc's equal share times the tries: a
 * try picks server i with probability 1/N and accepts it with its weight
 * w_i, so with a = the mean weight, i ends a key with probability
 * w_i/N (1 + (1-a) + ... + (1-a)^31) + (1-w_i)/N (1-a)^31 (all 32 tries
 * refused: the last try's server). points[]: envoy-ring-hash's points
 * per server. Returns 0 for the other modes. */
static int key_placed_shares(const mcr_ring *r, double *share, size_t *points, size_t n)
{
    mcr_mode m = mcr_ring_mode(r);
    switch (m) {
    case MCR_MODE_MEMCACHED_PROXY_JUMP:
    case MCR_MODE_MCROUTER_CH3:
    case MCR_MODE_PYMEMCACHE:
        for (size_t i = 0; i < n; i++)
            share[i] = 1.0 / (double)n;
        return 1;
    case MCR_MODE_MCROUTER_WCH3: {
        double a = 0, geo = 0;
        for (size_t i = 0; i < n; i++)
            a += mcr_ring_server_weight(r, i) / (double)MCR_WCH3_WEIGHT_ONE / (double)n;
        for (int t = 0; t < MCR_WCH3_TRIES; t++)
            geo += pow(1.0 - a, t);
        double q = pow(1.0 - a, MCR_WCH3_TRIES - 1); /* 32 refusals: the last try's */
        for (size_t i = 0; i < n; i++) {
            double w = mcr_ring_server_weight(r, i) / (double)MCR_WCH3_WEIGHT_ONE;
            share[i] = (w * geo + (1.0 - w) * q) / (double)n;
        }
        return 1;
    }
    case MCR_MODE_ENVOY_RING_HASH: {
        size_t np = mcr_ring_wide_point_count(r);
        uint64_t v, prev = 0, last = 0;
        uint32_t s, first = 0;
        for (size_t i = 0; i < n; i++)
            share[i] = 0;
        for (size_t i = 0; i < np; i++) {
            mcr_ring_wide_point(r, i, &v, &s);
            /* the values above the previous point up to this one; the
             * first point also 0 and those above the last */
            share[s] += i == 0 ? (double)v + 1.0 : (double)(v - prev);
            points[s]++;
            if (i == 0)
                first = s;
            prev = last = v;
        }
        if (np > 0)
            share[first] += (double)(UINT64_MAX - last);
        for (size_t i = 0; i < n; i++)
            share[i] /= 18446744073709551616.0;
        return 1;
    }
    default:
        return 0;
    }
}

/* The native table modes have no points: a server's share of the hash space
 * is its share of the table (maglev and envoy-maglev entries, slots, jump
 * buckets), which the "points" column counts; rendezvous has neither, and
 * its share is its model's, the server's share of the weights; the modes
 * whose key places it, key_placed_shares(). Returns 0 for the other modes
 * (ring_counts() applies), 1 when share[] and points[] were set. */
static int table_shares(const cli_source *src, const cli_placement *pl, double *share,
                        size_t *points, size_t n)
{
    mcr_mode m = mcr_ring_mode(pl->ring);
    if (m != MCR_MODE_JUMP && m != MCR_MODE_RENDEZVOUS && m != MCR_MODE_MAGLEV &&
        m != MCR_MODE_SLOTS && m != MCR_MODE_ENVOY_MAGLEV)
        return key_placed_shares(pl->ring, share, points, n);
    if (m == MCR_MODE_RENDEZVOUS) {
        double total = 0;
        for (size_t i = 0; i < n; i++)
            total += mcr_ring_server_weight(pl->ring, i);
        for (size_t i = 0; i < n; i++)
            share[i] = mcr_ring_server_weight(pl->ring, i) / total;
        return 1;
    }
    mcr_snapshot *snap = pl->snap != NULL ? mcr_snapshot_ref(pl->snap) : cli_build_snapshot(src);
    size_t ns = mcr_snapshot_server_count(snap), t = mcr_snapshot_table_size(snap);
    uint32_t *ring_of = cli_xcalloc(ns ? ns : 1, sizeof(*ring_of));
    for (size_t i = 0; i < ns; i++)
        ring_of[i] = UINT32_MAX;
    for (size_t r = 0; r < n; r++) {
        uint32_t si = mcr_snapshot_ring_server(snap, (uint32_t)r);
        if (si < ns)
            ring_of[si] = (uint32_t)r;
    }
    for (size_t i = 0; i < t; i++) {
        uint32_t e = mcr_snapshot_table_entry(snap, i);
        if (e < ns && ring_of[e] != UINT32_MAX)
            points[ring_of[e]]++;
    }
    for (size_t r = 0; r < n; r++)
        share[r] = t ? (double)points[r] / (double)t : 0.0;
    free(ring_of);
    mcr_snapshot_unref(snap);
    return 1;
}

/* Whether the mode places by weight (the expected shares follow weights). */
static int mode_uses_weights(mcr_mode m)
{
    return m != MCR_MODE_CONSISTENT && m != MCR_MODE_SPY && m != MCR_MODE_MODULA;
}

/* --top: every distinct key read and how often, in an open-addressing
 * table (linear probing, a power-of-two size, at most half full). */
typedef struct key_count {
    char *key; /* malloc'd copy (the empty key too); NULL: a free slot */
    size_t len;
    size_t count;
    uint64_t hash;
} key_count;

typedef struct key_table {
    key_count *slots;
    size_t cap, used;
} key_table;

/* FNV-1a, 64 bits: a table index, nothing that must match another program. */
static uint64_t key_hash(const char *key, size_t len)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
    return h;
}

static key_count *table_find(key_count *slots, size_t cap, const char *key, size_t len,
                             uint64_t h)
{
    for (size_t i = (size_t)h & (cap - 1);; i = (i + 1) & (cap - 1)) {
        key_count *e = &slots[i];
        if (e->key == NULL || (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0))
            return e;
    }
}

static void table_add(key_table *t, const char *key, size_t len)
{
    if (2 * (t->used + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        key_count *slots = cli_xcalloc(cap, sizeof(*slots));
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].key != NULL)
                *table_find(slots, cap, t->slots[i].key, t->slots[i].len, t->slots[i].hash) =
                    t->slots[i];
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    uint64_t h = key_hash(key, len);
    key_count *e = table_find(t->slots, t->cap, key, len, h);
    if (e->key == NULL) {
        e->key = cli_xcalloc(len + 1, 1);
        memcpy(e->key, key, len);
        e->len = len;
        e->hash = h;
        t->used++;
    }
    e->count++;
}

static void table_free(key_table *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i].key);
    free(t->slots);
}

/* Most frequent first; equal counts in the order of their bytes, so that
 * the list is the same on every run. */
static int cmp_top(const void *a, const void *b)
{
    const key_count *x = *(const key_count *const *)a, *y = *(const key_count *const *)b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    int c = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* The `n` most frequent keys of t (fewer when fewer were read), into *out
 * (pointers into t; the caller frees the array). Returns how many. */
static size_t top_keys(const key_table *t, size_t n, key_count ***out)
{
    key_count **all = cli_xcalloc(t->used, sizeof(*all));
    size_t k = 0;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].key != NULL)
            all[k++] = &t->slots[i];
    qsort(all, k, sizeof(*all), cmp_top);
    *out = all;
    return k < n ? k : n;
}

typedef struct stats {
    const cli_placement *pl;
    size_t n;
    uint64_t *hash_values; /* owned hash values, per server */
    size_t *points;
    double *ring_share, *expected;
    size_t *keys;          /* keys owned, per server */
    size_t total_keys;
    double *key_share;
    key_table *counts;     /* --top: every distinct key, or NULL */
    key_count **top;       /* --top: the most frequent first */
    size_t ntop;
} stats;

static void count_key(const char *key, size_t len, void *ctx)
{
    stats *st = ctx;
    st->keys[mcr_ring_locate(st->pl->ring, key, len)]++;
    st->total_keys++;
    if (st->counts != NULL)
        table_add(st->counts, key, len);
}

/* A fraction, or '-' (null) when it is not defined. */
static void put_fraction(double x, int defined, int json)
{
    if (defined)
        printf("%.12f", x);
    else
        fputs(json ? "null" : "-", stdout);
}

static void print_text(const stats *st, const balance *rb, const balance *kb, int with_keys)
{
    const mcr_ring *r = st->pl->ring;
    int have = st->total_keys > 0;
    puts("[servers]");
    for (size_t i = 0; i < st->n; i++) {
        char wt[CLI_WEIGHT_BUF];
        printf("%s\t%s\t%zu\t%.12f\t%.12f", cli_server_label(st->pl, (uint32_t)i),
               cli_weight_text(mcr_ring_mode(r), (uint32_t)mcr_ring_server_weight(r, i), wt),
               st->points[i], st->ring_share[i], st->expected[i]);
        if (with_keys) {
            printf("\t%zu\t", st->keys[i]);
            put_fraction(st->key_share[i], have, 0);
        }
        putchar('\n');
    }
    printf("[ring]\nmode\t%s\nhash\t%s\nservers\t%zu\npoints\t%zu\n",
           mcr_mode_name(mcr_ring_mode(r)), mcr_hash_name(mcr_ring_key_hash(r)), st->n,
           mcr_ring_point_count(r));
    printf("peak_to_mean\t%.12f\ncv\t%.12f\npeak_to_expected\t%.12f\n", rb->peak_to_mean, rb->cv,
           rb->peak_to_expected);
    if (!with_keys)
        return;
    printf("[keys]\ntotal\t%zu\npeak_to_mean\t", st->total_keys);
    put_fraction(kb->peak_to_mean, have, 0);
    fputs("\ncv\t", stdout);
    put_fraction(kb->cv, have, 0);
    fputs("\npeak_to_expected\t", stdout);
    put_fraction(kb->peak_to_expected, have, 0);
    putchar('\n');
    if (st->counts == NULL)
        return;
    puts("[top]");
    for (size_t i = 0; i < st->ntop; i++) {
        const key_count *e = st->top[i];
        cli_put_field(e->key, e->len);
        printf("\t%zu\t%.12f\t%s\n", e->count, (double)e->count / (double)st->total_keys,
               cli_server_label(st->pl, mcr_ring_locate(r, e->key, e->len)));
    }
}

static void print_json(const stats *st, const balance *rb, const balance *kb, int with_keys)
{
    const mcr_ring *r = st->pl->ring;
    int have = st->total_keys > 0;
    fputs("{\"servers\": [", stdout);
    for (size_t i = 0; i < st->n; i++) {
        const char *label = cli_server_label(st->pl, (uint32_t)i);
        fputs(i ? ",\n  {\"server\": " : "\n  {\"server\": ", stdout);
        cli_json_string(stdout, label, strlen(label));
        char wt[CLI_WEIGHT_BUF];
        printf(", \"weight\": %s, \"points\": %zu, \"ring_share\": %.12f, \"expected_share\": %.12f",
               cli_weight_text(mcr_ring_mode(r), (uint32_t)mcr_ring_server_weight(r, i), wt),
               st->points[i], st->ring_share[i], st->expected[i]);
        if (with_keys) {
            printf(", \"keys\": %zu, \"key_share\": ", st->keys[i]);
            put_fraction(st->key_share[i], have, 1);
        }
        putchar('}');
    }
    printf("\n],\n \"ring\": {\"mode\": \"%s\", \"hash\": \"%s\", \"servers\": %zu, "
           "\"points\": %zu,\n  \"peak_to_mean\": %.12f, \"cv\": %.12f, "
           "\"peak_to_expected\": %.12f}",
           mcr_mode_name(mcr_ring_mode(r)), mcr_hash_name(mcr_ring_key_hash(r)), st->n,
           mcr_ring_point_count(r), rb->peak_to_mean, rb->cv, rb->peak_to_expected);
    if (with_keys) {
        printf(",\n \"keys\": {\"total\": %zu,\n  \"peak_to_mean\": ", st->total_keys);
        put_fraction(kb->peak_to_mean, have, 1);
        fputs(", \"cv\": ", stdout);
        put_fraction(kb->cv, have, 1);
        fputs(", \"peak_to_expected\": ", stdout);
        put_fraction(kb->peak_to_expected, have, 1);
        putchar('}');
    }
    if (st->counts != NULL) {
        fputs(",\n \"top\": [", stdout);
        for (size_t i = 0; i < st->ntop; i++) {
            const key_count *e = st->top[i];
            const char *server = cli_server_label(st->pl, mcr_ring_locate(r, e->key, e->len));
            fputs(i ? ",\n  {" : "\n  {", stdout);
            cli_json_key_member(stdout, "key", e->key, e->len);
            printf(", \"count\": %zu, \"share\": %.12f, \"server\": ", e->count,
                   (double)e->count / (double)st->total_keys);
            cli_json_string(stdout, server, strlen(server));
            putchar('}');
        }
        fputs(st->ntop ? "\n]" : "]", stdout);
    }
    fputs("}\n", stdout);
}

int cli_cmd_stats(int argc, char **argv)
{
    cli_source src;
    int first = cli_parse_options(argc, argv, &src, cli_usage_stats,
                                  ALLOW_SOURCE | ALLOW_KEYS | ALLOW_JSON | ALLOW_TOP);
    if (first < argc)
        cli_die("stats: unexpected argument '%s' (keys are read with --keys FILE)", argv[first]);
    cli_placement pl = cli_placement_build(&src);
    /* --top without --keys counts the keys of standard input (--keys -). */
    FILE *keys = src.keys != NULL ? cli_open_keys("stats", src.keys) : src.top ? stdin : NULL;
    key_table counts = {NULL, 0, 0};

    stats st;
    memset(&st, 0, sizeof(st));
    st.pl = &pl;
    st.n = mcr_ring_server_count(pl.ring);
    st.hash_values = cli_xcalloc(st.n, sizeof(*st.hash_values));
    st.points = cli_xcalloc(st.n, sizeof(*st.points));
    st.ring_share = cli_xcalloc(st.n, sizeof(*st.ring_share));
    st.expected = cli_xcalloc(st.n, sizeof(*st.expected));
    st.keys = cli_xcalloc(st.n, sizeof(*st.keys));
    st.key_share = cli_xcalloc(st.n, sizeof(*st.key_share));
    if (src.top)
        st.counts = &counts;

    int table = table_shares(&src, &pl, st.ring_share, st.points, st.n);
    if (!table)
        ring_counts(pl.ring, st.hash_values, st.points);
    double total_weight = 0;
    for (size_t i = 0; i < st.n; i++)
        total_weight += mcr_ring_server_weight(pl.ring, i);
    int weighted = mode_uses_weights(mcr_ring_mode(pl.ring));
    for (size_t i = 0; i < st.n; i++) {
        if (!table)
            st.ring_share[i] = (double)st.hash_values[i] / HASH_SPACE;
        st.expected[i] = weighted ? mcr_ring_server_weight(pl.ring, i) / total_weight
                                  : 1.0 / (double)st.n;
    }
    if (keys != NULL) {
        cli_for_each_line(keys, "stats", false, count_key, &st);
        for (size_t i = 0; i < st.n; i++)
            st.key_share[i] =
                st.total_keys ? (double)st.keys[i] / (double)st.total_keys : 0.0;
        if (st.counts != NULL)
            st.ntop = top_keys(st.counts, (size_t)src.top, &st.top);
    }
    balance rb = balance_of(st.ring_share, st.expected, st.n);
    balance kb = balance_of(st.key_share, st.expected, st.n);
    if (src.json)
        print_json(&st, &rb, &kb, keys != NULL);
    else
        print_text(&st, &rb, &kb, keys != NULL);

    free(st.hash_values);
    free(st.points);
    free(st.ring_share);
    free(st.expected);
    free(st.keys);
    free(st.key_share);
    free(st.top);
    table_free(&counts);
    cli_placement_free(&pl);
    free(src.behaviors);
    return cli_finish_output();
}
