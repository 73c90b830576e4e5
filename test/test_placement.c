/* SPDX-License-Identifier: BSD-3-Clause */
/* test_placement.c: Check suite of the placement modes: fixed vectors of the native ones, and the design checklist on every mode. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "internal.h"
#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "realserver.h"
#include "testutil.h"

#define TWO32 4294967296.0
#define MAX_SERVERS 64


/* ------------------------------------------------------------ what each mode promises */

/* The checklist's expectations, mode by mode, as the modes document them.
 * The reference modes reproduce other clients, limits included: the test
 * states those limits instead of skipping the mode. */
typedef struct mode_case {
    mcr_mode mode;
    int weighted;     /* shares follow weights (else: equal shares) */
    int minimal;      /* adding or removing a server moves keys only to or
                         from it (else: others move too, by normalisation
                         or by the modulus) */
    double move_max;  /* moved / ideal, at most, adding or removing one
                         server of 20 (the ideal being its share) */
    double share_tol; /* |share - expected|, 1:2:4 over 3 servers */
    int model_diff;   /* the diff's shares are the model's (jump,
                         rendezvous), not exact counts */
    int no_weights;   /* a weight other than 1 is refused: the pools of
                         these tests have weights 1 */
} mode_case;

static const mode_case cases[] = {
    {MCR_MODE_KETAMA, 1, 0, 2.5, 0.04, 0, 0},
    {MCR_MODE_CONSISTENT, 0, 1, 1.6, 0.06, 0, 0},
    {MCR_MODE_WEIGHTED, 1, 0, 2.5, 0.04, 0, 0},
    {MCR_MODE_SPY, 0, 1, 1.6, 0.06, 0, 0},
    {MCR_MODE_SPY_WEIGHTED, 1, 0, 2.5, 0.04, 0, 0},
    {MCR_MODE_MODULA, 0, 0, 25.0, 0.01, 0, 0},
    {MCR_MODE_TWEMPROXY_KETAMA, 1, 0, 2.5, 0.04, 0, 0},
    {MCR_MODE_TWEMPROXY_MODULA, 1, 0, 25.0, 0.01, 0, 0},
    {MCR_MODE_STABLE_KETAMA, 1, 1, 1.6, 0.03, 0, 0},
    {MCR_MODE_JUMP, 1, 1, 1.2, 0.01, 1, 0},
    {MCR_MODE_RENDEZVOUS, 1, 1, 1.2, 0.01, 1, 0},
    {MCR_MODE_MAGLEV, 1, 0, 1.3, 0.01, 0, 0},
    {MCR_MODE_SLOTS, 1, 1, 1.2, 0.01, 0, 0},
    {MCR_MODE_BOUNDED, 1, 1, 1.6, 0.03, 0, 0},
    {MCR_MODE_PYMEMCACHE, 0, 1, 1.2, 0.01, 1, 1},
    {MCR_MODE_BUCKETS, 1, 0, 25.0, 0.01, 0, 0},
    {MCR_MODE_SPYMEMCACHED, 1, 0, 2.5, 0.04, 0, 0},
    {MCR_MODE_SPYMEMCACHED_LIBMEMCACHED, 1, 0, 2.5, 0.04, 0, 0},
    {MCR_MODE_DALLI, 1, 0, 2.5, 0.04, 0, 0},
    {MCR_MODE_HASHRING, 1, 0, 2.5, 0.04, 0, 0},
    {MCR_MODE_NGINX_CONSISTENT, 1, 1, 1.6, 0.03, 0, 0},
    {MCR_MODE_PHP_MEMCACHE, 1, 1, 1.6, 0.04, 0, 0},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))
_Static_assert(NCASES == MCR_MODE_COUNT, "every mode has a case");

/* A weight w for a server of `mode`: 1 in the modes without weights. */
static uint32_t w_of(mcr_mode mode, uint32_t w)
{
    return mode == MCR_MODE_PYMEMCACHE ? 1 : w;
}

/* ------------------------------------------------------------ pools */

typedef struct spec {
    char host[32];
    int port;
    uint32_t weight;
    char id[32];
    char zone[16];
} spec;

typedef struct pool {
    spec s[MAX_SERVERS];
    size_t n;
    mcr_mode mode;
    mcr_hash hash;
    uint32_t table;  /* maglev table size, 0: default */
    uint32_t slots;  /* slot count, 0: default */
    const char *tag;
} pool;

static unsigned next_host;

/* Every test starts from the same addresses, with or without fork. */
static void reset_hosts(void)
{
    next_host = 0;
}

static void new_spec(spec *s, uint32_t weight, const char *zone)
{
    unsigned h = next_host++;
    snprintf(s->host, sizeof(s->host), "10.%u.%u.%u", (h >> 16) & 255, (h >> 8) & 255, h & 255);
    s->port = 11211;
    s->weight = weight;
    snprintf(s->id, sizeof(s->id), "node-%u", h);
    snprintf(s->zone, sizeof(s->zone), "%s", zone != NULL ? zone : "");
}

static void plain_pool(pool *p, mcr_mode mode, size_t n, uint32_t weight)
{
    memset(p, 0, sizeof(*p));
    p->mode = mode;
    p->hash = MCR_HASH_MD5;
    p->n = n;
    for (size_t i = 0; i < n; i++)
        new_spec(&p->s[i], weight, NULL);
}

static mcr_config *config_of(const pool *p)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    EXPECT_INT(mcr_config_set_mode(cfg, p->mode), ==, MCR_OK);
    EXPECT_INT(mcr_config_set_hash(cfg, p->hash), ==, MCR_OK);
    if (p->table != 0)
        EXPECT_INT(mcr_config_set_table_size(cfg, p->table), ==, MCR_OK);
    if (p->slots != 0)
        EXPECT_INT(mcr_config_set_slot_count(cfg, p->slots), ==, MCR_OK);
    if (p->tag != NULL)
        EXPECT_INT(mcr_config_set_hash_tag(cfg, p->tag), ==, MCR_OK);
    for (size_t i = 0; i < p->n; i++) {
        const spec *s = &p->s[i];
        /* spymemcached's LIBMEMCACHED key format looks IP literals up in
         * reverse, which would ask the DNS: names instead (not resolved in
         * that format), so that no test query leaves the machine */
        char named[48];
        const char *host = s->host;
        if (p->mode == MCR_MODE_SPYMEMCACHED_LIBMEMCACHED) {
            snprintf(named, sizeof(named), "h%s.test", s->host);
            for (char *c = named; *c; c++)
                *c = *c == '.' && strcmp(c, ".test") != 0 ? '-' : *c;
            host = named;
        }
        mcr_server_desc d = {s->id[0] ? s->id : NULL, host, s->port, s->weight,
                             s->zone[0] ? s->zone : NULL, MCR_STATE_ACTIVE, 0};
        int rc = mcr_config_add_server_desc(cfg, &d, &err);
        EXPECT_MSG(rc == MCR_OK, "add %s: %s", s->host, err.message);
    }
    return cfg;
}

static mcr_snapshot *snap_of(const pool *p)
{
    mcr_error err;
    mcr_snapshot *s = NULL;
    mcr_config *cfg = config_of(p);
    int rc = mcr_snapshot_new(cfg, 1, &s, &err);
    EXPECT_MSG(rc == MCR_OK, "snapshot_new (%s): %s", mcr_mode_name(p->mode), err.message);
    mcr_config_free(cfg);
    return s;
}

static mcr_snapshot *apply_ok(const mcr_snapshot *s, const mcr_changes *ch)
{
    mcr_error err;
    mcr_snapshot *out = NULL;
    int rc = mcr_snapshot_apply(s, ch, &out, &err);
    EXPECT_MSG(rc == MCR_OK, "apply (%s): %s", mcr_mode_name(mcr_ring_mode(mcr_snapshot_ring(s))),
               err.message);
    return out;
}

static const char *id_at(const mcr_snapshot *s, uint32_t index)
{
    mcr_server_desc d;
    EXPECT_INT(mcr_snapshot_server(s, index, &d), ==, MCR_OK);
    return d.id;
}

static const char *owner_of(const mcr_snapshot *s, const char *key, size_t len)
{
    return id_at(s, mcr_snapshot_locate(s, key, len));
}

/* Keys "key-<i>" into a static buffer. */
static size_t key_n(char *buf, unsigned i)
{
    return (size_t)sprintf(buf, "key-%u", i);
}

/* The snapshot with server `id` added (weight w) and, for slots, the plan's
 * moves; or removed (w == 0), after a plan for slots. */
static mcr_snapshot *with_change(const mcr_snapshot *s, const spec *add, const char *remove,
                                 int plan)
{
    mcr_error err;
    mcr_changes *ch = mcr_changes_new();
    ck_assert_ptr_nonnull(ch);
    if (add != NULL) {
        mcr_server_desc d = {add->id, add->host, add->port, add->weight,
                             add->zone[0] ? add->zone : NULL, MCR_STATE_ACTIVE, 0};
        EXPECT_INT(mcr_changes_add(ch, &d, &err), ==, MCR_OK);
    }
    if (remove != NULL)
        EXPECT_INT(mcr_changes_remove(ch, remove, &err), ==, MCR_OK);
    if (plan) {
        int rc = mcr_slots_plan(s, ch, NULL, &err);
        EXPECT_MSG(rc == MCR_OK, "plan: %s", err.message);
    }
    mcr_snapshot *out = apply_ok(s, ch);
    mcr_changes_free(ch);
    return out;
}

/* Fraction of n keys whose owner differs; with `only_to` / `only_from`,
 * fail if a key moved to another server / from another server. */
static double moved_keys(const mcr_snapshot *a, const mcr_snapshot *b, unsigned n,
                         const char *only_to, const char *only_from, const char *what)
{
    char key[32];
    unsigned moved = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t len = key_n(key, i);
        const char *x = owner_of(a, key, len), *y = owner_of(b, key, len);
        if (strcmp(x, y) == 0)
            continue;
        moved++;
        if (only_to != NULL)
            EXPECT_MSG(strcmp(y, only_to) == 0, "%s: %s moved %s -> %s, not to %s", what, key, x,
                       y, only_to);
        if (only_from != NULL)
            EXPECT_MSG(strcmp(x, only_from) == 0, "%s: %s moved %s -> %s, not from %s", what,
                       key, x, y, only_from);
    }
    return (double)moved / n;
}

static mcr_diff *diff_of(const mcr_snapshot *a, const mcr_snapshot *b)
{
    mcr_error err;
    mcr_diff *d = NULL;
    int rc = mcr_diff_new(a, b, &d, &err);
    EXPECT_MSG(rc == MCR_OK, "diff_new: %s", err.message);
    return d;
}

/* What every diff must say: sorted positive pairs adding up to the moved
 * share exactly, per-key answers that match lookups, and (sampled) a moved
 * share near the keys'. */
static void check_diff(const mcr_snapshot *a, const mcr_snapshot *b, const mcr_diff *d,
                       unsigned keys, double tol)
{
    double moved = mcr_diff_moved(d), sum = 0;
    mcr_diff_pair prev = {NULL, NULL, 0};
    EXPECT(moved >= 0 && moved <= 1.0 + 1e-12);
    for (size_t i = 0; i < mcr_diff_pair_count(d); i++) {
        mcr_diff_pair p;
        EXPECT_INT(mcr_diff_pair_get(d, i, &p), ==, MCR_OK);
        EXPECT(p.fraction > 0);
        EXPECT_STR(p.from, !=, p.to);
        EXPECT(mcr_snapshot_find(a, p.from) >= 0);
        EXPECT(mcr_snapshot_find(b, p.to) >= 0);
        if (i > 0)
            EXPECT(prev.fraction >= p.fraction);
        sum += p.fraction;
        prev = p;
    }
    EXPECT_MSG(sum == moved, "pairs add up to %.17g, moved %.17g", sum, moved);
    char key[32];
    unsigned changed = 0;
    for (unsigned i = 0; i < keys; i++) {
        size_t len = key_n(key, 7000000 + i);
        int c = strcmp(owner_of(a, key, len), owner_of(b, key, len)) != 0;
        EXPECT_INT(mcr_diff_key_moved(d, key, len), ==, c);
        changed += (unsigned)c;
    }
    EXPECT_MSG(fabs((double)changed / keys - moved) <= tol, "keys moved %g, diff says %g",
               (double)changed / keys, moved);
}

/* ------------------------------------------------------------ fixed vectors */

/* Redis Cluster's slots (CRC-16/XMODEM, check value 0x31C3 for
 * "123456789") and its hash tags. */
