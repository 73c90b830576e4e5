/* SPDX-License-Identifier: BSD-3-Clause */
/* test_snapshot.c: snapshots and membership changes: properties on many random rings, stable-ketama, moves, incremental against scratch, states, identity, errors, the checksum, threads (snapshot files are test_snapshot_files.c). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"
#include "test_snapshot_util.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

static int is_continuum(mcr_mode m)
{
    return m != MCR_MODE_MODULA && m != MCR_MODE_TWEMPROXY_MODULA;
}

static const char *owner_id(const mcr_snapshot *s, int k)
{
    mcr_server_desc d;
    uint32_t i = mcr_snapshot_locate(s, keys[k], key_len[k]);
    FAST_UINT_EQ(mcr_snapshot_server(s, i, &d), MCR_OK);
    FAST_UINT_EQ(d.state, MCR_STATE_ACTIVE);
    return d.id;
}

/* A config listing the servers of s (all of them, as active), with its
 * parameters copied from `like`. Named servers keep their ids. */
static mcr_config *config_of(const mcr_snapshot *s, mcr_mode m, int only_active)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err;
    mcr_config_set_mode(cfg, m);
    mcr_config_set_hash(cfg, hash_for(m));
    for (size_t i = 0; i < mcr_snapshot_server_count(s); i++) {
        mcr_server_desc d;
        char def[300];
        mcr_snapshot_server(s, i, &d);
        if (only_active && d.state != MCR_STATE_ACTIVE)
            continue;
        snprintf(def, sizeof(def), strchr(d.host, ':') ? "[%s]:%d" : "%s:%d", d.host, d.port);
        if (strcmp(def, d.id) == 0)
            d.id = NULL; /* default id (a named "host:port" would hash alike) */
        d.state = MCR_STATE_ACTIVE;
        int rc = mcr_config_add_server_desc(cfg, &d, &err);
        ck_assert_msg(rc == MCR_OK, "%s", err.message);
    }
    return cfg;
}

/* ------------------------------------------------------------ basics */

START_TEST(basics)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err;
    mcr_server_desc d = {.id = "alpha", .host = "10.0.0.1", .port = 11211, .weight = 1,
                         .zone = "z1", .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
    d = (mcr_server_desc){.host = "10.0.0.2", .port = 11212, .weight = 2,
                          .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
    d = (mcr_server_desc){.host = "::1", .port = 11211, .weight = 1, .zone = "z2",
                          .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server(cfg, "10.0.0.4", 11211, 1, &err), MCR_OK);
    d = (mcr_server_desc){.host = "10.0.0.5", .port = 11211, .weight = 1, .zone = "z1",
                          .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);

    mcr_snapshot *s = snap_of(cfg, 7);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 7);
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 5);
    ck_assert_uint_eq(mcr_snapshot_active_count(s), 5);
    ck_assert_uint_eq(strlen(mcr_snapshot_checksum(s)), MCR_SNAPSHOT_CHECKSUM_LEN);
    ck_assert_int_eq(mcr_snapshot_server(s, 0, &d), MCR_OK);
    ck_assert_str_eq(d.id, "alpha");
    ck_assert_str_eq(d.host, "10.0.0.1");
    ck_assert_str_eq(d.zone, "z1");
    ck_assert_int_eq(mcr_snapshot_server(s, 1, &d), MCR_OK);
    ck_assert_str_eq(d.id, "10.0.0.2:11212");
    ck_assert_uint_eq(d.weight, 2);
    ck_assert_ptr_null(d.zone);
    ck_assert_int_eq(mcr_snapshot_server(s, 2, &d), MCR_OK);
    ck_assert_str_eq(d.id, "[::1]:11211");
    ck_assert_int_eq(mcr_snapshot_server(s, 5, &d), MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_snapshot_find(s, "alpha"), 0);
    ck_assert_uint_eq(mcr_snapshot_find(s, "[::1]:11211"), 2);
    ck_assert_uint_eq(mcr_snapshot_find(s, "10.0.0.1:11211"), MCR_NO_SERVER);
    ck_assert_uint_eq(mcr_snapshot_find(s, NULL), MCR_NO_SERVER);
    ck_assert_uint_eq(mcr_snapshot_zone_count(s), 2);
    ck_assert_uint_eq(mcr_snapshot_server_zone(s, 0), 1);
    ck_assert_uint_eq(mcr_snapshot_server_zone(s, 1), 0);
    ck_assert_uint_eq(mcr_snapshot_server_zone(s, 2), 2);
    ck_assert_uint_eq(mcr_snapshot_server_zone(s, 4), 1);
    ck_assert_uint_eq(mcr_snapshot_server_zone(s, 99), 0);
    ck_assert_uint_eq(mcr_snapshot_ring_server(s, 4), 4);
    ck_assert_uint_eq(mcr_snapshot_ring_server(s, 5), MCR_NO_SERVER);

    /* Same continuum as the ring of the same config. */
    mcr_ring *ring;
    ck_assert_int_eq(mcr_ring_new(cfg, &ring, &err), MCR_OK);
    for (int k = 0; k < NKEYS; k++)
        FAST_UINT_EQ(mcr_snapshot_locate(s, keys[k], key_len[k]),
                     mcr_ring_locate(ring, keys[k], key_len[k]));
    mcr_ring_free(ring);

    /* NULL-safe getters. */
    ck_assert_uint_eq(mcr_snapshot_epoch(NULL), 0);
    ck_assert_ptr_null(mcr_snapshot_checksum(NULL));
    ck_assert_ptr_null(mcr_snapshot_ring(NULL));
    ck_assert_uint_eq(mcr_snapshot_server_count(NULL), 0);
    ck_assert_uint_eq(mcr_snapshot_active_count(NULL), 0);
    ck_assert_uint_eq(mcr_snapshot_zone_count(NULL), 0);
    ck_assert_ptr_null(mcr_snapshot_ref(NULL));
    mcr_snapshot_unref(NULL);
    ck_assert_ptr_eq(mcr_snapshot_ref(s), s);
    mcr_snapshot_unref(s);
    mcr_snapshot_unref(s);

    /* Errors of mcr_snapshot_new. */
    ck_assert_int_eq(mcr_snapshot_new(NULL, 1, &s, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, NULL, &err), MCR_ERR_INVALID);
    mcr_config_free(cfg);
    cfg = mcr_config_new();
    s = (mcr_snapshot *)&err; /* untouched on error */
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_ERR_EMPTY);
    ck_assert_ptr_eq(s, (mcr_snapshot *)&err);
    /* Labels are not checked by add_server_named; the snapshot refuses a
     * second server with one id. */
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "a", 1, 1, "same", &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "b", 1, 1, "same", &err), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_ERR_DUPLICATE);
    ck_assert_ptr_nonnull(strstr(err.message, "same"));
    mcr_config_free(cfg);
}
END_TEST

/* A description read back from a snapshot and given again is the same
 * server, placed the same way, in every mode: a server given no id reads
 * back with id_is_default, so that its default id is not taken for a given
 * one (in twemproxy-ketama a given id is a name, and names place points
 * differently: without the flag a rebuild moved most keys there). */
