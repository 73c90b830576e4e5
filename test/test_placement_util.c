/* SPDX-License-Identifier: BSD-3-Clause */
/* test_placement_util.c: what test_placement.c and test_placement_snapshots.c share (test_placement_util.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_placement_util.h"
#include "testutil.h"

/* ------------------------------------------------------------ what each mode promises */

const mode_case cases[] = {
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
    /* the proxies renumber their list: removing a server other than the
     * last moves the keys of those after it */
    {MCR_MODE_MEMCACHED_PROXY_JUMP, 0, 0, 25.0, 0.01, 1, 1},
    {MCR_MODE_MCROUTER_CH3, 0, 0, 25.0, 0.01, 1, 1},
    /* Envoy renormalises: a new server changes every server's share of
     * the table or the ring (the ring's points per server with it) */
    {MCR_MODE_ENVOY_MAGLEV, 1, 0, 1.5, 0.01, 0, 0},
    {MCR_MODE_ENVOY_RING_HASH, 1, 0, 2.5, 0.04, 0, 0},
    /* 40 labels per server whatever the count: a server's points alone
     * come and go */
    {MCR_MODE_MEMCACHED_PROXY_RING_KETAMA, 0, 1, 1.6, 0.04, 0, 1},
    /* WeightedCh3 renumbers as Ch3 does; its weights (a unit of the
     * tests' is 0.1: api_weight) set shares by acceptance, and the diff
     * is the model's */
    {MCR_MODE_MCROUTER_WCH3, 1, 0, 25.0, 0.02, 1, 0},
};
_Static_assert(sizeof(cases) / sizeof(cases[0]) == MCR_MODE_COUNT, "every mode has a case");

uint32_t w_of(mcr_mode mode, uint32_t w)
{
    return mode == MCR_MODE_PYMEMCACHE || mode == MCR_MODE_MEMCACHED_PROXY_JUMP ||
                   mode == MCR_MODE_MCROUTER_CH3 || mode == MCR_MODE_MEMCACHED_PROXY_RING_KETAMA
               ? 1
               : w;
}

uint32_t api_weight(mcr_mode mode, uint32_t units)
{
    return mode == MCR_MODE_MCROUTER_WCH3 ? units * (MCR_WCH3_WEIGHT_ONE / 10) : units;
}

/* ------------------------------------------------------------ pools */

static unsigned next_host;

void reset_hosts(void)
{
    next_host = 0;
}

void new_spec(spec *s, uint32_t weight, const char *zone)
{
    unsigned h = next_host++;
    snprintf(s->host, sizeof(s->host), "10.%u.%u.%u", (h >> 16) & 255, (h >> 8) & 255, h & 255);
    s->port = 11211;
    s->weight = weight;
    snprintf(s->id, sizeof(s->id), "node-%u", h);
    snprintf(s->zone, sizeof(s->zone), "%s", zone != NULL ? zone : "");
}

void plain_pool(pool *p, mcr_mode mode, size_t n, uint32_t weight)
{
    memset(p, 0, sizeof(*p));
    p->mode = mode;
    p->hash = MCR_HASH_MD5;
    p->n = n;
    for (size_t i = 0; i < n; i++)
        new_spec(&p->s[i], weight, NULL);
}

mcr_config *config_of(const pool *p)
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
        mcr_server_desc d = {.id = s->id[0] ? s->id : NULL, .host = host, .port = s->port,
                             .weight = api_weight(p->mode, s->weight),
                             .zone = s->zone[0] ? s->zone : NULL, .state = MCR_STATE_ACTIVE};
        int rc = mcr_config_add_server_desc(cfg, &d, &err);
        EXPECT_MSG(rc == MCR_OK, "add %s: %s", s->host, err.message);
    }
    return cfg;
}

mcr_snapshot *snap_of(const pool *p)
{
    mcr_error err;
    mcr_snapshot *s = NULL;
    mcr_config *cfg = config_of(p);
    int rc = mcr_snapshot_new(cfg, 1, &s, &err);
    EXPECT_MSG(rc == MCR_OK, "snapshot_new (%s): %s", mcr_mode_name(p->mode), err.message);
    mcr_config_free(cfg);
    return s;
}

mcr_snapshot *apply_ok(const mcr_snapshot *s, const mcr_changes *ch)
{
    mcr_error err;
    mcr_snapshot *out = NULL;
    int rc = mcr_snapshot_apply(s, ch, &out, &err);
    EXPECT_MSG(rc == MCR_OK, "apply (%s): %s", mcr_mode_name(mcr_ring_mode(mcr_snapshot_ring(s))),
               err.message);
    return out;
}

const char *id_at(const mcr_snapshot *s, uint32_t index)
{
    mcr_server_desc d;
    EXPECT_INT(mcr_snapshot_server(s, index, &d), ==, MCR_OK);
    return d.id;
}

const char *owner_of(const mcr_snapshot *s, const char *key, size_t len)
{
    return id_at(s, mcr_snapshot_locate(s, key, len));
}

size_t key_n(char *buf, unsigned i)
{
    return (size_t)sprintf(buf, "key-%u", i);
}

mcr_snapshot *with_change(const mcr_snapshot *s, const spec *add, const char *remove,
                                 int plan)
{
    mcr_error err;
    mcr_changes *ch = mcr_changes_new();
    ck_assert_ptr_nonnull(ch);
    if (add != NULL) {
        mcr_server_desc d = {.id = add->id, .host = add->host, .port = add->port,
                             .weight = api_weight(mcr_ring_mode(mcr_snapshot_ring(s)), add->weight),
                             .zone = add->zone[0] ? add->zone : NULL, .state = MCR_STATE_ACTIVE};
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

double moved_keys(const mcr_snapshot *a, const mcr_snapshot *b, unsigned n,
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

mcr_diff *diff_of(const mcr_snapshot *a, const mcr_snapshot *b)
{
    mcr_error err;
    mcr_diff *d = NULL;
    int rc = mcr_diff_new(a, b, &d, &err);
    EXPECT_MSG(rc == MCR_OK, "diff_new: %s", err.message);
    return d;
}

void check_diff(const mcr_snapshot *a, const mcr_snapshot *b, const mcr_diff *d,
                       unsigned keys, double tol)
{
    double moved = mcr_diff_moved(d), sum = 0;
    mcr_diff_pair prev = {.from = NULL, .to = NULL, .fraction = 0};
    EXPECT(moved >= 0 && moved <= 1.0 + 1e-12);
    for (size_t i = 0; i < mcr_diff_pair_count(d); i++) {
        mcr_diff_pair p;
        EXPECT_INT(mcr_diff_pair_get(d, i, &p), ==, MCR_OK);
        EXPECT(p.fraction > 0);
        EXPECT_STR(p.from, !=, p.to);
        EXPECT(mcr_snapshot_find(a, p.from) != MCR_NO_SERVER);
        EXPECT(mcr_snapshot_find(b, p.to) != MCR_NO_SERVER);
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

/* ------------------------------------------------------------ scratch files */

char *tmpdir;

const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static unsigned next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof(buf[0]), "%s/%s", tmpdir, name);
    return b;
}