START_TEST(vectors_crc16_slots)
{
    pool p;
    plain_pool(&p, MCR_MODE_SLOTS, 3, 1);
    p.slots = MCR_SLOTS_MAX;
    mcr_snapshot *s = snap_of(&p);
    EXPECT_UINT(mcr_snapshot_key_slot(s, "123456789", 9), ==, 0x31C3);
    EXPECT_UINT(mcr_snapshot_key_slot(s, "", 0), ==, 0);
    EXPECT_UINT(mcr_ring_hash(mcr_snapshot_ring(s), "123456789", 9), ==, 0x31C3);
    /* The low 16 bits of twemproxy's quirky crc16 are the true CRC-16. */
    tu_rng r;
    tu_rng_init(&r, 1);
    for (int k = 0; k < 2000; k++) {
        char key[64];
        size_t len = tu_key(&r, key, 60);
        EXPECT_UINT(mcr_snapshot_key_slot(s, key, len), ==,
                    mcr_hash_key(MCR_HASH_CRC16, key, len) & 0xffff);
    }
    mcr_snapshot_unref(s);

    plain_pool(&p, MCR_MODE_SLOTS, 3, 1);
    p.tag = "{}";
    s = snap_of(&p);
    EXPECT_UINT(mcr_snapshot_table_size(s), ==, 16384);
    static const struct {
        const char *key;
        unsigned slot;
    } redis[] = {{"123456789", 12739}, {"foo", 12182}, {"bar", 5061}, {"hello", 866},
                 {"user1000", 3443}, {"{user1000}.following", 3443},
                 {"{user1000}.followers", 3443},
                 /* an empty tag: the whole key (computed below) */
                 {"{}user1000", 0}, {"a{}b", 0}};
    for (size_t i = 0; i < sizeof(redis) / sizeof(redis[0]); i++) {
        const char *k = redis[i].key;
        unsigned want = redis[i].slot;
        if (strcmp(k, "{}user1000") == 0 || strcmp(k, "a{}b") == 0) /* empty tag: whole key */
            want = mcr_hash_key(MCR_HASH_CRC16, k, strlen(k)) & 16383;
        EXPECT_MSG(mcr_snapshot_key_slot(s, k, strlen(k)) == want, "%s: slot %u, want %u", k,
                   mcr_snapshot_key_slot(s, k, strlen(k)), want);
    }
    EXPECT_UINT(mcr_snapshot_key_slot(NULL, "a", 1), ==, UINT32_MAX);
    mcr_snapshot_unref(s);
    plain_pool(&p, MCR_MODE_STABLE_KETAMA, 3, 1);
    s = snap_of(&p);
    EXPECT_UINT(mcr_snapshot_key_slot(s, "a", 1), ==, UINT32_MAX);
    EXPECT_UINT(mcr_snapshot_table_size(s), ==, 0);
    EXPECT_UINT(mcr_snapshot_table_entry(s, 0), ==, UINT32_MAX);
    mcr_snapshot_unref(s);
}
END_TEST

/* jump(key, n) of the published loop, computed by a Python transcription
 * of Lamping and Veach's algorithm (IEEE doubles, as in C). */
static const struct {
    uint64_t key;
    uint32_t bucket[9];
} jump_vectors[] = {
    {0x0000000000000000ULL, {0, 0, 0, 0, 0, 0, 0, 0, 0}},
    {0x0000000000000001ULL, {0, 0, 0, 6, 6, 55, 549, 21134, 14378195}},
    {0x0000000000000002ULL, {0, 0, 0, 6, 6, 62, 338, 3927, 5612200}},
    {0x00000000deadbeefULL, {0, 1, 2, 5, 5, 87, 285, 64244, 479362}},
    {0x0123456789abcdefULL, {0, 0, 0, 0, 0, 57, 194, 33301, 15810187}},
    {0xffffffffffffffffULL, {0, 1, 2, 2, 9, 92, 313, 18311, 589430}},
    {0x9e3779b97f4a7c15ULL, {0, 1, 1, 3, 3, 71, 838, 56183, 10492687}},
    {0x002bdc545d6b4b87ULL, {0, 0, 0, 5, 5, 5, 368, 46958, 4691058}},
};
static const uint32_t jump_ns[9] = {1, 2, 3, 7, 10, 100, 1000, 65536, 1u << 24};

/* The test's own SplitMix64 first output (the documented key mix). */
static uint64_t splitmix(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

START_TEST(vectors_jump)
{
    EXPECT_UINT(splitmix(0), ==, 0xe220a8397b1dcdafULL); /* SplitMix64's published first output */
    EXPECT_UINT(mcr__mix64(0), ==, splitmix(0));
    for (size_t k = 0; k < sizeof(jump_vectors) / sizeof(jump_vectors[0]); k++)
        for (int i = 0; i < 9; i++)
            EXPECT_MSG(mcr__jump(jump_vectors[k].key, jump_ns[i]) == jump_vectors[k].bucket[i],
                       "jump(%#llx, %u) = %u, want %u", (unsigned long long)jump_vectors[k].key,
                       jump_ns[i], mcr__jump(jump_vectors[k].key, jump_ns[i]),
                       jump_vectors[k].bucket[i]);
    /* End to end: servers of weight 1 own buckets 0, 1, ... in order; a key
     * goes to bucket jump(splitmix(md5 key hash), B). */
    pool p;
    plain_pool(&p, MCR_MODE_JUMP, 37, 1);
    mcr_snapshot *s = snap_of(&p);
    EXPECT_UINT(mcr_snapshot_table_size(s), ==, 37);
    for (unsigned i = 0; i < 5000; i++) {
        char key[32];
        size_t len = key_n(key, i);
        uint64_t k = splitmix(mcr_hash_key(MCR_HASH_MD5, key, len));
        EXPECT_UINT(mcr_snapshot_locate(s, key, len), ==, mcr__jump(k, 37));
    }
    for (uint32_t b = 0; b < 37; b++)
        EXPECT_UINT(mcr_snapshot_table_entry(s, b), ==, b);
    EXPECT_UINT(mcr_snapshot_table_entry(s, 37), ==, UINT32_MAX);
    mcr_snapshot_unref(s);
}
END_TEST

/* The documented score, computed here from the description: u from
 * SplitMix64 of (seed XOR SplitMix64(hash)), seed = MD5(id) bytes 0..7. */
START_TEST(vectors_rendezvous)
{
    pool p;
    tu_rng r;
    tu_rng_init(&r, 3);
    plain_pool(&p, MCR_MODE_RENDEZVOUS, 23, 1);
    for (size_t i = 0; i < p.n; i++)
        p.s[i].weight = 1 + tu_below(&r, 1000);
    mcr_snapshot *s = snap_of(&p);
    uint64_t seed[MAX_SERVERS];
    for (size_t i = 0; i < p.n; i++) {
        unsigned char d[16];
        mcr_md5(p.s[i].id, strlen(p.s[i].id), d);
        seed[i] = 0;
        for (int b = 7; b >= 0; b--)
            seed[i] = seed[i] << 8 | d[b];
    }
    for (unsigned i = 0; i < 3000; i++) {
        char key[32];
        size_t len = key_n(key, i);
        uint64_t k = splitmix(mcr_hash_key(MCR_HASH_MD5, key, len));
        double best = -1;
        uint32_t want = 0;
        for (size_t j = 0; j < p.n; j++) {
            uint64_t z = splitmix(seed[j] ^ k);
            double u = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
            double score = -(double)p.s[j].weight / log(u);
            if (score > best) {
                best = score;
                want = (uint32_t)j;
            }
        }
        EXPECT_UINT(mcr_snapshot_locate(s, key, len), ==, want);
    }
    mcr_snapshot_unref(s);
}
END_TEST

/* The Maglev table, built here from the paper's description (round robin,
 * equal weights), entry for entry; and the share bounds. */
START_TEST(vectors_maglev)
{
    pool p;
    plain_pool(&p, MCR_MODE_MAGLEV, 10, 1);
    p.table = 1009; /* prime, >= 100 x 10 */
    mcr_snapshot *s = snap_of(&p);
    uint32_t m = 1009, entry[1009], next[10], offset[10], skip[10];
    for (size_t i = 0; i < p.n; i++) {
        unsigned char d[16];
        uint64_t h1 = 0, h2 = 0;
        mcr_md5(p.s[i].id, strlen(p.s[i].id), d);
        for (int b = 7; b >= 0; b--) {
            h1 = h1 << 8 | d[b];
            h2 = h2 << 8 | d[8 + b];
        }
        offset[i] = (uint32_t)(h1 % m);
        skip[i] = (uint32_t)(h2 % (m - 1) + 1);
        next[i] = 0;
    }
    for (uint32_t c = 0; c < m; c++)
        entry[c] = UINT32_MAX;
    for (uint32_t filled = 0;;) {
        for (uint32_t i = 0; i < p.n && filled < m; i++) {
            uint32_t c;
            do
                c = (uint32_t)((offset[i] + (uint64_t)next[i]++ * skip[i]) % m);
            while (entry[c] != UINT32_MAX);
            entry[c] = i;
            filled++;
        }
        if (filled == m)
            break;
    }
    EXPECT_UINT(mcr_snapshot_table_size(s), ==, m);
    for (uint32_t c = 0; c < m; c++)
        EXPECT_MSG(mcr_snapshot_table_entry(s, c) == entry[c], "entry %u: %u, want %u", c,
                   mcr_snapshot_table_entry(s, c), entry[c]);
    for (unsigned i = 0; i < 2000; i++) {
        char key[32];
        size_t len = key_n(key, i);
        EXPECT_UINT(mcr_snapshot_locate(s, key, len), ==,
                    entry[mcr_hash_key(MCR_HASH_MD5, key, len) % m]);
    }
    mcr_snapshot_unref(s);

    /* Default size, equal weights: floor(M/N) or ceil(M/N) entries each. */
    plain_pool(&p, MCR_MODE_MAGLEV, 7, 1);
    s = snap_of(&p);
    m = (uint32_t)mcr_snapshot_table_size(s);
    EXPECT_UINT(m, ==, 65537);
    uint32_t count[MAX_SERVERS] = {0};
    for (uint32_t c = 0; c < m; c++)
        count[mcr_snapshot_table_entry(s, c)]++;
    for (size_t i = 0; i < 7; i++)
        EXPECT(count[i] == m / 7 || count[i] == m / 7 + 1);
    mcr_snapshot_unref(s);

    /* Weights: |entries - M w / W| < 1 + N w / W. */
    tu_rng r;
    tu_rng_init(&r, 4);
    plain_pool(&p, MCR_MODE_MAGLEV, 30, 1);
    uint64_t total = 0;
    for (size_t i = 0; i < p.n; i++)
        total += p.s[i].weight = 1 + tu_below(&r, 100);
    s = snap_of(&p);
    m = (uint32_t)mcr_snapshot_table_size(s);
    memset(count, 0, sizeof(count));
    for (uint32_t c = 0; c < m; c++)
        count[mcr_snapshot_table_entry(s, c)]++;
    for (size_t i = 0; i < p.n; i++) {
        double want = (double)m * p.s[i].weight / (double)total;
        EXPECT_MSG(fabs(count[i] - want) < 1 + 30.0 * p.s[i].weight / (double)total,
                   "server %zu (weight %u): %u entries, want %g", i, p.s[i].weight, count[i],
                   want);
    }
    mcr_snapshot_unref(s);
}
END_TEST

/* ------------------------------------------------------------ the checklist */

/* 1. Keys outside the changed arcs (or table entries) never move, and the
 *    diff's per-key answer is the lookups'. 2. The moved fraction is close
 *    to ideal. Adding and removing one server of 20, every mode. */
START_TEST(checklist_movement)
{
    for (size_t c = 0; c < NCASES; c++) {
        const mode_case *mc = &cases[c];
        pool p;
        plain_pool(&p, mc->mode, 20, 1);
        for (size_t i = 0; i < p.n; i++)
            p.s[i].weight = mc->no_weights ? 1 : 1 + (uint32_t)(i % 3);
        mcr_snapshot *s0 = snap_of(&p);
        spec x;
        new_spec(&x, mc->no_weights ? 1 : 2, NULL);
        uint64_t w0 = 0;
        for (size_t i = 0; i < p.n; i++)
            w0 += p.s[i].weight;
        const char *mode = mcr_mode_name(mc->mode);

        /* Add one server (slots: with the plan that gives it its share). */
        mcr_snapshot *s1 = with_change(s0, &x, NULL, mc->mode == MCR_MODE_SLOTS);
        double ideal = mc->weighted ? 2.0 / (double)(w0 + 2) : 1.0 / 21;
        double got = moved_keys(s0, s1, 40000, mc->minimal ? x.id : NULL, NULL, mode);
        EXPECT_MSG(got <= ideal * mc->move_max + 0.01 && got >= ideal * 0.7 - 0.01,
                   "%s: adding moved %g, ideal %g", mode, got, ideal);
        mcr_diff *d = diff_of(s0, s1);
        check_diff(s0, s1, d, 3000, mc->model_diff ? 0.03 : 0.025);
        if (!mc->model_diff)
            EXPECT_MSG(fabs(mcr_diff_moved(d) - got) < 0.02, "%s: diff %g, keys %g", mode,
                       mcr_diff_moved(d), got);
        /* Outside the arcs: nothing moved. */
        for (unsigned i = 0; i < 5000 && mcr_diff_arc_count(d) > 0; i++) {
            char key[32];
            size_t len = key_n(key, i);
            uint32_t h = mcr_ring_hash(mcr_snapshot_ring(s0), key, len);
            int in_arc = 0;
            for (size_t k = 0; k < mcr_diff_arc_count(d) && !in_arc; k++) {
                mcr_diff_arc a;
                mcr_diff_arc_get(d, k, &a);
                in_arc = a.first <= h && h <= a.last;
            }
            if (!in_arc)
                EXPECT_STR(owner_of(s0, key, len), ==, owner_of(s1, key, len));
        }
        mcr_diff_free(d);

        /* Remove one server (slots: its slots planned away first). Jump:
         * the last one added is the one whose removal is ideal. */
        const char *victim = mc->mode == MCR_MODE_JUMP ? x.id : id_at(s0, 7);
        mcr_snapshot *base = mc->mode == MCR_MODE_JUMP ? s1 : s0;
        mcr_snapshot *s2 = with_change(base, NULL, victim, mc->mode == MCR_MODE_SLOTS);
        double vw = mc->mode == MCR_MODE_JUMP ? 2 : p.s[7].weight;
        double vtotal = mc->mode == MCR_MODE_JUMP ? (double)(w0 + 2) : (double)w0;
        ideal = mc->weighted ? vw / vtotal : 1.0 / (mc->mode == MCR_MODE_JUMP ? 21 : 20);
        got = moved_keys(base, s2, 40000, NULL, mc->minimal ? victim : NULL, mode);
        EXPECT_MSG(got <= ideal * mc->move_max + 0.01 && got >= ideal * 0.7 - 0.01,
                   "%s: removing moved %g, ideal %g", mode, got, ideal);
        d = diff_of(base, s2);
        check_diff(base, s2, d, 3000, mc->model_diff ? 0.03 : 0.025);
        mcr_diff_free(d);
        mcr_snapshot_unref(s0);
        mcr_snapshot_unref(s1);
        mcr_snapshot_unref(s2);
    }
}
END_TEST

/* 3. Weights 1:2:4 converge to their shares: 8 servers of each weight,
 *    each class's share of 140,000 keys against 1/7, 2/7, 4/7 (the modes
 *    that ignore weights give 1/3 each, as their references do). */
START_TEST(checklist_weights)
{
    for (size_t c = 0; c < NCASES; c++) {
        const mode_case *mc = &cases[c];
        pool p;
        plain_pool(&p, mc->mode, 24, 1);
        if (mc->no_weights) { /* refused, named */
            p.s[5].weight = 2;
            mcr_config *cfg = config_of(&p);
            mcr_snapshot *bad = NULL;
            mcr_error err;
            EXPECT_INT(mcr_snapshot_new(cfg, 1, &bad, &err), ==, MCR_ERR_RANGE);
            EXPECT_MSG(strstr(err.message, p.s[5].host) != NULL, "%s", err.message);
            mcr_config_free(cfg);
            p.s[5].weight = 1;
        }
        for (size_t i = 0; i < p.n; i++)
            p.s[i].weight = mc->no_weights ? 1 : 1u << (i % 3);
        mcr_snapshot *s = snap_of(&p);
        unsigned count[3] = {0}, n = 140000;
        for (unsigned i = 0; i < n; i++) {
            char key[32];
            size_t len = key_n(key, i);
            count[mcr_snapshot_locate(s, key, len) % 3]++;
        }
        for (int i = 0; i < 3; i++) {
            double want = mc->weighted ? (double)(1u << i) / 7 : 1.0 / 3;
            double got = (double)count[i] / n;
            EXPECT_MSG(fabs(got - want) <= mc->share_tol,
                       "%s: weight %u: share %g, want %g", mcr_mode_name(mc->mode), 1u << i, got,
                       want);
        }
        mcr_snapshot_unref(s);
    }
}
END_TEST

static size_t zones_of(const mcr_snapshot *s, const uint32_t *list, size_t n)
{
    size_t zones = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t z = mcr_snapshot_server_zone(s, list[i]);
        int seen = z == 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = mcr_snapshot_server_zone(s, list[j]) == z;
        zones += !seen;
    }
    return zones;
}

