/* SPDX-License-Identifier: BSD-3-Clause */
/* test_placement.c: Check suite of the placement modes: fixed vectors of the native ones, the design checklist on every mode, and the tests with threads (a watcher's flapping server file, a pool's bounded reads); their snapshots are test_placement_snapshots.c's. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "placement/placement_internal.h"
#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "realserver.h"
#include "test_placement_util.h"
#include "testutil.h"

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
    EXPECT_UINT(mcr_snapshot_key_slot(NULL, "a", 1), ==, MCR_NO_SERVER);
    mcr_snapshot_unref(s);
    plain_pool(&p, MCR_MODE_STABLE_KETAMA, 3, 1);
    s = snap_of(&p);
    EXPECT_UINT(mcr_snapshot_key_slot(s, "a", 1), ==, MCR_NO_SERVER);
    EXPECT_UINT(mcr_snapshot_table_size(s), ==, 0);
    EXPECT_UINT(mcr_snapshot_table_entry(s, 0), ==, MCR_NO_SERVER);
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
    EXPECT_UINT(mcr_snapshot_table_entry(s, 37), ==, MCR_NO_SERVER);
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
                mcr_changes_reset(ch);
                double m1 = moved_keys(s, down, 20000, NULL, NULL, "down");
                if (removal) {
                    mcr_server_desc d = {.id = flap.id, .host = flap.host, .port = flap.port,
                                         .weight = flap.weight,
                                         .state = MCR_STATE_ACTIVE, .id_is_default = 0};
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

    /* The tests with threads (a router's, a watcher's): the only ones a
     * TSan build runs (THREADS_CASE in test/CMakeLists.txt). */
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
