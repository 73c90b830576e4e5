/* SPDX-License-Identifier: BSD-3-Clause */
/* test_placement_snapshots.c: Check suite of the placement modes' snapshots: files of every mode and forged maps, apply against new, slots, jump and rendezvous under changes, diffs across modes, bounded loads, and the edges (one server, many, bad arguments). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"
#include "test_placement_util.h"
#include "testutil.h"

/* ------------------------------------------------------------ snapshots */

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
    mcr_server_desc da = {.id = a.id, .host = a.host, .port = a.port, .weight = a.weight,
                          .zone = a.zone, .state = MCR_STATE_ACTIVE};
    mcr_server_desc db = {.host = b.host, .port = b.port, .weight = b.weight,
                          .state = MCR_STATE_DOWN};
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
            mcr_server_desc d = {.id = x.id, .host = x.host, .port = x.port, .weight = x.weight,
                                 .state = MCR_STATE_ACTIVE};
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
    uint32_t ei = mcr_snapshot_find(s1, e.id);
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
    mcr_changes_reset(ch);
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
    mcr_changes_reset(ch);
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
    mcr_changes_reset(ch);
    d = diff_of(s3, s4);
    EXPECT(mcr_diff_moved(d) == 0);
    mcr_diff_free(d);

    /* DOWN: the map keeps the owner, its keys spread over the others by
     * slots, and come back. */
    const char *down = id_at(s4, 2);
    EXPECT_INT(mcr_changes_set_state(ch, down, MCR_STATE_DOWN, &err), ==, MCR_OK);
    mcr_snapshot *s5 = apply_ok(s4, ch);
    mcr_changes_reset(ch);
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
    mcr_changes_reset(ch);
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
    mcr_changes_reset(ch);
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
    mcr_changes_reset(ch);
    EXPECT_INT(mcr_changes_move_slots(ch, 0, 10, "nobody", &err), ==, MCR_OK);
    EXPECT_INT(mcr_snapshot_apply(s7, ch, &bad, &err), ==, MCR_ERR_UNKNOWN);
    EXPECT_INT(mcr_slots_plan(s7, ch, &moved, &err), ==, MCR_ERR_UNKNOWN);
    EXPECT_UINT(mcr_changes_count(ch), ==, 1); /* nothing appended */
    mcr_changes_reset(ch);
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
    mcr_changes_reset(ch);
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
    mcr_changes_reset(ch);
    mcr_diff *d = diff_of(s0, last);
    EXPECT_MSG(fabs(mcr_diff_moved(d) - 0.1) < 1e-12, "moved %.17g", mcr_diff_moved(d));
    check_diff(s0, last, d, 20000, 0.01);
    mcr_diff_free(d);
    moved_keys(s0, last, 20000, NULL, p.s[9].id, "remove last");

    /* A bucket in the middle: the last server takes it over and the keys
     * of the last bucket spread: 1/10 + (1/10)(8/9) by the model. */
    EXPECT_INT(mcr_changes_remove(ch, p.s[3].id, &err), ==, MCR_OK);
    mcr_snapshot *mid = apply_ok(s0, ch);
    mcr_changes_reset(ch);
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
    mcr_changes_reset(ch);
    d = diff_of(s0, down);
    EXPECT_MSG(fabs(mcr_diff_moved(d) - 0.1) < 1e-12, "moved %.17g", mcr_diff_moved(d));
    EXPECT_UINT(mcr_diff_pair_count(d), ==, 9);
    check_diff(s0, down, d, 20000, 0.01);
    mcr_diff_free(d);
    moved_keys(s0, down, 20000, NULL, p.s[3].id, "down");
    /* Two holes, and a hole against a removal: still the model's. */
    EXPECT_INT(mcr_changes_set_state(ch, p.s[5].id, MCR_STATE_DRAINING, &err), ==, MCR_OK);
    mcr_snapshot *down2 = apply_ok(down, ch);
    mcr_changes_reset(ch);
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
    mcr_changes_reset(ch);
    d = diff_of(s0, readd);
    EXPECT(mcr_diff_moved(d) == 0);
    mcr_diff_free(d);
    EXPECT_UINT(mcr_snapshot_table_entry(readd, 3), ==, mcr_snapshot_find(readd, x.id));

    /* Weights: up appends, down frees the highest buckets at the end. */
    EXPECT_INT(mcr_changes_set_weight(ch, p.s[2].id, 4, &err), ==, MCR_OK);
    mcr_snapshot *up = apply_ok(s0, ch);
    mcr_changes_reset(ch);
    EXPECT_UINT(mcr_snapshot_table_size(up), ==, 13);
    for (uint32_t b = 10; b < 13; b++)
        EXPECT_UINT(mcr_snapshot_table_entry(up, b), ==, 2);
    moved_keys(s0, up, 20000, p.s[2].id, NULL, "weight up");
    EXPECT_INT(mcr_changes_set_weight(ch, p.s[2].id, 1, &err), ==, MCR_OK);
    mcr_snapshot *back = apply_ok(up, ch);
    mcr_changes_reset(ch);
    d = diff_of(s0, back);
    EXPECT(mcr_diff_moved(d) == 0); /* its last buckets were the last ones */
    mcr_diff_free(d);
    EXPECT_INT(mcr_changes_set_weight(ch, p.s[2].id, 1, &err), ==, MCR_OK);
    EXPECT_INT(mcr_changes_set_weight(ch, p.s[2].id, 5, &err), ==, MCR_OK);
    mcr_snapshot *net = apply_ok(up, ch); /* a net change of +1 appends one */
    mcr_changes_reset(ch);
    EXPECT_UINT(mcr_snapshot_table_size(net), ==, 14);
    mcr_snapshot_unref(net);

    /* Limits: weights up to MCR_STABLE_WEIGHT_MAX. */
    mcr_snapshot *bad = NULL;
    EXPECT_INT(mcr_changes_set_weight(ch, p.s[2].id, MCR_STABLE_WEIGHT_MAX + 1, &err), ==,
               MCR_OK);
    EXPECT_INT(mcr_snapshot_apply(s0, ch, &bad, &err), ==, MCR_ERR_RANGE);
    mcr_changes_reset(ch);
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
    mcr_server_desc nd = {.id = nx.id, .host = nx.host, .port = nx.port, .weight = 1,
                          .state = MCR_STATE_ACTIVE};
    EXPECT_INT(mcr_changes_add(ch, &nd, &err), ==, MCR_OK);
    EXPECT_INT(mcr_changes_set_state(ch, nx.id, MCR_STATE_DOWN, &err), ==, MCR_OK);
    mcr_snapshot *added_down = apply_ok(s0, ch);
    mcr_changes_reset(ch);
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
    mcr_changes_reset(ch);
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
                mcr_server_desc d = {.id = x.id, .host = x.host, .port = x.port, .weight = x.weight,
                                     .state = tu_below(&r, 4) ? MCR_STATE_ACTIVE : MCR_STATE_DOWN};
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
                mcr_server_desc d = {.id = x.id, .host = x.host, .port = x.port,
                                     .weight = x.weight, .state = MCR_STATE_ACTIVE};
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