/* 4. Replicas on distinct servers and zones, every mode. */
START_TEST(checklist_replicas)
{
    for (size_t c = 0; c < NCASES; c++) {
        const mode_case *mc = &cases[c];
        pool p;
        plain_pool(&p, mc->mode, 24, 1);
        for (size_t i = 0; i < p.n; i++) {
            p.s[i].weight = w_of(mc->mode, 1 + (uint32_t)(i % 2));
            snprintf(p.s[i].zone, sizeof(p.s[i].zone), "zone-%zu", i % 4);
        }
        mcr_snapshot *s = snap_of(&p);
        for (unsigned k = 0; k < 300; k++) {
            char key[32];
            size_t len = key_n(key, k);
            uint32_t out[32];
            int under = -1;
            for (size_t n = 1; n <= 26; n += (n < 5 ? 1 : 7)) {
                size_t got = mcr_snapshot_replicas(s, key, len, n, out, &under);
                EXPECT_MSG(got == (n < 24 ? n : 24), "%s: %zu replicas of %zu",
                           mcr_mode_name(mc->mode), got, n);
                EXPECT_UINT(out[0], ==, mcr_snapshot_locate(s, key, len));
                for (size_t i = 0; i < got; i++)
                    for (size_t j = 0; j < i; j++)
                        EXPECT_MSG(out[i] != out[j], "%s: server %u twice",
                                   mcr_mode_name(mc->mode), out[i]);
                EXPECT_UINT(zones_of(s, out, got), ==, n < 4 ? n : 4);
                EXPECT_INT(under, ==, n > 24);
            }
        }
        mcr_snapshot_unref(s);
    }
}
END_TEST

/* 5. A single hot key stays on one primary: the same answer every time,
 *    and across a change that does not touch its owner (in the modes that
 *    promise it). Under bounded loads it spreads, within the capacity. */
START_TEST(checklist_hot_key)
{
    for (size_t c = 0; c < NCASES; c++) {
        const mode_case *mc = &cases[c];
        pool p;
        plain_pool(&p, mc->mode, 10, 1);
        mcr_snapshot *s = snap_of(&p);
        const char *hot = "the-hot-key";
        uint32_t primary = mcr_snapshot_locate(s, hot, strlen(hot));
        for (int i = 0; i < 1000; i++)
            EXPECT_UINT(mcr_snapshot_locate(s, hot, strlen(hot)), ==, primary);
        if (mc->minimal) {
            spec x;
            new_spec(&x, 1, NULL);
            mcr_snapshot *t = with_change(s, &x, NULL, 0);
            const char *now = owner_of(t, hot, strlen(hot));
            EXPECT(strcmp(now, id_at(s, primary)) == 0 || strcmp(now, x.id) == 0);
            mcr_snapshot_unref(t);
        }
        /* Bounded lookups with every request of the hot key in flight. */
        uint32_t load[MAX_SERVERS] = {0};
        uint64_t total = 0;
        double eps = 0.25;
        for (int i = 0; i < 200; i++) {
            uint32_t at = mcr_snapshot_locate_bounded(s, hot, strlen(hot), load, total, eps);
            EXPECT_UINT(at, <, p.n);
            double cap = ceil((1 + eps) * (double)(total + 1) / 10);
            EXPECT_MSG(load[at] + 1 <= cap, "%s: load %u + 1 over capacity %g",
                       mcr_mode_name(mc->mode), load[at], cap);
            if (i == 0)
                EXPECT_UINT(at, ==, primary);
            load[at]++;
            total++;
        }
        size_t used = 0;
        for (size_t i = 0; i < p.n; i++)
            used += load[i] > 0;
        EXPECT_MSG(used >= 8, "%s: the hot key reached %zu servers", mcr_mode_name(mc->mode),
                   used);
        mcr_snapshot_unref(s);
    }
}
END_TEST

/* 6. A flapping server does not cause repeated mass movement: leaving and
 *    coming back (DOWN and ACTIVE; and removed and added again, where the
 *    mode allows it) restores the placement after the first round. */
START_TEST(checklist_flapping)
{
    mcr_error err;
    for (size_t c = 0; c < NCASES; c++) {
        const mode_case *mc = &cases[c];
        for (int removal = 0; removal < 2; removal++) {
            pool p;
            plain_pool(&p, mc->mode, 12, 1);
            mcr_snapshot *s = snap_of(&p), *first_round = NULL;
            const spec flap = p.s[4];
            double ideal = 1.0 / 12;
            for (int round = 0; round < 4; round++) {
                mcr_changes *ch = mcr_changes_new();
                if (removal) {
                    if (mc->mode == MCR_MODE_SLOTS) {
                        EXPECT_INT(mcr_changes_remove(ch, flap.id, &err), ==, MCR_OK);
                        EXPECT_INT(mcr_slots_plan(s, ch, NULL, &err), ==, MCR_OK);
                    } else {
                        EXPECT_INT(mcr_changes_remove(ch, flap.id, &err), ==, MCR_OK);
                    }
                } else {
                    EXPECT_INT(mcr_changes_set_state(ch, flap.id, MCR_STATE_DOWN, &err), ==,
                               MCR_OK);
                }
                mcr_snapshot *down = apply_ok(s, ch);
                mcr_changes_clear(ch);
                double m1 = moved_keys(s, down, 20000, NULL, NULL, "down");
                if (removal) {
                    mcr_server_desc d = {flap.id, flap.host, flap.port, flap.weight, NULL,
                                         MCR_STATE_ACTIVE, 0};
                    EXPECT_INT(mcr_changes_add(ch, &d, &err), ==, MCR_OK);
                    if (mc->mode == MCR_MODE_SLOTS)
                        EXPECT_INT(mcr_slots_plan(down, ch, NULL, &err), ==, MCR_OK);
                } else {
                    EXPECT_INT(mcr_changes_set_state(ch, flap.id, MCR_STATE_ACTIVE, &err), ==,
                               MCR_OK);
                }
                mcr_snapshot *up = apply_ok(down, ch);
                mcr_changes_free(ch);
                double m2 = moved_keys(down, up, 20000, NULL, NULL, "up");
                if (mc->minimal && !(removal && mc->mode == MCR_MODE_JUMP)) {
                    EXPECT_MSG(m1 <= ideal * 1.3 + 0.01 && m2 <= ideal * 1.3 + 0.01,
                               "%s (%s): round %d moved %g then %g", mcr_mode_name(mc->mode),
                               removal ? "removal" : "down", round, m1, m2);
                }
                if (round == 0) {
                    first_round = mcr_snapshot_ref(up);
                } else {
                    /* Every later round ends where the first did. */
                    double again = moved_keys(first_round, up, 20000, NULL, NULL, "again");
                    EXPECT_MSG(again == 0, "%s (%s): round %d ends %g away from round 0",
                               mcr_mode_name(mc->mode), removal ? "removal" : "down", round,
                               again);
                }
                /* States restore the placement itself in every mode. */
                if (!removal)
                    EXPECT_DBL(moved_keys(s, up, 20000, NULL, NULL, "restored"), ==, 0);
                mcr_snapshot_unref(down);
                mcr_snapshot_unref(s);
                s = up;
            }
            mcr_snapshot_unref(first_round);
            mcr_snapshot_unref(s);
        }
    }
}
END_TEST

/* When a server goes DOWN, each of its keys goes to its first replica, in
 * the modes where the other servers keep what they own (not maglev, which
 * refills its table, nor the modes that normalise or take a modulus): the
 * replica order is the order of failover. */
START_TEST(down_goes_to_first_replica)
{
    static const mcr_mode modes[] = {MCR_MODE_CONSISTENT, MCR_MODE_SPY, MCR_MODE_STABLE_KETAMA,
                                     MCR_MODE_JUMP, MCR_MODE_RENDEZVOUS, MCR_MODE_SLOTS,
                                     MCR_MODE_BOUNDED};
    mcr_error err;
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        pool p;
        plain_pool(&p, modes[m], 9, 1);
        for (size_t i = 0; i < p.n; i++)
            p.s[i].weight = 1 + (uint32_t)(i % 2);
        mcr_snapshot *s = snap_of(&p);
        mcr_changes *ch = mcr_changes_new();
        EXPECT_INT(mcr_changes_set_state(ch, p.s[4].id, MCR_STATE_DOWN, &err), ==, MCR_OK);
        mcr_snapshot *t = apply_ok(s, ch);
        mcr_changes_free(ch);
        unsigned checked = 0;
        for (unsigned k = 0; k < 20000; k++) {
            char key[32];
            size_t kl = key_n(key, k);
            uint32_t rep[2];
            if (mcr_snapshot_locate(s, key, kl) != 4)
                continue;
            EXPECT_UINT(mcr_snapshot_replicas(s, key, kl, 2, rep, NULL), ==, 2);
            EXPECT_MSG(mcr_snapshot_locate(t, key, kl) == rep[1], "%s: %s went to %u, not %u",
                       mcr_mode_name(modes[m]), key, mcr_snapshot_locate(t, key, kl), rep[1]);
            checked++;
        }
        EXPECT_UINT(checked, >, 500);
        mcr_snapshot_unref(t);
        mcr_snapshot_unref(s);
    }
}
END_TEST

/* ------------------------------------------------------------ snapshots */

static char *tmpdir; /* the suite's directory (tu_tmpdir), made by main() */

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static unsigned next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof(buf[0]), "%s/%s", tmpdir, name);
    return b;
}


/* The checksum line as mcroute_snapshot.h defines it: MD5 of the header
 * lines and of the MD5 of each server line. */
static void fix_checksum(char *text, size_t *len)
{
    char *cs = strstr(text, "checksum ");
    char *first = strstr(text, "\nserver ") + 1;
    size_t hlen = (size_t)(first - text), n = hlen;
    unsigned char *buf = malloc(hlen + 16 * 4096), d[16];
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, text, hlen);
    for (char *p = first; p < cs;) {
        char *nl = strchr(p, '\n');
        mcr_md5(p, (size_t)(nl + 1 - p), buf + n);
        n += 16;
        p = nl + 1;
    }
    mcr_md5(buf, n, d);
    free(buf);
    char *o = cs + 9;
    for (int i = 0; i < 16; i++)
        o += sprintf(o, "%02x", d[i]);
    *o++ = '\n';
    *len = (size_t)(o - text);
}

