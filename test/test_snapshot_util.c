/* SPDX-License-Identifier: BSD-3-Clause */
/* test_snapshot_util.c: what test_snapshot.c and test_snapshot_files.c share (test_snapshot_util.h). */
#include <stdio.h>
#include <string.h>

#include "test_snapshot_util.h"

/* ------------------------------------------------------------ helpers */

char keys[NKEYS][24];
size_t key_len[NKEYS];

void make_keys(void)
{
    tu_rng r;
    tu_rng_init(&r, 77);
    for (int i = 0; i < NKEYS; i++)
        key_len[i] = tu_key(&r, keys[i], 20);
}

mcr_hash hash_for(mcr_mode m)
{
    switch (m) {
    case MCR_MODE_CONSISTENT:
    case MCR_MODE_SPY:
    case MCR_MODE_MODULA: return MCR_HASH_DEFAULT;
    case MCR_MODE_TWEMPROXY_KETAMA:
    case MCR_MODE_TWEMPROXY_MODULA: return MCR_HASH_FNV1A_64;
    default: return MCR_HASH_MD5;
    }
}

/* A random server i into d (strings in buf, 64 bytes each). Every fourth
 * server has an id, every third a zone; some hosts are IPv6. */
void random_desc(tu_rng *r, unsigned i, mcr_server_desc *d, char host[64], char id[64],
                 char zone[64], uint32_t max_weight)
{
    memset(d, 0, sizeof(*d));
    unsigned kind = tu_below(r, 8);
    if (kind == 0)
        snprintf(host, 64, "fd00::%x:%x", i, tu_below(r, 65536));
    else if (kind < 4)
        snprintf(host, 64, "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
    else
        snprintf(host, 64, "cache-%u-%u.example", i, tu_below(r, 1000));
    d->host = host;
    d->port = tu_below(r, 3) == 0 ? 11211 : (int)(1024 + tu_below(r, 60000));
    d->weight = 1 + tu_below(r, max_weight);
    d->id = NULL;
    d->id_is_default = 0;
    if (tu_below(r, 4) == 0) {
        snprintf(id, 64, "node-%u", i);
        d->id = id;
    }
    d->zone = NULL;
    if (tu_below(r, 3) == 0) {
        snprintf(zone, 64, "zone-%u", tu_below(r, 3));
        d->zone = zone;
    }
    d->state = MCR_STATE_ACTIVE;
}

/* A config of mode m with n random servers numbered from `base`. */
mcr_config *random_config(tu_rng *r, mcr_mode m, unsigned n, unsigned base,
                          uint32_t max_weight)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err;
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_mode(cfg, m), MCR_OK);
    ck_assert_int_eq(mcr_config_set_hash(cfg, hash_for(m)), MCR_OK);
    for (unsigned i = 0; i < n; i++) {
        char host[64], id[64], zone[64];
        mcr_server_desc d;
        random_desc(r, base + i, &d, host, id, zone, max_weight);
        int rc = mcr_config_add_server_desc(cfg, &d, &err);
        ck_assert_msg(rc == MCR_OK, "%s", err.message);
    }
    return cfg;
}

mcr_snapshot *snap_of(const mcr_config *cfg, uint64_t epoch)
{
    mcr_snapshot *s = NULL;
    mcr_error err;
    int rc = mcr_snapshot_new(cfg, epoch, &s, &err);
    ck_assert_msg(rc == MCR_OK, "mcr_snapshot_new: %s", err.message);
    return s;
}

mcr_snapshot *apply_ok(const mcr_snapshot *old, const mcr_changes *ch)
{
    mcr_snapshot *s = NULL;
    mcr_error err;
    int rc = mcr_snapshot_apply(old, ch, &s, &err);
    ck_assert_msg(rc == MCR_OK, "mcr_snapshot_apply: %s", err.message);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), mcr_snapshot_epoch(old) + 1);
    return s;
}

/* The same continuum: same points, and ring servers with the same ids. */
void assert_same_points(const mcr_snapshot *a, const mcr_snapshot *b)
{
    const mcr_ring *x = mcr_snapshot_ring(a), *y = mcr_snapshot_ring(b);
    size_t n = mcr_ring_point_count(x);
    ck_assert_uint_eq(n, mcr_ring_point_count(y));
    ck_assert_uint_eq(mcr_ring_server_count(x), mcr_ring_server_count(y));
    for (size_t i = 0; i < n; i++) {
        uint32_t v1 = 0, s1 = 0, v2 = 1, s2 = 1;
        mcr_ring_point(x, i, &v1, &s1);
        mcr_ring_point(y, i, &v2, &s2);
        FAST_UINT_EQ(v1, v2);
        FAST_UINT_EQ(s1, s2);
    }
    for (uint32_t r = 0; r < mcr_ring_server_count(x); r++) {
        mcr_server_desc d1, d2;
        mcr_snapshot_server(a, mcr_snapshot_ring_server(a, r), &d1);
        mcr_snapshot_server(b, mcr_snapshot_ring_server(b, r), &d2);
        FAST_STR_EQ(d1.id, d2.id);
    }
}

char *tmpdir; /* the suite's directory (tu_tmpdir), made by main() */

/* A path in the test's directory; each call has its own buffer (a few at
 * a time are in use). */
const char *tmp_path(const char *name)
{
    static char buf[8][512];
    static unsigned next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof(buf[0]), "%s/%s", tmpdir, name);
    return b;
}

const mcr_mode all_modes[] = {
    MCR_MODE_KETAMA,        MCR_MODE_STABLE_KETAMA,    MCR_MODE_CONSISTENT,
    MCR_MODE_WEIGHTED,      MCR_MODE_SPY,              MCR_MODE_SPY_WEIGHTED,
    MCR_MODE_MODULA,        MCR_MODE_TWEMPROXY_KETAMA, MCR_MODE_TWEMPROXY_MODULA,
};
_Static_assert(sizeof(all_modes) / sizeof(all_modes[0]) == NMODES,
               "NMODES (test_snapshot_util.h) is the length of all_modes[]");

mcr_snapshot *small_snapshot(uint64_t epoch)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err;
    mcr_config_set_mode(cfg, MCR_MODE_STABLE_KETAMA);
    mcr_server_desc a = {.id = "a", .host = "10.0.0.1", .port = 11211, .weight = 1, .zone = "z1",
                         .state = MCR_STATE_ACTIVE};
    mcr_server_desc b = {.host = "10.0.0.2", .port = 11211, .weight = 2, .state = MCR_STATE_ACTIVE};
    mcr_config_add_server_desc(cfg, &a, &err);
    mcr_config_add_server_desc(cfg, &b, &err);
    mcr_snapshot *s = snap_of(cfg, epoch);
    mcr_config_free(cfg);
    return s;
}