START_TEST(desc_round_trip)
{
    static const struct {
        const char *id, *host;
        int port;
    } servers[] = {{NULL, "10.0.0.1", 11211}, {NULL, "10.0.0.2", 11300},
                   {"alpha", "10.0.0.3", 11211}, {NULL, "::1", 11211},
                   {NULL, "cache-5.example", 11211}, {"10.0.0.6", "10.0.0.6", 11211}};
    enum { NS = sizeof(servers) / sizeof(servers[0]) };
    mcr_error err;

    for (size_t m = 0; m < NMODES; m++) {
        mcr_config *cfg = mcr_config_new(), *again = mcr_config_new();
        ck_assert_int_eq(mcr_config_set_mode(cfg, all_modes[m]), MCR_OK);
        ck_assert_int_eq(mcr_config_set_mode(again, all_modes[m]), MCR_OK);
        for (size_t i = 0; i < NS; i++) {
            mcr_server_desc d = {.id = servers[i].id, .host = servers[i].host,
                                 .port = servers[i].port, .weight = 1 + (uint32_t)i % 3,
                                 .state = MCR_STATE_ACTIVE};
            ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
        }
        mcr_snapshot *s = snap_of(cfg, 1);
        mcr_server_desc d;
        for (size_t i = 0; i < NS; i++) {
            ck_assert_int_eq(mcr_snapshot_server(s, i, &d), MCR_OK);
            ck_assert_int_eq(d.id_is_default, servers[i].id == NULL);
            ck_assert_int_eq(mcr_config_add_server_desc(again, &d, &err), MCR_OK);
        }
        mcr_snapshot *t = snap_of(again, 1);
        ck_assert_msg(strcmp(mcr_snapshot_checksum(s), mcr_snapshot_checksum(t)) == 0,
                      "%s: the rebuilt snapshot differs", mcr_mode_name(all_modes[m]));
        for (int k = 0; k < NKEYS; k++)
            FAST_UINT_EQ(mcr_snapshot_locate(s, keys[k], key_len[k]),
                         mcr_snapshot_locate(t, keys[k], key_len[k]));

        /* Removed and added back with its own description (it goes last):
         * every key on the server it had, but in the modes that place by
         * position. */
        mcr_changes *ch = mcr_changes_new();
        ck_assert_int_eq(mcr_snapshot_server(s, 1, &d), MCR_OK);
        ck_assert_int_eq(mcr_changes_remove(ch, d.id, &err), MCR_OK);
        ck_assert_int_eq(mcr_changes_add(ch, &d, &err), MCR_OK);
        mcr_snapshot *u = apply_ok(s, ch);
        int moved = 0;
        for (int k = 0; k < NKEYS; k++)
            moved += strcmp(owner_id(s, k), owner_id(u, k)) != 0;
        if (all_modes[m] == MCR_MODE_MODULA || all_modes[m] == MCR_MODE_TWEMPROXY_MODULA)
            ck_assert_int_gt(moved, 0); /* modula places by position, and it went last */
        else
            ck_assert_msg(moved == 0, "%s: %d of %d keys moved", mcr_mode_name(all_modes[m]),
                          moved, NKEYS);
        mcr_changes_free(ch);
        mcr_snapshot_unref(u);
        mcr_snapshot_unref(t);
        mcr_snapshot_unref(s);
        mcr_config_free(again);
        mcr_config_free(cfg);
    }

    /* id_is_default with an id: only the default one. */
    mcr_config *cfg = mcr_config_new();
    mcr_changes *ch = mcr_changes_new();
    mcr_server_desc d = {.id = "10.0.0.1:11212", .host = "10.0.0.1", .port = 11211,
                         .weight = 1, .state = MCR_STATE_ACTIVE, .id_is_default = 1};
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "\"10.0.0.1:11211\""));
    ck_assert_int_eq(mcr_changes_add(ch, &d, &err), MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_changes_count(ch), 0);
    d.id = "10.0.0.1:11211";
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
    d = (mcr_server_desc){.id = "[::1]:11211", .host = "::1", .port = 11211, .weight = 1,
                          .id_is_default = 1};
    ck_assert_int_eq(mcr_changes_add(ch, &d, &err), MCR_OK);
    d.id = NULL;
    d.host = "10.0.0.2";
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
    mcr_snapshot *s = snap_of(cfg, 1);
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(mcr_snapshot_server(s, i, &d), MCR_OK);
        ck_assert_int_eq(d.id_is_default, 1);
    }
    mcr_snapshot_unref(s);

    /* A label is an id: a control byte in one is refused where it is
     * given, or that server could never be changed by id. */
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "10.0.0.3", 11211, 1, "a\tb", &err),
                     MCR_ERR_SYNTAX);
    ck_assert_ptr_nonnull(strstr(err.message, "control byte"));
    ck_assert_uint_eq(mcr_config_server_count(cfg), 2);
    mcr_changes_free(ch);
    mcr_config_free(cfg);
}
END_TEST

/* Every mode: the snapshot's continuum is mcr_ring_new()'s, point for point. */
/* A random config of mode m with *n (1 to 40) servers, for round `round`
 * of a test: a key prefix in round 1, a hash tag in round 2, CRC points in
 * round 3, plain otherwise. */
static mcr_config *round_config(tu_rng *r, mcr_mode m, int round, unsigned *n)
{
    *n = 1 + tu_below(r, 40);
    mcr_config *cfg = random_config(r, m, *n, 0, 6);
    if (round == 1)
        mcr_config_set_key_prefix(cfg, "ns:", 3);
    if (round == 2)
        mcr_config_set_hash_tag(cfg, "{}");
    if (round == 3)
        mcr_config_set_point_hash(cfg, MCR_HASH_CRC);
    return cfg;
}

START_TEST(same_continuum_as_ring)
{
    tu_rng r;
    tu_rng_init(&r, 1);
    for (size_t mi = 0; mi < NMODES; mi++) {
        for (int round = 0; round < 8; round++) {
            mcr_mode m = all_modes[mi];
            unsigned n;
            mcr_config *cfg = round_config(&r, m, round, &n);
            mcr_snapshot *s = snap_of(cfg, 1);
            mcr_ring *ring;
            mcr_error err;
            ck_assert_int_eq(mcr_ring_new(cfg, &ring, &err), MCR_OK);
            ck_assert_uint_eq(mcr_ring_point_count(ring),
                              mcr_ring_point_count(mcr_snapshot_ring(s)));
            for (size_t i = 0; i < mcr_ring_point_count(ring); i++) {
                uint32_t v1, s1, v2, s2;
                mcr_ring_point(ring, i, &v1, &s1);
                mcr_ring_point(mcr_snapshot_ring(s), i, &v2, &s2);
                FAST_UINT_EQ(v1, v2);
                FAST_UINT_EQ(s1, s2);
            }
            for (int k = 0; k < 500; k++)
                FAST_UINT_EQ(mcr_snapshot_locate(s, keys[k], key_len[k]),
                             mcr_ring_locate(ring, keys[k], key_len[k]));
            mcr_ring_free(ring);
            mcr_snapshot_unref(s);
            mcr_config_free(cfg);
        }
    }
}
END_TEST