/* A few rounds of changes fit for the mode: servers added (one DOWN),
 * one removed (its slots planned away first), a weight changed, one
 * draining, slots moved by hand. */
static mcr_snapshot *evolve(mcr_snapshot *s, mcr_mode mode, int round)
{
    mcr_error err;
    mcr_changes *ch = mcr_changes_new();
    spec a, b;
    new_spec(&a, w_of(mode, 2), "z1");
    new_spec(&b, 1, NULL);
    mcr_server_desc da = {a.id, a.host, a.port, a.weight, a.zone, MCR_STATE_ACTIVE, 0};
    mcr_server_desc db = {NULL, b.host, b.port, b.weight, NULL, MCR_STATE_DOWN, 0};
    EXPECT_INT(mcr_changes_add(ch, &da, &err), ==, MCR_OK);
    EXPECT_INT(mcr_changes_add(ch, &db, &err), ==, MCR_OK);
    EXPECT_INT(mcr_changes_remove(ch, id_at(s, (uint32_t)round), &err), ==, MCR_OK);
    EXPECT_INT(mcr_changes_set_weight(ch, id_at(s, (uint32_t)round + 1), w_of(mode, 3), &err),
               ==, MCR_OK);
    EXPECT_INT(mcr_changes_set_state(ch, id_at(s, (uint32_t)round + 2), MCR_STATE_DRAINING,
                                     &err),
               ==, MCR_OK);
    if (mode == MCR_MODE_SLOTS) {
        EXPECT_INT(mcr_slots_plan(s, ch, NULL, &err), ==, MCR_OK);
        EXPECT_INT(mcr_changes_move_slots(ch, 100, 120, a.id, &err), ==, MCR_OK);
    }
    mcr_snapshot *out = apply_ok(s, ch);
    mcr_changes_free(ch);
    mcr_snapshot_unref(s);
    return out;
}

/* Every mode saves and loads, after changes, to the same snapshot: same
 * checksum, same text, same lookups and tables; the old modes keep format
 * 1 (their files and checksums unchanged), the native table modes write
 * format 2. */
START_TEST(files_every_mode)
{
    mcr_error err;
    for (size_t c = 0; c < NCASES; c++) {
        mcr_mode mode = cases[c].mode;
        pool p;
        plain_pool(&p, mode, 9, 1);
        for (size_t i = 0; i < p.n; i++)
            snprintf(p.s[i].zone, sizeof(p.s[i].zone), "z%zu", i % 3);
        mcr_snapshot *s = snap_of(&p);
        for (int round = 0; round < 3; round++)
            s = evolve(s, mode, round);
        const char *path = tmp_path("every.snap");
        EXPECT_INT(mcr_snapshot_save(s, path, &err), ==, MCR_OK);
        size_t len;
        char *text = tu_read_file(path, &len);
        int format = mode >= MCR_MODE_JUMP ? 2 : 1;
        char magic[32];
        snprintf(magic, sizeof(magic), "mcroute-snapshot %d\n", format);
        EXPECT_MSG(strncmp(text, magic, strlen(magic)) == 0, "%s: %.20s", mcr_mode_name(mode),
                   text);
        EXPECT_INT(strstr(text, " map=") != NULL, ==, format == 2);
        mcr_snapshot *t = NULL;
        int rc = mcr_snapshot_load(path, NULL, 0, &t, &err);
        EXPECT_MSG(rc == MCR_OK, "%s: load: %s", mcr_mode_name(mode), err.message);
        EXPECT_STR(mcr_snapshot_checksum(t), ==, mcr_snapshot_checksum(s));
        EXPECT_UINT(mcr_snapshot_epoch(t), ==, 4);
        EXPECT_UINT(mcr_snapshot_table_size(t), ==, mcr_snapshot_table_size(s));
        for (size_t i = 0; i < mcr_snapshot_table_size(s); i++)
            EXPECT_UINT(mcr_snapshot_table_entry(t, i), ==, mcr_snapshot_table_entry(s, i));
        for (unsigned k = 0; k < 3000; k++) {
            char key[32];
            size_t kl = key_n(key, k);
            EXPECT_UINT(mcr_snapshot_locate(t, key, kl), ==, mcr_snapshot_locate(s, key, kl));
            if (k % 10 == 0) {
                uint32_t x[5], y[5];
                size_t nx = mcr_snapshot_replicas(s, key, kl, 5, x, NULL);
                EXPECT_UINT(mcr_snapshot_replicas(t, key, kl, 5, y, NULL), ==, nx);
                EXPECT(memcmp(x, y, nx * sizeof(*x)) == 0);
            }
        }
        /* Same text again. */
        EXPECT_INT(mcr_snapshot_save(t, tmp_path("again.snap"), &err), ==, MCR_OK);
        size_t len2;
        char *text2 = tu_read_file(tmp_path("again.snap"), &len2);
        EXPECT_UINT(len2, ==, len);
        EXPECT(memcmp(text, text2, len) == 0);
        /* A diff of the two is empty. */
        mcr_diff *d = diff_of(s, t);
        EXPECT(mcr_diff_moved(d) == 0);
        EXPECT_UINT(mcr_diff_pair_count(d), ==, 0);
        mcr_diff_free(d);
        free(text);
        free(text2);
        mcr_snapshot_unref(t);
        mcr_snapshot_unref(s);
    }
}
END_TEST

/* Forged files of the map modes (checksum recomputed): maps that break
 * the rules are refused, each with its reason. */
START_TEST(files_forged_maps)
{
    mcr_error err;
    for (int slots = 0; slots < 2; slots++) {
        pool p;
        plain_pool(&p, slots ? MCR_MODE_SLOTS : MCR_MODE_JUMP, 3, 2);
        p.slots = 60;
        mcr_snapshot *s = snap_of(&p);
        const char *path = tmp_path("forge.snap");
        EXPECT_INT(mcr_snapshot_save(s, path, &err), ==, MCR_OK);
        size_t len;
        char *good = tu_read_file(path, &len);
        /* jump: buckets 0-1, 2-3, 4-5; slots: 0-19, 20-39, 40-59 */
        EXPECT_MSG(strstr(good, slots ? " map=20-39\n" : " map=2-3\n") != NULL, "%s", good);
        struct {
            const char *from, *to;
            int code;
            const char *msg;
        } jump_cases[] = {
            {" map=2-3\n", " map=2-4\n", MCR_ERR_DUPLICATE, "another server owns"},
            {" map=2-3\n", " map=2\n", MCR_ERR_SYNTAX, "owned by no server"},
            {" map=2-3\n", " map=2-3,\n", MCR_ERR_SYNTAX, "trailing comma"},
            {" map=2-3\n", " map=3-2\n", MCR_ERR_SYNTAX, "a < b"},
            {" map=2-3\n", " map=2-3,9\n", MCR_ERR_RANGE, "beyond the table"},
            {" map=2-3\n", " map=3,2\n", MCR_ERR_CORRUPT, "differs"},
            {" map=2-3\n", " map=2,3\n", MCR_ERR_CORRUPT, "differs"},
            {"mcroute-snapshot 2", "mcroute-snapshot 1", MCR_ERR_SYNTAX, "format 2"},
            {"table 0", "table 7", MCR_ERR_RANGE, "table size"},
        },
          slot_cases[] = {
              {" map=20-39\n", " map=20-40\n", MCR_ERR_DUPLICATE, "another server owns"},
              {" map=20-39\n", " map=21-39\n", MCR_ERR_SYNTAX, "owned by no server"},
              {"table 60", "table 61", MCR_ERR_SYNTAX, "owned by no server"},
              {"table 60", "table 0", MCR_ERR_RANGE, "table size"},
              {" map=20-39\n", " map=39,20-38\n", MCR_ERR_CORRUPT, "differs"},
          };
        size_t nc = slots ? sizeof(slot_cases) / sizeof(slot_cases[0])
                          : sizeof(jump_cases) / sizeof(jump_cases[0]);
        char *t = malloc(len + 256);
        for (size_t c = 0; c < nc; c++) {
            const char *from = slots ? slot_cases[c].from : jump_cases[c].from;
            const char *to = slots ? slot_cases[c].to : jump_cases[c].to;
            int code = slots ? slot_cases[c].code : jump_cases[c].code;
            const char *msg = slots ? slot_cases[c].msg : jump_cases[c].msg;
            memcpy(t, good, len + 1);
            char *at = strstr(t, from);
            ck_assert_ptr_nonnull(at);
            size_t fl = strlen(from), tl = strlen(to);
            memmove(at + tl, at + fl, len - (size_t)(at - t) - fl + 1);
            memcpy(at, to, tl);
            size_t n = len - fl + tl;
            fix_checksum(t, &n);
            tu_write_file(tmp_path("forged.snap"), t, n);
            mcr_snapshot *out = NULL;
            int rc = mcr_snapshot_load(tmp_path("forged.snap"), NULL, 0, &out, &err);
            EXPECT_MSG(rc == code, "%s case %zu: %d, %s", slots ? "slots" : "jump", c, rc,
                       rc ? err.message : "ok");
            EXPECT(out == NULL);
            EXPECT_MSG(strstr(err.message, msg) != NULL, "case %zu: %s", c, err.message);
        }
        free(t);
        free(good);
        mcr_snapshot_unref(s);
    }
    /* A map in a mode without one. */
    pool p;
    plain_pool(&p, MCR_MODE_MAGLEV, 2, 1);
    mcr_snapshot *s = snap_of(&p);
    EXPECT_INT(mcr_snapshot_save(s, tmp_path("m.snap"), &err), ==, MCR_OK);
    size_t len;
    char *t = tu_read_file(tmp_path("m.snap"), &len);
    t = realloc(t, len + 3); /* room for the two bytes inserted below */
    ck_assert_ptr_nonnull(t);
    char *at = strstr(t, " map=\n");
    ck_assert_ptr_nonnull(at);
    memmove(at + 7, at + 5, len - (size_t)(at - t) - 5 + 1);
    memcpy(at + 5, "01", 2);
    len += 2;
    fix_checksum(t, &len);
    tu_write_file(tmp_path("m2.snap"), t, len);
    mcr_snapshot *out = NULL;
    EXPECT_INT(mcr_snapshot_load(tmp_path("m2.snap"), NULL, 0, &out, &err), ==, MCR_ERR_SYNTAX);
    EXPECT(strstr(err.message, "without one") != NULL);
    free(t);
    mcr_snapshot_unref(s);
}
END_TEST

/* The modes whose table is a function of the servers ("maglev",
 * "rendezvous", "bounded") and "jump" grown by appending: a snapshot
 * applied step by step is the snapshot made at once from the same list. */
START_TEST(apply_equals_new)
{
    static const mcr_mode modes[] = {MCR_MODE_MAGLEV, MCR_MODE_RENDEZVOUS, MCR_MODE_BOUNDED,
                                     MCR_MODE_JUMP};
    mcr_error err;
    for (size_t m = 0; m < 4; m++) {
        pool p;
        plain_pool(&p, modes[m], 6, 1);
        mcr_snapshot *s = snap_of(&p);
        for (int round = 0; round < 4; round++) {
            mcr_changes *ch = mcr_changes_new();
            spec x;
            new_spec(&x, 1 + (uint32_t)round % 3, NULL);
            mcr_server_desc d = {x.id, x.host, x.port, x.weight, NULL, MCR_STATE_ACTIVE, 0};
            EXPECT_INT(mcr_changes_add(ch, &d, &err), ==, MCR_OK);
            p.s[p.n++] = x;
            if (modes[m] != MCR_MODE_JUMP) { /* jump: removals are history */
                EXPECT_INT(mcr_changes_remove(ch, p.s[1].id, &err), ==, MCR_OK);
                memmove(&p.s[1], &p.s[2], (p.n - 2) * sizeof(spec));
                p.n--;
                EXPECT_INT(mcr_changes_set_weight(ch, p.s[0].id, 2 + (uint32_t)round, &err),
                           ==, MCR_OK);
                p.s[0].weight = 2 + (uint32_t)round;
            } else { /* a weight that grows appends too */
                EXPECT_INT(mcr_changes_set_weight(ch, p.s[p.n - 1].id, 4, &err), ==, MCR_OK);
                p.s[p.n - 1].weight = 4;
            }
            mcr_snapshot *t = apply_ok(s, ch);
            mcr_changes_free(ch);
            mcr_snapshot_unref(s);
            s = t;
            mcr_config *cfg = config_of(&p);
            mcr_snapshot *u = NULL;
            EXPECT_INT(mcr_snapshot_new(cfg, mcr_snapshot_epoch(s), &u, &err), ==, MCR_OK);
            EXPECT_MSG(strcmp(mcr_snapshot_checksum(u), mcr_snapshot_checksum(s)) == 0,
                       "%s round %d: applied and new differ", mcr_mode_name(modes[m]), round);
            /* The ring of the config too. */
            mcr_ring *ring = NULL;
            EXPECT_INT(mcr_ring_new(cfg, &ring, &err), ==, MCR_OK);
            for (unsigned k = 0; k < 2000; k++) {
                char key[32];
                size_t kl = key_n(key, k);
                EXPECT_UINT(mcr_ring_locate(ring, key, kl), ==, mcr_snapshot_locate(s, key, kl));
            }
            mcr_ring_free(ring);
            mcr_config_free(cfg);
            mcr_snapshot_unref(u);
        }
        mcr_snapshot_unref(s);
    }
}
END_TEST