/* ------------------------------------------------------------ walks */

/* The first output of SplitMix64 seeded with x (Steele, Lea and Flood's
 * constants), for the slots' probe sequence as mcr_mode(3) gives it. */
static uint64_t splitmix_first(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Candidate k (k >= 1) of each mode's documented walk for a key, as
 * snapshot server indexes (every server active, so that ring and snapshot
 * number them alike); UINT32_MAX past the mode's own sequence. */
static uint32_t walk_candidate(const mcr_snapshot *s, const char *key, size_t kl, uint32_t k)
{
    const mcr_ring *r = mcr_snapshot_ring(s);
    uint32_t n = (uint32_t)mcr_snapshot_server_count(s), h = mcr_ring_hash(r, key, kl);
    switch (mcr_ring_mode(r)) {
    case MCR_MODE_SLOTS: { /* the owners of the slot's probes */
        uint32_t slot = mcr_snapshot_key_slot(s, key, kl), S = (uint32_t)mcr_snapshot_table_size(s);
        if (k >= 4 * n)
            return UINT32_MAX;
        return mcr_snapshot_table_entry(s, (size_t)(splitmix_first((uint64_t)slot << 32 | k) % S));
    }
    case MCR_MODE_MAGLEV: { /* the entries after the key's */
        size_t M = mcr_snapshot_table_size(s);
        return mcr_snapshot_table_entry(s, (h % M + k) % M);
    }
    case MCR_MODE_MODULA: /* the servers after the primary's */
        return (h % n + k) % n;
    default: { /* the points after the key's, clockwise */
        size_t np = mcr_ring_point_count(r), i = mcr_ring_find_point(r, h);
        uint32_t srv;
        if (k >= np)
            return UINT32_MAX;
        ck_assert_int_eq(mcr_ring_point(r, (i + k) % np, NULL, &srv), MCR_OK);
        return srv;
    }
    }
}

/* mcr_snapshot_replicas follows each mode's documented walk (mcr_mode(3)):
 * the first distinct servers of the candidates, the primary first. */
START_TEST(replicas_follow_walks)
{
    static const mcr_mode modes[] = {MCR_MODE_SLOTS, MCR_MODE_MAGLEV, MCR_MODE_MODULA,
                                     MCR_MODE_KETAMA, MCR_MODE_DALLI};
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        pool p;
        plain_pool(&p, modes[m], 12, 1);
        if (modes[m] == MCR_MODE_MAGLEV)
            p.table = 1201;
        mcr_snapshot *s = snap_of(&p);
        for (unsigned i = 0; i < 3000; i++) {
            char key[32];
            size_t kl = key_n(key, i);
            uint32_t got[4], want[4], nw = 0;
            size_t ng = mcr_snapshot_replicas(s, key, kl, 4, got, NULL);
            want[nw++] = mcr_snapshot_locate(s, key, kl);
            for (uint32_t k = 1; nw < 4; k++) {
                uint32_t c = walk_candidate(s, key, kl, k), seen = 0;
                if (c == UINT32_MAX)
                    break;
                for (uint32_t j = 0; j < nw; j++)
                    seen |= want[j] == c;
                if (!seen)
                    want[nw++] = c;
            }
            EXPECT_MSG(ng == nw, "%s %s: %zu replicas, walk gives %u", mcr_mode_name(modes[m]),
                       key, ng, (unsigned)nw);
            for (uint32_t j = 0; j < nw && j < ng; j++)
                EXPECT_MSG(got[j] == want[j], "%s %s: replica %u is %u, walk gives %u",
                           mcr_mode_name(modes[m]), key, (unsigned)j, (unsigned)got[j],
                           (unsigned)want[j]);
        }
        mcr_snapshot_unref(s);
    }
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
    /* Weight 0 is refused but in mcrouter-wch3: by a config of another
     * mode, and by changes when they apply to a snapshot of one (they
     * record it, not knowing the mode). */
    EXPECT_INT(mcr_config_add_server(cfg, "a", 11211, 0, &err), ==, MCR_ERR_RANGE);
    EXPECT_INT(mcr_config_add_server(cfg, "b", 11211, 1, &err), ==, MCR_OK);
    mcr_snapshot *ks = NULL, *out = NULL;
    EXPECT_INT(mcr_snapshot_new(cfg, 1, &ks, &err), ==, MCR_OK);
    for (int k = 0; k < 2; k++) {
        mcr_changes *ch = mcr_changes_new();
        mcr_server_desc d = {.host = "a", .port = 11211, .weight = 0, .state = MCR_STATE_ACTIVE};
        EXPECT_INT(k == 0 ? mcr_changes_add(ch, &d, &err)
                          : mcr_changes_set_weight(ch, "b:11211", 0, &err),
                   ==, MCR_OK);
        EXPECT_INT(mcr_snapshot_apply(ks, ch, &out, &err), ==, MCR_ERR_RANGE);
        EXPECT_MSG(strstr(err.message, "outside 1..") != NULL, "%s", err.message);
        mcr_changes_free(ch);
    }
    mcr_snapshot_unref(ks);
    mcr_config *w3 = mcr_config_new();
    EXPECT_INT(mcr_config_set_mode(w3, MCR_MODE_MCROUTER_WCH3), ==, MCR_OK);
    EXPECT_INT(mcr_config_add_server(w3, "a", 11211, 0, &err), ==, MCR_OK);
    EXPECT_INT(mcr_config_add_server(w3, "b", 11211, MCR_WCH3_WEIGHT_ONE + 1, &err), ==,
               MCR_ERR_RANGE); /* above 1.0 */
    /* the mode cannot change under listed weights */
    EXPECT_INT(mcr_config_set_mode(w3, MCR_MODE_KETAMA), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_config_set_client(w3, "pylibmc", &err), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_config_set_mode(cfg, MCR_MODE_MCROUTER_WCH3), ==, MCR_ERR_INVALID);
    EXPECT_INT(mcr_config_set_client(w3, "mcrouter-wch3", &err), ==, MCR_OK);
    mcr_config_free(w3);
    mcr_changes *ch;
    mcr_server_desc d;
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
    d = (mcr_server_desc){.id = x.id, .host = x.host, .port = x.port, .weight = 1,
                          .state = MCR_STATE_ACTIVE};
    EXPECT_INT(mcr_changes_add(ch, &d, &err), ==, MCR_OK);
    mcr_snapshot *t = NULL;
    EXPECT_INT(mcr_snapshot_apply(s, ch, &t, &err), ==, MCR_ERR_RANGE);
    EXPECT(t == NULL);
    d.state = MCR_STATE_DOWN; /* not active: not in the table */
    mcr_changes_reset(ch);
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

/* ------------------------------------------------------------ suite */

static Suite *placement_snapshots_suite(void)
{
    Suite *s = suite_create("placement_snapshots");
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
    tcase_add_test(tn, replicas_follow_walks);
    suite_add_tcase(s, tn);

    TCase *te = tcase_create("edges");
    tcase_set_timeout(te, 600);
    tcase_add_checked_fixture(te, reset_hosts, NULL);
    tcase_add_test(te, edges_one_server);
    tcase_add_test(te, edges_many_servers);
    tcase_add_test(te, edges_arguments);
    suite_add_tcase(s, te);
    return s;
}

int main(void)
{
    tmpdir = tu_tmpdir("placement-snapshots-test");
    int rc = tu_run(placement_snapshots_suite());
    tu_tmpdir_free(tmpdir);
    return rc;
}