/* mcr_snapshot_locate_many() gives what mcr_snapshot_locate() gives, key
 * for key, in every mode, with a prefix, a hash tag or CRC points, for
 * batches of every size from 0 to past the ring's chunk of 64, and on
 * snapshots whose servers are not all ACTIVE (ring indexes are then not
 * snapshot indexes). */
START_TEST(locate_many_equals_locate)
{
    tu_rng r;
    tu_rng_init(&r, 77);
    static const void *kp[NKEYS];
    static size_t kl[NKEYS];
    static uint32_t out[NKEYS + 1];
    for (size_t mi = 0; mi < NMODES; mi++) {
        for (int round = 0; round < 6; round++) {
            mcr_mode m = all_modes[mi];
            unsigned n;
            mcr_config *cfg = round_config(&r, m, round, &n);
            mcr_snapshot *s = snap_of(cfg, 1);
            if (round >= 3 && n > 1) {
                /* about a third of the servers DRAINING or DOWN, one kept */
                mcr_changes *ch = mcr_changes_new();
                mcr_error err;
                for (size_t i = 1; i < n; i++) {
                    mcr_server_desc d;
                    if (tu_below(&r, 3) != 0)
                        continue;
                    ck_assert_int_eq(mcr_snapshot_server(s, i, &d), MCR_OK);
                    ck_assert_int_eq(mcr_changes_set_state(ch, d.id,
                                                           tu_below(&r, 2) ? MCR_STATE_DOWN
                                                                           : MCR_STATE_DRAINING,
                                                           &err),
                                     MCR_OK);
                }
                mcr_snapshot *t = apply_ok(s, ch);
                mcr_changes_free(ch);
                mcr_snapshot_unref(s);
                s = t;
            }
            /* a batch at a random offset: its keys, then one slot that must
             * stay as it was */
            size_t cnt = round == 0 ? (size_t)mi * 9 : tu_below(&r, 300);
            size_t off = tu_below(&r, NKEYS - cnt);
            for (size_t i = 0; i < cnt; i++) {
                kp[i] = keys[off + i];
                kl[i] = key_len[off + i];
            }
            out[cnt] = 0xdeadbeefu;
            mcr_snapshot_locate_many(s, kp, kl, cnt, out);
            for (size_t i = 0; i < cnt; i++)
                FAST_UINT_EQ(out[i], mcr_snapshot_locate(s, kp[i], kl[i]));
            ck_assert_uint_eq(out[cnt], 0xdeadbeefu);
            /* every key at once */
            for (size_t i = 0; i < NKEYS; i++) {
                kp[i] = keys[i];
                kl[i] = key_len[i];
            }
            mcr_snapshot_locate_many(s, kp, kl, NKEYS, out);
            for (size_t i = 0; i < NKEYS; i++)
                FAST_UINT_EQ(out[i], mcr_snapshot_locate(s, keys[i], key_len[i]));
            mcr_snapshot_unref(s);
            mcr_config_free(cfg);
        }
    }
}
END_TEST

/* ------------------------------------------------------------ stable-ketama */

START_TEST(stable_ketama_mode)
{
    mcr_mode m;
    mcr_error err;
    ck_assert_int_eq(mcr_mode_from_name("stable-ketama", &m), MCR_OK);
    ck_assert_int_eq(m, MCR_MODE_STABLE_KETAMA);
    ck_assert_str_eq(mcr_mode_name(MCR_MODE_STABLE_KETAMA), "stable-ketama");

    /* 160 points per unit of weight, labels "id-k", 4 points per digest. */
    mcr_config *cfg = mcr_config_new();
    mcr_config_set_mode(cfg, MCR_MODE_STABLE_KETAMA);
    ck_assert_int_eq(mcr_config_add_server(cfg, "10.0.0.1", 11211, 1, &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server(cfg, "10.0.0.2", 11211, 3, &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "10.0.0.3", 11211, 2, "gamma", &err),
                     MCR_OK);
    mcr_ring *ring;
    ck_assert_int_eq(mcr_ring_new(cfg, &ring, &err), MCR_OK);
    ck_assert_uint_eq(mcr_ring_point_count(ring), 160 * 6);
    size_t per[3] = {0, 0, 0};
    for (size_t i = 0; i < mcr_ring_point_count(ring); i++) {
        uint32_t s;
        mcr_ring_point(ring, i, NULL, &s);
        per[s]++;
    }
    ck_assert_uint_eq(per[0], 160);
    ck_assert_uint_eq(per[1], 480);
    ck_assert_uint_eq(per[2], 320);
    /* The points of "gamma" are the MD5 words of "gamma-0" .. "gamma-79". */
    unsigned char dg[16];
    mcr_md5("gamma-79", 8, dg);
    uint32_t w3 = (uint32_t)dg[12] | (uint32_t)dg[13] << 8 | (uint32_t)dg[14] << 16 |
                  (uint32_t)dg[15] << 24;
    int found = 0;
    for (size_t i = 0; i < mcr_ring_point_count(ring); i++) {
        uint32_t v, s;
        mcr_ring_point(ring, i, &v, &s);
        found |= v == w3 && s == 2;
    }
    ck_assert(found);
    mcr_ring_free(ring);

    /* The weight bound. */
    ck_assert_int_eq(mcr_config_add_server(cfg, "big", 1, MCR_STABLE_WEIGHT_MAX + 1, &err),
                     MCR_OK);
    ring = NULL;
    ck_assert_int_eq(mcr_ring_new(cfg, &ring, &err), MCR_ERR_RANGE);
    ck_assert_ptr_null(ring);
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_ERR_RANGE);
    ck_assert_ptr_null(s);
    mcr_config_free(cfg);
}
END_TEST

/* Shares of hash space per ring server, from the arcs. */
static void ring_shares(const mcr_ring *ring, double *share)
{
    size_t n = mcr_ring_point_count(ring);
    for (size_t i = 0; i < mcr_ring_server_count(ring); i++)
        share[i] = 0;
    uint32_t prev, s, v;
    mcr_ring_point(ring, n - 1, &prev, NULL);
    for (size_t i = 0; i < n; i++) {
        mcr_ring_point(ring, i, &v, &s);
        share[s] += (double)(uint32_t)(v - prev) / 4294967296.0;
        prev = v;
    }
}