/* ------------------------------------------------------------ slots */

START_TEST(slots_moves_and_plan)
{
    mcr_error err;
    size_t moved = 99;
    pool p;
    plain_pool(&p, MCR_MODE_SLOTS, 4, 1);
    mcr_snapshot *s0 = snap_of(&p);
    /* Contiguous ranges by weight: 4096 each. */
    for (uint32_t sl = 0; sl < 16384; sl++)
        EXPECT_UINT(mcr_snapshot_table_entry(s0, sl), ==, sl / 4096);
    EXPECT_INT(mcr_slots_plan(s0, NULL, NULL, &err), ==, MCR_ERR_INVALID);
    mcr_changes *ch = mcr_changes_new();
    EXPECT_INT(mcr_slots_plan(s0, ch, &moved, &err), ==, MCR_OK);
    EXPECT_UINT(moved, ==, 0); /* balanced already */
    EXPECT_UINT(mcr_changes_count(ch), ==, 0);

    /* A new server owns nothing until slots move to it. */
    spec e;
    new_spec(&e, 1, NULL);
    mcr_snapshot *s1 = with_change(s0, &e, NULL, 0);
    long ei = mcr_snapshot_find(s1, e.id);
    EXPECT(ei == 4);
    for (uint32_t sl = 0; sl < 16384; sl++)
        EXPECT_UINT(mcr_snapshot_table_entry(s1, sl), ==, sl / 4096);
    mcr_diff *d = diff_of(s0, s1);
    EXPECT(mcr_diff_moved(d) == 0);
    mcr_diff_free(d);

    /* The plan: 16384 = 5 x 3276 + 4, the four extra slots to the first
     * servers; every old server gives its 819 highest slots. */
    EXPECT_INT(mcr_slots_plan(s1, ch, &moved, &err), ==, MCR_OK);
    EXPECT_UINT(moved, ==, 3276);
    EXPECT_UINT(mcr_changes_count(ch), ==, 4);
    mcr_snapshot *s2 = apply_ok(s1, ch);
    mcr_changes_clear(ch);
    uint32_t count[8] = {0};
    for (uint32_t sl = 0; sl < 16384; sl++) {
        uint32_t o = mcr_snapshot_table_entry(s2, sl);
        count[o]++;
        if (o < 4)
            EXPECT_UINT(o, ==, sl / 4096); /* kept slots stay */
        else
            EXPECT_UINT(sl % 4096, >=, 4096 - 819); /* the highest ones moved */
    }
    for (int i = 0; i < 4; i++)
        EXPECT_UINT(count[i], ==, 3277);
    EXPECT_UINT(count[4], ==, 3276);
    d = diff_of(s1, s2);
    EXPECT_DBL(mcr_diff_moved(d), ==, 3276.0 / 16384); /* exact: 4 CRC values a slot */
    EXPECT_UINT(mcr_diff_pair_count(d), ==, 4);
    check_diff(s1, s2, d, 3000, 0.02);
    mcr_diff_free(d);
    moved_keys(s1, s2, 20000, e.id, NULL, "plan");
    EXPECT_INT(mcr_slots_plan(s2, ch, &moved, &err), ==, MCR_OK);
    EXPECT_UINT(moved, ==, 0);

    /* Removing a server that owns slots: refused, unless its slots move. */
    mcr_snapshot *bad = NULL;
    EXPECT_INT(mcr_changes_remove(ch, id_at(s2, 1), &err), ==, MCR_OK);
    EXPECT_INT(mcr_snapshot_apply(s2, ch, &bad, &err), ==, MCR_ERR_INVALID);
    EXPECT(bad == NULL);
    EXPECT_MSG(strstr(err.message, "slots 4096-7372 belong to") != NULL && strstr(err.message, "move") != NULL,
               "%s", err.message);
    EXPECT_INT(mcr_slots_plan(s2, ch, &moved, &err), ==, MCR_OK);
    EXPECT_UINT(moved, ==, 3277);
    mcr_snapshot *s3 = apply_ok(s2, ch);
    mcr_changes_clear(ch);
    EXPECT_UINT(mcr_snapshot_server_count(s3), ==, 4);
    moved_keys(s2, s3, 20000, NULL, id_at(s2, 1), "remove");
    d = diff_of(s2, s3);
    EXPECT_DBL(mcr_diff_moved(d), ==, 3277.0 / 16384);
    mcr_diff_free(d);

    /* A server moved to another address under its id keeps its slots. */
    mcr_server_desc cur;
    EXPECT_INT(mcr_snapshot_server(s3, 0, &cur), ==, MCR_OK);
    EXPECT_INT(mcr_changes_remove(ch, cur.id, &err), ==, MCR_OK);
    mcr_server_desc moved_desc = cur;
    moved_desc.host = "192.168.1.1";
    EXPECT_INT(mcr_changes_add(ch, &moved_desc, &err), ==, MCR_OK);
    mcr_snapshot *s4 = apply_ok(s3, ch);
    mcr_changes_clear(ch);
    d = diff_of(s3, s4);
    EXPECT(mcr_diff_moved(d) == 0);
    mcr_diff_free(d);

    /* DOWN: the map keeps the owner, its keys spread over the others by
     * slots, and come back. */
    const char *down = id_at(s4, 2);
    EXPECT_INT(mcr_changes_set_state(ch, down, MCR_STATE_DOWN, &err), ==, MCR_OK);
    mcr_snapshot *s5 = apply_ok(s4, ch);
    mcr_changes_clear(ch);
    for (uint32_t sl = 0; sl < 16384; sl++)
        EXPECT_UINT(mcr_snapshot_table_entry(s5, sl), ==, mcr_snapshot_table_entry(s4, sl));
    d = diff_of(s4, s5);
    EXPECT_UINT(mcr_diff_pair_count(d), ==, 3);
    for (size_t i = 0; i < 3; i++) {
        mcr_diff_pair pr;
        mcr_diff_pair_get(d, i, &pr);
        EXPECT_STR(pr.from, ==, down);
        EXPECT_MSG(fabs(pr.fraction - mcr_diff_moved(d) / 3) < 0.02, "%s gets %g of %g", pr.to,
                   pr.fraction, mcr_diff_moved(d));
    }
    mcr_diff_free(d);
    EXPECT_INT(mcr_changes_set_state(ch, down, MCR_STATE_ACTIVE, &err), ==, MCR_OK);
    mcr_snapshot *s6 = apply_ok(s5, ch);
    mcr_changes_clear(ch);
    EXPECT_STR(mcr_snapshot_checksum(s6) + 0, !=, mcr_snapshot_checksum(s4)); /* epochs differ */
    d = diff_of(s4, s6);
    EXPECT(mcr_diff_moved(d) == 0);
    mcr_diff_free(d);

    /* DRAINING and a plan: its slots move away; a weight change and a plan:
     * quotas follow weights. */
    EXPECT_INT(mcr_changes_set_state(ch, down, MCR_STATE_DRAINING, &err), ==, MCR_OK);
    EXPECT_INT(mcr_changes_set_weight(ch, id_at(s6, 0), 2, &err), ==, MCR_OK);
    EXPECT_INT(mcr_slots_plan(s6, ch, &moved, &err), ==, MCR_OK);
    mcr_snapshot *s7 = apply_ok(s6, ch);
    mcr_changes_clear(ch);
    memset(count, 0, sizeof(count));
    for (uint32_t sl = 0; sl < 16384; sl++)
        count[mcr_snapshot_table_entry(s7, sl)]++;
    EXPECT_UINT(count[2], ==, 0); /* quotas 2:1:1 among the three others */
    EXPECT_UINT(count[0], ==, 8192);
    EXPECT_UINT(count[1], ==, 4096);
    EXPECT_UINT(count[3], ==, 4096);

    /* Hand moves: checked at apply. */
    EXPECT_INT(mcr_changes_move_slots(ch, 5, 4, "x", &err), ==, MCR_ERR_RANGE);
    EXPECT_INT(mcr_changes_move_slots(ch, 0, MCR_SLOTS_MAX, "x", &err), ==, MCR_ERR_RANGE);
    EXPECT_INT(mcr_changes_move_slots(NULL, 0, 1, "x", &err), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_changes_move_slots(ch, 0, 1, NULL, &err), ==, MCR_ERR_INVALID);
    EXPECT_UINT(mcr_changes_count(ch), ==, 0);
    EXPECT_INT(mcr_changes_move_slots(ch, 0, 16384, id_at(s7, 0), &err), ==, MCR_OK);
    EXPECT_INT(mcr_snapshot_apply(s7, ch, &bad, &err), ==, MCR_ERR_RANGE);
    mcr_changes_clear(ch);
    EXPECT_INT(mcr_changes_move_slots(ch, 0, 10, "nobody", &err), ==, MCR_OK);
    EXPECT_INT(mcr_snapshot_apply(s7, ch, &bad, &err), ==, MCR_ERR_UNKNOWN);
    EXPECT_INT(mcr_slots_plan(s7, ch, &moved, &err), ==, MCR_ERR_UNKNOWN);
    EXPECT_UINT(mcr_changes_count(ch), ==, 1); /* nothing appended */
    mcr_changes_clear(ch);
    EXPECT_INT(mcr_changes_move_slots(ch, 0, 10, id_at(s7, 2), &err), ==, MCR_OK);
    mcr_snapshot *s8 = apply_ok(s7, ch); /* to a draining server: allowed */
    EXPECT_UINT(mcr_snapshot_table_entry(s8, 5), ==, 2);
    EXPECT_UINT(mcr_snapshot_locate(s8, "x", 1), !=, 2);
    mcr_snapshot_unref(s8);
    bad = NULL;
    EXPECT_INT(mcr_snapshot_apply(s0 == NULL ? s7 : s7, ch, &bad, &err), ==, MCR_OK);
    mcr_snapshot_unref(bad);
    /* In another mode: refused. */
    mcr_snapshot *other;
    plain_pool(&p, MCR_MODE_JUMP, 3, 1);
    other = snap_of(&p);
    mcr_changes_clear(ch);
    EXPECT_INT(mcr_changes_move_slots(ch, 0, 1, id_at(other, 0), &err), ==, MCR_OK);
    bad = NULL;
    EXPECT_INT(mcr_snapshot_apply(other, ch, &bad, &err), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_slots_plan(other, ch, &moved, &err), ==, MCR_ERR_INVALID);
    EXPECT(bad == NULL);
    mcr_snapshot_unref(other);
    mcr_changes_free(ch);
    mcr_snapshot *all[] = {s0, s1, s2, s3, s4, s5, s6, s7};
    for (size_t i = 0; i < 8; i++)
        mcr_snapshot_unref(all[i]);
}
END_TEST

/* ------------------------------------------------------------ jump */

START_TEST(jump_removals)
{
    mcr_error err;
    pool p;
    plain_pool(&p, MCR_MODE_JUMP, 10, 1);
    mcr_snapshot *s0 = snap_of(&p);
    mcr_changes *ch = mcr_changes_new();

    /* The last bucket: the ideal, 1/10, all from it. */
    EXPECT_INT(mcr_changes_remove(ch, p.s[9].id, &err), ==, MCR_OK);
    mcr_snapshot *last = apply_ok(s0, ch);
    mcr_changes_clear(ch);
    mcr_diff *d = diff_of(s0, last);
    EXPECT_MSG(fabs(mcr_diff_moved(d) - 0.1) < 1e-12, "moved %.17g", mcr_diff_moved(d));
    check_diff(s0, last, d, 20000, 0.01);
    mcr_diff_free(d);
    moved_keys(s0, last, 20000, NULL, p.s[9].id, "remove last");

    /* A bucket in the middle: the last server takes it over and the keys
     * of the last bucket spread: 1/10 + (1/10)(8/9) by the model. */
    EXPECT_INT(mcr_changes_remove(ch, p.s[3].id, &err), ==, MCR_OK);
    mcr_snapshot *mid = apply_ok(s0, ch);
    mcr_changes_clear(ch);
    EXPECT_UINT(mcr_snapshot_table_size(mid), ==, 9);
    EXPECT_UINT(mcr_snapshot_table_entry(mid, 3), ==, mcr_snapshot_find(mid, p.s[9].id));
    d = diff_of(s0, mid);
    EXPECT_MSG(fabs(mcr_diff_moved(d) - (0.1 + 0.08 / 0.9)) < 1e-12, "moved %.17g",
               mcr_diff_moved(d));
    check_diff(s0, mid, d, 20000, 0.01);
    mcr_diff_free(d);

    /* DOWN: a hole, only its keys move (1/10), back when ACTIVE. */
    EXPECT_INT(mcr_changes_set_state(ch, p.s[3].id, MCR_STATE_DOWN, &err), ==, MCR_OK);
    mcr_snapshot *down = apply_ok(s0, ch);
    mcr_changes_clear(ch);
    d = diff_of(s0, down);
    EXPECT_MSG(fabs(mcr_diff_moved(d) - 0.1) < 1e-12, "moved %.17g", mcr_diff_moved(d));
    EXPECT_UINT(mcr_diff_pair_count(d), ==, 9);
    check_diff(s0, down, d, 20000, 0.01);
    mcr_diff_free(d);
    moved_keys(s0, down, 20000, NULL, p.s[3].id, "down");
    /* Two holes, and a hole against a removal: still the model's. */
    EXPECT_INT(mcr_changes_set_state(ch, p.s[5].id, MCR_STATE_DRAINING, &err), ==, MCR_OK);
    mcr_snapshot *down2 = apply_ok(down, ch);
    mcr_changes_clear(ch);
    d = diff_of(down, down2);
    check_diff(down, down2, d, 20000, 0.01);
    mcr_diff_free(d);
    d = diff_of(mid, down2);
    check_diff(mid, down2, d, 20000, 0.01);
    mcr_diff_free(d);
    d = diff_of(down2, mid);
    check_diff(down2, mid, d, 20000, 0.01);
    mcr_diff_free(d);

    /* Removed and added again under its id (a new address) in one batch:
     * same buckets, nothing moves. */
    mcr_server_desc x;
    EXPECT_INT(mcr_snapshot_server(s0, 3, &x), ==, MCR_OK);
    EXPECT_INT(mcr_changes_remove(ch, x.id, &err), ==, MCR_OK);
    x.host = "172.16.0.3";
    EXPECT_INT(mcr_changes_add(ch, &x, &err), ==, MCR_OK);
    mcr_snapshot *readd = apply_ok(s0, ch);
    mcr_changes_clear(ch);
    d = diff_of(s0, readd);
    EXPECT(mcr_diff_moved(d) == 0);
    mcr_diff_free(d);
    EXPECT_UINT(mcr_snapshot_table_entry(readd, 3), ==, mcr_snapshot_find(readd, x.id));

    /* Weights: up appends, down frees the highest buckets at the end. */
    EXPECT_INT(mcr_changes_set_weight(ch, p.s[2].id, 4, &err), ==, MCR_OK);
    mcr_snapshot *up = apply_ok(s0, ch);
    mcr_changes_clear(ch);
    EXPECT_UINT(mcr_snapshot_table_size(up), ==, 13);
    for (uint32_t b = 10; b < 13; b++)
        EXPECT_UINT(mcr_snapshot_table_entry(up, b), ==, 2);
    moved_keys(s0, up, 20000, p.s[2].id, NULL, "weight up");
    EXPECT_INT(mcr_changes_set_weight(ch, p.s[2].id, 1, &err), ==, MCR_OK);
    mcr_snapshot *back = apply_ok(up, ch);
    mcr_changes_clear(ch);
    d = diff_of(s0, back);
    EXPECT(mcr_diff_moved(d) == 0); /* its last buckets were the last ones */
    mcr_diff_free(d);
    EXPECT_INT(mcr_changes_set_weight(ch, p.s[2].id, 1, &err), ==, MCR_OK);
    EXPECT_INT(mcr_changes_set_weight(ch, p.s[2].id, 5, &err), ==, MCR_OK);
    mcr_snapshot *net = apply_ok(up, ch); /* a net change of +1 appends one */
    mcr_changes_clear(ch);
    EXPECT_UINT(mcr_snapshot_table_size(net), ==, 14);
    mcr_snapshot_unref(net);

    /* Limits: weights up to MCR_STABLE_WEIGHT_MAX. */
    mcr_snapshot *bad = NULL;
    EXPECT_INT(mcr_changes_set_weight(ch, p.s[2].id, MCR_STABLE_WEIGHT_MAX + 1, &err), ==,
               MCR_OK);
    EXPECT_INT(mcr_snapshot_apply(s0, ch, &bad, &err), ==, MCR_ERR_RANGE);
    mcr_changes_clear(ch);
    p.s[0].weight = MCR_STABLE_WEIGHT_MAX + 1;
    mcr_config *cfg = config_of(&p);
    EXPECT_INT(mcr_snapshot_new(cfg, 1, &bad, &err), ==, MCR_ERR_RANGE);
    mcr_ring *ring = NULL;
    EXPECT_INT(mcr_ring_new(cfg, &ring, &err), ==, MCR_ERR_RANGE);
    mcr_config_free(cfg);
    EXPECT(bad == NULL && ring == NULL);

    /* A server added DOWN: its buckets are trailing holes, which lookups
     * do not jump to, so nothing moves; brought up, it takes its ideal
     * share, all of it from the others. */
    spec nx;
    new_spec(&nx, 1, NULL);
    mcr_server_desc nd = {nx.id, nx.host, nx.port, 1, NULL, MCR_STATE_ACTIVE, 0};
    EXPECT_INT(mcr_changes_add(ch, &nd, &err), ==, MCR_OK);
    EXPECT_INT(mcr_changes_set_state(ch, nx.id, MCR_STATE_DOWN, &err), ==, MCR_OK);
    mcr_snapshot *added_down = apply_ok(s0, ch);
    mcr_changes_clear(ch);
    EXPECT_UINT(mcr_snapshot_table_size(added_down), ==, 11);
    d = diff_of(s0, added_down);
    EXPECT_MSG(mcr_diff_moved(d) == 0, "moved %.17g", mcr_diff_moved(d));
    mcr_diff_free(d);
    char kb[32];
    for (unsigned i = 0; i < 20000; i++) {
        size_t kl = key_n(kb, i);
        EXPECT_STR(owner_of(s0, kb, kl), ==, owner_of(added_down, kb, kl));
    }
    EXPECT_INT(mcr_changes_set_state(ch, nx.id, MCR_STATE_ACTIVE, &err), ==, MCR_OK);
    mcr_snapshot *brought_up = apply_ok(added_down, ch);
    mcr_changes_clear(ch);
    d = diff_of(added_down, brought_up);
    EXPECT_MSG(fabs(mcr_diff_moved(d) - 1.0 / 11) < 1e-12, "moved %.17g", mcr_diff_moved(d));
    check_diff(added_down, brought_up, d, 20000, 0.01);
    mcr_diff_free(d);
    moved_keys(added_down, brought_up, 20000, nx.id, NULL, "brought up");

    mcr_changes_free(ch);
    mcr_snapshot *all[] = {s0, last, mid, down, down2, readd, up, back, added_down, brought_up};
    for (size_t i = 0; i < 10; i++)
        mcr_snapshot_unref(all[i]);
}
END_TEST

/* Random batches on jump: every server always owns as many buckets as its
 * weight (the build checks it), and files round-trip. */
START_TEST(jump_random_batches)
{
    mcr_error err;
    tu_rng r;
    tu_rng_init(&r, 9);
    pool p;
    plain_pool(&p, MCR_MODE_JUMP, 12, 2);
    mcr_snapshot *s = snap_of(&p);
    for (int round = 0; round < 60; round++) {
        mcr_changes *ch = mcr_changes_new();
        size_t n = mcr_snapshot_server_count(s);
        for (unsigned k = 0; k < 1 + tu_below(&r, 4); k++) {
            unsigned what = tu_below(&r, 5);
            const char *id = id_at(s, tu_below(&r, (uint32_t)n));
            if (what == 0 || n < 4) {
                spec x;
                new_spec(&x, 1 + tu_below(&r, 4), NULL);
                mcr_server_desc d = {x.id, x.host, x.port, x.weight, NULL,
                                     tu_below(&r, 4) ? MCR_STATE_ACTIVE : MCR_STATE_DOWN, 0};
                EXPECT_INT(mcr_changes_add(ch, &d, &err), ==, MCR_OK);
            } else if (what == 1) {
                mcr_changes_remove(ch, id, &err);
            } else if (what == 2) {
                mcr_changes_set_weight(ch, id, 1 + tu_below(&r, 5), &err);
            } else {
                mcr_changes_set_state(ch, id,
                                      tu_below(&r, 2) ? MCR_STATE_ACTIVE : MCR_STATE_DOWN, &err);
            }
        }
        mcr_snapshot *t = NULL;
        int rc = mcr_snapshot_apply(s, ch, &t, &err);
        mcr_changes_free(ch);
        if (rc != MCR_OK) { /* a duplicate remove, or no active server left */
            EXPECT_MSG(rc == MCR_ERR_UNKNOWN || rc == MCR_ERR_EMPTY, "%d: %s", rc, err.message);
            continue;
        }
        uint32_t owned[512] = {0};
        for (size_t b = 0; b < mcr_snapshot_table_size(t); b++)
            owned[mcr_snapshot_table_entry(t, b)]++;
        for (size_t i = 0; i < mcr_snapshot_server_count(t); i++) {
            mcr_server_desc d;
            mcr_snapshot_server(t, i, &d);
            EXPECT_UINT(owned[i], ==, d.weight);
        }
        mcr_diff *d = diff_of(s, t);
        check_diff(s, t, d, 4000, 0.035);
        mcr_diff_free(d);
        mcr_snapshot_unref(s);
        s = t;
    }
    EXPECT_INT(mcr_snapshot_save(s, tmp_path("jr.snap"), &err), ==, MCR_OK);
    mcr_snapshot *t = NULL;
    EXPECT_INT(mcr_snapshot_load(tmp_path("jr.snap"), NULL, 0, &t, &err), ==, MCR_OK);
    EXPECT_STR(mcr_snapshot_checksum(t), ==, mcr_snapshot_checksum(s));
    mcr_snapshot_unref(t);
    mcr_snapshot_unref(s);
}
END_TEST

/* Random weight changes on rendezvous: the model's shares against keys,
 * including several servers changed at once. */
START_TEST(rendezvous_random_changes)
{
    mcr_error err;
    tu_rng r;
    tu_rng_init(&r, 10);
    pool p;
    plain_pool(&p, MCR_MODE_RENDEZVOUS, 8, 1);
    for (size_t i = 0; i < p.n; i++)
        p.s[i].weight = 1 + tu_below(&r, 9);
    mcr_snapshot *s = snap_of(&p);
    for (int round = 0; round < 25; round++) {
        mcr_changes *ch = mcr_changes_new();
        size_t n = mcr_snapshot_server_count(s);
        for (unsigned k = 0; k < 1 + tu_below(&r, 4); k++) {
            const char *id = id_at(s, tu_below(&r, (uint32_t)n));
            if (tu_below(&r, 6) == 0 || n < 4) {
                spec x;
                new_spec(&x, 1 + tu_below(&r, 9), NULL);
                mcr_server_desc d = {x.id, x.host, x.port, x.weight, NULL, MCR_STATE_ACTIVE, 0};
                mcr_changes_add(ch, &d, &err);
            } else if (tu_below(&r, 5) == 0) {
                mcr_changes_remove(ch, id, &err);
            } else {
                mcr_changes_set_weight(ch, id, 1 + tu_below(&r, 9), &err);
            }
        }
        mcr_snapshot *t = NULL;
        int rc = mcr_snapshot_apply(s, ch, &t, &err);
        mcr_changes_free(ch);
        if (rc != MCR_OK)
            continue;
        mcr_diff *d = diff_of(s, t);
        check_diff(s, t, d, 30000, 0.012);
        /* Per pair too: the keys that went from x to y. */
        for (size_t i = 0; i < mcr_diff_pair_count(d) && i < 3; i++) {
            mcr_diff_pair pr;
            mcr_diff_pair_get(d, i, &pr);
            unsigned hits = 0, n2 = 30000;
            for (unsigned k = 0; k < n2; k++) {
                char key[32];
                size_t kl = key_n(key, 9000000 + k);
                hits += strcmp(owner_of(s, key, kl), pr.from) == 0 &&
                        strcmp(owner_of(t, key, kl), pr.to) == 0;
            }
            EXPECT_MSG(fabs((double)hits / n2 - pr.fraction) < 0.01, "%s -> %s: keys %g, model %g",
                       pr.from, pr.to, (double)hits / n2, pr.fraction);
        }
        mcr_diff_free(d);
        mcr_snapshot_unref(s);
        s = t;
    }
    mcr_snapshot_unref(s);
}
END_TEST

/* Diffs across modes: those counting the same thing compare (maglev
 * against a continuum or modula, exactly), the others are refused. */