START_TEST(stable_ketama_weights_converge)
{
    /* Weights 1:2:4. One ring of three servers is noisy (160 points give a
     * share ~8% off); over many servers and rings the shares converge. */
    tu_rng r;
    tu_rng_init(&r, 2);
    double total[3] = {0, 0, 0};
    int rings = 20;
    for (int round = 0; round < rings; round++) {
        mcr_config *cfg = mcr_config_new();
        mcr_error err;
        mcr_config_set_mode(cfg, MCR_MODE_STABLE_KETAMA);
        for (int i = 0; i < 30; i++) {
            char h[64];
            snprintf(h, sizeof(h), "h%d-%u", i, tu_below(&r, 1u << 30));
            ck_assert_int_eq(mcr_config_add_server(cfg, h, 11211, 1u << (i % 3), &err), MCR_OK);
        }
        mcr_snapshot *s = snap_of(cfg, 1);
        double share[30];
        ring_shares(mcr_snapshot_ring(s), share);
        for (int i = 0; i < 30; i++)
            total[i % 3] += share[i] / rings;
        mcr_snapshot_unref(s);
        mcr_config_free(cfg);
    }
    ck_assert_double_eq_tol(total[0], 1.0 / 7, 0.01);
    ck_assert_double_eq_tol(total[1], 2.0 / 7, 0.01);
    ck_assert_double_eq_tol(total[2], 4.0 / 7, 0.01);

    /* Three servers 1:2:4: within a few percent of the exact shares. */
    mcr_config *cfg = mcr_config_new();
    mcr_error err;
    mcr_config_set_mode(cfg, MCR_MODE_STABLE_KETAMA);
    mcr_config_add_server(cfg, "a", 11211, 1, &err);
    mcr_config_add_server(cfg, "b", 11211, 2, &err);
    mcr_config_add_server(cfg, "c", 11211, 4, &err);
    mcr_snapshot *s = snap_of(cfg, 1);
    double share[3];
    ring_shares(mcr_snapshot_ring(s), share);
    ck_assert_double_eq_tol(share[0], 1.0 / 7, 0.04);
    ck_assert_double_eq_tol(share[1], 2.0 / 7, 0.06);
    ck_assert_double_eq_tol(share[2], 4.0 / 7, 0.08);
    mcr_snapshot_unref(s);
    mcr_config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------ moves */

/* Fraction of keys moved; *between_others: keys that moved and neither
 * owner is `who` (NULL: any move counts as to/from others). */
static double moved(const mcr_snapshot *a, const mcr_snapshot *b, const char *who,
                    double *between_others)
{
    int m = 0, o = 0;
    for (int k = 0; k < NKEYS; k++) {
        const char *x = owner_id(a, k), *y = owner_id(b, k);
        if (strcmp(x, y) == 0)
            continue;
        m++;
        if (who == NULL || (strcmp(x, who) != 0 && strcmp(y, who) != 0))
            o++;
    }
    *between_others = (double)o / NKEYS;
    return (double)m / NKEYS;
}

/* Modes where no other server's point count depends on a server joining. */
static int fixed_counts(mcr_mode m)
{
    return m == MCR_MODE_STABLE_KETAMA || m == MCR_MODE_CONSISTENT || m == MCR_MODE_SPY;
}

START_TEST(add_and_remove_move_only_that_server)
{
    tu_rng r;
    tu_rng_init(&r, 3);
    for (size_t mi = 0; mi < NMODES; mi++) {
        mcr_mode m = all_modes[mi];
        if (!is_continuum(m))
            continue;
        double ratio_sum = 0;
        int rounds = 12;
        for (int round = 0; round < rounds; round++) {
            unsigned n = 5 + tu_below(&r, 40);
            uint32_t maxw = m == MCR_MODE_STABLE_KETAMA || m == MCR_MODE_KETAMA ? 1 : 3;
            mcr_config *cfg = random_config(&r, m, n, 0, maxw);
            mcr_snapshot *s0 = snap_of(cfg, 1);

            /* Add one server. */
            char host[64], id[64], zone[64];
            mcr_server_desc d;
            random_desc(&r, 1000 + round, &d, host, id, zone, maxw);
            char who[128];
            if (d.id == NULL)
                snprintf(who, sizeof(who), "%s%s%s:%d", strchr(host, ':') ? "[" : "", host,
                         strchr(host, ':') ? "]" : "", d.port);
            else
                snprintf(who, sizeof(who), "%s", d.id);
            mcr_changes *ch = mcr_changes_new();
            mcr_error err;
            ck_assert_int_eq(mcr_changes_add(ch, &d, &err), MCR_OK);
            mcr_snapshot *s1 = apply_ok(s0, ch);
            double others, f = moved(s0, s1, who, &others);
            if (fixed_counts(m)) {
                ck_assert_msg(others == 0, "%s: %.4f of keys moved between other servers",
                              mcr_mode_name(m), others);
            } else {
                /* libketama's and libmemcached's normalisation: the others'
                 * label counts follow the server count and total weight,
                 * so some keys move between them (a little with equal
                 * weights: a rounding; more with unequal ones). */
                ck_assert_msg(others < (maxw == 1 ? 0.05 : 0.2), "%s: %.4f moved between others",
                              mcr_mode_name(m), others);
            }
            for (int k = 0; k < NKEYS; k++) /* every move into the new server */
                if (fixed_counts(m) && strcmp(owner_id(s0, k), owner_id(s1, k)) != 0)
                    FAST_STR_EQ(owner_id(s1, k), who);
            ratio_sum += f * (n + 1);

            /* Remove it again: the same keys move back, nothing else. */
            mcr_changes_reset(ch);
            ck_assert_int_eq(mcr_changes_remove(ch, who, &err), MCR_OK);
            mcr_snapshot *s2 = apply_ok(s1, ch);
            moved(s1, s2, who, &others);
            if (fixed_counts(m))
                ck_assert(others == 0);
            assert_same_points(s0, s2);
            ck_assert_uint_eq(mcr_snapshot_epoch(s2), 3);

            /* Remove a random original server: only its keys move. */
            mcr_server_desc victim;
            mcr_snapshot_server(s0, tu_below(&r, n), &victim);
            mcr_changes_reset(ch);
            ck_assert_int_eq(mcr_changes_remove(ch, victim.id, &err), MCR_OK);
            mcr_snapshot *s3 = apply_ok(s0, ch);
            moved(s0, s3, victim.id, &others);
            if (fixed_counts(m))
                ck_assert(others == 0);
            else
                ck_assert(others < (maxw == 1 ? 0.05 : 0.2));
            for (int k = 0; k < NKEYS; k++)
                if (strcmp(owner_id(s0, k), owner_id(s3, k)) != 0 && fixed_counts(m))
                    FAST_STR_EQ(owner_id(s0, k), victim.id);
            mcr_snapshot_unref(s3);
            mcr_snapshot_unref(s2);
            mcr_snapshot_unref(s1);
            mcr_snapshot_unref(s0);
            mcr_changes_free(ch);
            mcr_config_free(cfg);
        }
        /* Equal weights in ketama and stable-ketama: 1/(N+1) moves. */
        if (m == MCR_MODE_KETAMA || m == MCR_MODE_STABLE_KETAMA) {
            double mean = ratio_sum / rounds;
            ck_assert_msg(mean > 0.8 && mean < 1.2, "%s: moved %.3f of 1/(N+1) on average",
                          mcr_mode_name(m), mean);
        }
    }
}
END_TEST

/* stable-ketama: changing one weight moves keys only to or from that server. */
START_TEST(stable_weight_change_moves_only_that_server)
{
    tu_rng r;
    tu_rng_init(&r, 4);
    for (int round = 0; round < 20; round++) {
        unsigned n = 3 + tu_below(&r, 30);
        mcr_config *cfg = random_config(&r, MCR_MODE_STABLE_KETAMA, n, 0, 4);
        mcr_snapshot *s0 = snap_of(cfg, 1);
        mcr_server_desc d;
        mcr_snapshot_server(s0, tu_below(&r, n), &d);
        uint32_t w = d.weight == 4 ? 1 : d.weight + 1 + tu_below(&r, 3);
        mcr_changes *ch = mcr_changes_new();
        mcr_error err;
        ck_assert_int_eq(mcr_changes_set_weight(ch, d.id, w, &err), MCR_OK);
        mcr_snapshot *s1 = apply_ok(s0, ch);
        double others;
        double f = moved(s0, s1, d.id, &others);
        ck_assert(others == 0);
        ck_assert(f > 0);
        for (int k = 0; k < NKEYS; k++) {
            const char *a = owner_id(s0, k), *b = owner_id(s1, k);
            if (strcmp(a, b) != 0) /* heavier: only into it; lighter: only out of it */
                FAST_STR_EQ(w > d.weight ? b : a, d.id);
        }
        /* And the same as building with that weight from the start. */
        mcr_config *c2 = config_of(s1, MCR_MODE_STABLE_KETAMA, 0);
        mcr_snapshot *scratch = snap_of(c2, 2);
        assert_same_points(s1, scratch);
        ck_assert_str_eq(mcr_snapshot_checksum(s1), mcr_snapshot_checksum(scratch));
        mcr_snapshot_unref(scratch);
        mcr_config_free(c2);
        mcr_snapshot_unref(s1);
        mcr_snapshot_unref(s0);
        mcr_changes_free(ch);
        mcr_config_free(cfg);
    }
}
END_TEST

/* ------------------------------------------------------------ incremental = scratch */

static void random_change(tu_rng *r, const mcr_snapshot *s, mcr_changes *ch, unsigned *next,
                          mcr_mode m)
{
    mcr_error err;
    size_t n = mcr_snapshot_server_count(s);
    unsigned what = tu_below(r, 10);
    mcr_server_desc d;
    mcr_snapshot_server(s, tu_below(r, (uint32_t)n), &d);
    if (what < 3 || n < 3) {
        char host[64], id[64], zone[64];
        mcr_server_desc a;
        random_desc(r, (*next)++, &a, host, id, zone, m == MCR_MODE_KETAMA ? 1 : 5);
        if (tu_below(r, 5) == 0)
            a.state = tu_below(r, 2) ? MCR_STATE_DOWN : MCR_STATE_DRAINING;
        ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_OK);
    } else if (what < 5) {
        ck_assert_int_eq(mcr_changes_remove(ch, d.id, &err), MCR_OK);
    } else if (what < 7) {
        ck_assert_int_eq(mcr_changes_set_weight(ch, d.id, 1 + tu_below(r, 5), &err), MCR_OK);
    } else {
        static const mcr_server_state st[] = {MCR_STATE_ACTIVE, MCR_STATE_DRAINING,
                                              MCR_STATE_DOWN, MCR_STATE_ACTIVE};
        ck_assert_int_eq(mcr_changes_set_state(ch, d.id, st[tu_below(r, 4)], &err), MCR_OK);
    }
}

START_TEST(incremental_equals_scratch)
{
    tu_rng r;
    tu_rng_init(&r, 5);
    for (size_t mi = 0; mi < NMODES; mi++) {
        mcr_mode m = all_modes[mi];
        unsigned next = 500;
        mcr_config *cfg = random_config(&r, m, 2 + tu_below(&r, 30), 0, 5);
        mcr_snapshot *s = snap_of(cfg, 10);
        mcr_config_free(cfg);
        int steps = 0;
        for (int step = 0; step < 60; step++) {
            mcr_changes *ch = mcr_changes_new();
            int batch = 1 + (int)tu_below(&r, step % 5 == 0 ? 6 : 2);
            for (int b = 0; b < batch; b++)
                random_change(&r, s, ch, &next, m);
            mcr_snapshot *s1 = NULL;
            mcr_error err;
            int rc = mcr_snapshot_apply(s, ch, &s1, &err);
            mcr_changes_free(ch);
            if (rc != MCR_OK) {
                /* A batch may remove a server twice, or leave none active. */
                ck_assert_msg(rc == MCR_ERR_UNKNOWN || rc == MCR_ERR_EMPTY, "%d %s", rc,
                              err.message);
                ck_assert_ptr_null(s1);
                continue;
            }
            steps++;
            /* The continuum of a config of the active servers alone. */
            mcr_config *act = config_of(s1, m, 1);
            mcr_snapshot *sa = snap_of(act, 1);
            assert_same_points(s1, sa);
            mcr_snapshot_unref(sa);
            mcr_config_free(act);
            /* With every server active, the very same snapshot. */
            int all_active = mcr_snapshot_active_count(s1) == mcr_snapshot_server_count(s1);
            if (all_active) {
                mcr_config *all = config_of(s1, m, 0);
                mcr_snapshot *sc = snap_of(all, mcr_snapshot_epoch(s1));
                ck_assert_str_eq(mcr_snapshot_checksum(s1), mcr_snapshot_checksum(sc));
                mcr_snapshot_unref(sc);
                mcr_config_free(all);
            }
            /* A file rebuilds from scratch (states included): same checksum. */
            if (step % 10 == 0) {
                mcr_snapshot *l = NULL;
                ck_assert_int_eq(mcr_snapshot_save(s1, tmp_path("inc.snap"), &err), MCR_OK);
                rc = mcr_snapshot_load(tmp_path("inc.snap"), NULL, 0, &l, &err);
                ck_assert_msg(rc == MCR_OK, "%s", err.message);
                ck_assert_str_eq(mcr_snapshot_checksum(l), mcr_snapshot_checksum(s1));
                assert_same_points(l, s1);
                mcr_snapshot_unref(l);
            }
            mcr_snapshot_unref(s);
            s = s1;
        }
        ck_assert_int_gt(steps, 30);
        mcr_snapshot_unref(s);
    }
}
END_TEST