START_TEST(diff_across_native_modes)
{
    mcr_error err;
    pool p;
    plain_pool(&p, MCR_MODE_MAGLEV, 8, 1);
    p.table = 1009;
    mcr_snapshot *mg = snap_of(&p);
    p.mode = MCR_MODE_STABLE_KETAMA;
    mcr_snapshot *sk = snap_of(&p);
    p.mode = MCR_MODE_MODULA;
    mcr_snapshot *mo = snap_of(&p);
    p.mode = MCR_MODE_JUMP;
    mcr_snapshot *jp = snap_of(&p);
    p.mode = MCR_MODE_RENDEZVOUS;
    mcr_snapshot *rv = snap_of(&p);
    p.mode = MCR_MODE_SLOTS;
    mcr_snapshot *sl = snap_of(&p);
    p.mode = MCR_MODE_BOUNDED;
    mcr_snapshot *bd = snap_of(&p);
    mcr_snapshot *ok[][2] = {{mg, sk}, {sk, mg}, {mg, mo}, {mo, mg}, {bd, sk}, {mg, bd}};
    for (size_t i = 0; i < 6; i++) {
        mcr_diff *d = diff_of(ok[i][0], ok[i][1]);
        check_diff(ok[i][0], ok[i][1], d, 5000, 0.02);
        /* exact: hash values one by one over a sample */
        unsigned hits = 0, n = 50000;
        tu_rng r;
        tu_rng_init(&r, 11 + i);
        const mcr_ring *ra = mcr_snapshot_ring(ok[i][0]), *rb = mcr_snapshot_ring(ok[i][1]);
        for (unsigned k = 0; k < n; k++) {
            uint32_t h = (uint32_t)tu_rand(&r);
            hits += strcmp(id_at(ok[i][0], mcr_snapshot_ring_server(ok[i][0], mcr_ring_find(ra, h))),
                           id_at(ok[i][1], mcr_snapshot_ring_server(ok[i][1], mcr_ring_find(rb, h)))) != 0;
        }
        EXPECT_MSG(fabs((double)hits / n - mcr_diff_moved(d)) < 0.01, "pair %zu: %g vs %g", i,
                   (double)hits / n, mcr_diff_moved(d));
        mcr_diff_free(d);
    }
    mcr_snapshot *no[][2] = {{jp, mg}, {mg, jp}, {rv, sk}, {sl, mg}, {mg, sl}, {jp, rv}, {sl, jp}};
    for (size_t i = 0; i < 7; i++) {
        mcr_diff *d = NULL;
        EXPECT_INT(mcr_diff_new(no[i][0], no[i][1], &d, &err), ==, MCR_ERR_UNSUPPORTED);
        EXPECT(d == NULL);
        EXPECT(strstr(err.message, "different rules") != NULL);
    }
    /* Slots ignore the key hash: two slot maps compare whatever it is. */
    plain_pool(&p, MCR_MODE_SLOTS, 8, 1);
    p.hash = MCR_HASH_FNV1A_32;
    mcr_snapshot *sl2 = snap_of(&p);
    mcr_diff *d = diff_of(sl, sl2);
    check_diff(sl, sl2, d, 3000, 0.02);
    mcr_diff_free(d);
    mcr_snapshot *all[] = {mg, sk, mo, jp, rv, sl, bd, sl2};
    for (size_t i = 0; i < 8; i++)
        mcr_snapshot_unref(all[i]);
}
END_TEST

/* ------------------------------------------------------------ bounded loads */

START_TEST(bounded_simulation)
{
    tu_rng r;
    tu_rng_init(&r, 12);
    pool p;
    plain_pool(&p, MCR_MODE_BOUNDED, 20, 1);
    for (size_t i = 0; i < p.n; i++)
        p.s[i].weight = 1 + (uint32_t)(i % 3);
    mcr_snapshot *s = snap_of(&p);
    uint64_t wsum = 0;
    for (size_t i = 0; i < p.n; i++)
        wsum += p.s[i].weight;

    /* Loads at 0: the plain owner. */
    uint32_t load[MAX_SERVERS] = {0};
    for (unsigned k = 0; k < 3000; k++) {
        char key[32];
        size_t kl = key_n(key, k);
        EXPECT_UINT(mcr_snapshot_locate_bounded(s, key, kl, load, 0, 0.25), ==,
                    mcr_snapshot_locate(s, key, kl));
    }

    /* Requests arrive (a few hot keys, many cold ones) and complete at
     * random; no server ever exceeds its capacity. */
    enum { WINDOW = 400 };
    uint32_t inflight[WINDOW];
    size_t nin = 0;
    uint64_t total = 0;
    unsigned spilled = 0;
    for (unsigned step = 0; step < 60000; step++) {
        if (nin == WINDOW || (nin > 0 && tu_below(&r, 2) == 0)) {
            size_t k = tu_below(&r, (uint32_t)nin);
            load[inflight[k]]--;
            total--;
            inflight[k] = inflight[--nin];
            continue;
        }
        char key[32];
        size_t kl = tu_below(&r, 3) == 0 ? (size_t)sprintf(key, "hot-%u", tu_below(&r, 3))
                                         : key_n(key, tu_below(&r, 100000));
        double eps = step % 2 ? 0.25 : 0.0;
        uint32_t at = mcr_snapshot_locate_bounded(s, key, kl, load, total, eps);
        double cap = ceil((1 + eps) * (double)(total + 1) * p.s[at].weight / (double)wsum);
        EXPECT_MSG(load[at] + 1 <= cap, "server %u: load %u + 1 above %g", at, load[at], cap);
        spilled += at != mcr_snapshot_locate(s, key, kl);
        load[at]++;
        total++;
        inflight[nin++] = at;
    }
    EXPECT_UINT(spilled, >, 0);

    /* Epsilon: negative or NaN is 0; huge is the plain owner. DOWN
     * servers' counts are not read. */
    memset(load, 0, sizeof(load));
    uint32_t prim = mcr_snapshot_locate(s, "k", 1);
    load[prim] = 1;
    uint32_t a0 = mcr_snapshot_locate_bounded(s, "k", 1, load, 1, 0.0);
    EXPECT_UINT(mcr_snapshot_locate_bounded(s, "k", 1, load, 1, -3.0), ==, a0);
    EXPECT_UINT(mcr_snapshot_locate_bounded(s, "k", 1, load, 1, NAN), ==, a0);
    EXPECT_UINT(mcr_snapshot_locate_bounded(s, "k", 1, load, 1, 1e30), ==, prim);
    load[prim] = 1000; /* a total below the sum: the primary, not a loop */
    uint32_t any = mcr_snapshot_locate_bounded(s, "k", 1, load, 0, 0.0);
    EXPECT_UINT(any, <, p.n);
    mcr_error err;
    mcr_changes *ch = mcr_changes_new();
    EXPECT_INT(mcr_changes_set_state(ch, id_at(s, prim), MCR_STATE_DOWN, &err), ==, MCR_OK);
    mcr_snapshot *t = apply_ok(s, ch);
    mcr_changes_free(ch);
    memset(load, 0, sizeof(load));
    load[prim] = UINT32_MAX; /* garbage where nobody reads */
    EXPECT_UINT(mcr_snapshot_locate_bounded(t, "k", 1, load, 0, 0.25), ==,
                mcr_snapshot_locate(t, "k", 1));
    mcr_snapshot_unref(t);
    mcr_snapshot_unref(s);

    /* One server: always it. */
    plain_pool(&p, MCR_MODE_BOUNDED, 1, 1);
    s = snap_of(&p);
    load[0] = 50;
    EXPECT_UINT(mcr_snapshot_locate_bounded(s, "k", 1, load, 50, 0.0), ==, 0);
    mcr_snapshot_unref(s);
}
END_TEST

/* ------------------------------------------------------------ edges */

START_TEST(edges_one_server)
{
    for (size_t c = 0; c < NCASES; c++) {
        pool p;
        plain_pool(&p, cases[c].mode, 1, w_of(cases[c].mode, 3));
        mcr_snapshot *s = snap_of(&p);
        uint32_t out[4], load[1] = {7};
        int under = -1;
        for (unsigned k = 0; k < 200; k++) {
            char key[32];
            size_t kl = key_n(key, k);
            EXPECT_UINT(mcr_snapshot_locate(s, key, kl), ==, 0);
            EXPECT_UINT(mcr_snapshot_locate_bounded(s, key, kl, load, 7, 0.1), ==, 0);
            EXPECT_UINT(mcr_snapshot_replicas(s, key, kl, 3, out, &under), ==, 1);
            EXPECT_INT(under, ==, 1);
        }
        spec x;
        new_spec(&x, w_of(cases[c].mode, 3), NULL);
        mcr_snapshot *t = with_change(s, &x, NULL, cases[c].mode == MCR_MODE_SLOTS);
        mcr_diff *d = diff_of(s, t);
        check_diff(s, t, d, 3000, 0.03);
        mcr_diff_free(d);
        mcr_snapshot_unref(t);
        mcr_snapshot_unref(s);
    }
}
END_TEST

START_TEST(edges_many_servers)
{
    static const mcr_mode modes[] = {MCR_MODE_JUMP, MCR_MODE_RENDEZVOUS, MCR_MODE_MAGLEV,
                                     MCR_MODE_SLOTS, MCR_MODE_BOUNDED};
    mcr_error err;
    enum { N = 10000 };
    for (size_t m = 0; m < 5; m++) {
        mcr_config *cfg = mcr_config_new();
        EXPECT_INT(mcr_config_set_mode(cfg, modes[m]), ==, MCR_OK);
        for (unsigned i = 0; i < N; i++) {
            char host[32];
            snprintf(host, sizeof(host), "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
            EXPECT_INT(mcr_config_add_server(cfg, host, 11211, 1 + i % 2, &err), ==, MCR_OK);
        }
        mcr_snapshot *s = NULL;
        int rc = mcr_snapshot_new(cfg, 1, &s, &err);
        EXPECT_MSG(rc == MCR_OK, "%s: %s", mcr_mode_name(modes[m]), err.message);
        if (modes[m] == MCR_MODE_MAGLEV) {
            EXPECT_UINT(mcr_snapshot_table_size(s), ==, 2000003); /* 200 N, next prime */
            uint32_t *count = calloc(N, sizeof(*count));
            for (size_t c = 0; c < 2000003; c++)
                count[mcr_snapshot_table_entry(s, c)]++;
            for (unsigned i = 0; i < N; i++) /* weights 1 and 2: 133.3 and 266.7 */
                EXPECT_MSG(fabs(count[i] - 2000003.0 * (1 + i % 2) / 15000) < 3, "%u: %u", i,
                           count[i]);
            free(count);
        }
        if (modes[m] == MCR_MODE_SLOTS) { /* quotas 1 or 2 by weight */
            uint32_t *count = calloc(N, sizeof(*count));
            for (size_t c = 0; c < 16384; c++)
                count[mcr_snapshot_table_entry(s, c)]++;
            for (unsigned i = 0; i < N; i++)
                EXPECT(count[i] <= 3);
            free(count);
        }
        unsigned keys = modes[m] == MCR_MODE_RENDEZVOUS ? 200 : 20000;
        for (unsigned k = 0; k < keys; k++) {
            char key[32];
            size_t kl = key_n(key, k);
            EXPECT_UINT(mcr_snapshot_locate(s, key, kl), <, N);
        }
        uint32_t out[3];
        EXPECT_UINT(mcr_snapshot_replicas(s, "k", 1, 3, out, NULL), ==, 3);
        /* One more server, and the diff. */
        spec x;
        new_spec(&x, 1, NULL);
        snprintf(x.host, sizeof(x.host), "172.31.0.1");
        mcr_snapshot *t = with_change(s, &x, NULL, modes[m] == MCR_MODE_SLOTS);
        mcr_diff *d = diff_of(s, t);
        EXPECT_MSG(mcr_diff_moved(d) < 0.001, "%s: %g", mcr_mode_name(modes[m]), mcr_diff_moved(d));
        mcr_diff_free(d);
        mcr_snapshot_unref(t);
        mcr_snapshot_unref(s);
        mcr_config_free(cfg);
    }
}
END_TEST

START_TEST(edges_arguments)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_mode m;
    static const char *const names[] = {"jump", "rendezvous", "maglev", "slots", "bounded"};
    for (int i = 0; i < 5; i++) {
        EXPECT_INT(mcr_mode_from_name(names[i], &m), ==, MCR_OK);
        EXPECT_INT(m, ==, MCR_MODE_JUMP + i);
        EXPECT_STR(mcr_mode_name(m), ==, names[i]);
    }
    EXPECT_INT(mcr_mode_from_name("MAGLEV", &m), ==, MCR_OK);
    /* Weight 0 is refused everywhere. */
    EXPECT_INT(mcr_config_add_server(cfg, "a", 11211, 0, &err), ==, MCR_ERR_RANGE);
    mcr_changes *ch = mcr_changes_new();
    mcr_server_desc d = {NULL, "a", 11211, 0, NULL, MCR_STATE_ACTIVE, 0};
    EXPECT_INT(mcr_changes_add(ch, &d, &err), ==, MCR_ERR_RANGE);
    EXPECT_INT(mcr_changes_set_weight(ch, "a", 0, &err), ==, MCR_ERR_RANGE);
    mcr_changes_free(ch);
    /* Table sizes and slot counts. */
    EXPECT_INT(mcr_config_set_table_size(NULL, 65537), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_config_set_table_size(cfg, 65536), ==, MCR_ERR_RANGE);
    EXPECT_INT(mcr_config_set_table_size(cfg, 1), ==, MCR_ERR_RANGE);
    EXPECT_INT(mcr_config_set_table_size(cfg, MCR_MAGLEV_SIZE_MAX), ==, MCR_OK);
    EXPECT_INT(mcr_config_set_table_size(cfg, MCR_MAGLEV_SIZE_MAX + 2), ==, MCR_ERR_RANGE);
    EXPECT_INT(mcr_config_set_table_size(cfg, 0), ==, MCR_OK);
    EXPECT_INT(mcr_config_set_slot_count(NULL, 5), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_config_set_slot_count(cfg, 0), ==, MCR_ERR_RANGE);
    EXPECT_INT(mcr_config_set_slot_count(cfg, MCR_SLOTS_MAX + 1), ==, MCR_ERR_RANGE);
    EXPECT_INT(mcr_config_set_slot_count(cfg, 1), ==, MCR_OK);
    mcr_config_free(cfg);

    /* Maglev: at least 100 entries a server. */
    pool p;
    plain_pool(&p, MCR_MODE_MAGLEV, 2, 1);
    p.table = 199;
    cfg = config_of(&p);
    mcr_snapshot *s = NULL;
    EXPECT_INT(mcr_snapshot_new(cfg, 1, &s, &err), ==, MCR_ERR_RANGE);
    EXPECT(strstr(err.message, "at most 1 servers") != NULL);
    mcr_config_free(cfg);
    p.table = 211;
    s = snap_of(&p);
    spec x;
    new_spec(&x, 1, NULL);
    ch = mcr_changes_new();
    d = (mcr_server_desc){x.id, x.host, x.port, 1, NULL, MCR_STATE_ACTIVE, 0};
    EXPECT_INT(mcr_changes_add(ch, &d, &err), ==, MCR_OK);
    mcr_snapshot *t = NULL;
    EXPECT_INT(mcr_snapshot_apply(s, ch, &t, &err), ==, MCR_ERR_RANGE);
    EXPECT(t == NULL);
    d.state = MCR_STATE_DOWN; /* not active: not in the table */
    mcr_changes_clear(ch);
    EXPECT_INT(mcr_changes_add(ch, &d, &err), ==, MCR_OK);
    t = apply_ok(s, ch);
    EXPECT_UINT(mcr_snapshot_table_size(t), ==, 211);
    mcr_snapshot_unref(t);
    mcr_changes_free(ch);
    mcr_snapshot_unref(s);
    /* Slots with a single slot: every key there. */
    plain_pool(&p, MCR_MODE_SLOTS, 3, 1);
    p.slots = 1;
    s = snap_of(&p);
    EXPECT_UINT(mcr_snapshot_key_slot(s, "abc", 3), ==, 0);
    EXPECT_UINT(mcr_snapshot_locate(s, "abc", 3), ==, 0);
    mcr_snapshot_unref(s);
}
END_TEST