/* A server that goes down and comes back gets exactly its points back. */
START_TEST(states)
{
    tu_rng r;
    tu_rng_init(&r, 6);
    mcr_config *cfg = random_config(&r, MCR_MODE_STABLE_KETAMA, 10, 0, 3);
    mcr_snapshot *s0 = snap_of(cfg, 1);
    mcr_server_desc d;
    mcr_snapshot_server(s0, 3, &d);
    char id[300];
    snprintf(id, sizeof(id), "%s", d.id);
    mcr_changes *ch = mcr_changes_new();
    mcr_error err;
    ck_assert_int_eq(mcr_changes_set_state(ch, id, MCR_STATE_DRAINING, &err), MCR_OK);
    mcr_snapshot *s1 = apply_ok(s0, ch);
    ck_assert_uint_eq(mcr_snapshot_active_count(s1), 9);
    ck_assert_uint_eq(mcr_snapshot_server_count(s1), 10);
    ck_assert_int_eq(mcr_snapshot_server(s1, 3, &d), MCR_OK);
    ck_assert_int_eq(d.state, MCR_STATE_DRAINING);
    for (int k = 0; k < NKEYS; k++)
        if (mcr_snapshot_locate(s1, keys[k], key_len[k]) == 3)
            ck_abort_msg("key %d on a draining server", k);
    for (uint32_t i = 0; i < 9; i++)
        FAST_UINT_EQ(mcr_snapshot_ring_server(s1, i), i < 3 ? i : i + 1);
    mcr_changes_reset(ch);
    ck_assert_int_eq(mcr_changes_set_state(ch, id, MCR_STATE_ACTIVE, &err), MCR_OK);
    mcr_snapshot *s2 = apply_ok(s1, ch);
    assert_same_points(s0, s2);
    ck_assert_str_ne(mcr_snapshot_checksum(s0), mcr_snapshot_checksum(s2)); /* epoch */
    mcr_config *c2 = config_of(s2, MCR_MODE_STABLE_KETAMA, 0);
    mcr_snapshot *sc = snap_of(c2, 3);
    ck_assert_str_eq(mcr_snapshot_checksum(sc), mcr_snapshot_checksum(s2));
    mcr_snapshot_unref(sc);
    mcr_config_free(c2);
    /* An empty batch: a copy with the next epoch. */
    mcr_changes_reset(ch);
    mcr_snapshot *s3 = apply_ok(s2, ch);
    assert_same_points(s2, s3);
    ck_assert_uint_eq(mcr_snapshot_epoch(s3), 4);
    /* A server may join down, and become active later. */
    mcr_server_desc a = {.id = "late", .host = "10.9.9.9", .port = 11211, .weight = 2,
                         .zone = "zz", .state = MCR_STATE_DOWN};
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_OK);
    mcr_snapshot *s4 = apply_ok(s3, ch);
    assert_same_points(s3, s4);
    ck_assert_uint_eq(mcr_snapshot_find(s4, "late"), 10);
    ck_assert_uint_eq(mcr_snapshot_server_zone(s4, 10), mcr_snapshot_zone_count(s4));
    mcr_changes_reset(ch);
    ck_assert_int_eq(mcr_changes_set_state(ch, "late", MCR_STATE_ACTIVE, &err), MCR_OK);
    mcr_snapshot *s5 = apply_ok(s4, ch);
    ck_assert_uint_eq(mcr_ring_point_count(mcr_snapshot_ring(s5)),
                      mcr_ring_point_count(mcr_snapshot_ring(s4)) + 320);
    mcr_snapshot_unref(s5);
    mcr_snapshot_unref(s4);
    mcr_snapshot_unref(s3);
    mcr_snapshot_unref(s2);
    mcr_snapshot_unref(s1);
    mcr_snapshot_unref(s0);
    mcr_changes_free(ch);
    mcr_config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------ identity */

START_TEST(named_server_moves_no_key)
{
    static const mcr_mode native[] = {MCR_MODE_KETAMA, MCR_MODE_STABLE_KETAMA};
    for (int mi = 0; mi < 2; mi++) {
        mcr_config *cfg = mcr_config_new();
        mcr_error err;
        mcr_config_set_mode(cfg, native[mi]);
        for (int i = 0; i < 12; i++) {
            char h[32], id[32];
            snprintf(h, sizeof(h), "10.1.0.%d", i);
            snprintf(id, sizeof(id), "cache-%d", i);
            mcr_server_desc d = {.id = id, .host = h, .port = 11211, .weight = 1,
                                 .state = MCR_STATE_ACTIVE};
            ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
        }
        mcr_snapshot *s0 = snap_of(cfg, 1);
        /* cache-5 moves to another address and port, in one batch. */
        mcr_changes *ch = mcr_changes_new();
        mcr_server_desc d = {.id = "cache-5", .host = "192.168.7.7", .port = 22122, .weight = 1,
                             .state = MCR_STATE_ACTIVE};
        ck_assert_int_eq(mcr_changes_remove(ch, "cache-5", &err), MCR_OK);
        ck_assert_int_eq(mcr_changes_add(ch, &d, &err), MCR_OK);
        mcr_snapshot *s1 = apply_ok(s0, ch);
        for (int k = 0; k < NKEYS; k++)
            FAST_STR_EQ(owner_id(s0, k), owner_id(s1, k));
        mcr_snapshot_server(s1, (size_t)mcr_snapshot_find(s1, "cache-5"), &d);
        ck_assert_str_eq(d.host, "192.168.7.7");
        /* Same from configs: only the address differs. */
        mcr_config *c2 = config_of(s1, native[mi], 0);
        mcr_snapshot *s2 = snap_of(c2, 1);
        for (int k = 0; k < NKEYS; k++)
            FAST_STR_EQ(owner_id(s0, k), owner_id(s2, k));
        mcr_snapshot_unref(s2);
        mcr_config_free(c2);
        mcr_snapshot_unref(s1);
        mcr_snapshot_unref(s0);
        mcr_changes_free(ch);
        mcr_config_free(cfg);
    }
}
END_TEST

/* ------------------------------------------------------------ errors */

START_TEST(errors_publish_nothing)
{
    tu_rng r;
    tu_rng_init(&r, 7);
    mcr_config *cfg = random_config(&r, MCR_MODE_STABLE_KETAMA, 4, 0, 2);
    mcr_config_add_server(cfg, "10.2.2.2", 4000, 1, NULL);
    mcr_snapshot *s = snap_of(cfg, 5);
    char sum[64];
    snprintf(sum, sizeof(sum), "%s", mcr_snapshot_checksum(s));
    mcr_changes *ch = mcr_changes_new();
    mcr_error err;
    mcr_snapshot *sentinel = (mcr_snapshot *)&r, *out = sentinel;
    mcr_server_desc d;
    mcr_snapshot_server(s, 0, &d);
    char id0[300];
    snprintf(id0, sizeof(id0), "%s", d.id);

#define EXPECT_APPLY(want)                                                    \
    do {                                                                \
        out = sentinel;                                                 \
        ck_assert_int_eq(mcr_snapshot_apply(s, ch, &out, &err), want);  \
        ck_assert_int_eq(err.code, want);                               \
        ck_assert_ptr_eq(out, sentinel);                                \
        mcr_changes_reset(ch);                                          \
    } while (0)

    /* Unknown ids, also after a valid change in the same batch. */
    ck_assert_int_eq(mcr_changes_remove(ch, "nobody", &err), MCR_OK);
    EXPECT_APPLY(MCR_ERR_UNKNOWN);
    ck_assert_ptr_nonnull(strstr(err.message, "nobody"));
    ck_assert_int_eq(mcr_changes_set_weight(ch, id0, 2, &err), MCR_OK);
    ck_assert_int_eq(mcr_changes_set_state(ch, "ghost", MCR_STATE_DOWN, &err), MCR_OK);
    EXPECT_APPLY(MCR_ERR_UNKNOWN);
    ck_assert_ptr_nonnull(strstr(err.message, "change 2"));
    ck_assert_int_eq(mcr_changes_remove(ch, id0, &err), MCR_OK);
    ck_assert_int_eq(mcr_changes_remove(ch, id0, &err), MCR_OK);
    EXPECT_APPLY(MCR_ERR_UNKNOWN);
    /* Duplicates: id, address. */
    mcr_server_desc a = {.id = id0, .host = "10.3.3.3", .port = 11211, .weight = 1,
                         .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_OK);
    EXPECT_APPLY(MCR_ERR_DUPLICATE);
    a = (mcr_server_desc){.id = "fresh", .host = "10.2.2.2", .port = 4000, .weight = 1,
                          .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_OK);
    EXPECT_APPLY(MCR_ERR_DUPLICATE);
    a = (mcr_server_desc){.host = "10.2.2.2", .port = 4000, .weight = 1, .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_OK);
    EXPECT_APPLY(MCR_ERR_DUPLICATE);
    /* Remove then add the same address is fine (checked below). */
    /* No active server left. */
    for (size_t i = 0; i < mcr_snapshot_server_count(s); i++) {
        mcr_snapshot_server(s, i, &d);
        ck_assert_int_eq(mcr_changes_set_state(ch, d.id, i % 2 ? MCR_STATE_DOWN
                                                                : MCR_STATE_DRAINING, &err),
                         MCR_OK);
    }
    EXPECT_APPLY(MCR_ERR_EMPTY);
    for (size_t i = 0; i < mcr_snapshot_server_count(s); i++) {
        mcr_snapshot_server(s, i, &d);
        ck_assert_int_eq(mcr_changes_remove(ch, d.id, &err), MCR_OK);
    }
    EXPECT_APPLY(MCR_ERR_EMPTY);
    /* stable-ketama's weight bound. */
    ck_assert_int_eq(mcr_changes_set_weight(ch, id0, MCR_STABLE_WEIGHT_MAX + 1, &err), MCR_OK);
    EXPECT_APPLY(MCR_ERR_RANGE);
    a = (mcr_server_desc){.id = "heavy", .host = "10.4.4.4", .port = 11211,
                          .weight = MCR_STABLE_WEIGHT_MAX + 1,
                          .state = MCR_STATE_ACTIVE, .id_is_default = 0};
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_OK);
    EXPECT_APPLY(MCR_ERR_RANGE);
    /* NULL arguments. */
    ck_assert_int_eq(mcr_snapshot_apply(NULL, ch, &out, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_snapshot_apply(s, NULL, &out, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_snapshot_apply(s, ch, NULL, &err), MCR_ERR_INVALID);
    ck_assert_ptr_eq(out, sentinel);

    /* Recording checks its own arguments. */
    ck_assert_int_eq(mcr_changes_remove(NULL, "x", &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_changes_remove(ch, NULL, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_changes_remove(ch, "", &err), MCR_ERR_SYNTAX);
    ck_assert_int_eq(mcr_changes_remove(ch, "tab\there", &err), MCR_ERR_SYNTAX);
    ck_assert_int_eq(mcr_changes_set_weight(ch, "x", MCR_WEIGHT_MAX + 1, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_changes_set_state(ch, "x", (mcr_server_state)7, &err), MCR_ERR_INVALID);
    a = (mcr_server_desc){.host = "bad host", .port = 11211, .weight = 1,
                          .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_ERR_SYNTAX);
    a.host = "ok";
    a.port = 0;
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_ERR_RANGE);
    a.port = 1;
    a.weight = MCR_WEIGHT_MAX + 1; /* 0 is the mode's to refuse, when applied */
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_ERR_RANGE);
    a.weight = 1;
    a.zone = "bad\nzone";
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_ERR_SYNTAX);
    a.zone = NULL;
    a.state = (mcr_server_state)-1;
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_changes_add(ch, NULL, &err), MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_changes_count(ch), 0);
    ck_assert_uint_eq(mcr_changes_count(NULL), 0);
    mcr_changes_reset(NULL);
    mcr_changes_free(NULL);

    /* Epoch overflow. */
    mcr_snapshot *top = snap_of(cfg, UINT64_MAX);
    out = sentinel;
    ck_assert_int_eq(mcr_snapshot_apply(top, ch, &out, &err), MCR_ERR_RANGE);
    ck_assert_ptr_eq(out, sentinel);
    mcr_snapshot_unref(top);

    /* The old snapshot is intact and a valid batch still works. */
    ck_assert_str_eq(mcr_snapshot_checksum(s), sum);
    ck_assert_int_eq(mcr_changes_remove(ch, "10.2.2.2:4000", &err), MCR_OK);
    a = (mcr_server_desc){.host = "10.2.2.2", .port = 4000, .weight = 1, .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_OK);
    mcr_snapshot *ok = apply_ok(s, ch);
    ck_assert_uint_eq(mcr_snapshot_epoch(ok), 6);
    mcr_snapshot_unref(ok);
#undef EXPECT_APPLY
    mcr_changes_free(ch);
    mcr_snapshot_unref(s);
    mcr_config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------ checksum */

START_TEST(checksum_covers_every_field)
{
    enum { VARIANTS = 20 };
    char sums[VARIANTS][MCR_SNAPSHOT_CHECKSUM_LEN + 1];
    int nv = 0;
    for (int v = 0; v < VARIANTS; v++) {
        mcr_config *cfg = mcr_config_new();
        mcr_error err;
        mcr_mode mode = v == 1 ? MCR_MODE_KETAMA : MCR_MODE_CONSISTENT;
        mcr_config_set_mode(cfg, mode);
        mcr_config_set_hash(cfg, v == 2 ? MCR_HASH_CRC : MCR_HASH_DEFAULT);
        if (v == 3)
            mcr_config_set_point_hash(cfg, MCR_HASH_FNV1A_32);
        if (v == 4)
            mcr_config_set_hash_tag(cfg, "{}");
        if (v == 5)
            mcr_config_set_key_prefix(cfg, "ns", 2);
        if (v == 6)
            mcr_config_set_key_prefix(cfg, "", 0);
        mcr_server_desc a = {.id = v == 7 ? "A" : "a", .host = "10.0.0.1",
                             .port = v == 8 ? 11212 : 11211,
                             .weight = v == 9 ? 2 : 1, .zone = v == 10 ? "z2" : "z1",
                             .state = MCR_STATE_ACTIVE};
        mcr_server_desc b = {.host = v == 11 ? "10.0.0.9" : "10.0.0.2", .port = 11211, .weight = 1,
                             .zone = v == 12 ? "z" : NULL, .state = MCR_STATE_ACTIVE};
        if (v == 13) { /* order */
            ck_assert_int_eq(mcr_config_add_server_desc(cfg, &b, &err), MCR_OK);
            ck_assert_int_eq(mcr_config_add_server_desc(cfg, &a, &err), MCR_OK);
        } else {
            ck_assert_int_eq(mcr_config_add_server_desc(cfg, &a, &err), MCR_OK);
            ck_assert_int_eq(mcr_config_add_server_desc(cfg, &b, &err), MCR_OK);
        }
        if (v == 14) { /* named with its default id */
            mcr_server_desc c = {.id = "10.0.0.3:11211", .host = "10.0.0.3", .port = 11211,
                                 .weight = 1, .state = MCR_STATE_ACTIVE};
            ck_assert_int_eq(mcr_config_add_server_desc(cfg, &c, &err), MCR_OK);
        } else {
            ck_assert_int_eq(mcr_config_add_server(cfg, "10.0.0.3", 11211, 1, &err), MCR_OK);
        }
        mcr_snapshot *s = snap_of(cfg, v == 15 ? 2 : 1);
        if (v >= 16) { /* states, via changes: compare modulo epoch */
            mcr_changes *ch = mcr_changes_new();
            if (v == 17)
                mcr_changes_set_state(ch, "a", MCR_STATE_DRAINING, &err);
            if (v == 18)
                mcr_changes_set_state(ch, "a", MCR_STATE_DOWN, &err);
            if (v == 19)
                mcr_changes_set_weight(ch, "a", 1, &err); /* no change at all */
            mcr_snapshot *s2 = apply_ok(s, ch);
            mcr_snapshot_unref(s);
            s = s2;
            mcr_changes_free(ch);
        }
        snprintf(sums[nv++], sizeof(sums[0]), "%s", mcr_snapshot_checksum(s));
        mcr_snapshot_unref(s);
        mcr_config_free(cfg);
    }
    /* Every variant differs from the others, except 16 and 19 (the same
     * snapshot, epoch 2 both) and 15 (epoch 2, no change) equal to both. */
    for (int i = 0; i < nv; i++)
        for (int j = i + 1; j < nv; j++) {
            int same_expected = (i == 15 || i == 16) && (j == 16 || j == 19);
            if (same_expected)
                ck_assert_str_eq(sums[i], sums[j]);
            else
                ck_assert_msg(strcmp(sums[i], sums[j]) != 0, "variants %d and %d: same checksum",
                              i, j);
        }
}
END_TEST

/* ------------------------------------------------------------ threads */

typedef struct thread_arg {
    mcr_snapshot *snap;
    int rounds;
    unsigned long sum;
} thread_arg;

static void *ref_unref(void *p)
{
    thread_arg *a = p;
    for (int i = 0; i < a->rounds; i++) {
        mcr_snapshot *mine = mcr_snapshot_ref(a->snap);
        a->sum += mcr_snapshot_locate(mine, keys[i % NKEYS], key_len[i % NKEYS]);
        if (i % 64 == 0) {
            mcr_snapshot *more[8];
            for (int j = 0; j < 8; j++)
                more[j] = mcr_snapshot_ref(mine);
            for (int j = 0; j < 8; j++)
                mcr_snapshot_unref(more[j]);
        }
        mcr_snapshot_unref(mine);
    }
    return NULL;
}

/* Each thread holds a reference it drops at the end: the last one to
 * finish frees the snapshot (ASan/TSan/valgrind check the rest). */
static void *hold_and_drop(void *p)
{
    thread_arg *a = p;
    ref_unref(a);
    mcr_snapshot_unref(a->snap);
    return NULL;
}

START_TEST(refcount_under_threads)
{
    enum { THREADS = 8 };
    pthread_t t[THREADS];
    thread_arg a[THREADS];
    tu_rng r;
    tu_rng_init(&r, 9);
    mcr_config *cfg = random_config(&r, MCR_MODE_KETAMA, 20, 0, 1);
    mcr_snapshot *s = snap_of(cfg, 1);
    unsigned long expect = 0;
    for (int i = 0; i < 20000; i++)
        expect += mcr_snapshot_locate(s, keys[i % NKEYS], key_len[i % NKEYS]);
    for (int i = 0; i < THREADS; i++) {
        a[i] = (thread_arg){s, 20000, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, ref_unref, &a[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_uint_eq(a[i].sum, expect);
    }
    /* Hand one reference to each thread and drop ours first. */
    for (int i = 0; i < THREADS; i++) {
        a[i] = (thread_arg){mcr_snapshot_ref(s), 5000, 0};
    }
    mcr_snapshot_unref(s);
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, hold_and_drop, &a[i]), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    mcr_config_free(cfg);
}
END_TEST

/* Snapshots sharing point caches are freed by different threads at once. */
typedef struct chain_arg {
    mcr_snapshot **snaps;
    int n, stride, start;
} chain_arg;

static void *drop_chain(void *p)
{
    chain_arg *c = p;
    for (int i = c->start; i < c->n; i += c->stride)
        mcr_snapshot_unref(c->snaps[i]);
    return NULL;
}

START_TEST(shared_caches_freed_concurrently)
{
    enum { N = 64, THREADS = 4 };
    mcr_snapshot *snaps[N];
    mcr_error err;
    snaps[0] = small_snapshot(1);
    mcr_changes *ch = mcr_changes_new();
    for (int i = 1; i < N; i++) {
        char id[32];
        mcr_changes_reset(ch);
        snprintf(id, sizeof(id), "x%d", i);
        mcr_server_desc d = {.id = id, .host = "10.8.8.8", .port = 2000 + i, .weight = 1,
                             .state = MCR_STATE_ACTIVE};
        mcr_changes_add(ch, &d, &err);
        snaps[i] = apply_ok(snaps[i - 1], ch);
    }
    mcr_changes_free(ch);
    pthread_t t[THREADS];
    chain_arg c[THREADS];
    for (int i = 0; i < THREADS; i++) {
        c[i] = (chain_arg){snaps, N, THREADS, i};
        pthread_create(&t[i], NULL, drop_chain, &c[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}
END_TEST

static Suite *snapshot_suite(void)
{
    Suite *s = suite_create("snapshot");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, basics);
    tcase_add_test(tc, desc_round_trip);
    tcase_add_test(tc, same_continuum_as_ring);
    tcase_add_test(tc, locate_many_equals_locate);
    tcase_add_test(tc, stable_ketama_mode);
    tcase_add_test(tc, stable_ketama_weights_converge);
    tcase_add_test(tc, add_and_remove_move_only_that_server);
    tcase_add_test(tc, stable_weight_change_moves_only_that_server);
    tcase_add_test(tc, incremental_equals_scratch);
    tcase_add_test(tc, states);
    tcase_add_test(tc, named_server_moves_no_key);
    tcase_add_test(tc, errors_publish_nothing);
    tcase_add_test(tc, checksum_covers_every_field);
    suite_add_tcase(s, tc);
    /* The tests with threads: the only ones a TSan build runs
     * (THREADS_CASE in test/CMakeLists.txt). */
    TCase *tt = tcase_create("threads");
    tcase_set_timeout(tt, 600);
    tcase_add_test(tt, refcount_under_threads);
    tcase_add_test(tt, shared_caches_freed_concurrently);
    suite_add_tcase(s, tt);
    return s;
}

int main(void)
{
    make_keys();
    tmpdir = tu_tmpdir("snapshot-test");
    int rc = tu_run(snapshot_suite());
    tu_tmpdir_free(tmpdir);
    return rc;
}