/* ------------------------------------------------------------ the watcher */

/* Written by the watcher's thread (in the hook), read by the test's. */
typedef struct publishes {
    pthread_mutex_t lock;
    int calls;
    double moved;
} publishes;

static int calls_of(publishes *p)
{
    pthread_mutex_lock(&p->lock);
    int n = p->calls;
    pthread_mutex_unlock(&p->lock);
    return n;
}

static double moved_of(publishes *p)
{
    pthread_mutex_lock(&p->lock);
    double m = p->moved;
    pthread_mutex_unlock(&p->lock);
    return m;
}

static void count_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                       const mcr_diff *diff, void *arg)
{
    publishes *p = arg;
    (void)old_snap;
    (void)new_snap;
    pthread_mutex_lock(&p->lock);
    p->moved += diff != NULL ? mcr_diff_moved(diff) : 1.0;
    p->calls++;
    pthread_mutex_unlock(&p->lock);
}

static void write_atomic(const char *path, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    tu_write_file(tmp, text, strlen(text));
    ck_assert_int_eq(rename(tmp, path), 0);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A server that flaps in the server file faster than the watcher's
 * settle time publishes nothing: no mass movement, however long it
 * flaps. Once it stays away, one publish moves its share only; back, one
 * more, which restores the placement (rendezvous, maglev) or, in jump,
 * reaches a placement that later flaps leave alone. */
START_TEST(watcher_flapping)
{
    static const mcr_mode modes[] = {MCR_MODE_RENDEZVOUS, MCR_MODE_JUMP, MCR_MODE_MAGLEV};
    mcr_error err;
    for (size_t m = 0; m < 3; m++) {
        const char *path = tmp_path("servers.txt");
        const char *with = "10.1.0.1\n10.1.0.2\n10.1.0.3\n10.1.0.4\n10.1.0.5\n";
        const char *without = "10.1.0.1\n10.1.0.2\n10.1.0.3\n10.1.0.4\n";
        write_atomic(path, with);
        mcr_config *tmpl = mcr_config_new();
        EXPECT_INT(mcr_config_set_mode(tmpl, modes[m]), ==, MCR_OK);
        mcr_router *r = NULL;
        EXPECT_INT(mcr_router_new(NULL, &r, &err), ==, MCR_OK);
        /* flaps 25 ms apart never settle: unless the writer is starved for
         * the settle time, which MCR_TEST_TIME_SCALE stretches */
        mcr_watch_options opt = {.poll_ms = 10, .settle_ms = (unsigned)mcr_test_ms(300)};
        mcr_watcher *w = NULL;
        EXPECT_INT(mcr_watcher_new(r, path, MCR_WATCH_SERVER_FILE, tmpl, &opt, &w, &err), ==,
                   MCR_OK);
        mcr_snapshot *first = mcr_router_current(r);
        publishes pub = {.calls = 0, .moved = 0};
        pthread_mutex_init(&pub.lock, NULL);
        EXPECT_INT(mcr_router_add_hook(r, count_hook, &pub), ==, MCR_OK);
        /* 40 flaps, 25 ms apart: never settled. */
        for (int i = 0; i < 40; i++) {
            write_atomic(path, i % 2 ? with : without);
            sleep_ms(25);
        }
        write_atomic(path, with);
        sleep_ms((unsigned)mcr_test_ms(700)); /* past settle: nothing may come */
        EXPECT_INT(calls_of(&pub), ==, 0);
        /* Away for good, then back. */
        write_atomic(path, without);
        for (int i = 0; i < mcr_test_ms(10000) / 10 && calls_of(&pub) < 1; i++)
            sleep_ms(10); /* a poll for the publish, up to a deadline */
        EXPECT_INT(calls_of(&pub), ==, 1);
        EXPECT_MSG(fabs(moved_of(&pub) - 0.2) < 0.02, "%s: moved %g away",
                   mcr_mode_name(modes[m]), moved_of(&pub));
        write_atomic(path, with);
        for (int i = 0; i < mcr_test_ms(10000) / 10 && calls_of(&pub) < 2; i++)
            sleep_ms(10);
        EXPECT_INT(calls_of(&pub), ==, 2);
        mcr_snapshot *now = mcr_router_current(r);
        double back = moved_keys(first, now, 20000, NULL, NULL, "back");
        if (modes[m] == MCR_MODE_JUMP)
            EXPECT_MSG(back < 0.05, "jump: %g away from the start", back); /* it was the last */
        else
            EXPECT_DBL(back, ==, 0);
        mcr_snapshot_unref(now);
        mcr_watcher_free(w);
        mcr_snapshot_unref(first);
        mcr_router_free(r);
        pthread_mutex_destroy(&pub.lock);
        mcr_config_free(tmpl);
    }
}
END_TEST

/* ------------------------------------------------------------ the pool */

typedef struct hot_reads {
    int done, hits;
    char server[3][64];
    int count[3];
} hot_reads;

static void hot_read_cb(const mcr_result *res, void *arg)
{
    hot_reads *h = arg;
    h->done++;
    h->hits += res->status == MCR_OK && res->reply == MCR_REPLY_HIT;
    for (int i = 0; i < 3 && res->server != NULL; i++)
        if (strcmp(h->server[i], res->server) == 0)
            h->count[i]++;
}

/* A pool with bounded_epsilon spreads the gets of one hot key over the
 * servers next to its owner (where the value was also written), each
 * within its capacity; without it, every get goes to the owner. */
START_TEST(pool_bounded_reads)
{
    ck_assert_msg(rs_executable(rs_memcached_path()), "need %s (Debian package memcached)",
                  rs_memcached_path());
    rs_proc mc[3];
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    EXPECT_INT(mcr_config_set_mode(cfg, MCR_MODE_BOUNDED), ==, MCR_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rs_memcached_start(&mc[i], "127.0.0.1", 0, NULL, 5000), 0);
        EXPECT_INT(mcr_config_add_server(cfg, "127.0.0.1", mc[i].port, 1, &err), ==, MCR_OK);
    }
    mcr_snapshot *snap = NULL;
    EXPECT_INT(mcr_snapshot_new(cfg, 1, &snap, &err), ==, MCR_OK);
    mcr_router *router = NULL;
    EXPECT_INT(mcr_router_new(snap, &router, &err), ==, MCR_OK);
    struct event_base *base = event_base_new();
    ck_assert_ptr_nonnull(base);
    const char *hot = "hot:key";
    for (int bounded = 0; bounded < 2; bounded++) {
        mcr_pool_options o;
        mcr_pool_options_init(&o);
        o.no_coalesce = 1; /* every get is a request of its own */
        o.bounded_epsilon = bounded ? 0.25 : 0;
        mcr_pool *mp = NULL;
        EXPECT_INT(mcr_pool_new(base, router, &o, &mp, &err), ==, MCR_OK);
        hot_reads h;
        memset(&h, 0, sizeof(h));
        for (int i = 0; i < 3; i++) { /* the value on every server */
            mcr_server_desc d;
            mcr_snapshot_server(snap, (size_t)i, &d);
            snprintf(h.server[i], sizeof(h.server[i]), "%s", d.id);
            mcr_request q = {.op = MCR_OP_SET, .key = hot, .key_len = strlen(hot),
                             .value = "v", .value_len = 1, .server = d.id};
            mcr_owned_result res;
            EXPECT_INT(mcr_pool_exec(mp, &q, &res), ==, MCR_OK);
            EXPECT_INT(res.status, ==, MCR_OK);
            mcr_owned_result_clear(&res);
        }
        enum { GETS = 300 };
        for (int k = 0; k < GETS; k++)
            EXPECT_INT(mcr_pool_get(mp, hot, strlen(hot), hot_read_cb, &h, NULL), ==, MCR_OK);
        EXPECT_INT(mcr_pool_wait(mp), ==, MCR_OK);
        EXPECT_INT(h.done, ==, GETS);
        EXPECT_INT(h.hits, ==, GETS);
        uint32_t owner = mcr_snapshot_locate(snap, hot, strlen(hot));
        if (!bounded) {
            EXPECT_INT(h.count[owner], ==, GETS);
        } else {
            for (int i = 0; i < 3; i++)
                EXPECT_MSG(h.count[i] > 0 && h.count[i] <= 126, "server %d: %d gets", i,
                           h.count[i]);
            EXPECT_INT(h.count[owner], >=, 100);
        }
        mcr_pool_free(mp);
    }
    /* Out of range. */
    mcr_pool_options o;
    mcr_pool_options_init(&o);
    mcr_pool *mp = NULL;
    o.bounded_epsilon = -1;
    EXPECT_INT(mcr_pool_new(base, router, &o, &mp, &err), ==, MCR_ERR_RANGE);
    o.bounded_epsilon = NAN;
    EXPECT_INT(mcr_pool_new(base, router, &o, &mp, &err), ==, MCR_ERR_RANGE);
    o.bounded_epsilon = MCR_POOL_EPSILON_MAX * 2;
    EXPECT_INT(mcr_pool_new(base, router, &o, &mp, &err), ==, MCR_ERR_RANGE);
    EXPECT(mp == NULL);
    event_base_free(base);
    mcr_router_free(router);
    mcr_snapshot_unref(snap);
    mcr_config_free(cfg);
    for (int i = 0; i < 3; i++)
        rs_stop(&mc[i]);
}
END_TEST

/* ------------------------------------------------------------ suite */

static Suite *placement_suite(void)
{
    Suite *s = suite_create("placement");
    TCase *tv = tcase_create("vectors");
    tcase_set_timeout(tv, 600);
    tcase_add_checked_fixture(tv, reset_hosts, NULL);
    tcase_add_test(tv, vectors_crc16_slots);
    tcase_add_test(tv, vectors_jump);
    tcase_add_test(tv, vectors_rendezvous);
    tcase_add_test(tv, vectors_maglev);
    suite_add_tcase(s, tv);

    TCase *tc = tcase_create("checklist");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, reset_hosts, NULL);
    tcase_add_test(tc, checklist_movement);
    tcase_add_test(tc, checklist_weights);
    tcase_add_test(tc, checklist_replicas);
    tcase_add_test(tc, checklist_hot_key);
    tcase_add_test(tc, checklist_flapping);
    tcase_add_test(tc, down_goes_to_first_replica);
    suite_add_tcase(s, tc);

    TCase *tn = tcase_create("snapshots");
    tcase_set_timeout(tn, 600);
    tcase_add_checked_fixture(tn, reset_hosts, NULL);
    tcase_add_test(tn, files_every_mode);
    tcase_add_test(tn, files_forged_maps);
    tcase_add_test(tn, apply_equals_new);
    tcase_add_test(tn, slots_moves_and_plan);
    tcase_add_test(tn, jump_removals);
    tcase_add_test(tn, jump_random_batches);
    tcase_add_test(tn, rendezvous_random_changes);
    tcase_add_test(tn, diff_across_native_modes);
    tcase_add_test(tn, bounded_simulation);
    suite_add_tcase(s, tn);

    TCase *te = tcase_create("edges");
    tcase_set_timeout(te, 600);
    tcase_add_checked_fixture(te, reset_hosts, NULL);
    tcase_add_test(te, edges_one_server);
    tcase_add_test(te, edges_many_servers);
    tcase_add_test(te, edges_arguments);
    suite_add_tcase(s, te);

    /* The tests with threads (a router's, a watcher's): the only ones a
     * TSan build runs (cmake/thread_suites.cmake). */
    TCase *tt = tcase_create("threads");
    tcase_set_timeout(tt, 600);
    tcase_add_checked_fixture(tt, reset_hosts, NULL);
    tcase_add_test(tt, watcher_flapping);
    tcase_add_test(tt, pool_bounded_reads);
    suite_add_tcase(s, tt);
    return s;
}

int main(void)
{
    tmpdir = tu_tmpdir("placement-test");
    int rc = tu_run(placement_suite());
    tu_tmpdir_free(tmpdir);
    return rc;
}
